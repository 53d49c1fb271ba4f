"""Chunks read by several readers (cdc.snapshot.incremental_parallel) on the fake database of
test_incremental_snapshot: a chunk whose read is held keeps the chunks after it from being
emitted, they stay de-duplicated by the stream after their close watermark, everything goes
out in key order; a failed read fails the streaming thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from cdc.snapshot.incremental_state import decode_key
from cdc.spi import Table
from cdc.spi.chunks import Key
from tests.unit import test_incremental_snapshot as serial
from tests.unit.test_incremental_snapshot import FakeDb, Harness, K


class ParallelFakeDb(FakeDb):
    """The fake database with three readers (its forks are itself: it has no connection);
    a read whose lower bound is in ``gates`` waits for that event, one in ``failing``
    fails."""

    max_threads = 3

    def __init__(self) -> None:
        super().__init__()
        self.gates: dict[Key | None, threading.Event] = {}
        self.failing: set[Key | None] = set()
        self.reads = 0
        #: close watermarks written
        self.closes = 0

    def write_watermark(self, signal_table: Any, signal_id: str, kind: str) -> None:
        super().write_watermark(signal_table, signal_id, kind)
        self.closes += kind == "snapshot-window-close"

    def fork(self) -> ParallelFakeDb:
        return self

    def chunk_end(
        self,
        table: Table,
        key_columns: Sequence[str],
        after: Key | None,
        upto: Key,
        size: int,
        condition: str | None,
    ) -> Key | None:
        keys = [k for k in sorted(self.rows[table.id]) if after is None or k > after[0]]
        keys = [k for k in keys if k <= upto[0]]
        return (keys[size - 1],) if len(keys) >= size else None

    def read_chunk(
        self,
        table: Table,
        key_columns: Sequence[str],
        after: Key | None,
        upto: Key,
        limit: int,
        condition: str | None,
    ) -> list[Sequence[Any]]:
        gate = self.gates.get(after)
        if gate is not None:
            assert gate.wait(30)
        if after in self.failing:
            raise RuntimeError("connection lost")
        rows = super().read_chunk(table, key_columns, after, upto, limit, condition)
        self.reads += 1
        return rows


@pytest.fixture
def h(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    monkeypatch.setattr(serial, "FakeDb", ParallelFakeDb)
    harness = Harness(chunk_size=3, rows={i: (i, f"v{i}") for i in range(1, 10)})
    yield harness
    harness.inc.reader.close()


def db(h: Harness) -> ParallelFakeDb:
    assert isinstance(h.db, ParallelFakeDb)
    return h.db


def until(predicate: Callable[[], bool]) -> None:
    """Wait for the reader threads (not a timing assertion: the deadline only stops a hang)."""
    deadline = time.monotonic() + 30
    while not predicate():
        assert time.monotonic() < deadline, "reader threads did not get there"
        time.sleep(0.005)


def closes(h: Harness) -> int:
    return db(h).closes


def test_chunks_wait_for_the_one_before_and_stay_deduplicated_after_their_close(
    h: Harness,
) -> None:
    held = db(h).gates[None] = threading.Event()
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]})
    h.pump()  # three ranges handed out: (-, 3], (3, 6], (6, 9]
    until(lambda: db(h).reads == 2 and closes(h) == 2)
    h.pump()  # the second and third chunks closed, the first is still being read
    assert h.events() == []
    assert h.inc.parallel is not None and h.inc.parallel.max_in_flight >= 2
    h.db.update((5, "v5'"))  # after the second chunk's close: newer than its read
    h.pump()
    held.set()
    until(lambda: closes(h) == 3)
    h.pump()
    assert h.events() == [("u", 5)] + [("r", k) for k in (1, 2, 3, 4, 6, 7, 8, 9)]
    keys = [
        decode_key(r.source_offset["incremental_snapshot_primary_key"])
        for r in h.records
        if r.value is not None and r.value["op"] == "r"
    ]
    assert keys == sorted(keys, key=lambda k: k[0] if k else 0)
    assert not h.inc.active and h.inc.chunks_read == 3
    assert [q for q in sorted(h.db.queries, key=lambda q: q[1][0])] == [
        (None, (3,)),
        ((3,), (6,)),
        ((6,), (9,)),
    ]


def test_a_failed_read_fails_the_streaming_thread(h: Harness) -> None:
    db(h).failing.add((3,))
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]})
    with pytest.raises(RuntimeError, match="connection lost"):
        while True:  # until the wake-up row the reader thread asked for is streamed
            h.pump()
            until(lambda: bool(h.db.log))
    assert h.inc.parallel is not None and h.inc.parallel.error is not None


def test_rows_inserted_into_a_range_after_its_end_was_placed_are_read(h: Harness) -> None:
    """A range is read whole (no LIMIT): a row that is in it when it is read, though it was
    not when its end was placed, is not cut off (the range then has four rows)."""
    held = db(h).gates[None] = threading.Event()
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]})
    h.pump()
    h.db.rows[K.id][2.5] = (2.5, "late")  # the fake only needs keys that sort
    held.set()
    until(lambda: closes(h) == 3)
    h.pump()
    assert [k for op, k in h.events() if op == "r"] == [1, 2, 2.5, 3, 4, 5, 6, 7, 8, 9]


def test_pause_lets_the_chunks_in_flight_finish_and_hands_out_no_more(h: Harness) -> None:
    for i in range(10, 16):
        h.db.rows[K.id][i] = (i, f"v{i}")
    held = db(h).gates[None] = threading.Event()
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]})
    h.pump()
    h.db.signal("pause-snapshot", None, "p")
    h.pump()
    held.set()
    until(lambda: closes(h) == 3)
    h.pump()
    assert [k for _, k in h.events()] == list(range(1, 10))
    assert h.inc.paused and h.inc.chunks_read == 3
    h.db.signal("resume-snapshot", None, "r")
    h.pump()
    until(lambda: closes(h) == 5)
    h.pump()
    assert [k for _, k in h.events()] == list(range(1, 16))
    assert not h.inc.active


def test_stop_snapshot_drops_the_chunks_in_flight(h: Harness) -> None:
    held = db(h).gates[None] = threading.Event()
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]})
    h.pump()
    h.db.signal("stop-snapshot", {"data-collections": ["db.k"]}, "s2")
    h.pump()
    held.set()
    h.inc.reader.close()  # waits for the reads still running (the others were cancelled)
    h.pump()
    assert h.events() == [] and not h.inc.active
