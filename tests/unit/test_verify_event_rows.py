"""The generated per-table event reader of `tidemark verify` gives exactly the key and row hash
of the plain canonical path (``from_event`` + ``row_hash``) for every kind and event shape,
and names what does not fit."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from cdc.verify.canonical import CanonicalError, ColumnSpec, TableSpec, from_event, row_hash
from cdc.verify.event_rows import compile_reader

COLS = (
    ColumnSpec("id", "int", "int"),
    ColumnSpec("code", "text", "text"),
    ColumnSpec("name", "text", "text"),
    ColumnSpec("ok", "bool", "boolean"),
    ColumnSpec("price", "decimal", "numeric(10,2)", scale=2, form="precise"),
    ColumnSpec("ts", "timestamp", "timestamp", unit="us"),
    ColumnSpec("tsz", "timestamptz", "timestamptz"),
    ColumnSpec("d", "date", "date"),
    ColumnSpec("b", "bytes", "bytea", form="bytes"),
    ColumnSpec("f", "float64", "float8"),
    ColumnSpec("j", "json", "jsonb"),
)
SPEC = TableSpec("public.t", "s.public.t", COLS, ("id", "code"))
ROW: dict[str, Any] = {
    "id": 7,
    "code": "é€",
    "name": "a:b~c",
    "ok": True,
    "price": base64.b64encode((1250).to_bytes(2, "big")).decode(),
    "ts": 1_700_000_000_123_456,
    "tsz": "2024-01-01T10:00:00.5Z",
    "d": 19000,
    "b": base64.b64encode(b"\x00\xff").decode(),
    "f": 0.1,
    "j": '{"b": 1, "a": [1, 2]}',
}
KEY = {"id": 7, "code": "é€"}


def expected(row: dict[str, Any]) -> int:
    return row_hash(from_event(c, row.get(c.name)) for c in COLS)


def wrap(payload: Any) -> bytes:
    return orjson.dumps({"schema": {"type": "struct"}, "payload": payload})


@pytest.mark.parametrize(
    ("value", "alive"),
    [
        (orjson.dumps({"op": "c", "after": ROW}), True),
        (orjson.dumps({"op": "r", "before": None, "after": ROW}), True),
        (wrap({"op": "u", "before": None, "after": ROW}), True),
        (orjson.dumps({**ROW, "__deleted": "false"}), True),  # ExtractNewRecordState
        (orjson.dumps(ROW), True),
        (orjson.dumps({"op": "d", "before": ROW, "after": None}), False),
        (orjson.dumps({**ROW, "__deleted": "true"}), False),
        (None, False),  # tombstone
    ],
)
def test_reader_equals_the_canonical_path(value: bytes | None, alive: bool) -> None:
    reader = compile_reader(SPEC)
    for key in (orjson.dumps(KEY), wrap(KEY)):
        got_key, got_hash = reader(key, value)
        assert got_key == ("7", "é€")
        assert got_hash == (expected(ROW) if alive else None)


def test_nulls_and_missing_columns_hash_as_null() -> None:
    reader = compile_reader(SPEC)
    row = {"id": 1, "code": "x", "name": None}
    _, h = reader(orjson.dumps({"id": 1, "code": "x"}), orjson.dumps({"op": "c", "after": row}))
    assert h == expected(row)
    assert h != expected({**row, "name": ""})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (b"[1]", b"{}", "the key [1] is not a struct of ('id', 'code')"),
        (b'{"id": 1}', None, "'code'"),
        (b'{"id": 1, "code": "x"}', b"[1]", "the value [1] is not a change event"),
        (b'{"id": 1, "code": "x"}', b'{"op": "c", "after": {"id": "x1"}}', "x1"),
        (b'{"id": 1, "code": "x"}', b"{not json", "unexpected character"),
    ],
)
def test_events_that_do_not_fit_raise(key: bytes, value: bytes | None, message: str) -> None:
    reader = compile_reader(SPEC)
    with pytest.raises((CanonicalError, KeyError, ValueError)) as info:
        reader(key, value)
    assert message in str(info.value)
