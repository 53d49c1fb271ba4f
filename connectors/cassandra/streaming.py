"""Streaming: the node's ``cdc_raw`` directory, segment by segment, as a per-node agent.

Segments are read in id order, each only up to the durable offset of its ``_cdc.idx``; a
segment whose index says ``COMPLETED`` is finished once read to that offset. A segment without
an index holds no CDC data: Cassandra removes it itself, the connector passes over it once a
newer segment has an index. A finished segment is handed to the ``CommitLogTransfer`` (deleted
by default) only after Kafka acknowledged an offset at or past its end, so a crash re-reads
it (duplicates, never loss).

The offset ``{file, pos}`` is the position right after a mutation; a mutation that changes
several rows gives its earlier rows ``{file, pos: <mutation start>, row: n}`` so a restart
between them skips exactly the rows already delivered (AC-61).
"""

from __future__ import annotations

import logging
import mmap
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from cdc.errors import FatalError
from cdc.spi import Operation, PositionReached, SourceContext, StreamingSource, TableId
from connectors.cassandra.commitlog import (
    CommitLogError,
    Cursor,
    Damage,
    Decoded,
    iter_mutations,
    list_segments,
    read_cdc_index,
)
from connectors.cassandra.mutation import MutationError, RowChange, UnknownTable
from connectors.cassandra.offsets import CommitLogPosition
from connectors.cassandra.schema import SYSTEM_KEYSPACES, table_id
from connectors.cassandra.snapshot_record import PENDING, record_for
from connectors.cassandra.state import TaskState
from connectors.cassandra.tabledef import TableDef
from connectors.cassandra.transfer import CommitLogTransfer
from connectors.cassandra.types import RANGE_FIELDS

log = logging.getLogger("tidemark.cassandra.streaming")

_OPS = {
    "insert": Operation.CREATE,
    "update": Operation.UPDATE,
    "row_delete": Operation.DELETE,
    "partition_delete": Operation.DELETE,
    "range_delete": Operation.DELETE,
}
_START, _END = RANGE_FIELDS
_START_METHODS = {"range_start_incl": "INCL_START_BOUND", "range_start_excl": "EXCL_START_BOUND"}
_END_METHODS = {"range_end_incl": "INCL_END_BOUND", "range_end_excl": "EXCL_END_BOUND"}


def _range_delete(t: TableDef, first: RowChange | None, last: RowChange | None) -> RowChange:
    """One range delete from the markers that open and close it (None: unbounded on that
    side), as a row of kind ``range_delete`` whose cells are the two bounds ``(method,
    prefix)`` and whose timestamp is the deletion's."""
    some = first if first is not None else last
    assert some is not None
    start = (
        (_START_METHODS[first[1]], first[3] or [])
        if first is not None
        else ("INCL_START_BOUND", [])
    )
    end = (_END_METHODS[last[1]], last[3] or []) if last is not None else ("INCL_END_BOUND", [])
    bounds: dict[str, Any] = {_START: start, _END: end}  # not cells: the converter's input
    return (t, "range_delete", some[2], None, bounds, some[5], False)


class CommitLogFailed(FatalError):
    """A segment or mutation that cannot be read, under ``fail``: names file and position."""


class CassandraStreaming(StreamingSource):
    def __init__(
        self, state: TaskState, transfer: CommitLogTransfer, mode: str = "initial"
    ) -> None:
        self.state = state
        self.snapshot_mode = mode
        #: CDC tables known so far; a new one is snapshotted at once with snapshot.mode=always
        self.cdc_ids: set[uuid.UUID] = set()
        self.cfg = state.cfg
        self.transfer = transfer
        self.mode = str(self.cfg["event.processing.failure.handling.mode"])
        self.unknown_mode = str(self.cfg["inconsistent.schema.handling.mode"])
        self.range_mode = str(self.cfg["range.delete.handling.mode"])
        self.ranges = state.emits_ranges
        self.poll_s = self.cfg["cdc.dir.poll.interval.ms"] / 1000
        #: finished segments, by id: (path, end position) waiting for Kafka's acknowledgement
        self.finished: dict[int, tuple[Path, int]] = {}
        self._finished_lock = threading.Lock()
        #: segments read to their end (kept ones stay on disk and are not read again)
        self.done: set[int] = set()
        self.cursors: dict[int, Cursor] = {}
        self.registered: dict[uuid.UUID, TableDef] = {}
        #: captured tables whose uncaptured range delete was logged
        self._range_warned: set[uuid.UUID] = set()
        #: per table: its definition, id and fixed source fields (_emitting)
        self._emit_cache: dict[uuid.UUID, tuple[TableDef, TableId, dict[str, Any]]] = {}

    # -- the loop --------------------------------------------------------------------------
    def execute(self, ctx: SourceContext, offset: Mapping[str, Any] | None) -> None:
        self.ctx = ctx
        pos = CommitLogPosition.from_offset(offset)
        skip_rows = int(offset.get("row", 0)) if offset else 0
        schema = self.state.schema()
        self.cdc_ids = {t.id for t in schema.cdc_tables(ctx.is_included)}
        raw = self.state.cdc_raw
        if not raw.is_dir():
            raise FatalError(
                f"the cdc_raw directory {raw} does not exist: is cdc_enabled: true set on "
                f"this node (cassandra.config / cassandra.cdc.raw.dir)?"
            )
        self._metrics(ctx)
        # the core stores the snapshot-complete offset before streaming starts
        record_for(self.state).confirm()
        gauges = ctx.metrics.streaming
        gauges.connected = True
        # segments older than the stored offset were delivered before the last stop
        for seg, path in list_segments(raw):
            if seg < pos.segment:
                self.transfer.on_success(path)
        try:
            with ctx.batched(256) as flush:
                while not ctx.stop_event.is_set():
                    self._schema_changes(ctx, schema.maybe_refresh(), pos)
                    pos, skip_rows, moved = self._poll(ctx, raw, pos, skip_rows)
                    gauges.source_event_position = {"file": pos.file, "pos": str(pos.pos)}
                    if not moved:
                        flush()
                        ctx.stop_event.wait(self.poll_s)
        finally:
            gauges.connected = False

    def _metrics(self, ctx: SourceContext) -> None:
        m = self.state.metrics
        extra = ctx.metrics.extra
        extra["commitlog-position"] = lambda: float(m.position)
        extra["number-of-processed-mutations"] = lambda: float(m.processed_mutations)
        extra["number-of-unrecoverable-errors"] = lambda: float(m.unrecoverable_errors)
        # tidemark: range deletes and static column writes read but not emitted
        extra["number-of-unsupported-changes"] = lambda: float(m.unsupported)
        extra["cdc-raw-free-bytes"] = self.state.cdc_raw_free_bytes
        ctx.metrics.extra_text["commitlog-filename"] = lambda: m.filename

    def _schema_changes(
        self, ctx: SourceContext, changed: list[TableDef], pos: CommitLogPosition
    ) -> None:
        for t in changed:
            if t.id in self.registered:
                log.info("schema of %s changed; its events use the new columns", t.qualified)
                self.registered[t.id] = t
                ctx.register_table(self.state.core_table(t))
        for t in self.state.schema().cdc_tables(ctx.is_included):
            if t.id in self.cdc_ids:
                continue
            self.cdc_ids.add(t.id)
            log.info("%s is enabled for CDC", t.qualified)
            if self.snapshot_mode == "always":
                self._snapshot_table(ctx, t, pos)

    def _snapshot_table(self, ctx: SourceContext, t: TableDef, pos: CommitLogPosition) -> None:
        """snapshot.mode=always: a table enabled for CDC while streaming is read at once;
        its rows carry the stream's current offset (a crash before they are in Kafka
        re-snapshots every table on the next start, as always does)."""
        from connectors.cassandra.snapshot import table_rows

        self.registered[t.id] = t
        ctx.register_table(self.state.core_table(t))
        record = record_for(self.state)
        record.mark(t.qualified, PENDING)
        source = {
            "ts_ms": int(time.time() * 1000),
            "snapshot": True,
            "cluster": self.state.schema().cluster_name,
            "keyspace": t.keyspace,
            "db": t.keyspace,
            "table": t.name,
            "file": pos.file,
            "pos": pos.pos,
            "ts_micro": int(time.time() * 1_000_000),
        }
        offset = pos.to_offset()
        rows = 0
        for batch in table_rows(self.state, t):
            for row in batch:
                ctx.emit_row(Operation.READ, table_id(t), None, row, source, offset)
            rows += len(batch)
        log.info("snapshot of %s (enabled for CDC while streaming): %d rows", t.qualified, rows)

    def _poll(
        self, ctx: SourceContext, raw: Path, pos: CommitLogPosition, skip_rows: int
    ) -> tuple[CommitLogPosition, int, bool]:
        """Read what became durable since the last poll; (position, rows to skip, whether
        anything was read)."""
        segments = [(s, p) for s, p in list_segments(raw) if s >= pos.segment]
        indexes = {s: read_cdc_index(p) for s, p in segments}
        moved = False
        for n, (seg, path) in enumerate(segments):
            if seg in self.done:
                continue
            idx = indexes[seg]
            if idx is None:
                if not any(indexes[s] is not None for s, _ in segments[n + 1 :]):
                    break
                # A later segment has an index: this one was closed without CDC data (and
                # Cassandra deletes it), unless its first sync wrote its index between our
                # reading it and reading the later one's (a sync writes them in order). Read
                # it again, after the later one, to tell.
                idx = indexes[seg] = read_cdc_index(path)
                if idx is None:
                    continue
            after = pos.pos if seg == pos.segment else 0
            cursor = self.cursors.setdefault(seg, Cursor())
            # the row to skip to is in the stored offset's mutation (at ``after``) only
            resume = after if seg == pos.segment and skip_rows else -1
            end = -1  # the position past the last mutation read (built into pos once)
            for entry in self._mutations(path, idx.offset, after, cursor):
                if ctx.stop_event.is_set():
                    # a graceful stop in a backlog: what was emitted is flushed by the core,
                    # the rest is read again from the stored offset on the next start
                    self.cursors.pop(seg, None)
                    if end >= 0:
                        pos, skip_rows = CommitLogPosition(seg, end, path.name), 0
                    return pos, skip_rows, True
                self._mutation(ctx, path.name, entry, skip_rows if entry[0] == resume else 0)
                end = entry[1]
            if end >= 0:
                pos, skip_rows, moved = CommitLogPosition(seg, end, path.name), 0, True
            if not idx.completed:
                break
            # finished: everything up to the index's offset is read
            pos = CommitLogPosition(seg, idx.offset, path.name)
            self.done.add(seg)
            with self._finished_lock:
                self.finished[seg] = (path, idx.offset)
            self.cursors.pop(seg, None)
            ctx.emit(PositionReached(pos.to_offset()))
            moved = True
        return pos, skip_rows, moved

    def _mutations(self, path: Path, limit: int, after: int, cursor: Cursor) -> Iterator[Decoded]:
        """The segment's mutations from ``after`` up to ``limit``, each decoded as it is
        reached (those of keyspaces without a captured table are not decoded)."""
        schema = self.state.schema()
        try:
            with open(path, "rb") as fh:
                size = path.stat().st_size
                if size == 0:
                    return
                damaged: list[Damage] | None = [] if self.mode in ("warn", "skip") else None
                with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    yield from iter_mutations(
                        data,  # type: ignore[arg-type]
                        path.name,
                        schema.lookup,
                        schema.by_raw_id,
                        limit=limit,
                        after=after,
                        cursor=cursor,
                        damaged=damaged,
                        decode_table=self._decoded_table,
                    )
                for d in damaged or ():
                    self.state.metrics.unrecoverable_errors += 1
                    if self.mode == "warn":
                        log.warning(
                            "skipping the rest of a damaged commit log section, up to position "
                            "%d: %s (event.processing.failure.handling.mode=warn)",
                            d.skipped_to,
                            d.error,
                        )
        except FileNotFoundError:
            return
        except CommitLogError as exc:
            self.state.metrics.unrecoverable_errors += 1
            raise CommitLogFailed(
                f"{exc}. The offset stays before it; restore the segment or move the stored "
                f"offset past it (PATCH /connectors/<name>/offsets) to go on"
            ) from exc

    # -- one mutation ----------------------------------------------------------------------
    def _mutation(self, ctx: SourceContext, file: str, entry: Decoded, skip_rows: int) -> None:
        start, end, _, updates, error = entry
        m = self.state.metrics
        m.filename, m.position = file, end
        m.processed_mutations += 1
        if error is not None:
            self._bad(file, start, error)
            return
        # a row is (table, kind, key, clustering, cells, timestamp, static): static rows are
        # not captured (the seed lists them as unsupported), range deletes per the mode
        rows: list[RowChange] = []
        for t, t_rows, markers in updates:
            if not self._captured(t):
                continue
            if markers:
                t_rows = self._range_deletes(t, t_rows, file, start)
            for r in t_rows:
                if r[6]:
                    m.unsupported += 1
                else:
                    rows.append(r)
        last = len(rows) - 1
        while not self.ranges and last >= 0 and rows[last][1] == "range_delete":
            last -= 1  # the last row sent carries the offset past the mutation
        for i, row in enumerate(rows):
            if i < skip_rows or (row[1] == "range_delete" and not self.ranges):
                continue
            offset: dict[str, Any] = {"file": file, "pos": end}
            if i < last:
                offset = {"file": file, "pos": start, "row": i + 1}
            self._emit(ctx, row, file, end, offset)
        if rows:
            gauges = ctx.metrics.streaming
            now_ms = int(time.time() * 1000)
            gauges.last_event_ms = now_ms
            # the newest write timestamp is the client's clock: never report a negative lag
            gauges.ms_behind_source = max(0, now_ms - max(r[5] for r in rows) // 1000)

    def _range_deletes(
        self, t: TableDef, rows: list[RowChange], file: str, start: int
    ) -> list[RowChange]:
        """``rows`` with the range tombstone markers paired into range deletes, each where
        its range opens (before the rows inside it), per ``range.delete.handling.mode``:
        emitted, or counted (and the table's first logged) and not sent, or the task fails
        before any row of the mutation is sent."""
        out: list[RowChange] = []
        opened: tuple[int, RowChange] | None = None
        for r in rows:
            kind = r[1]
            if not kind.startswith("range_"):
                out.append(r)
            elif kind.startswith("range_start"):
                opened = (len(out), r)
                out.append(r)  # replaced when the range closes
            else:
                at, first = opened if opened is not None else (len(out), None)
                if first is None:
                    out.append(r)
                out[at] = _range_delete(t, first, r)
                opened = None
        if opened is not None:  # not closed in this mutation: up to the partition's end
            at, first = opened
            out[at] = _range_delete(t, first, None)
        deletes = sum(1 for r in out if r[1] == "range_delete")
        mode = self.range_mode
        if mode == "emit":
            return out
        if mode == "fail":
            raise CommitLogFailed(
                f"{t.qualified}: a range delete (DELETE ... WHERE <clustering column> > ...) "
                f"at {file}:{start}, and range.delete.handling.mode=fail. The offset stays "
                f"before it; emit sends range deletes as events, warn or skip passes over them"
            )
        self.state.metrics.unsupported += deletes
        if mode == "warn" and t.id not in self._range_warned:
            self._range_warned.add(t.id)
            log.warning(
                "%s: a range delete (DELETE ... WHERE <clustering column> > ...) at %s:%d is "
                "not captured (range.delete.handling.mode=warn; emit sends it as an event): "
                "the rows it deleted stay in downstream copies until written or deleted again "
                "(counted in number-of-unsupported-changes; logged once per table)",
                t.qualified,
                file,
                start,
            )
        return out  # kept in the list unsent, so a row's index within the mutation (the
        # offset's "row") does not depend on the mode a restart runs with

    def _decoded_table(self, first: TableDef) -> bool:
        """Whether to decode a mutation whose first table is ``first``: only those of
        keyspaces with a captured table (a mutation holds one keyspace's tables)."""
        ks = first.keyspace
        return ks not in SYSTEM_KEYSPACES and ks in self.state.schema().cdc_keyspaces

    def _captured(self, t: TableDef) -> bool:
        if not t.cdc or t.keyspace in SYSTEM_KEYSPACES:
            return False
        if not self.ctx.is_included(table_id(t)):
            return False
        if self.registered.get(t.id) != t:
            self.registered[t.id] = t
            self.ctx.register_table(self.state.core_table(t))
        return True

    def _emit(
        self,
        ctx: SourceContext,
        row: RowChange,
        file: str,
        pos: int,
        offset: dict[str, Any],
    ) -> None:
        t, kind, partition_key, clustering, cells, timestamp, _ = row
        key = list(partition_key)
        key += clustering if clustering is not None else [None] * len(t.clustering)
        op = _OPS[kind]
        if op is Operation.DELETE:
            values = key + [None] * len(t.regular)
        else:
            values = key + [cells.get(c.name) for c in t.regular]
        if self.ranges:  # every after has the range bound fields, null but for a range delete
            values += (cells[_START], cells[_END]) if kind == "range_delete" else (None, None)
        tid, base = self._emitting(t)
        source = {
            "ts_ms": timestamp // 1000,
            **base,
            "file": file,
            "pos": pos,
            "ts_micro": timestamp,
            "ts_us": timestamp,  # envelope.version=3: the write time in µs
        }
        ctx.emit_row(op, tid, None, values, source, offset)

    def _emitting(self, t: TableDef) -> tuple[TableId, dict[str, Any]]:
        """The table's id and the fixed part of its events' ``source`` (per definition:
        a schema change brings a new one)."""
        got = self._emit_cache.get(t.id)
        if got is None or got[0] is not t:
            base = {
                "snapshot": False,
                "cluster": self.state.schema().cluster_name,
                "keyspace": t.keyspace,
                "db": t.keyspace,
                "table": t.name,
            }
            got = self._emit_cache[t.id] = (t, table_id(t), base)
        return got[1], got[2]

    def _bad(self, file: str, start: int, exc: MutationError) -> None:
        message = f"commit log {file} at position {start}: {exc}"
        if isinstance(exc, UnknownTable):
            mode, key = self.unknown_mode, "inconsistent.schema.handling.mode"
        else:
            mode, key = self.mode, "event.processing.failure.handling.mode"
            self.state.metrics.unrecoverable_errors += 1
        if mode in ("warn", "skip"):
            if mode == "warn":
                log.warning("skipping a mutation that cannot be decoded: %s", message)
            return
        raise CommitLogFailed(f"{message}. {key}=warn or skip passes over it") from exc

    # -- releasing the log -----------------------------------------------------------------
    def commit_offset(self, offset: Mapping[str, Any]) -> None:
        """Hand every finished segment Kafka has acknowledged to the transfer hook."""
        try:
            acked = CommitLogPosition.from_offset(offset)
        except ValueError:
            return
        with self._finished_lock:
            done = [
                (seg, path)
                for seg, (path, end) in sorted(self.finished.items())
                if seg < acked.segment or (seg == acked.segment and acked.pos >= end)
            ]
            for seg, _ in done:
                del self.finished[seg]
        for _, path in done:
            try:
                self.transfer.on_success(path)
            except OSError as exc:
                log.warning("commit log transfer of %s failed: %s", path.name, exc)
