"""Cassandra sets and maps written by element (deltas.py), without Spark: the delta algebra
against applying the writes one by one, the parse of the connector's ``removed`` cell field,
and the worker's fold of several writes of one key."""

from __future__ import annotations

import itertools
import random
from typing import Any

import orjson

from cdc.apply import deltas
from cdc.apply.deltas import Delta
from cdc.apply.fold import reduce_changes
from tests.unit.test_apply_cells import parse_all


def _one_by_one(before: Any, writes: list[Delta]) -> Any:
    for d in writes:
        before = deltas.apply(before, d)
    return before


def test_composed_deltas_do_what_the_writes_do_one_by_one() -> None:
    """Random adds and removals over a small domain (so they collide), sets and maps: a
    composed delta applied to any collection equals the writes applied in order, the removal
    winning within one write, and an empty result is null."""
    rng = random.Random(7)
    for _ in range(2000):
        is_map = rng.random() < 0.5

        def some(n: int) -> list[int]:
            return rng.sample(range(6), rng.randint(0, n))

        def write(is_map: bool = is_map) -> Delta:
            added, gone = some(3), some(2)
            if is_map:
                return Delta({k: rng.randint(0, 9) for k in added}, dict.fromkeys(gone))
            return Delta(added, gone)

        writes = [write() for _ in range(rng.randint(1, 4))]
        stored: Any = ({k: -1 for k in some(4)} if is_map else some(4)) or None
        composed = writes[0]
        for d in writes[1:]:
            composed = deltas.apply(composed, d)
        assert isinstance(composed, Delta)
        expected = _one_by_one(stored, writes)
        got = deltas.apply(stored, composed)
        if is_map:
            assert got == expected
        else:
            assert (sorted(got) if got else got) == (sorted(expected) if expected else expected)


def test_apply_to_a_set_and_a_map() -> None:
    assert deltas.apply([1, 2], Delta([3], [1])) == [2, 3]
    assert deltas.apply(None, Delta([3], [])) == [3]
    assert deltas.apply([1], Delta([], [1])) is None  # no empty non-frozen collection
    assert deltas.apply([1], Delta([1], [1])) is None  # the tombstone wins a tie
    assert deltas.apply({"a": 1}, Delta({"a": 2, "b": 3}, {"b": None})) == {"a": 2}


def _cell(column: str, items: dict[str, Any], *, is_map: bool) -> dict[str, Any]:
    value = (
        {"type": "map", "keys": {"type": "string"}, "values": items}
        if is_map
        else {"type": "array", "items": items}
    )
    removed = {"type": "array", "items": {"type": "string"} if is_map else items}
    return {
        "type": "struct",
        "optional": True,
        "field": column,
        "fields": [
            {**value, "optional": True, "field": "value"},
            {"type": "int64", "optional": True, "field": "deletion_ts"},
            {"type": "boolean", "optional": False, "field": "set"},
            {**removed, "optional": True, "field": "removed"},
        ],
    }


TS = {"type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp"}
ROW = {
    "type": "struct",
    "optional": True,
    "fields": [
        {"type": "int32", "optional": False, "field": "id"},
        _cell("tags", {"type": "string", "optional": True}, is_map=False),
        _cell("seen", TS, is_map=False),
        _cell("qty", {"type": "int32", "optional": True}, is_map=True),
    ],
}
ENVELOPE = {
    "type": "struct",
    "optional": False,
    "fields": [
        {**ROW, "field": "before"},
        {**ROW, "field": "after"},
        {
            "type": "struct",
            "optional": False,
            "field": "source",
            "fields": [
                {"type": "string", "optional": False, "field": "connector"},
                {"type": "string", "optional": False, "field": "keyspace"},
                {"type": "int64", "optional": False, "field": "ts_micro"},
            ],
        },
        {"type": "string", "optional": False, "field": "op"},
    ],
}


def cell(value: Any, removed: list[Any] | None = None) -> dict[str, Any]:
    return {
        "value": value,
        "deletion_ts": None if removed is not None else 1,
        "set": True,
        "removed": removed,
    }


def record(op: str, ts: int, **cols: Any) -> tuple[bytes, bytes]:
    after = {"id": 1, "tags": None, "seen": None, "qty": None, **cols}
    source = {"connector": "cassandra", "keyspace": "shop", "ts_micro": ts, "snapshot": op == "r"}
    payload = {"before": None, "after": None if op == "d" else after, "source": source, "op": op}
    return orjson.dumps({"id": 1}), orjson.dumps({"schema": ENVELOPE, "payload": payload})


def test_the_removed_field_is_read_in_the_columns_form_and_normalized() -> None:
    [c] = parse_all(
        record(
            "u",
            100,
            tags=cell(["a"], ["b"]),
            seen=cell([], [1_700_000_000_000]),
            qty=cell({"x": 1}, ["y"]),
        )
    )
    assert c.row["tags"] == ["a"] and c.removed is not None
    assert c.removed["tags"] == ["b"]
    assert c.removed["qty"] == {"y": None}  # a map's removed keys as a map, for from_json
    # a timestamp element is rewritten as the value's elements are
    [added] = parse_all(record("u", 100, seen=cell([1_700_000_000_000], [])))
    assert c.removed["seen"] == added.row["seen"] != [1_700_000_000_000]
    # a whole write, and a snapshot read, are no deltas
    [whole, snap] = parse_all(
        record("u", 101, tags=cell(["a"])), record("r", 102, tags=cell(["a"], []))
    )
    assert whole.removed is None and snap.removed is None


def test_fold_applies_deltas_to_the_batchs_earlier_value() -> None:
    """INSERT tags {a, b}, then tags + {c}, then tags - {a}, qty['x'] = 1 in one batch: the
    row holds the whole result, nothing left for the stored value."""
    [res] = reduce_changes(
        parse_all(
            record("c", 100, tags=cell(["a", "b"])),
            record("u", 101, tags=cell(["c"], [])),
            record("u", 102, tags=cell([], ["a"]), qty=cell({"x": 1}, [])),
        )
    ).values()
    assert sorted(res.row["tags"]) == ["b", "c"]
    assert res.row["qty"] == {"x": 1}  # a delta of an unknown map stays a delta
    assert res.removed == {"qty": {}}


def test_fold_composes_deltas_over_an_unknown_stored_value() -> None:
    """Only deltas in the batch (one through a write of another column): the row carries one
    delta doing all of them, for the MERGE to apply to the stored set."""
    [res] = reduce_changes(
        parse_all(
            record("u", 100, tags=cell(["a"], ["z"])),
            record("u", 101, qty=cell({"x": 1})),
            record("u", 102, tags=cell(["b"], ["a"])),
        )
    ).values()
    assert res.row["tags"] == ["b"] and res.removed is not None
    assert sorted(res.removed["tags"]) == ["a", "z"]
    assert "tags" not in res.unavailable


def test_fold_takes_a_delta_from_an_earlier_write_as_a_fill() -> None:
    [res] = reduce_changes(
        parse_all(record("u", 100, tags=cell(["a"], ["z"])), record("u", 101, qty=cell({"x": 1})))
    ).values()
    assert res.row["tags"] == ["a"] and res.removed == {"tags": ["z"]}
    assert res.fill_positions["tags"] < res.change.pos


def test_a_delta_after_a_delete_of_the_batch_stays_a_delta_behind_the_cut() -> None:
    """The delete may be older than the stored collection (a late delete), so the delta is
    left for the MERGE, which applies it to the stored value only if that is newer than the
    cut; the value from before the delete in the batch is gone either way."""
    [res] = reduce_changes(
        parse_all(
            record("c", 100, tags=cell(["a"])),
            record("d", 101),
            record("u", 102, tags=cell(["b"], ["c"])),
        )
    ).values()
    assert res.row["tags"] == ["b"] and res.removed == {"tags": ["c"]}
    assert res.cut is not None


def _folded(changes: list[Any]) -> tuple[Any, Any, Any]:
    [res] = reduce_changes(changes).values()
    tags = res.row["tags"]
    return sorted(tags) if tags else tags, res.removed, res.cut


def test_the_fold_of_deltas_does_not_depend_on_arrival_order() -> None:
    """Commit logs hold writes in arrival order, not write-time order: whatever order a key's
    whole writes, deltas and deletes arrive in, the fold gives what applying them in position
    order gives."""
    cases = [
        [record("u", 100, tags=cell(["a"], [])), record("u", 101, tags=cell(["b"], []))],
        [record("u", 100, tags=cell(["x"])), record("u", 101, tags=cell(["b"], []))],
        [
            record("u", 100, tags=cell(["a"])),
            record("d", 101),
            record("u", 102, tags=cell(["b"], [])),
        ],
        [
            record("u", 100, tags=cell(["a", "z"])),
            record("u", 101, qty=cell({"k": 1})),
            record("u", 102, tags=cell(["b"], ["z"])),
            record("u", 103, tags=cell(["c"], [])),
        ],
    ]
    for events in cases:
        changes = parse_all(*events)
        expected = _folded(changes)
        for order in itertools.permutations(changes):
            assert _folded(list(order)) == expected, order
    assert _folded(parse_all(*cases[0])) == (["a", "b"], {"tags": []}, None)
    assert _folded(parse_all(*cases[1]))[:2] == (["b", "x"], None)
    assert _folded(parse_all(*cases[2]))[:2] == (["b"], {"tags": []})
    assert _folded(parse_all(*cases[3]))[:2] == (["a", "b", "c"], None)
