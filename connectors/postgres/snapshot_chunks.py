"""Parallel snapshot reading (``snapshot.max.threads`` > 1): several connections, one snapshot.

Every reader connection imports the snapshot the replication slot exported
(``SET TRANSACTION SNAPSHOT``), so all of them see exactly the same rows as a single reader
would, and the handover to streaming stays lossless. Work is handed out as *chunks*: a whole
table, or — for a plain table bigger than :data:`MIN_SPLIT_PAGES` — a range of its heap pages
(``ctid >= '(a,0)' AND ctid < '(b,0)'``, a TID range scan since PostgreSQL 14). Each row
version has exactly one ctid, so the ranges cover a table exactly once; the last range is
open-ended because the table may have grown past the page count ``pg_class`` remembers.

Readers only fetch (``snapshot_rows.text_batches``); every row is emitted by the calling thread, in
batches taken from a bounded queue. The dispatcher and the queue therefore keep a single
producer, and a slow Kafka still holds back the readers (backpressure) instead of filling
memory. The gain is overlap: while the emitting thread builds events, the readers wait on
the network and on PostgreSQL, which matters most when the database is remote or big.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from connectors.postgres.snapshot_rows import text_batches

log = logging.getLogger("tidemark.postgres.snapshot")

MIN_SPLIT_PAGES = 1024  # 8 MiB: below that, one reader per table is as fast
CHUNKS_PER_READER = 4  # more chunks than readers so a slow chunk does not leave a reader idle
BATCH_ROWS = 512


@dataclass(frozen=True)
class Chunk:
    table_index: int
    query: sql.Composable
    ncols: int
    label: str


def split_table(
    table_index: int,
    base: sql.Composable,
    ncols: int,
    pages: int,
    readers: int,
    *,
    table: sql.Identifier | None,
) -> list[Chunk]:
    """The chunks of one table: ``base`` whole, or page ranges of ``table`` (None when it
    cannot be split: a select override, a partitioned table)."""
    parts = readers * CHUNKS_PER_READER
    if table is None or readers < 2 or pages < MIN_SPLIT_PAGES:
        return [Chunk(table_index, base, ncols, "all")]
    bounds = [pages * i // parts for i in range(parts)] + [None]
    chunks = []
    for lo, hi in itertools.pairwise(bounds):
        cond = sql.SQL("ctid >= {}::tid").format(sql.Literal(f"({lo},0)"))
        if hi is not None:
            cond = sql.SQL("{} AND ctid < {}::tid").format(cond, sql.Literal(f"({hi},0)"))
        query = sql.SQL("SELECT * FROM {} WHERE {}").format(table, cond)
        chunks.append(Chunk(table_index, query, ncols, f"pages {lo}..{hi if hi else 'end'}"))
    return chunks


class ParallelReader:
    """Runs chunks on the given connections (each already inside the imported snapshot) and
    yields ``(table_index, rows)`` batches and ``(table_index, None)`` when a chunk ends."""

    def __init__(self, connections: list[Any], chunks: list[Chunk]) -> None:
        self._connections = connections
        self._work: queue.SimpleQueue[Chunk] = queue.SimpleQueue()
        for c in chunks:
            self._work.put(c)
        self._out: queue.Queue[tuple[int, list[tuple[Any, ...]] | None] | BaseException] = (
            queue.Queue(maxsize=4 * len(connections))
        )
        self._cancel = threading.Event()
        self._threads = [
            threading.Thread(
                target=self._run, args=(conn,), name=f"pg-snapshot-reader-{i}", daemon=True
            )
            for i, conn in enumerate(connections)
        ]
        self._pending = len(chunks)

    def batches(
        self, stop: Callable[[], bool]
    ) -> Iterator[tuple[int, list[tuple[Any, ...]] | None]]:
        for t in self._threads:
            t.start()
        try:
            while self._pending:
                if stop():
                    raise InterruptedError("snapshot interrupted by stop")
                try:
                    item = self._out.get(timeout=0.2)
                except queue.Empty:
                    continue
                if isinstance(item, BaseException):
                    raise item
                if item[1] is None:
                    self._pending -= 1
                yield item
        finally:
            self.close()

    def close(self) -> None:
        """Stop the readers; a reader blocked in its query is cancelled on its connection."""
        self._cancel.set()
        for conn in self._connections:
            with contextlib.suppress(Exception):
                conn.cancel()
        for t in self._threads:
            if t.is_alive():
                t.join(10)

    def _put(self, item: tuple[int, list[tuple[Any, ...]] | None] | BaseException) -> bool:
        while not self._cancel.is_set():
            try:
                self._out.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, conn: Any) -> None:
        try:
            while not self._cancel.is_set():
                try:
                    chunk = self._work.get_nowait()
                except queue.Empty:
                    return
                with contextlib.closing(
                    text_batches(conn, chunk.query, chunk.ncols, BATCH_ROWS)
                ) as batches:
                    for batch in batches:
                        if not self._put((chunk.table_index, batch)):
                            return
                if not self._put((chunk.table_index, None)):
                    return
        except BaseException as exc:  # handed to the emitting thread, which raises it
            if not self._cancel.is_set():
                self._put(exc)
