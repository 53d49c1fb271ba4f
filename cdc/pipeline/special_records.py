"""Records that are not row changes: transaction BEGIN/END, heartbeats, schema changes and
logical messages. Their schemas are Debezium's (names under ``io.debezium.connector.common``)
so consumers written for Debezium read them unchanged."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from cdc.envelope import V1_2, V3, SourceShaper
from cdc.history.store import TableChange, TableChangeType
from cdc.record import SourceRecord
from cdc.schema.model import (
    BOOLEAN,
    BYTES,
    INT32,
    INT64,
    OPTIONAL_BOOLEAN,
    OPTIONAL_INT32,
    OPTIONAL_INT64,
    OPTIONAL_STRING,
    STRING,
    Schema,
    Type,
    array,
    struct,
)
from cdc.spi import (
    LogicalMessage,
    SchemaChange,
    Table,
    TableId,
    TransactionBegin,
    TransactionEnd,
)
from cdc.spi.events import TableChangeEntry
from cdc.topics import TopicNamer
from cdc.transforms.java_hash import hash_map_order


def _tx_key(version: int | None) -> Schema:
    return struct(
        [("id", STRING)],
        name="io.debezium.connector.common.TransactionMetadataKey",
        version=version,
    )


def _tx_value(version: int | None) -> Schema:
    # Debezium 3.x names (and versions) the per-collection count struct and makes it optional
    collection = struct(
        [("data_collection", STRING), ("event_count", INT64)],
        name="event.collection" if version else None,
        version=version,
        optional=bool(version),
    )
    return struct(
        [
            ("status", STRING),
            ("id", STRING),
            ("event_count", OPTIONAL_INT64),
            ("data_collections", array(collection, optional=True)),
            ("ts_ms", INT64),
        ],
        name="io.debezium.connector.common.TransactionMetadataValue",
        version=version,
    )


TX_KEY = _tx_key(None)
TX_VALUE = _tx_value(None)
HEARTBEAT_KEY = struct([("serverName", STRING)], name="io.debezium.connector.common.ServerNameKey")
HEARTBEAT_VALUE = struct([("ts_ms", INT64)], name="io.debezium.connector.common.Heartbeat")
MESSAGE_KEY = struct([("prefix", STRING)], name="io.debezium.connector.postgresql.MessageKey")


def table_change_schema(version: str) -> Schema:
    """Debezium's ``io.debezium.connector.schema.Change`` (ConnectTableChangeSerializer): the
    1.2 column and table fields; Debezium 3.x adds the comments, the default expression and
    the enum values."""
    column_fields: list[tuple[str, Schema]] = [
        ("name", STRING),
        ("jdbcType", INT32),
        ("nativeType", OPTIONAL_INT32),
        ("typeName", STRING),
        ("typeExpression", OPTIONAL_STRING),
        ("charsetName", OPTIONAL_STRING),
        ("length", OPTIONAL_INT32),
        ("scale", OPTIONAL_INT32),
        ("position", INT32),
        ("optional", OPTIONAL_BOOLEAN),
        ("autoIncremented", OPTIONAL_BOOLEAN),
        ("generated", OPTIONAL_BOOLEAN),
    ]
    table_fields: list[tuple[str, Schema]] = [
        ("defaultCharsetName", OPTIONAL_STRING),
        ("primaryKeyColumnNames", array(STRING, optional=True)),
    ]
    if version == V3:
        column_fields += [
            ("comment", OPTIONAL_STRING),
            ("defaultValueExpression", OPTIONAL_STRING),
            ("enumValues", array(STRING, optional=True)),
        ]
    # Debezium 3.x's SchemaFactory versions each struct, and a DROP's table is null
    v3 = version == V3
    numbered = 1 if v3 else None
    column = struct(column_fields, name="io.debezium.connector.schema.Column", version=numbered)
    table_fields.append(("columns", array(column)))
    if v3:
        table_fields.append(("comment", OPTIONAL_STRING))
    table = struct(
        table_fields, name="io.debezium.connector.schema.Table", version=numbered, optional=v3
    )
    return struct(
        [("type", STRING), ("id", STRING), ("table", table)],
        name="io.debezium.connector.schema.Change",
        version=numbered,
    )


_INT32_MAX = 2**31 - 1


def _shaped(doc: Mapping[str, Any], schema: Schema) -> dict[str, Any]:
    """The history's JSON document cut to ``schema``'s fields, nested structs and arrays of
    structs included (the history keeps a few fields the Connect schema has not)."""
    out: dict[str, Any] = {}
    for f in schema.fields or ():
        value = doc.get(f.name)
        if value is not None and f.schema.fields:
            value = _shaped(value, f.schema)
        elif value is not None and f.schema.value_schema and f.schema.value_schema.fields:
            value = [_shaped(v, f.schema.value_schema) for v in value]
        elif isinstance(value, int) and f.schema.type is Type.INT32 and value > _INT32_MAX:
            value = None  # LONGTEXT's 2^32-1: Debezium leaves a length it cannot hold unset
        out[f.name] = value
    return out


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class SpecialRecords:
    def __init__(
        self,
        namer: TopicNamer,
        source_schema: Schema,
        source_prefix: dict[str, Any],
        shape: SourceShaper | None = None,
        version: str = V1_2,
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
        numbered = 1 if version == V3 else None  # Debezium 3.x's schema versions
        self.tx_key = _tx_key(numbered)
        self.tx_value = _tx_value(numbered)
        self.heartbeat_key = HEARTBEAT_KEY.with_(version=numbered)
        self.heartbeat_value = HEARTBEAT_VALUE.with_(version=numbered)
        self.schema_change_key = struct(
            [("databaseName", STRING)], name=f"{namespace}.SchemaChangeKey", version=numbered
        )
        self.version = version
        self.table_change_schema = table_change_schema(version)
        # 1.2: the seed's MySQL order (databaseName, ddl, source) with the SQL Server
        # section's schemaName and tableChanges; 3.x: Debezium's SchemaFactory order and
        # optionality (ts_ms required, databaseName optional).
        described: list[tuple[str, Schema]] = [
            ("databaseName", OPTIONAL_STRING if version == V3 else STRING),
            ("schemaName", OPTIONAL_STRING),
            ("ddl", OPTIONAL_STRING),
            ("tableChanges", array(self.table_change_schema)),
        ]
        if version == V3:
            fields = [("source", source_schema), ("ts_ms", INT64), *described]
        else:
            fields = [*described, ("source", source_schema)]
        self.schema_change_value = struct(
            fields, name=f"{namespace}.SchemaChangeValue", version=numbered
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
            self.tx_key,
            {"id": ev.transaction_id},
            self.tx_value,
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
        # in the order Debezium's HashMap of counts lists them
        collections = [
            {"data_collection": k, "event_count": per_collection[k]}
            for k in hash_map_order(list(per_collection))
        ]
        value = {
            "status": "END",
            "id": ev.transaction_id,
            "event_count": total,
            "data_collections": collections,
            "ts_ms": _now_ms(),
        }
        return SourceRecord(
            self.namer.transaction_topic,
            self.tx_key,
            {"id": ev.transaction_id},
            self.tx_value,
            value,
            partition,
            ev.offset,
        )

    def heartbeat(self, partition: dict[str, Any], offset: dict[str, Any]) -> SourceRecord:
        return SourceRecord(
            self.namer.heartbeat_topic,
            self.heartbeat_key,
            {"serverName": self.namer.server},
            self.heartbeat_value,
            {"ts_ms": _now_ms()},
            partition,
            offset,
        )

    def _table_change(self, change: TableChangeEntry) -> dict[str, Any]:
        doc = _shaped(change.to_dict(), self.table_change_schema)
        if self.version == V3 and doc["type"] == TableChangeType.DROP.value:
            doc["table"] = None  # Debezium 3.x: a dropped table has no structure
        return doc

    def schema_change(
        self,
        ev: SchemaChange,
        partition: dict[str, Any],
        registered: Mapping[TableId, Table] | None = None,
    ) -> SourceRecord:
        """``registered``: the core's tables, for an event without ``changes`` (each of its
        tables then counts as ALTERed to its registered structure)."""
        database = ev.database or ""
        changes = ev.changes
        if changes is None:
            known = registered or {}
            changes = [
                TableChange(TableChangeType.ALTER, known.get(t) or Table(t, ()))
                for t in ev.table_ids
            ]
        value: dict[str, Any] = {
            "databaseName": database,
            "schemaName": ev.schema,
            "ddl": ev.ddl,
            "tableChanges": [self._table_change(c) for c in changes],
            "source": self.source_of(ev.source, ev.offset),
        }
        if self.version == V3:
            value["ts_ms"] = _now_ms()
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
