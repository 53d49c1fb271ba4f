"""Properties every tidemark connector shares, with Debezium's names, 1.2 aliases and defaults.

Defaults differ between Debezium connectors (PostgreSQL's queue is 20240, MySQL's 8192), so
connectors call :func:`common_def` with their own defaults instead of copying the table.
"""

from __future__ import annotations

from typing import Any

from cdc.config import (
    ConfigDef,
    ConfigField,
    Kind,
    at_least,
    exclusive,
    one_of,
    valid_regex_list,
)

FAILURE_MODES = ("fail", "warn", "skip", "dead-letter")


def _server_name(value: Any) -> str | None:
    if value is None:
        return None
    if not value or not (value[0].isalpha() or value[0] == "_"):
        return "must start with a Latin letter or '_'"
    return None


def _skipped_ops(value: Any) -> str | None:
    ops = set(value or [])
    if ops <= {"c", "u", "d", "t"} or ops == {"none"}:
        return None
    return "may contain only c, u, d, t, or be none"


def common_def(**defaults: Any) -> ConfigDef:
    def d(name: str, fallback: Any) -> Any:
        return defaults.get(name.replace(".", "_"), fallback)

    cdef = ConfigDef(
        [
            ConfigField("name", doc="Unique connector name."),
            ConfigField("connector.class", doc="Connector class or short name."),
            ConfigField("tasks.max", Kind.INT, 1, "Ignored by single-task connectors."),
            ConfigField(
                "database.server.name",
                aliases=("topic.prefix",),
                required=True,
                validator=_server_name,
                doc="Logical name: topic prefix and offsets partition.",
                importance="HIGH",
            ),
            ConfigField(
                "table.include.list",
                Kind.LIST,
                [],
                aliases=("table.whitelist",),
                validator=valid_regex_list,
                group="Filters",
            ),
            ConfigField(
                "table.exclude.list",
                Kind.LIST,
                [],
                aliases=("table.blacklist",),
                validator=valid_regex_list,
                group="Filters",
            ),
            ConfigField(
                "column.include.list",
                Kind.LIST,
                [],
                aliases=("column.whitelist",),
                validator=valid_regex_list,
                group="Filters",
            ),
            ConfigField(
                "column.exclude.list",
                Kind.LIST,
                [],
                aliases=("column.blacklist",),
                validator=valid_regex_list,
                group="Filters",
            ),
            ConfigField("message.key.columns", Kind.STRING, None, group="Filters"),
            ConfigField(
                "skipped.operations",
                Kind.LIST,
                ["t"],
                group="Filters",
                doc="Operations not to emit: c, u, d, t (truncate), or none. Default t, as in "
                "current Debezium (1.2 had no truncate events).",
                validator=_skipped_ops,
            ),
            ConfigField("tombstones.on.delete", Kind.BOOLEAN, True),
            ConfigField("provide.transaction.metadata", Kind.BOOLEAN, False),
            ConfigField("sanitize.field.names", Kind.BOOLEAN, None),
            ConfigField("heartbeat.interval.ms", Kind.INT, 0, validator=at_least(0)),
            ConfigField("heartbeat.topics.prefix", Kind.STRING, "__debezium-heartbeat"),
            ConfigField(
                "max.queue.size", Kind.INT, d("max.queue.size", 8192), validator=at_least(1)
            ),
            ConfigField(
                "max.batch.size", Kind.INT, d("max.batch.size", 2048), validator=at_least(1)
            ),
            ConfigField("max.queue.size.in.bytes", Kind.LONG, 0, validator=at_least(0)),
            ConfigField("poll.interval.ms", Kind.INT, 1000, validator=at_least(1)),
            ConfigField("snapshot.delay.ms", Kind.LONG, 0, validator=at_least(0)),
            ConfigField(
                "snapshot.fetch.size",
                Kind.INT,
                d("snapshot.fetch.size", 10240),
                validator=at_least(1),
            ),
            ConfigField("snapshot.lock.timeout.ms", Kind.LONG, 10000, validator=at_least(0)),
            ConfigField("snapshot.select.statement.overrides", Kind.LIST, []),
            ConfigField(
                "event.processing.failure.handling.mode",
                Kind.STRING,
                "fail",
                validator=one_of(*FAILURE_MODES),
            ),
            ConfigField(
                "errors.deadletterqueue.topic.name",
                Kind.STRING,
                None,
                doc="Dead-letter topic for events that fail conversion.",
            ),
            ConfigField(
                "decimal.handling.mode",
                Kind.STRING,
                "precise",
                validator=one_of("precise", "double", "string"),
            ),
            ConfigField(
                "time.precision.mode",
                Kind.STRING,
                d("time.precision.mode", "adaptive"),
                validator=one_of("adaptive", "adaptive_time_microseconds", "connect"),
            ),
            ConfigField(
                "binary.handling.mode",
                Kind.STRING,
                "bytes",
                validator=one_of("bytes", "base64", "hex"),
            ),
            ConfigField(
                "column.propagate.source.type",
                Kind.LIST,
                [],
                aliases=("datatype.propagate.source.type",),
            ),
            ConfigField("topic.creation.enable", Kind.BOOLEAN, True),
            ConfigField("topic.creation.default.partitions", Kind.INT, 1),
            ConfigField("topic.creation.default.replication.factor", Kind.INT, 1),
            ConfigField("topic.creation.default.cleanup.policy", Kind.STRING, "delete"),
        ]
    )
    cdef.checks.append(
        exclusive(
            ("table.include.list", "table.exclude.list"),
            ("column.include.list", "column.exclude.list"),
        )
    )
    cdef.checks.append(_queue_rules)
    return cdef


def _queue_rules(values: dict[str, Any], raw: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    if (values.get("max.queue.size") or 0) <= (values.get("max.batch.size") or 0):
        out.append(("max.queue.size", "must be larger than max.batch.size"))
    mode = values.get("event.processing.failure.handling.mode")
    if mode == "dead-letter" and not values.get("errors.deadletterqueue.topic.name"):
        out.append(
            (
                "errors.deadletterqueue.topic.name",
                "is required when event.processing.failure.handling.mode=dead-letter",
            )
        )
    return out


def schema_filter_fields() -> ConfigDef:
    cdef = ConfigDef(
        [
            ConfigField(
                "schema.include.list",
                Kind.LIST,
                [],
                aliases=("schema.whitelist",),
                validator=valid_regex_list,
                group="Filters",
            ),
            ConfigField(
                "schema.exclude.list",
                Kind.LIST,
                [],
                aliases=("schema.blacklist",),
                validator=valid_regex_list,
                group="Filters",
            ),
        ]
    )
    cdef.checks.append(exclusive(("schema.include.list", "schema.exclude.list")))
    return cdef


def database_filter_fields() -> ConfigDef:
    cdef = ConfigDef(
        [
            ConfigField(
                "database.include.list",
                Kind.LIST,
                [],
                aliases=("database.whitelist",),
                validator=valid_regex_list,
                group="Filters",
            ),
            ConfigField(
                "database.exclude.list",
                Kind.LIST,
                [],
                aliases=("database.blacklist",),
                validator=valid_regex_list,
                group="Filters",
            ),
        ]
    )
    cdef.checks.append(exclusive(("database.include.list", "database.exclude.list")))
    return cdef
