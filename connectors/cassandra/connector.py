"""The Cassandra connector: a per-node agent. Each worker runs beside one node, reads that
node's commit log segments from ``cdc_raw`` with the pure-Python reader, and reads the schema
and the snapshot over CQL with the DataStax driver."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdc.assembly import table_filter_from_config
from cdc.config import Config
from cdc.envelope import V3, source_block_schema
from cdc.schema.model import INT64, STRING, Schema
from cdc.spi import Connector, SnapshotSource, Snapshotter, StreamingSource
from connectors.cassandra.config import CONFIG_DEF, parse_config
from connectors.cassandra.offsets import validate_offset
from connectors.cassandra.schema import SYSTEM_KEYSPACES
from connectors.cassandra.snapshot import CassandraSnapshot, CassandraSnapshotter
from connectors.cassandra.state import TaskState
from connectors.cassandra.streaming import CassandraStreaming
from connectors.cassandra.transfer import load_transfer
from connectors.cassandra.types import CassandraValueConverters, NumberModes

_SOURCE_FIELDS = [
    ("cluster", STRING),
    ("keyspace", STRING),
    ("table", STRING),
    ("file", STRING),
    ("pos", INT64),
    ("ts_micro", INT64),
]
SOURCE_SCHEMA = source_block_schema("io.debezium.connector.cassandra.Source", _SOURCE_FIELDS)
#: envelope.version=3: Debezium 3.x's common part first (its ``db`` is the keyspace)
SOURCE_SCHEMA_V3 = source_block_schema(
    "io.debezium.connector.cassandra.Source", [("db", STRING), *_SOURCE_FIELDS], version=V3
)


class CassandraConnector(Connector):
    type_name = "cassandra"
    # 1.x's one class, and 2.x/3.x's per Cassandra major version (the 4.x and 5.0 commit
    # logs are both read here; 3.x's is not, see docs/cassandra.md)
    class_names = (
        "io.debezium.connector.cassandra.CassandraConnector",
        "io.debezium.connector.cassandra.Cassandra4Connector",
        "io.debezium.connector.cassandra.Cassandra5Connector",
    )
    config_def = CONFIG_DEF
    system_schemas = SYSTEM_KEYSPACES
    config: Config

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        self.config = parse_config(config)
        self.state = TaskState(self.config)
        self.transfer = load_transfer(
            self.config["commit.log.transfer.class"], self.config["commit.log.relocation.dir"]
        )
        self.filter = table_filter_from_config(self.config, SYSTEM_KEYSPACES)

    def source_partition(self) -> dict[str, Any]:
        return {"server": self.config["database.server.name"]}

    def snapshotter(self) -> Snapshotter:
        return CassandraSnapshotter(
            self.state, self.config["snapshot.mode"], self.filter.is_included
        )

    def snapshot_source(self) -> SnapshotSource:
        c = self.config
        return CassandraSnapshot(
            self.state,
            c["snapshot.mode"],
            c["snapshot.resumable"],
            c["snapshot.resumable.chunk.size"],
        )

    def streaming_source(self) -> StreamingSource:
        return CassandraStreaming(self.state, self.transfer, self.config["snapshot.mode"])

    def value_converters(self) -> CassandraValueConverters:
        c = self.config
        return CassandraValueConverters(
            NumberModes(c["decimal.handling.mode"], c["varint.handling.mode"])
        )

    def source_schema(self) -> Schema:
        return SOURCE_SCHEMA_V3 if self.config.get("envelope.version") == V3 else SOURCE_SCHEMA

    @classmethod
    def validate_offset(
        cls, partition: dict[str, Any], offset: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, list[str]]:
        return validate_offset(partition, offset)

    def close(self) -> None:
        self.state.close()
