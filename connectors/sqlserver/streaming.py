"""Streaming: polling the change tables by LSN windows.

Each poll reads ``sys.fn_cdc_get_max_lsn()`` and, for every included table's capture
instance, ``cdc.fn_cdc_get_all_changes_<instance>(from, to, N'all update old')``; the rows of
all instances are merged in (commit LSN, change LSN, operation) order, which is the order
the transactions committed and the changes were made (seed §5.3.2). Operation 3 (the row
before an update) and 4 (after) become one ``u`` event with ``event_serial_no`` 2; inserts
and deletes have 1. Every change of a commit LSN lies in one window (windows end at a
commit LSN), so a window's transactions are complete and their END is reported at once.

Resuming: the offset names the last event (commit, change LSN, serial); the next window
starts at that commit LSN and skips what was emitted, so a graceful stop and restart repeats
and loses nothing. After a kill the events since the last stored offset come again.

Two capture instances of one table (the online schema-evolution procedure): the older one is
read up to the newer one's start LSN, the newer one from there; the switch re-registers the
table (new columns) and reports it on the schema change topic.

Several databases (``database.names``): one connection each, polled in turn on this one
thread, each from its own position; every record's offset carries all the databases'
positions (:mod:`connectors.sqlserver.databases`). A listed database without a stored
position (added to the list since) is snapshotted first as ``snapshot.mode`` allows, the
others being polled between its batches of rows; meanwhile every offset (the others' too,
built by ``DatabasePositions.advance``) carries its snapshot origin, so an interrupted
snapshot's redo streams from where the first attempt started.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import heapq
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cdc.config import Config
from cdc.errors import ErrorKind, RetriableError
from cdc.history.store import TableChange, TableChangeType
from cdc.spi import (
    Operation,
    PositionReached,
    SchemaChange,
    SourceContext,
    StreamingSource,
    Table,
    TableId,
    TransactionBegin,
    TransactionEnd,
)
from connectors.sqlserver.connection import connect, dialect_of
from connectors.sqlserver.databases import DatabasePositions
from connectors.sqlserver.errors import ERRORS, LsnNoLongerAvailable
from connectors.sqlserver.offsets import Lsn, SqlServerPosition
from connectors.sqlserver.positions import position_lost
from connectors.sqlserver.schema import (
    CaptureInstance,
    Catalog,
    check_captured,
    current_instances,
    explicit_tables,
    instance_of,
)
from connectors.sqlserver.snapshot import Hold, snapshot_added

log = logging.getLogger("tidemark.sqlserver.streaming")

#: __$operation values
DELETE, INSERT, UPDATE_BEFORE, UPDATE_AFTER = 1, 2, 3, 4
#: the change rows' leading columns: __$start_lsn, __$seqval, __$operation, __$update_mask
META = 4

ChangeRow = tuple[bytes, bytes, int, int, Any]
"""(commit LSN, change LSN, operation, instance index, row): what the merge orders."""


def _millis(value: Any) -> int:
    """A commit time (``tran_end_time``, read as UTC) in epoch milliseconds; now if unknown."""
    if value is None:
        return int(time.time() * 1000)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return int(value.timestamp() * 1000)


def _tagged(rows: list[Any], index: int) -> Iterator[ChangeRow]:
    for r in rows:
        yield bytes(r[0]), bytes(r[1]), int(r[2]), index, r


def merge_changes(per_instance: list[list[Any]]) -> Iterator[ChangeRow]:
    """The change rows of several capture instances in (commit LSN, change LSN, operation)
    order; each list is already in that order (the query's ORDER BY)."""
    streams = [_tagged(rows, i) for i, rows in enumerate(per_instance)]
    return heapq.merge(*streams, key=lambda c: (c[0], c[1], c[2]))


@dataclass
class _Database:
    """One captured database while streaming: its connection, catalog and position."""

    name: str
    conn: Any
    catalog: Catalog
    pos: SqlServerPosition | None
    #: when it was last polled (time.monotonic)
    polled: float = 0.0


class SqlServerStreaming(StreamingSource):
    def __init__(
        self,
        cfg: Config,
        registered: dict[TableId, Table] | None = None,
        hold: Hold = contextlib.nullcontext,
    ) -> None:
        self.cfg = cfg
        #: holds back the heartbeat action while an added database is snapshotted
        self.hold = hold
        self.dialect = dialect_of(cfg)
        self.poll_s = int(cfg["streaming.poll.interval.ms"]) / 1000
        self.max_tx = int(cfg["max.iteration.transactions"])
        #: table → its structure the core has registered (``instance_of``: from which capture
        #: instance)
        self.registered: dict[TableId, Table] = dict(registered or {})
        self.dbs: list[_Database] = []
        #: databases whose tables were declared (by the snapshot or a first poll)
        self.declared: set[str] = set()
        self.positions: DatabasePositions | None = None

    # -- the loop ---------------------------------------------------------------------------
    def execute(self, ctx: SourceContext, offset: Mapping[str, Any] | None) -> None:
        gauges = ctx.metrics.streaming
        try:
            positions = self.positions = DatabasePositions(self.cfg, offset)
            for name in positions.names:
                conn = connect(self.cfg, database=name)
                catalog = Catalog(conn, self.dialect, name)
                self.dbs.append(_Database(name, conn, catalog, positions.get(name)))
                catalog.check_cdc_enabled()
                captured = current_instances(catalog.instances(), ctx.is_included, name)
                check_captured(catalog, ctx.is_included, explicit_tables(self.cfg), captured)
            for db in self.dbs:
                if db.pos is None and not offset:
                    # no snapshot was taken (snapshot.mode=never): from the current maximum LSN
                    db.pos = SqlServerPosition(db.catalog.max_lsn())
                if db.pos is not None:
                    self._check_available(db.catalog, db.pos, ctx.is_included)
            # Debezium's CapturedTables streaming attribute: db.schema.table, comma-separated
            ctx.metrics.extra_text["CapturedTables"] = lambda: ",".join(
                sorted(str(t) for t in self.registered)
            )
            gauges.connected = True
            with ctx.batched(256) as flush:
                for db in self.dbs:
                    if db.pos is None:
                        self._added(ctx, db)
                while not ctx.stop_event.is_set():
                    read = False
                    for db in self.dbs:
                        read = self._poll(ctx, db) or read
                    if not read:
                        flush()
                        ctx.stop_event.wait(self.poll_s)
        except Exception as exc:
            translated = self._translate(exc)
            if translated is exc:
                raise
            raise translated from exc
        finally:
            gauges.connected = False
            self.close()

    def _translate(self, exc: Exception) -> BaseException:
        try:
            import pyodbc  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            return exc
        if isinstance(exc, pyodbc.Error):
            if ERRORS.classify(exc) is ErrorKind.RETRIABLE:
                return RetriableError(f"SQL Server connection failed: {exc}")
            return ERRORS.translate(exc)
        return exc

    def close(self) -> None:
        for db in self.dbs:
            with contextlib.suppress(Exception):
                db.conn.close()
        self.dbs = []

    def _added(self, ctx: SourceContext, db: _Database) -> None:
        """A database added to ``database.names``: snapshot it as ``snapshot.mode`` says (the
        others are polled between its batches), then stream it from its snapshot's LSN."""
        assert self.positions is not None
        mode = self.cfg["snapshot.mode"]
        if mode == "never":
            origin = self.positions.origin(db.name)
            if origin is not None and position_lost(db.catalog, origin, ctx.is_included) is None:
                # an earlier attempt's rows are downstream: replay the changes since it began
                log.info(
                    "database %s added: streaming it from its interrupted snapshot's start %s",
                    db.name,
                    origin.commit_lsn,
                )
                db.pos = origin
            else:
                log.info("database %s added: streaming it from its current maximum LSN", db.name)
                db.pos = SqlServerPosition(db.catalog.max_lsn())
        else:
            others = [d for d in self.dbs if d.pos is not None]

            def poll_others() -> None:
                for other in others:
                    if time.monotonic() - other.polled >= self.poll_s:
                        self._poll(ctx, other)

            db.pos = snapshot_added(
                self.cfg,
                ctx,
                db.name,
                mode not in ("schema_only", "no_data"),
                self.positions,
                self.registered,
                poll_others,
                self.hold,
            )
        ctx.emit(PositionReached(self.positions.set(db.name, db.pos)))

    def _check_available(
        self, catalog: Catalog, pos: SqlServerPosition, included: Callable[[TableId], bool]
    ) -> None:
        lost = position_lost(catalog, pos, included)
        if lost:
            raise LsnNoLongerAvailable(lost)

    # -- one poll ---------------------------------------------------------------------------
    def _poll(self, ctx: SourceContext, db: _Database) -> bool:
        """Read ``db``'s next window; False when it had nothing new."""
        assert db.pos is not None and self.positions is not None
        db.polled = time.monotonic()
        catalog, pos = db.catalog, db.pos
        max_lsn = catalog.max_lsn()
        from_lsn = pos.from_lsn()
        if max_lsn is None or (from_lsn is not None and from_lsn > max_lsn):
            ctx.emit(PositionReached(self.positions.advance(db.name, pos.to_offset())))
            return False
        tables = current_instances(catalog.instances(), ctx.is_included, db.name)
        self._register(ctx, catalog, tables, pos)
        to_lsn, times = self._window(db.conn, from_lsn, max_lsn)
        plan: list[tuple[CaptureInstance, Lsn, Lsn, Lsn | None]] = []
        for instances in tables.values():
            for i, inst in enumerate(instances):
                start = inst.start_lsn or Lsn(b"\0" * 10)
                lo = max(from_lsn, start) if from_lsn is not None else start
                # the newer instance has the changes from its start LSN on
                nxt = instances[i + 1].start_lsn if i + 1 < len(instances) else None
                hi = to_lsn if nxt is None else min(to_lsn, nxt)
                if lo <= hi:
                    plan.append((inst, lo, hi, nxt))
        per_instance = [self._changes(catalog, inst, lo, hi, nxt) for inst, lo, hi, nxt in plan]
        self._emit(ctx, catalog, plan, per_instance, times, pos)
        done = db.pos = SqlServerPosition(to_lsn)
        ctx.emit(PositionReached(self.positions.advance(db.name, done.to_offset())))
        gauges = ctx.metrics.streaming
        gauges.source_event_position = {"commit_lsn": str(to_lsn)}
        if self.positions.multi:
            gauges.source_event_position["db"] = db.name
        return True

    def _window(
        self, conn: Any, from_lsn: Lsn | None, max_lsn: Lsn
    ) -> tuple[Lsn, dict[bytes, Any]]:
        """The window's end (at most max.iteration.transactions commits) and commit times."""
        lo = from_lsn or Lsn(b"\0" * 10)
        cur = conn.cursor()
        try:
            cur.execute(self.dialect.transactions(), lo.raw, max_lsn.raw)
            rows = cur.fetchmany(self.max_tx) if self.max_tx else cur.fetchall()
        finally:
            cur.close()
        times = {bytes(r[0]): r[1] for r in rows}
        if self.max_tx and len(rows) == self.max_tx:
            return Lsn(bytes(rows[-1][0])), times
        return max_lsn, times

    def _changes(
        self, catalog: Catalog, inst: CaptureInstance, lo: Lsn, hi: Lsn, until: Lsn | None
    ) -> list[Any]:
        """The instance's change rows with commit LSN in [lo, hi], and below ``until``. An
        instance disabled since the catalog was read (its function is gone) has none: the
        next poll reports its table dropped."""
        cur = catalog.conn.cursor()
        try:
            cur.execute(self.dialect.changes(inst.name), lo.raw, hi.raw)
            rows: list[Any] = cur.fetchall()
        except Exception:
            if any(i.name == inst.name for i in catalog.instances()):
                raise
            log.info("capture instance %s was disabled while being read", inst.name)
            return []
        finally:
            cur.close()
        if until is not None:
            rows = [r for r in rows if bytes(r[0]) < until.raw]
        return rows

    def _register(
        self,
        ctx: SourceContext,
        catalog: Catalog,
        tables: dict[TableId, list[CaptureInstance]],
        pos: SqlServerPosition,
    ) -> None:
        """Declare tables seen for the first time (and report CREATE on the schema change
        topic when a table was enabled for CDC while running); report DROP for a table whose
        capture instances are all gone (CDC disabled on it)."""
        # on the first poll of a run (or of an added database) every table is new, unless
        # the snapshot declared them; later, a new one was enabled
        db = catalog.database
        running = db in self.declared or any(t.catalog == db for t in self.registered)
        self.declared.add(db)
        changes: list[TableChange] = []
        for tid in [t for t in self.registered if t.catalog == db and t not in tables]:
            # CDC was disabled on it (sys.sp_cdc_disable_table): its change table is gone,
            # nothing more to read; if it is enabled again, it is captured from its new
            # instance's start (with a CREATE record)
            log.warning(
                "%s has no capture instance any more (CDC disabled on it): its changes are no "
                "longer captured",
                tid,
            )
            dropped = self.registered.pop(tid)
            changes.append(TableChange(TableChangeType.DROP, dropped))
        for tid, instances in tables.items():
            if tid in self.registered:
                continue
            inst = instances[0]
            table = catalog.table(inst)
            ctx.register_table(table)
            self.registered[tid] = table
            if running:
                log.info("capture instance %s of %s found: capturing it", inst.name, tid)
                changes.append(TableChange(TableChangeType.CREATE, table))
        # one poll's findings share its position: all but the last are ``continued``, so a
        # crash between them does not store the position with some never reported (a restart
        # declares the tables silently)
        for i, change in enumerate(changes):
            self._schema_change(ctx, change, pos, continued=i < len(changes) - 1)

    def _schema_change(
        self,
        ctx: SourceContext,
        change: TableChange,
        pos: SqlServerPosition,
        at: Lsn | None = None,
        continued: bool = False,
    ) -> None:
        """SQL Server has no DDL text for it: Debezium writes ``ddl: null`` and the table's
        structure in ``tableChanges``."""
        assert self.positions is not None
        tid = change.table.id
        db = str(tid.catalog)
        src = self._source(tid, at or pos.commit_lsn, None, None, int(time.time() * 1000))
        offset = self.positions.advance(db, pos.to_offset())
        ctx.emit(
            SchemaChange(
                db, tid.schema, None, [tid], src, offset, changes=[change], continued=continued
            )
        )

    def _switch(
        self,
        ctx: SourceContext,
        catalog: Catalog,
        inst: CaptureInstance,
        commit: Lsn,
        last: SqlServerPosition,
    ) -> None:
        """The online schema-evolution procedure: from ``commit`` on, ``inst`` is read. The
        schema change record carries ``last`` (the last event's position): storing it must
        not mark any change of ``commit`` as done."""
        table = catalog.table(inst)
        ctx.register_table(table)
        self.registered[table.id] = table
        log.info("%s: capture instance %s from %s on", table.id, inst.name, commit)
        self._schema_change(ctx, TableChange(TableChangeType.ALTER, table), last, commit)

    def _source(
        self, tid: TableId, commit: Lsn | None, change: Lsn | None, serial: int | None, ts: int
    ) -> dict[str, Any]:
        return {
            "ts_ms": ts,
            "snapshot": False,
            "db": tid.catalog,
            "schema": tid.schema,
            "table": tid.table,
            "change_lsn": str(change) if change else None,
            "commit_lsn": str(commit) if commit else None,
            "event_serial_no": serial,
        }

    def _emit(
        self,
        ctx: SourceContext,
        catalog: Catalog,
        plan: list[tuple[CaptureInstance, Lsn, Lsn, Lsn | None]],
        per_instance: list[list[Any]],
        times: dict[bytes, Any],
        resume: SqlServerPosition,
    ) -> None:
        """The merged change rows as events. Per transaction (commit LSN) once: its text,
        time, BEGIN and the resume check (only the stored commit can hold emitted rows); per
        row only what differs: the change LSN, serial number and values."""
        assert self.positions is not None
        gauges = ctx.metrics.streaming
        tx_meta = ctx.tx_metadata
        resume_raw = resume.commit_lsn.raw if resume.commit_lsn is not None else None
        db = catalog.database
        advance = self.positions.advance
        table_ids = [inst.table_id(db) for inst, *_ in plan]
        open_tx: bytes | None = None
        open_src: dict[str, Any] = {}
        last = resume  # the position of the last event emitted
        txid, ts = "", 0
        before: Any = None
        emit_row = ctx.emit_row
        create, delete, update = Operation.CREATE, Operation.DELETE, Operation.UPDATE
        for commit_raw, change_raw, op, idx, row in merge_changes(per_instance):
            tid = table_ids[idx]
            known = self.registered.get(tid)
            if known is None or instance_of(known) != plan[idx][0].name:
                self._switch(ctx, catalog, plan[idx][0], Lsn(commit_raw), last)
            if op == UPDATE_BEFORE:
                before = row[META:]
                continue
            serial = 2 if op == UPDATE_AFTER else 1
            if (
                commit_raw == resume_raw
                and resume.commit_lsn is not None
                and resume.already_emitted(resume.commit_lsn, Lsn(change_raw), serial)
            ):
                before = None
                continue
            if commit_raw != open_tx:
                if open_tx is not None:
                    self._end(ctx, db, open_tx, open_src)
                open_tx = commit_raw
                commit = Lsn(commit_raw)
                txid = str(commit)
                ts = _millis(times.get(commit_raw))
                if tx_meta:
                    begin = advance(db, SqlServerPosition(commit, Lsn(change_raw), 0).to_offset())
                    ctx.emit(
                        TransactionBegin(txid, self._source(tid, commit, None, None, ts), begin)
                    )
                gauges.last_event_ms = int(time.time() * 1000)
                gauges.ms_behind_source = max(0, gauges.last_event_ms - ts)
            h = change_raw.hex()
            change = f"{h[:8]}:{h[8:16]}:{h[16:]}"
            source = {
                "ts_ms": ts,
                "snapshot": False,
                "db": db,
                "schema": tid.schema,
                "table": tid.table,
                "change_lsn": change,
                "commit_lsn": txid,
                "event_serial_no": serial,
            }
            open_src = source
            offset = advance(
                db, {"commit_lsn": txid, "change_lsn": change, "event_serial_no": serial}
            )
            values = row[META:]
            if op == INSERT:
                emit_row(create, tid, None, values, source, offset, txid)
            elif op == DELETE:
                emit_row(delete, tid, values, None, source, offset, txid)
            else:
                emit_row(update, tid, before, values, source, offset, txid)
            before = None
            last = SqlServerPosition(commit, Lsn(change_raw), serial)
        if open_tx is not None:
            self._end(ctx, db, open_tx, open_src)

    def _end(self, ctx: SourceContext, db: str, commit_raw: bytes, src: dict[str, Any]) -> None:
        assert self.positions is not None
        commit = Lsn(commit_raw)
        offset = self.positions.advance(db, SqlServerPosition(commit).to_offset())
        ctx.emit(TransactionEnd(str(commit), src, offset))
