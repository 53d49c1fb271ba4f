"""One event of a table's topic -> (key texts, row hash or None for gone), fast.

Reading a topic is the verify step that touches every event, so the per-event work is a
function generated per table (:func:`compile_reader`): one ``orjson`` parse of the key and of
the value, the key and row texts built inline for the common kinds (int-like, text, bool)
with no per-column call or generator, and one MD5 of the row text (its first 60 bits
taken from the digest's bytes, not its hex). Other kinds call
:func:`cdc.verify.canonical.from_event`. The result equals
``row_hash(from_event(c, after[c.name]) for c in spec.columns)`` exactly (a unit test holds
the two together); only its speed differs.

Events: a tombstone (no value), ``op: d``, or an unwrapped row with ``__deleted: "true"``
(``ExtractNewRecordState``) yield ``None`` (the key is gone); an envelope's ``after`` or an
unwrapped row yields its hash. Both converter forms (with or without schemas) are read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import orjson

from cdc.verify.canonical import CanonicalError, ColumnSpec, KeyTexts, TableSpec, from_event

#: (raw key, raw value) -> (key texts, row hash, or None when the key is gone)
Reader = Callable[[bytes | None, bytes | None], tuple[KeyTexts, int | None]]

_INT_KINDS = ("int", "date", "timestamp", "time")


def _payload(doc: Any) -> Any:
    if type(doc) is dict and "payload" in doc and "schema" in doc:
        return doc["payload"]
    return doc


def _text_line(target: str, var: str, i: int, col: ColumnSpec) -> str:
    """A statement setting ``target`` to the canonical text (or None) of the JSON value
    ``var`` of column ``i`` (``_c{i}`` in the generated code's namespace)."""
    if col.kind in _INT_KINDS:
        conv = f"str({var}) if type({var}) is int else str(int({var}))"
    elif col.kind == "text":
        conv = f"{var} if type({var}) is str else str({var})"
    elif col.kind == "bool":
        conv = f"'true' if {var} else 'false'"
    else:
        conv = f"_from_event(_c{i}, {var})"
    return f"{target} = None if {var} is None else ({conv})"


def compile_reader(spec: TableSpec) -> Reader:
    """The reader of one table's events (see the module docstring)."""
    ns: dict[str, Any] = {
        "_loads": orjson.loads,
        "_payload": _payload,
        "_md5": hashlib.md5,
        "_from_bytes": int.from_bytes,
        "_from_event": from_event,
        "_CanonicalError": CanonicalError,
        "_key_name": spec.key,
    }
    cols = spec.columns
    by_name = {c.name: i for i, c in enumerate(cols)}
    lines = ["def read(raw_key, raw_value):", "    k = _payload(_loads(raw_key or b'null'))"]
    lines.append("    if type(k) is not dict:")
    lines.append("        raise _CanonicalError(f'the key {k!r} is not a struct of {_key_name}')")
    key_parts = []
    for j, name in enumerate(spec.key):
        i = by_name[name]
        ns[f"_c{i}"] = cols[i]
        lines.append(f"    x = k[{name!r}]")
        lines.append("    " + _text_line(f"k{j}", "x", i, cols[i]))
        key_parts.append(f"k{j} or ''")
    key_expr = "(" + ", ".join(key_parts) + ",)"
    lines += [
        "    if raw_value is None:",
        f"        return {key_expr}, None",
        "    v = _payload(_loads(raw_value))",
        "    if type(v) is not dict:",
        "        raise _CanonicalError(f'the value {v!r} is not a change event')",
        "    op = v.get('op')",
        "    if op is not None and ('after' in v or 'before' in v):",
        "        a = v.get('after') if op != 'd' else None",
        "    elif str(v.get('__deleted', 'false')) == 'true':",
        "        a = None",
        "    else:",
        "        a = v",
        "    if a is None:",
        f"        return {key_expr}, None",
    ]
    parts = []
    for i, col in enumerate(cols):
        ns[f"_c{i}"] = col
        lines.append(f"    x = a.get({col.name!r})")
        lines.append("    " + _text_line(f"t{i}", "x", i, col))
        parts.append(f"('~' if t{i} is None else f'{{len(t{i})}}:{{t{i}}}')")
    lines.append(f"    text = {' + '.join(parts) if parts else repr('')}")
    lines.append(
        "    return "
        + key_expr
        + ", _from_bytes(_md5(text.encode(), usedforsecurity=False).digest()[:8], 'big') >> 4"
    )
    exec(compile("\n".join(lines) + "\n", f"<tidemark:verify-reader:{spec.topic}>", "exec"), ns)
    fn: Reader = ns["read"]
    return fn
