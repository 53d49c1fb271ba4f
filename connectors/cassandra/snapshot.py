"""The snapshot: each CDC table read with ``SELECT *`` at ``snapshot.consistency``, no lock
(Cassandra has none: writes during the snapshot may appear in it and in the stream).

Which tables: every captured CDC table with ``snapshot.mode=always``; with ``initial`` those
not yet recorded in ``snapshot_offset.properties`` (the seed's per-table snapshot record:
remove a table's line and it is snapshotted again on the next start, AC-62; a table enabled
for CDC while the connector was stopped is snapshotted on the next start). A table is
recorded as ``pending`` when its rows are emitted and becomes ``done`` only once the core
stored the snapshot-complete offset (all its rows in Kafka): an interrupted snapshot
re-bootstraps the interrupted table in full (AC-28).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cdc.snapshot.driver import TableScan, one_by_one, run_snapshot
from cdc.snapshot_modes import snapshot_incomplete
from cdc.spi import SnapshotSource, Snapshotter, SourceContext, TableId
from connectors.cassandra.commitlog import list_segments, read_cdc_index
from connectors.cassandra.cqltypes import CqlType
from connectors.cassandra.offsets import START, CommitLogPosition
from connectors.cassandra.schema import core_table, table_id
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


class _Steps:
    def __init__(self, state: TaskState, ctx: SourceContext, mode: str) -> None:
        self.state = state
        self.ctx = ctx
        self.mode = mode
        self.record = record_for(state)
        self.defs: list[TableDef] = []
        self.pos = START

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
            self.ctx.register_table(core_table(t))

    def handover(self, resume: dict[str, Any]) -> dict[str, Any]:
        return resume

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
            out.append(TableScan(core_table(t), source, offset, None, plan=t))
        return out

    def read(self, scans: list[TableScan]) -> Iterator[tuple[TableScan, Sequence[Any] | None]]:
        progress = self.state.snapshot
        for scan, batch in one_by_one(scans, self.ctx.stop_event.is_set, self._rows):
            if batch is None:
                self.record.mark(scan.plan.qualified, PENDING)
                progress.remaining_tables -= 1
            else:
                progress.rows_scanned += len(batch)
            yield scan, batch

    def _rows(self, scan: TableScan) -> Iterator[list[list[Any]]]:
        return table_rows(self.state, scan.plan)

    def release(self, completed: bool) -> None:
        return None


def table_rows(state: TaskState, t: TableDef) -> Iterator[list[list[Any]]]:
    """A table's rows in batches, in the core table's column order: key values, then a
    ``CellValue`` (``(value, None, True)``) per regular column."""
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement

    cols = t.primary_key + t.regular
    names = ", ".join(f'"{c.name}"' for c in cols)
    stmt = SimpleStatement(
        f'SELECT {names} FROM "{t.keyspace}"."{t.name}"',
        consistency_level=getattr(ConsistencyLevel, state.cfg["snapshot.consistency"]),
        fetch_size=state.cfg["snapshot.fetch.size"],
    )
    nkey = len(t.primary_key)
    batch: list[list[Any]] = []
    for r in state.session().execute(stmt):
        row = [driver_value(c.type, v) for c, v in zip(cols, r, strict=True)]
        row[nkey:] = [(v, None, True) for v in row[nkey:]]
        batch.append(row)
        if len(batch) >= 1024:
            yield batch
            batch = []
    if batch:
        yield batch


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
        return {driver_value(t.params[0], k): driver_value(t.params[1], e) for k, e in v.items()}
    if name == "tuple":
        return [driver_value(p, e) for p, e in zip(t.params, v, strict=False)]
    return v


class CassandraSnapshot(SnapshotSource):
    def __init__(self, state: TaskState, mode: str) -> None:
        self.state = state
        self.mode = mode

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
                ctx, _Steps(self.state, ctx, self.mode), include_data=include_data, batched=True
            )
        except BaseException:
            progress.aborted = True
            raise
        finally:
            progress.running = False
            progress.ended = time.monotonic()
        progress.completed = True
        return offset
