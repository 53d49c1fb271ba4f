"""MySQL's JSON values as the server prints them, and MySQL 8 partial JSON updates.

MariaDB stores JSON as text, so both the binlog and ``SELECT`` return the same string. MySQL
stores a binary format: ``SELECT`` returns the server's canonical text (``{"a": 1, "b": [1,
2]}``: ``", "`` and ``": "`` separators, keys in storage order), while the binlog returns the
binary document, which python-mysql-replication decodes into Python objects with ``bytes``
keys and strings. :func:`mysql_json_text` prints those objects the way the server would, so a
streamed row and a snapshot row of the same document carry the same ``io.debezium.data.Json``
string.

With ``binlog_row_value_options=PARTIAL_JSON`` MySQL 8 logs only the modification
(``JSON_SET``/``JSON_REPLACE``/``JSON_REMOVE``) of a JSON column in the after image;
:func:`apply_json_diff` applies it to the before image to get the full new document.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import re
from typing import Any

_JSON_ESCAPE = json.JSONEncoder(ensure_ascii=False)


# -- opaque values ------------------------------------------------------------------------------
# A binary JSON document keeps a DECIMAL, DATE, TIME or DATETIME (or any other MySQL value) as
# an "opaque" value: its MySQL type and bytes. python-mysql-replication's reader turns DATE
# into a datetime, loses a negative TIME's sign, fails on a TIME of 24 hours or more, and
# decodes other bytes as text; this reader keeps what the server prints.
_DECIMALS = (0, 246)  # DECIMAL, NEWDECIMAL
_TIMES = (11, 19)  # TIME, TIME2
_DATES = (10,)  # DATE
_DATETIMES = (7, 12, 17, 18)  # TIMESTAMP, DATETIME, TIMESTAMP2, DATETIME2


class Opaque:
    """An opaque value of another MySQL type: the server prints ``base64:type<N>:<bytes>``."""

    __slots__ = ("data", "type")

    def __init__(self, type_: int, data: bytes) -> None:
        self.type, self.data = type_, data

    def text(self) -> str:
        return f"base64:type{self.type}:{base64.b64encode(self.data).decode()}"


def parse_opaque(data: bytes) -> Any:
    """The replacement for the library's reader (installed by :func:`install`)."""
    from pymysqlreplication.json_binary import decode_variable_length
    from pymysqlreplication.util.bytes import parse_decimal_from_bytes

    if len(data) < 1:
        return None
    type_, data = data[0], data[1:]
    length, n = decode_variable_length(data)
    data = bytes(data[n : n + length])
    if type_ in _DECIMALS:
        return parse_decimal_from_bytes(data[2:], data[0], data[1])
    if type_ in _TIMES + _DATES + _DATETIMES:
        packed = int.from_bytes(data[:8].ljust(8, b"\0"), "little", signed=True)
        return _packed_time(packed) if type_ in _TIMES else _packed_date(packed, type_)
    return Opaque(type_, data)


def _packed_time(packed: int) -> dt.timedelta:
    """MySQL's packed TIME: hours (up to 838), minutes, seconds and microseconds, signed."""
    sign, v = (-1 if packed < 0 else 1), abs(packed)
    whole, micros = v >> 24, v % (1 << 24)
    hours, minutes, seconds = (whole >> 12) % (1 << 10), (whole >> 6) % (1 << 6), whole % (1 << 6)
    return sign * dt.timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=micros)


def _packed_date(packed: int, type_: int) -> Any:
    v = abs(packed)
    whole, micros = v >> 24, v % (1 << 24)
    ymd, hms = whole >> 17, whole % (1 << 17)
    year, month, day = (ymd >> 5) // 13, (ymd >> 5) % 13, ymd % (1 << 5)
    hour, minute, second = hms >> 12, (hms >> 6) % (1 << 6), hms % (1 << 6)
    if type_ in _DATES:
        if not (year and month and day):
            return _Printed(f"{year:04d}-{month:02d}-{day:02d}")
        return dt.date(year, month, day)
    if not (year and month and day):  # a zero date: as the server prints it
        return _Printed(
            f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}.{micros:06d}"
        )
    return dt.datetime(year, month, day, hour, minute, second, micros)


class _Printed(str):
    """A value whose JSON text is this string, quoted (a zero date)."""


def install() -> None:
    """Make the library's binary JSON reader use :func:`parse_opaque`."""
    import pymysqlreplication.json_binary as binary

    binary.parse_opaque = parse_opaque


def normalize(value: Any) -> Any:
    """bytes keys and strings → str (the binlog decoder yields bytes), recursively."""
    if isinstance(value, dict):
        return {_text(k): normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return _text(value)
    return value


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _double(value: float) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        return "null"
    text = repr(value)  # shortest round-trip digits, as MySQL prints doubles (2.0, 1.5, 1e300)
    if "e" in text:
        mantissa, exp = text.split("e")
        sign = "-" if exp.startswith("-") else ""
        text = f"{mantissa}e{sign}{exp.lstrip('+-').lstrip('0') or '0'}"
    return text


def mysql_json_text(value: Any) -> str:
    """The text MySQL prints for a decoded binary JSON value."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _double(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")  # 0.00000010, as the server prints it, not 1.0E-7
    if isinstance(value, Opaque):
        return _JSON_ESCAPE.encode(value.text())
    if isinstance(value, bytes | bytearray | str):
        return _JSON_ESCAPE.encode(_text(value))
    if isinstance(value, dict):
        items = ", ".join(
            f"{_JSON_ESCAPE.encode(_text(k))}: {mysql_json_text(v)}" for k, v in value.items()
        )
        return "{" + items + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(mysql_json_text(v) for v in value) + "]"
    if isinstance(value, dt.datetime):
        return f'"{value.strftime("%Y-%m-%d %H:%M:%S.%f")}"'
    if isinstance(value, dt.date):
        return f'"{value.isoformat()}"'
    if isinstance(value, dt.timedelta | dt.time):
        return f'"{_time_text(value)}"'
    return _JSON_ESCAPE.encode(str(value))


def _time_text(value: dt.timedelta | dt.time) -> str:
    if isinstance(value, dt.time):
        return value.strftime("%H:%M:%S.%f")
    total = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    sign = "-" if total < 0 else ""
    total = abs(total)
    secs, micros = divmod(total, 1_000_000)
    return f"{sign}{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}.{micros:06d}"


# -- partial updates ----------------------------------------------------------------------------

_PATH_TOKEN = re.compile(r'\.(?:"((?:[^"\\]|\\.)*)"|([A-Za-z_$][\w$]*))|\[(\d+)\]')


class JsonPathError(ValueError):
    pass


def parse_path(path: str) -> list[str | int]:
    """``$.a."b c"[2]`` → ``["a", "b c", 2]`` (the paths MySQL writes in JSON diffs)."""
    if not path.startswith("$"):
        raise JsonPathError(f"JSON path {path!r} does not start with $")
    out: list[str | int] = []
    pos = 1
    while pos < len(path):
        m = _PATH_TOKEN.match(path, pos)
        if m is None:
            raise JsonPathError(f"cannot read JSON path {path!r} at {path[pos:]!r}")
        if m.group(1) is not None:
            out.append(json.loads(f'"{m.group(1)}"'))
        elif m.group(2) is not None:
            out.append(m.group(2))
        else:
            out.append(int(m.group(3)))
        pos = m.end()
    return out


def apply_json_diff(document: Any, operation: str, path: str, value: Any = None) -> Any:
    """Apply one logged modification (``Replace``, ``Insert`` or ``Remove``) and return the
    new document. ``document`` and ``value`` are decoded (normalized) JSON values."""
    steps = parse_path(path)
    if not steps:
        if operation == "Replace":
            return value
        raise JsonPathError(f"cannot {operation} the whole document")
    parent = document
    for step in steps[:-1]:
        parent = parent[step]
    last = steps[-1]
    if operation == "Replace":
        parent[last] = value
    elif operation == "Insert":
        if isinstance(parent, list) and isinstance(last, int):
            parent.insert(last, value)
        else:
            parent[last] = value
            if isinstance(parent, dict):  # MySQL keeps an object's keys by length, then bytes
                ordered = sorted(
                    parent.items(), key=lambda kv: (len(kv[0].encode()), kv[0].encode())
                )
                parent.clear()
                parent.update(ordered)
    elif operation == "Remove":
        del parent[last]
    else:
        raise JsonPathError(f"unknown JSON diff operation {operation!r}")
    return document
