"""Several databases in one SQL Server task: the offset each record carries (flat with one
database, composite with several), how a stored offset is read when ``database.names``
changed, the REST offset check, topic names and database-qualified filters."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.errors import OffsetError
from cdc.filters import TableFilter
from cdc.spi import TableId
from cdc.topics import TopicNamer
from connectors.sqlserver.config import parse_config
from connectors.sqlserver.databases import DatabasePositions, offset_of, split_offset
from connectors.sqlserver.offsets import Lsn, SqlServerPosition, validate_offset

BASE = {
    "name": "c",
    "database.server.name": "server1",
    "database.hostname": "h",
    "database.user": "u",
}
A = {"commit_lsn": "00000027:00000758:0003", "change_lsn": None, "event_serial_no": None}
B = {
    "commit_lsn": "00000031:00000010:0001",
    "change_lsn": "00000031:00000008:0002",
    "event_serial_no": 2,
}


def cfg(names: str, **extra: Any) -> Any:
    return parse_config({**BASE, "database.names": names, **extra})


def test_one_database_keeps_the_flat_offset() -> None:
    positions = DatabasePositions(cfg("inventory"), {**A, "snapshot_completed": True})
    assert positions.get("inventory") == SqlServerPosition(Lsn.parse(A["commit_lsn"]))
    offset = positions.advance("inventory", B)
    assert offset == B  # Debezium's flat offset, nothing added
    assert positions.offset() == B


def test_each_record_carries_every_database_position_as_of_its_emission() -> None:
    positions = DatabasePositions(cfg("a,b"), {"positions": {"a": A}})
    assert positions.get("b") is None  # added since: no position yet
    first = positions.advance("a", B)
    second = positions.set("b", SqlServerPosition(Lsn.parse(A["commit_lsn"])))
    assert first == {"positions": {"a": B}}
    # the earlier record's offset is not changed by later ones
    assert second == {"positions": {"a": B, "b": A}}
    assert positions.offset() == second


def test_a_flat_offset_becomes_the_position_of_the_database_captured_so_far() -> None:
    # database.dbname (Debezium 1.2's key) names it, wherever it is listed
    moved = split_offset(cfg("new,old", **{"database.dbname": "OLD"}), A)
    assert list(moved) == ["old"]
    # else the first listed name
    assert list(split_offset(cfg("first,second"), A)) == ["first"]
    assert split_offset(cfg("a,b"), None) == {}


def test_a_removed_database_is_forgotten_and_one_left_goes_back_to_flat() -> None:
    stored = {"positions": {"a": A, "gone": B}}
    positions = DatabasePositions(cfg("a,b"), stored)
    assert positions.get("gone") is None
    assert positions.advance("a", A) == {"positions": {"a": A}}
    single = DatabasePositions(cfg("gone"), stored)
    assert single.offset() == B and not single.multi


def test_database_names_match_case_insensitively() -> None:
    assert list(split_offset(cfg("Sales,hr"), {"positions": {"SALES": A}})) == ["Sales"]


def test_a_malformed_composite_offset_is_named() -> None:
    with pytest.raises(OffsetError, match="position of 'a' is not an object"):
        split_offset(cfg("a,b"), {"positions": {"a": "00000027:00000758:0003"}})
    with pytest.raises(ValueError, match=r"offset\.commit_lsn must be an LSN string"):
        split_offset(cfg("a,b"), {"positions": {"a": {"commit_lsn": 5}}})


def test_offset_of_positions() -> None:
    pos = {"a": SqlServerPosition(Lsn.parse(A["commit_lsn"]))}
    assert offset_of(cfg("a"), pos) == A
    assert offset_of(cfg("a,b"), pos) == {"positions": {"a": A}}


def test_rest_offsets_flat_and_composite() -> None:
    partition = {"server": "server1"}
    assert validate_offset(partition, A)[1] == []
    assert validate_offset(partition, {"positions": {"a": A, "b": B}})[1] == []
    _, problems = validate_offset(
        partition, {"positions": {"a": {**A, "snapshot": True}, "b": {"commit_lsn": "x"}}}
    )
    assert problems == [
        "unknown offset key(s) positions.a: snapshot",
        "positions.b: not an LSN: 'x' (expected 8:8:4 hex digits, e.g. 00000027:00000758:0003)",
    ]
    assert validate_offset(partition, {"positions": {}})[1] == [
        "offset.positions must map each database to its position"
    ]
    assert validate_offset(partition, {"positions": {"a": A}, "lsn": 1})[1] == [
        "unknown offset key(s) lsn"
    ]


def test_topics_name_the_database_only_when_asked() -> None:
    tid = TableId("sales", "dbo", "orders")
    assert TopicNamer("server1").data_topic(tid) == "server1.dbo.orders"
    qualified = TopicNamer("server1", include_catalog=True)
    assert qualified.data_topic(tid) == "server1.sales.dbo.orders"
    assert qualified.schema_name(tid, "Value") == "server1.sales.dbo.orders.Value"
    # ids without a schema (MySQL) or a database (PostgreSQL) are unchanged
    assert qualified.data_topic(TableId("inventory", None, "t")) == "server1.inventory.t"
    assert qualified.data_topic(TableId(None, "public", "t")) == "server1.public.t"


def test_table_filters_may_name_the_database() -> None:
    only_sales = TableFilter(table_include=[r"sales\.dbo\.orders"])
    assert only_sales.is_included(TableId("sales", "dbo", "orders"))
    assert not only_sales.is_included(TableId("hr", "dbo", "orders"))
    everywhere = TableFilter(table_include=[r"dbo\.orders"])
    assert everywhere.is_included(TableId("hr", "dbo", "orders"))
    not_hr = TableFilter(table_exclude=[r"hr\.dbo\..*"])
    assert not not_hr.is_included(TableId("hr", "dbo", "orders"))
    assert not_hr.is_included(TableId("sales", "dbo", "orders"))
