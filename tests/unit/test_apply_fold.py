"""Per-key reduction of a micro-batch, including TOAST placeholder resolution (no Spark)."""

from __future__ import annotations

import itertools

from cdc.apply.events import Change, Parser, ParseSettings
from cdc.apply.fold import Folded, fold, reduce_changes, resolve
from cdc.apply.synthetic import SyntheticTable, col, pg

PH = "__debezium_unavailable_value"
T = SyntheticTable(
    "docs",
    [("id", col("int32", optional=False)), ("title", col("string")), ("body", col("string"))],
    ["id"],
)


def change(op: str, lsn: int, offset: int, **values: object) -> Change:
    row = {"id": 1, "title": None, "body": None, **values}
    key, value = T.record(op, row, pg(lsn))
    parsed = Parser(ParseSettings()).parse(T.topic, 0, offset, key, value)
    assert isinstance(parsed, Change), parsed
    return parsed


def final(changes: list[Change]) -> tuple[str, dict[str, object], tuple[str, ...]]:
    (res,) = reduce_changes(changes).values()
    return res.change.op, res.row, res.unavailable


def test_highest_source_position_wins_not_arrival_order() -> None:
    """AC-79, within one batch: LSN 5 arrives before LSN 4; LSN 5 is kept."""
    five = change("u", 5, 0, title="five")
    four = change("u", 4, 1, title="four")
    op, row, _ = final([five, four])
    assert op == "u" and row["title"] == "five"


def test_create_update_delete_in_one_batch_reduces_to_the_delete() -> None:
    op, row, _ = final(
        [change("c", 1, 0, title="a"), change("u", 2, 1, title="b"), change("d", 3, 2)]
    )
    assert op == "d" and row["id"] == 1


def test_late_update_after_delete_in_the_same_batch_loses() -> None:
    """RFC-39's example, all in one batch: Insert(1), Delete(3), Update(2) -> Delete."""
    op, _, _ = final([change("c", 1, 0), change("d", 3, 1), change("u", 2, 2, title="zombie")])
    assert op == "d"


def test_placeholder_takes_the_preceding_value_from_the_batch() -> None:
    op, row, missing = final(
        [change("c", 1, 0, title="t", body="BIG"), change("u", 2, 1, title="t2", body=PH)]
    )
    assert op == "u" and row == {"id": 1, "title": "t2", "body": "BIG"} and missing == ()


def test_placeholder_chain_resolves_to_the_last_real_value() -> None:
    changes = [
        change("c", 1, 0, title="a", body="v1"),
        change("u", 2, 1, title="b", body="v2"),
        change("u", 3, 2, title="c", body=PH),
        change("u", 4, 3, title="d", body=PH),
    ]
    for order in itertools.permutations(changes):
        _, row, missing = final(list(order))
        assert row["body"] == "v2" and row["title"] == "d" and missing == (), order


def test_placeholder_is_never_filled_from_before_a_delete() -> None:
    changes = [
        change("c", 1, 0, body="old-life"),
        change("d", 2, 1),
        change("u", 4, 3, title="new", body=PH),
    ]
    for order in itertools.permutations(changes):
        _, row, missing = final(list(order))
        assert row["body"] is None and missing == ("body",), order


def test_reinsert_after_delete_provides_the_value() -> None:
    changes = [
        change("c", 1, 0, body="old"),
        change("d", 2, 1),
        change("c", 3, 2, body="new"),
        change("u", 4, 3, body=PH),
    ]
    for order in itertools.permutations(changes):
        _, row, missing = final(list(order))
        assert row["body"] == "new" and missing == (), order


def test_unresolved_placeholder_is_reported_for_the_merge_to_keep_the_stored_value() -> None:
    res = resolve(fold(None, change("u", 9, 0, title="x", body=PH)))
    assert res.unavailable == ("body",)
    assert res.row["body"] is None and res.fill_positions == {}


def test_fill_positions_travel_with_the_row() -> None:
    state: Folded | None = None
    for ch in [change("u", 5, 0, body="v5"), change("u", 7, 1, body=PH)]:
        state = fold(state, ch)
    assert state is not None
    res = resolve(state)
    assert res.fill_positions == {"body": (1, 5, 0)}


def test_a_row_written_after_a_delete_of_the_batch_carries_the_delete_as_its_cut() -> None:
    """Whatever the arrival order: the MERGE of a Cassandra table keeps no stored cell at or
    below the cut (cell_merge.py); a delete that wins has no cut, nor a row without one."""
    changes = [change("c", 1, 0, body="old"), change("d", 2, 1), change("u", 4, 3, title="t")]
    for order in itertools.permutations(changes):
        (res,) = reduce_changes(list(order)).values()
        assert res.change.op == "u" and res.cut == (1, 2, 1), order
    (res,) = reduce_changes([change("c", 1, 0), change("d", 2, 1)]).values()
    assert res.change.op == "d" and res.cut is None
    (res,) = reduce_changes([change("d", 5, 1), change("u", 4, 0, title="t")]).values()
    assert res.change.op == "d" and res.cut is None
    (res,) = reduce_changes([change("c", 1, 0), change("u", 3, 1, title="t")]).values()
    assert res.cut is None


def test_the_newest_row_marker_above_the_deletes_travels_with_the_row() -> None:
    """An INSERT (or snapshot read) gives a Cassandra row a marker that keeps it alive with
    every cell null; in any arrival order the fold passes the newest one a delete of the batch
    has not shadowed (cell_merge.py)."""
    insert, update = change("c", 1, 0, body="b"), change("u", 3, 2, title="t")
    for order in itertools.permutations([insert, update]):
        (res,) = reduce_changes(list(order)).values()
        assert res.change.op == "u" and res.marker == insert.pos, order
    shadowed = [insert, change("d", 2, 1), update]
    for order in itertools.permutations(shadowed):
        (res,) = reduce_changes(list(order)).values()
        assert res.marker is None, order
    (res,) = reduce_changes([change("u", 1, 0, title="t"), change("u", 2, 1)]).values()
    assert res.marker is None
    (res,) = reduce_changes([change("r", 1, 0), change("c", 2, 1), change("u", 3, 2)]).values()
    assert res.marker == (1, 2, 1)
    (res,) = reduce_changes([insert, change("d", 2, 1)]).values()
    assert res.change.op == "d" and res.marker is None


def test_duplicate_record_is_ignored() -> None:
    a = change("u", 5, 3, title="x")
    state = fold(fold(None, a), a)
    assert state.winner is a and state.count == 2


def test_keys_and_tables_are_reduced_separately() -> None:
    a = change("c", 1, 0, title="one")
    b = change("c", 2, 1, title="two")
    b.key = {"id": 2}
    b.row["id"] = 2
    assert len(reduce_changes([a, b])) == 2
