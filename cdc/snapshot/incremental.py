"""Incremental snapshots by signal: DBLog's watermark algorithm, once for every connector.

Streaming never stops. A snapshot is asked for by an ``execute-snapshot`` signal (a row
inserted into ``signal.data.collection``, seen in the log like any change, or another
channel). Then, for each table in turn, on the streaming thread:

1. the table's largest key is read once: the end of its snapshot, kept in the offset; rows
   inserted above it later arrive by streaming only;
2. a chunk is read: a ``snapshot-window-open`` row is written to the signal table, the next
   ``incremental.snapshot.chunk.size`` rows in key order after the last key (and up to the
   largest) are read into a buffer, a ``snapshot-window-close`` row is written;
3. while the stream is between the two watermarks, every event of the table removes its
   key from the buffer (the streamed event is newer, or at least not older, than the read:
   only it is kept); every event is emitted as usual;
4. at the close watermark the rest of the buffer is emitted as ``op=r`` events, and the next
   chunk is read, until the largest key; then the next table.

Every offset stored meanwhile carries the context (tables left, largest key, last key sent;
``cdc.snapshot.incremental_state``), so a restart resumes after the last chunk sent: a read's
offset names its own key, so a crash half-way through a chunk resumes after the last read
Kafka acknowledged. The connector answers only the database questions
(:class:`cdc.spi.ChunkReader`).

Read-only watermarks (``read.only=true``, :class:`cdc.spi.chunks.ReadOnlyChunkReader`) write
nothing: step 2 reads the chunk in one consistent read whose position in the log the connector
knows (PostgreSQL ``pg_current_snapshot()``, MySQL/MariaDB GTIDs), and notes the position
again after it (the high watermark). The window is open from the read on: an event of a
transaction the read did not see removes its keys from the buffer (it is newer), one the read
saw does not (it is older); the window closes after the first event at or past the high
watermark, which proves that every transaction the read could have seen has been streamed.
Signals then come only from the other channels (Kafka, file, REST), which run with the next
event the stream reports (a heartbeat on an idle database). Before a read is used, the last
transactions streamed must all be visible to it: one streamed an instant before its commit
became visible (PostgreSQL removes it from the running set after writing the commit record)
would leave the buffer older than an event already sent, so the chunk is read again.

A reader with ``commit_visibility_lag`` (PostgreSQL: a commit record is in the WAL an instant
before new snapshots see the transaction) also places each watermark read
(``begin_chunk_read``/``end_chunk_read``): at the open watermark, the last transactions
streamed before it must all be visible to the read, else the chunk is read again between new
watermarks (its rows could be older than an event already sent).

With ``snapshot.max.threads`` > 1 (and watermark rows), step 2 is done by several reader
threads at once, one key range each, every chunk in a window of its own, emitted in key order
(:mod:`cdc.snapshot.incremental_parallel`).

:class:`SignalledContext` is what the streaming source sees instead of the dispatcher when
signals are configured: it forwards everything and observes the signal table and the table
being snapshotted on the way.
"""

from __future__ import annotations

import collections
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

from cdc.envelope import V3
from cdc.errors import FatalError
from cdc.pipeline.dispatcher import EventDispatcher
from cdc.signals import model
from cdc.signals.model import Signal, SignalError
from cdc.signals.notifications import Notifier
from cdc.snapshot.incremental_parallel import NO_LIMIT, ParallelChunks, reader_threads
from cdc.snapshot.incremental_state import (
    SIGNAL_OFFSET,
    Collection,
    SnapshotContext,
    encode_key,
    signal_offset,
    without_context,
)
from cdc.spi import (
    ChunkReader,
    Operation,
    RowChange,
    SourceEvent,
    SourceMetrics,
    Table,
    TableId,
    TableTruncated,
)
from cdc.spi.chunks import Key, ReadWindow

log = logging.getLogger("tidemark.snapshot.incremental")

_MISSING: Any = object()
_SIGNAL = 1
_DATA = 2
#: how a watermark row's id ends (Debezium's)
OPEN_SUFFIX = "-open"
CLOSE_SUFFIX = "-close"
#: not a signal: the offset keys are to be computed again on the streaming thread
_REFRESH = Signal("", "tidemark-refresh")
#: not a signal: a reader thread's chunk read failed (re-raised on the streaming thread)
_READ_FAILED = Signal("", "tidemark-read-failed")
#: ``chunk_id`` while chunks are read by several readers (:mod:`.incremental_parallel`)
_PARALLEL = "parallel"


class IncrementalSnapshot:
    """The state of incremental snapshots of one connector task, driven by the stream."""

    def __init__(
        self,
        dispatcher: EventDispatcher,
        reader: ChunkReader,
        *,
        name: str,
        signal_table: str | None,
        chunk_size: int = 1024,
        source_signals: bool = True,
        notifier: Notifier | None = None,
        read_only: bool = False,
    ) -> None:
        self.d = dispatcher
        #: shared with the threads of other signal channels (their wake-up writes)
        self.reader = _LockedReader(reader)
        self.name = name
        self.signal_table = signal_table
        self.chunk_size = chunk_size
        #: rows of the signal table are commands too (``source`` channel), not only watermarks
        self.source_signals = source_signals
        #: read-only watermarks: nothing is written to the source (``read.only``)
        self.read_only = read_only
        #: the chunk's read-only window while open (read-only watermarks)
        self.window: ReadWindow | None = None
        #: (source, offset, transaction id) of the first event of the last transactions
        #: streamed while a read-only snapshot runs: each must be visible to the next read
        self.recent: collections.deque[tuple[dict[str, Any], dict[str, Any], str | None]] = (
            collections.deque(maxlen=64)
        )
        self.notifier = notifier
        #: the offset of the event the stream reported last (notification records carry it)
        self.last_offset: dict[str, Any] | None = None
        #: the source block of the last row event (a blocking snapshot's reads start from it)
        self.last_source: dict[str, Any] | None = None
        #: the running snapshot is a blocking one (``execute-snapshot`` ``type: blocking``)
        self.blocking = False
        self.context = SnapshotContext()
        #: an incremental snapshot is under way (its context goes into every offset)
        self.active = False
        self.paused = False
        #: the offset keys of the context while active, else None
        self.extra: dict[str, Any] | None = None
        #: the table being read, its key columns and their positions in a row
        self.table: Table | None = None
        self._key_columns: list[str] = []
        self._key_index: list[int] = []
        self._dedup: Callable[[Sequence[Any]], Any] = tuple
        #: the chunk between its watermarks
        self.chunk_id: str | None = None
        self.window_open = False
        #: the chunk's rows by their key (a key without a primary key may hold several rows)
        self.buffer: dict[Any, list[Sequence[Any]]] = {}
        self._chunk_last: Key | None = None
        self._chunk_full = False
        #: rows emitted of the current table (this run)
        self.rows = 0
        #: a restored table the connector has not declared yet (MySQL learns tables as it
        #: starts streaming)
        self.waiting = False
        #: chunk queries run (for tests and the log)
        self.chunks_read = 0
        #: signals from channels other than the log, run on the streaming thread
        self.pending: collections.deque[Signal] = collections.deque()
        self._kinds: dict[TableId, int | None] = {}
        self._lock = threading.Lock()
        #: the Kafka signal topic position of the last signal run (its effect is in the
        #: offsets from then on), and the one the channel's consumer group committed
        self.signal_position: int | None = None
        self.signal_committed: int | None = None
        #: told the position of a signal whose effect a stored offset holds (the channel
        #: commits its consumer offset after it)
        self.on_signal_durable: Callable[[int], None] | None = None
        #: chunks read by several readers at once (``snapshot.max.threads`` > 1)
        self.parallel: ParallelChunks | None = None
        threads = reader_threads(reader)
        if threads > 1 and read_only:
            log.info(
                "%s: read.only=true reads incremental snapshot chunks one at a time "
                "(snapshot.max.threads=%d applies with watermark rows)",
                name,
                threads,
            )
        elif threads > 1:
            self.parallel = ParallelChunks(
                reader,  # type: ignore[arg-type]
                threads,
                name=name,
                on_error=lambda: self.submit(_READ_FAILED),
            )
            self.reader.parallel = self.parallel
        #: a commit can be in the source's log before new snapshots see it (PostgreSQL):
        #: each chunk read is placed (its snapshot noted) and checked at its open watermark
        self.placed = bool(getattr(reader, "commit_visibility_lag", False)) and callable(
            getattr(reader, "begin_chunk_read", None)
        )
        #: the placed read of the chunk between its watermarks, and how often in a row a
        #: read had to be done again
        self._chunk_read: ReadWindow | None = None
        self._stale_reads = 0
        #: the transactions streamed last are noted (``recent``): read-only and placed reads
        #: must see every one streamed before them
        self.track_recent = read_only or self.placed

    def check_signal_table(self) -> None:
        """The signal table must exist and be captured: its rows reach the core only
        through the stream."""
        name = self.signal_table
        if name is None or self.read_only:
            return  # read-only: the table is neither written nor needed
        tid = next((t for t in self.reader.tables() if _names(name, t)), None)
        if tid is None:
            raise FatalError(
                f"signal.data.collection={name}: no such table; create it with columns "
                "(id varchar(64), type varchar(32), data varchar(2048))"
            )
        if not self.d.is_included(tid):
            raise FatalError(
                f"signal.data.collection={name} is not captured: add it to "
                "table.include.list so its rows reach the connector through the log"
            )

    # -- state from the offset -----------------------------------------------------------------
    def restore(self, offset: Mapping[str, Any] | None) -> None:
        """Take over the context of a stored offset (a snapshot interrupted by a stop or a
        crash): it resumes after the last key sent."""
        self.signal_position = signal_offset(offset)
        ctx = SnapshotContext.from_offset(offset)
        if ctx is None or not ctx.collections:
            self._update_extra()
            return
        self.context = ctx
        self.active = True
        self.waiting = True
        self.paused = ctx.paused
        self.blocking = ctx.blocking
        self._update_extra()
        log.info(
            "%s: resuming %s snapshot of %s after key %s (up to %s)%s",
            self.name,
            "blocking" if ctx.blocking else "incremental",
            [c.id for c in ctx.collections],
            encode_key(ctx.last_key),
            encode_key(ctx.maximum_key),
            "; paused until resume-snapshot" if ctx.paused else "",
        )

    def forget_signal_position(self) -> None:
        """The Kafka channel is off: no consumer offset will be committed, so the position
        an offset holds is dropped instead of being carried on in every offset."""
        self.signal_position = None
        self._update_extra()

    def start(self) -> None:
        """Before streaming starts: read the next chunk of a restored snapshot, if the table
        is known already (else when the connector declares it)."""
        if self.active and self.waiting:
            if self.blocking and self.last_offset is None:
                self._wake()  # its reads take a row event's position: make one
            self._advance(patient=True)

    def poke(self) -> None:
        """A restored snapshot waiting for its table: try again, and give up on a table
        that is still unknown (``patient=False``)."""
        if self.waiting:
            self._advance(patient=False)

    # -- what the stream shows ------------------------------------------------------------------
    def kind(self, table_id: TableId) -> int | None:
        kind = self._kinds.get(table_id, _MISSING)
        if kind is _MISSING:
            kind = self._kinds[table_id] = self._classify(table_id)
        return kind  # type: ignore[no-any-return]

    def _classify(self, table_id: TableId) -> int | None:
        if self.signal_table is not None and _names(self.signal_table, table_id):
            return _SIGNAL
        if self.table is not None and table_id == self.table.id:
            return _DATA
        return None

    def streamed(self, before: Sequence[Any] | None, after: Sequence[Any] | None) -> None:
        """An event of the table being snapshotted: inside the window, its keys (old and
        new) leave the buffer."""
        parallel = self.parallel
        if parallel is not None and parallel.chunks:
            keys = []
            for row in (before, after):
                if row is not None:
                    try:
                        keys.append(self._dedup(row))
                    except Exception:  # a partial before image without key values
                        log.debug("no key in %r", row, exc_info=True)
            parallel.streamed(keys)
            return
        if not self.window_open or not self.buffer:
            return
        dedup = self._dedup
        for row in (before, after):
            if row is not None:
                try:
                    self.buffer.pop(dedup(row), None)
                except Exception:  # a partial before image without key values
                    log.debug("no key in %r", row, exc_info=True)

    def truncated(self, event: TableTruncated) -> None:
        """A truncate of the table being snapshotted, inside the window: every row read
        before it is gone, so the whole buffer leaves it (as a row event's keys do). A row
        the read saw that exists after the truncate was inserted after it, before the close
        watermark: the stream brings it. Emitted at the close watermark instead, the rows
        would follow the truncate downstream and bring deleted rows back."""
        if not any(self.kind(tid) == _DATA for tid in event.table_ids):
            return
        parallel = self.parallel
        if parallel is not None and parallel.chunks:
            parallel.truncated()
            return
        if not self.window_open or not self.buffer:
            return
        window = self.window
        if window is not None and window.older(
            event.source or self.last_source or {}, event.offset, event.transaction_id
        ):
            return  # read-only: the read saw the truncate, its rows came after it
        assert self.table is not None
        log.info(
            "%s: %s truncated inside the chunk's window: %d rows read are dropped",
            self.name,
            short_name(self.table.id),
            len(_rows_of(self.buffer)),
        )
        self.buffer = {}

    def signal_row(
        self, after: Sequence[Any] | None, source: dict[str, Any], offset: dict[str, Any]
    ) -> None:
        """A row inserted into the signal table: a watermark of the chunk, or a command."""
        if after is None or self.signal_table is None:
            return
        table = self._signal_table_struct()
        if table is None:
            return
        try:
            names = table.column_names()
            values = {n: after[i] for i, n in enumerate(names) if i < len(after)}
            signal = model.parse(
                values.get("id", after[0] if after else None),
                values.get("type", after[1] if len(after) > 1 else None),
                values.get("data", after[2] if len(after) > 2 else None),
            )
        except SignalError as exc:
            self._notice(f"signal skipped: {exc}")
            return
        if signal.type in (model.WINDOW_OPEN, model.WINDOW_CLOSE) and self.parallel is not None:
            if self.parallel.watermark(signal.id, self.recent):
                self._parallel_closed(source, offset)
            return
        if signal.type == model.WINDOW_OPEN:
            if self.chunk_id is not None and signal.id == self.chunk_id + OPEN_SUFFIX:
                self.window_open = True
                self._check_placed_read()
            return
        if signal.type == model.WINDOW_CLOSE:
            if self.chunk_id is not None and signal.id == self.chunk_id + CLOSE_SUFFIX:
                self._close_window(source, offset)
            return
        if signal.type == model.WAKE or not self.source_signals:
            return
        self.execute(signal)

    def _signal_table_struct(self) -> Table | None:
        for tid, table in self.d.tables.items():
            if self.kind(tid) == _SIGNAL:
                return table
        return None

    # -- signals ---------------------------------------------------------------------------------
    def submit(self, signal: Signal, *, wake: bool = True) -> None:
        """A signal from another thread (Kafka topic, REST, file): run on the streaming
        thread with the next event the stream reports. ``wake``: write a row into the
        signal table so that there is such an event even when the database is idle."""
        with self._lock:
            self.pending.append(signal)
        if wake:
            self._wake(signal.id)

    def _wake(self, why: str = "") -> None:
        """Write a row into the signal table, so that the stream reports an event (and an
        offset holding the current state is stored) even when the database is idle."""
        if self.signal_table is None or self.read_only:
            return  # read-only: the next event the stream reports (a heartbeat) runs it
        try:
            # only the reader here: the dispatcher's tables belong to the streaming thread
            name = self.signal_table
            tid = next(t for t in self.reader.tables() if _names(name, t))
            self.reader.write_watermark(tid, f"wake-{uuid.uuid4().hex}", model.WAKE)
        except Exception:
            log.warning(
                "%s: could not write a wake-up row (%s)", self.name, why or "state", exc_info=True
            )

    def drain(self) -> None:
        """Run the signals submitted so far (one put back for later waits for the next)."""
        for _ in range(len(self.pending)):
            with self._lock:
                signal = self.pending.popleft()
            if signal is _REFRESH:
                self._update_extra()
            elif signal is _READ_FAILED:
                error = self.parallel.error if self.parallel is not None else None
                if error is not None:
                    raise error
            else:
                self.execute(signal)

    def execute(self, signal: Signal) -> None:
        """Run one signal; a malformed one is logged with the reason and skipped. A signal
        from the Kafka topic leaves its position in the offsets (also when skipped: reading
        it again would skip it again). The position goes into the offsets before the signal
        runs: the reads it starts may go out at once (read-only chunks of an idle database)
        and their offsets must say the signal was taken."""
        state, previous = self.extra, self.signal_position
        if signal.position is not None:
            self.signal_position = signal.position
            self._update_extra()
        try:
            self._execute(signal)
        except SignalError as exc:
            self._notice(f"signal {signal.id!r} ({signal.type}) skipped: {exc}")
        if signal.position is not None and any(s is signal for s in self.pending):
            # put back to run later (a blocking snapshot waits for a row event): not taken
            self.signal_position = previous
            self._update_extra()
        if self.extra != state and (not self.active or self.paused):
            # nothing else may be emitted for a while (idle database, paused snapshot): an
            # event so that an offset with the new state is stored
            self._wake(signal.id)

    def stored(self, offset: Mapping[str, Any]) -> None:
        """An offset was stored (task thread): a Kafka signal whose position it holds is
        durable, its consumer offset can be committed."""
        try:
            position = signal_offset(offset)
        except ValueError:
            return
        if position is not None and self.on_signal_durable is not None:
            self.on_signal_durable(position)

    def signal_committed_at(self, position: int) -> None:
        """The signal channel committed its consumer offset after ``position`` (its thread):
        the offsets need not carry it any more; the streaming thread drops the key."""
        self.signal_committed = position
        with self._lock:
            self.pending.append(_REFRESH)

    def _execute(self, signal: Signal) -> None:
        kind = signal.type
        log.info(
            "%s: signal %r %s via %s: %s", self.name, signal.id, kind, signal.channel, signal.data
        )
        if kind == model.EXECUTE_SNAPSHOT:
            self._execute_snapshot(signal)
        elif kind == model.STOP_SNAPSHOT:
            self._stop_snapshot(signal)
        elif kind == model.PAUSE_SNAPSHOT:
            if self.active and not self.paused:
                self.paused = True
                self._update_extra()
                self._note("PAUSED")
        elif kind == model.RESUME_SNAPSHOT:
            if self.paused:
                self.paused = False
                self._update_extra()
                self._note("RESUMED")
                self._advance()
        elif kind == model.LOG:
            log.info("%s: signal log: %s", self.name, signal.data.get("message", signal.data))
        else:
            raise SignalError(f"unknown signal type {kind!r} (known: {', '.join(model.ACTIONS)})")

    def _execute_snapshot(self, signal: Signal) -> None:
        request = model.snapshot_request(signal)
        if self.active and signal.id and signal.id == self.context.signal_id:
            # the same signal read again (a restart re-reads the Kafka topic after the last
            # signal an offset stored): the snapshot it started is under way
            log.info("%s: signal %r: its snapshot is under way already", self.name, signal.id)
            return
        if request.type == "blocking" and self.last_source is None:
            # its reads take the source block of a row event: wait for one (the wake-up row)
            with self._lock:
                self.pending.append(signal)
            return
        if request.type == "blocking" and self.active:
            raise SignalError(
                "a blocking snapshot cannot start while an incremental snapshot runs; "
                "stop it (stop-snapshot) or ask for an incremental one"
            )
        queued = {c.id for c in self.context.collections}
        added: list[Collection] = []
        already = False
        known = self._known_tables()
        for wanted in request.collections:
            for tid in self._match(wanted.id, known):
                if not self.d.is_included(tid):
                    self._notice(
                        f"execute-snapshot {signal.id!r}: {tid} is not captured (add it to "
                        "table.include.list before asking for its snapshot); skipped"
                    )
                    continue
                if short_name(tid) not in queued:
                    queued.add(short_name(tid))
                    added.append(replace(wanted, id=short_name(tid)))
                else:
                    already = True
        if not added and already:
            # e.g. a Kafka signal read again after a restart: its tables are under way
            log.info(
                "%s: signal %r: its tables are being snapshotted already", self.name, signal.id
            )
            return
        if not added:
            raise SignalError(
                f"data-collections {[c.id for c in request.collections]} match no captured table"
            )
        self.context.collections.extend(added)
        log.info(
            "%s: incremental snapshot of %s requested by signal %r",
            self.name,
            [c.id for c in added],
            signal.id,
        )
        names = [c.id for c in added]
        snap = self.d.metrics.snapshot
        if not self.active:
            self.active = True
            self.blocking = request.type == "blocking"
            self.context.signal_id = signal.id
            self.context.maximum_key = self.context.last_key = None
            snap.start(names)
        else:
            snap.total_table_count += len(added)
            snap.remaining_table_count += len(added)
        self._note("STARTED", data_collections=names)
        self._update_extra()
        self._advance()

    def _stop_snapshot(self, signal: Signal) -> None:
        request = model.snapshot_request(signal, require_collections=False)
        names = [c.id for c in request.collections]
        if not self.active:
            log.info("%s: stop-snapshot: no incremental snapshot is running", self.name)
            return
        if not names:
            stopped = [c.id for c in self.context.collections]
            self.context.collections.clear()
        else:
            stopped = [
                c.id
                for c in self.context.collections
                if any(c.id == n or re.fullmatch(n, c.id) for n in names)
            ]
            self.context.collections = [c for c in self.context.collections if c.id not in stopped]
        self._note("ABORTED", data_collections=stopped)
        snap = self.d.metrics.snapshot
        snap.remaining_table_count = max(snap.remaining_table_count - len(stopped), 0)
        if self.table is not None and short_name(self.table.id) in stopped:
            self._leave_table()
        if not self.context.collections:
            self._finish(aborted=True)
        else:
            self._update_extra()
            self._advance()

    def _known_tables(self) -> list[TableId]:
        seen = dict.fromkeys(self.d.tables)
        for tid in self.reader.tables():
            seen.setdefault(tid)
        return list(seen)

    @staticmethod
    def _match(name: str, known: list[TableId]) -> list[TableId]:
        exact = [t for t in known if _names(name, t)]
        if exact:
            return exact
        try:
            pattern = re.compile(name)
        except re.error as exc:
            raise SignalError(f"data-collection {name!r} is no table and no regex: {exc}") from exc
        return [
            t for t in known if pattern.fullmatch(short_name(t)) or pattern.fullmatch(t.identifier)
        ]

    # -- chunks ----------------------------------------------------------------------------------
    def _advance(self, *, patient: bool = False) -> None:
        """Read the next chunk (of this table or the next one), unless a window is open, the
        snapshot is paused or there is nothing left."""
        while self.active and not self.paused and self.chunk_id is None:
            if (self.blocking or self.read_only) and self.d.stop_event.is_set():
                # the offsets say where it was: a restart goes on from there (read-only
                # chunks of an idle database follow each other without a stream event)
                return
            if self.blocking and self.last_offset is None:
                self.waiting = True  # a restored blocking snapshot reads at a row event's
                return
            if self.table is None:
                if not self.context.collections:
                    self._finish()
                    return
                opened = self._open_table(self.context.collections[0], patient)
                if opened is None:  # wait for the connector to declare it
                    return
                if not opened:
                    self._drop_first()
                    continue
            if not self._read_chunk():
                self._table_done()

    def _open_table(self, wanted: Collection, patient: bool) -> bool | None:
        tid = next((t for t in self.d.tables if _names(wanted.id, t)), None)
        table = self.d.tables.get(tid) if tid is not None else None
        if table is None:
            tid = next((t for t in self.reader.tables() if _names(wanted.id, t)), None)
            table = self.reader.describe(tid) if tid is not None else None
            if table is None:
                if patient:
                    return None
                self._notice(f"incremental snapshot of {wanted.id}: table not found; skipped")
                self._scanned(wanted.id, "UNKNOWN_SCHEMA", 0)
                return False
            self.d.register_table(table)
        self.waiting = False
        schema = self.d.schemas[table.id]
        names = table.column_names()
        keys = [wanted.surrogate_key] if wanted.surrogate_key else list(schema.key_columns)
        if not keys or not all(k in names for k in keys):
            self._notice(
                f"incremental snapshot of {wanted.id} rejected: "
                + (
                    f"surrogate-key {wanted.surrogate_key!r} is not a column"
                    if wanted.surrogate_key
                    else "the table has no primary key (give a surrogate-key in the signal, "
                    "or message.key.columns for the table)"
                )
            )
            self._scanned(wanted.id, "NO_PRIMARY_KEY", 0)
            return False
        self._use_layout(table, keys)
        self._kinds.clear()
        self.rows = 0
        estimate = self.reader.estimate_rows(table)
        if estimate is not None:
            self.d.metrics.snapshot.rows_expected[wanted.id] = estimate
        if self.context.maximum_key is None:
            self.context.last_key = None
            try:
                self.context.maximum_key = self.reader.max_key(table, keys, wanted.condition)
            except Exception as exc:
                if not wanted.condition:
                    raise  # the database, not the signal: the task fails and resumes
                self._notice(
                    f"incremental snapshot of {wanted.id} rejected: its additional condition "
                    f"{wanted.condition!r} fails: {exc}"
                )
                self._scanned(wanted.id, "SQL_EXCEPTION", 0)
                return False
            log.info(
                "%s: incremental snapshot of %s started, up to key %s",
                self.name,
                wanted.id,
                encode_key(self.context.maximum_key),
            )
            if self.context.maximum_key is None:
                return True  # empty: _read_chunk finds nothing and completes it
        self._update_extra()
        return True

    def _use_layout(self, table: Table, keys: list[str]) -> None:
        """The table's columns as chunks are read and deduplicated from now on."""
        schema = self.d.schemas[table.id]
        self.table = table
        self._key_columns = keys
        self._key_index = [table.column_names().index(k) for k in keys]
        if schema.key_columns:
            key_from_row = schema.key_from_row
            self._dedup = lambda row: _hashable(key_from_row(row))
        else:
            index = self._key_index
            self._dedup = lambda row: _hashable([row[i] for i in index])

    def table_changed(self, table: Table) -> None:
        """The table being snapshotted changed (its DDL was streamed): rows read under the
        old column layout may not go downstream under the new one (a dropped column would
        shift every later value into the wrong field). As Debezium does, the chunks in hand
        are dropped and read again with the new layout; their watermarks, when streamed,
        name no chunk and are passed over."""
        current = self.table
        if current is None or table.id != current.id or _layout(table) == _layout(current):
            return
        keys = self._key_columns
        if not all(k in table.column_names() for k in keys):
            self._notice(
                f"incremental snapshot of {short_name(table.id)} stopped: its chunk key "
                f"{', '.join(keys)} is no longer a column of the table"
            )
            self._drop_window()
            self._scanned(short_name(table.id), "UNKNOWN_SCHEMA", self.rows)
            self._drop_first()
            return
        log.info(
            "%s: %s changed while a chunk was in hand; the chunk is read again",
            self.name,
            short_name(table.id),
        )
        self._drop_window()
        self._use_layout(table, keys)
        if not self.blocking:  # a blocking snapshot reads its next chunk where it waits
            self._advance()

    def _drop_window(self) -> None:
        if self.parallel is not None:
            self.parallel.reset()
        if self.chunk_id is not None and not self.blocking:
            self.buffer = {}
            self.chunk_id = None
            self.window_open = False
            self.window = None

    def _read_chunk(self) -> bool:
        """Write the open watermark, read the chunk into the buffer, write the close
        watermark; False when the table has no rows left."""
        ctx, table = self.context, self.table
        assert table is not None
        upto = ctx.maximum_key
        if upto is None or (
            ctx.last_key is not None and encode_key(ctx.last_key) == encode_key(upto)
        ):
            return False
        if self.blocking:
            return self._read_blocking(upto)
        if self.read_only:
            return self._read_read_only(upto)
        assert self.signal_table is not None
        signal_tid = _table_id_of(self.signal_table, self.d, self.reader)
        if self.parallel is not None:
            return self._read_parallel(self.parallel, upto, signal_tid)
        chunk_id = uuid.uuid4().hex
        # the last chunk's reads (held in the source's batch) go downstream now, not after
        # this chunk's query: a slow query must not hold back their delivery and offsets
        self.d.flush()
        self.reader.write_watermark(signal_tid, chunk_id + OPEN_SUFFIX, model.WINDOW_OPEN)
        if self.placed:
            self.reader.begin_chunk_read()
            try:
                rows = self._query(upto)
            finally:
                self._chunk_read = self.reader.end_chunk_read()
        else:
            rows = self._query(upto)
        if not rows:
            return False
        self.reader.write_watermark(signal_tid, chunk_id + CLOSE_SUFFIX, model.WINDOW_CLOSE)
        dedup = self._dedup
        self.buffer = _by_key(rows, dedup)
        self.chunk_id = chunk_id
        self.window_open = False
        return True

    def _read_parallel(self, parallel: ParallelChunks, upto: Key, signal_tid: TableId) -> bool:
        """Hand the next ranges to the reader threads (:mod:`.incremental_parallel`); False
        when none is in flight and none is left."""
        ctx, table = self.context, self.table
        assert table is not None
        self.chunks_read += parallel.schedule(
            table,
            self._key_columns,
            ctx.last_key,
            upto,
            self.chunk_size,
            ctx.collections[0].condition,
            signal_tid,
            self.reader,  # type: ignore[arg-type]
        )
        if not parallel.chunks:
            return False
        self.chunk_id = _PARALLEL
        return True

    def _parallel_closed(self, source: dict[str, Any], offset: dict[str, Any]) -> None:
        """A chunk's close watermark: emit every chunk that is ready, in key order, then
        hand out the next ranges (or go on with the next table)."""
        parallel = self.parallel
        assert parallel is not None
        while self.table is not None:
            ready = parallel.pop_ready(self._dedup)
            if ready is None:
                break
            chunk, rows = ready
            self._chunk_last, self._chunk_full = chunk.upto, True
            self._emit_chunk(rows, source, offset)  # the table's last range ends it
        if (
            self.table is not None
            and self.active
            and not self.paused
            and not self.d.stop_event.is_set()
            and self.context.maximum_key is not None
        ):
            assert self.signal_table is not None
            signal_tid = _table_id_of(self.signal_table, self.d, self.reader)
            self._read_parallel(parallel, self.context.maximum_key, signal_tid)
        if not parallel.chunks:
            self.chunk_id = None
            self._advance()

    def _check_placed_read(self) -> None:
        """The chunk's open watermark was streamed: every transaction streamed before it must
        be visible to the chunk's read. One streamed an instant before its commit became
        visible (PostgreSQL writes the commit record first) is older than the watermark but
        missing from the rows, which would then be older than an event already sent: the
        chunk is dropped and read again, between new watermarks."""
        window, self._chunk_read = self._chunk_read, None
        if window is None:
            return
        stale = next((r for r in self.recent if window.older(*r) is False), None)
        if stale is None:
            self._stale_reads = 0
            return
        self._stale_reads += 1
        if self._stale_reads > 50:
            raise FatalError(
                f"{self.name}: transaction {stale[2]} stays invisible to chunk reads although "
                "it was streamed"
            )
        log.info(
            "%s: transaction %s was streamed before the chunk's open watermark but is not "
            "visible to its read; reading it again (%d)",
            self.name,
            stale[2],
            self._stale_reads,
        )
        self.buffer = {}
        self.chunk_id = None
        self.window_open = False
        self._advance()

    def _read_read_only(self, upto: Key) -> bool:
        """A chunk read in one consistent read placed by the stream's own positions; the
        window opens at once (it closes on the stream, see :meth:`observe`), or closes at
        once when the last event reported had passed the high watermark already (an idle
        database: nothing can follow the read). The last chunk's reads go downstream first,
        as with watermark rows."""
        self.d.flush()
        stale: tuple[dict[str, Any], dict[str, Any], str | None] | None = None
        for attempt in range(1, 51):
            self.reader.begin_chunk_read()
            try:
                rows = self._query(upto)
            finally:
                window = self.reader.end_chunk_read()
            stale = next((r for r in self.recent if window.older(*r) is False), None)
            if stale is None:
                break
            # streamed an instant before its commit was visible: read again (microseconds)
            log.info(
                "%s: transaction %s was streamed but is not visible to the chunk read yet; "
                "reading again (%d)",
                self.name,
                stale[2],
                attempt,
            )
            time.sleep(0.01 * attempt)
        else:
            raise FatalError(
                f"{self.name}: read.only: transaction {stale[2] if stale else '?'} stays "
                "invisible to chunk reads although it was streamed"
            )
        if not rows:
            return False
        dedup = self._dedup
        self.buffer = _by_key(rows, dedup)
        self.chunk_id = uuid.uuid4().hex
        self.window_open = True
        self.window = window
        offset, source = self.last_offset, self.last_source
        if offset is not None and window.passed(source or {}, offset, None):
            self._end_window(source or {}, without_context(offset))
        return True

    def observe(
        self,
        kind: int | None,
        before: Sequence[Any] | None,
        after: Sequence[Any] | None,
        source: Mapping[str, Any],
        offset: Mapping[str, Any],
        transaction_id: str | None,
    ) -> bool:
        """A row event while a read-only window is open: a change the read did not see
        removes its keys from the buffer. True: the window closes after this event."""
        window = self.window
        assert window is not None
        if kind == _DATA and not window.older(source, offset, transaction_id):  # None: newer
            self.streamed(before, after)
        return window.passed(source, offset, transaction_id)

    def _end_window(self, source: dict[str, Any], offset: dict[str, Any]) -> None:
        """Emit what is left of the read-only chunk at ``offset`` (an event already
        emitted); the next chunk is read by :meth:`_advance` or by the caller's loop."""
        self._emit_chunk(_rows_of(self.buffer), source, offset)
        self.buffer = {}
        self.chunk_id = None
        self.window_open = False
        self.window = None

    def close_read_window(self, source: dict[str, Any], offset: dict[str, Any]) -> None:
        """The stream passed the high watermark (the event at ``offset`` is emitted)."""
        self._end_window(source, offset)
        self._advance()

    def _read_blocking(self, upto: Key) -> bool:
        """A blocking snapshot's chunk: the stream waits meanwhile, so there is no window;
        the rows go downstream at once at the position of the last event emitted, and the
        stream, going on from there, brings every change made since after them."""
        assert self.last_offset is not None
        rows = self._query(upto)
        if not rows:
            return False
        self._emit_chunk(rows, self.last_source or {}, self.last_offset)
        return True

    def _query(self, upto: Key) -> list[Sequence[Any]]:
        """The next chunk's rows after the last key; notes its last key and whether full."""
        ctx, table = self.context, self.table
        assert table is not None
        condition = ctx.collections[0].condition
        rows = self.reader.read_chunk(
            table, self._key_columns, ctx.last_key, upto, self.chunk_size, condition
        )
        self.chunks_read += 1
        full = len(rows) >= self.chunk_size
        if full and list(self._key_columns) != list(table.primary_key):
            # A chunk key that may repeat (a surrogate-key, a table without a primary key):
            # the next chunk starts after the last key, so rows sharing the last key beyond
            # the LIMIT would be skipped. The chunk is read again up to its last key without
            # a LIMIT, so the database, by its own collation (a case-insensitive one takes
            # 'a' and 'A' for one key), decides which rows share it.
            last = tuple(rows[-1][i] for i in self._key_index)
            rows = self.reader.read_chunk(
                table, self._key_columns, ctx.last_key, last, NO_LIMIT, condition
            )
            self.chunks_read += 1
        if rows:
            self._chunk_last = tuple(rows[-1][i] for i in self._key_index)
            self._chunk_full = full
        return rows

    def _close_window(self, source: dict[str, Any], offset: dict[str, Any]) -> None:
        """The close watermark: what is left of the buffer goes downstream as reads, each
        with its own key in the offset; then the next chunk."""
        self._emit_chunk(_rows_of(self.buffer), source, offset)
        self.buffer = {}
        self.chunk_id = None
        self.window_open = False
        self._advance()

    def _emit_chunk(
        self, rows: Sequence[Sequence[Any]], source: dict[str, Any], offset: dict[str, Any]
    ) -> None:
        """``rows`` as reads at ``offset`` (an event already emitted), each with its own key
        in the offset; the chunk's progress; the table's end after its last chunk."""
        table = self.table
        assert table is not None
        tid = table.id
        src = dict(source)
        src["table"] = tid.table
        if "schema" in src and tid.schema is not None:
            src["schema"] = tid.schema
        if "db" in src and tid.catalog is not None:
            src["db"] = tid.catalog
        src["snapshot"] = "incremental" if self.d.envelope_version == V3 else True
        base = without_context(offset)
        ctx = self.context
        extra = self._offset_keys() or {}
        index = self._key_index
        emit_row = self.d.emit_row
        read = Operation.READ
        for row in rows:
            key = tuple(row[i] for i in index)
            ctx.last_key = key
            extra = {**extra, "incremental_snapshot_primary_key": encode_key(key)}
            emit_row(read, tid, None, row, src, {**base, **extra})
        self.rows += len(rows)
        ctx.last_key = self._chunk_last
        self.last_offset = {**base, **extra}
        self._update_extra()
        name = short_name(tid)
        self.d.metrics.snapshot.rows_scanned[name] = self.rows
        self._note(
            "IN_PROGRESS",
            current_collection_in_progress=name,
            maximum_key=encode_key(ctx.maximum_key) or "",
            last_processed_key=encode_key(ctx.last_key) or "",
        )
        if not self._chunk_full or encode_key(self._chunk_last) == encode_key(ctx.maximum_key):
            self._table_done()

    def _table_done(self) -> None:
        table = self.table
        name = short_name(table.id) if table is not None else self.context.collections[0].id
        log.info(
            "%s: incremental snapshot of %s completed: %d rows emitted, %d chunk queries%s",
            self.name,
            name,
            self.rows,
            self.chunks_read,
            ""
            if self.parallel is None
            else f" by {self.parallel.threads} readers, at most "
            f"{self.parallel.max_in_flight} at once",
        )
        self._scanned(name, "SUCCEEDED" if self.rows else "EMPTY", self.rows)
        self._drop_first()

    def _scanned(self, name: str, status: str, rows: int) -> None:
        """A table is done (or skipped): metrics and the TABLE_SCAN_COMPLETED notification."""
        snap = self.d.metrics.snapshot
        snap.rows_scanned[name] = rows
        snap.rows_expected[name] = rows
        snap.remaining_table_count = max(snap.remaining_table_count - 1, 0)
        self._note(
            "TABLE_SCAN_COMPLETED",
            data_collection=name,
            scanned_collection=name,
            total_rows_scanned=str(rows),
            status=status,
        )

    def _drop_first(self) -> None:
        if self.context.collections:
            self.context.collections.pop(0)
        self._leave_table()
        self._update_extra()

    def _leave_table(self) -> None:
        self._chunk_read = None
        self.table = None
        self.buffer = {}
        self.chunk_id = None
        self.window_open = False
        self.window = None
        self.context.maximum_key = self.context.last_key = None
        self._kinds.clear()
        if self.parallel is not None:
            self.parallel.reset()

    def _finish(self, *, aborted: bool = False) -> None:
        if self.active:
            log.info(
                "%s: incremental snapshot %s", self.name, "aborted" if aborted else "completed"
            )
            self.d.metrics.snapshot.finish(aborted=aborted)
            if not aborted:
                self._note("COMPLETED")
        self.active = self.paused = self.waiting = self.blocking = False
        self._leave_table()
        self.context = SnapshotContext()
        self._update_extra()

    def _update_extra(self) -> None:
        self.extra = self._offset_keys()

    def _offset_keys(self) -> dict[str, Any] | None:
        """The keys every offset gets now: the snapshot's context while one runs, and the
        position of the last Kafka signal run until its consumer offset is committed."""
        keys: dict[str, Any] | None = None
        if self.active:
            ctx = self.context
            ctx.paused, ctx.blocking = self.paused, self.blocking
            keys = ctx.to_offset()
        position = self.signal_position
        if position is not None and (
            self.signal_committed is None or self.signal_committed < position
        ):
            keys = {**(keys or {}), SIGNAL_OFFSET: position}
        return keys

    def _note(self, kind: str, **data: Any) -> None:
        if self.notifier is not None:
            self.notifier.notify(kind, self.last_offset, **data)
        else:
            log.info("%s: incremental snapshot %s %s", self.name, kind, data or "")

    def _notice(self, text: str) -> None:
        log.warning("%s: %s", self.name, text)
        self.d.metrics.notices.append(text)


def _by_key(rows: Sequence[Sequence[Any]], dedup: Callable[[Sequence[Any]], Any]) -> Any:
    """A chunk's rows grouped by key, in key order (rows sharing a key are adjacent)."""
    out: dict[Any, list[Sequence[Any]]] = {}
    for row in rows:
        out.setdefault(dedup(row), []).append(row)
    return out


def _rows_of(buffer: Mapping[Any, list[Sequence[Any]]]) -> list[Sequence[Any]]:
    return [row for rows in buffer.values() for row in rows]


def _layout(table: Table) -> list[tuple[str, str]]:
    """What a chunk's rows depend on: the columns' names, order and types."""
    return [(c.name, c.type_name.lower()) for c in table.columns]


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(_hashable(v) for v in value.values())
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


class _LockedReader:
    """The connector's chunk reader, one caller at a time: the streaming thread reads chunks
    and writes watermarks, another channel's thread may write a wake-up row."""

    def __init__(self, inner: ChunkReader) -> None:
        self.inner = inner
        self.lock = threading.RLock()  # a signal submitted from inside a reader call
        #: the reader threads of parallel chunks, stopped with this reader
        self.parallel: ParallelChunks | None = None

    def tables(self) -> list[TableId]:
        with self.lock:
            return self.inner.tables()

    def describe(self, table_id: TableId) -> Table | None:
        with self.lock:
            return self.inner.describe(table_id)

    def max_key(
        self, table: Table, key_columns: Sequence[str], condition: str | None
    ) -> Key | None:
        with self.lock:
            return self.inner.max_key(table, key_columns, condition)

    def read_chunk(
        self,
        table: Table,
        key_columns: Sequence[str],
        after: Key | None,
        upto: Key,
        limit: int,
        condition: str | None,
    ) -> list[Sequence[Any]]:
        with self.lock:
            return self.inner.read_chunk(table, key_columns, after, upto, limit, condition)

    def estimate_rows(self, table: Table) -> int | None:
        with self.lock:
            return self.inner.estimate_rows(table)

    def chunk_end(
        self,
        table: Table,
        key_columns: Sequence[str],
        after: Key | None,
        upto: Key,
        size: int,
        condition: str | None,
    ) -> Key | None:
        with self.lock:
            return self.inner.chunk_end(  # type: ignore[attr-defined,no-any-return]
                table, key_columns, after, upto, size, condition
            )

    def write_watermark(self, signal_table: TableId, signal_id: str, kind: str) -> None:
        with self.lock:
            self.inner.write_watermark(signal_table, signal_id, kind)

    def begin_chunk_read(self) -> None:
        self.lock.acquire()  # held until end_chunk_read: one consistent read at a time
        try:
            self.inner.begin_chunk_read()  # type: ignore[attr-defined]
        except BaseException:
            self.lock.release()
            raise

    def end_chunk_read(self) -> ReadWindow:
        try:
            return self.inner.end_chunk_read()  # type: ignore[attr-defined,no-any-return]
        finally:
            self.lock.release()

    def close(self) -> None:
        if self.parallel is not None:
            self.parallel.close()
        with self.lock:
            self.inner.close()


def short_name(table_id: TableId) -> str:
    """How signals and filters name a table: ``schema.table`` (PostgreSQL, whose ids carry
    the database too) or ``db.table`` (MySQL)."""
    container = table_id.schema if table_id.schema is not None else table_id.catalog
    return f"{container}.{table_id.table}" if container is not None else table_id.table


def _names(name: str, table_id: TableId) -> bool:
    """Whether ``name`` (a signal's data collection, ``signal.data.collection``) is this
    table: its short name or its full identifier (PostgreSQL ``db.schema.table``)."""
    return name in (short_name(table_id), table_id.identifier)


def _table_id_of(name: str, d: EventDispatcher, reader: ChunkReader) -> TableId:
    for tid in d.tables:
        if _names(name, tid):
            return tid
    for tid in reader.tables():
        if _names(name, tid):
            return tid
    parts = name.split(".")
    return TableId(None, parts[-2] if len(parts) > 1 else None, parts[-1])


class SignalledContext:
    """The :class:`~cdc.spi.SourceContext` a streaming source gets when signals are on: the
    dispatcher's, with the incremental snapshot watching on the way."""

    def __init__(self, dispatcher: EventDispatcher, snapshots: IncrementalSnapshot) -> None:
        self.d = dispatcher
        self.s = snapshots
        self.stop_event = dispatcher.stop_event
        self._emit_row = dispatcher.emit_row

    @property
    def metrics(self) -> SourceMetrics:
        return self.d.metrics

    @property
    def tx_metadata(self) -> bool:
        return self.d.tx_metadata

    def emit(self, event: SourceEvent) -> None:
        if isinstance(event, RowChange):
            self.emit_row(
                event.op,
                event.table_id,
                event.before,
                event.after,
                event.source,
                event.offset,
                event.transaction_id,
                event.partial,
            )
            return
        s = self.s
        extra = s.extra
        window = s.window
        passed = window is not None and window.passed(
            event.source or s.last_source or {}, event.offset, None
        )
        if isinstance(event, TableTruncated) and s.table is not None:
            s.truncated(event)
        if extra is not None:
            event = replace(event, offset={**event.offset, **extra})
        s.last_offset = event.offset
        self.d.emit(event)
        if passed:
            s.close_read_window(event.source or s.last_source or {}, without_context(event.offset))
        if s.pending or s.waiting:
            self._between_events()

    def emit_row(
        self,
        op: Operation,
        table_id: TableId,
        before_row: Sequence[Any] | None,
        after_row: Sequence[Any] | None,
        source: dict[str, Any],
        offset: dict[str, Any],
        transaction_id: str | None = None,
        partial: bool = False,
    ) -> None:
        # The streaming hot path: one dict lookup and a few attribute reads per row when no
        # snapshot runs.
        s = self.s
        kind = s._kinds.get(table_id, _MISSING)
        if kind is _MISSING:
            kind = s.kind(table_id)
        extra = s.extra
        passed = False
        if s.track_recent:
            recent = s.recent
            if not recent or recent[-1][2] != transaction_id or transaction_id is None:
                recent.append((source, offset, transaction_id))
        if extra is not None:
            # a change of a skipped operation (skipped.operations) is not emitted, so it may
            # not take the chunk's row of its key either: nothing would stand for the row
            data = kind if op._value_ not in self.d.skipped else None
            if s.window is not None:
                passed = s.observe(data, before_row, after_row, source, offset, transaction_id)
            elif data == _DATA and not s.read_only:
                s.streamed(before_row, after_row)
            offset = {**offset, **extra}
        s.last_offset = offset
        s.last_source = source
        self._emit_row(op, table_id, before_row, after_row, source, offset, transaction_id, partial)
        if passed:
            s.close_read_window(source, without_context(offset))
        if kind == _SIGNAL and op is Operation.CREATE:
            s.signal_row(after_row, source, without_context(offset))
        if s.pending or s.waiting:
            self._between_events()

    def _between_events(self) -> None:
        self.s.drain()
        self.s.poke()

    def batched(self, limit: int = 512) -> AbstractContextManager[Callable[[], None]]:
        return self.d.batched(limit)

    def register_table(self, table: Table) -> None:
        self.d.register_table(table)
        if self.s.waiting:  # a restored snapshot waits for the connector to declare its table
            self.s.start()
        elif self.s.active:
            self.s.table_changed(table)

    def is_included(self, table_id: TableId) -> bool:
        return self.d.is_included(table_id)

    def snapshot_started(self, table_ids: list[TableId]) -> None:
        self.d.snapshot_started(table_ids)

    def snapshot_progress(self, table_id: TableId, rows: int, total: int | None) -> None:
        self.d.snapshot_progress(table_id, rows, total)

    def snapshot_table_completed(self, table_id: TableId, rows: int) -> None:
        self.d.snapshot_table_completed(table_id, rows)

    def snapshot_completed(self) -> None:
        self.d.snapshot_completed()

    def snapshot_starting(self, position: Mapping[str, Any]) -> dict[str, Any]:
        return self.d.snapshot_starting(position)

    def snapshot_chunk_done(self) -> None:
        self.d.snapshot_chunk_done()
