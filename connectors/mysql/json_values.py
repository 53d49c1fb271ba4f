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

import datetime as dt
import decimal
import json
import re
from typing import Any

_JSON_ESCAPE = json.JSONEncoder(ensure_ascii=False)


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
        return str(value)
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
    elif operation == "Remove":
        del parent[last]
    else:
        raise JsonPathError(f"unknown JSON diff operation {operation!r}")
    return document
