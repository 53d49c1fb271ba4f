"""The configuration keys of signals and incremental snapshots (Debezium's names)."""

from __future__ import annotations

from typing import Any

from cdc.config import ConfigField, Kind, at_least

GROUP_SIGNALS = "Signals"
CHANNELS = ("source", "kafka", "rest", "file")


def _channels(value: Any) -> str | None:
    unknown = [c for c in value or [] if c not in CHANNELS]
    if unknown:
        return f"unknown channel(s) {', '.join(unknown)}; known: {', '.join(CHANNELS)}"
    return None


def signal_fields() -> list[ConfigField]:
    return [
        ConfigField(
            "signal.data.collection",
            Kind.STRING,
            None,
            group=GROUP_SIGNALS,
            doc="The signal table (schema.table for PostgreSQL, db.table for MySQL/MariaDB), "
            "with columns id, type, data: a row inserted there is a signal (execute-snapshot, "
            "stop-snapshot, pause-snapshot, resume-snapshot, log), and the incremental "
            "snapshot writes its watermarks there. It must be captured (table.include.list).",
        ),
        ConfigField(
            "signal.enabled.channels",
            Kind.LIST,
            ["source"],
            validator=_channels,
            group=GROUP_SIGNALS,
            doc="Where signals are read from: source (the signal table), kafka "
            "(signal.kafka.topic), rest (POST /connectors/{name}/signals), file "
            "(signal.file). Every channel "
            "needs signal.data.collection: the incremental snapshot's watermarks go there.",
        ),
        ConfigField(
            "signal.kafka.topic",
            Kind.STRING,
            None,
            group=GROUP_SIGNALS,
            doc="The signal topic of the kafka channel (default <topic.prefix>-signal); a "
            'message keyed by topic.prefix with value {"type", "data"} is a signal.',
        ),
        ConfigField(
            "signal.kafka.bootstrap.servers",
            Kind.STRING,
            None,
            group=GROUP_SIGNALS,
            doc="The Kafka cluster of the signal topic; signal.consumer.* configures the "
            "consumer further (security).",
        ),
        ConfigField(
            "signal.kafka.groupId",
            Kind.STRING,
            "kafka-signal",
            group=GROUP_SIGNALS,
            doc="The consumer group of the signal topic's reader.",
        ),
        ConfigField(
            "signal.kafka.poll.timeout.ms",
            Kind.INT,
            100,
            validator=at_least(1),
            group=GROUP_SIGNALS,
            doc="How long one poll of the signal topic waits.",
        ),
        ConfigField(
            "signal.file",
            Kind.STRING,
            "file-signals.txt",
            group=GROUP_SIGNALS,
            doc="The file of the file channel: one JSON signal per line, emptied once read.",
        ),
        ConfigField(
            "signal.poll.interval.ms",
            Kind.LONG,
            5000,
            validator=at_least(1),
            group=GROUP_SIGNALS,
            doc="How often the file channel reads signal.file.",
        ),
        ConfigField(
            "read.only",
            Kind.BOOLEAN,
            False,
            group=GROUP_SIGNALS,
            doc="Read-only incremental snapshots: no watermark rows are written to the signal "
            "table (nothing at all is written to the database); the chunk reads are placed in "
            "the log by the stream's own positions (PostgreSQL pg_current_snapshot() and WAL "
            "positions, MySQL/MariaDB GTIDs; MySQL needs gtid_mode=ON). Signals then come "
            "from the kafka, file or rest channels only (signal.enabled.channels without "
            "source). PostgreSQL and MySQL/MariaDB only.",
        ),
        ConfigField(
            "incremental.snapshot.chunk.size",
            Kind.INT,
            1024,
            validator=at_least(1),
            group=GROUP_SIGNALS,
            doc="Rows per chunk of an incremental snapshot: fewer queries when larger, more "
            "memory for the chunk buffer.",
        ),
    ]


def read_only_problems(values: dict[str, Any], raw: dict[str, Any]) -> list[tuple[str, str]]:
    """``read.only=true`` writes nothing, so no signal can come from the signal table."""
    if not values.get("read.only"):
        return []
    channels = list(values.get("signal.enabled.channels") or ["source"])
    if "source" in channels:
        return [
            (
                "read.only",
                "read.only=true cannot read signals from the source channel (the signal "
                "table): read-only snapshots write nothing to the database, so remove source "
                "from signal.enabled.channels and send signals through kafka, file or rest",
            )
        ]
    return []


def notification_fields() -> list[ConfigField]:
    return [
        ConfigField(
            "notification.enabled.channels",
            Kind.LIST,
            [],
            validator=_notification_channels,
            group=GROUP_SIGNALS,
            doc="Where incremental snapshot notifications go: log, sink "
            "(notification.sink.topic.name).",
        ),
        ConfigField(
            "notification.sink.topic.name",
            Kind.STRING,
            None,
            group=GROUP_SIGNALS,
            doc="The topic of the sink notification channel.",
        ),
    ]


def _notification_channels(value: Any) -> str | None:
    unknown = [c for c in value or [] if c not in ("log", "sink")]
    if unknown:
        return f"unknown channel(s) {', '.join(unknown)}; known: log, sink"
    return None
