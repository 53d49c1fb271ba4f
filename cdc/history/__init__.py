"""Schema history (Debezium's "database history"): the DDL log a connector replays on restart.

:func:`history_from_config` builds a store from the connector's config, under either Debezium's
old names (``database.history.*``) or the 2.x names (``schema.history.internal.*``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdc.config import ConfigDef, ConfigField, Kind, at_least
from cdc.errors import ConfigError
from cdc.history.file import FileSchemaHistory
from cdc.history.store import (
    HistoryRecord,
    MemorySchemaHistory,
    SchemaHistory,
    TableChange,
    TableChangeType,
    parse_table_id,
    table_from_dict,
    table_id_to_string,
    table_to_dict,
)

__all__ = [
    "FileSchemaHistory",
    "HistoryRecord",
    "MemorySchemaHistory",
    "SchemaHistory",
    "TableChange",
    "TableChangeType",
    "history_config_def",
    "history_from_config",
    "parse_table_id",
    "table_from_dict",
    "table_id_to_string",
    "table_to_dict",
]

NEW, OLD = "schema.history.internal", "database.history"
CLIENTS = ("producer", "consumer")

KAFKA_CLASSES = {
    "kafka",
    "io.debezium.storage.kafka.history.KafkaSchemaHistory",
    "io.debezium.relational.history.KafkaSchemaHistory",
    "io.debezium.relational.history.KafkaDatabaseHistory",
}
FILE_CLASSES = {
    "file",
    "io.debezium.storage.file.history.FileSchemaHistory",
    "io.debezium.relational.history.FileSchemaHistory",
    "io.debezium.relational.history.FileDatabaseHistory",
}
MEMORY_CLASSES = {
    "memory",
    "io.debezium.relational.history.MemorySchemaHistory",
    "io.debezium.relational.history.MemoryDatabaseHistory",
}


def _known_history(value: Any) -> str | None:
    if value is None or str(value) in KAFKA_CLASSES | FILE_CLASSES | MEMORY_CLASSES:
        return None
    return "must be kafka, file or memory, or one of Debezium's class names for them: " + ", ".join(
        sorted(c for c in KAFKA_CLASSES | FILE_CLASSES | MEMORY_CLASSES if "." in c)
    )


def _field(suffix: str, kind: Kind = Kind.STRING, default: Any = None, **kw: Any) -> ConfigField:
    extra = tuple(kw.pop("extra_aliases", ()))
    return ConfigField(
        f"{NEW}.{suffix}" if suffix else NEW,
        kind,
        default,
        aliases=(f"{OLD}.{suffix}" if suffix else OLD, *extra),
        group="History Storage",
        **kw,
    )


def history_config_def() -> ConfigDef:
    return ConfigDef(
        [
            _field(
                "",
                doc="Where the schema history is kept: kafka, file, memory, or a Debezium "
                "class name (KafkaSchemaHistory, FileSchemaHistory, ...). Unset, the worker "
                "keeps it in a file under its state.dir, or in a topic on its own Kafka when "
                "offsets are stored in Kafka.",
                recommended=("kafka", "file", "memory"),
                validator=_known_history,
                importance="HIGH",
            ),
            _field(
                "kafka.topic",
                doc="Schema history topic (exactly one partition, infinite retention); used by "
                "this connector only.",
                importance="HIGH",
            ),
            _field(
                "kafka.bootstrap.servers",
                doc="Brokers of the schema history topic (the worker's brokers when unset).",
                importance="HIGH",
            ),
            _field(
                "kafka.recovery.poll.interval.ms",
                Kind.INT,
                100,
                validator=at_least(1),
                doc="How long each poll waits for history records while recovering.",
            ),
            _field(
                "kafka.recovery.attempts",
                Kind.INT,
                4,
                validator=at_least(1),
                doc="Empty polls in a row after which recovery of the history topic is "
                "considered complete or fails.",
            ),
            _field(
                "kafka.query.timeout.ms",
                Kind.INT,
                3000,
                validator=at_least(1),
                doc="Timeout of the admin queries about the history topic.",
            ),
            _field(
                "kafka.create.timeout.ms",
                Kind.INT,
                30000,
                validator=at_least(1),
                doc="Timeout for creating the history topic.",
            ),
            _field("file.filename", doc="Schema history file (JSON lines)."),
            _field(
                "skip.unparseable.ddl",
                Kind.BOOLEAN,
                False,
                doc="Log and skip DDL statements the parser cannot read instead of failing. "
                "Risky: the schema kept for a table can go wrong.",
            ),
            _field(
                "store.only.captured.tables.ddl",
                Kind.BOOLEAN,
                False,
                extra_aliases=(
                    f"{NEW}.store.only.monitored.tables.ddl",
                    f"{OLD}.store.only.monitored.tables.ddl",
                ),
                doc="Record DDL of captured tables only, not of every table in the server "
                "(a smaller history, but tables added to the filters later lack theirs).",
            ),
        ],
        # producer/consumer settings of the history topic's Kafka clients
        passthrough=[f"{base}.{client}." for base in (NEW, OLD) for client in CLIENTS],
    )


def _passthrough(raw: Mapping[str, Any], client: str) -> dict[str, Any]:
    """``database.history.<client>.*`` then ``schema.history.internal.<client>.*`` (the newer
    name wins), prefix removed."""
    out: dict[str, Any] = {}
    for base in (OLD, NEW):
        prefix = f"{base}.{client}."
        out.update({k[len(prefix) :]: v for k, v in raw.items() if k.startswith(prefix)})
    return out


def history_from_config(cfg: Mapping[str, Any] | Any) -> SchemaHistory:
    """A schema history from a connector config: a raw mapping, or a parsed ``cdc.config.Config``
    (its raw map is used). Without an explicit class, a Kafka topic selects Kafka and a file
    name selects a file; Debezium's default, Kafka, applies when neither is set."""
    raw: Mapping[str, Any] = getattr(cfg, "raw", cfg)
    values, problems = history_config_def().validate(raw)
    flags: dict[str, bool] = {
        "store_only_captured_tables_ddl": bool(values[f"{NEW}.store.only.captured.tables.ddl"]),
        "skip_unparseable_ddl": bool(values[f"{NEW}.skip.unparseable.ddl"]),
    }
    kind = values[NEW]
    if kind is None:
        kind = (
            "file"
            if values[f"{NEW}.file.filename"] and not values[f"{NEW}.kafka.topic"]
            else "kafka"
        )
    if kind in MEMORY_CLASSES:
        if problems:
            raise ConfigError(problems)
        return MemorySchemaHistory(**flags)
    if kind in FILE_CLASSES:
        if not values[f"{NEW}.file.filename"]:
            problems.append((f"{NEW}.file.filename", "is required for a file schema history"))
        if problems:
            raise ConfigError(problems)
        return FileSchemaHistory(values[f"{NEW}.file.filename"], **flags)
    if kind not in KAFKA_CLASSES:
        problems.append((NEW, f"unknown schema history class {kind!r}"))
        raise ConfigError(problems)
    for suffix in ("kafka.topic", "kafka.bootstrap.servers"):
        if not values[f"{NEW}.{suffix}"]:
            problems.append((f"{NEW}.{suffix}", "is required for a Kafka schema history"))
    if problems:
        raise ConfigError(problems)
    from cdc.history.kafka import KafkaSchemaHistory  # the Kafka client only when used

    return KafkaSchemaHistory(
        values[f"{NEW}.kafka.bootstrap.servers"],
        values[f"{NEW}.kafka.topic"],
        recovery_poll_interval_ms=values[f"{NEW}.kafka.recovery.poll.interval.ms"],
        recovery_attempts=values[f"{NEW}.kafka.recovery.attempts"],
        query_timeout_ms=values[f"{NEW}.kafka.query.timeout.ms"],
        create_timeout_ms=values[f"{NEW}.kafka.create.timeout.ms"],
        producer_config=_passthrough(raw, "producer"),
        consumer_config=_passthrough(raw, "consumer"),
        store_only_captured_tables_ddl=flags["store_only_captured_tables_ddl"],
        skip_unparseable_ddl=flags["skip_unparseable_ddl"],
    )
