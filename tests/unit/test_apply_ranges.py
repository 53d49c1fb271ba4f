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
        "eq_keys": {},
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


def _typed(after: dict[str, Any], first: dict[str, Any]) -> dict[str, Any]:
    for bound in (after["_range_start"], after["_range_end"]):
        bound["clustering"] = [first, CLUSTERING[1]]
    return after


def test_a_range_on_a_type_spark_orders_differently_is_refused() -> None:
    after = _after(("EXCL_START_BOUND", {"a": "(1, 'x')"}), ("INCL_END_BOUND", {}))
    tuple_col = {"name": "a", "type": "frozen<tuple<int, text>>", "descending": False}
    with pytest.raises(ranges.RangeError, match="'a' of type frozen<tuple<int, text>>"):
        ranges.parse(_typed(after, tuple_col), KEY, {})
    # an equality on it is fine: rows are matched by value, not ordered
    eq = _after(("INCL_START_BOUND", {"a": "u"}), ("EXCL_END_BOUND", {"a": "u", "b": "m"}))
    assert ranges.parse(_typed(eq, tuple_col), KEY, {})["eq"] == {"id": 1, "a": "u"}


def test_uuids_and_inets_compare_by_a_sort_key_also_as_equalities() -> None:
    for cql in ("uuid", "timeuuid", "inet"):
        col = {"name": "a", "type": cql, "descending": False}
        after = _after(("EXCL_START_BOUND", {"a": "x"}), ("INCL_END_BOUND", {}))
        assert ranges.parse(_typed(after, col), KEY, {})["cols"][0] == ["a", False, cql]
        eq = _after(("INCL_START_BOUND", {"a": "x"}), ("EXCL_END_BOUND", {"a": "x", "b": "m"}))
        assert ranges.parse(_typed(eq, col), KEY, {})["eq_keys"] == {"a": cql}


def test_decimals_compare_as_numbers_or_by_a_key_of_their_exact_text() -> None:
    """A ``decimal``/``varint`` the lake holds as a number compares as one; as exact text
    (tidemark's default modes) by a sort key; as anything else it is refused."""
    for cql in ("decimal", "varint"):
        col = {"name": "a", "type": cql, "descending": False}
        for value, spark, key in ((10.5, "double", None), ("10", "decimal(38,0)", None)):
            after = _typed(_after(("EXCL_START_BOUND", {"a": value}), ("INCL_END_BOUND", {})), col)
            got = ranges.parse(after, KEY, {}, {"a": spark})
            assert got["cols"][0] == ["a", False, key] and got["start"] == [value]
        after = _typed(_after(("EXCL_START_BOUND", {"a": "10.5"}), ("INCL_END_BOUND", {})), col)
        assert ranges.parse(after, KEY, {}, {"a": "string"})["cols"][0] == ["a", False, "number"]
        with pytest.raises(ranges.RangeError, match=cql):
            ranges.parse(after, KEY, {}, {"a": "binary"})


def test_only_a_bound_with_a_method_is_a_range_delete() -> None:
    assert ranges.is_range_delete(_after(("INCL_START_BOUND", {}), ("INCL_END_BOUND", {})))
    assert not ranges.is_range_delete({"id": 1, "_range_start": None, "_range_end": None})
    with pytest.raises(ranges.RangeError, match="method"):
        after = _after(("INCL_START_BOUND", {}), ("INCL_END_BOUND", {}))
        after["_range_end"]["method"] = "INCL_START_BOUND"
        ranges.parse(after, KEY, {})


_MARSHAL = "org.apache.cassandra.db.marshal."


def _debezium(start: list[tuple[str, str, str]], end: list[tuple[str, str, str]]) -> dict[str, Any]:
    """Debezium's range bounds: ``(name, getString text, marshal type)`` per column."""

    def bound(method: str, values: list[tuple[str, str, str]]) -> dict[str, Any]:
        return {
            "method": method,
            "values": [{"name": n, "value": v, "type": _MARSHAL + t} for n, v, t in values],
        }

    return {
        "_range_start": bound("EXCL_START_BOUND", start),
        "_range_end": bound("INCL_END_BOUND", end),
    }


@pytest.mark.parametrize(
    ("marshal", "text", "spark", "value", "key"),
    [
        ("TimestampType", "2024-01-02T03:04:05.678Z", "timestamp_ntz", 1704164645678, None),
        ("TimestampType", "1960-01-02T03:04:05.000Z", "timestamp_ntz", -315521755000, None),
        ("SimpleDateType", "2024-05-06", "date", 19849, None),
        ("TimeType", "12:34:56.789000000", "long", 45296789000000, None),
        ("TimeType", "00:00:00.000000001", "long", 1, None),
        ("BytesType", "cafe", "binary", "yv4=", None),
        ("DecimalType", "3.14159", "double", 3.14159, None),
        ("DecimalType", "1E-30", "string", "0." + "0" * 29 + "1", "number"),
        ("IntegerType", "-5", "long", -5, None),
        ("InetAddressType", "0:0:0:0:0:0:0:1", "string", "/0:0:0:0:0:0:0:1", "inet"),
        ("ReversedType(org.apache.cassandra.db.marshal.Int32Type)", "7", "integer", 7, None),
    ],
)
def test_debeziums_text_bounds_read_as_the_records_values(
    marshal: str, text: str, spark: str, value: Any, key: str | None
) -> None:
    """What Debezium's agent writes for each clustering type (Cassandra's ``getString``,
    checked against the 5.0 classes) becomes the value its records carry for the column."""
    after = _debezium([("c", text, marshal)], [])
    got = ranges.parse(after, {"id": 1, "c": None}, {}, {"c": spark})
    assert got["start"] == [value]
    assert got["cols"] == [["c", marshal.startswith("Reversed"), key]]


def test_a_debezium_varint_bound_beyond_a_long_is_refused() -> None:
    """Debezium sends a varint as a long that wraps: a bound beyond 64 bits has no place
    among the lake's values."""
    after = _debezium([("c", "12345678901234567890", "IntegerType")], [])
    with pytest.raises(ranges.RangeError, match="64-bit"):
        ranges.parse(after, {"id": 1, "c": None}, {}, {"c": "long"})


def test_debeziums_equal_prefix_of_any_read_type_is_an_equality() -> None:
    """WHERE id = 1 AND d = '2024-05-06' AND c > 0x01: the date is matched, the blob compared."""
    date = ("d", "2024-05-06", "SimpleDateType")
    after = _debezium([date, ("c", "01", "BytesType")], [date])
    got = ranges.parse(after, {"id": 1, "d": None, "c": None}, {}, {"d": "date", "c": "binary"})
    assert got["eq"] == {"id": 1, "d": 19849} and got["start"] == ["AQ=="] and got["end"] == []


def test_range_deletes_are_retained_from_the_newest_write_time_never_beyond_the_clock() -> None:
    day = 86_400_000
    assert ranges.retained_since(None, 100 * day, 10 * day) is None  # nothing seen yet
    assert ranges.retained_since(50 * day, 100 * day, None) is None  # kept forever
    # a backfill of old topics counts from its own newest write time
    assert ranges.retained_since(50 * day, 100 * day, 10 * day) == 40 * day
    # a write time ahead of the clock does not expire everything
    assert ranges.retained_since(500 * day, 100 * day, 10 * day) == 90 * day
    old, new, unknown = (
        ([1, 1], {"meta": [39 * day, "t", 0, 1]}),
        ([1, 2], {"meta": [40 * day, "t", 0, 2]}),
        ([1, 3], {"meta": [None, "t", 0, 3]}),
    )
    assert ranges.retained([old, new, unknown], 40 * day) == [new, unknown]
    assert ranges.retained([old, new], None) == [old, new]


def test_range_deletes_retention_is_configurable() -> None:
    from cdc.apply.config import ConfigError, from_mapping

    base = {"kafka.bootstrap.servers": "k:9092", "kafka.topics": ["t"], "target.path": "/l"}
    base["checkpoint.location"] = "/c"
    assert from_mapping(base).range_deletes_retention_ms == 864_000_000
    cfg = from_mapping({**base, "range.deletes.retention.ms": "none"})
    assert cfg.range_deletes_retention_ms is None
    with pytest.raises(ConfigError, match=r"range\.deletes\.retention\.ms"):
        from_mapping({**base, "range.deletes.retention.ms": "-1"})
