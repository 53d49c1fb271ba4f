"""A truncate of the table an incremental snapshot is reading, streamed inside a chunk's
window: every row the chunk read before it is gone, so none of them may follow the truncate
downstream as a read (the apply job, which honours truncates, would bring them back). Rows
that exist after the truncate were inserted after it and reach the topic by streaming.

Watermark rows (one chunk at a time, and several readers at once) and read-only watermarks,
on the fake database of test_incremental_snapshot. Truncates are captured
(``skipped.operations=none``). The user's check: the topic applied in order (a truncate
empties the table) equals the table.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from cdc.spi import Table, TableTruncated
from tests.unit import test_incremental_snapshot as serial
from tests.unit.test_dispatcher import drain
from tests.unit.test_incremental_parallel import ParallelFakeDb, until
from tests.unit.test_incremental_read_only import read_only_harness, snapshot_signal
from tests.unit.test_incremental_snapshot import NOPK, FakeDb, Harness, K

TRUNCATE: Any = "truncate"


def truncate(db: FakeDb, table: Table = K) -> None:
    db.rows[table.id].clear()
    db.log.append((TRUNCATE, table.id, None, None))


def capture_truncates(h: Harness) -> Harness:
    h.d.skipped = frozenset()  # skipped.operations=none
    return h


def pump(h: Harness) -> None:
    """``Harness.pump`` with truncates: stream the log as a connector would."""
    while h.db.log:
        op, tid, before, after = h.db.log.pop(0)
        h.position += 1
        source = {"ts_ms": 1, "db": "db", "table": tid.table, "pos": h.position}
        offset = {"pos": h.position}
        if op is TRUNCATE:
            h.ctx.emit(TableTruncated([tid], source, offset))
        else:
            h.ctx.emit_row(op, tid, before, after, source, offset)
        h.records += drain(h.queue)


def events(h: Harness) -> list[tuple[str, Any]]:
    """``(op, key)`` of each event of table k, tombstones left out."""
    out = []
    for r in h.records:
        if r.topic.endswith(".k") and r.value is not None:
            image = r.value["after"] or r.value["before"]
            out.append((r.value["op"], None if image is None else image["id"]))
    return out


def applied(h: Harness) -> dict[int, str]:
    """Table k as the apply job makes it from the topic, in order."""
    rows: dict[int, str] = {}
    for r in h.records:
        if not r.topic.endswith(".k") or r.value is None:
            continue
        op, after = r.value["op"], r.value["after"]
        if op == "t":
            rows.clear()
        elif after is None:
            rows.pop(r.value["before"]["id"], None)
        else:
            rows[after["id"]] = after["v"]
    return rows


def table(db: FakeDb) -> dict[int, str]:
    return {key: row[1] for key, row in db.rows[K.id].items()}


def test_truncate_inside_the_window_drops_the_chunk_read_before_it() -> None:
    h = capture_truncates(Harness(rows={i: (i, f"v{i}") for i in (1, 2, 3)}))
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]})

    def inside_window() -> None:  # after the chunk's read, before its close watermark
        truncate(h.db)
        h.db.insert((2, "again"))

    h.db.after_read.append(inside_window)
    pump(h)
    assert events(h) == [("t", None), ("c", 2)]
    assert applied(h) == table(h.db) == {2: "again"}
    assert not h.inc.active


def test_truncate_before_the_window_keeps_the_reads_of_rows_inserted_after_it() -> None:
    h = capture_truncates(Harness(rows={i: (i, f"v{i}") for i in (1, 2, 3)}))
    truncate(h.db)
    h.db.insert((5, "new"))
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]})
    pump(h)
    assert events(h) == [("t", None), ("c", 5), ("r", 5)]
    assert applied(h) == table(h.db) == {5: "new"}


def test_truncate_of_another_table_inside_the_window_keeps_the_chunk() -> None:
    h = capture_truncates(Harness(rows={i: (i, f"v{i}") for i in (1, 2)}))
    h.db.rows[NOPK.id][1] = (1, "x")
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]})
    h.db.after_read.append(lambda: truncate(h.db, NOPK))
    pump(h)
    assert events(h) == [("r", 1), ("r", 2)]
    assert applied(h) == table(h.db)


@pytest.fixture
def parallel(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    monkeypatch.setattr(serial, "FakeDb", ParallelFakeDb)
    h = capture_truncates(Harness(chunk_size=3, rows={i: (i, f"v{i}") for i in range(1, 10)}))
    yield h
    h.inc.reader.close()


def test_parallel_chunks_open_at_the_truncate_drop_their_reads(parallel: Harness) -> None:
    """Three chunks in flight, (-, 3] held in its read: (3, 6] and (6, 9] were read and
    closed, waiting for it, when the table is truncated and a row inserted. None of the rows
    they read may follow the truncate."""
    h = parallel
    db = h.db
    assert isinstance(db, ParallelFakeDb)
    held = db.gates[None] = threading.Event()
    opened: list[int] = []
    db.after_open += [lambda: opened.append(1)] * 3
    db.signal("execute-snapshot", {"data-collections": ["db.k"]})
    pump(h)  # three ranges handed out
    until(lambda: db.reads == 2 and db.closes == 2 and len(opened) == 3)
    pump(h)  # every window open, the last two closed: they wait for the first
    assert events(h) == []
    truncate(db)
    db.insert((4, "new"))
    pump(h)
    held.set()
    until(lambda: db.closes == 3)
    pump(h)
    assert events(h) == [("t", None), ("c", 4)]
    assert applied(h) == table(db) == {4: "new"}
    assert not h.inc.active


def test_read_only_window_truncated_after_the_read_drops_it() -> None:
    h, db = read_only_harness()
    capture_truncates(h)
    for key in (1, 2, 3):
        db.rows[K.id][key] = (key, f"v{key}")
    h.inc.submit(snapshot_signal())

    def after_the_read() -> None:
        truncate(db)
        db.insert((3, "again"))

    db.after_read.append(after_the_read)
    db.insert((7, "x"), NOPK)  # the event the signal runs with
    pump(h)
    assert events(h) == [("t", None), ("c", 3)]
    assert applied(h) == table(db) == {3: "again"}
    assert not h.inc.active


def test_read_only_window_keeps_a_read_that_saw_the_truncate() -> None:
    """The stream behind the read: the truncate and the insert after it were committed
    before the read (it saw them) and are streamed after it; the read of the new row stays."""
    h, db = read_only_harness()
    capture_truncates(h)
    for key in (1, 2):
        db.rows[K.id][key] = (key, f"v{key}")
    h.inc.submit(snapshot_signal())
    db.insert((7, "x"), NOPK)  # the event the signal runs with: the read sees what follows
    truncate(db)
    db.insert((5, "new"))
    pump(h)
    assert events(h) == [("t", None), ("c", 5), ("r", 5)]
    assert applied(h) == table(db) == {5: "new"}
