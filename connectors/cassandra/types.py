"""CQL types as Kafka Connect schemas, and each regular column as the seed's cell struct.

The seed has no type table for Cassandra ("TODO: add logical types"); the mapping follows
the other connectors: integers by width, ``timestamp`` as Connect Timestamp (ms), ``date``
as Connect Date (days), ``time`` as Debezium NanoTime, ``uuid``/``timeuuid`` as Debezium
Uuid text, ``duration``/``inet`` as text, ``blob`` as bytes, lists and sets as arrays, maps
as maps (text keys for non-text key types), tuples as JSON array text. ``decimal`` and
``varint`` follow Debezium's Cassandra keys ``decimal.handling.mode`` (string, double,
precise) and ``varint.handling.mode`` (string, long, precise); tidemark's default for both is
the exact text (Debezium's, double and long, lose digits: its long even wraps silently).

Primary key columns are plain values (they make the key). Every other column is
``{value, deletion_ts, set}``: the commit log carries only the columns a write touched, so a
column the mutation did not write is null in ``after``, and one it wrote says so with
``set: true`` (``value`` null and ``deletion_ts`` set for a deleted cell).
"""

from __future__ import annotations

import decimal
import json
from dataclasses import dataclass
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


@dataclass(frozen=True)
class NumberModes:
    """``decimal.handling.mode`` and ``varint.handling.mode``."""

    decimal: str = "string"
    varint: str = "string"


_TEXT = NumberModes()
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _number_schema(name: str, modes: NumberModes) -> Schema | None:
    if name == "decimal":
        if modes.decimal == "double":
            return FLOAT64
        return logical.variable_scale_decimal() if modes.decimal == "precise" else STRING
    if name == "varint":
        if modes.varint == "long":
            return INT64
        return logical.connect_decimal(0) if modes.varint == "precise" else STRING
    return None


def _decimal_plain(text: str) -> str:
    """Debezium's string mode: ``BigDecimal.toPlainString`` (``1E-30`` is written out)."""
    return format(decimal.Decimal(text), "f")


def _varint_long(text: str) -> int:
    v = int(text)
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise ValueError(
            f"varint {text} does not fit varint.handling.mode=long (64 bits); "
            "string or precise keep it whole"
        )
    return v


def _number_converter(name: str, modes: NumberModes) -> ValueConverter | None:
    """The decoders give decimals and varints as their text; this writes the mode's form."""
    if name == "decimal":
        if modes.decimal == "double":
            return lambda text: float(decimal.Decimal(text))
        if modes.decimal == "precise":
            return lambda text: logical.variable_scale_value(decimal.Decimal(text))
        return _decimal_plain
    if name == "varint":
        if modes.varint == "long":
            return _varint_long
        return decimal.Decimal if modes.varint == "precise" else None
    return None


def connect_schema(t: CqlType, modes: NumberModes = _TEXT) -> Schema:
    number = _number_schema(t.name, modes)
    if number is not None:
        return number
    base = _PRIMITIVES.get(t.name)
    if base is not None:
        return base
    if t.name in ("list", "set"):
        return array(connect_schema(t.params[0], modes).as_optional())
    if t.name == "map":
        key = connect_schema(t.params[0], modes)
        value = connect_schema(t.params[1], modes)
        return map_of(key if key.type.value == "STRING" else STRING, value)
    if t.name == "udt":  # a struct named by the type, as Debezium's agent names it
        return struct(
            [
                (f, connect_schema(p, modes).as_optional())
                for f, p in zip(t.fields, t.params, strict=True)
            ],
            name=t.udt,
            optional=True,
        )
    return STRING  # tuples: their text form


def _plain(t: CqlType, modes: NumberModes = _TEXT) -> ValueConverter | None:
    if t.name in ("decimal", "varint"):
        return _number_converter(t.name, modes)
    if t.name in _PRIMITIVES:
        return None
    if t.name in ("list", "set"):
        item = _plain(t.params[0], modes)
        return None if item is None else lambda xs: [None if x is None else item(x) for x in xs]
    if t.name == "map":
        # keys are always text: a decimal key in its plain form whatever the mode
        key_conv: ValueConverter | None = (
            _decimal_plain
            if t.params[0].name == "decimal"
            else str
            if connect_schema(t.params[0], modes) is not STRING
            else None
        )
        value = _plain(t.params[1], modes)
        if key_conv is None and value is None:
            return None
        key: ValueConverter = key_conv or _same
        val: ValueConverter = value or _same
        return lambda m: {key(k): None if v is None else val(v) for k, v in m.items()}
    if t.name == "udt":
        fields = [(f, _plain(p, modes)) for f, p in zip(t.fields, t.params, strict=True)]
        if all(conv is None for _, conv in fields):
            return None
        return lambda d: {
            f: v if (v := d.get(f)) is None or conv is None else conv(v) for f, conv in fields
        }
    return _json_text


def _same(value: Any) -> Any:
    return value


def _json_text(value: Any) -> str:
    """Tuples (and anything else without a Connect type) as JSON text."""
    return json.dumps(value, default=str, ensure_ascii=False)


def cell_schema(base: Schema, t: CqlType | None = None) -> Schema:
    """The seed's cell struct; a non-frozen set or map has a fourth field, ``removed``: the
    elements (set) or keys (map) an element-wise write removed, null for a whole write
    (:func:`connectors.cassandra.mutation._complex`)."""
    fields = [("value", base.as_optional()), ("deletion_ts", OPTIONAL_INT64), ("set", BOOLEAN)]
    if t is not None and is_delta_collection(t):
        assert base.value_schema is not None
        element = base.key_schema if t.name == "map" else base.value_schema
        assert element is not None
        fields.append(("removed", array(element.as_optional()).as_optional()))
    return struct(fields, optional=True)


def is_delta_collection(t: CqlType) -> bool:
    """A column whose element-wise writes are sent as deltas (``removed`` in its cell)."""
    return t.multi_cell and t.name in ("set", "map")


def _cell_converter(inner: ValueConverter | None) -> ValueConverter:
    def convert(cell: CellValue) -> dict[str, Any]:
        v, deletion_ts, set_ = cell[0], cell[1], cell[2]
        if v is not None and inner is not None:
            v = inner(v)
        return {"value": v, "deletion_ts": deletion_ts, "set": set_}

    return convert


def _delta_cell_converter(t: CqlType, inner: ValueConverter | None) -> ValueConverter:
    """A non-frozen set's or map's cell: its removed elements or keys converted as the value's
    (a map's keys through the map's converter, which owns the key's text form). A snapshot
    read's cell has no fourth member: a whole value."""

    def removed_of(gone: list[Any] | None) -> list[Any] | None:
        if gone is None or inner is None:
            return gone
        if t.name == "map":
            return list(inner(dict.fromkeys(gone)))
        return list(inner(gone))

    def convert(cell: tuple[Any, ...]) -> dict[str, Any]:
        v, deletion_ts, set_ = cell[:3]
        if v is not None and inner is not None:
            v = inner(v)
        gone = removed_of(cell[3]) if len(cell) > 3 else None
        return {"value": v, "deletion_ts": deletion_ts, "set": set_, "removed": gone}

    return convert


#: ``native_type`` of the columns of the core table (:func:`~.schema.core_table`)
KEY_COLUMN, CELL_COLUMN, RANGE_BOUND_COLUMN = 0, 1, 2
#: the range bound fields of ``after`` with ``range.delete.handling.mode=emit`` (Debezium's
#: names; its agent has them in every ``after`` too)
RANGE_FIELDS = ("_range_start", "_range_end")


def _clustering(table: Table) -> list[Column]:
    names = table.extra.get("clustering", ())
    return [c for c in table.columns if c.name in names]


_CLUSTERING_COLUMN = struct([("name", STRING), ("type", STRING), ("descending", BOOLEAN)])


def range_bound_schema(table: Table, modes: NumberModes = _TEXT) -> Schema:
    """A range delete's bound: ``method`` (Debezium's names: ``INCL_START_BOUND``,
    ``EXCL_START_BOUND``, ``INCL_END_BOUND``, ``EXCL_END_BOUND``), ``values`` the bound's
    clustering prefix as typed values (the columns past the prefix null; no prefix at all:
    unbounded on that side) and ``clustering`` the table's clustering columns with their CQL
    type and order: bounds are in clustering order, and a consumer comparing values must
    know which columns are descending and how their type orders (a ``uuid`` does not order as
    its text does)."""
    values = struct(
        [
            (c.name, connect_schema(parse_type(c.type_name), modes).as_optional())
            for c in _clustering(table)
        ]
    )
    return struct(
        [("method", STRING), ("values", values), ("clustering", array(_CLUSTERING_COLUMN))]
    ).as_optional()


def _range_bound_converter(table: Table, modes: NumberModes) -> ValueConverter:
    clustering = _clustering(table)
    cols = [(c.name, _plain(parse_type(c.type_name), modes)) for c in clustering]
    descending = set(table.extra.get("descending", ()))
    described = [
        {"name": c.name, "type": c.type_name, "descending": c.name in descending}
        for c in clustering
    ]

    def convert(bound: tuple[str, list[Any]]) -> dict[str, Any]:
        method, prefix = bound
        values: dict[str, Any] = dict.fromkeys(name for name, _ in cols)
        for (name, conv), v in zip(cols, prefix, strict=False):
            values[name] = v if conv is None else conv(v)
        return {"method": method, "values": values, "clustering": described}

    return convert


class CassandraValueConverters:
    """By ``native_type``: a key column (plain value), a cell column (struct) or a range
    bound."""

    def __init__(self, modes: NumberModes = _TEXT) -> None:
        self.modes = modes

    def schema_for(self, table: Table, column: Column) -> Schema | None:
        if column.native_type == RANGE_BOUND_COLUMN:
            return range_bound_schema(table, self.modes)
        t = parse_type(column.type_name)
        base = connect_schema(t, self.modes)
        return base if column.native_type == KEY_COLUMN else cell_schema(base, t)

    def converter_for(self, table: Table, column: Column) -> ValueConverter | None:
        if column.native_type == RANGE_BOUND_COLUMN:
            return _range_bound_converter(table, self.modes)
        t = parse_type(column.type_name)
        inner = _plain(t, self.modes)
        if column.native_type == KEY_COLUMN:
            return inner
        return _delta_cell_converter(t, inner) if is_delta_collection(t) else _cell_converter(inner)
