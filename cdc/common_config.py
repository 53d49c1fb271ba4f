"""Properties every tidemark connector shares, with Debezium's names, 1.2 aliases and defaults.

Defaults differ between Debezium connectors (PostgreSQL's queue is 20240, MySQL's 8192), so
connectors call :func:`common_def` with their own defaults instead of copying the table.
"""

from __future__ import annotations

from typing import Any

from cdc.column_mappers import mapping_problems
from cdc.config import (
    ConfigDef,
    ConfigField,
    Kind,
    at_least,
    broker_default_or_positive,
    exclusive,
    one_of,
    port_number,
    valid_regex_list,
)
from cdc.converters.base import (
    AVRO_CONVERTER_CLASS,
    JSON_CONVERTER_CLASS,
    SIMPLE_CONVERTER_CLASSES,
    SettingError,
)
from cdc.converters.factory import converter_from_config
from cdc.pipeline import reselect
from cdc.schema.binary_modes import MODES as BINARY_MODES
from cdc.schema.name_adjust import MODES as NAME_MODES
from cdc.signals.config import notification_fields, read_only_problems, signal_fields

FAILURE_MODES = ("fail", "warn", "skip", "dead-letter")

#: whether a connector's database client may fall back on credentials of the worker's own
#: environment and home directory; the worker forces it off for configs written over REST
AMBIENT_CREDENTIALS = "database.ambient.credentials"


def ambient_credentials_field(fallbacks: str) -> ConfigField:
    """:data:`AMBIENT_CREDENTIALS` for a connector whose driver has credentials of its own
    (``fallbacks`` names them)."""
    return ConfigField(
        AMBIENT_CREDENTIALS,
        Kind.BOOLEAN,
        True,
        group="Connection",
        doc=f"Let the database client fall back on the worker's own credentials ({fallbacks}). "
        "The worker sets false for connectors whose endpoint was written over REST "
        "(docs/security.md).",
    )


def server_name(value: Any) -> str | None:
    """The logical server name starts every topic name and offset key; Debezium refuses one
    that does not start with a letter or '_'."""
    if value is None:
        return None
    if not value or not (value[0].isalpha() or value[0] == "_"):
        return "must start with a Latin letter or '_'"
    return None


def server_name_field(aliases: tuple[str, ...], doc: str) -> ConfigField:
    """``database.server.name``, under the names each connector family accepts for it."""
    return ConfigField(
        "database.server.name",
        aliases=aliases,
        required=True,
        validator=server_name,
        importance="HIGH",
        doc=doc,
    )


def _select_overrides_given(values: dict[str, Any], raw: dict[str, Any]) -> list[tuple[str, str]]:
    """Each table listed in ``snapshot.select.statement.overrides`` needs its statement; a
    missing one used to surface only when the snapshot reached the table."""
    out = []
    for name in values.get("snapshot.select.statement.overrides") or []:
        name = str(name).strip()
        key = f"snapshot.select.statement.overrides.{name}"
        if name and not str(raw.get(key) or "").strip():
            out.append(
                ("snapshot.select.statement.overrides", f"lists {name} but {key} is not set")
            )
    return out


def _skipped_ops(value: Any) -> str | None:
    ops = set(value or [])
    if ops <= {"c", "i", "u", "d", "t"} or ops == {"none"}:
        return None
    return "may contain only c (or i, MongoDB 1.2's spelling), u, d, t, or be none"


PASSTHROUGH = (
    # read as a whole by the transform chain, the converters and the worker's producer
    "transforms.",
    "predicates.",
    "key.converter.",
    "value.converter.",
    "header.converter.",
    # keys that carry their parameter in the name (column mappers, per-table snapshot SELECT)
    "column.truncate.to.",
    "column.mask.with.",
    "column.mask.hash.",
    "snapshot.select.statement.overrides.",
    # Kafka Connect and Debezium namespaces accepted as in Kafka Connect (unused keys are inert)
    "errors.",
    "topic.creation.",
    "driver.",
    # the Kafka signal channel's consumer (security settings)
    "signal.consumer.",
)
"""Key prefixes every connector passes through without a warning (see ``ConfigDef.suggest``:
a key in one of them is only checked against the defined keys of the same namespace). The
worker adds ``producer.override.``."""

UNSUPPORTED = frozenset(
    {
        # Debezium 2.x properties of every relational connector that tidemark does not have
        "topic.naming.strategy",
        "topic.delimiter",
        "topic.cache.size",
        "topic.heartbeat.prefix",
        "topic.transaction",
        "incremental.snapshot.watermarking.strategy",
        "incremental.snapshot.allow.schema.changes",
        "snapshot.include.collection.list",
        "snapshot.mode.class",
        "snapshot.tables.order.by.row.count",
        "snapshot.query.mode",
        "custom.metric.tags",
        "retriable.restart.connector.wait.ms",
        "include.schema.comments",
        "database.query.timeout.ms",
        "executor.shutdown.timeout.ms",
        "streaming.delay.ms",
        "schema.history.internal.store.only.captured.databases.ddl",
        "database.history.store.only.captured.databases.ddl",
    }
)
"""Names a Debezium user may carry over that have no effect here: a warning says so instead of
a misleading "did you mean"."""

GROUP_CONNECTOR = "Connector"
GROUP_FILTERS = "Filters"
GROUP_EVENTS = "Events"
GROUP_SNAPSHOT = "Snapshot"
GROUP_ADVANCED = "Advanced"
GROUP_ERRORS = "Error Handling"
GROUP_TOPICS = "Topic Creation"
GROUP_CONVERTERS = "Converters and Transforms"
GROUP_POST = "Post Processors"

CONVERTER_CLASSES = (
    JSON_CONVERTER_CLASS,
    AVRO_CONVERTER_CLASS,
    "json",
    "avro",
    *SIMPLE_CONVERTER_CLASSES,
)


def _converter(value: Any) -> str | None:
    text = None if value is None else str(value).strip()
    if text is None or text in CONVERTER_CLASSES or text.lower() in ("json", "avro"):
        return None
    return f"must be one of {', '.join(CONVERTER_CLASSES)} (no other converter is built in)"


def _filter(name: str, alias: str, doc: str) -> ConfigField:
    return filter_field(name, (alias,), doc)


def filter_field(name: str, aliases: tuple[str, ...], doc: str) -> ConfigField:
    """A list of regular expressions filtering tables or columns, under its older names."""
    return ConfigField(
        name,
        Kind.LIST,
        [],
        aliases=aliases,
        validator=valid_regex_list,
        group=GROUP_FILTERS,
        doc=doc,
    )


def resumable_chunk_field() -> ConfigField:
    """``snapshot.resumable.chunk.size``, for the connectors whose snapshots resume
    (``snapshot.resumable``; ``cdc.snapshot.driver``)."""
    return ConfigField(
        "snapshot.resumable.chunk.size",
        Kind.INT,
        10240,
        validator=at_least(1),
        group=GROUP_SNAPSHOT,
        doc="tidemark: with snapshot.resumable, the snapshot stops after every this many rows "
        "of a table read in key order until Kafka acknowledged them and their offset is "
        "stored, so a crash reads at most this many rows again (rounded up to the read "
        "batch), whatever offset.flush.interval.ms. Each stop costs a producer round trip "
        "and an offset write: smaller re-reads less after a crash, larger reads faster.",
    )


def common_def(**defaults: Any) -> ConfigDef:
    def d(name: str, fallback: Any) -> Any:
        return defaults.get(name.replace(".", "_"), fallback)

    cdef = ConfigDef(
        [
            ConfigField(
                "name",
                doc="Unique name of the connector in this worker; tasks, offsets and metrics "
                "are keyed by it.",
                importance="HIGH",
            ),
            ConfigField(
                "connector.class",
                doc="The connector to run: a short name (postgres, mysql), a Debezium class "
                "name or its simple name.",
                importance="HIGH",
            ),
            ConfigField(
                "tasks.max",
                Kind.INT,
                1,
                "Most tasks to create. These connectors read one log in order, so they always "
                "run one task; larger values are accepted and have no effect.",
                validator=at_least(1),
                importance="LOW",
            ),
            server_name_field(
                ("topic.prefix",),
                "Logical name of the captured server: the prefix of every topic name "
                "(<name>.<schema>.<table>) and the key under which offsets are stored. Must "
                "stay the same for the connector's whole life. topic.prefix is Debezium 2.x's "
                "name for the same property.",
            ),
            _filter(
                "table.include.list",
                "table.whitelist",
                "Comma-separated regular expressions matched against fully-qualified table "
                "identifiers; only matching tables are captured. Do not combine with "
                "table.exclude.list.",
            ),
            _filter(
                "table.exclude.list",
                "table.blacklist",
                "Comma-separated regular expressions matched against fully-qualified table "
                "identifiers; matching tables are not captured, all others are.",
            ),
            _filter(
                "column.include.list",
                "column.whitelist",
                "Comma-separated regular expressions matched against fully-qualified column "
                "names; only matching columns appear in change events.",
            ),
            _filter(
                "column.exclude.list",
                "column.blacklist",
                "Comma-separated regular expressions matched against fully-qualified column "
                "names; matching columns are left out of change events.",
            ),
            ConfigField(
                "message.key.columns",
                Kind.STRING,
                None,
                group=GROUP_FILTERS,
                doc="Custom event keys: '<table regex>:<col>,<col>;<table regex>:<col>' pairs. "
                "A listed table's events are keyed by these columns instead of its primary "
                "key (needed for tables without one).",
            ),
            ConfigField(
                "skipped.operations",
                Kind.LIST,
                ["t"],
                group=GROUP_FILTERS,
                doc="Operations not to emit: c (i is the MongoDB 1.2 spelling), u, d, t "
                "(truncate), or none. Default t, as in current Debezium (1.2 had no truncate "
                "events).",
                validator=_skipped_ops,
                recommended=("c", "u", "d", "t", "none"),
            ),
            ConfigField(
                "tombstones.on.delete",
                Kind.BOOLEAN,
                True,
                group=GROUP_EVENTS,
                doc="Follow each delete event with a tombstone (same key, null value) so Kafka "
                "log compaction can drop every event of the deleted row.",
            ),
            ConfigField(
                "envelope.version",
                Kind.STRING,
                "1.2",
                group=GROUP_EVENTS,
                validator=one_of("1.2", "3"),
                recommended=("1.2", "3"),
                doc="Which Debezium's change event shape to write: 1.2 (the seed's contract: "
                "boolean source.snapshot, no ts_us/ts_ns, transaction only with "
                "provide.transaction.metadata) or 3 (Debezium 3.x, as Debezium Server 3.6 "
                "writes it: envelope ts_us/ts_ns, transaction always declared, schema "
                "versions, source.sequence/ts_us/ts_ns, source.snapshot as an enum string "
                "with first/last markers, padded ZonedTimestamp fractions; MySQL FLOAT as "
                "float32; PostgreSQL origin/origin_lsn; MariaDbConnector writes 'mariadb').",
            ),
            ConfigField(
                "provide.transaction.metadata",
                Kind.BOOLEAN,
                False,
                group=GROUP_EVENTS,
                doc="Write BEGIN/END transaction events to <server>.transaction and add a "
                "transaction block (id, total and per-table order) to every change event.",
            ),
            ConfigField(
                "sanitize.field.names",
                Kind.BOOLEAN,
                None,
                group=GROUP_EVENTS,
                doc="Replace characters that Avro names cannot hold in field and schema names "
                "with '_'. Unset: true when the value converter is Avro, else false.",
            ),
            ConfigField(
                "schema.name.adjustment.mode",
                Kind.STRING,
                "avro",
                validator=one_of(*NAME_MODES),
                group=GROUP_EVENTS,
                doc="Debezium 2.x+'s setting for the record schema names (<topic>.Key, "
                ".Value, .Envelope): avro (characters Avro names cannot hold become '_'), "
                "avro_unicode (they become _uXXXX, '_' included) or none (the topic's "
                "characters as they are; not for the Avro converter). Debezium 2.x+ defaults "
                "to none, 1.x always adjusted: tidemark defaults to avro.",
            ),
            ConfigField(
                "field.name.adjustment.mode",
                Kind.STRING,
                None,
                validator=one_of("none", "avro", "avro_unicode"),
                group=GROUP_EVENTS,
                doc="Debezium 2.x+'s setting for field names: avro (characters Avro names "
                "cannot hold become '_'), avro_unicode (they become _uXXXX) or none. When "
                "set it wins over sanitize.field.names.",
            ),
            ConfigField(
                "unavailable.value.placeholder",
                Kind.STRING,
                "__debezium_unavailable_value",
                aliases=("toasted.value.placeholder",),
                group=GROUP_EVENTS,
                doc="Value emitted for a column whose value the log does not carry (an "
                "unchanged TOASTed PostgreSQL column) in text, binary and array columns. "
                "toasted.value.placeholder is the older name.",
            ),
            ConfigField(
                "connection.validation.timeout.ms",
                Kind.INT,
                60000,
                validator=at_least(1),
                group=GROUP_ADVANCED,
                doc="How long a create or update over REST (and PUT .../config/validate) may "
                "spend connecting to the database to check the config, as Debezium's "
                "connectors do; past it the request fails with a timeout error. See the "
                "worker's rest.validate.connections.",
            ),
            ConfigField(
                "heartbeat.interval.ms",
                Kind.INT,
                0,
                validator=at_least(0),
                group=GROUP_ADVANCED,
                doc="How often to emit a heartbeat record to <prefix>.<server> so offsets "
                "advance while captured tables are quiet (lets the database recycle its log). "
                "0 disables heartbeats.",
            ),
            ConfigField(
                "heartbeat.topics.prefix",
                Kind.STRING,
                "__debezium-heartbeat",
                group=GROUP_ADVANCED,
                doc="Prefix of the heartbeat topic name: <prefix>.<database.server.name>.",
            ),
            ConfigField(
                "max.queue.size",
                Kind.INT,
                d("max.queue.size", 8192),
                validator=at_least(1),
                group=GROUP_ADVANCED,
                doc="Capacity, in records, of the queue between the log reader and the Kafka "
                "writer; a full queue pauses reading (backpressure). Must exceed "
                "max.batch.size.",
            ),
            ConfigField(
                "max.batch.size",
                Kind.INT,
                d("max.batch.size", 2048),
                validator=at_least(1),
                group=GROUP_ADVANCED,
                doc="Most records taken from the queue and handed to Kafka in one batch.",
            ),
            ConfigField(
                "max.queue.size.in.bytes",
                Kind.LONG,
                0,
                validator=at_least(0),
                group=GROUP_ADVANCED,
                doc="Capacity of the queue in (approximate) bytes, on top of max.queue.size; "
                "0 means no byte limit.",
            ),
            ConfigField(
                "poll.interval.ms",
                Kind.INT,
                1000,
                validator=at_least(1),
                group=GROUP_ADVANCED,
                doc="How long the Kafka writer waits for new records when the queue is empty.",
            ),
            ConfigField(
                "snapshot.delay.ms",
                Kind.LONG,
                0,
                validator=at_least(0),
                group=GROUP_SNAPSHOT,
                doc="Wait this long after the connector starts before taking a snapshot (to "
                "let a cluster of workers settle).",
            ),
            ConfigField(
                "snapshot.fetch.size",
                Kind.INT,
                d("snapshot.fetch.size", 10240),
                validator=at_least(1),
                group=GROUP_SNAPSHOT,
                doc="Rows fetched per round trip while reading a table during a snapshot.",
            ),
            ConfigField(
                "snapshot.lock.timeout.ms",
                Kind.LONG,
                10000,
                validator=at_least(0),
                group=GROUP_SNAPSHOT,
                doc="Longest wait for the table locks a snapshot takes; the snapshot fails "
                "when they cannot be had in time.",
            ),
            ConfigField(
                "snapshot.select.statement.overrides",
                Kind.LIST,
                [],
                group=GROUP_SNAPSHOT,
                doc="Tables (fully-qualified) whose snapshot uses a custom SELECT, given in "
                "snapshot.select.statement.overrides.<table>, e.g. to skip old rows.",
            ),
            ConfigField(
                "event.processing.failure.handling.mode",
                Kind.STRING,
                "fail",
                validator=one_of(*FAILURE_MODES),
                group=GROUP_ERRORS,
                doc="What to do with an event that cannot be converted: fail stops the task "
                "(nothing is skipped), warn logs it and skips it, skip drops it silently, "
                "dead-letter writes it to errors.deadletterqueue.topic.name and goes on.",
                importance="HIGH",
            ),
            ConfigField(
                "errors.deadletterqueue.topic.name",
                Kind.STRING,
                None,
                group=GROUP_ERRORS,
                doc="Dead-letter topic for events that fail conversion (required with "
                "event.processing.failure.handling.mode=dead-letter).",
            ),
            *_post_processor_fields(),
            *signal_fields(),
            *notification_fields(),
            ConfigField(
                "decimal.handling.mode",
                Kind.STRING,
                "precise",
                validator=one_of("precise", "double", "string"),
                group=GROUP_EVENTS,
                doc="How DECIMAL/NUMERIC values are emitted: precise as Connect Decimal bytes "
                "(exact), double as a float (may lose precision), string as plain text.",
            ),
            ConfigField(
                "time.precision.mode",
                Kind.STRING,
                d("time.precision.mode", "adaptive"),
                validator=one_of("adaptive", "adaptive_time_microseconds", "connect"),
                group=GROUP_EVENTS,
                doc="How temporal values are emitted: adaptive picks milli/micro/nano types "
                "from the column's precision, adaptive_time_microseconds does the same but "
                "always uses microseconds for TIME, connect uses Kafka Connect's own logical "
                "types (millisecond precision).",
            ),
            ConfigField(
                "binary.handling.mode",
                Kind.STRING,
                "bytes",
                validator=one_of(*BINARY_MODES),
                group=GROUP_EVENTS,
                doc="How binary columns are emitted: bytes, or a base64, base64-url-safe or "
                "hex string.",
            ),
            ConfigField(
                "column.propagate.source.type",
                Kind.LIST,
                [],
                validator=valid_regex_list,
                group=GROUP_EVENTS,
                doc="Regular expressions of columns (<schema>.<table>.<column>) whose schema "
                "gets __debezium.source.column.type/length/scale parameters with the original "
                "column type.",
            ),
            ConfigField(
                "datatype.propagate.source.type",
                Kind.LIST,
                [],
                validator=valid_regex_list,
                group=GROUP_EVENTS,
                doc="The same parameters for columns chosen by their database type: regular "
                "expressions of <schema>.<table>.<type name> (e.g. .+\\.VARCHAR), matched "
                "ignoring case.",
            ),
            ConfigField(
                "topic.creation.enable",
                Kind.BOOLEAN,
                True,
                group=GROUP_TOPICS,
                doc="Create missing topics before the first write, with the "
                "topic.creation.default.* settings.",
            ),
            ConfigField(
                "topic.creation.default.partitions",
                Kind.INT,
                1,
                validator=broker_default_or_positive,
                group=GROUP_TOPICS,
                doc="Partitions of topics the connector creates.",
            ),
            ConfigField(
                "topic.creation.default.replication.factor",
                Kind.INT,
                1,
                validator=broker_default_or_positive,
                group=GROUP_TOPICS,
                doc="Replication factor of topics the connector creates.",
            ),
            ConfigField(
                "topic.creation.default.cleanup.policy",
                Kind.STRING,
                "delete",
                recommended=("delete", "compact", "compact,delete"),
                group=GROUP_TOPICS,
                doc="cleanup.policy of topics the connector creates.",
            ),
            ConfigField(
                "key.converter",
                Kind.CLASS,
                None,
                validator=_converter,
                recommended=CONVERTER_CLASSES,
                group=GROUP_CONVERTERS,
                doc="Serialises event keys: JsonConverter (default), AvroConverter with a "
                "schema registry, or one of Kafka's StringConverter, ByteArrayConverter, "
                "Short/Integer/Long/Float/Double/BooleanConverter; its own settings go in "
                "key.converter.*.",
            ),
            ConfigField(
                "value.converter",
                Kind.CLASS,
                None,
                validator=_converter,
                recommended=CONVERTER_CLASSES,
                group=GROUP_CONVERTERS,
                doc="Serialises event values: JsonConverter (default), AvroConverter with a "
                "schema registry, or one of Kafka's StringConverter, ByteArrayConverter, "
                "Short/Integer/Long/Float/Double/BooleanConverter; its own settings go in "
                "value.converter.*.",
            ),
            ConfigField(
                "transforms",
                Kind.LIST,
                [],
                group=GROUP_CONVERTERS,
                doc="Aliases of the single message transforms applied in order; each is "
                "configured under transforms.<alias>.* (type, predicate, negate, ...).",
            ),
            ConfigField(
                "predicates",
                Kind.LIST,
                [],
                group=GROUP_CONVERTERS,
                doc="Aliases of predicates that transforms can be conditioned on; each is "
                "configured under predicates.<alias>.*.",
            ),
        ],
        passthrough=PASSTHROUGH,
    )
    cdef.unsupported = set(UNSUPPORTED)
    cdef.checks.append(
        exclusive(
            ("table.include.list", "table.exclude.list"),
            ("column.include.list", "column.exclude.list"),
        )
    )
    cdef.checks.append(_queue_rules)
    cdef.checks.append(_converter_settings)
    cdef.checks.append(mapping_problems)
    cdef.checks.append(_select_overrides_given)
    cdef.checks.append(read_only_problems)
    cdef.checks.append(reselect.config_problems)
    cdef.passthrough_rules.append(reselect.is_post_processor_key)
    return cdef


def _post_processor_fields() -> list[ConfigField]:
    """``post.processors`` and the reselect post-processor's keys under the alias Debezium's
    documentation uses (another alias listed in ``post.processors`` takes the same keys)."""
    alias = reselect.DEFAULT_ALIAS
    under = f" (keys under {alias}. apply to the alias {alias}; another alias takes them "
    under += "under its own name)"
    return [
        ConfigField(
            "post.processors",
            Kind.LIST,
            [],
            group=GROUP_POST,
            doc="Aliases of Debezium post processors applied to each event before it is "
            "queued; each is configured under <alias>.*. tidemark has the reselect columns "
            f"post processor ({reselect.RESELECT_CLASS}), e.g. post.processors={alias}.",
            recommended=(alias,),
        ),
        ConfigField(
            f"{alias}.type",
            Kind.STRING,
            None,
            group=GROUP_POST,
            doc="Class of the post processor named by the alias: "
            f"{reselect.RESELECT_CLASS} re-reads, by key and on a separate connection, the "
            "columns an event could not carry (unchanged TOASTed values, MINIMAL/NOBLOB row "
            "images) and, if asked, NULL columns; the values read are the row's current ones, "
            "possibly newer than the event" + under + ".",
            recommended=(reselect.RESELECT_CLASS,),
        ),
        ConfigField(
            f"{alias}.reselect.columns.include.list",
            Kind.LIST,
            [],
            validator=valid_regex_list,
            group=GROUP_POST,
            doc="Regular expressions of the columns to reselect, matched whole and "
            "case-insensitively against <schema or database>.<table>:<column>; empty: every "
            "column. Do not combine with the exclude list" + under + ".",
        ),
        ConfigField(
            f"{alias}.reselect.columns.exclude.list",
            Kind.LIST,
            [],
            validator=valid_regex_list,
            group=GROUP_POST,
            doc="Regular expressions of columns never reselected, in the form "
            "<schema or database>.<table>:<column>" + under + ".",
        ),
        ConfigField(
            f"{alias}.reselect.unavailable.values",
            Kind.BOOLEAN,
            True,
            group=GROUP_POST,
            doc="Reselect the selected columns whose value the event could not carry (the "
            "unavailable-value placeholder)" + under + ".",
        ),
        ConfigField(
            f"{alias}.reselect.null.values",
            Kind.BOOLEAN,
            True,
            group=GROUP_POST,
            doc="Reselect the selected columns whose value in the event's after image is NULL "
            "(one more query for rows with NULLs; narrow it with the include list)" + under + ".",
        ),
        ConfigField(
            f"{alias}.reselect.use.event.key",
            Kind.BOOLEAN,
            False,
            group=GROUP_POST,
            doc="Read the row by the event key's columns (message.key.columns) instead of the "
            "table's primary key, e.g. for tables without one" + under + ".",
        ),
    ]


def _converter_settings(values: dict[str, Any], raw: dict[str, Any]) -> list[tuple[str, str]]:
    """The converters' own settings (``value.converter.schemas.enable``, the Avro converter's
    registry URL...), checked by building each converter as the task will: otherwise a typo
    there passes validation and fails the task at its start. Building one opens nothing."""
    out = []
    for side in ("key", "value"):
        if _converter(values.get(f"{side}.converter")) is not None:
            continue  # an unknown class: its field's validator says so
        try:
            converter = converter_from_config(raw, is_key=side == "key")
        except SettingError as exc:
            out.append((exc.key, exc.reason))
            continue
        close = getattr(converter, "close", None)
        if close is not None:
            close()
    return out


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
            _filter(
                "schema.include.list",
                "schema.whitelist",
                "Comma-separated regular expressions of schema names; only tables in matching "
                "schemas are captured. Do not combine with schema.exclude.list.",
            ),
            _filter(
                "schema.exclude.list",
                "schema.blacklist",
                "Comma-separated regular expressions of schema names whose tables are not "
                "captured.",
            ),
        ]
    )
    cdef.checks.append(exclusive(("schema.include.list", "schema.exclude.list")))
    return cdef


def database_filter_fields() -> ConfigDef:
    cdef = ConfigDef(
        [
            _filter(
                "database.include.list",
                "database.whitelist",
                "Comma-separated regular expressions of database names; only tables in "
                "matching databases are captured. Do not combine with database.exclude.list.",
            ),
            _filter(
                "database.exclude.list",
                "database.blacklist",
                "Comma-separated regular expressions of database names whose tables are not "
                "captured.",
            ),
        ]
    )
    cdef.checks.append(exclusive(("database.include.list", "database.exclude.list")))
    return cdef


def connection_fields(
    server: str, default_port: int, user_doc: str, password_doc: str | None = None
) -> list[ConfigField]:
    """``database.hostname``, ``database.port``, ``database.user`` and ``database.password`` of
    a connector that reaches its database over TCP: the same keys, kinds and checks for every
    connector (Debezium's names); only what the server is and what the user needs differ."""
    return [
        ConfigField(
            "database.hostname",
            Kind.STRING,
            required=True,
            importance="HIGH",
            group="Connection",
            doc=f"Host name or address of the {server}.",
        ),
        ConfigField(
            "database.port",
            Kind.INT,
            default_port,
            validator=port_number,
            importance="HIGH",
            group="Connection",
            doc=f"Port of the {server}.",
        ),
        ConfigField(
            "database.user",
            Kind.STRING,
            required=True,
            importance="HIGH",
            group="Connection",
            doc=user_doc,
        ),
        ConfigField(
            "database.password",
            Kind.PASSWORD,
            None,
            importance="HIGH",
            group="Connection",
            doc=password_doc
            or "Password of database.user (a ${env:...} or ${file:...} placeholder keeps it "
            "out of stored configs).",
        ),
    ]
