"""The snapshot driver: the numbered, logged steps of every initial snapshot.

A relational snapshot is the same sequence for every database (Debezium's
``RelationalSnapshotChangeEventSource``); only the steps' insides differ. The driver runs

1. prepare: connections and sessions (PostgreSQL: the exported snapshot its readers import);
2. tables: the captured tables (and, where a schema history needs them, the others);
3. lock: block what the snapshot mode asks (DDL, or writes) until the position is known;
4. position: the offset the snapshot is consistent with (nothing committed after it is in,
   nothing committed before it missing);
5. structure: table definitions declared to the core (and recorded in the schema history);
   schema-only locks may be released here; then the core records where streaming must start
   (``SourceContext.snapshot_starting``), with rows or without (``no_data``: an interrupted
   data snapshot's origin is where streaming starts, so the deletes of rows it emitted are
   replayed);
6. rows: ``op=r`` events for every row, with progress;
7. release: locks and transactions, whatever happened before;

over a :class:`SnapshotSteps` each connector supplies by composition. The driver owns the
order, the logging, the call to ``snapshot_starting`` and the row loop (:class:`TableScan`),
so a connector writes only what its database needs. Which offset streaming starts from after
a restarted snapshot is the coordinator's rule (``cdc.pipeline.coordinator``); the steps only
check that their log still holds it.

**Resuming an interrupted snapshot.** Every row's offset says which tables were read whole
before it (``snapshot_done``), which table it belongs to (``snapshot_table``) and, for a
table read in key order, the key of the last row of the batch before its own
(``snapshot_after``; the last row of a batch names its own key). A restart after a crash (the
stored offset is that of a row Kafka acknowledged, and every row before it) skips the tables
read whole and reads the current one from after that key. Every
``snapshot.resumable.chunk.size`` rows the source waits until the last one's offset is stored
(``SourceContext.snapshot_chunk_done``) before it reads on, so at most a chunk is read again,
whatever ``offset.flush.interval.ms``. The rows still to read come from the
new attempt's snapshot, which is newer than the first one's; that is safe only when
streaming hands over from the *first* attempt's position (the coordinator's rule), so that
every change since is replayed on top: a connector lets a snapshot resume only when its log
still holds that position (``run_snapshot(resume=...)``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cdc.config import Config
from cdc.errors import FatalError
from cdc.spi import Operation, SourceContext, Table, TableId

log = logging.getLogger("tidemark.snapshot")

#: how often a table's progress is reported (metrics and log), in rows
PROGRESS_EVERY_ROWS = 10_000
#: ``snapshot.resumable.chunk.size``'s default
DEFAULT_CHUNK_ROWS = 10_240
#: records handed to the queue at once by a ``batched`` snapshot
HAND_OFF_RECORDS = 512

Row = Sequence[Any]


class SnapshotSteps(Protocol):
    """The database-specific steps of one snapshot, in the order the driver calls them."""

    def prepare(self) -> None: ...

    def tables(self) -> Sequence[TableId]: ...

    def lock(self) -> None: ...

    def position(self) -> dict[str, Any]: ...

    def structure(self) -> None: ...

    def handover(self, resume: dict[str, Any]) -> dict[str, Any]:
        """Given the offset the core says streaming must start from (this snapshot's position,
        or an earlier attempt's), the offset this connector will stream from: an earlier
        position its log no longer holds falls back to its own, with a warning."""
        ...

    def scans(self) -> list[TableScan]:
        """The tables whose rows are read, with the source block and offset of their events."""
        ...

    def read(self, scans: list[TableScan]) -> Iterator[tuple[TableScan, Sequence[Row] | None]]:
        """Rows to emit as ``(table, batch)``, and ``(table, None)`` once a table is read."""
        ...

    def release(self, completed: bool) -> None:
        """Always called; ``completed``: every step before succeeded (commit, not just close)."""
        ...

    # Optional: ``may_resume() -> bool``, asked after ``handover``: False when the handover
    # fell back to this snapshot's own position (the log no longer holds the earlier one), so
    # an interrupted snapshot must not resume (its rows read before would miss the changes
    # made since). Without it, a resume point given to run_snapshot is used.


STEPS = ("prepare", "tables", "lock", "position", "structure", "rows", "release")


def run_snapshot(
    ctx: SourceContext,
    steps: SnapshotSteps,
    *,
    include_data: bool,
    handover: dict[str, Any] | None = None,
    resume: ResumePoint | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    batched: bool = False,
) -> dict[str, Any]:
    """Run the steps; returns the offset streaming starts from (``handover`` if given: the
    caller already recorded the restart position, as for newly added tables). ``resume``:
    where an interrupted attempt got to; only given when streaming hands over from that
    attempt's position (see the module docstring). ``chunk_rows``:
    ``snapshot.resumable.chunk.size``. ``batched``: see :func:`emit_scans`."""
    total = len(STEPS)
    completed = False

    def step(n: int, detail: str = "") -> None:
        log.info("snapshot step %d/%d: %s%s", n, total, STEPS[n - 1], detail)

    try:
        step(1)
        steps.prepare()
        step(2)
        tables = steps.tables()
        step(3, f" ({len(tables)} table(s))")
        steps.lock()
        step(4)
        position = steps.position()
        step(5)
        steps.structure()
        if handover is None:
            # Recorded durably before the first row; an earlier attempt's position comes
            # back when there is one, and streaming must start there. Asked without data
            # too (no_data, schema_only): the rows an interrupted data snapshot emitted are
            # downstream, and only streaming from its origin replays their deletes.
            handover = steps.handover(dict(ctx.snapshot_starting(position)))
        if include_data:
            scans = steps.scans()
            may_resume = getattr(steps, "may_resume", None)
            if resume is not None and callable(may_resume) and not may_resume():
                log.warning(
                    "the interrupted snapshot's position is no longer in the log: this "
                    "snapshot reads every table again instead of resuming"
                )
                resume = None
            if resume is not None:
                scans = resume.apply(scans)
            step(6, f" ({len(scans)} table(s))")
            done = resume.done if resume else frozenset()
            emit_scans(ctx, scans, steps.read(scans), done, chunk_rows, batched=batched)
        completed = True
    finally:
        step(7)
        steps.release(completed)
    return handover


def emit_scans(
    ctx: SourceContext,
    scans: list[TableScan],
    batches: Iterable[tuple[TableScan, Sequence[Row] | None]],
    done: frozenset[str] = frozenset(),
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    *,
    batched: bool = False,
) -> None:
    """The rows step: every table's rows as ``op=r`` events, with progress and completion.
    Each table's row offsets name the tables read whole before its first row (``done``:
    those an earlier attempt read whole, then this attempt's).

    ``batched``: records reach the queue a run at a time (``SourceContext.batched``: one
    hand-off per :data:`HAND_OFF_RECORDS` instead of a lock round trip per record; the chunk
    wait hands over what it holds first). Only for a snapshot that runs on its own, not
    inside a streaming source's ``batched`` block (SQL Server snapshots an added database
    there): the block does not nest."""
    if batched:
        with ctx.batched(HAND_OFF_RECORDS) as flush:
            _emit_scans(ctx, scans, batches, done, chunk_rows, flush)
    else:
        _emit_scans(ctx, scans, batches, done, chunk_rows, None)


def _emit_scans(
    ctx: SourceContext,
    scans: list[TableScan],
    batches: Iterable[tuple[TableScan, Sequence[Row] | None]],
    done: frozenset[str],
    chunk_rows: int,
    flush: Callable[[], None] | None,
) -> None:
    ctx.snapshot_started([s.id for s in scans])
    read_whole = set(done)
    started: set[int] = set()
    try:
        for scan, rows in batches:
            if rows is None:
                scan.completed(ctx)
                if flush is not None:
                    flush()  # the table's last records go before the next table's query
                read_whole.add(scan.name)
                continue
            if id(scan) not in started:
                started.add(id(scan))
                scan.chunk_rows = chunk_rows
                scan.offset = {
                    **scan.offset,
                    "snapshot_done": sorted(read_whole),
                    "snapshot_table": scan.name,
                }
            scan.emit(ctx, rows)
        ctx.snapshot_completed()
    finally:
        _close(batches)  # its cursors, before the release step closes their connections


@dataclass(frozen=True)
class ResumePoint:
    """Where an interrupted snapshot got to, from the offset of the last row Kafka
    acknowledged (see the module docstring)."""

    done: frozenset[str]
    table: str | None
    after: list[Any] | None

    @classmethod
    def of(cls, offset: Mapping[str, Any] | None) -> ResumePoint | None:
        if not offset or not offset.get("snapshot") or offset.get("snapshot_completed"):
            return None
        done, table = offset.get("snapshot_done"), offset.get("snapshot_table")
        if not isinstance(done, list) or not isinstance(table, str):
            return None  # a marker, or an older release's row offset: start over
        after = offset.get("snapshot_after")
        return cls(frozenset(map(str, done)), table, list(after) if after else None)

    def fields(self) -> dict[str, Any]:
        """The offset fields that carry this point (kept while the next attempt starts)."""
        return {
            "snapshot_done": sorted(self.done),
            "snapshot_table": self.table,
            "snapshot_after": self.after,
        }

    def apply(self, scans: list[TableScan]) -> list[TableScan]:
        """The scans still to read: without the tables read whole, the current one from
        after its key when it is read in key order (else whole again)."""
        out = []
        for scan in scans:
            if scan.name in self.done:
                log.info("snapshot of %s: read whole by an earlier attempt, skipped", scan.id)
                continue
            if scan.name == self.table and self.after is not None and scan.key_of is not None:
                scan.after = self.after
                log.info("snapshot of %s resumes after key %s", scan.id, self.after)
            out.append(scan)
        return out


@dataclass
class TableScan:
    """One table's rows: the source block and offset its events carry, and its progress."""

    table: Table
    source: dict[str, Any]
    offset: dict[str, Any]
    estimate: int | None
    #: what the connector needs to read it (query, chunks, ...)
    plan: Any = None
    rows: int = 0
    t0: float = field(default_factory=time.monotonic)
    #: a row's key, JSON-serialisable, when the connector reads this table in key order (so
    #: an interrupted snapshot can resume inside it; a key it returns as None cannot be
    #: resumed after); None: read whole again after a crash
    key_of: Callable[[Row], list[Any] | None] | None = None
    #: read the rows after this key only (set when a snapshot resumes, see ResumePoint)
    after: list[Any] | None = None
    #: in key order: rows between two waits for the stored offset (``snapshot_chunk_done``)
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    _unstored: int = field(default=0, init=False, repr=False)

    @property
    def id(self) -> TableId:
        return self.table.id

    @property
    def name(self) -> str:
        """The table as snapshot offsets name it."""
        return ".".join(p for p in self.table.id if p)

    def emit(self, ctx: SourceContext, batch: Sequence[Row]) -> None:
        """Emit a batch of rows as ``op=r`` events; report progress every
        :data:`PROGRESS_EVERY_ROWS` rows and stop between batches when asked.

        In key order a batch's rows' offsets say after which key it starts (read again if
        not all of it is acknowledged), its last row's offset says after its own key (all of
        it is); once ``chunk_rows`` rows went out since the last wait, the source waits until
        that last offset is stored (``snapshot_chunk_done``) before it reads on, so a crash
        re-reads at most a chunk (rounded up to a batch) however long the offset flush
        interval."""
        # ``emit_row`` is ``emit(RowChange(...))`` without building and dispatching an event
        # object per row.
        emit, tid, source, offset = ctx.emit_row, self.table.id, self.source, self.offset
        op = Operation.READ
        before = self.rows
        key_of = self.key_of
        # Debezium 3.x envelope: the batch's rows share one source block, shaped once here
        # rather than per row by the dispatcher (the first/last markers copy the block of
        # the record they mark, see ``snapshot_marks``)
        shape = getattr(ctx, "shape_source", None)
        emit_rows = getattr(ctx, "emit_rows", None)
        if key_of is not None and batch:
            start = {**offset, "snapshot_after": self.after}
            self.after = key_of(batch[-1])
            shared = source if shape is None else shape(source, start)
            if emit_rows is not None:
                emit_rows(op, tid, batch[:-1], shared, start)
            else:
                for row in batch[:-1]:
                    emit(op, tid, None, row, shared, start)
            end = {**offset, "snapshot_after": self.after}
            emit(op, tid, None, batch[-1], source, end)
            self._unstored += len(batch)
            if self._unstored >= self.chunk_rows:
                ctx.snapshot_chunk_done()
                self._unstored = 0
        elif emit_rows is not None:
            emit_rows(op, tid, batch, source, offset)
        else:
            for row in batch:
                emit(op, tid, None, row, source, offset)
        count = self.rows = before + len(batch)
        if count // PROGRESS_EVERY_ROWS != before // PROGRESS_EVERY_ROWS:
            ctx.snapshot_progress(tid, count, self.estimate)
            self.log_progress()
        if ctx.stop_event.is_set():
            raise InterruptedError("snapshot interrupted by stop")

    def completed(self, ctx: SourceContext) -> None:
        ctx.snapshot_table_completed(self.table.id, self.rows)
        log.info(
            "snapshot of %s done: %d rows in %.1f s",
            self.table.id,
            self.rows,
            time.monotonic() - self.t0,
        )

    def log_progress(self) -> None:
        rows, estimate = self.rows, self.estimate
        elapsed = time.monotonic() - self.t0
        rate = rows / elapsed if elapsed > 0 else 0.0
        if estimate and rate and estimate > rows:
            log.info(
                "snapshot %s: %d/%d rows (%.0f%%), %.0f rows/s, ETA %.0f s",
                self.table.id,
                rows,
                estimate,
                100 * rows / estimate,
                rate,
                (estimate - rows) / rate,
            )
        else:
            log.info("snapshot %s: %d rows, %.0f rows/s", self.table.id, rows, rate)


def one_by_one(
    scans: Sequence[TableScan],
    stop: Callable[[], bool],
    rows_of: Callable[[TableScan], Iterable[Sequence[Row]]],
) -> Iterator[tuple[TableScan, Sequence[Row] | None]]:
    """The rows of each table in turn, read by ``rows_of`` in batches (for
    :meth:`SnapshotSteps.read` when a connector reads one table at a time)."""
    for n, scan in enumerate(scans, 1):
        if stop():
            raise InterruptedError("snapshot interrupted by stop")
        log.info("snapshot table %d/%d %s (about %s rows)", n, len(scans), scan.id, scan.estimate)
        scan.t0 = time.monotonic()
        rows = rows_of(scan)
        try:
            for batch in rows:
                yield scan, batch
        finally:
            _close(rows)
        yield scan, None


def _close(iterable: object) -> None:
    """Finish a generator now (its ``finally`` blocks run), not when it is collected."""
    close = getattr(iterable, "close", None)
    if callable(close):
        close()


def in_batches(rows: Iterable[Row], size: int = 1024) -> Iterator[list[Row]]:
    """Rows read one at a time (a COPY stream), handed on in lists of ``size``."""
    batch: list[Row] = []
    append = batch.append
    for row in rows:
        append(row)
        if len(batch) >= size:
            yield batch
            batch = []
            append = batch.append
    if batch:
        yield batch


def select_override(cfg: Config, name: str) -> str | None:
    """``snapshot.select.statement.overrides`` lists tables by ``name`` (``schema.table`` or
    ``db.table``); the statement for each is in
    ``snapshot.select.statement.overrides.<name>``."""
    listed = {t.strip() for t in cfg["snapshot.select.statement.overrides"]}
    if name not in listed:
        return None
    stmt = cfg.raw.get(f"snapshot.select.statement.overrides.{name}")
    if not stmt:
        raise FatalError(
            f"snapshot.select.statement.overrides lists {name} but "
            f"snapshot.select.statement.overrides.{name} is not set"
        )
    return str(stmt).rstrip().rstrip(";")


def plain_key_reader(positions: Sequence[int]) -> Callable[[Row], list[Any] | None]:
    """:attr:`TableScan.key_of` for keys whose values are JSON as they are (integers,
    strings; ``positions``: the key's columns in the row); None for a row whose key holds
    anything else (binary, temporal, decimal: its table is read whole again after a crash)."""

    def key(row: Row) -> list[Any] | None:
        values = [row[i] for i in positions]
        if all(isinstance(v, (int, str)) and not isinstance(v, bool) for v in values):
            return values
        return None

    return key
