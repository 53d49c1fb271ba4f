"""Chunks of one table read by several readers at once (``snapshot.max.threads`` > 1).

Debezium reads an incremental snapshot one chunk at a time on the streaming thread. Here, with
``snapshot.max.threads`` = N > 1 (and watermark rows, ``read.only=false``), up to N chunks of
the table are read at once by N reader threads, each on a connection of its own, while the
streaming thread goes on. DBLog's argument holds per chunk, unchanged:

* **Ranges first.** "The next ``chunk.size`` rows after the last key" is serial by nature, so
  the streaming thread first asks where the next chunk ends (``chunk_end``: the key of the
  ``chunk.size``-th row after the previous end, a keys-only index query); the chunk is then the
  key range ``(lo, hi]``, read whole (no ``LIMIT``: rows inserted into the range meanwhile are
  read too, or streamed, never cut off). The last range ends at the table's largest key.
* **A window per chunk.** A reader writes the chunk's own open watermark, reads the range,
  writes its own close watermark. On the streaming thread, once a chunk's open watermark has
  been seen, every streamed event of the table notes its keys in that chunk's ``touched`` set
  (the event is not older than the read); this goes on after its close watermark, until the
  chunk is emitted. At emission the rows read whose keys were touched are dropped: the
  stream has (or had) their newer state. The rows are handed over at the close watermark,
  which the reader wrote after its read returned.
* **Emitted in key order.** A chunk is emitted only when its close watermark has been seen
  and every chunk before it was emitted; the one after it waits, still de-duplicated by the
  stream. So the offset's last key sent stays a resume point: a restart goes on after the
  last chunk (or read) emitted and reads the chunks that were in flight again (AC-75).

* **Reads that saw everything streamed before them.** PostgreSQL writes a commit record
  before the transaction leaves the running set, so a transaction streamed before a chunk's
  open watermark may still be invisible to the read that follows it; the read would then be
  older than an event already sent. A reader with ``commit_visibility_lag`` places each read
  (``begin_chunk_read``/``end_chunk_read``, as for read-only watermarks); at emission the
  last transactions streamed before the open watermark must all be visible to it, else the
  chunk is read again in a new window.

As soon as a chunk is emitted, the next range is handed out, so N reads stay in flight. The
reads in flight are counted (``max_in_flight``, logged at the end of each table). A read that
fails is re-raised on the streaming thread at the next event (a wake-up row makes one): the
task fails and resumes from its offsets. Blocking snapshots and read-only watermarks read one
chunk at a time.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from cdc.errors import FatalError
from cdc.signals import model
from cdc.snapshot.incremental_state import encode_key
from cdc.spi import ChunkReader, Table, TableId
from cdc.spi.chunks import Key, ParallelChunkReader, ReadWindow

log = logging.getLogger("tidemark.snapshot.incremental")

#: a chunk is a key range read whole: rows inserted into it meanwhile are read too
NO_LIMIT = 2**62
#: (source, offset, transaction id) of the first event of a transaction streamed
Recent = tuple[dict[str, Any], dict[str, Any], str | None]


def reader_threads(reader: ChunkReader) -> int:
    """How many readers the connector's reader allows (``snapshot.max.threads``); 1 when it
    cannot fork or place chunk ends."""
    threads = getattr(reader, "max_threads", 1)
    if not isinstance(threads, int) or threads < 2:
        return 1
    if not callable(getattr(reader, "fork", None)) or not callable(
        getattr(reader, "chunk_end", None)
    ):
        return 1
    return threads


@dataclass(eq=False)
class Chunk:
    """One key range ``(after, upto]`` handed to a reader."""

    id: str
    after: Key | None
    upto: Key
    future: Future[list[Sequence[Any]]] | None = None
    #: where its read stood (readers with ``commit_visibility_lag``), and the transactions
    #: streamed last before its open watermark (each must be visible to the read)
    window: ReadWindow | None = None
    before_open: list[Recent] = field(default_factory=list)
    attempt: int = 1
    #: its open watermark was streamed: the table's events de-duplicate it from now on
    open: bool = False
    #: its close watermark was streamed: the read is done
    closed: bool = False
    touched: set[Any] = field(default_factory=set)
    #: the table was truncated after its open watermark: none of its rows may be emitted
    truncated: bool = False


class ParallelChunks:
    """The chunks of the table being snapshotted that are in flight, in key order."""

    def __init__(
        self,
        reader: ParallelChunkReader,
        threads: int,
        *,
        name: str,
        on_error: Callable[[], None],
    ) -> None:
        self.reader = reader
        self.threads = threads
        self.name = name
        self.on_error = on_error
        self.chunks: collections.deque[Chunk] = collections.deque()
        #: where the next range starts, and whether the table's last range is handed out
        self.next_after: Key | None = None
        self.started = False
        self.exhausted = False
        #: reads running now, and the most that ran at once (the proof of parallel reading)
        self.in_flight = 0
        self.max_in_flight = 0
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._readers: queue.SimpleQueue[ParallelChunkReader] = queue.SimpleQueue()
        self._forks: list[ParallelChunkReader] = []
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix=f"{name}-chunk-reader")
        #: the source's commits can be in its log before a new snapshot sees them: each read
        #: is placed (its snapshot noted) and checked against what was streamed before it
        self.checks_visibility = bool(getattr(reader, "commit_visibility_lag", False))
        self._args: tuple[Table, Sequence[str], str | None, TableId] | None = None

    def reset(self) -> None:
        """A new table (or none): chunks still in flight are abandoned (their watermarks
        are ignored when they are streamed)."""
        for chunk in self.chunks:
            if chunk.future is not None:
                chunk.future.cancel()
        self.chunks.clear()
        self.started = self.exhausted = False
        self.next_after = None

    def schedule(
        self,
        table: Table,
        key_columns: Sequence[str],
        after: Key | None,
        upto: Key,
        size: int,
        condition: str | None,
        signal_table: TableId,
        bounds: ParallelChunkReader,
    ) -> int:
        """Hand out ranges until ``threads`` chunks are in flight or the table's last range
        is out; ``after``: where the table's ranges start (the last key sent). ``bounds``
        (the streaming thread's reader) answers where each range ends. Returns how many."""
        if not self.started:
            self.started, self.next_after = True, after
        handed = 0
        while len(self.chunks) < self.threads and not self.exhausted:
            if self.error is not None:
                break
            end = bounds.chunk_end(table, key_columns, self.next_after, upto, size, condition)
            hi = upto if end is None else end
            chunk = Chunk(uuid.uuid4().hex, self.next_after, hi)
            self._args = (table, key_columns, condition, signal_table)
            chunk.future = self._pool.submit(self._read, chunk, *self._args)
            self.chunks.append(chunk)
            self.next_after = hi
            self.exhausted = end is None or encode_key(end) == encode_key(upto)
            handed += 1
        return handed

    def _read(
        self,
        chunk: Chunk,
        table: Table,
        key_columns: Sequence[str],
        condition: str | None,
        signal_table: TableId,
    ) -> list[Sequence[Any]]:
        """A reader thread: the chunk's open watermark, its range, its close watermark."""
        try:
            reader = self._readers.get_nowait()
        except queue.Empty:
            reader = self.reader.fork()
            with self._lock:
                self._forks.append(reader)
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            reader.write_watermark(signal_table, chunk.id + "-open", model.WINDOW_OPEN)
            if self.checks_visibility:
                reader.begin_chunk_read()  # type: ignore[attr-defined]
                try:
                    rows = reader.read_chunk(
                        table, key_columns, chunk.after, chunk.upto, NO_LIMIT, condition
                    )
                finally:
                    chunk.window = reader.end_chunk_read()  # type: ignore[attr-defined]
            else:
                rows = reader.read_chunk(
                    table, key_columns, chunk.after, chunk.upto, NO_LIMIT, condition
                )
            reader.write_watermark(signal_table, chunk.id + "-close", model.WINDOW_CLOSE)
            return rows
        except BaseException as exc:
            log.warning("%s: reading chunk %s failed: %s", self.name, chunk.id, exc)
            self.error = exc
            self.on_error()
            raise
        finally:
            with self._lock:
                self.in_flight -= 1
            self._readers.put(reader)

    def watermark(self, signal_id: str, recent: Sequence[Recent]) -> bool | None:
        """A watermark row was streamed: True for a chunk's close, False for an open, None
        when it is none of the chunks in flight. ``recent``: the transactions streamed last."""
        for chunk in self.chunks:
            if signal_id == chunk.id + "-open":
                chunk.open = True
                chunk.before_open = list(recent)
                return False
            if signal_id == chunk.id + "-close":
                chunk.closed = True
                return True
        return None

    def streamed(self, keys: Sequence[Any]) -> None:
        """An event of the table: its keys are newer than every chunk whose window is open."""
        for chunk in self.chunks:
            if chunk.open:
                chunk.touched.update(keys)

    def truncated(self) -> None:
        """The table was truncated: every row read by a chunk whose window is open is older
        (a row that exists after the truncate was inserted after it, and is streamed)."""
        for chunk in self.chunks:
            if chunk.open:
                chunk.truncated = True

    def pop_ready(self, dedup: Callable[[Sequence[Any]], Any]) -> tuple[Chunk, list[Any]] | None:
        """The first chunk in key order, if its close watermark has been streamed, with its
        rows less those the stream touched; None while it is still being read."""
        if not self.chunks or not self.chunks[0].closed:
            return None
        chunk = self.chunks[0]
        assert chunk.future is not None
        rows = chunk.future.result()  # written its close watermark: returning now
        window = chunk.window
        stale = None
        if window is not None:
            stale = next((r for r in chunk.before_open if window.older(*r) is False), None)
        if stale is not None:
            self._again(chunk, stale)
            return None
        self.chunks.popleft()
        if chunk.truncated:
            return chunk, []
        touched = chunk.touched
        return chunk, [row for row in rows if dedup(row) not in touched]

    def _again(self, chunk: Chunk, stale: Recent) -> None:
        """Transaction ``stale`` was streamed before the chunk's open watermark but is not
        visible to its read (PostgreSQL writes a commit record before the transaction leaves
        the running set): the rows may be older than an event already sent, so the chunk is
        read again, in a window of its own."""
        if chunk.attempt >= 50:
            raise FatalError(
                f"{self.name}: transaction {stale[2]} stays invisible to chunk reads although "
                "it was streamed"
            )
        log.info(
            "%s: transaction %s was streamed before chunk %s opened but is not visible to its "
            "read; reading it again",
            self.name,
            stale[2],
            chunk.id,
        )
        assert self._args is not None
        chunk.id, chunk.attempt = uuid.uuid4().hex, chunk.attempt + 1
        chunk.open = chunk.closed = False
        chunk.touched, chunk.before_open, chunk.window = set(), [], None
        chunk.truncated = False
        chunk.future = self._pool.submit(self._read, chunk, *self._args)

    def close(self) -> None:
        self.reset()
        self._pool.shutdown(wait=True, cancel_futures=True)
        for reader in self._forks:
            try:
                reader.close()
            except Exception:
                log.debug("closing a chunk reader", exc_info=True)
        self._forks.clear()
