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
LSN_A = "00000027:00000758:0003"
A: dict[str, Any] = {"commit_lsn": LSN_A, "change_lsn": None, "event_serial_no": None}
B = {
    "commit_lsn": "00000031:00000010:0001",
    "change_lsn": "00000031:00000008:0002",
    "event_serial_no": 2,
}


def cfg(names: str, **extra: Any) -> Any:
    return parse_config({**BASE, "database.names": names, **extra})


def test_one_database_keeps_the_flat_offset() -> None:
    positions = DatabasePositions(cfg("inventory"), {**A, "snapshot_completed": True})
    assert positions.get("inventory") == SqlServerPosition(Lsn.parse(LSN_A))
    offset = positions.advance("inventory", B)
    assert offset == B  # Debezium's flat offset, nothing added
    assert positions.offset() == B


def test_each_record_carries_every_database_position_as_of_its_emission() -> None:
    positions = DatabasePositions(cfg("a,b"), {"positions": {"a": A}})
    assert positions.get("b") is None  # added since: no position yet
    first = positions.advance("a", B)
    second = positions.set("b", SqlServerPosition(Lsn.parse(LSN_A)))
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
    pos = {"a": SqlServerPosition(Lsn.parse(LSN_A))}
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


class _Ctx:
    """What the added-database path needs of a SourceContext: emit and a stop event."""

    def __init__(self) -> None:
        import threading

        self.events: list[Any] = []
        self.stop_event = threading.Event()

    def emit(self, event: Any) -> None:
        self.events.append(event)


def test_an_added_database_is_snapshotted_while_the_others_are_polled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cdc.spi import PositionReached
    from connectors.sqlserver import streaming as ss

    config = cfg("a,b", **{"streaming.poll.interval.ms": "1"})
    s = ss.SqlServerStreaming(config)
    positions = s.positions = DatabasePositions(config, {"positions": {"a": A}})
    a = ss._Database("a", None, None, positions.get("a"))  # type: ignore[arg-type]
    b = ss._Database("b", None, None, None)  # type: ignore[arg-type]
    s.dbs = [a, b]
    polled: list[str] = []

    def poll(ctx: Any, db: Any) -> bool:
        polled.append(db.name)
        db.polled = -1e9  # due again at once
        positions.advance(db.name, B)
        return True

    def snapshot(
        cfg: Any, ctx: Any, db: str, data: bool, others: Any, reg: Any, between: Any, hold: Any
    ) -> SqlServerPosition:
        with hold():  # the streaming source's hold on heartbeat actions
            pass
        assert db == "b" and data and others.offset() == {"positions": {"a": A}}
        between()  # before each batch of rows: the others are polled
        assert others.offset() == {"positions": {"a": B}}  # the rows' offset: no "b" yet
        between()
        return SqlServerPosition(Lsn.parse(LSN_A))

    monkeypatch.setattr(s, "_poll", poll)
    monkeypatch.setattr(ss, "snapshot_added", snapshot)
    ctx = _Ctx()
    s._added(ctx, b)  # type: ignore[arg-type]
    assert polled == ["a", "a"]
    # once its snapshot is done, the added database's position joins the offset
    assert isinstance(ctx.events[-1], PositionReached)
    assert ctx.events[-1].offset == {"positions": {"a": B, "b": A}}


def test_an_added_database_rows_carry_the_others_current_positions() -> None:
    from connectors.sqlserver.snapshot import SqlServerSnapshotSteps

    config = cfg("a,b")
    others = DatabasePositions(config, {"positions": {"a": A}})
    scan: Any = type("Scan", (), {"offset": {}})()

    def poll_a() -> None:  # the other database moves on between batches
        others.advance("a", B)

    steps = SqlServerSnapshotSteps(
        config,
        _Ctx(),  # type: ignore[arg-type]
        True,
        ["b"],
        others,
        poll_a,
    )
    batches = iter([(scan, [(1,)]), (scan, None)])
    seen = [dict(s.offset) for s, _ in steps._interleaved(batches, others)]
    assert seen == [{"positions": {"a": B}}] * 2
