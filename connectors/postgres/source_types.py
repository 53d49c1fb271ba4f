"""A PostgreSQL column's type name, length and scale as Debezium reports them.

``column.propagate.source.type`` puts the source column's type into the field's schema
parameters (``__debezium.source.column.type/length/scale``), and JDBC sinks size their
target columns by them; ``datatype.propagate.source.type`` selects columns by that type name.
Debezium takes all three from the PostgreSQL JDBC driver: the ``pg_type`` name (``int2``,
``varchar``, ``bpchar``, ``_int4`` for an array) and the driver's display size and decimal
digits, not from ``format_type`` (``smallint``, ``character varying``). The values below were
read from Debezium 3.6 (``tests/integration/test_connector_options_parity.py`` compares
every type listed here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from connectors.postgres import oids as t


class _TypeInfo(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def category(self) -> str: ...

    @property
    def element_oid(self) -> int: ...

    @property
    def base_oid(self) -> int: ...


class _Registry(Protocol):
    """What is read of ``connectors.postgres.types.TypeRegistry``: its catalog of user types."""

    @property
    def catalog(self) -> Mapping[int, _TypeInfo]: ...


#: the ``pg_type`` names of the built-in types the connector maps
TYPE_NAMES = {
    t.BOOL: "bool",
    t.BYTEA: "bytea",
    t.CHAR: "char",
    t.NAME: "name",
    t.INT8: "int8",
    t.INT2: "int2",
    t.INT4: "int4",
    t.TEXT: "text",
    t.OID: "oid",
    t.XID: "xid",
    t.JSON: "json",
    t.XML: "xml",
    t.POINT: "point",
    t.FLOAT4: "float4",
    t.FLOAT8: "float8",
    t.MONEY: "money",
    t.MACADDR8: "macaddr8",
    t.MACADDR: "macaddr",
    t.INET: "inet",
    t.CIDR: "cidr",
    t.BPCHAR: "bpchar",
    t.VARCHAR: "varchar",
    t.DATE: "date",
    t.TIME: "time",
    t.TIMESTAMP: "timestamp",
    t.TIMESTAMPTZ: "timestamptz",
    t.INTERVAL: "interval",
    t.TIMETZ: "timetz",
    t.BIT: "bit",
    t.VARBIT: "varbit",
    t.NUMERIC: "numeric",
    t.UUID: "uuid",
    t.JSONB: "jsonb",
    t.INT4RANGE: "int4range",
    t.NUMRANGE: "numrange",
    t.TSRANGE: "tsrange",
    t.TSTZRANGE: "tstzrange",
    t.DATERANGE: "daterange",
    t.INT8RANGE: "int8range",
    t.TSVECTOR: "tsvector",
}

#: the driver's display size for a type without a length of its own
UNBOUNDED = 2_147_483_647

_FIXED = {
    t.INT2: (5, 0),
    t.INT4: (10, 0),
    t.INT8: (19, 0),
    t.OID: (10, 0),
    t.XID: (10, 0),
    t.FLOAT4: (8, 8),
    t.FLOAT8: (17, 17),
    t.BOOL: (1, 0),
    t.CHAR: (1, 0),
    t.DATE: (13, 0),
}

#: temporal types: (display size without a fraction, its default digits)
_TEMPORAL = {
    t.TIME: 8,
    t.TIMETZ: 14,
    t.TIMESTAMP: 22,
    t.TIMESTAMPTZ: 28,
    t.INTERVAL: 42,
}


def _size(oid: int, typmod: int) -> tuple[int, int | None]:
    """The JDBC driver's (display size, decimal digits) of a type and modifier."""
    fixed = _FIXED.get(oid)
    if fixed is not None:
        return fixed
    if oid == t.NUMERIC:
        if typmod < 4:
            # unconstrained: what Debezium reports for streamed events (its snapshot events
            # say 0 and no scale, from the driver's metadata)
            return 131_089, 0
        return ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
    if oid in (t.BPCHAR, t.VARCHAR):
        return (typmod - 4, 0) if typmod >= 4 else (UNBOUNDED, 0)
    if oid in (t.BIT, t.VARBIT):
        return (typmod, 0) if typmod > 0 else (UNBOUNDED, 0)
    base = _TEMPORAL.get(oid)
    if base is not None:
        digits = typmod & 0xFFFF if oid == t.INTERVAL else typmod
        if digits < 0 or digits > 6:
            digits = 6
        return base + (digits + 1 if digits > 0 else 0), digits
    return UNBOUNDED, 0


def source_type(registry: _Registry, oid: int, typmod: int) -> tuple[str, int, int | None]:
    """(type name, length, scale) as Debezium's parameters give them. An array is named
    after its ``pg_type`` (``_int4``) and sized by its element type, a domain named after itself
    and sized by its base type."""
    info = registry.catalog.get(oid)
    name = TYPE_NAMES.get(oid) or (info.name if info is not None else str(oid))
    size_oid = oid
    if info is not None and info.category == "A" and info.element_oid:
        size_oid = info.element_oid
    for _ in range(10):  # a domain is sized by the type it is over
        base = registry.catalog.get(size_oid)
        if base is None or not base.base_oid:
            break
        size_oid = base.base_oid
    length, scale = _size(size_oid, typmod)
    return name.upper(), length, scale
