"""The SQL Server connector: configuration, snapshot policy and the two sources."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from cdc.config import Config
from cdc.envelope import V3, source_block_schema
from cdc.schema.model import OPTIONAL_INT64, OPTIONAL_STRING, STRING, Schema
from cdc.snapshot_modes import MODES, WhenNeeded
from cdc.spi import (
    Connector,
    SnapshotSource,
    Snapshotter,
    StreamingSource,
    Table,
    TableId,
)
from cdc.spi.connection_check import ConnectionReport
from connectors.sqlserver import connection_check
from connectors.sqlserver.config import CONFIG_DEF, database_names, parse_config
from connectors.sqlserver.databases import split_offset
from connectors.sqlserver.offsets import validate_offset
from connectors.sqlserver.positions import position_lost
from connectors.sqlserver.reselect import HeartbeatAction, SqlServerReselector
from connectors.sqlserver.snapshot import SqlServerSnapshot
from connectors.sqlserver.streaming import SqlServerStreaming
from connectors.sqlserver.types import Modes, SqlServerValueConverters

_SOURCE_FIELDS = [
    ("db", STRING),
    ("schema", STRING),
    ("table", STRING),
    ("change_lsn", OPTIONAL_STRING),
    ("commit_lsn", OPTIONAL_STRING),
    ("event_serial_no", OPTIONAL_INT64),
]
SOURCE_SCHEMA = source_block_schema("io.debezium.connector.sqlserver.Source", _SOURCE_FIELDS)
#: Debezium 3.x (``envelope.version=3``): the common part (snapshot as an enum, sequence,
#: ts_us, ts_ns) before the same SQL Server fields
SOURCE_SCHEMA_V3 = source_block_schema(
    "io.debezium.connector.sqlserver.Source", _SOURCE_FIELDS, version=V3
)

#: never captured: SQL Server's own schemas (and the stand-in's PostgreSQL ones)
SYSTEM_SCHEMAS = frozenset({"sys", "cdc", "information_schema", "guest", "pg_catalog", "pg_toast"})


class SqlServerConnector(Connector):
    type_name = "sqlserver"
    class_names = ("io.debezium.connector.sqlserver.SqlServerConnector",)
    config_def = CONFIG_DEF
    system_schemas = SYSTEM_SCHEMAS
    config: Config

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        self.config = parse_config(dict(config))
        c = self.config
        time_mode = c["time.precision.mode"]
        self.modes = Modes(
            time_precision="connect" if time_mode == "connect" else "adaptive",
            decimal=c["decimal.handling.mode"],
            binary=c["binary.handling.mode"],
        )
        self.databases = database_names(c)
        #: topics are <prefix>.<database>.<schema>.<table> when several databases are
        #: captured (Debezium 2.x's names); with one, <prefix>.<schema>.<table> as before
        self.topics_include_database = len(self.databases) > 1
        #: tables whose structure the core has, and the capture instance it came from
        self.registered: dict[TableId, Table] = {}
        self._heartbeat: HeartbeatAction | None = None

    def source_partition(self) -> dict[str, Any]:
        return {"server": self.config["database.server.name"]}

    def snapshotter(self) -> Snapshotter:
        mode = self.config["snapshot.mode"]
        if mode == "when_needed":
            return WhenNeeded(self._position_available)
        return MODES[mode]()

    def _position_available(self, offset: Mapping[str, Any]) -> bool:
        from connectors.sqlserver.connection import connect, dialect_of
        from connectors.sqlserver.schema import Catalog

        for db, pos in split_offset(self.config, offset).items():
            conn = connect(self.config, database=db)
            try:
                if position_lost(Catalog(conn, dialect_of(self.config), db), pos) is not None:
                    return False
            finally:
                conn.close()
        return True

    def heartbeat_action(self) -> HeartbeatAction | None:
        query = self.config["heartbeat.action.query"]
        if not query:
            return None
        self._heartbeat = HeartbeatAction(self.config, str(query))
        return self._heartbeat

    def reselector(self) -> SqlServerReselector:
        return SqlServerReselector(self.config)

    def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.close()

    def _hold_heartbeats(self) -> AbstractContextManager[None]:
        """While a snapshot runs (an added database's too): no heartbeat action."""
        return self._heartbeat.held() if self._heartbeat is not None else nullcontext()

    def snapshot_source(self) -> SnapshotSource:
        return SqlServerSnapshot(self.config, self.registered, self._hold_heartbeats)

    def streaming_source(self) -> StreamingSource:
        return SqlServerStreaming(self.config, self.registered, self._hold_heartbeats)

    def value_converters(self) -> SqlServerValueConverters:
        return SqlServerValueConverters(self.modes)

    def source_schema(self) -> Schema:
        return SOURCE_SCHEMA_V3 if self.config.get("envelope.version") == V3 else SOURCE_SCHEMA

    @classmethod
    def check_connection(cls, config: Mapping[str, Any]) -> ConnectionReport:
        return connection_check.check(config)

    @classmethod
    def validate_offset(
        cls, partition: dict[str, Any], offset: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, list[str]]:
        return validate_offset(partition, offset)
