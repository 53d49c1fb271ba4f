"""Recorded SQL Server result sets replayed through the streaming source's own code path: the
cases the stand-in cannot produce on demand (a restart in the middle of a commit, a primary
key update recorded as operations 3/4, the online schema-evolution switch between two
capture instances), and the datetimeoffset struct a real SQL Server's ODBC driver returns."""

from __future__ import annotations

import datetime as dt
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

from cdc.spi import (
    Operation,
    PositionReached,
    SchemaChange,
    Table,
    TransactionBegin,
    TransactionEnd,
)
from connectors.sqlserver.config import CONFIG_DEF
from connectors.sqlserver.connection import datetimeoffset
from connectors.sqlserver.databases import DatabasePositions
from connectors.sqlserver.dialect import TSQL
from connectors.sqlserver.offsets import Lsn, SqlServerPosition
from connectors.sqlserver.schema import Catalog
from connectors.sqlserver.streaming import SqlServerStreaming, _Database


def L(n: int) -> bytes:
    """A recorded LSN: 00000027:00000758:<n>."""
    return bytes.fromhex(f"0000002700000758{n:04x}")


class Cursor:
    def __init__(self, answer: Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]) -> None:
        self.answer = answer
        self.rows: list[tuple[Any, ...]] = []
        self.description = None

    def execute(self, sql: str, *params: Any) -> None:
        self.rows = list(self.answer(sql, params))

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self.rows = self.rows, []
        return rows

    def fetchmany(self, n: int) -> list[tuple[Any, ...]]:
        rows, self.rows = self.rows[:n], self.rows[n:]
        return rows

    def close(self) -> None:
        pass


class Recorded:
    """A pyodbc connection answering the connector's T-SQL from recorded result sets."""

    def __init__(
        self,
        instances: list[tuple[Any, ...]],
        changes: dict[str, list[tuple[Any, ...]]],
        columns: dict[int, list[tuple[Any, ...]]],
        max_lsn: bytes,
    ) -> None:
        self.instances = instances
        self.changes = changes
        self.columns = columns
        self.max_lsn = max_lsn
        self.asked: list[tuple[str, tuple[Any, ...]]] = []

    def cursor(self) -> Cursor:
        return Cursor(self.answer)

    def answer(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        self.asked.append((sql, params))
        if sql == TSQL.max_lsn():
            return [(self.max_lsn,)]
        if sql == TSQL.capture_instances():
            return self.instances
        if sql == TSQL.captured_columns():
            return [
                (obj, name, i + 1, typ)
                for obj, cols in self.columns.items()
                for i, (name, typ) in enumerate(cols)
            ]
        if sql == TSQL.table_columns():
            src = params[0]
            obj = next(i[4] for i in self.instances if i[5] == src and i[4] in self.columns)
            latest = max((i for i in self.instances if i[5] == src), key=lambda i: i[3])[4]
            cols = self.columns[latest if obj != latest else obj]
            return [(n, i + 1, t, 4, 10, 0, False, False) for i, (n, t) in enumerate(cols)]
        if sql == TSQL.primary_key():
            return [("id",)]
        if sql == TSQL.transactions():
            lo, hi = params
            commits = sorted({r[0] for rows in self.changes.values() for r in rows})
            return [(c, dt.datetime(2026, 1, 1, 12, 0, 0)) for c in commits if lo <= c <= hi]
        for inst, rows in self.changes.items():
            if sql == TSQL.changes(inst):
                lo, hi = params
                return [r for r in rows if lo <= r[0] <= hi]
        raise AssertionError(f"unexpected statement {sql}")


class Ctx:
    """A source context that records what the source reports."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.rows: list[tuple[Any, ...]] = []
        self.tables: list[Table] = []
        self.stop_event = threading.Event()
        self.tx_metadata = True
        self.metrics = SimpleNamespace(
            streaming=SimpleNamespace(
                connected=False, last_event_ms=0, ms_behind_source=0, source_event_position={}
            )
        )

    def emit(self, event: Any) -> None:
        self.events.append(event)

    def emit_row(
        self,
        op: Operation,
        table_id: Any,
        before: Any,
        after: Any,
        source: Any,
        offset: Any,
        transaction_id: Any = None,
        partial: bool = False,
    ) -> None:
        self.rows.append((op, table_id.table, before, after, source, offset))
        self.events.append(("row", op, table_id.table))

    def register_table(self, table: Table) -> None:
        self.tables.append(table)

    def is_included(self, table_id: Any) -> bool:
        return True

    @contextmanager
    def batched(self, limit: int = 512) -> Iterator[Callable[[], None]]:
        yield lambda: None


def streaming(conn: Recorded) -> tuple[SqlServerStreaming, Catalog]:
    cfg = CONFIG_DEF.parse(
        {
            "database.server.name": "server1",
            "database.hostname": "h",
            "database.user": "u",
            "database.names": "testDB",
            "max.iteration.transactions": "0",
        }
    )
    s = SqlServerStreaming(cfg)
    s.positions = DatabasePositions(cfg, None)
    return s, Catalog(conn, TSQL, "testDB")


def poll(
    s: SqlServerStreaming, ctx: Ctx, catalog: Catalog, pos: SqlServerPosition
) -> tuple[SqlServerPosition, bool]:
    """One poll of the catalog's database from ``pos``: the position after it, and whether
    it read a window."""
    db = _Database(catalog.database, catalog.conn, catalog, pos)
    read = s._poll(ctx, db)  # type: ignore[arg-type]
    assert db.pos is not None
    return db.pos, read


TWO_TABLES = [
    ("dbo", "a", "dbo_a", L(1), 101, 11, None),
    ("dbo", "b", "dbo_b", L(1), 102, 12, None),
]
COLUMNS = {101: [("id", "int"), ("name", "nvarchar")], 102: [("id", "int"), ("name", "nvarchar")]}


def test_resume_mid_commit_then_updates_and_a_key_change() -> None:
    changes = {
        # commit 0x10: b then a; commit 0x20: an update and a primary key update (3/4 pairs)
        "dbo_a": [
            (L(0x10), L(0x0D), 2, b"\x03", 1, "a1"),
            (L(0x20), L(0x1A), 3, b"\x02", 1, "a1"),
            (L(0x20), L(0x1A), 4, b"\x02", 1, "a1x"),
            (L(0x20), L(0x1B), 3, b"\x01", 2, "a2"),
            (L(0x20), L(0x1B), 4, b"\x01", 5, "a2"),
        ],
        "dbo_b": [(L(0x10), L(0x0C), 2, b"\x03", 1, "b1")],
    }
    conn = Recorded(TWO_TABLES, changes, COLUMNS, L(0x20))
    s, catalog = streaming(conn)
    ctx = Ctx()
    # stopped after b's insert in commit 0x10: it must not come again, a's insert must
    resume = SqlServerPosition(Lsn(L(0x10)), Lsn(L(0x0C)), 1)
    pos, read = poll(s, ctx, catalog, resume)
    assert read and pos == SqlServerPosition(Lsn(L(0x20)))
    ops = [
        (op, t, b and b[0], a and a[0], src["event_serial_no"]) for op, t, b, a, src, _ in ctx.rows
    ]
    assert ops == [
        (Operation.CREATE, "a", None, 1, 1),
        (Operation.UPDATE, "a", 1, 1, 2),
        (Operation.UPDATE, "a", 2, 5, 2),  # the core splits a key change into d, tombstone, c
    ]
    assert ctx.rows[1][2] == (1, "a1") and ctx.rows[1][3] == (1, "a1x")
    assert ctx.rows[2][5] == {
        "commit_lsn": "00000027:00000758:0020",
        "change_lsn": "00000027:00000758:001b",
        "event_serial_no": 2,
    }
    # the window started at the stored commit, not after it
    windows = [p for sql, p in conn.asked if sql == TSQL.changes("dbo_a")]
    assert windows == [(L(0x10), L(0x20))]
    kinds = [type(e).__name__ if not isinstance(e, tuple) else "row" for e in ctx.events]
    assert kinds == [
        "TransactionBegin",
        "row",
        "TransactionEnd",
        "TransactionBegin",
        "row",
        "row",
        "TransactionEnd",
        "PositionReached",
    ]
    ends = [e for e in ctx.events if isinstance(e, TransactionEnd)]
    assert [e.offset["change_lsn"] for e in ends] == [None, None]
    assert isinstance(ctx.events[0], TransactionBegin)
    assert ctx.events[0].transaction_id == "00000027:00000758:0010"
    assert isinstance(ctx.events[-1], PositionReached)


def test_online_schema_evolution_switches_at_the_new_instance_start() -> None:
    """Two capture instances of ``a``: the old one until the new one's start LSN (0x18), the
    new one (with the added column) from there, nothing read twice."""
    instances = [
        ("dbo", "a", "dbo_a", L(1), 101, 11, None),
        ("dbo", "a", "dbo_a_v2", L(0x18), 103, 11, None),
    ]
    columns = {
        101: [("id", "int"), ("name", "nvarchar")],
        103: [("id", "int"), ("name", "nvarchar"), ("email", "nvarchar")],
    }
    changes: dict[str, list[tuple[Any, ...]]] = {
        "dbo_a": [
            (L(0x10), L(0x0D), 2, b"\x03", 1, "a1"),
            (L(0x20), L(0x1C), 2, b"\x03", 2, "a2"),  # also in the new instance
        ],
        "dbo_a_v2": [(L(0x20), L(0x1C), 2, b"\x07", 2, "a2", "a2@x")],
    }
    conn = Recorded(instances, changes, columns, L(0x20))
    s, catalog = streaming(conn)
    ctx = Ctx()
    poll(s, ctx, catalog, SqlServerPosition(Lsn(L(0x01))))
    assert [(r[1], r[3]) for r in ctx.rows] == [("a", (1, "a1")), ("a", (2, "a2", "a2@x"))]
    switches = [e for e in ctx.events if isinstance(e, SchemaChange)]
    assert len(switches) == 1 and switches[0].source["commit_lsn"] == "00000027:00000758:0020"
    # its offset is the last event's: storing it marks nothing of commit 0x20 as done
    assert switches[0].offset == {
        "commit_lsn": "00000027:00000758:0010",
        "change_lsn": "00000027:00000758:000d",
        "event_serial_no": 1,
    }
    assert [t.column_names() for t in ctx.tables][-1] == ["id", "name", "email"]
    assert s.registered[ctx.tables[-1].id].extra["capture_instance"] == "dbo_a_v2"


def test_datetimeoffset_struct_from_the_odbc_driver() -> None:
    raw = struct.pack("<6hI2h", 2026, 11, 25, 18, 30, 5, 123_456_700, -5, -30)
    value = datetimeoffset(raw)
    assert value == dt.datetime(
        2026, 11, 25, 18, 30, 5, 123456, tzinfo=dt.timezone(-dt.timedelta(hours=5, minutes=30))
    )


def test_max_iteration_transactions_bounds_each_window() -> None:
    """max.iteration.transactions=1: one commit per poll, the next poll after it."""
    changes: dict[str, list[tuple[Any, ...]]] = {
        "dbo_a": [
            (L(0x10), L(0x0D), 2, b"\x03", 1, "a1"),
            (L(0x20), L(0x1A), 2, b"\x03", 2, "a2"),
            (L(0x20), L(0x1B), 2, b"\x03", 3, "a3"),
        ],
        "dbo_b": [],
    }
    conn = Recorded(TWO_TABLES, changes, COLUMNS, L(0x20))
    s, catalog = streaming(conn)
    s.max_tx = 1
    ctx = Ctx()
    pos = SqlServerPosition(Lsn(L(0x05)))
    seen = []
    for _ in range(3):
        pos, _read = poll(s, ctx, catalog, pos)
        seen.append((str(pos.commit_lsn), [r[3][0] for r in ctx.rows]))
        ctx.rows.clear()
    assert seen == [
        ("00000027:00000758:0010", [1]),
        ("00000027:00000758:0020", [2, 3]),
        ("00000027:00000758:0020", []),
    ]
