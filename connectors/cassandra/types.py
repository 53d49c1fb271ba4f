"""CQL types as Kafka Connect schemas, and each regular column as the seed's cell struct.

The seed has no type table for Cassandra ("TODO: add logical types"); the mapping follows
the other connectors: integers by width, ``timestamp`` as Connect Timestamp (ms), ``date``
as Connect Date (days), ``time`` as Debezium NanoTime, ``uuid``/``timeuuid`` as Debezium
Uuid text, ``varint``/``decimal``/``duration``/``inet`` as text, ``blob`` as bytes,
lists and sets as arrays, maps as maps (text keys for non-text key types), tuples as JSON
array text.

Primary key columns are plain values (they make the key). Every other column is
``{value, deletion_ts, set}``: the commit log carries only the columns a write touched, so a
column the mutation did not write is null in ``after``, and one it wrote says so with
``set: true`` (``value`` null and ``deletion_ts`` set for a deleted cell).
"""

from __future__ import annotations

import json
from typing import Any

from cdc.schema import logical
from cdc.schema.model import (
    BOOLEAN,
    BYTES,
    FLOAT32,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    OPTIONAL_INT64,
    STRING,
    Schema,
    array,
    map_of,
    struct,
)
from cdc.spi import Column, Table, ValueConverter
from connectors.cassandra.cqltypes import CqlType, parse_type
from connectors.cassandra.mutation import CellValue

_PRIMITIVES: dict[str, Schema] = {
    "int": INT32,
    "bigint": INT64,
    "counter": INT64,
    "smallint": INT16,
    "tinyint": INT8,
    "boolean": BOOLEAN,
    "float": FLOAT32,
    "double": FLOAT64,
    "ascii": STRING,
    "text": STRING,
    "varchar": STRING,
    "timestamp": logical.connect_timestamp(),
    "date": logical.connect_date(),
    "time": logical.nano_time(),
    "uuid": logical.uuid(),
    "timeuuid": logical.uuid(),
    "inet": STRING,
    "blob": BYTES,
    "varint": STRING,
    "decimal": STRING,
    "duration": STRING,
}


def connect_schema(t: CqlType) -> Schema:
    base = _PRIMITIVES.get(t.name)
    if base is not None:
        return base
    if t.name in ("list", "set"):
        return array(connect_schema(t.params[0]).as_optional())
    if t.name == "map":
        key = connect_schema(t.params[0])
        return map_of(key if key.type.value == "STRING" else STRING, connect_schema(t.params[1]))
    return STRING  # tuples and user types: their text form


def _plain(t: CqlType) -> ValueConverter | None:
    if t.name in _PRIMITIVES:
        return None
    if t.name == "map" and connect_schema(t.params[0]) is not STRING:
        return lambda m: {str(k): v for k, v in m.items()}
    if t.name in ("list", "set", "map"):
        return None
    return _json_text


def _json_text(value: Any) -> str:
    """Tuples (and anything else without a Connect type) as JSON text."""
    return json.dumps(value, default=str, ensure_ascii=False)


def cell_schema(base: Schema) -> Schema:
    return struct(
        [("value", base.as_optional()), ("deletion_ts", OPTIONAL_INT64), ("set", BOOLEAN)],
        optional=True,
    )


def _cell_converter(inner: ValueConverter | None) -> ValueConverter:
    def convert(cell: CellValue) -> dict[str, Any]:
        v, deletion_ts, set_ = cell
        if v is not None and inner is not None:
            v = inner(v)
        return {"value": v, "deletion_ts": deletion_ts, "set": set_}

    return convert


class CassandraValueConverters:
    """``native_type`` 0: a key column (plain value); 1: a cell column (struct)."""

    def schema_for(self, table: Table, column: Column) -> Schema | None:
        base = connect_schema(parse_type(column.type_name))
        return base if column.native_type == 0 else cell_schema(base)

    def converter_for(self, table: Table, column: Column) -> ValueConverter | None:
        inner = _plain(parse_type(column.type_name))
        return inner if column.native_type == 0 else _cell_converter(inner)
