"""Records that are not row changes: transaction BEGIN/END, heartbeats, schema changes and
logical messages. Their schemas are Debezium's (names under ``io.debezium.connector.common``)
so consumers written for Debezium read them unchanged."""

from __future__ import annotations

import time
from typing import Any

from cdc.envelope import SourceShaper
from cdc.record import SourceRecord
from cdc.schema.model import (
    BOOLEAN,
    BYTES,
    INT64,
    OPTIONAL_INT64,
    OPTIONAL_STRING,
    STRING,
    Schema,
    array,
    struct,
)
from cdc.spi import LogicalMessage, SchemaChange, TransactionBegin, TransactionEnd
from cdc.topics import TopicNamer

TX_KEY = struct([("id", STRING)], name="io.debezium.connector.common.TransactionMetadataKey")
TX_VALUE = struct(
    [
        ("status", STRING),
        ("id", STRING),
        ("event_count", OPTIONAL_INT64),
        (
            "data_collections",
            array(
                struct([("data_collection", STRING), ("event_count", INT64)]),
                optional=True,
            ),
        ),
        ("ts_ms", INT64),
    ],
    name="io.debezium.connector.common.TransactionMetadataValue",
)
HEARTBEAT_KEY = struct([("serverName", STRING)], name="io.debezium.connector.common.ServerNameKey")
HEARTBEAT_VALUE = struct([("ts_ms", INT64)], name="io.debezium.connector.common.Heartbeat")
MESSAGE_KEY = struct([("prefix", STRING)], name="io.debezium.connector.postgresql.MessageKey")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class SpecialRecords:
    def __init__(
        self,
        namer: TopicNamer,
        source_schema: Schema,
        source_prefix: dict[str, Any],
        shape: SourceShaper | None = None,
    ):
        self.namer = namer
        self.source_schema = source_schema
        self.source_prefix = source_prefix
        #: ``source_of(connector_source, offset)``: the source value in schema order; the
        #: envelope generation's shaper when there is one (Debezium 3.x), else the 1.2 fields
        self.source_of: SourceShaper = shape or self._source_v1
        # Schema change records use the connector's namespace (the seed's MySQL example:
        # io.debezium.connector.mysql.SchemaChangeKey / SchemaChangeValue).
        namespace = (source_schema.name or "io.debezium.connector.common.Source").rsplit(".", 1)[0]
        self.schema_change_key = struct(
            [("databaseName", STRING)], name=f"{namespace}.SchemaChangeKey"
        )
        self.schema_change_value = struct(
            [("databaseName", STRING), ("ddl", STRING), ("source", source_schema)],
            name=f"{namespace}.SchemaChangeValue",
        )
        self.message_value = struct(
            [
                ("op", STRING),
                ("ts_ms", OPTIONAL_INT64),
                ("source", source_schema),
                (
                    "message",
                    struct(
                        [
                            ("prefix", OPTIONAL_STRING),
                            ("content", BYTES.as_optional()),
                            ("transactional", BOOLEAN.as_optional()),
                        ],
                        name="io.debezium.connector.postgresql.Message",
                    ),
                ),
            ],
            name="io.debezium.connector.postgresql.MessageValue",
        )

    def _source_v1(self, source: dict[str, Any], _offset: dict[str, Any]) -> dict[str, Any]:
        merged = {**self.source_prefix, **source}
        return {k: merged.get(k) for k in self.source_schema.field_names()}

    def transaction_begin(self, ev: TransactionBegin, partition: dict[str, Any]) -> SourceRecord:
        value = {
            "status": "BEGIN",
            "id": ev.transaction_id,
            "event_count": None,
            "data_collections": None,
            "ts_ms": _now_ms(),
        }
        return SourceRecord(
            self.namer.transaction_topic,
            TX_KEY,
            {"id": ev.transaction_id},
            TX_VALUE,
            value,
            partition,
            ev.offset,
        )

    def transaction_end(
        self,
        ev: TransactionEnd,
        total: int,
        per_collection: dict[str, int],
        partition: dict[str, Any],
    ) -> SourceRecord:
        collections = [{"data_collection": k, "event_count": v} for k, v in per_collection.items()]
        value = {
            "status": "END",
            "id": ev.transaction_id,
            "event_count": total,
            "data_collections": collections,
            "ts_ms": _now_ms(),
        }
        return SourceRecord(
            self.namer.transaction_topic,
            TX_KEY,
            {"id": ev.transaction_id},
            TX_VALUE,
            value,
            partition,
            ev.offset,
        )

    def heartbeat(self, partition: dict[str, Any], offset: dict[str, Any]) -> SourceRecord:
        return SourceRecord(
            self.namer.heartbeat_topic,
            HEARTBEAT_KEY,
            {"serverName": self.namer.server},
            HEARTBEAT_VALUE,
            {"ts_ms": _now_ms()},
            partition,
            offset,
        )

    def schema_change(self, ev: SchemaChange, partition: dict[str, Any]) -> SourceRecord:
        database = ev.database or ""
        value = {
            "databaseName": database,
            "ddl": ev.ddl,
            "source": self.source_of(ev.source, ev.offset),
        }
        return SourceRecord(
            self.namer.schema_change_topic,
            self.schema_change_key,
            {"databaseName": database},
            self.schema_change_value,
            value,
            partition,
            ev.offset,
        )

    def logical_message(self, ev: LogicalMessage, partition: dict[str, Any]) -> SourceRecord:
        value = {
            "op": "m",
            "ts_ms": _now_ms(),
            "source": self.source_of(ev.source, ev.offset),
            "message": {
                "prefix": ev.prefix,
                "content": ev.content,
                "transactional": ev.transactional,
            },
        }
        topic = f"{self.namer.server}.message"
        return SourceRecord(
            topic,
            MESSAGE_KEY,
            {"prefix": ev.prefix},
            self.message_value,
            value,
            partition,
            ev.offset,
        )
