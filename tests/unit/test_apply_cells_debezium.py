"""The apply job's parse of records written by Debezium's own Cassandra connector (no Spark).

The records are real: ``debezium-connector-cassandra-5`` 3.4.0.Final (from Maven Central, run
standalone beside the test node, Cassandra 5.0.9) captured a table while the statements listed
in ``tests/fixtures/cassandra/debezium/README.md`` ran; its JSON records were saved as they
came off the topic. What they test that tidemark's own records cannot: ``op`` ``i`` for inserts
and snapshot reads, key columns as cells, no ``before``, ``_range_start``/``_range_end`` in
every ``after``, ``ts_us`` as the write time, and ``r`` as a range delete.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cdc.apply import cells
from cdc.apply.events import BadEvent, Change, Parser, ParseSettings
from cdc.apply.fold import reduce_changes

FIXTURE = Path(__file__).parents[1] / "fixtures/cassandra/debezium/cassandra5-3.4.0.jsonl"


def _raw() -> list[dict[str, str | None]]:
    """Each record's key and value text, as Kafka held them."""
    return [json.loads(line) for line in FIXTURE.read_text().splitlines() if line]


def _records() -> list[dict[str, Any]]:
    return [{k: v and json.loads(v) for k, v in rec.items()} for rec in _raw()]


def _parse_all() -> list[Change | BadEvent]:
    parser = Parser(ParseSettings())
    out: list[Change | BadEvent] = []
    for offset, (rec, raw) in enumerate(zip(_records(), _raw(), strict=True)):
        topic = "dbz.{keyspace}.{table}".format(**rec["value"]["payload"]["source"])
        key, value = (None if t is None else t.encode() for t in (raw["key"], raw["value"]))
        parsed = parser.parse(topic, 0, offset, key, value)
        assert isinstance(parsed, Change | BadEvent), parsed
        out.append(parsed)
    return out


@pytest.fixture(scope="module")
def parsed() -> list[Change | BadEvent]:
    return _parse_all()


def _changes(parsed: list[Change | BadEvent]) -> list[Change]:
    return [p for p in parsed if isinstance(p, Change)]


def test_the_fixture_is_debeziums_own_shape() -> None:
    """Guards the premise: the records hold what the parse has to cope with."""
    recs = _records()
    ops = [r["value"]["payload"]["op"] for r in recs]
    assert ops.count("i") == 6 and "c" not in ops and ops.count("r") == 1
    first = recs[0]["value"]["payload"]
    assert first["source"]["snapshot"] == "true" and first["source"]["version"] == "3.4.0.Final"
    assert "before" not in first and first["after"]["id"] == {
        "value": 1,
        "deletion_ts": None,
        "set": True,
    }


def test_inserts_are_creates_and_the_snapshot_insert_a_read(parsed: Any) -> None:
    ops = [p.op if isinstance(p, Change) else "bad" for p in parsed]
    assert ops == ["r", "c", "c", "u", "u", "u", "u", "u", "c", "d", "d", "d", "c", "c"]
    snap = parsed[0]
    assert snap.snapshot and snap.unavailable == frozenset()
    assert snap.row["id"] == 1 and snap.row["ck"] == "a" and snap.row["v_text"] == "snap"


def test_debeziums_raw_cassandra_dates_are_read_as_days(parsed: Any) -> None:
    """Debezium writes 2024-05-06 as -2147463799 (Cassandra's biased days as a signed int)."""
    assert _records()[0]["value"]["payload"]["after"]["v_date"]["value"] == -2147463799
    assert parsed[0].row["v_date"] == "2024-05-06" and parsed[2].row["v_date"] == "2024-05-06"
    assert cells.raw_date(2**31 - 1) == -1  # 1969-12-31, stored as 2**31 - 1
    assert cells.raw_date(-(2**31)) == 0 and cells.raw_date(19849) == 19849


def test_a_range_delete_is_read_with_its_bounds_not_as_a_snapshot_row(parsed: Any) -> None:
    """DELETE FROM t1 WHERE id = 3 AND ck > 'a': Debezium's ``r`` with text bound values."""
    ranged = parsed[10]
    assert isinstance(ranged, Change) and ranged.op == "d" and ranged.row == {}
    assert ranged.range == {
        "partition": ["id"],
        "eq": {"id": 3},
        "eq_keys": {},
        "cols": [["ck", False, None]],
        "start": ["a"],
        "start_incl": False,
        "end": [],
        "end_incl": True,
    }
    # Debezium's "r" is only ever a range tombstone: without bounds it is refused, never
    # taken for a partition delete (its clustering columns are null too)
    raw = _raw()[10]
    value = json.loads(raw["value"] or "")
    value["payload"]["after"].update(_range_start=None, _range_end=None)
    again = Parser(ParseSettings()).parse(
        "t", 0, 0, (raw["key"] or "").encode(), json.dumps(value).encode()
    )
    assert isinstance(again, BadEvent) and "range delete" in again.error
    # a bound value of a type whose text the job does not read back: refused, named
    value = json.loads(raw["value"] or "")
    tuple_type = "org.apache.cassandra.db.marshal.TupleType(Int32Type,UTF8Type)"
    value["payload"]["after"]["_range_start"]["values"][0]["type"] = tuple_type
    tupled = Parser(ParseSettings()).parse(
        "t", 0, 0, (raw["key"] or "").encode(), json.dumps(value).encode()
    )
    assert isinstance(tupled, BadEvent) and "'ck'" in tupled.error and "TupleType" in tupled.error


def test_key_cells_unwrap_and_range_bounds_are_not_columns(parsed: Any) -> None:
    change = parsed[2]  # the insert of (2, 'b') with every column
    types = change.shape.types
    assert "_range_start" not in types and "_range_end" not in types
    assert "_range_start" not in change.row
    assert (types["id"], types["ck"]) == ("integer", "string")
    # Debezium's defaults: decimal as double, varint as long, tuples as structs
    assert (types["v_dec"], types["v_varint"]) == ("double", "long")
    assert change.row["id"] == 2 and change.row["ck"] == "b"
    assert change.row["v_dec"] == 3.14159 and change.row["v_list"] == ["p", "q"]
    assert change.key == {"id": 2, "ck": "b"}


def test_updates_leave_unwritten_columns_to_the_stored_row(parsed: Any) -> None:
    update = parsed[3]  # v_text = 'y', v_set = v_set + {3}
    assert update.row["v_text"] == "y"
    assert "v_text" not in update.unavailable and "v_int" in update.unavailable
    assert update.unavailable.isdisjoint({"id", "ck"})
    cell_delete = parsed[6]  # DELETE v_text
    assert cell_delete.row["v_text"] is None and "v_text" not in cell_delete.unavailable


def test_row_and_partition_deletes(parsed: Any) -> None:
    row_delete, partition_delete = parsed[9], parsed[11]
    assert row_delete.op == "d" and row_delete.row == {"id": 2, "ck": "b"}
    assert partition_delete.op == "d" and partition_delete.row == {"id": 1, "ck": None}
    assert "v_text" in row_delete.shape.types  # the shape comes from 'after' (no 'before')


def test_the_write_time_in_microseconds_orders_changes(parsed: Any) -> None:
    recs = _records()
    for change, rec in zip(parsed[1:], recs[1:], strict=True):
        if isinstance(change, Change):
            micros = rec["value"]["payload"]["source"]["ts_us"]
            assert micros in change.pos  # not ts_ms * 1000: writes in one ms stay ordered
    writes = [c for c in _changes(parsed) if c.key == {"id": 2, "ck": "b"}]
    assert [c.pos for c in writes] == sorted(c.pos for c in writes)


def test_fold_ends_with_the_delete_of_the_deleted_row(parsed: Any) -> None:
    folded = reduce_changes(_changes(parsed))
    by_key = {(r.change.key["id"], r.change.key["ck"]): r for r in folded.values()}
    assert by_key[(2, "b")].change.op == "d"
    assert by_key[(3, "c")].row["v_varint"] == -6101065172474983726  # Debezium's wrapped long
    assert by_key[(4, "d")].change.op == "c"
