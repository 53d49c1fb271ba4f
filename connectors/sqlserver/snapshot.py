"""The snapshot (seed §5.3.1): one transaction at ``snapshot.isolation.mode``, the maximum
LSN read inside it, then every captured table's rows as ``op=r`` events.

The maximum LSN is read as the transaction's first statement after the isolation level (and
the exclusive locks) are set: under ``snapshot`` (and ``repeatable_read`` on the stand-in,
whose REPEATABLE READ is a snapshot of the whole database) the rows read are exactly the
state at that LSN, so streaming from it loses and repeats nothing. ``exclusive`` holds
exclusive table locks until the rows are read (no writes meanwhile). ``read_committed`` and
``read_uncommitted`` hold nothing: rows may include later changes, which streaming replays
on top (the topic converges; nothing is missed).

Captured tables are those with a capture instance that the include/exclude lists select; an
explicitly included table without one fails, naming the ``sys.sp_cdc_enable_table`` call.

Several databases (``database.names``): one transaction per database, all opened before the
first row is read, each with its own maximum LSN read first; every row carries the offset
holding all of them (:mod:`connectors.sqlserver.databases`). A database added to the list
later is snapshotted on its own by :func:`snapshot_added` while streaming starts; before its
first row it stores its snapshot origin (the core's rule for restarted snapshots, applied
per database), so a redone snapshot hands over from where the first attempt started.

An interrupted snapshot resumes (``snapshot.resumable``, :mod:`cdc.snapshot.driver`): each
table with a primary key is read in key order, the restart skips the tables read whole and
reads the current one after the stored key. Table names in the offset include the database,
so the point is per database; it is used only when every database streams from the
interrupted attempt's position (its change tables still hold it), else every table is read
again.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from cdc.config import Config
from cdc.history.store import TableChange, TableChangeType
from cdc.snapshot.driver import (
    ResumePoint,
    Row,
    TableScan,
    one_by_one,
    plain_key_reader,
    run_snapshot,
    select_override,
)
from cdc.spi import (
    PositionReached,
    SchemaChange,
    SnapshotSource,
    SourceContext,
    Table,
    TableId,
)
from connectors.sqlserver.config import database_names
from connectors.sqlserver.connection import connect, dialect_of
from connectors.sqlserver.databases import (
    DatabasePositions,
    offset_of,
    split_offset,
    split_origins,
)
from connectors.sqlserver.dialect import after_key_args
from connectors.sqlserver.offsets import Lsn, SqlServerPosition
from connectors.sqlserver.positions import position_lost
from connectors.sqlserver.schema import (
    CaptureInstance,
    Catalog,
    check_captured,
    current_instances,
    explicit_tables,
)

log = logging.getLogger("tidemark.sqlserver.snapshot")

Hold = Callable[[], AbstractContextManager[None]]
"""What holds back the heartbeat action while a snapshot runs (the connector's)."""


@dataclass
class _Database:
    """One captured database's part of the snapshot: its own connections, transaction and
    maximum LSN (each database's tables are consistent with its own LSN)."""

    name: str
    catalog_conn: Any = None
    conn: Any = None
    catalog: Catalog | None = None
    captured: dict[TableId, CaptureInstance] = field(default_factory=dict)
    pos: SqlServerPosition = field(default_factory=lambda: SqlServerPosition(None))


#: what the snapshot driver adds to a table's row offsets so an interrupted snapshot can
#: resume (cdc.snapshot.driver.ResumePoint)
_RESUME_FIELDS = frozenset({"snapshot_done", "snapshot_table", "snapshot_after"})


@dataclass
class _AddedScan(TableScan):
    """A table of a database added to ``database.names``: its rows carry the connector's
    offset as of each batch (set by ``_interleaved``), never the driver's resume fields:
    such a snapshot is redone whole, and those fields would only be stray keys in a
    streaming offset."""

    def emit(self, ctx: SourceContext, batch: Sequence[Row]) -> None:
        if not _RESUME_FIELDS.isdisjoint(self.offset):
            self.offset = {k: v for k, v in self.offset.items() if k not in _RESUME_FIELDS}
        super().emit(ctx, batch)


class SqlServerSnapshotSteps:
    """The snapshot steps over the databases ``databases`` (default: every listed one).
    ``others``: the offset of records while a database added to ``database.names`` is
    snapshotted during streaming (the other databases' positions and the added one's
    snapshot origin; it gets its position only once its snapshot is done, so a kill makes
    the next start redo it, and hand over from the origin)."""

    def __init__(
        self,
        cfg: Config,
        ctx: SourceContext,
        include_data: bool,
        databases: Sequence[str] | None = None,
        others: DatabasePositions | None = None,
        between: Callable[[], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.ctx = ctx
        self.include_data = include_data
        self.dialect = dialect_of(cfg)
        self.dbs = [_Database(n) for n in (databases or database_names(cfg))]
        self.others = others
        #: called between batches of rows (polling the other databases meanwhile)
        self.between = between
        self.mode = cfg["snapshot.isolation.mode"]
        self.structures: dict[TableId, Table] = {}
        self.registered: dict[TableId, Table] = {}
        #: a database streams from this snapshot's position, not the earlier attempt's
        self._fell_back = False
        #: an added database: where it streams from once its snapshot completes (recorded
        #: before its first row, see _start_added)
        self.origin: SqlServerPosition | None = None

    @property
    def positions(self) -> dict[str, SqlServerPosition]:
        return {db.name: db.pos for db in self.dbs}

    def prepare(self) -> None:
        for db in self.dbs:
            db.catalog_conn = connect(self.cfg, database=db.name)
            db.catalog = Catalog(db.catalog_conn, self.dialect, db.name)
            db.catalog.check_cdc_enabled()
            db.conn = connect(self.cfg, autocommit=False, database=db.name)

    def tables(self) -> Sequence[TableId]:
        for db in self.dbs:
            assert db.catalog is not None
            by_table = current_instances(db.catalog.instances(), self.ctx.is_included, db.name)
            # the newest instance describes the table as it is now
            db.captured = {tid: insts[-1] for tid, insts in by_table.items()}
            check_captured(db.catalog, self.ctx.is_included, explicit_tables(self.cfg), db.captured)
        return sorted(t for db in self.dbs for t in db.captured)

    def lock(self) -> None:
        for db in self.dbs:
            cur = db.conn.cursor()
            cur.execute(self.dialect.set_isolation(self.mode))
            if self.mode == "exclusive":
                for tid in sorted(db.captured):
                    cur.execute(self.dialect.lock_exclusive(tid.schema or "dbo", tid.table))
                    if cur.description:
                        cur.fetchall()
            cur.close()

    def position(self) -> dict[str, Any]:
        for db in self.dbs:
            cur = db.conn.cursor()
            cur.execute(self.dialect.max_lsn())
            row = cur.fetchone()
            cur.close()
            db.pos = SqlServerPosition(Lsn.of(row[0]) if row else None)
            log.info("snapshot of %s consistent with commit LSN %s", db.name, db.pos.commit_lsn)
        return offset_of(self.cfg, self.positions)

    def structure(self) -> None:
        for db in self.dbs:
            assert db.catalog is not None
            for tid, inst in sorted(db.captured.items()):
                table = db.catalog.table(inst)
                self.structures[tid] = table
                self.ctx.register_table(table)
                self.registered[tid] = table
        if self.others is not None:
            self._start_added(self.others)
        if not self.include_data:
            self.report_structure()

    def _start_added(self, others: DatabasePositions) -> None:
        """An added database's snapshot, before its first record: choose where its streaming
        starts once the snapshot completes (the origin an interrupted attempt stored, while
        the change tables still hold it; else this snapshot's position) and wait until an
        offset naming it is stored. Every offset emitted from then on keeps it, so a kill at
        any later point leaves it stored: the next attempt, which reads the tables at a
        newer LSN, streams from it and replays the deletes of rows an earlier attempt
        emitted."""
        (db,) = self.dbs
        assert db.catalog is not None
        origin = earlier = others.origin(db.name)
        if earlier is not None:
            lost = position_lost(db.catalog, earlier, self.ctx.is_included)
            if lost is None:
                log.info(
                    "%s: an earlier snapshot attempt started at %s; streaming after this "
                    "snapshot starts there",
                    db.name,
                    earlier.commit_lsn,
                )
            else:
                log.warning(
                    "%s: streaming starts at this snapshot's position %s, not at the earlier "
                    "attempt's %s: %s Rows deleted in between may still be present "
                    "downstream.",
                    db.name,
                    db.pos.commit_lsn,
                    earlier.commit_lsn,
                    lost,
                )
                origin = None
        self.origin = origin or db.pos
        self.ctx.emit(PositionReached(others.start_snapshot(db.name, self.origin)))
        # stored before the first row goes out (returns at once when nothing was sent since
        # the last stored offset)
        self.ctx.snapshot_chunk_done()

    def handover(self, resume: dict[str, Any]) -> dict[str, Any]:
        """Stream each database from ``resume`` (an earlier attempt's positions) while its
        change tables still hold it; else from this snapshot's own position, with a warning:
        deletes made between the two may be missing downstream."""
        own = offset_of(self.cfg, self.positions)
        if resume == own:
            return resume
        earlier = split_offset(self.cfg, resume)
        # a database added to database.names whose own snapshot was interrupted: its rows
        # are downstream too, and its origin is where they were read from
        origins = split_origins(self.cfg, resume)
        chosen: dict[str, SqlServerPosition] = {}
        for db in self.dbs:
            assert db.catalog is not None
            pos = earlier.get(db.name) or origins.get(db.name)
            lost = (
                "the earlier attempt has no position for it"
                if pos is None
                else position_lost(db.catalog, pos, self.ctx.is_included)
            )
            if lost is None and pos is not None:
                chosen[db.name] = pos
                continue
            log.warning(
                "%s: streaming starts at this snapshot's position %s, not at the earlier %s: "
                "%s Rows deleted in between may still be present downstream.",
                db.name,
                db.pos.commit_lsn,
                pos.commit_lsn if pos else None,
                lost,
            )
            self._fell_back = True
            chosen[db.name] = db.pos
        return offset_of(self.cfg, chosen)

    def may_resume(self) -> bool:
        """An interrupted snapshot resumes only when every database streams from its
        position (the change tables still hold it): the changes since are replayed on the
        rows it read before the crash."""
        return not self._fell_back

    def _offset(self) -> dict[str, Any]:
        """The offset of this snapshot's records."""
        if self.others is None:
            return {**offset_of(self.cfg, self.positions), "snapshot": True}
        # an added database: the others' positions and its snapshot origin (the only
        # database now: the core's interrupted-snapshot offset, so a kill makes the next
        # start snapshot it again and stream from the origin)
        return self.others.offset()

    def _source(self, tid: TableId, ts: int) -> dict[str, Any]:
        lsn = self.positions[str(tid.catalog)].commit_lsn
        return {
            "ts_ms": ts,
            "snapshot": True,
            "db": tid.catalog,
            "schema": tid.schema,
            "table": tid.table,
            "change_lsn": None,
            "commit_lsn": str(lsn) if lsn else None,
            "event_serial_no": None,
        }

    def report_structure(self) -> None:
        """Each captured table on the schema change topic, as Debezium's snapshot reports
        them: a CREATE ``tableChanges`` entry with the table as read, ``ddl`` null,
        ``source.snapshot`` true. Called once streaming's start is recorded (before the first
        row, or after the structure when no rows are read), so storing these records' offset
        never hides an earlier attempt's position."""
        if not self.cfg["include.schema.changes"]:
            return
        ts = int(time.time() * 1000)
        offset = self._offset()
        for tid, table in sorted(self.structures.items()):
            change = TableChange(TableChangeType.CREATE, table)
            source = self._source(tid, ts)
            self.ctx.emit(
                SchemaChange(str(tid.catalog), tid.schema, None, [tid], source, offset, [change])
            )

    def scans(self) -> list[TableScan]:
        self.report_structure()
        ts = int(time.time() * 1000)
        offset = self._offset()
        out = []
        for tid, table in sorted(self.structures.items()):
            db = str(tid.catalog)
            # snapshot.select.statement.overrides.<[database.]schema.table>: the user's
            # SELECT, giving the captured columns in the table's order
            override = select_override(self.cfg, f"{db}.{tid.schema}.{tid.table}")
            override = override or select_override(self.cfg, f"{tid.schema}.{tid.table}")
            # an added database's snapshot is never resumed (it has no position yet)
            keyed = bool(table.primary_key) and not override and self.others is None
            key = table.primary_key if keyed and self.cfg["snapshot.resumable"] else []
            sql = override or self.dialect.snapshot_select(
                tid.schema or "dbo", tid.table, table.column_names(), key
            )
            positions = [table.column_names().index(k) for k in key]
            out.append(
                (_AddedScan if self.others is not None else TableScan)(
                    table,
                    self._source(tid, ts),
                    offset,
                    None,
                    plan=(db, sql),
                    key_of=plain_key_reader(positions) if key else None,
                )
            )
        return out

    def read(self, scans: list[TableScan]) -> Iterator[tuple[TableScan, Sequence[Row] | None]]:
        batches = one_by_one(scans, self.ctx.stop_event.is_set, self._rows)
        if self.others is None:
            return batches
        return self._interleaved(batches, self.others)

    def _interleaved(
        self,
        batches: Iterator[tuple[TableScan, Sequence[Row] | None]],
        others: DatabasePositions,
    ) -> Iterator[tuple[TableScan, Sequence[Row] | None]]:
        """An added database's rows, the other databases polled between batches: each batch
        carries the others' positions as of then (the offset only moves forward) and the
        added database's snapshot origin."""
        try:
            for scan, rows in batches:
                if self.between is not None:
                    self.between()
                scan.offset = others.offset()
                yield scan, rows
        finally:
            close = getattr(batches, "close", None)
            if callable(close):
                close()  # its cursor, before the release step closes the connection

    def _rows(self, scan: TableScan) -> Iterator[Sequence[Row]]:
        size = int(self.cfg["snapshot.fetch.size"])
        db, sql = scan.plan
        cur = next(d for d in self.dbs if d.name == db).conn.cursor()
        try:
            if scan.after is not None and scan.key_of is not None:
                table = scan.table
                narrow = [
                    c.name
                    for c in table.columns
                    if c.name in table.primary_key
                    and c.type_name.lower() in ("char", "varchar", "text")
                ]
                sql = self.dialect.snapshot_select_after(
                    table.id.schema or "dbo",
                    table.id.table,
                    table.column_names(),
                    table.primary_key,
                    narrow,
                )
                cur.execute(sql, after_key_args(scan.after))
            else:
                cur.execute(sql)
            while batch := cur.fetchmany(size):
                yield [tuple(r) for r in batch]
        finally:
            cur.close()

    def release(self, completed: bool) -> None:
        for db in self.dbs:
            for conn, finish in ((db.conn, completed), (db.catalog_conn, False)):
                if conn is None:
                    continue
                try:
                    if finish:
                        conn.commit()
                    else:
                        conn.rollback()
                except Exception:
                    pass
                with contextlib.suppress(Exception):
                    conn.close()
            db.conn = db.catalog_conn = None


class SqlServerSnapshot(SnapshotSource):
    def __init__(
        self, cfg: Config, registered: dict[TableId, Table], hold: Hold = nullcontext
    ) -> None:
        self.cfg = cfg
        #: shared with the streaming source: the tables the core has structures for
        self.registered = registered
        self.hold = hold

    def execute(
        self, ctx: SourceContext, previous_offset: Mapping[str, Any] | None, include_data: bool
    ) -> dict[str, Any]:
        steps = SqlServerSnapshotSteps(self.cfg, ctx, include_data)
        resume = ResumePoint.of(previous_offset)
        with self.hold():
            offset = run_snapshot(
                ctx,
                steps,
                include_data=include_data,
                resume=resume,
                chunk_rows=int(self.cfg["snapshot.resumable.chunk.size"]),
                batched=True,
            )
        self.registered.update(steps.registered)
        return offset


def snapshot_added(
    cfg: Config,
    ctx: SourceContext,
    database: str,
    include_data: bool,
    others: DatabasePositions,
    registered: dict[TableId, Table],
    between: Callable[[], None] | None = None,
    hold: Hold = nullcontext,
) -> SqlServerPosition:
    """Snapshot a database added to ``database.names`` while the others have positions: its
    rows carry the others' positions (none for it), so storing them never marks the added
    database as done, and its snapshot origin, stored before the first row; returns the
    position it streams from: that origin (an interrupted earlier attempt's start while the
    change tables hold it, else this snapshot's position)."""
    log.info("database %s has no stored position: snapshotting it", database)
    steps = SqlServerSnapshotSteps(cfg, ctx, include_data, [database], others, between)
    with hold():
        run_snapshot(
            ctx,
            steps,
            include_data=include_data,
            handover=others.offset(),
            chunk_rows=int(cfg["snapshot.resumable.chunk.size"]),
        )
    registered.update(steps.registered)
    return steps.origin or steps.dbs[0].pos
