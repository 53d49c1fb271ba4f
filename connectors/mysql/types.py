"""MySQL → Connect type mapping (seed §2.1.5) with every handling mode.

One converter per column serves both sources of values, which deliver different Python types
for the same data:

=================  ===============================  ==================================
column             binlog (python-mysql-replication)  snapshot (PyMySQL text protocol)
=================  ===============================  ==================================
BIT(n)             ``'1010000001'`` (str of bits)     ``b'\\x02\\x81'`` (big-endian bytes)
FLOAT              the float32 widened to a double    selected as ``col+0e0``: the same
BINARY(n)          trailing ``\\x00`` stripped          padded to n bytes
SET                ``{'x', 'z'}`` (None when empty)   ``'x,z'`` (``''`` when empty)
JSON (MySQL 8)     decoded objects, bytes keys        the server's text
UUID (MariaDB)     16 raw bytes, trailing ``\\x00``   ``'fc1a4092-1b2c-…'``
                   stripped
INET4 / INET6      4 / 16 raw bytes, trailing         ``'10.0.0.1'`` / ``'2001:db8::1'``
(MariaDB)          ``\\x00`` stripped
zero dates         None (+ a ``none_sources`` note)   ``'0000-00-00'`` strings
TIMESTAMP          naive datetime in UTC              :class:`SnapshotTimestamp` (a naive
                                                      datetime in the session zone, which
                                                      the snapshot sets to UTC)
YEAR 0000          1900                               0
=================  ===============================  ==================================

Converters accept every form in the table, so a row reaches Kafka identically whichever path
read it (``tests/unit/test_mysql_types.py`` compares them type by type). TIMESTAMP values are
converted from UTC epoch seconds in both paths, so neither the server's nor the process's time
zone changes the result. Zero dates become NULL in nullable columns and the epoch otherwise.

One deliberate difference, Debezium's: under ``envelope.version=3`` a TIMESTAMP(n) value read
by the binlog carries n fraction digits (``…08.000000Z``), one read by the snapshot the ISO
form without trailing zeros (``…08Z``) — Debezium 3.6 formats its JDBC snapshot values and its
binlog values differently. The snapshot's values are marked (:class:`SnapshotTimestamp`, set
as the snapshot session's TIMESTAMP decoder) so the one converter can tell them apart.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cdc.compiled import native
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
from connectors.mysql.json_values import mysql_json_text

Conv = Callable[[Any], Any]

ZERO_DATE = "0000-00-00"
"""What the streaming path substitutes for a zero date the decoder turned into None, so the
converter (not the NULL handling) decides, exactly as for the snapshot's zero-date strings."""

SPATIAL = frozenset(
    {
        "GEOMETRY",
        "POINT",
        "LINESTRING",
        "POLYGON",
        "MULTIPOINT",
        "MULTILINESTRING",
        "MULTIPOLYGON",
        "GEOMETRYCOLLECTION",
        "GEOMCOLLECTION",  # MySQL 8's alias
    }
)
TEXT_TYPES = frozenset({"CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT"})
BINARY_TYPES = frozenset({"BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"})
_CURRENT_TS = re.compile(
    r"^(CURRENT_TIMESTAMP|NOW|LOCALTIME|LOCALTIMESTAMP)(\(\s*\d*\s*\))?$", re.IGNORECASE
)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)


@dataclass(frozen=True)
class Modes:
    time_precision: str = "adaptive_time_microseconds"
    decimal: str = "precise"
    bigint_unsigned: str = "long"
    binary: str = "bytes"
    time_adjuster: bool = True
    #: ``TinyIntOneToBooleanConverter`` selectors; None when the converter is not configured,
    #: empty when it applies to every TINYINT(1)
    tinyint1_boolean: tuple[re.Pattern[str], ...] | None = None
    #: ``envelope.version``: under "3" FLOAT is float32, as Debezium 2.0+ writes it
    envelope: str = "1.2"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


def base_type(column: Column) -> tuple[str, bool]:
    """(``INT``, unsigned?) from ``INT UNSIGNED``."""
    parts = column.type_name.upper().split()
    return (parts[0] if parts else ""), "UNSIGNED" in parts


# -- converters for each value form ----------------------------------------------------------


def _float32(value: Any) -> float:
    """The shortest decimal that reads back as the same float32 (what the column holds)."""
    f = float(value)
    try:
        target = struct.unpack("<f", struct.pack("<f", f))[0]
    except OverflowError:
        return f
    for digits in range(6, 10):
        candidate = float(f"{target:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", candidate))[0] == target:
            return candidate
    return float(target)


def _bits_value(value: Any) -> int:
    if isinstance(value, str):
        text = value[2:-1] if value[:2] in ("b'", "B'") else value
        return int(text, 2) if text else 0
    if isinstance(value, bytes | bytearray):
        return int.from_bytes(value, "big")
    return int(value)


def _bit1(value: Any) -> bool:
    return _bits_value(value) != 0


def _bits(length: int) -> Conv:
    size = (length + 7) // 8

    def convert(value: Any) -> bytes:
        return _bits_value(value).to_bytes(size, "little")

    return convert


def _adjust_year(year: int) -> int:
    if 0 <= year <= 69:
        return year + 2000
    if 70 <= year <= 99:
        return year + 1900
    return year


_DATE_RE = re.compile(r"^\s*(-?\d{1,4})-(\d{1,2})-(\d{1,2})")
_TIME_RE = re.compile(r"^\s*(-)?(\d+):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6}))?\s*$")
_DATETIME_RE = re.compile(
    r"^\s*(\d{1,4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6}))?)?\s*$"
)


def _parse_datetime(text: str) -> dt.datetime | None:
    """A DATETIME/TIMESTAMP literal; None for zero or otherwise invalid dates."""
    m = _DATETIME_RE.match(text)
    if m is None:
        return None
    y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
    h, mi, s = (int(m.group(i) or 0) for i in (4, 5, 6))
    micros = int((m.group(7) or "").ljust(6, "0") or 0)
    try:
        return dt.datetime(y, mo, d, h, mi, s, micros)
    except ValueError:
        return None


def _parse_date(text: str) -> dt.date | None:
    m = _DATE_RE.match(text)
    if m is None:
        return None
    try:
        return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


def _micros_of_time(value: Any) -> int:
    if isinstance(value, dt.timedelta):
        return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    if isinstance(value, dt.time):
        return logical.micros_of_day(value)
    m = _TIME_RE.match(str(value))
    if m is None:
        raise ValueError(f"not a TIME value: {value!r}")
    micros = ((int(m.group(2)) * 60 + int(m.group(3))) * 60 + int(m.group(4))) * 1_000_000 + int(
        (m.group(5) or "").ljust(6, "0") or 0
    )
    return -micros if m.group(1) else micros


def _date_conv(zero: int | None, adjust: bool) -> Conv:
    # The snapshot reads DATE as its text ('YYYY-MM-DD'), whose valid dates the compiled row
    # function converts itself (years below 100 stay here when they are adjusted).
    @native("date_days", 100 if adjust else 1)
    def convert(value: Any) -> int | None:
        day: dt.date
        if isinstance(value, dt.datetime):
            day = value.date()
        elif isinstance(value, dt.date):
            day = value
        else:
            parsed = _parse_date(str(value))
            if parsed is None:
                return zero
            day = parsed
        if adjust and day.year < 100:
            day = day.replace(year=_adjust_year(day.year))
        return (day - logical.EPOCH_DATE).days

    return convert


def _datetime_conv(zero: int | None, adjust: bool, divisor: int) -> Conv:
    # as _date_conv: the snapshot's DATETIME text, 'YYYY-MM-DD HH:MM:SS[.f]', is PostgreSQL's
    # timestamp text, converted by the compiled row function when valid
    @native("timestamp_micros", (divisor, 100 if adjust else 1))
    def convert(value: Any) -> int | None:
        if not isinstance(value, dt.datetime):
            if isinstance(value, dt.date):
                value = dt.datetime(value.year, value.month, value.day)
            else:
                parsed = _parse_datetime(str(value))
                if parsed is None:
                    return zero
                value = parsed
        if adjust and value.year < 100:
            value = value.replace(year=_adjust_year(value.year))
        micros: int = logical.micros_since_epoch(value)
        return micros // divisor if divisor != 1 else micros

    return convert


_Y1000 = dt.datetime(1000, 1, 1)


def _timestamp_conv(zero: str | None) -> Conv:
    # A snapshot's value (SnapshotTimestamp) is written by the compiled row function.
    @native("naive_zoned", SnapshotTimestamp)
    def convert(value: Any) -> str | None:
        if type(value) is dt.datetime and value.tzinfo is None and value > _Y1000:
            # the binlog's (naive, UTC) value: its ISO text is the ZonedTimestamp's, with the
            # fraction's trailing zeros cut (years < 1000 differ: strftime does not pad them)
            if value == _EPOCH_NAIVE:
                return zero
            iso = value.isoformat()
            return iso + "Z" if len(iso) == 19 else iso.rstrip("0") + "Z"
        if isinstance(value, dt.datetime):
            if value.tzinfo is None and value == _EPOCH_NAIVE:
                return zero  # the binlog's zero TIMESTAMP (epoch second 0 cannot be stored)
        else:
            parsed = _parse_datetime(str(value))
            if parsed is None:
                return zero
            value = parsed
        return logical.zoned_timestamp_str(value)

    return convert


class SnapshotTimestamp(dt.datetime):
    """A TIMESTAMP value as the snapshot's session read it: a plain datetime that the
    converter writes unpadded under ``envelope.version=3`` (see the module docstring)."""

    __slots__ = ()


def snapshot_timestamp_decoder(decode: Conv) -> Conv:
    """PyMySQL's TIMESTAMP decoder with its datetimes marked as :class:`SnapshotTimestamp`;
    zero and invalid dates (returned as text) pass unchanged. The server's text,
    'YYYY-MM-DD HH:MM:SS[.f]', is read by ``fromisoformat`` (one C call where PyMySQL's
    decoder runs a regular expression and the mark a second constructor); anything it
    refuses goes to PyMySQL's decoder, as before."""
    parse = SnapshotTimestamp.fromisoformat

    def decoder(text: Any) -> Any:
        if (
            type(text) is str
            and text[10:11] == " "
            and (len(text) == 19 or (20 < len(text) < 27 and text[19] == "."))
        ):
            try:
                return parse(text)
            except ValueError:
                pass
        value = decode(text)
        if type(value) is dt.datetime:
            return SnapshotTimestamp(
                value.year,
                value.month,
                value.day,
                value.hour,
                value.minute,
                value.second,
                value.microsecond,
            )
        return value

    # The compiled packet walk (connectors/mysql/_textrow_c.c) makes the SnapshotTimestamp of
    # the server's canonical text itself, as ``parse`` would; anything else still comes here.
    decoder.__tidemark_textrow__ = SnapshotTimestamp  # type: ignore[attr-defined]
    return decoder


def _timestamp_v3(convert: Conv, fsp: int | None) -> Conv:
    """Debezium 3.x's TIMESTAMP: binlog values padded to the column's fsp (DBZ-5996), the
    snapshot's values (:class:`SnapshotTimestamp`) in the unpadded ISO form."""
    padded = logical.fixed_fraction(convert, fsp)
    if padded is convert or fsp is None or fsp > 6:
        return convert if padded is convert else _unpadded_snapshot(convert, padded)
    bare = "." + "0" * fsp + "Z"  # a whole second, padded

    @native("naive_zoned", SnapshotTimestamp)  # the snapshot's values: convert's text
    def timestamp(value: Any) -> Any:
        if (
            type(value) is dt.datetime
            and value.tzinfo is None
            and value > _Y1000
            and value != _EPOCH_NAIVE
        ):  # the binlog's value (see _timestamp_conv), padded
            iso = value.isoformat()
            return iso + bare if len(iso) == 19 else iso[: 20 + fsp] + "Z"
        return convert(value) if type(value) is SnapshotTimestamp else padded(value)

    return timestamp


def _unpadded_snapshot(convert: Conv, padded: Conv) -> Conv:
    @native("naive_zoned", SnapshotTimestamp)  # the snapshot's values: convert's text
    def timestamp(value: Any) -> Any:
        return convert(value) if type(value) is SnapshotTimestamp else padded(value)

    return timestamp


def _year_conv(value: Any) -> int:
    year = value.year if isinstance(value, dt.date) else int(value)
    return 0 if year == 1900 else year  # the binlog decoder reports YEAR 0000 as 1900


def _pad_binary(length: int) -> Conv:
    def convert(value: Any) -> bytes:
        data = value if isinstance(value, bytes) else _as_bytes(value)
        return data + b"\0" * (length - len(data)) if len(data) < length else data

    return convert


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _binary(mode: str, pad_to: int | None) -> tuple[Schema, Conv | None]:
    pad = _pad_binary(pad_to) if pad_to else None
    text = binary_text(mode)
    if text is not None:
        return STRING, lambda v: text(pad(v) if pad else _as_bytes(v))
    return BYTES, pad or _bytes_or_none


def _bytes_or_none(value: Any) -> bytes:
    return value if isinstance(value, bytes) else _as_bytes(value)


def _set_conv(allowed: Sequence[str]) -> Conv:
    def convert(value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, bytes):
            return value.decode()
        members = set(value)
        return ",".join(a for a in allowed if a in members)

    return convert


@native("str_pass")
def _json_conv(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return mysql_json_text(value)


def _srid_and_wkb(value: Any) -> tuple[int | None, bytes]:
    """The server's internal geometry form (both paths deliver it): a little-endian SRID,
    then the WKB. SRID 0 (none given) is null, as in Debezium since its SRID support."""
    data = _as_bytes(value)
    srid = int.from_bytes(data[:4], "little")
    return (srid or None), data[4:]


def _geometry(value: Any) -> dict[str, Any]:
    srid, wkb = _srid_and_wkb(value)
    return {"wkb": wkb, "srid": srid}


_WKB_POINT_SIZE = 1 + 4 + 8 + 8


def _point(value: Any) -> dict[str, Any]:
    """``io.debezium.data.geometry.Point``: the coordinates read from the 2D point's WKB
    (its first byte gives the byte order), plus ``wkb`` and ``srid`` as for Geometry."""
    srid, wkb = _srid_and_wkb(value)
    if len(wkb) != _WKB_POINT_SIZE:
        raise ValueError(f"not a 2D POINT (WKB of {len(wkb)} bytes, {_WKB_POINT_SIZE} expected)")
    order = "<" if wkb[0] else ">"
    kind, x, y = struct.unpack(order + "Idd", wkb[1:])
    if kind != 1:
        raise ValueError(f"not a 2D POINT (WKB geometry type {kind})")
    return {"x": x, "y": y, "wkb": wkb, "srid": srid}


_WIDE = decimal.Context(prec=100)


def _decimal_precise(scale: int) -> Conv:
    quantum = decimal.Decimal(1).scaleb(-scale)

    # The snapshot reads DECIMAL(p,s) as its text, which has exactly s digits after the
    # point: the compiled row function makes the Decimal of such text itself.
    @native("decimal_fixed", (scale, decimal.Decimal))
    def convert(value: Any) -> decimal.Decimal:
        d = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
        if d.as_tuple().exponent == -scale:
            return d
        return d.quantize(quantum, context=_WIDE)  # DECIMAL(65,30) needs 65 digits, not 28

    return convert


def _decimal_string(value: Any) -> str:
    d = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
    return format(d, "f")


def _unsigned_long(value: Any) -> int:
    v = int(value)
    return v - (1 << 64) if v >= 1 << 63 else v  # Java's long, as Debezium's ``long`` mode


@native("str_pass")
def _text(value: Any) -> Any:
    return value if isinstance(value, str) else _as_bytes(value).decode("utf-8", "replace")


def _fixed_bytes(value: Any, size: int) -> bytes:
    data = _as_bytes(value)
    return data + b"\0" * (size - len(data)) if len(data) < size else data


def _uuid(value: Any) -> str:
    """MariaDB's text of a UUID (lowercase, dashed) from either path; Debezium's too."""
    if isinstance(value, str) and value:  # "" is the decoder's form of 16 zero bytes
        return value
    return str(uuid.UUID(bytes=_fixed_bytes(value, 16)))


def _inet4(value: Any) -> str:
    if isinstance(value, str) and value:
        return value
    return ".".join(str(b) for b in _fixed_bytes(value, 4))


def _inet6(value: Any) -> str:
    """MariaDB's INET6 text, which differs from RFC 5952 (and Python's ``ipaddress``): a
    single zero group is compressed too, and IPv4-compatible (``::a.b.c.d``) and IPv4-mapped
    (``::ffff:a.b.c.d``) addresses end in dotted form."""
    if isinstance(value, str) and value:
        return value
    data = _fixed_bytes(value, 16)
    words = [int.from_bytes(data[i : i + 2], "big") for i in range(0, 16, 2)]
    gap_pos, gap_len, run_pos = -1, 0, -1
    for i, w in enumerate([*words, 1]):  # the sentinel closes a trailing run
        if w == 0 and run_pos < 0:
            run_pos = i
        elif w != 0 and run_pos >= 0:
            if i - run_pos > gap_len:  # the first longest run wins
                gap_pos, gap_len = run_pos, i - run_pos
            run_pos = -1
    if gap_pos == 0 and (gap_len == 6 or (gap_len == 5 and words[5] == 0xFFFF)):
        return ("::ffff:" if gap_len == 5 else "::") + ".".join(str(b) for b in data[12:])
    if gap_pos < 0:
        return ":".join(f"{w:x}" for w in words)
    head = ":".join(f"{w:x}" for w in words[:gap_pos])
    tail = ":".join(f"{w:x}" for w in words[gap_pos + gap_len :])
    return f"{head}::{tail}"


@native("bool_int")
def _boolean(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip() not in ("0", "", "false", "FALSE")
    return bool(value)


def _zero_value(column: Column, convert: Conv, epoch: Any) -> Any:
    """What a zero or otherwise invalid date (``0000-00-00``, ``2020-00-15``) becomes: NULL
    in a nullable column; in a NOT NULL one the column's default, else the epoch — what
    Debezium's converters give a value its binlog decoder turned into null."""
    if column.optional:
        return None
    if column.has_default and column.default is not None:
        return convert(column.default)  # ``convert`` falls back to the epoch itself
    return epoch


# -- the mapping ---------------------------------------------------------------------------


class MySqlValueConverters:
    """The connector's ``ValueConverterProvider``: Connect schema and converter per column."""

    def __init__(self, modes: Modes) -> None:
        self.modes = modes
        self._cache: dict[tuple[Any, ...], tuple[Schema, Conv | None]] = {}

    def schema_for(self, table: Table, column: Column) -> Schema | None:
        return self.resolve(table, column)[0]

    def converter_for(self, table: Table, column: Column) -> Conv | None:
        return self.resolve(table, column)[1]

    def resolve(self, table: Table, column: Column) -> tuple[Schema, Conv | None]:
        boolean = self._tinyint_is_boolean(table, column)
        key = (
            column.type_name,
            column.length,
            column.scale,
            column.optional,
            column.enum_values,
            boolean,
            column.has_default and not column.optional and column.default,
        )
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._resolve(column, boolean)
        return hit

    def _tinyint_is_boolean(self, table: Table, column: Column) -> bool:
        patterns = self.modes.tinyint1_boolean
        if patterns is None:
            return False
        base, _ = base_type(column)
        if base != "TINYINT" or column.length != 1:
            return False
        if not patterns:
            return True
        name = f"{table.id.catalog}.{table.id.table}.{column.name}"
        return any(p.fullmatch(name) for p in patterns)

    def _resolve(self, column: Column, boolean: bool) -> tuple[Schema, Conv | None]:
        m = self.modes
        base, unsigned = base_type(column)
        length = column.length
        if boolean or base == "BOOLEAN":
            return BOOLEAN, _boolean
        if base == "BIT":
            n = length or 1
            return (BOOLEAN, _bit1) if n == 1 else (logical.bits(n), _bits(n))
        if base in ("TINYINT", "SMALLINT"):
            return (INT32 if base == "SMALLINT" and unsigned else INT16), None
        if base in ("MEDIUMINT", "INT"):
            return (INT64 if base == "INT" and unsigned else INT32), None
        if base == "BIGINT":
            if not unsigned:
                return INT64, None
            if m.bigint_unsigned == "precise":
                return logical.connect_decimal(0, 20), _decimal_precise(0)
            return INT64, _unsigned_long
        if base in ("FLOAT", "REAL"):
            return (FLOAT32 if base == "REAL" or m.envelope == "3" else FLOAT64), _float32
        if base == "DOUBLE":
            return FLOAT64, float
        if base in ("DECIMAL", "NUMERIC"):
            scale = column.scale or 0
            if m.decimal == "double":
                return FLOAT64, float
            if m.decimal == "string":
                return STRING, _decimal_string
            return logical.connect_decimal(scale, length), _decimal_precise(scale)
        if base in TEXT_TYPES:
            return STRING, _text
        if base == "UUID":
            return logical.uuid(), _uuid
        if base == "INET4":
            return STRING, _inet4
        if base == "INET6":
            return STRING, _inet6
        if base in BINARY_TYPES:
            return _binary(m.binary, length if base == "BINARY" and length else None)
        if base == "JSON":
            return logical.json(), _json_conv
        if base == "ENUM":
            return logical.enum(list(column.enum_values or ())), _text
        if base == "SET":
            allowed = list(column.enum_values or ())
            return logical.enum_set(allowed), _set_conv(allowed)
        if base == "YEAR":
            return logical.year(), _year_conv
        if base == "TIMESTAMP":
            epoch = "1970-01-01T00:00:00Z"
            zero = _zero_value(column, _timestamp_conv(epoch), epoch)
            if m.envelope == "3":  # Debezium 2.2+: binlog fractions have the column's fsp
                return logical.zoned_timestamp(), _timestamp_v3(
                    _timestamp_conv(zero), column.length
                )
            return logical.zoned_timestamp(), _timestamp_conv(zero)
        if base == "POINT":
            return logical.point(), _point
        if base in SPATIAL:
            return logical.geometry(), _geometry
        connect = m.time_precision == "connect"
        if base == "DATE":
            schema = logical.connect_date() if connect else logical.date()
            zero = _zero_value(column, _date_conv(0, m.time_adjuster), 0)
            return schema, _date_conv(zero, m.time_adjuster)
        if base == "TIME":
            if connect:
                return logical.connect_time(), lambda v: _micros_of_time(v) // 1000
            return logical.micro_time(), _micros_of_time
        if base == "DATETIME":
            precision = length or 0
            adjust = m.time_adjuster
            divisor = 1000 if connect or precision <= 3 else 1
            zero = _zero_value(column, _datetime_conv(0, adjust, divisor), 0)
            if connect:
                return logical.connect_timestamp(), _datetime_conv(zero, adjust, divisor)
            if precision <= 3:
                return logical.timestamp_millis(), _datetime_conv(zero, adjust, divisor)
            return logical.micro_timestamp(), _datetime_conv(zero, adjust, divisor)
        return STRING, str


# -- defaults -----------------------------------------------------------------------------


def driver_default(column: Column) -> tuple[bool, Any]:
    """The column's DEFAULT as a value of the kind the drivers deliver, so the column's
    converter turns it into the schema default. (False, None) when there is no usable default
    (expression defaults other than CURRENT_TIMESTAMP, or text that does not fit the type)."""
    if not column.has_default:
        return False, None
    text = column.default
    if text is None:
        return True, None
    base, _unsigned = base_type(column)
    text = str(text)
    try:
        if base in ("TIMESTAMP", "DATETIME") and _CURRENT_TS.match(text):
            return True, "1970-01-01 00:00:00"  # the seed's rule for CURRENT_TIMESTAMP
        if text.startswith("(") or re.match(r"^[A-Za-z_]+\(", text):
            return False, None
        if base in ("TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR", "BOOLEAN"):
            return True, int(decimal.Decimal(text))
        if base == "BIT":
            if text[:2] in ("b'", "B'"):
                return True, text[2:-1]
            return True, format(int(text), "b")
        if base in ("FLOAT", "DOUBLE", "REAL"):
            return True, float(text)
        if base in ("DECIMAL", "NUMERIC"):
            return True, decimal.Decimal(text)
        if base in BINARY_TYPES:
            if text[:2] in ("x'", "X'"):
                return True, bytes.fromhex(text[2:-1])
            return True, text.encode("utf-8")
        if base in SPATIAL:
            return False, None
        return True, text
    except (ValueError, ArithmeticError):
        return False, None


def connect_table(table: Table) -> Table:
    """The table as the core's schema builder sees it: defaults in driver form (see
    :func:`driver_default`), so the builder's ``converter(default)`` yields the Connect value."""
    cols = []
    changed = False
    for col in table.columns:
        ok, value = driver_default(col)
        if col.has_default and (not ok or value != col.default):
            cols.append(replace(col, default=value if ok else None, has_default=ok))
            changed = True
        else:
            cols.append(col)
    if not changed:
        return table
    return Table(table.id, tuple(cols), table.primary_key, table.comment, table.extra)
