"""Row images of binlog rows events decoded straight from the event bytes.

One :class:`TableDecoder` per TABLE_MAP (column types, metadata, charsets, ENUM/SET values
known), and per columns-present bitmap one generated Python function that reads a whole image
in a single pass: fixed-width numbers with precompiled ``struct`` readers, strings sliced and
decoded with the column's codec, the rarer temporal/DECIMAL/BIT/JSON forms through small
helpers. No packet wrapper, no per-column method dispatch, no per-row dicts: this is where
python-mysql-replication spent most of the binlog drain.

The values are exactly those the connector's processor made of the library's rows (the
library's value forms, see ``types.py``, with its ``none_sources`` notes already applied):

* NULL → None; an empty SET → ``""``; a zero or invalid DATE/DATETIME → ``ZERO_DATE``;
* a negative TIME with a fraction as ``negative_time2`` corrects it;
* a column absent from the image (``binlog_row_image=MINIMAL``/``NOBLOB``) → :data:`ABSENT`,
  which the processor resolves (row_images.py).

``tests/unit/test_mysql_binlog_decoder*.py`` decodes recorded and live streams both ways and
compares every value, so the library stays the reference for these forms.
"""

from __future__ import annotations

import codecs
import datetime as dt
import decimal
import struct
from collections.abc import Callable
from typing import Any

from pymysqlreplication.json_binary import parse_json

from connectors.mysql import json_values
from connectors.mysql.charsets import python_codec
from connectors.mysql.types import ZERO_DATE

json_values.install()  # binary JSON's DATE, TIME, DECIMAL and other opaque values (json_values)

ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "ABSENT"})()
"""Marks a column the row image does not carry (its bit in the columns-present bitmap is 0)."""

Image = Callable[[bytes, int], tuple[list[Any], int]]

# MySQL field types (include/mysql_com.h / binary_log_types.h)
T_DECIMAL, T_TINY, T_SHORT, T_LONG, T_FLOAT, T_DOUBLE = 0, 1, 2, 3, 4, 5
T_TIMESTAMP, T_LONGLONG, T_INT24, T_DATE, T_TIME, T_DATETIME, T_YEAR = 7, 8, 9, 10, 11, 12, 13
T_VARCHAR, T_BIT, T_TIMESTAMP2, T_DATETIME2, T_TIME2 = 15, 16, 17, 18, 19
T_JSON, T_NEWDECIMAL, T_ENUM, T_SET = 245, 246, 247, 248
T_BLOB, T_STRING, T_GEOMETRY = 252, 254, 255

_EPOCH = dt.datetime(1970, 1, 1)
_COMPRESSED = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_INTS = {
    (T_TINY, False): ("<b", 1),
    (T_TINY, True): ("<B", 1),
    (T_SHORT, False): ("<h", 2),
    (T_SHORT, True): ("<H", 2),
    (T_LONG, False): ("<i", 4),
    (T_LONG, True): ("<I", 4),
    (T_LONGLONG, False): ("<q", 8),
    (T_LONGLONG, True): ("<Q", 8),
    (T_FLOAT, False): ("<f", 4),
    (T_FLOAT, True): ("<f", 4),
    (T_DOUBLE, False): ("<d", 8),
    (T_DOUBLE, True): ("<d", 8),
}
_BE_I32 = struct.Struct(">i").unpack_from


# -- helpers for the rarer types: (value, next position) ---------------------------------------


def _fsp(d: bytes, p: int, fsp: int) -> tuple[int, int]:
    """Fractional seconds as microseconds (signed big-endian, as the library reads them)."""
    size = (fsp + 1) // 2
    if size == 0:
        return 0, p
    micro = int.from_bytes(d[p : p + size], "big", signed=True)
    if fsp % 2:
        micro = int(micro / 10)
    return micro * 10 ** (6 - fsp), p + size


def _timestamp2(d: bytes, p: int, fsp: int) -> tuple[Any, int]:
    value = _EPOCH + dt.timedelta(seconds=_BE_I32(d, p)[0])
    micro, p = _fsp(d, p + 4, fsp)
    return (value.replace(microsecond=micro) if micro > 0 else value), p


def _datetime2(d: bytes, p: int, fsp: int) -> tuple[Any, int]:
    data = int.from_bytes(d[p : p + 5], "big")
    year_month = (data >> 22) & 0x1FFFF
    try:
        value = dt.datetime(
            int(year_month / 13),
            year_month % 13,
            (data >> 17) & 0x1F,
            (data >> 12) & 0x1F,
            (data >> 6) & 0x3F,
            data & 0x3F,
        )
    except ValueError:
        return ZERO_DATE, _fsp(d, p + 5, fsp)[1]
    micro, p = _fsp(d, p + 5, fsp)
    return (value.replace(microsecond=micro) if micro > 0 else value), p


def _time2(d: bytes, p: int, fsp: int) -> tuple[Any, int]:
    data = int.from_bytes(d[p : p + 3], "big", signed=True)
    sign = 1 if (data >> 23) & 1 else -1
    if sign == -1:
        data = ~data + 1
    micro, p = _fsp(d, p + 3, fsp)
    value = (
        dt.timedelta(
            hours=(data >> 12) & 0x3FF,
            minutes=(data >> 6) & 0x3F,
            seconds=data & 0x3F,
            microseconds=micro,
        )
        * sign
    )
    if value.days < 0 and value.microseconds:
        value = negative_time2(value)
    return value, p


def _date(d: bytes, p: int) -> tuple[Any, int]:
    v = d[p] | d[p + 1] << 8 | d[p + 2] << 16
    year, month, day = v >> 9, (v >> 5) & 0xF, v & 0x1F
    if year == 0 or month == 0 or day == 0:
        return ZERO_DATE, p + 3
    return dt.date(year, month, day), p + 3


def _time(d: bytes, p: int) -> tuple[Any, int]:
    t = d[p] | d[p + 1] << 8 | d[p + 2] << 16
    return (
        dt.timedelta(hours=int(t / 10000), minutes=int((t % 10000) / 100), seconds=int(t % 100)),
        p + 3,
    )


def _datetime(d: bytes, p: int) -> tuple[Any, int]:
    value = int.from_bytes(d[p : p + 8], "little")
    if value == 0:
        return ZERO_DATE, p + 8
    date = value / 1000000
    time = int(value % 1000000)
    year, month, day = int(date / 10000), int((date % 10000) / 100), int(date % 100)
    if year == 0 or month == 0 or day == 0:
        return ZERO_DATE, p + 8
    return (
        dt.datetime(
            year, month, day, int(time / 10000), int((time % 10000) / 100), int(time % 100)
        ),
        p + 8,
    )


def _timestamp(d: bytes, p: int) -> tuple[Any, int]:
    return _EPOCH + dt.timedelta(seconds=int.from_bytes(d[p : p + 4], "little")), p + 4


def _bit(d: bytes, p: int, bits: int) -> tuple[Any, int]:
    size = (bits + 7) // 8
    value = int.from_bytes(d[p : p + size], "big") & ((1 << bits) - 1)
    return format(value, f"0{bits}b"), p + size


def _json(d: bytes, p: int, length_size: int) -> tuple[Any, int]:
    n = int.from_bytes(d[p : p + length_size], "little")
    p += length_size
    if n == 0:
        return None, p
    data = d[p : p + n]
    return parse_json(data[0], data[1:]), p + n


def _decimal_reader(precision: int, scale: int) -> Callable[[bytes, int], tuple[Any, int]]:
    """DECIMAL(precision, scale): groups of nine digits in four big-endian bytes, the partial
    groups at both ends in fewer, all bytes inverted for a negative value and the top bit
    flipped. Read as the unscaled integer and made a ``Decimal`` of exponent ``-scale`` (the
    library's value: its digits, sign and exponent, a negative zero included)."""
    integral = precision - scale
    uncomp_int, comp_int = divmod(integral, 9)
    uncomp_frac, comp_frac = divmod(scale, 9)
    head, tail = _COMPRESSED[comp_int], _COMPRESSED[comp_frac]
    size = head + 4 * (uncomp_int + uncomp_frac) + tail
    groups = range(head, head + 4 * (uncomp_int + uncomp_frac), 4)
    tail_factor = 10**comp_frac
    flip = 1 << (8 * size - 1)
    invert = (1 << (8 * size)) - 1
    exponent = f"E-{scale}"
    make = decimal.Decimal

    def read(d: bytes, p: int) -> tuple[Any, int]:
        raw = d[p : p + size]
        negative = not raw[0] & 0x80
        if negative:
            raw = (int.from_bytes(raw, "big") ^ flip ^ invert).to_bytes(size, "big")
        else:
            raw = (int.from_bytes(raw, "big") ^ flip).to_bytes(size, "big")
        u = int.from_bytes(raw[:head], "big") if head else 0
        for q in groups:
            u = u * 1_000_000_000 + int.from_bytes(raw[q : q + 4], "big")
        if tail:
            u = u * tail_factor + int.from_bytes(raw[size - tail :], "big")
        return make(f"-{u}{exponent}" if negative else f"{u}{exponent}"), p + size

    return read


def _unknown(kind: int) -> Callable[[bytes, int], tuple[Any, int]]:
    def read(d: bytes, p: int) -> tuple[Any, int]:
        raise NotImplementedError(f"Unknown MySQL column type: {kind}")

    return read


# -- compilation ---------------------------------------------------------------------------------


def _codec(charset_name: str | None) -> str | None:
    """The codec the library decodes a string column with; None keeps the raw bytes (a
    character set Python has no codec for, e.g. ``binary``)."""
    if charset_name is None:
        return "utf-8"
    from connectors.mysql.connection import RowsEvent

    encoding = python_codec(str(RowsEvent.charset_to_encoding(charset_name)))
    try:
        codecs.lookup(encoding)
    except LookupError:
        return None
    return encoding


class TableDecoder:
    """The row images of one TABLE_MAP, compiled once per columns-present bitmap."""

    def __init__(self, columns: list[Any]) -> None:
        #: the library's column objects (type, metadata, charset, names)
        self.columns = columns
        self.count = len(columns)
        #: the processor's ``TableId`` of this map's table, set on first use
        self.tid: Any = None
        self._images: dict[bytes, Image] = {}
        self.full = ((1 << self.count) - 1).to_bytes((self.count + 7) // 8, "little")

    def partial(self, present: bytes) -> bool:
        """Whether an image with this columns-present bitmap lacks columns."""
        return bytes(present) != self.full

    def image(self, present: bytes) -> Image:
        fn = self._images.get(present)
        if fn is None:
            fn = self._images[present] = self._compile(present)
        return fn

    def _compile(self, present: bytes) -> Image:
        env: dict[str, Any] = {"ABSENT": ABSENT}
        lines: list[str] = []
        nulls = 0
        bits = int.from_bytes(present, "little")
        for i, col in enumerate(self.columns):
            if not bits >> i & 1:
                lines.append(f"    v{i} = ABSENT")
                continue
            body = self._column(i, col, env)
            lines.append(f"    if n >> {nulls} & 1:")
            lines.append(f"        v{i} = None")
            lines.append("    else:")
            lines.extend("        " + b for b in body)
            nulls += 1
        size = (nulls + 7) // 8
        head = [
            "def image(d, p):",
            f"    n = int.from_bytes(d[p:p + {size}], 'little')",
            f"    p += {size}",
        ]
        values = ", ".join(f"v{i}" for i in range(self.count))
        source = "\n".join([*head, *lines, f"    return [{values}], p"])
        exec(compile(source, f"<binlog image {self.count} columns>", "exec"), env)
        image: Image = env["image"]
        return image

    def _column(self, i: int, col: Any, env: dict[str, Any]) -> list[str]:
        """Statements that read column ``i`` at ``p`` into ``v{i}`` and advance ``p``."""
        t = col.type
        name = f"c{i}"
        if t == T_TINY:  # one byte: no struct call
            value = "d[p]" if col.unsigned else "(d[p] ^ 128) - 128"
            return [f"v{i} = {value}", "p += 1"]
        ints = _INTS.get((t, bool(col.unsigned)))
        if ints is not None:
            fmt, size = ints
            env[name] = struct.Struct(fmt).unpack_from
            return [f"v{i} = {name}(d, p)[0]", f"p += {size}"]
        if t == T_INT24:
            signed = not col.unsigned
            return [f"v{i} = int.from_bytes(d[p:p + 3], 'little', signed={signed})", "p += 3"]
        if t == T_YEAR:
            return [f"v{i} = d[p] + 1900", "p += 1"]
        if t in (T_VARCHAR, T_STRING, T_BLOB):
            length = int(col.length_size) if t == T_BLOB else 2 if col.max_length > 255 else 1
            codec = _codec(col.character_set_name)
            out = [
                f"m = {_le_uint(length)}",
                # Python decodes b"" to "" even with an unknown codec, so the library does too
                f"v{i} = d[p + {length}:p + {length} + m]"
                + (f".decode({codec!r})" if codec is not None else " or ''"),
                f"p += {length} + m",
            ]
            return out
        if t == T_GEOMETRY:
            length = int(col.length_size)
            return [
                f"m = int.from_bytes(d[p:p + {length}], 'little')",
                f"p += {length}",
                f"v{i} = d[p:p + m]",
                "p += m",
            ]
        if t == T_ENUM:
            env[name] = col.enum_values or None
            size = int(col.size)
            if not col.enum_values:
                return [f"v{i} = None", f"p += {size}"]
            return [f"v{i} = {name}[int.from_bytes(d[p:p + {size}], 'little')]", f"p += {size}"]
        if t == T_SET:
            env[name] = tuple(col.set_values or ())
            size = int(col.size)
            return [
                f"m = int.from_bytes(d[p:p + {size}], 'little')",
                f"v{i} = {{s for k, s in enumerate({name}) if m >> k & 1}} or ''",
                f"p += {size}",
            ]
        reader: Callable[[bytes, int], tuple[Any, int]]
        if t == T_NEWDECIMAL:
            reader = _decimal_reader(int(col.precision), int(col.decimals))
        elif t == T_TIMESTAMP2:
            return _timestamp2_lines(i, int(col.fsp), env)
        elif t == T_DATE:
            env["_ZERO_DATE"], env["_date_cls"] = ZERO_DATE, dt.date
            return [  # _date, inline
                "m = d[p] | d[p + 1] << 8 | d[p + 2] << 16",
                f"v{i} = _date_cls(m >> 9, m >> 5 & 15, m & 31) "
                "if m >> 9 and m >> 5 & 15 and m & 31 else _ZERO_DATE",
                "p += 3",
            ]
        elif t in (T_DATETIME2, T_TIME2):
            fsp = int(col.fsp)
            helper = _datetime2 if t == T_DATETIME2 else _time2
            env[name + "_fsp"] = fsp
            env[name] = helper
            return [f"v{i}, p = {name}(d, p, {name}_fsp)"]
        elif t == T_TIME:
            reader = _time
        elif t == T_DATETIME:
            reader = _datetime
        elif t == T_TIMESTAMP:
            reader = _timestamp
        elif t == T_BIT:
            env[name + "_bits"] = int(col.bits)
            env[name] = _bit
            return [f"v{i}, p = {name}(d, p, {name}_bits)"]
        elif t == T_JSON:
            env[name + "_ls"] = int(col.length_size)
            env[name] = _json
            return [f"v{i}, p = {name}(d, p, {name}_ls)"]
        else:
            reader = _unknown(t)
        env[name] = reader
        return [f"v{i}, p = {name}(d, p)"]


def _le_uint(size: int) -> str:
    """An expression reading the little-endian unsigned ``size``-byte number at ``p``."""
    if size == 1:
        return "d[p]"
    if size == 2:
        return "d[p] | d[p + 1] << 8"
    return f"int.from_bytes(d[p:p + {size}], 'little')"


def _timestamp2_lines(i: int, fsp: int, env: dict[str, Any]) -> list[str]:
    """:func:`_timestamp2` as statements of the image function (no call per value)."""
    env["_EPOCH"], env["_td"], env["_BE_I32"] = _EPOCH, dt.timedelta, _BE_I32
    lines = [f"v{i} = _EPOCH + _td(seconds=_BE_I32(d, p)[0])"]
    size = (fsp + 1) // 2
    if not size:
        return [*lines, "p += 4"]
    lines.append(f"m = int.from_bytes(d[p + 4:p + {4 + size}], 'big', signed=True)")
    if fsp % 2:
        lines.append("m = int(m / 10)")
    if fsp != 6:
        lines.append(f"m *= {10 ** (6 - fsp)}")
    return [*lines, "if m > 0:", f"    v{i} = v{i}.replace(microsecond=m)", f"p += {4 + size}"]


def read_rows(
    decoder: TableDecoder, d: bytes, p: int, end: int, present: bytes, present2: bytes | None
) -> list[tuple[list[Any], list[Any] | None]]:
    """Every row of a rows event body from ``p`` to ``end``: (image, second image of an
    UPDATE or None)."""
    first = decoder.image(present)
    out: list[tuple[list[Any], list[Any] | None]] = []
    append = out.append
    if present2 is None:
        while p < end:
            values, p = first(d, p)
            append((values, None))
        return out
    second = decoder.image(present2)
    while p < end:
        before, p = first(d, p)
        after, p = second(d, p)
        append((before, after))
    return out


def negative_time2(decoded: dt.timedelta) -> dt.timedelta:
    """Undo python-mysql-replication's misreading of a negative TIME with a fraction.

    TIME2 stores ``-(S + f)`` as one packed signed number whose integer part is the floor,
    ``-(S + 1)``, and whose fraction bytes hold ``1 - f``; the library reads the integer part's
    magnitude ``S + 1`` and the fraction bytes as a signed ``-f`` and returns
    ``-((S + 1) - f)``. Debezium (and the snapshot, which reads text) give ``-(S + f)``.
    Only negative values with a fraction are affected."""
    micros = (decoded.days * 86_400 + decoded.seconds) * 1_000_000 + decoded.microseconds
    whole_plus_one = -(micros // 1_000_000)  # ceil(-micros / 1e6) = S + 1
    fraction = whole_plus_one * 1_000_000 + micros  # f, in microseconds
    return -dt.timedelta(seconds=whole_plus_one - 1, microseconds=fraction)
