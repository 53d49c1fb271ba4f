"""SQL Server → Connect type mapping (Debezium's SQL Server documentation, "Data type
mappings"), from the values pyodbc hands over.

The change tables carry the source columns' own types, so a snapshot row and a streamed row
of the same data arrive as the same Python values and one converter per column serves both.
Not supported (the column is left out of the events, with a warning): ``geometry``,
``geography``, ``hierarchyid``, ``sql_variant``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cdc.schema import logical
from cdc.schema.binary_modes import binary_text
from cdc.schema.model import (
    BOOLEAN,
    BYTES,
    FLOAT32,
    FLOAT64,
    INT16,
    INT32,
    INT64,
    STRING,
    Schema,
)
from cdc.spi import Column, Table

Conv = Callable[[Any], Any]
log = logging.getLogger("tidemark.sqlserver.types")

UNSUPPORTED = frozenset({"geometry", "geography", "hierarchyid", "sql_variant"})
STRINGS = frozenset({"char", "varchar", "text", "nchar", "nvarchar", "ntext", "sysname"})
BINARIES = frozenset({"binary", "varbinary", "image", "timestamp", "rowversion"})
#: fractional-second digits of types whose scale is fixed
_FIXED_DIGITS = {"datetime": 3, "smalldatetime": 0}


@dataclass(frozen=True)
class Modes:
    time_precision: str = "adaptive"
    decimal: str = "precise"
    binary: str = "bytes"


def _naive(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=None) if value.tzinfo else value


def _millis(value: dt.datetime) -> int:
    return logical.micros_since_epoch(_naive(value)) // 1000


def _micros(value: dt.datetime) -> int:
    return logical.micros_since_epoch(_naive(value))


def _nanos(value: dt.datetime) -> int:
    return logical.micros_since_epoch(_naive(value)) * 1000


def _time_micros(value: dt.time | dt.timedelta | str) -> int:
    if isinstance(value, str):
        value = dt.time.fromisoformat(value[:15])
    return logical.micros_of_day(value)


def _date(value: dt.date | dt.datetime) -> int:
    if isinstance(value, dt.datetime):
        value = value.date()
    return logical.days_since_epoch(value)


def _zoned(value: dt.datetime | str) -> str:
    """``datetimeoffset`` as Debezium's ZonedTimestamp text, in the value's own offset."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if value.tzinfo is None:  # the stand-in hands over UTC wall-clock time
        value = value.replace(tzinfo=dt.UTC)
    text = value.isoformat()
    if value.microsecond:  # Java's ISO formatter: the fraction only as long as needed
        head, _, rest = text.partition(".")
        text = f"{head}.{rest[:6].rstrip('0')}{rest[6:]}"
    return text.replace("+00:00", "Z")


def _bytes(value: Any) -> bytes:
    return bytes(value)


def _binary(mode: str) -> tuple[Schema, Conv]:
    text = binary_text(mode)
    if text is not None:
        return STRING, lambda v: text(bytes(v))
    return BYTES, _bytes


def _decimal(mode: str, precision: int | None, scale: int) -> tuple[Schema, Conv]:
    if mode == "double":
        return FLOAT64, float
    if mode == "string":  # plain digits (0.0000000001, not 1E-10), as the other connectors
        return STRING, lambda v: format(decimal.Decimal(v), "f")
    q = decimal.Decimal(1).scaleb(-scale)

    def fixed(v: Any) -> decimal.Decimal:
        return decimal.Decimal(v).quantize(q)

    return logical.connect_decimal(scale, precision), fixed


def _fraction_digits(column: Column) -> int:
    fixed = _FIXED_DIGITS.get(column.type_name.lower())
    if fixed is not None:
        return fixed
    return 7 if column.scale is None else column.scale


def _temporal(column: Column, mode: str) -> tuple[Schema, Conv] | None:
    kind = column.type_name.lower()
    digits = _fraction_digits(column)
    if kind == "date":
        return (logical.connect_date() if mode == "connect" else logical.date()), _date
    if kind == "time":
        if mode == "connect":
            return logical.connect_time(), lambda v: _time_micros(v) // 1000
        if digits <= 3:
            return logical.time_millis(), lambda v: _time_micros(v) // 1000
        if digits <= 6:
            return logical.micro_time(), _time_micros
        return logical.nano_time(), lambda v: _time_micros(v) * 1000
    if kind in ("datetime", "smalldatetime", "datetime2"):
        if mode == "connect":
            return logical.connect_timestamp(), _millis
        if digits <= 3:
            return logical.timestamp_millis(), _millis
        if digits <= 6:
            return logical.micro_timestamp(), _micros
        return logical.nano_timestamp(), _nanos
    if kind == "datetimeoffset":
        return logical.zoned_timestamp(), _zoned
    return None


def mapping(column: Column, modes: Modes) -> tuple[Schema, Conv | None] | None:
    """The Connect schema and converter of one column; None when it cannot be represented."""
    kind = column.type_name.lower()
    if kind == "bit":
        return BOOLEAN, bool
    if kind in ("tinyint", "smallint"):
        return INT16, int
    if kind == "int":
        return INT32, int
    if kind == "bigint":
        return INT64, int
    if kind == "real":
        return FLOAT32, float
    if kind == "float":
        return FLOAT64, float
    if kind in ("decimal", "numeric"):
        return _decimal(modes.decimal, column.length, column.scale or 0)
    if kind == "money":
        return _decimal(modes.decimal, 19, 4)
    if kind == "smallmoney":
        return _decimal(modes.decimal, 10, 4)
    if kind in STRINGS:
        return STRING, str
    if kind == "xml":
        return logical.xml(), str
    if kind == "uniqueidentifier":
        return STRING, lambda v: str(v).upper()
    if kind in BINARIES:
        return _binary(modes.binary)
    temporal = _temporal(column, modes.time_precision)
    if temporal is not None:
        return temporal
    return None


class SqlServerValueConverters:
    def __init__(self, modes: Modes) -> None:
        self.modes = modes
        self._warned: set[tuple[str, str]] = set()

    def _mapped(self, table: Table, column: Column) -> tuple[Schema, Conv | None] | None:
        found = mapping(column, self.modes)
        if found is None:
            key = (str(table.id), column.name)
            if key not in self._warned:
                self._warned.add(key)
                why = "not supported" if column.type_name.lower() in UNSUPPORTED else "unknown"
                log.warning(
                    "column %s.%s of type %s is left out of the events (%s by tidemark's "
                    "SQL Server connector)",
                    table.id,
                    column.name,
                    column.type_name,
                    why,
                )
        return found

    def schema_for(self, table: Table, column: Column) -> Schema | None:
        found = self._mapped(table, column)
        return None if found is None else found[0]

    def converter_for(self, table: Table, column: Column) -> Conv | None:
        found = self._mapped(table, column)
        return None if found is None else found[1]
