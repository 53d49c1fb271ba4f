"""tidemark verify's core: canonical texts, chunked comparison with drill-down and re-checks,
and the report, with in-memory sides (the SQL sides are tested against real databases in
tests/integration/test_verify_*.py)."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from cdc.verify.canonical import (
    CanonicalError,
    ColumnSpec,
    KeyTexts,
    TableSpec,
    from_event,
    from_python,
    row_hash,
)
from cdc.verify.compare import Options, compare_table
from cdc.verify.contract import Boundary, Checksum
from cdc.verify.report import gauges, summary, to_json

ID = ColumnSpec("id", "int", "integer")
NAME = ColumnSpec("name", "text", "text")
SPEC = TableSpec("public.t", "srv.public.t", (ID, NAME), ("id",))


@pytest.mark.parametrize(
    ("col", "event_value", "python_value", "text"),
    [
        (ColumnSpec("a", "int", "int"), 42, 42, "42"),
        (ColumnSpec("a", "text", "text"), "héllo", "héllo", "héllo"),
        (ColumnSpec("a", "bool", "bool"), True, True, "true"),
        (
            ColumnSpec("a", "decimal", "numeric(10,2)", scale=2, form="precise"),
            base64.b64encode((1250).to_bytes(2, "big", signed=True)).decode(),
            decimal.Decimal("12.50"),
            "12.50",
        ),
        (
            ColumnSpec("a", "decimal", "numeric(10,2)", scale=2, form="precise"),
            base64.b64encode((-5).to_bytes(1, "big", signed=True)).decode(),
            decimal.Decimal("-0.05"),
            "-0.05",
        ),
        (
            ColumnSpec("a", "decimal", "numeric", form="precise"),
            {"scale": 3, "value": base64.b64encode((1500).to_bytes(2, "big")).decode()},
            decimal.Decimal("1.500"),
            "1.5",  # a numeric without scale: trailing zeros stripped, as the connector does
        ),
        (
            ColumnSpec("a", "decimal", "decimal(30,10)", scale=10, form="string"),
            "12345678901234567890.0000000001",
            decimal.Decimal("12345678901234567890.0000000001"),
            "12345678901234567890.0000000001",
        ),
        (ColumnSpec("a", "date", "date"), 19723, dt.date(2024, 1, 1), "19723"),
        (
            ColumnSpec("a", "timestamp", "timestamp(6)", unit="us"),
            1704067200123456,
            dt.datetime(2024, 1, 1, 0, 0, 0, 123456),
            "1704067200123456",
        ),
        (
            ColumnSpec("a", "timestamp", "timestamp(3)", unit="ms"),
            1704067200123,
            dt.datetime(2024, 1, 1, 0, 0, 0, 123000),
            "1704067200123",
        ),
        (
            ColumnSpec("a", "timestamptz", "timestamptz"),
            "2024-01-01T00:00:00.5Z",
            dt.datetime(2024, 1, 1, 1, 0, 0, 500000, tzinfo=dt.timezone(dt.timedelta(hours=1))),
            "1704067200500000",
        ),
        (
            ColumnSpec("a", "time", "time", unit="us"),
            3723000004,
            dt.time(1, 2, 3, 4),
            "3723000004",
        ),
        (
            ColumnSpec("a", "bytes", "bytea", form="bytes"),
            base64.b64encode(b"\x00\xffA").decode(),
            b"\x00\xffA",
            "00ff41",
        ),
        (ColumnSpec("a", "bytes", "bytea", form="hex"), "00ff41", b"\x00\xffA", "00ff41"),
        (ColumnSpec("a", "float32", "real"), 1.1, 1.100000023841858, "1.100000023841858"),
        (ColumnSpec("a", "float64", "double"), 0.1, 0.1, "0.1"),
        (ColumnSpec("a", "json", "jsonb"), '{"b": 1, "a": [1, 2]}', {"a": [1, 2], "b": 1}, None),
    ],
)
def test_event_and_python_values_have_one_canonical_text(
    col: ColumnSpec, event_value: object, python_value: object, text: str | None
) -> None:
    from_kafka = from_event(col, event_value)
    assert from_kafka == from_python(col, python_value)
    if text is not None:
        assert from_kafka == text


def test_null_and_bad_values() -> None:
    assert from_event(ID, None) is None
    with pytest.raises(CanonicalError, match="column id: 'x' is not a int value"):
        from_event(ID, "x")


def test_row_hash_is_the_60_bit_md5_prefix_of_the_length_prefixed_row_text() -> None:
    expected = int(hashlib.md5(b"1:72:ab~").hexdigest()[:15], 16)
    assert row_hash(["7", "ab", None]) == expected
    # a separator in the data cannot make two rows hash alike
    assert row_hash(["a:b", "c"]) != row_hash(["a", "b:c"])
    assert row_hash([None, ""]) != row_hash(["", None])


# -- comparison with in-memory sides -------------------------------------------------------


def h(key: int, name: str) -> int:
    return row_hash([str(key), name])


class MemorySource:
    def __init__(self, rows: dict[int, str]) -> None:
        self.rows = rows
        self.checksums = 0

    def tables(self, selected: Sequence[str]) -> list[TableSpec]:
        return [SPEC]

    def _range(self, lo: Boundary | None, hi: Boundary | None) -> dict[KeyTexts, int]:
        return {
            (str(k),): h(k, v)
            for k, v in self.rows.items()
            if (lo is None or k > lo.raw[0]) and (hi is None or k <= hi.raw[0])
        }

    def boundaries(self, spec: TableSpec, chunk_rows: int) -> list[Boundary]:
        keys = sorted(self.rows)
        return [Boundary((k,), (str(k),)) for k in keys[chunk_rows - 1 :: chunk_rows]]

    def checksum(self, spec: TableSpec, lo: Boundary | None, hi: Boundary | None) -> Checksum:
        self.checksums += 1
        part = self._range(lo, hi)
        return Checksum(len(part), sum(part.values()))

    def row_hashes(
        self, spec: TableSpec, lo: Boundary | None, hi: Boundary | None
    ) -> dict[KeyTexts, int]:
        return self._range(lo, hi)

    def close(self) -> None:
        pass


class MemoryTarget:
    """A topic whose later states arrive one per refresh (capture catching up)."""

    name = "kafka"

    def __init__(self, *states: dict[int, str]) -> None:
        self.states = list(states)
        self.current: dict[KeyTexts, int] = {}

    def refresh(self, specs: Sequence[TableSpec]) -> None:
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        self.current = {(str(k),): h(k, v) for k, v in state.items()}

    def rows(self, spec: TableSpec) -> Mapping[KeyTexts, int]:
        return self.current

    def close(self) -> None:
        pass


def no_sleep(_: float) -> None:
    pass


def test_equal_tables_compare_chunk_checksums_only() -> None:
    rows = {k: f"n{k}" for k in range(1, 101)}
    source = MemorySource(rows)
    result = compare_table(source, MemoryTarget(dict(rows)), SPEC, Options(chunk_rows=10))
    assert result.equal
    assert (result.source_rows, result.target_rows, result.chunks) == (100, 100, 11)
    assert result.chunks_differing == 0


def test_differences_are_named_by_key() -> None:
    rows = {k: f"n{k}" for k in range(1, 101)}
    downstream = dict(rows)
    del downstream[17]  # missing
    downstream[500] = "ghost"  # extra, beyond the last boundary
    downstream[0] = "ghost"  # extra, before the first
    downstream[42] = "old"  # stale
    result = compare_table(
        MemorySource(rows),
        MemoryTarget(downstream),
        SPEC,
        Options(chunk_rows=10, recheck_rounds=2),
        sleep=no_sleep,
    )
    assert not result.equal
    assert result.missing == [("17",)]
    assert result.extra == [("0",), ("500",)]
    assert result.stale == [("42",)]
    assert result.rechecks == 2
    assert result.chunks_differing == 4


def test_a_target_that_catches_up_is_equal_after_a_recheck() -> None:
    rows = {k: f"n{k}" for k in range(1, 51)}
    behind = {k: v for k, v in rows.items() if k < 45}
    result = compare_table(
        MemorySource(rows),
        MemoryTarget(behind, dict(rows)),
        SPEC,
        Options(chunk_rows=10, recheck_rounds=3),
        sleep=no_sleep,
    )
    assert result.equal
    assert result.rechecks == 1


def test_report_table_json_and_gauges(tmp_path: Path) -> None:
    rows = {1: "a", 2: "b"}
    result = compare_table(
        MemorySource(rows),
        MemoryTarget({1: "a", 3: "c"}),
        SPEC,
        Options(recheck_rounds=0),
        sleep=no_sleep,
    )
    text = summary([result])
    assert "public.t" in text and "DIFFERENT" in text
    assert "public.t: missing keys: 2" in text
    assert "public.t: extra keys: 3" in text
    doc = to_json("inv", [result])
    assert doc["equal"] is False
    table = doc["tables"][0]
    assert (table["missing"], table["extra"], table["stale"]) == ([["2"]], [["3"]], [])
    registry = gauges("inv", [result])
    labels = {"connector": "inv", "table": "public.t", "target": "kafka"}
    assert registry.get_sample_value("tidemark_verify_equal", labels) == 0
    assert registry.get_sample_value("tidemark_verify_missing_rows", labels) == 1
    assert registry.get_sample_value("tidemark_verify_extra_rows", labels) == 1
