"""The snapshot: each CDC table read with ``SELECT *`` at ``snapshot.consistency``, no lock
(Cassandra has none: writes during the snapshot may appear in it and in the stream).

Which tables: every captured CDC table with ``snapshot.mode=always``; with ``initial`` those
not yet recorded in ``snapshot_offset.properties`` (the seed's per-table snapshot record:
remove a table's line and it is snapshotted again on the next start, AC-62; a table enabled
for CDC while the connector was stopped is snapshotted on the next start). A table is
recorded as ``pending`` when its rows are emitted and becomes ``done`` only once the core
stored the snapshot-complete offset (all its rows in Kafka).

**Resuming** (``snapshot.resumable``, the core's ``ResumePoint``): a full-table read comes in
token order, partition after partition, so the offset of a batch's last row carries the token
of that row's partition (``snapshot_after: ["<token>"]``) and a restart reads the interrupted
table from ``token(pk) >= <token>``: that partition again (its rows before the crash point are
sent twice, never lost) and every partition after it. Tables read whole before the crash are
skipped. That holds only while streaming starts at the first attempt's commit log position,
so a resume needs its segment still in ``cdc_raw`` (else the snapshot starts over).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cdc.snapshot.driver import ResumePoint, TableScan, one_by_one, run_snapshot
from cdc.snapshot_modes import snapshot_incomplete
from cdc.spi import SnapshotSource, Snapshotter, SourceContext, TableId
from connectors.cassandra.commitlog import list_segments, read_cdc_index
from connectors.cassandra.cqltypes import CqlType, map_key
from connectors.cassandra.offsets import START, CommitLogPosition
from connectors.cassandra.schema import table_id
from connectors.cassandra.snapshot_record import PENDING, record_for
from connectors.cassandra.state import TaskState
from connectors.cassandra.tabledef import TableDef

log = logging.getLogger("tidemark.cassandra.snapshot")


class CassandraSnapshotter(Snapshotter):
    def __init__(self, state: TaskState, mode: str, included: Any) -> None:
        self.state = state
        self.mode = mode  # type: ignore[misc]
        self.included = included
        self.record = record_for(state)

    def should_snapshot(self, offset: Mapping[str, Any] | None) -> bool:
        if offset is not None and not snapshot_incomplete(offset):
            self.record.confirm()
        else:
            self.record.drop_pending()
        if self.mode == "never":
            return False
        if self.mode == "always" or snapshot_incomplete(offset):
            return True
        done = self.record.done()
        tables = self.state.schema().cdc_tables(self.included)
        return any(t.qualified not in done for t in tables)


def snapshot_position(state: TaskState) -> CommitLogPosition:
    """The end of the newest segment's durable part: streaming after the snapshot starts
    there (what is older is in the tables the snapshot reads)."""
    for seg, path in reversed(list_segments(state.cdc_raw)):
        idx = read_cdc_index(path)
        if idx is not None:
            return CommitLogPosition(seg, idx.offset, path.name)
    return START


class _TokenOf:
    """The partition token of the last row of the batch just read, for ``TableScan.key_of``.

    The rows handed to the core hold column values only, so the token read with them is kept
    here for the one row the core asks about (the batch's last, asked before the next batch
    is read). A row it was not kept for gets None: the table would be read whole again after
    a crash, never resumed at a wrong place."""

    def __init__(self) -> None:
        self.row_id = -1
        self.token: str | None = None

    def keep(self, row: list[Any], token: Any) -> None:
        self.row_id = id(row)
        # Murmur3 and Random tokens are integers (Random's beyond 64 bits: kept as text);
        # ByteOrdered's are bytes, not resumed after
        self.token = str(token) if isinstance(token, int) else None

    def __call__(self, row: Sequence[Any]) -> list[Any] | None:
        if id(row) != self.row_id or self.token is None:
            return None
        return [self.token]


class _Steps:
    def __init__(
        self, state: TaskState, ctx: SourceContext, mode: str, resumable: bool = True
    ) -> None:
        self.state = state
        self.ctx = ctx
        self.mode = mode
        self.resumable = resumable
        self.record = record_for(state)
        self.defs: list[TableDef] = []
        self.pos = START
        self._fell_back = False

    def prepare(self) -> None:
        self.state.schema().refresh()

    def tables(self) -> Sequence[TableId]:
        tables = self.state.schema().cdc_tables(self.ctx.is_included)
        if self.mode == "initial":
            done = self.record.done()
            tables = [t for t in tables if t.qualified not in done]
        self.defs = tables
        progress = self.state.snapshot
        progress.total_tables = progress.remaining_tables = len(tables)
        return [table_id(t) for t in tables]

    def lock(self) -> None:
        return None

    def position(self) -> dict[str, Any]:
        # No table to read (all recorded as done, e.g. the stored offsets were removed): no
        # snapshot stands in for the log, so streaming starts at the oldest segment.
        self.pos = snapshot_position(self.state) if self.defs else START
        return self.pos.to_offset()

    def structure(self) -> None:
        for t in self.state.schema().cdc_tables(self.ctx.is_included):
            self.ctx.register_table(self.state.core_table(t))

    def handover(self, resume: dict[str, Any]) -> dict[str, Any]:
        """Streaming starts where the first attempt of this snapshot was consistent, while
        ``cdc_raw`` still holds that segment; else here, and the snapshot reads every table
        again (``may_resume``)."""
        first = CommitLogPosition.from_offset(resume)
        if first != self.pos and first.file and not (self.state.cdc_raw / first.file).exists():
            log.warning(
                "the interrupted snapshot's position %s is no longer in %s; streaming starts "
                "from this snapshot's %s",
                first.file,
                self.state.cdc_raw,
                self.pos.file or "oldest segment",
            )
            self._fell_back = True
            return {**resume, **self.pos.to_offset()}
        return resume

    def may_resume(self) -> bool:
        return not self._fell_back

    def scans(self) -> list[TableScan]:
        cluster = self.state.schema().cluster_name
        out = []
        for t in self.defs:
            source = {
                "ts_ms": int(time.time() * 1000),
                "snapshot": True,
                "cluster": cluster,
                "keyspace": t.keyspace,
                "db": t.keyspace,
                "table": t.name,
                "file": self.pos.file,
                "pos": self.pos.pos,
                "ts_micro": int(time.time() * 1_000_000),
            }
            offset = {**self.pos.to_offset(), "snapshot": True}
            token_of = _TokenOf() if self.resumable else None
            out.append(
                TableScan(
                    self.state.core_table(t),
                    source,
                    offset,
                    None,
                    plan=(t, token_of),
                    key_of=token_of,
                )
            )
        return out

    def read(self, scans: list[TableScan]) -> Iterator[tuple[TableScan, Sequence[Any] | None]]:
        progress = self.state.snapshot
        # tables an interrupted attempt read whole (the resume skips them): recorded as this
        # snapshot's, done once it completes, or mode=initial would read them again next time
        reading = {scan.plan[0].qualified for scan in scans}
        for t in self.defs:
            if t.qualified not in reading:
                self.record.mark(t.qualified, PENDING)
                progress.remaining_tables -= 1
        for scan, batch in one_by_one(scans, self.ctx.stop_event.is_set, self._rows):
            if batch is None:
                self.record.mark(scan.plan[0].qualified, PENDING)
                progress.remaining_tables -= 1
            else:
                progress.rows_scanned += len(batch)
            yield scan, batch

    def _rows(self, scan: TableScan) -> Iterator[list[list[Any]]]:
        t, token_of = scan.plan
        after = scan.after[0] if scan.after else None
        if after is not None:
            log.info("snapshot of %s resumes at partition token %s", t.qualified, after)
        return table_rows(self.state, t, token_of, after)

    def release(self, completed: bool) -> None:
        return None


def table_rows(
    state: TaskState,
    t: TableDef,
    token_of: _TokenOf | None = None,
    after: str | None = None,
) -> Iterator[list[list[Any]]]:
    """A table's rows in batches, in the core table's column order: key values, then a
    ``CellValue`` (``(value, None, True)``) per regular column (then null range bounds when
    they are emitted). With ``token_of`` the partition token of each batch's last row is
    kept there; ``after``: read the partitions from that token on (that one included)."""
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement

    cols = t.primary_key + t.regular
    names = ", ".join(f'"{c.name}"' for c in cols)
    partition = ", ".join(f'"{c.name}"' for c in t.partition_key)
    token = f"token({partition}), " if token_of is not None else ""
    where = f" WHERE token({partition}) >= {int(after)}" if after is not None else ""
    stmt = SimpleStatement(
        f'SELECT {token}{names} FROM "{t.keyspace}"."{t.name}"{where}',
        consistency_level=getattr(ConsistencyLevel, state.cfg["snapshot.consistency"]),
        fetch_size=state.cfg["snapshot.fetch.size"],
    )
    nkey = len(t.primary_key)
    ranges = state.emits_ranges
    skip = 1 if token_of is not None else 0
    batch: list[list[Any]] = []
    r: Any = None
    for r in _prefetched(state.session(), stmt):
        row = [driver_value(c.type, v) for c, v in zip(cols, r[skip:], strict=True)]
        row[nkey:] = [(v, None, True) for v in row[nkey:]]
        if ranges:
            row += (None, None)  # no range bounds (range.delete.handling.mode=emit)
        batch.append(row)
        if len(batch) >= 1024:
            if token_of is not None:
                token_of.keep(row, r[0])
            yield batch
            batch = []
    if batch:
        if token_of is not None:
            token_of.keep(batch[-1], r[0])
        yield batch


def _prefetched(session: Any, stmt: Any) -> Iterator[Any]:
    """The statement's rows, page after page, each next page requested as soon as the one
    before it arrives: the node reads it while this thread converts and emits the current
    one. (Iterating the driver's result set asks for a page only when the last is used up,
    so the snapshot waited for every round trip: measured at 0.9x Debezium's rate with half
    a core busy, bench.cassandra_compare --workload snapshot.)"""
    future = session.execute_async(stmt)
    while True:
        rows = future.result().current_rows
        more = future.has_more_pages
        if more:
            future.start_fetching_next_page()
        yield from rows
        if not more:
            return


def driver_value(t: CqlType, v: Any) -> Any:
    """A value as the driver returns it, in the form the commit log decoder gives."""
    if v is None:
        return None
    name = t.name
    if name == "timestamp":
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.UTC)
        return int(v.timestamp() * 1000)
    if name == "date":
        return int(v.days_from_epoch)
    if name == "time":
        return int(v.nanosecond_time)
    if name in ("uuid", "timeuuid", "inet", "decimal", "varint"):
        return str(v)
    if name == "duration":
        return f"{v.months}mo{v.days}d{v.nanoseconds}ns"
    if name in ("list", "set"):
        return [driver_value(t.params[0], e) for e in v]
    if name == "map":
        return {
            map_key(driver_value(t.params[0], k)): driver_value(t.params[1], e)
            for k, e in v.items()
        }
    if name == "tuple":
        return [driver_value(p, e) for p, e in zip(t.params, v, strict=False)]
    if name == "udt":  # the driver's named tuple, in field order (it renames odd names)
        return {
            f: driver_value(p, v[i] if i < len(v) else None)
            for i, (f, p) in enumerate(zip(t.fields, t.params, strict=True))
        }
    return v


class CassandraSnapshot(SnapshotSource):
    def __init__(
        self, state: TaskState, mode: str, resumable: bool = True, chunk_rows: int = 10240
    ) -> None:
        self.state = state
        self.mode = mode
        self.resumable = resumable
        self.chunk_rows = chunk_rows

    def execute(
        self, ctx: SourceContext, previous_offset: Mapping[str, Any] | None, include_data: bool
    ) -> dict[str, Any]:
        progress = self.state.snapshot
        ctx.metrics.extra.update(progress.gauges())
        ctx.metrics.extra_contexts.update({name: "snapshot" for name in progress.gauges()})
        progress.running, progress.aborted, progress.completed = True, False, False
        progress.started, progress.ended, progress.rows_scanned = time.monotonic(), 0.0, 0
        try:
            offset = run_snapshot(
                ctx,
                _Steps(self.state, ctx, self.mode, self.resumable),
                include_data=include_data,
                resume=ResumePoint.of(previous_offset) if self.resumable else None,
                chunk_rows=self.chunk_rows,
                batched=True,
            )
        except BaseException:
            progress.aborted = True
            raise
        finally:
            progress.running = False
            progress.ended = time.monotonic()
        progress.completed = True
        return offset
