"""Incremental snapshots whose chunks are read by several readers at once
(``snapshot.max.threads=3``), on PostgreSQL and MariaDB through Kafka: the scenarios of
:mod:`tests.integration.incremental_scenarios` with a :class:`ParallelDb` (every config gets
``snapshot.max.threads=3``) and a :class:`ParallelSpy` (its forks share the hooks and the
list of chunk queries), and what is new: reads that overlap, a resume after the last chunk
emitted in key order."""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any

from cdc.offsets.memory import MemoryOffsetStore
from cdc.spi import Table
from cdc.spi.chunks import Key
from cdc.testing.kafka_reader import read_topic
from tests.integration.incremental_scenarios import Db, Hook, Spy, read, summary, wait_until

THREADS = 3


@dataclass
class ParallelDb(Db):
    def config(self, *tables: str, **extra: Any) -> dict[str, Any]:
        return super().config(*tables, snapshot_max_threads=THREADS, **extra)

    @classmethod
    def of(cls, db: Db) -> ParallelDb:
        return cls(**{f.name: getattr(db, f.name) for f in fields(db)})


class _Hooks(list[Hook]):
    """Hooks several reader threads take from: one left and taken by two threads at once
    runs once (the other thread gets nothing to run)."""

    def pop(self, index: Any = -1) -> Hook:
        try:
            return super().pop(index)
        except IndexError:
            return lambda: None


@dataclass
class ParallelSpy(Spy):
    """A :class:`Spy` whose forks (one per reader thread) share its hooks and queries; a
    hook runs once whichever reader reaches its point first."""

    def __post_init__(self) -> None:  # a fork's lists are its parent's already
        for name in ("after_max", "after_open", "after_read"):
            if not isinstance(getattr(self, name), _Hooks):
                setattr(self, name, _Hooks(getattr(self, name)))

    @property
    def max_threads(self) -> int:
        return int(self.inner.max_threads)  # type: ignore[attr-defined]

    def fork(self) -> ParallelSpy:
        inner = self.inner.fork()  # type: ignore[attr-defined]
        return ParallelSpy(
            inner, self.queries, self.after_max, self.after_open, self.after_read, self.watermarks
        )

    def chunk_end(
        self,
        table: Table,
        key_columns: Sequence[str],
        after: Key | None,
        upto: Key,
        size: int,
        condition: str | None,
    ) -> Key | None:
        return self.inner.chunk_end(  # type: ignore[attr-defined,no-any-return]
            table, key_columns, after, upto, size, condition
        )


def spy_on(monkeypatch: Any, connector_class: Any) -> list[Spy]:
    """Every chunk reader ``connector_class`` makes, wrapped in a :class:`ParallelSpy`."""
    made: list[Spy] = []
    original = connector_class.chunk_reader

    def spied(self: Any) -> Spy:
        made.append(ParallelSpy(original(self)))
        return made[-1]

    monkeypatch.setattr(connector_class, "chunk_reader", spied)
    return made


@contextlib.contextmanager
def writers(db: Db, table: str, top: int, count: int = 4) -> Iterator[set[int]]:
    """``count`` threads upsert (80 %) or delete random keys up to ``top`` until the block
    ends; yields the keys they touched."""
    stop, written = threading.Event(), set[int]()
    upsert = db.upsert.replace("w77", table)

    def write(seed: int) -> None:
        rnd = random.Random(seed)
        while not stop.is_set():
            k = rnd.randint(1, top)
            written.add(k)
            delete = rnd.random() >= 0.8
            with contextlib.suppress(Exception):  # a deadlock between writers: skip that one
                db.sql(f"DELETE FROM {table} WHERE id = {k}" if delete else upsert.format(k=k))
            time.sleep(0.002)

    threads = [threading.Thread(target=write, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    try:
        yield written
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def overlapping_reads_under_writers(db: Db, spies: list[Spy]) -> None:
    """AC-77 with three readers: four writers update, delete and insert rows while the
    chunks are read; the last event of every key equals the table, and every key no writer
    touched was read exactly once. The first read waits until another read has started
    before it returns (a serial reader would never start one: the wait fails), and the
    snapshot counted more than one read in flight."""
    db.sql("CREATE TABLE p77 (id int PRIMARY KEY, n int)")
    db.fill("p77", range(1, 2001), lambda i: "0")
    cfg = db.config("p77", snapshot_mode=db.no_data, incremental_snapshot_chunk_size=100)
    overlapped = threading.Event()

    def hold_first_read() -> None:
        deadline = time.monotonic() + 30
        while len(spies[-1].queries) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        if len(spies[-1].queries) >= 2:
            overlapped.set()

    with db.h.running(cfg) as run:
        db.h.wait_streaming(run)
        spies[-1].after_read.append(hold_first_read)
        with writers(db, "p77", 2200) as written:
            db.signal(["p77"])
            wait_until(lambda: run.engine.coordinator.incremental is not None, run)
            inc = run.engine.coordinator.incremental
            assert inc is not None
            wait_until(lambda: inc.chunks_read > 0 and not inc.active, run, timeout=120)
        table = dict(db.h.sql("SELECT id, n FROM p77"))
        events = read_topic(db.kafka, db.topic(cfg, "p77"), min_count=len(table), settle=3)
    assert overlapped.is_set(), "no second chunk read started while the first was in flight"
    assert inc.parallel is not None and inc.parallel.max_in_flight >= 2
    final: dict[int, Any] = {}
    for e in events:
        final[(e.key or {}).get("id", 0)] = None if e.after is None else e.after["n"]
    wrong = [k for k in set(final) | set(table) if final.get(k) != table.get(k)]
    assert not wrong, [(k, [(e.op, e.after) for e in events if e.key == {"id": k}]) for k in wrong]
    reads = [k for op, k in summary(events) if op == "r"]
    untouched = set(range(1, 2001)) - written
    assert untouched and sorted(k for k in reads if k in untouched) == sorted(untouched)
    assert inc.chunks_read >= 10 and run.engine.metrics.notices == []


def resume_after_the_last_chunk_emitted(db: Db, spies: list[Spy]) -> None:
    """AC-75 with three readers: the stop comes with the fifth chunk's read, which is handed
    out only after the first two chunks were emitted; the restart resumes after the last
    chunk emitted (the offset's last key, a chunk's end), re-reads the chunks that were in
    flight, and every row is read, those after that key exactly once."""
    db.sql("CREATE TABLE p75 (id int PRIMARY KEY, v varchar(20))")
    db.fill("p75", range(1, 31), lambda i: f"'v{i}'")
    store = MemoryOffsetStore()
    cfg = db.config("p75", snapshot_mode=db.no_data, incremental_snapshot_chunk_size=3)
    topic = db.topic(cfg, "p75")
    with db.h.running(cfg, store) as run:
        db.h.wait_streaming(run)
        spies[-1].after_read += [lambda: None] * 4 + [run.engine.stop]
        db.signal(["p75"])
        wait_until(lambda: not run.thread.is_alive(), run)
    stored = store.get(cfg["name"], {"server": cfg["database.server.name"]})
    assert stored is not None
    sent = int(json.loads(stored["incremental_snapshot_primary_key"])[0])
    first = read_topic(db.kafka, topic, min_count=sent, timeout=60, settle=1)
    assert sent % 3 == 0 and 6 <= sent < 30, sent  # whole chunks, in key order
    assert sorted(k for op, k in summary(first) if op == "r") == list(range(1, sent + 1))
    with db.h.running(cfg, store) as run:
        db.h.wait_streaming(run)
        events = read(db, topic, len(first) + 30 - sent)
    again = [k for op, k in summary(events[len(first) :]) if op == "r"]
    assert sorted(again) == list(range(sent + 1, 31)), (again, sent)
    assert min(int(after[0]) for after, _ in spies[-1].queries if after) == sent
