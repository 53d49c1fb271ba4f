"""Offsets, history position comparison and the binlog event processor's transaction logic,
fed with synthetic events (connectors/mysql/offsets.py, binlog.py)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from cdc.metrics import TaskMetrics
from cdc.spi import (
    Operation,
    PositionReached,
    RowChange,
    SchemaChange,
    SourceEvent,
    Table,
    TableId,
    TransactionBegin,
    TransactionEnd,
)
from connectors.mysql.binlog import BinlogProcessor, Resume
from connectors.mysql.config import parse_config
from connectors.mysql.connection import (
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    WriteRowsEvent,
    XidEvent,
)
from connectors.mysql.errors import UnparseableDdl
from connectors.mysql.gtid import MariaDbGtidSet
from connectors.mysql.offsets import (
    BinlogPosition,
    binlog_index,
    is_at_or_before,
    validate_offset,
)
from connectors.mysql.state import MySqlMetrics, TaskState


class Ctx:
    def __init__(self) -> None:
        self.events: list[SourceEvent] = []
        self.stop_event = threading.Event()
        self.metrics = TaskMetrics("mysql", "fx", "fx")
        self.tables: dict[TableId, Table] = {}

    def emit(self, event: SourceEvent) -> None:
        self.events.append(event)

    def register_table(self, table: Table) -> None:
        self.tables[table.id] = table

    def is_included(self, table_id: TableId) -> bool:
        return table_id.table != "excluded"

    def snapshot_progress(self, table_id: TableId, rows: int, total: int | None) -> None:
        return None

    def snapshot_chunk_done(self) -> None:
        return None

    def rows(self) -> list[RowChange]:
        return [e for e in self.events if isinstance(e, RowChange)]


def state(**cfg: str) -> TaskState:
    raw = {
        "database.server.name": "s",
        "database.hostname": "h",
        "database.user": "u",
        "schema.history.internal": "memory",
        **{k.replace("_", "."): v for k, v in cfg.items()},
    }
    st = TaskState(parse_config(raw), {"server": "s"}, MySqlMetrics())
    st.schema.apply_ddl("CREATE TABLE t (id int PRIMARY KEY, v int)", "db")
    st.schema.apply_ddl("CREATE TABLE excluded (id int PRIMARY KEY)", "db")
    st.schema_ready = True
    return st


class Binlog:
    """Builds events with consecutive positions, as the decoder would deliver them."""

    def __init__(self, file: str = "mysql-bin.000003", pos: int = 4) -> None:
        self.file = file
        self.pos = pos
        self.seq = 10

    def _make(self, cls: type, size: int = 40, **attrs: Any) -> Any:
        ev = object.__new__(cls)
        self.pos += size
        ev.packet = SimpleNamespace(log_pos=self.pos, event_size=size, server_id=1)
        ev.timestamp = 1_600_000_000
        for k, v in attrs.items():
            setattr(ev, k, v)
        return ev

    def gtid(self, standalone: bool = False) -> Any:
        self.seq += 1
        return self._make(MariadbGtidEvent, gtid=f"0-1-{self.seq}", flags=1 if standalone else 12)

    def query(self, sql: str, schema: bytes = b"db") -> Any:
        return self._make(QueryEvent, query=sql, schema=schema, slave_proxy_id=7)

    def write(self, table: str, *ids: int) -> Any:
        ev = self._make(
            WriteRowsEvent,
            size=60,
            schema="db",
            table=table,
            table_id=42,
            columns=[SimpleNamespace(name="id"), SimpleNamespace(name="v")],
        )
        ev._RowsEvent__rows = [{"values": {"id": i, "v": i}, "none_sources": {}} for i in ids]
        return ev

    def xid(self) -> Any:
        return self._make(XidEvent, xid=1)

    def rotate(self, name: str) -> Any:
        ev = self._make(RotateEvent, next_binlog=name, position=4)
        self.file = name
        return ev

    def heartbeat(self) -> Any:
        return self._make(HeartbeatLogEvent, size=0)


def run(
    events: list[Any],
    st: TaskState | None = None,
    resume: Resume | None = None,
    gtids: str = "0-1-10",
) -> tuple[Ctx, BinlogProcessor]:
    ctx = Ctx()
    st = st or state()
    p = BinlogProcessor(
        st, ctx, resume or Resume("mysql-bin.000003", 4, gtids), MariaDbGtidSet(gtids)
    )
    p.file = "mysql-bin.000003"
    for e in events:
        p.handle(e)
    return ctx, p


def test_offset_round_trip_and_file_index() -> None:
    pos = BinlogPosition("mysql-bin.000003", 154, "0-1-5", event=2, row=3, ts_sec=9, server_id=1)
    offset = pos.to_offset()
    assert offset == {
        "file": "mysql-bin.000003",
        "pos": 154,
        "gtids": "0-1-5",
        "event": 2,
        "row": 3,
        "ts_sec": 9,
        "server_id": 1,
    }
    assert BinlogPosition.from_offset(offset) == pos
    assert pos.with_(snapshot=True).to_offset()["snapshot"] is True
    assert binlog_index("mysql-bin.000042") == 42 and binlog_index(None) == -1
    with pytest.raises(ValueError):
        BinlogPosition.from_offset({"pos": 4})


def test_history_positions_compare_by_gtid_then_file() -> None:
    a = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    assert is_at_or_before({"gtids": f"{a}:1-5"}, {"gtids": f"{a}:1-7"})
    assert not is_at_or_before({"gtids": f"{a}:1-8"}, {"gtids": f"{a}:1-7"})
    assert is_at_or_before({"gtids": "0-1-5", "event": 1}, {"gtids": "0-1-5", "event": 2})
    assert not is_at_or_before({"gtids": "0-1-5", "event": 3}, {"gtids": "0-1-5", "event": 2})
    assert is_at_or_before({"file": "b.000002", "pos": 900}, {"file": "b.000010", "pos": 4})
    assert not is_at_or_before({"file": "b.000002", "pos": 900}, {"file": "b.000002", "pos": 4})
    assert is_at_or_before(
        {"file": "b.000002", "pos": 4, "row": 1}, {"file": "b.000002", "pos": 4, "row": 1}
    )


def test_rows_carry_transaction_start_offsets() -> None:
    b = Binlog()
    start = b.pos
    events = [b.gtid(), b.write("t", 1, 2), b.write("excluded", 9), b.write("t", 3), b.xid()]
    ctx, _p = run(events)
    rows = ctx.rows()
    assert [r.after[0] for r in rows if r.after] == [1, 2, 3]
    assert [
        (r.offset["pos"], r.offset["gtids"], r.offset["event"], r.offset["row"]) for r in rows
    ] == [(start, "0-1-10", 0, 1), (start, "0-1-10", 0, 2), (start, "0-1-10", 2, 1)]
    assert rows[0].source["gtid"] == "0-1-11" and rows[2].source["row"] == 0
    assert isinstance(ctx.events[0], TransactionBegin)
    end = ctx.events[-1]
    assert isinstance(end, TransactionEnd)
    assert end.offset["gtids"] == "0-1-11" and end.offset["pos"] == b.pos
    assert (end.offset["event"], end.offset["row"]) == (0, 0)


def test_resume_skips_exactly_what_was_emitted() -> None:
    b = Binlog()
    events = [b.gtid(), b.write("t", 1, 2), b.write("t", 3, 4, 5), b.write("t", 6), b.xid()]
    ctx, _ = run(events, resume=Resume("mysql-bin.000003", 4, "0-1-10", 1, 2))
    assert [r.after[0] for r in ctx.rows() if r.after] == [5, 6]
    assert not any(isinstance(e, TransactionBegin) for e in ctx.events)  # already emitted
    # the offset a session leaves behind mid-transaction resumes the same way
    b = Binlog()
    ctx, p = run([b.gtid(), b.write("t", 1, 2), b.write("t", 3)])
    assert p.resume_point() == Resume("mysql-bin.000003", 4, "0-1-10", 1, 1)


def test_filtered_transactions_and_idle_heartbeats_move_the_offset() -> None:
    b = Binlog()
    ctx, _ = run([b.gtid(), b.write("excluded", 1), b.xid(), b.heartbeat()])
    assert [type(e) for e in ctx.events] == [TransactionEnd, PositionReached]
    assert ctx.events[0].offset["gtids"] == "0-1-11"


def test_rotation_updates_the_restart_file() -> None:
    b = Binlog()
    ctx, p = run([b.rotate("mysql-bin.000004"), b.gtid(), b.write("t", 1), b.xid()])
    assert ctx.rows()[0].source["file"] == "mysql-bin.000004"
    assert p.offset()["file"] == "mysql-bin.000004"


def test_buffer_drops_a_rolled_back_transaction_and_counts() -> None:
    """AC-46 (full ROLLBACK, which a ROW-format MariaDB never writes, but MySQL with mixed
    temporary tables can)."""
    st = state(binlog_buffer_size="10")
    b = Binlog()
    events = [
        b.gtid(),
        b.write("t", 1),
        b.query("ROLLBACK"),
        b.gtid(),
        b.write("t", 2),
        b.query("SAVEPOINT `s`"),
        b.write("t", 3),
        b.query("ROLLBACK TO `s`"),
        b.xid(),
    ]
    ctx, _ = run(events, st)
    assert [r.after[0] for r in ctx.rows() if r.after] == [2]
    assert st.metrics.rolled_back_transactions == 2


def test_buffer_overflow_streams_the_large_transaction() -> None:
    st = state(binlog_buffer_size="2")
    b = Binlog()
    ctx, _ = run([b.gtid(), *[b.write("t", i) for i in range(1, 6)], b.xid()], st)
    assert [r.after[0] for r in ctx.rows() if r.after] == [1, 2, 3, 4, 5]
    assert st.metrics.large_transactions == 1


def test_without_buffer_a_rollback_is_reported() -> None:
    b = Binlog()
    ctx, p = run([b.gtid(), b.write("t", 1), b.query("ROLLBACK")])
    assert len(ctx.rows()) == 1  # already emitted: Debezium's behaviour without the buffer
    assert isinstance(ctx.events[-1], PositionReached) and not p.in_txn


def test_not_well_formed_transaction() -> None:
    st = state()
    b = Binlog()
    ctx, _ = run(
        [b.query("BEGIN"), b.write("t", 1), b.query("BEGIN"), b.write("t", 2), b.xid()], st
    )
    assert len(ctx.rows()) == 2
    assert st.metrics.not_well_formed_transactions == 1


def test_ddl_is_recorded_then_published_with_the_position_after_it() -> None:
    st = state()
    b = Binlog()
    ctx, p = run([b.gtid(standalone=True), b.query("ALTER TABLE t ADD COLUMN x int")], st)
    change = next(e for e in ctx.events if isinstance(e, SchemaChange))
    assert change.database == "db" and change.ddl == "ALTER TABLE t ADD COLUMN x int"
    assert change.offset["gtids"] == "0-1-11"
    records = list(st.history.all_records())
    assert records[-1].position == change.offset and records[-1].ddl == change.ddl
    assert [c.name for c in ctx.tables[TableId("db", None, "t")].columns] == ["id", "v", "x"]
    assert st.metrics.changes_applied == 1
    assert p.offset()["gtids"] == "0-1-11" and p.offset()["pos"] == b.pos
    with pytest.raises(Exception, match="the binlog has 2 columns, the schema 3"):
        p.handle(b.gtid())
        p.handle(b.write("t", 1))  # a row image that does not fit the new schema


def test_unparseable_ddl_fails_or_is_skipped() -> None:
    b = Binlog()
    with pytest.raises(UnparseableDdl, match=r"mysql-bin\.000003"):
        run([b.gtid(standalone=True), b.query("CREATE TABLE t2 (id int, x frob)")])
    st = state(schema_history_internal_skip_unparseable_ddl="true")
    ctx, _ = run([b.gtid(standalone=True), b.query("CREATE TABLE t2 (id int, x frob)")], st)
    assert isinstance(ctx.events[-1], PositionReached)


def test_xa_transaction() -> None:
    b = Binlog()
    ctx, _ = run(
        [
            b.gtid(),
            b.query("XA START 'x'"),
            b.write("t", 1),
            b.query("XA END 'x'"),
            b.query("COMMIT"),
        ]
    )
    assert [r.op for r in ctx.rows()] == [Operation.CREATE]
    assert isinstance(ctx.events[-1], TransactionEnd)


def test_validate_offset_for_patch_offsets() -> None:
    from connectors.mysql import MySqlConnector

    ok, problems = MySqlConnector.validate_offset(
        {"server": "s"}, {"file": "mysql-bin.000003", "pos": 154, "gtids": "0-1-5"}
    )
    assert problems == [] and ok == {
        "file": "mysql-bin.000003",
        "pos": 154,
        "gtids": "0-1-5",
        "event": 0,
        "row": 0,
        "ts_sec": 0,
        "server_id": 0,
    }
    _, problems = MySqlConnector.validate_offset(
        {"db": "x"}, {"pos": -1, "gtids": "nope", "lsn": 5}
    )
    assert len(problems) == 5


def test_only_tidemark_counts_are_resumed_inside_a_transaction() -> None:
    """``event`` means row events to tidemark and every binlog event to Debezium: only an
    offset carrying tidemark's ``row_events`` is resumed mid-transaction."""
    ours = BinlogPosition.from_offset(
        {"file": "b.000001", "pos": 4, "event": 2, "row": 3, "row_events": 2}
    )
    assert ours.already_emitted() == (2, 3) and not ours.foreign_count()
    assert ours.to_offset()["row_events"] == 2
    debezium = BinlogPosition.from_offset({"file": "b.000001", "pos": 4, "event": 5, "row": 1})
    assert debezium.already_emitted() == (0, 0) and debezium.foreign_count()
    boundary = BinlogPosition.from_offset({"file": "b.000001", "pos": 4})
    assert boundary.already_emitted() == (0, 0) and not boundary.foreign_count()
    assert validate_offset({"server": "s"}, {"file": "b.000001", "pos": 4, "row_events": -1})[
        1
    ] == ["offset.row_events must be a non-negative integer, got -1"]
