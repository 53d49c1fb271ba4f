"""Cassandra cell-level writes in the apply job (no Spark): parsing the cell structs into plain
values and unset columns, the fold's merge rule, and the MERGE expression that keeps stored
values of any type."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from cdc.apply import cells
from cdc.apply.events import BadEvent, Change, Parser, ParseSettings, Skipped
from cdc.apply.fold import reduce_changes
from cdc.apply.merge import _update_expr
from cdc.apply.policy import TablePlan

TOPIC = "cs.shop.orders"


def _cell(column: str, type_: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "struct",
        "optional": True,
        "field": column,
        "fields": [
            {"type": type_, "optional": True, "field": "value", **extra},
            {"type": "int64", "optional": True, "field": "deletion_ts"},
            {"type": "boolean", "optional": False, "field": "set"},
        ],
    }


ROW_SCHEMA = {
    "type": "struct",
    "optional": True,
    "name": "cs.shop.orders.Value",
    "fields": [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "int32", "optional": False, "field": "line"},
        _cell("item", "string"),
        _cell("qty", "int32"),
        _cell("at", "int64", name="org.apache.kafka.connect.data.Timestamp", version=1),
    ],
}
SOURCE_SCHEMA = {
    "type": "struct",
    "optional": False,
    "name": "io.debezium.connector.cassandra.Source",
    "field": "source",
    "fields": [
        {"type": "string", "optional": False, "field": f}
        for f in ("connector", "cluster", "keyspace", "table", "file")
    ]
    + [{"type": "int64", "optional": False, "field": f} for f in ("pos", "ts_micro", "ts_ms")],
}
ENVELOPE = {
    "type": "struct",
    "optional": False,
    "fields": [
        {**ROW_SCHEMA, "field": "before"},
        {**ROW_SCHEMA, "field": "after"},
        SOURCE_SCHEMA,
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
    ],
}


def cell(value: Any, deleted: int | None = None) -> dict[str, Any]:
    return {"value": value, "deletion_ts": deleted, "set": True}


def record(
    op: str, key: dict[str, Any], cols: dict[str, Any], ts: int, *, schema: bool = True
) -> tuple[bytes, bytes]:
    after = None if op == "d" else {**key, "item": None, "qty": None, "at": None, **cols}
    source = {
        "connector": "cassandra",
        "cluster": "c1",
        "keyspace": "shop",
        "table": "orders",
        "file": "CommitLog-8-1700000000001.log",
        "pos": ts,
        "ts_micro": ts * 1000,
        "ts_ms": ts,
        "snapshot": op == "r",
    }
    payload = {"before": None, "after": after, "source": source, "op": op, "ts_ms": ts}
    value = {"schema": ENVELOPE, "payload": payload} if schema else payload
    return orjson.dumps(key), orjson.dumps(value)


def parse_all(*events: tuple[bytes, bytes], schema_parser: Parser | None = None) -> list[Change]:
    parser = schema_parser or Parser(ParseSettings())
    out = []
    for offset, (k, v) in enumerate(events):
        parsed = parser.parse(TOPIC, 0, offset, k, v)
        assert isinstance(parsed, Change), parsed
        out.append(parsed)
    return out


K1 = {"id": 1, "line": 1}


def test_cell_structs_become_plain_columns_and_unset_columns_unavailable() -> None:
    [c] = parse_all(record("u", K1, {"qty": cell(3)}, 100))
    assert c.shape.types == {
        "id": "integer",
        "line": "integer",
        "item": "string",
        "qty": "integer",
        "at": "timestamp_ntz",
    }
    assert c.row == {"id": 1, "line": 1, "item": None, "qty": 3, "at": None}
    assert c.unavailable == {"item", "at"}


def test_deleted_cell_is_null_not_unavailable() -> None:
    [c] = parse_all(record("u", K1, {"item": cell(None, 1_700_000_000_000_000)}, 100))
    assert c.row["item"] is None
    assert c.unavailable == {"qty", "at"}


def test_set_false_cell_is_unset_and_timestamp_value_is_normalized() -> None:
    [c] = parse_all(
        record(
            "c",
            K1,
            {
                "item": {"value": "x", "deletion_ts": None, "set": False},
                "at": cell(1_700_000_000_123),
            },
            100,
        )
    )
    assert c.row["item"] is None and "item" in c.unavailable
    assert c.row["at"] is not None and "at" not in c.unavailable


def test_snapshot_read_is_the_whole_row() -> None:
    [r] = parse_all(record("r", K1, {"item": cell("pen")}, 100))
    assert r.unavailable == frozenset()
    assert r.row == {"id": 1, "line": 1, "item": "pen", "qty": None, "at": None}


def test_schemaless_events_unwrap_too() -> None:
    [c] = parse_all(
        record("u", K1, {"qty": cell(3)}, 100, schema=False),
        schema_parser=Parser(ParseSettings(schemas="false")),
    )
    assert c.row == {"id": 1, "line": 1, "item": None, "qty": 3, "at": None}
    assert c.unavailable == {"item", "at"}


def test_a_column_that_is_not_a_cell_is_bad_input() -> None:
    k, v = record("u", K1, {"qty": 3}, 100)
    parsed = Parser(ParseSettings()).parse(TOPIC, 0, 7, k, v)
    assert isinstance(parsed, BadEvent)
    assert "column 'qty'" in parsed.error and "{value, deletion_ts, set}" in parsed.error


def test_row_and_partition_deletes_and_tombstones() -> None:
    row_delete, part_delete = parse_all(
        record("d", K1, {}, 100), record("d", {"id": 2, "line": None}, {}, 101)
    )
    assert row_delete.op == "d" and row_delete.row == K1
    assert part_delete.row == {"id": 2, "line": None}
    tomb = Parser(ParseSettings()).parse(TOPIC, 0, 9, orjson.dumps(K1), None)
    assert isinstance(tomb, Skipped)


def test_fold_merges_cells_written_by_successive_writes() -> None:
    """INSERT (item, qty), UPDATE qty, UPDATE at, DELETE item in one batch: each column has the
    value of the last write that set it; nothing is left for the stored row."""
    changes = parse_all(
        record("c", K1, {"item": cell("pen"), "qty": cell(2)}, 100),
        record("u", K1, {"qty": cell(3)}, 101),
        record("u", K1, {"at": cell(1_700_000_000_000)}, 102),
        record("u", K1, {"item": cell(None, 1)}, 103),
    )
    [res] = reduce_changes(changes).values()
    assert res.row["qty"] == 3 and res.row["item"] is None and res.row["at"] is not None
    assert res.unavailable == ()


def test_fold_leaves_never_written_columns_to_the_stored_row() -> None:
    changes = parse_all(
        record("u", K1, {"qty": cell(3)}, 101),
        record("u", K1, {"qty": cell(4)}, 102),
    )
    [res] = reduce_changes(changes).values()
    assert res.row["qty"] == 4
    assert res.unavailable == ("at", "item")  # the MERGE keeps these (null in a new row)


def test_fold_out_of_order_older_write_only_fills_unset_columns() -> None:
    changes = parse_all(
        record("u", K1, {"qty": cell(5)}, 105),
        record("c", K1, {"item": cell("old"), "qty": cell(1)}, 100),
    )
    [res] = reduce_changes(changes).values()
    assert (res.row["item"], res.row["qty"]) == ("old", 5)
    assert res.fill_positions["item"] < res.change.pos


def test_fold_never_fills_from_before_a_row_delete() -> None:
    changes = parse_all(
        record("c", K1, {"item": cell("gone"), "qty": cell(1)}, 100),
        record("d", K1, {}, 101),
        record("u", K1, {"qty": cell(7)}, 102),
    )
    [res] = reduce_changes(changes).values()
    assert res.row["qty"] == 7 and res.row["item"] is None
    assert "item" in res.unavailable


@pytest.mark.parametrize(
    ("layout", "keeps"),
    [
        ("v1:cassandra:before-stream:offset", True),
        ("v1:custom(source.ts_micro):before-stream:offset", True),
        ("v1:postgresql:before-stream:offset", False),
    ],
)
def test_merge_keeps_stored_values_of_any_type_for_cassandra(layout: str, keeps: bool) -> None:
    plan = TablePlan("orders", None, layout=layout)
    assert cells.keeps_stored(plan) is keeps
    assert cells.is_cell_table(plan) is layout.startswith("v1:cassandra")
    expr = _update_expr("qty", "integer", None, every=cells.keeps_stored(plan))
    if keeps:
        assert expr.startswith("CASE WHEN array_contains(s._tm_unavailable, 'qty') THEN t.`qty`")
    else:
        assert expr == "s.`qty`"


def test_plain_field_leaves_other_structs_alone() -> None:
    other = {"type": "struct", "field": "addr", "fields": [{"type": "string", "field": "city"}]}
    assert cells.plain_field(other) is other
    assert cells.plain_field(_cell("qty", "int32")) == {
        "type": "int32",
        "optional": True,
        "field": "qty",
    }


def test_debezium_shape_key_cells_and_set_false() -> None:
    """Debezium's own Cassandra events: key columns are cells too, unwritten columns are
    ``{..., "set": false}``; the key comes from the Kafka key, the columns unwrap the same."""
    schema = {
        **ENVELOPE,
        "fields": [
            {
                **ROW_SCHEMA,
                "field": "after",
                "fields": [_cell("id", "int32"), _cell("line", "int32"), *ROW_SCHEMA["fields"][2:]],
            },
            *ENVELOPE["fields"][2:],
        ],
    }
    unset = {"value": None, "deletion_ts": None, "set": False}
    k, v = record("u", K1, {"qty": cell(3), "item": unset, "at": unset}, 100)
    value = orjson.loads(v)
    value["schema"] = schema
    value["payload"]["after"].update(id=cell(1), line=cell(1))
    del value["payload"]["before"]
    parsed = Parser(ParseSettings()).parse(TOPIC, 0, 0, k, orjson.dumps(value))
    assert isinstance(parsed, Change), parsed
    assert parsed.shape.types["id"] == "integer"
    assert parsed.row == {"id": 1, "line": 1, "item": None, "qty": 3, "at": None}
    assert parsed.unavailable == {"item", "at"}
