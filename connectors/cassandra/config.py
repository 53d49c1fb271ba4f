"""The Cassandra connector's configuration: Debezium's Cassandra key names where they exist
(``cassandra.hosts``, ``cassandra.port``, ``cassandra.config``, ``snapshot.consistency``,
``commit.log.relocation.dir``, ``commit.log.transfer.class``, ``cdc.dir.poll.interval.ms``,
``kafka.topic.prefix`` as an alias of the topic prefix), on top of the core's keys."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cdc.common_config import common_def, filter_field, resumable_chunk_field, server_name_field
from cdc.config import Config, ConfigDef, ConfigField, Kind, at_least, one_of, port_number
from cdc.errors import ConfigError

GROUP = "Cassandra"
CONSISTENCY_LEVELS = (
    "ALL",
    "ONE",
    "TWO",
    "THREE",
    "QUORUM",
    "LOCAL_QUORUM",
    "EACH_QUORUM",
    "LOCAL_ONE",
)
SNAPSHOT_MODES = ("initial", "always", "never")

#: Debezium's Cassandra agent names its column filter field.exclude.list (<ks>.<table>.<col>)
_COLUMN_EXCLUDE = filter_field(
    "column.exclude.list",
    ("column.blacklist", "field.exclude.list"),
    "Comma-separated regular expressions matched against fully-qualified column names "
    "(<keyspace>.<table>.<column>); matching columns are left out of change events. "
    "field.exclude.list is Debezium's Cassandra name for it.",
)

CONFIG_DEF = common_def().extend(
    ConfigDef(
        [
            _COLUMN_EXCLUDE,
            ConfigField(
                "cassandra.hosts",
                Kind.LIST,
                ["127.0.0.1"],
                group=GROUP,
                importance="HIGH",
                doc="Contact points of the cluster (the schema and the snapshot are read "
                "through them); the commit logs are those of the node this worker runs on.",
            ),
            server_name_field(
                ("topic.prefix", "kafka.topic.prefix"),
                "Logical name of the cluster: the prefix of every topic name "
                "(<name>.<keyspace>.<table>) and the key offsets are stored under. "
                "kafka.topic.prefix is Debezium's Cassandra name for it, topic.prefix 2.x's.",
            ),
            ConfigField(
                "cassandra.port",
                Kind.INT,
                9042,
                validator=port_number,
                group=GROUP,
                doc="CQL port.",
            ),
            ConfigField("cassandra.username", group=GROUP, doc="CQL user (optional)."),
            ConfigField(
                "cassandra.password", Kind.PASSWORD, group=GROUP, doc="CQL password (optional)."
            ),
            ConfigField(
                "cassandra.config",
                group=GROUP,
                importance="HIGH",
                doc="Path of the node's cassandra.yaml: its cdc_raw_directory is where the "
                "connector reads commit log segments (the node's own files: one worker per "
                "node).",
            ),
            ConfigField(
                "cassandra.cdc.raw.dir",
                group=GROUP,
                doc="The node's cdc_raw directory, when cassandra.config is not given or "
                "should be overridden.",
            ),
            ConfigField(
                "cassandra.ssl.enabled",
                Kind.BOOLEAN,
                False,
                group=GROUP,
                doc="Connect to the cluster over TLS, as cassandra.ssl.config.path describes.",
            ),
            ConfigField(
                "cassandra.ssl.config.path",
                group=GROUP,
                doc="The SSL config file (Java properties: keyStore.location/.password/.type, "
                "trustStore.location/.password/.type; types PKCS12 or PEM, JKS must be "
                "converted); see docs/cassandra.md.",
            ),
            ConfigField(
                "cassandra.connect.timeout.ms",
                Kind.INT,
                10000,
                validator=at_least(100),
                group=GROUP,
                doc="Time allowed to connect to the cluster before the task fails.",
            ),
            ConfigField(
                "snapshot.mode",
                Kind.STRING,
                "initial",
                validator=one_of(*SNAPSHOT_MODES),
                group="Snapshot",
                doc="initial: snapshot each CDC table once (a table whose line is removed "
                "from the snapshot offset file is snapshotted again); always: snapshot every "
                "CDC table on each start and tables enabled for CDC while running; never: "
                "commit logs only.",
            ),
            ConfigField(
                "decimal.handling.mode",
                Kind.STRING,
                "string",
                validator=one_of("string", "double", "precise"),
                group="Events",
                doc="How decimal columns are emitted (Debezium's Cassandra key): string as "
                "plain text (exact; tidemark's default), double as a float (Debezium's "
                "default; may lose digits), precise as Debezium's VariableScaleDecimal.",
            ),
            ConfigField(
                "varint.handling.mode",
                Kind.STRING,
                "string",
                validator=one_of("string", "long", "precise"),
                group="Events",
                doc="How varint columns are emitted (Debezium's Cassandra key): string as "
                "text (tidemark's default), long as INT64 (Debezium's default; a value "
                "outside 64 bits fails the event through event.processing.failure."
                "handling.mode, where Debezium wraps it), precise as a Connect Decimal of "
                "scale 0.",
            ),
            ConfigField(
                "range.delete.handling.mode",
                Kind.STRING,
                "warn",
                validator=one_of("warn", "skip", "emit", "fail"),
                group="Events",
                doc="Range deletes (DELETE ... WHERE <clustering column> > ...), which the "
                "seed's connector does not capture. warn (default): not emitted, counted in "
                "number-of-unsupported-changes, the first of each table logged; skip: the "
                "same without the log line; emit: a delete event whose after carries the "
                "_range_start/_range_end bounds (every event's after then has the two fields, "
                "null but for a range delete; consumers must read them, as a range delete "
                "has null clustering columns like a partition delete); fail: the task stops "
                "at the first one, its offset before it.",
            ),
            ConfigField(
                "snapshot.consistency",
                Kind.STRING,
                "ALL",
                validator=one_of(*CONSISTENCY_LEVELS),
                group="Snapshot",
                doc="Consistency level of the snapshot's SELECTs (ALL: every replica must "
                "answer; ONE trades consistency for availability).",
            ),
            ConfigField(
                "snapshot.resumable",
                Kind.BOOLEAN,
                True,
                group="Snapshot",
                doc="tidemark: a snapshot killed half-way resumes at the partition of the "
                "last acknowledged batch (tables read whole are skipped; that partition is "
                "read again) while cdc_raw still holds its start position. false: an "
                "interrupted snapshot reads every table again.",
            ),
            resumable_chunk_field(),
            ConfigField(
                "snapshot.fetch.size",
                Kind.INT,
                5000,
                validator=at_least(1),
                group="Snapshot",
                doc="Rows per page of the snapshot's SELECTs (5000: the Java driver's page "
                "size, which Debezium's agent reads with; the next page is requested while "
                "one is being emitted).",
            ),
            ConfigField(
                "offset.backing.store.dir",
                group="Snapshot",
                doc="Directory of snapshot_offset.properties, the per-table snapshot record "
                "(one '<keyspace>.<table>=<time>' line per snapshotted table; remove a line "
                "to snapshot that table again on the next start). Default: the worker's "
                "offset directory is not known here, so the record is kept under "
                "~/.local/state/tidemark/cassandra/<server name>.",
            ),
            ConfigField(
                "cdc.dir.poll.interval.ms",
                Kind.INT,
                1000,
                validator=at_least(10),
                group=GROUP,
                doc="How often cdc_raw and the durable offset of the open segment are read.",
            ),
            ConfigField(
                "schema.refresh.interval.ms",
                Kind.INT,
                1000,
                validator=at_least(100),
                group=GROUP,
                doc="How often system_schema is read again: tables enabled for CDC and "
                "schema changes are picked up within this time (the seed's schema change "
                "listener; under 1 s by default).",
            ),
            ConfigField(
                "inconsistent.schema.handling.mode",
                Kind.STRING,
                "warn",
                validator=one_of("fail", "warn", "skip"),
                group="Error Handling",
                doc="A mutation for a table id system_schema does not know (a dropped table; "
                "Cassandra's own commit log reader skips these): warn logs file and position "
                "and skips it, skip drops it silently, fail stops the task at it. Mutations "
                "that do not decode follow event.processing.failure.handling.mode.",
            ),
            ConfigField(
                "commit.log.transfer.class",
                Kind.STRING,
                "delete",
                group=GROUP,
                doc="What happens to a segment once every event in it is in Kafka: 'delete' "
                "(default), 'relocate' (move it to commit.log.relocation.dir), 'keep', or a "
                "'module:Class' implementing the CommitLogTransfer protocol "
                "(connectors.cassandra.transfer).",
            ),
            ConfigField(
                "commit.log.relocation.dir",
                group=GROUP,
                doc="Where processed segments go with commit.log.transfer.class=relocate.",
            ),
        ]
    )
)


CONFIG_DEF.unsupported |= {
    # Debezium Cassandra's standalone-agent settings: tidemark runs the connector in its worker
    "connector.name",
    "http.port",
    "latest.commit.log.only",
    "max.offset.flush.size",
    # Debezium 2.x+'s agent: how it schedules its own queues and commit log reading
    "num.of.change.event.queues",
    "event.order.guarantee.mode",
    "cassandra.node.id",
    "snapshot.scan.interval.ms",
    "commit.log.relocation.dir.poll.interval.ms",
    "commit.log.error.reprocessing.enabled",
}
CONFIG_DEF.inert.update(
    {
        "binary.handling.mode": "a blob is BYTES (base64 text in JSON), as in Debezium's "
        "Cassandra connector",
        "time.precision.mode": "timestamp is milliseconds, date days and time nanoseconds, "
        "whatever the mode (docs/cassandra.md)",
    }
)
CONFIG_DEF.unsupported_prefixes["cassandra.driver.config.file"] = (
    "Debezium 2.x+'s agent takes its contact points, credentials and TLS from the Java "
    "driver's config file; here they are cassandra.hosts, cassandra.port, "
    "cassandra.username/cassandra.password and cassandra.ssl.* (docs/cassandra.md)"
)
CONFIG_DEF.unsupported_prefixes["commit.log.real.time.processing."] = (
    "the live segment is always read up to its durable offset, every "
    "cdc.dir.poll.interval.ms (Debezium 2.x+'s real-time mode)"
)
CONFIG_DEF.unsupported_prefixes["commit.log.marked.complete.poll.interval.ms"] = (
    "the live segment's index is read every cdc.dir.poll.interval.ms"
)
CONFIG_DEF.unsupported_prefixes["commit.log.post.processing.enabled"] = (
    "what happens to a delivered segment is commit.log.transfer.class (keep leaves it)"
)
CONFIG_DEF.unsupported_prefixes["kafka.producer."] = (
    "Debezium's Cassandra agent had its own producer; here events go through the worker's "
    "producer, configured in the worker config or per connector with producer.override.<key>"
)
CONFIG_DEF.unsupported_prefixes["offset.flush.interval.ms"] = (
    "offsets are flushed by the worker: set offset.flush.interval.ms in the worker config"
)


@CONFIG_DEF.check
def _ssl_problems(values: dict[str, Any], raw: dict[str, Any]) -> list[tuple[str, str]]:
    if values.get("cassandra.ssl.enabled") and not values.get("cassandra.ssl.config.path"):
        return [
            (
                "cassandra.ssl.config.path",
                "is required with cassandra.ssl.enabled=true: the file naming the trust store "
                "(and key store) to connect with",
            )
        ]
    return []


@CONFIG_DEF.check
def _transfer_problems(values: dict[str, Any], raw: dict[str, Any]) -> list[tuple[str, str]]:
    """Checked with the rest of the config rather than when the task builds the transfer: a
    misspelt 'delete' would otherwise pass validation and stop the task at its start."""
    name = str(values.get("commit.log.transfer.class") or "")
    if name == "relocate" and not values.get("commit.log.relocation.dir"):
        return [
            ("commit.log.relocation.dir", "is required with commit.log.transfer.class=relocate")
        ]
    module, sep, cls = name.partition(":")
    if name in ("delete", "keep", "relocate") or (sep and module.strip() and cls.strip()):
        return []
    return [
        (
            "commit.log.transfer.class",
            f"must be delete, relocate, keep, or a 'module:Class' of your own; got {name!r}",
        )
    ]


@CONFIG_DEF.check
def _record_dir_problems(values: dict[str, Any], raw: dict[str, Any]) -> list[tuple[str, str]]:
    """Without offset.backing.store.dir the snapshot record goes to a directory named after
    the server: a name with a '/' would put it anywhere (``a/../../..``)."""
    name = values.get("database.server.name")
    if values.get("offset.backing.store.dir") or not isinstance(name, str):
        return []
    if not is_plain_name(name):
        return [
            (
                "database.server.name",
                "may not contain '/' or '\\' when offset.backing.store.dir is not set (the "
                "snapshot record is kept in a directory named after it); set "
                "offset.backing.store.dir",
            )
        ]
    return []


def is_plain_name(name: str) -> bool:
    """``name`` is one path component, the same on every platform."""
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0")


def parse_config(raw: Mapping[str, Any]) -> Config:
    cfg = CONFIG_DEF.parse(raw)
    cdc_raw_dir(cfg)  # fail at startup, naming the key
    return cfg


def cdc_raw_dir(cfg: Config) -> Path:
    """cassandra.cdc.raw.dir, else cdc_raw_directory from the node's cassandra.yaml."""
    if cfg["cassandra.cdc.raw.dir"]:
        return Path(cfg["cassandra.cdc.raw.dir"])
    path = cfg["cassandra.config"]
    if not path:
        raise ConfigError(
            [
                (
                    "cassandra.config",
                    "the node's cassandra.yaml (or cassandra.cdc.raw.dir) is required",
                )
            ]
        )
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError([("cassandra.config", f"cannot read {path}: {exc}")]) from exc
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "cdc_raw_directory" and value.strip():
            return Path(value.strip().strip("'\""))
    raise ConfigError(
        [
            (
                "cassandra.config",
                f"{path} sets no cdc_raw_directory; set it (and cdc_enabled: true) in the "
                "node's cassandra.yaml, or give cassandra.cdc.raw.dir",
            )
        ]
    )
