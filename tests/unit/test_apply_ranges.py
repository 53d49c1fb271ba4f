"""Cassandra range deletes as the apply job's workers read them (cdc/apply/ranges.py), from
the bounds tidemark's connector writes under ``range.delete.handling.mode=emit``. The bound
shapes are those the connector wrote for these statements on the real node
(tests/integration/test_cassandra_connector.py checks them there)."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.apply import ranges

CLUSTERING = [
    {"name": "a", "type": "int", "descending": False},
    {"name": "b", "type": "text", "descending": True},
]
KEY = {"id": 1, "a": None, "b": None}


def _after(start: tuple[str, dict[str, Any]], end: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    def bound(method: str, values: dict[str, Any]) -> dict[str, Any]:
        return {
            "method": method,
            "values": {"a": None, "b": None, **values},
            "clustering": CLUSTERING,
        }

    return {
        "id": 1,
        "a": None,
        "b": None,
        "v": None,
        "_range_start": bound(*start),
        "_range_end": bound(*end),
    }


def test_an_open_range_compares_its_column_only() -> None:
    """WHERE id = 1 AND a > 0."""
    got = ranges.parse(_after(("EXCL_START_BOUND", {"a": 0}), ("INCL_END_BOUND", {})), KEY, {})
    assert got == {
        "partition": ["id"],
        "eq": {"id": 1},
        "cols": [["a", False, None], ["b", True, None]],
        "start": [0],
        "start_incl": False,
        "end": [],
        "end_incl": True,
    }


def test_a_shared_prefix_becomes_an_equality() -> None:
    """WHERE id = 1 AND a = 3 AND b > 'm' with b descending: start {a: 3} inclusive, end
    {a: 3, b: 'm'} exclusive; a = 3 is an equality, only b is compared."""
    after = _after(("INCL_START_BOUND", {"a": 3}), ("EXCL_END_BOUND", {"a": 3, "b": "m"}))
    got = ranges.parse(after, KEY, {})
    assert got["eq"] == {"id": 1, "a": 3}
    assert got["cols"] == [["b", True, None]]
    assert (got["start"], got["end"], got["start_incl"], got["end_incl"]) == (
        [],
        ["m"],
        True,
        False,
    )


def test_values_go_through_the_row_normalizers() -> None:
    after = _after(("INCL_START_BOUND", {"a": 5}), ("EXCL_END_BOUND", {"a": 9}))
    got = ranges.parse(after, KEY, {"a": lambda v: v * 10, "id": str})
    assert got["eq"] == {"id": "1"} and (got["start"], got["end"]) == ([50], [90])


def test_uuids_compare_by_a_sort_key() -> None:
    after = _after(("EXCL_START_BOUND", {"a": "u"}), ("INCL_END_BOUND", {}))
    for bound in (after["_range_start"], after["_range_end"]):
        bound["clustering"] = [{"name": "a", "type": "timeuuid", "descending": False}]
    assert ranges.parse(after, KEY, {})["cols"] == [["a", False, "timeuuid"]]


def test_a_range_on_a_type_spark_orders_differently_is_refused() -> None:
    after = _after(
        ("EXCL_START_BOUND", {"a": "5b6962dd-3f90-4c93-8f61-eabfa4a803e2"}), ("INCL_END_BOUND", {})
    )
    for bound in (after["_range_start"], after["_range_end"]):
        bound["clustering"] = [
            {"name": "a", "type": "inet", "descending": False},
            CLUSTERING[1],
        ]
    with pytest.raises(ranges.RangeError, match="'a' of type inet"):
        ranges.parse(after, KEY, {})
    # an equality on it is fine: rows are matched by value, not ordered
    eq = _after(("INCL_START_BOUND", {"a": "u"}), ("EXCL_END_BOUND", {"a": "u", "b": "m"}))
    for bound in (eq["_range_start"], eq["_range_end"]):
        bound["clustering"] = [{"name": "a", "type": "uuid", "descending": False}, CLUSTERING[1]]
    assert ranges.parse(eq, KEY, {})["eq"] == {"id": 1, "a": "u"}


def test_decimals_compare_only_as_numbers() -> None:
    for values, ok in (({"a": "10.5"}, False), ({"a": 10.5}, True)):
        after = _after(("EXCL_START_BOUND", values), ("INCL_END_BOUND", {}))
        for bound in (after["_range_start"], after["_range_end"]):
            bound["clustering"] = [
                {"name": "a", "type": "decimal", "descending": False},
                CLUSTERING[1],
            ]
        if ok:
            assert ranges.parse(after, KEY, {})["start"] == [10.5]
        else:
            with pytest.raises(ranges.RangeError, match="decimal"):
                ranges.parse(after, KEY, {})


def test_only_a_bound_with_a_method_is_a_range_delete() -> None:
    assert ranges.is_range_delete(_after(("INCL_START_BOUND", {}), ("INCL_END_BOUND", {})))
    assert not ranges.is_range_delete({"id": 1, "_range_start": None, "_range_end": None})
    with pytest.raises(ranges.RangeError, match="method"):
        after = _after(("INCL_START_BOUND", {}), ("INCL_END_BOUND", {}))
        after["_range_end"]["method"] = "INCL_START_BOUND"
        ranges.parse(after, KEY, {})
