"""The PostgreSQL connector: configuration, snapshot policy and the two sources."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cdc.config import Config
from cdc.engine import table_filter_from_config
from cdc.envelope import V3, source_block_schema
from cdc.schema.model import INT64, OPTIONAL_INT64, OPTIONAL_STRING, STRING, Schema
from cdc.snapshot_modes import MODES, WhenNeeded
from cdc.spi import Connector, SnapshotSource, Snapshotter, StreamingSource, TableId
from cdc.spi.connection_check import ConnectionReport
from cdc.spi.debezium_offsets import Translated
from connectors.postgres import connection as pgconn
from connectors.postgres import connection_check
from connectors.postgres import offsets as pg_offsets
from connectors.postgres.chunks import PostgresChunkReader
from connectors.postgres.config import CONFIG_DEF
from connectors.postgres.publication import not_published
from connectors.postgres.reselect import PostgresReselector
from connectors.postgres.snapshot import PostgresSnapshot
from connectors.postgres.streaming import PostgresStreaming
from connectors.postgres.types import Modes, PostgresValueConverters, TypeRegistry

_SOURCE_FIELDS = [
    ("db", STRING),
    ("schema", STRING),
    ("table", STRING),
    ("txId", INT64.as_optional()),
    ("lsn", INT64.as_optional()),
    ("xmin", INT64.as_optional()),
]
SOURCE_SCHEMA = source_block_schema("io.debezium.connector.postgresql.Source", _SOURCE_FIELDS)
#: Debezium 3.x (``envelope.version=3``): the replication origin of the change follows
#: (null: tidemark reads no Origin messages, as Debezium writes it for unreplicated changes).
SOURCE_SCHEMA_V3 = source_block_schema(
    "io.debezium.connector.postgresql.Source",
    [*_SOURCE_FIELDS, ("origin", OPTIONAL_STRING), ("origin_lsn", OPTIONAL_INT64)],
    version=V3,
)


def _lsn_text(lsn: Any) -> str:
    return f'"{lsn}"' if lsn else "null"


def source_derive_v3(source: dict[str, Any], offset: dict[str, Any]) -> dict[str, Any]:
    """Debezium 3.x's ``sequence`` and ``ts_us`` from the event's offset: ``sequence`` is the
    JSON text ``["<end LSN of the last committed transaction>","<event LSN>"]`` (null before
    the first commit seen, and in snapshots), ``ts_us`` the commit time in microseconds."""
    return {
        "sequence": f"[{_lsn_text(offset.get('flush_lsn'))},{_lsn_text(source.get('lsn'))}]",
        "ts_us": offset.get("ts_usec"),
    }


class NewTables(Snapshotter):
    """``snapshot.mode``'s policy, plus a snapshot of just the included tables that the
    publication does not carry yet when the stored offset says nothing else is due."""

    def __init__(self, base: Snapshotter, unpublished: Callable[[], list[TableId]]) -> None:
        self.base = base
        self.mode = base.mode  # type: ignore[misc]
        self.unpublished = unpublished
        #: set when this start snapshots only these tables
        self.new_tables: list[TableId] | None = None

    def should_snapshot(self, offset: Mapping[str, Any] | None) -> bool:
        self.new_tables = None
        if self.base.should_snapshot(offset):
            return True
        new = self.unpublished()
        if new:
            self.new_tables = new
        return bool(new)

    def should_stream(self) -> bool:
        return self.base.should_stream()

    def include_data(self) -> bool:
        return self.base.include_data()


class PostgresConnector(Connector):
    type_name = "postgresql"
    class_names = ("io.debezium.connector.postgresql.PostgresConnector",)
    config_def = CONFIG_DEF
    system_schemas = pgconn.SYSTEM_SCHEMAS
    config: Config

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        self.config = CONFIG_DEF.parse(config)
        c = self.config
        self.modes = Modes(
            decimal=c["decimal.handling.mode"],
            time_precision=c["time.precision.mode"],
            binary=c["binary.handling.mode"],
            hstore=c["hstore.handling.mode"],
            interval=c["interval.handling.mode"],
            include_unknown=c["include.unknown.datatypes"],
            envelope=str(c.get("envelope.version", "1.2")),
        )
        # The schema builder asks for converters of every table; the registry it consults is
        # filled with catalog types by the sources as they load tables.
        self.registry = TypeRegistry(self.modes)
        self._streaming: PostgresStreaming | None = None
        self._new_tables_snapshotter: NewTables | None = None

    @classmethod
    def check_connection(cls, config: Mapping[str, Any]) -> ConnectionReport:
        return connection_check.check(config)

    @classmethod
    def validate_offset(
        cls, partition: dict[str, Any], offset: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, list[str]]:
        return pg_offsets.validate_offset(partition, offset)

    @classmethod
    def from_debezium_offset(cls, offset: dict[str, Any] | None) -> Translated:
        return pg_offsets.from_debezium(offset)

    @classmethod
    def to_debezium_offset(cls, offset: dict[str, Any] | None) -> Translated:
        return pg_offsets.to_debezium(offset)

    def source_partition(self) -> dict[str, Any]:
        return {"server": self.config["database.server.name"]}

    def snapshotter(self) -> Snapshotter:
        mode = self.config["snapshot.mode"]
        if mode == "exported":
            mode = "initial"
        base = WhenNeeded(self._position_available) if mode == "when_needed" else MODES[mode]()
        if mode in ("never", "no_data", "schema_only", "initial_only"):
            return base
        self._new_tables_snapshotter = NewTables(base, self._unpublished_tables)
        return self._new_tables_snapshotter

    def _unpublished_tables(self) -> list[TableId]:
        """Included tables the publication does not carry yet (``filtered`` mode adds them
        at start, so their earlier changes must come from a snapshot)."""
        if self.config["publication.autocreate.mode"] != "filtered":
            return []
        included = table_filter_from_config(self.config, self.system_schemas).is_included
        conn = pgconn.connect(self.config)
        try:
            tables = [t for t, _ in pgconn.list_tables(conn, self.config["database.dbname"])]
            return not_published(conn, self.config, [t for t in tables if included(t)])
        finally:
            conn.close()

    def _position_available(self, offset: Mapping[str, Any]) -> bool:
        conn = pgconn.connect(self.config)
        try:
            info = pgconn.slot_info(conn, self.config["slot.name"])
        finally:
            conn.close()
        return info is not None and info.wal_status != "lost"

    def snapshot_source(self) -> SnapshotSource:
        gaps = self._new_tables_snapshotter
        only = gaps.new_tables if gaps is not None else None
        return PostgresSnapshot(self.config, self.modes, self.registry, only_tables=only)

    def streaming_source(self) -> StreamingSource:
        self._streaming = PostgresStreaming(self.config, self.modes, registry=self.registry)
        return self._streaming

    def reselector(self) -> PostgresReselector:
        return PostgresReselector(self.config)

    def chunk_reader(self) -> PostgresChunkReader:
        return PostgresChunkReader(self.config, self.registry)

    def value_converters(self) -> PostgresValueConverters:
        return PostgresValueConverters(self.registry)

    def source_schema(self) -> Schema:
        return SOURCE_SCHEMA_V3 if self.config.get("envelope.version") == V3 else SOURCE_SCHEMA

    def source_derive(self) -> Any:
        return source_derive_v3 if self.config.get("envelope.version") == V3 else None

    def close(self) -> None:
        if self.config["slot.drop.on.stop"]:
            import logging

            logging.getLogger("tidemark.postgres").warning(
                "slot.drop.on.stop=true: dropping slot %s; changes made while the connector is "
                "stopped will not be captured",
                self.config["slot.name"],
            )
            try:
                conn = pgconn.connect(self.config)
                try:
                    if pgconn.slot_info(conn, self.config["slot.name"]) is not None:
                        pgconn.drop_slot(conn, self.config["slot.name"])
                finally:
                    conn.close()
            except Exception:
                logging.getLogger("tidemark.postgres").warning("could not drop slot", exc_info=True)
