"""The snapshot driver: the numbered, logged steps of every initial snapshot.

A relational snapshot is the same sequence for every database (Debezium's
``RelationalSnapshotChangeEventSource``); only the steps' insides differ. The driver runs

1. prepare: connections and sessions (PostgreSQL: the exported snapshot its readers import);
2. tables: the captured tables (and, where a schema history needs them, the others);
3. lock: block what the snapshot mode asks (DDL, or writes) until the position is known;
4. position: the offset the snapshot is consistent with (nothing committed after it is in,
   nothing committed before it missing);
5. structure: table definitions declared to the core (and recorded in the schema history);
   schema-only locks may be released here;
6. rows: ``op=r`` events for every row, with progress, once the core recorded where
   streaming must start (``SourceContext.snapshot_starting``, before the first row);
7. release: locks and transactions, whatever happened before;

over a :class:`SnapshotSteps` each connector supplies by composition. The driver owns the
order, the logging, the call to ``snapshot_starting`` and the row loop (:class:`TableScan`),
so a connector writes only what its database needs. Which offset streaming starts from after
a restarted snapshot is the coordinator's rule (``cdc.pipeline.coordinator``); the steps only
check that their log still holds it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cdc.config import Config
from cdc.errors import FatalError
from cdc.spi import Operation, RowChange, SourceContext, Table, TableId

log = logging.getLogger("tidemark.snapshot")

#: how often a table's progress is reported (metrics and log), in rows
PROGRESS_EVERY_ROWS = 10_000

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


STEPS = ("prepare", "tables", "lock", "position", "structure", "rows", "release")


def run_snapshot(
    ctx: SourceContext,
    steps: SnapshotSteps,
    *,
    include_data: bool,
    handover: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the steps; returns the offset streaming starts from (``handover`` if given: the
    caller already recorded the restart position, as for newly added tables)."""
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
        if include_data:
            if handover is None:
                # Recorded durably before the first row; an earlier attempt's position comes
                # back when there is one, and streaming must start there.
                handover = steps.handover(dict(ctx.snapshot_starting(position)))
            scans = steps.scans()
            step(6, f" ({len(scans)} table(s))")
            emit_scans(ctx, scans, steps.read(scans))
        elif handover is None:
            handover = position
        completed = True
    finally:
        step(7)
        steps.release(completed)
    return handover


def emit_scans(
    ctx: SourceContext,
    scans: list[TableScan],
    batches: Iterable[tuple[TableScan, Sequence[Row] | None]],
) -> None:
    """The rows step: every table's rows as ``op=r`` events, with progress and completion."""
    ctx.snapshot_started([s.id for s in scans])
    try:
        for scan, rows in batches:
            if rows is None:
                scan.completed(ctx)
            else:
                scan.emit(ctx, rows)
    finally:
        _close(batches)  # its cursors, before the release step closes their connections


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

    @property
    def id(self) -> TableId:
        return self.table.id

    def emit(self, ctx: SourceContext, batch: Sequence[Row]) -> None:
        """Emit a batch of rows as ``op=r`` events; report progress every
        :data:`PROGRESS_EVERY_ROWS` rows and stop between batches when asked."""
        emit, tid, source, offset = ctx.emit, self.table.id, self.source, self.offset
        read, op = RowChange, Operation.READ
        before = self.rows
        for row in batch:
            emit(read(op, tid, None, row, source, offset))
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
