"""The MySQL/MariaDB connector: configuration, snapshot policy and the two sources.

The snapshot and the streaming source of one run share a :class:`TaskState` (schema, schema
history, MySQL metrics): a snapshot leaves the schema at the position streaming starts from,
otherwise streaming rebuilds it from the history.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdc.config import Config
from cdc.envelope import V3, source_block_schema
from cdc.schema.model import INT32, INT64, OPTIONAL_INT64, OPTIONAL_STRING, STRING, Schema
from cdc.snapshot_modes import MODES, WhenNeeded
from cdc.spi import Connector, SnapshotSource, Snapshotter, SourceContext, StreamingSource
from cdc.spi.connection_check import ConnectionReport
from cdc.spi.debezium_offsets import Translated
from connectors.mysql import connection_check
from connectors.mysql import offsets as mysql_offsets
from connectors.mysql.chunks import MySqlChunkReader
from connectors.mysql.config import (
    CONFIG_DEF,
    RECOVERY_MODES,
    parse_config,
    tinyint_boolean_selectors,
)
from connectors.mysql.offsets import validate_offset
from connectors.mysql.reselect import MySqlReselector
from connectors.mysql.snapshot import MySqlSnapshot
from connectors.mysql.state import BUILTIN_DATABASES, MySqlMetrics, TaskState
from connectors.mysql.streaming import MySqlStreaming, position_available
from connectors.mysql.types import Modes, MySqlValueConverters

_SOURCE_FIELDS = [
    ("db", STRING),
    ("table", OPTIONAL_STRING),
    ("server_id", INT64),
    ("gtid", OPTIONAL_STRING),
    ("file", STRING),
    ("pos", INT64),
    ("row", INT32),
    ("thread", OPTIONAL_INT64),
    ("query", OPTIONAL_STRING),
]
SOURCE_SCHEMA = source_block_schema("io.debezium.connector.mysql.Source", _SOURCE_FIELDS)
#: Debezium 3.x (``envelope.version=3``): the MySQL connector's, and the MariaDB connector's
#: (Debezium 2.7+ captures MariaDB with its own connector, ``source.connector=mariadb``).
SOURCE_SCHEMA_V3 = source_block_schema(
    "io.debezium.connector.mysql.Source", _SOURCE_FIELDS, version=V3
)
MARIADB_SOURCE_SCHEMA_V3 = source_block_schema(
    "io.debezium.connector.mariadb.Source", _SOURCE_FIELDS, version=V3
)
MARIADB_CLASS = "io.debezium.connector.mariadb.MariaDbConnector"


class SchemaOnlyRecovery(Snapshotter):
    """Re-read the table definitions into the history at the stored offset, then stream from
    that offset (seed: recover a lost or corrupted history)."""

    mode = "schema_only_recovery"

    def should_snapshot(self, offset: Mapping[str, Any] | None) -> bool:
        return True

    def include_data(self) -> bool:
        return False


class MySqlConnector(Connector):
    type_name = "mysql"
    class_names = (
        "io.debezium.connector.mysql.MySqlConnector",
        "io.debezium.connector.mariadb.MariaDbConnector",
    )
    config_def = CONFIG_DEF
    config: Config

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        self.config = parse_config(dict(config))
        c = self.config
        time_mode = c["time.precision.mode"]
        self.modes = Modes(
            time_precision="connect" if time_mode == "connect" else "adaptive_time_microseconds",
            decimal=c["decimal.handling.mode"],
            bigint_unsigned=c["bigint.unsigned.handling.mode"],
            binary=c["binary.handling.mode"],
            time_adjuster=c["enable.time.adjuster"],
            tinyint1_boolean=tinyint_boolean_selectors(c),
            envelope=str(c.get("envelope.version", "1.2")),
        )
        # Built-in databases are never captured unless table.ignore.builtin=false.
        self.system_schemas = BUILTIN_DATABASES if c["table.ignore.builtin"] else frozenset()
        self.metrics = MySqlMetrics()
        self.state = TaskState(c, self.source_partition(), self.metrics)
        self._streaming: MySqlStreaming | None = None

    def source_partition(self) -> dict[str, Any]:
        return {"server": self.config["database.server.name"]}

    def snapshotter(self) -> Snapshotter:
        mode = self.config["snapshot.mode"]
        if mode == "when_needed":
            return WhenNeeded(lambda offset: position_available(self.state, offset))
        if mode in RECOVERY_MODES:
            return SchemaOnlyRecovery()
        return MODES[mode]()

    def snapshot_source(self) -> SnapshotSource:
        return _Attached(MySqlSnapshot(self.state), self.metrics)

    def streaming_source(self) -> StreamingSource:
        self._streaming = MySqlStreaming(self.state)
        return _AttachedStreaming(self._streaming, self.metrics)

    def reselector(self) -> MySqlReselector:
        return MySqlReselector(self.config)

    def chunk_reader(self) -> MySqlChunkReader:
        return MySqlChunkReader(self.config)

    def value_converters(self) -> MySqlValueConverters:
        return MySqlValueConverters(self.modes)

    def _mariadb_v3(self) -> bool:
        """Debezium 3.x's MariaDbConnector: chosen by connector.class, under envelope 3."""
        return (
            self.config.get("envelope.version") == V3
            and self.raw_config.get("connector.class") == MARIADB_CLASS
        )

    def source_schema(self) -> Schema:
        if self.config.get("envelope.version") != V3:
            return SOURCE_SCHEMA
        return MARIADB_SOURCE_SCHEMA_V3 if self._mariadb_v3() else SOURCE_SCHEMA_V3

    def source_connector_name(self) -> str:
        return "mariadb" if self._mariadb_v3() else self.type_name

    @classmethod
    def check_connection(cls, config: Mapping[str, Any]) -> ConnectionReport:
        return connection_check.check(config)

    @classmethod
    def validate_offset(
        cls, partition: dict[str, Any], offset: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, list[str]]:
        return validate_offset(partition, offset)

    @classmethod
    def from_debezium_offset(cls, offset: dict[str, Any] | None) -> Translated:
        return mysql_offsets.from_debezium(offset)

    @classmethod
    def to_debezium_offset(cls, offset: dict[str, Any] | None) -> Translated:
        return mysql_offsets.to_debezium(offset)

    def close(self) -> None:
        self.state.close()


def attach_metrics(ctx: SourceContext, metrics: MySqlMetrics) -> None:
    """Export the MySQL gauges through the core's registry (``TaskMetrics.extra``)."""
    core = ctx.metrics
    core.extra.update(metrics.gauges())
    core.extra_text.update(metrics.texts())
    core.extra_contexts.update(metrics.CONTEXTS)
    core.streaming_context = "binlog"


class _Attached(SnapshotSource):
    def __init__(self, inner: MySqlSnapshot, metrics: MySqlMetrics) -> None:
        self.inner = inner
        self.metrics = metrics

    def execute(
        self, ctx: SourceContext, previous_offset: Mapping[str, Any] | None, include_data: bool
    ) -> dict[str, Any]:
        attach_metrics(ctx, self.metrics)
        return self.inner.execute(ctx, previous_offset, include_data)


class _AttachedStreaming(StreamingSource):
    def __init__(self, inner: MySqlStreaming, metrics: MySqlMetrics) -> None:
        self.inner = inner
        self.metrics = metrics

    def execute(self, ctx: SourceContext, offset: Mapping[str, Any] | None) -> None:
        attach_metrics(ctx, self.metrics)
        self.inner.execute(ctx, offset)

    def commit_offset(self, offset: Mapping[str, Any]) -> None:
        self.inner.commit_offset(offset)
