"""The consistent snapshot (seed §2.1.2), with global or table-level locks.

With ``snapshot.locking.mode=minimal`` (the default) writes are blocked only from taking the
global read lock to releasing it after the binlog position and the table definitions were read;
rows are then read in a ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` transaction opened while
the lock was held, so they are exactly the state at that position. ``extended`` keeps the lock
until the rows are read. Without the RELOAD privilege (hosted servers) the connector locks the
captured tables with ``LOCK TABLES ... READ`` instead and reads rows under those locks, which
MySQL releases only after the scan. ``none`` takes no lock: on MariaDB the position still
matches the transaction exactly (``Binlog_snapshot_file/position``); on MySQL it is read right
after the transaction starts and DDL must not run meanwhile.

The first step of a snapshot is recording the table definitions in the schema history at the
snapshot position, then publishing them on the schema change topic; rows follow as ``op=r``
events whose offsets carry ``snapshot: true`` until the snapshot completes, so an interrupted
snapshot is redone from scratch.

Before the first row the snapshot tells the core its position (``ctx.snapshot_starting``),
which records it durably. When an earlier attempt may already have emitted events — an
interrupted snapshot, or the streaming offset that ``always``/``when_needed`` replaces — the
core answers with that earlier position, and streaming starts there instead of at this
snapshot's position: replaying the binlog between the two re-delivers the deletes of rows the
earlier attempt emitted (the newer snapshot holds only what still exists). The schema is then
recovered from the history as of that earlier position, and DDL replayed in between is
decoded in order (see ``TaskState.recover``). If the server no longer has the earlier
position, streaming starts at this snapshot's position with a warning that deletes may be
missing downstream.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cdc.config import Config
from cdc.errors import FatalError
from cdc.history import TableChange, TableChangeType
from cdc.snapshot.driver import (
    ResumePoint,
    TableScan,
    emit_scans,
    one_by_one,
    plain_key_reader,
    run_snapshot,
)
from cdc.snapshot.driver import select_override as _select_override
from cdc.spi import SchemaChange, SnapshotSource, SourceContext, Table, TableId
from connectors.mysql import connection as myconn
from connectors.mysql import ddl
from connectors.mysql.config import RECOVERY_MODES
from connectors.mysql.errors import UnparseableDdl, describe_position
from connectors.mysql.include_check import check_include_lists
from connectors.mysql.offsets import BinlogPosition, is_at_or_before
from connectors.mysql.retention import missing_reason
from connectors.mysql.schema import MySqlSchema
from connectors.mysql.state import BUILTIN_DATABASES, TaskState
from connectors.mysql.text_rows import read_rows_compiled
from connectors.mysql.types import base_type

log = logging.getLogger("tidemark.mysql.snapshot")


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def qualified(table_id: TableId) -> str:
    return f"{_quote(table_id.catalog or '')}.{_quote(table_id.table)}"


def select_override(cfg: Config, table_id: TableId) -> str | None:
    """``snapshot.select.statement.overrides`` names tables as ``<db>.<table>``."""
    return _select_override(cfg, f"{table_id.catalog}.{table_id.table}")


def select_statement(table: Table) -> str:
    """``SELECT *`` with FLOAT columns widened to DOUBLE: the text protocol prints FLOAT with 6
    significant digits, the binlog carries the full float32 (see types.py)."""
    parts = []
    for col in table.columns:
        if base_type(col)[0] in ("FLOAT",):
            parts.append(f"({_quote(col.name)} + 0e0) AS {_quote(col.name)}")
        else:
            parts.append(_quote(col.name))
    return f"SELECT {', '.join(parts)} FROM {qualified(table.id)}"


class MySqlSnapshot(SnapshotSource):
    def __init__(self, state: TaskState) -> None:
        self.state = state
        self.cfg = state.cfg

    def execute(
        self, ctx: SourceContext, previous_offset: Mapping[str, Any] | None, include_data: bool
    ) -> dict[str, Any]:
        cfg = self.cfg  # snapshot.delay.ms is applied by the engine before this is called
        recovery = cfg["snapshot.mode"] in RECOVERY_MODES
        if recovery and not previous_offset:
            raise FatalError(
                "snapshot.mode=schema_only_recovery needs stored offsets to recover the schema "
                "history for; none exist. Use snapshot.mode=initial (or schema_only) instead."
            )
        run = SnapshotRun(self.state, ctx, include_data and not recovery, previous_offset)
        return run.run(recovery)


class SnapshotRun:
    def __init__(
        self,
        state: TaskState,
        ctx: SourceContext,
        include_data: bool,
        previous_offset: Mapping[str, Any] | None,
    ) -> None:
        self.state = state
        self.cfg = state.cfg
        self.ctx = ctx
        self.include_data = include_data
        self.previous = previous_offset
        self.metrics = state.metrics
        self.global_lock = False
        self.table_locks = False
        self.recovery = False
        self.conn: Any = None
        self._info: myconn.ServerInfo | None = None
        self.locking = "none"
        self.databases: list[str] = []
        self.all_tables: list[TableId] = []
        self.captured: list[TableId] = []
        self.ddl_texts: dict[TableId, str] = {}
        self._binlog: BinlogPosition | None = None
        #: this snapshot's own position, as streaming's offset
        self.own: dict[str, Any] = {}
        #: the earlier attempt's position is gone: streaming starts at this one's (may_resume)
        self._fell_back = False

    def run(self, recovery: bool) -> dict[str, Any]:
        self.recovery = recovery
        resume = None if self.recovery else ResumePoint.of(self.previous)
        out = run_snapshot(
            self.ctx,
            self,
            include_data=self.include_data,
            resume=resume,
            chunk_rows=int(self.cfg["snapshot.resumable.chunk.size"]),
            batched=True,
        )
        # Streaming from an earlier position needs the schema as of that position.
        self.state.schema_ready = out == self.own
        if recovery:
            assert self.previous is not None
            out = recovery_start(self.previous)
        return out

    @property
    def info(self) -> myconn.ServerInfo:
        assert self._info is not None, "prepare() reads the server's settings"
        return self._info

    @property
    def binlog(self) -> BinlogPosition:
        assert self._binlog is not None, "position() comes before the steps that use it"
        return self._binlog

    # -- the driver's steps (cdc.snapshot.driver) -----------------------------------------------
    def prepare(self) -> None:
        cfg = self.cfg
        self.conn = conn = myconn.connect(cfg, autocommit=True, snapshot=True)
        self._info = info = myconn.server_info(conn)
        if not info.log_bin:
            raise FatalError("the server's binary log is disabled; set log_bin (seed §2.2.2)")
        self._session(conn)
        check_include_lists(
            cfg,
            conn,
            lambda t: self.state.included(self.ctx, t),
            self.state.database_filter,
            self.ctx.metrics.notices,
        )

    def tables(self) -> Sequence[TableId]:
        conn, cfg = self.conn, self.cfg
        self.databases = self._databases(conn)
        self.all_tables = self._tables(conn, self.databases)
        self.captured = [t for t in self.all_tables if self.ctx.is_included(t)]
        log.info(
            "snapshot of %d databases, %d tables (%d captured); locking mode %s",
            len(self.databases),
            len(self.all_tables),
            len(self.captured),
            cfg["snapshot.locking.mode"],
        )
        return self.all_tables

    def lock(self) -> None:
        self.locking = self.cfg["snapshot.locking.mode"] if not self.recovery else "none"
        if self.locking != "none":
            self._lock(self.conn, self.captured, self.all_tables, self.ddl_texts)

    def position(self) -> dict[str, Any]:
        if not self.table_locks:
            myconn.execute(self.conn, "START TRANSACTION WITH CONSISTENT SNAPSHOT")
        self._binlog = self._position(self.conn, self.info, self.locking, self.recovery)
        log.info("snapshot position %s", self.binlog.to_offset())
        self.own = self.binlog.with_(snapshot=False).to_offset()
        return self.own

    def structure(self) -> None:
        conn = self.conn
        db_ddl = {db: self._show_create_database(conn, db) for db in self.databases}
        for tid in self.all_tables:
            if tid not in self.ddl_texts:
                self.ddl_texts[tid] = self._show_create_table(conn, tid)
        if self.global_lock and self.cfg["snapshot.locking.mode"] == "minimal":
            self._unlock(conn)
        self._record_schema(self.binlog, self.databases, self.all_tables, db_ddl, self.ddl_texts)

    def handover(self, resume: dict[str, Any]) -> dict[str, Any]:
        return self._handover(self.conn, self.info, resume) or self.own

    def may_resume(self) -> bool:
        """An interrupted snapshot resumes only when streaming hands over from its position
        (the binary log still has it): the changes since are replayed on its rows."""
        return not self._fell_back

    def scans(self) -> list[TableScan]:
        known = [self.state.schema.table(t) for t in self.captured]
        offset = self.binlog.to_offset()
        return [self._scan_of(t, offset, self.binlog) for t in known if t is not None]

    def read(self, scans: list[TableScan]) -> Iterator[tuple[TableScan, Sequence[Any] | None]]:
        return one_by_one(scans, self.ctx.stop_event.is_set, self._rows)

    def release(self, completed: bool) -> None:
        conn = self.conn
        if conn is None:
            return
        try:
            if completed and not self.table_locks:
                myconn.execute(conn, "COMMIT")
        finally:
            try:
                self._unlock(conn)
            finally:
                conn.close()

    def _handover(
        self, conn: Any, info: myconn.ServerInfo, resume: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The earlier position streaming must start from instead of this snapshot's, if any
        (None: this snapshot's own), given the resume position the core recorded."""
        own = self.own
        for key in ("snapshot", "snapshot_completed", "snapshot_origin"):
            resume.pop(key, None)
        if resume == own or is_at_or_before(own, resume):
            return None
        why = missing_reason(conn, info, resume)
        if why is not None:
            self._fell_back = True
            log.warning(
                "an earlier snapshot attempt or the replaced streaming offset emitted events "
                "from %s, but the server no longer has that position (%s): streaming starts "
                "at this snapshot's position %s, so deletes of rows emitted before may be "
                "missing downstream (consumers may keep rows the table no longer has)",
                describe_position(resume),
                why,
                describe_position(own),
            )
            return None
        log.info(
            "events may have been emitted from %s by an earlier attempt; streaming starts "
            "there after this snapshot (at %s) so their deletes are replayed",
            describe_position(resume),
            describe_position(own),
        )
        return resume

    def new_tables(self, table_ids: list[TableId], rows_offset: dict[str, Any]) -> BinlogPosition:
        """``snapshot.new.tables=parallel``: a consistent snapshot of just ``table_ids`` at a new
        position P2. Their rows carry ``rows_offset`` (the stored offset, which still names the
        old filters), so an interruption repeats this step; streaming then resumes from that
        offset and drops these tables' changes up to P2, which the snapshot already holds."""
        cfg = self.cfg
        conn = myconn.connect(cfg, autocommit=True, snapshot=True)
        try:
            info = myconn.server_info(conn)
            self._session(conn)
            locking = cfg["snapshot.locking.mode"]
            texts: dict[TableId, str] = {}
            if locking != "none":
                self._lock(conn, table_ids, table_ids, texts)
            try:
                if not self.table_locks:
                    myconn.execute(conn, "START TRANSACTION WITH CONSISTENT SNAPSHOT")
                position = self._position(conn, info, locking, False)
                for tid in table_ids:
                    texts.setdefault(tid, self._show_create_table(conn, tid))
                if self.global_lock and locking == "minimal":
                    self._unlock(conn)
                current = MySqlSchema()
                tables = []
                for tid in table_ids:
                    current.apply_ddl(texts[tid], tid.catalog)
                    table = current.table(tid)
                    if table is not None:
                        tables.append(table)
                self.state.register(self.ctx, tables)  # rows decode with today's structure
                log.info(
                    "snapshot of newly captured tables %s at %s",
                    [t.identifier for t in table_ids],
                    position.to_offset(),
                )
                self.conn = conn
                scans = [self._scan_of(t, rows_offset, position) for t in tables]
                chunk_rows = int(self.cfg["snapshot.resumable.chunk.size"])
                emit_scans(self.ctx, scans, self.read(scans), chunk_rows=chunk_rows)
                if not self.table_locks:
                    myconn.execute(conn, "COMMIT")
            finally:
                self._unlock(conn)
        finally:
            conn.close()
        return position

    # -- catalog --------------------------------------------------------------------------------
    def _databases(self, conn: Any) -> list[str]:
        dbs = [str(r[0]) for r in myconn.query(conn, "SHOW DATABASES")]
        keep = self.state.database_filter
        return [d for d in dbs if keep(d) and d.lower() not in BUILTIN_DATABASES]

    def _tables(self, conn: Any, databases: list[str]) -> list[TableId]:
        out: list[TableId] = []
        for db in databases:
            rows = myconn.query(
                conn, f"SHOW FULL TABLES IN {_quote(db)} WHERE Table_type = 'BASE TABLE'"
            )
            out.extend(TableId(db, None, str(r[0])) for r in rows)
        if self.state.history.store_only_captured_tables_ddl:
            out = [t for t in out if self.ctx.is_included(t)]
        return out

    def _show_create_table(self, conn: Any, tid: TableId) -> str:
        row = myconn.query_one(conn, f"SHOW CREATE TABLE {qualified(tid)}")
        if row is None:
            raise FatalError(f"SHOW CREATE TABLE {tid} returned nothing")
        return str(row[1])

    def _show_create_database(self, conn: Any, db: str) -> str:
        row = myconn.query_one(conn, f"SHOW CREATE DATABASE {_quote(db)}")
        return str(row[1]) if row else f"CREATE DATABASE {_quote(db)}"

    # -- locks ------------------------------------------------------------------------------------
    def _lock(
        self,
        conn: Any,
        captured: list[TableId],
        tables: list[TableId],
        ddl_texts: dict[TableId, str],
    ) -> None:
        timeout = self.cfg["snapshot.lock.timeout.ms"]
        try:
            myconn.execute(conn, "FLUSH TABLES WITH READ LOCK")
            self.global_lock = True
            self.metrics.holding_global_lock = True
            log.info("holding the global read lock")
            return
        except Exception as exc:
            code = myconn.error_code(exc)
            if code == myconn.ER_LOCK_WAIT_TIMEOUT:
                raise FatalError(
                    f"could not take the global read lock within snapshot.lock.timeout.ms="
                    f"{timeout}: another session holds a conflicting lock ({exc})"
                ) from exc
            if code not in myconn.ACCESS_DENIED:
                raise
            log.warning(
                "the global read lock is not allowed (%s); using table-level locks, which "
                "need the LOCK TABLES privilege and block writes to captured tables until the "
                "snapshot ends",
                exc,
            )
        # LOCK TABLES restricts the session to the locked tables: read the other definitions
        # first (they are not captured; their structure only feeds the history).
        locked = set(captured)
        for tid in tables:
            if tid not in locked:
                ddl_texts[tid] = self._show_create_table(conn, tid)
        if not captured:
            return
        statement = "LOCK TABLES " + ", ".join(f"{qualified(t)} READ" for t in captured)
        try:
            myconn.execute(conn, statement)
        except Exception as exc:
            if myconn.error_code(exc) == myconn.ER_LOCK_WAIT_TIMEOUT:
                raise FatalError(
                    f"could not lock the captured tables within snapshot.lock.timeout.ms="
                    f"{timeout}: another session holds a conflicting lock ({exc})"
                ) from exc
            raise
        self.table_locks = True
        self.metrics.holding_global_lock = True

    def _unlock(self, conn: Any) -> None:
        if not (self.global_lock or self.table_locks):
            return
        if self.table_locks:
            myconn.execute(conn, "COMMIT")
        myconn.execute(conn, "UNLOCK TABLES")
        log.info("released the %s lock", "global read" if self.global_lock else "table")
        self.global_lock = self.table_locks = False
        self.metrics.holding_global_lock = False

    # -- position ---------------------------------------------------------------------------------
    def _position(
        self, conn: Any, info: myconn.ServerInfo, locking: str, recovery: bool
    ) -> BinlogPosition:
        if recovery:
            assert self.previous is not None
            return BinlogPosition.from_offset(recovery_start(self.previous)).with_(snapshot=True)
        file, pos, gtids = myconn.binlog_status(conn, info)
        if locking == "none" and info.is_mariadb and not self.table_locks:
            exact = myconn.consistent_snapshot_position(conn)
            if exact is not None:
                file, pos = exact
                gtids = myconn.mariadb_gtid_at(conn, file, pos) or gtids
        return BinlogPosition(
            file=file,
            pos=pos,
            gtids=gtids,
            ts_sec=int(time.time()),
            server_id=info.server_id,
            snapshot=True,
        )

    # -- schema -----------------------------------------------------------------------------------
    def _record_schema(
        self,
        position: BinlogPosition,
        databases: list[str],
        tables: list[TableId],
        db_ddl: dict[str, str],
        ddl_texts: dict[TableId, str],
    ) -> None:
        state, ctx = self.state, self.ctx
        offset = position.to_offset()
        # Tables the history knew before this snapshot are dropped first, so a later recovery
        # does not resurrect tables that no longer exist.
        state.recover(None, everything=True)
        known = list(state.schema.tables)
        state.schema.reset()
        if known:
            drops = [TableChange(TableChangeType.DROP, Table(t, ())) for t in known]
            text = "DROP TABLE IF EXISTS " + ", ".join(qualified(t) for t in known)
            state.record(offset, None, text, drops)
        source_base = _source_block(position, None, None)
        for db in databases:
            state.schema.apply_ddl(db_ddl[db], None)
            state.record(offset, db, db_ddl[db], [])
            ctx.emit(
                SchemaChange(
                    db, None, db_ddl[db], [], {**source_base, "db": db}, offset, changes=[]
                )
            )
        for tid in tables:
            text = ddl_texts[tid]
            try:
                applied = state.schema.apply_ddl(text, tid.catalog)
            except ddl.DdlParseError as exc:
                if state.history.skip_unparseable_ddl:
                    log.warning("skipping unparseable table definition of %s: %s", tid, exc)
                    continue
                raise UnparseableDdl(text, offset, str(exc)) from exc
            changes = [c for a in applied for c in a.changes]
            state.record(offset, tid.catalog, text, changes, ctx)
            state.register(ctx, [c.table for c in changes])
            if state.database_filter(tid.catalog):
                source = {**source_base, "db": tid.catalog, "table": tid.table}
                ctx.emit(
                    SchemaChange(tid.catalog, None, text, [tid], source, offset, changes=changes)
                )

    # -- rows -------------------------------------------------------------------------------------
    def _session(self, conn: Any) -> None:
        timeout_s = max(math.ceil(int(self.cfg["snapshot.lock.timeout.ms"]) / 1000), 1)
        myconn.execute(conn, f"SET SESSION lock_wait_timeout = {timeout_s}")
        myconn.execute(conn, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")

    def _scan_of(self, table: Table, offset: dict[str, Any], position: BinlogPosition) -> TableScan:
        tid = table.id
        source = _source_block(position, tid.catalog, tid.table)  # ts_ms: when it is read
        override = select_override(self.cfg, tid)
        key = [table.column_names().index(k) for k in table.primary_key]
        in_key_order = bool(key) and not override and bool(self.cfg["snapshot.resumable"])
        query = override or select_statement(table)
        if in_key_order:
            query += f" ORDER BY {_keys(table)}"
        return TableScan(
            table,
            source,
            offset,
            self._estimate(self.conn, tid),
            plan=query,
            key_of=plain_key_reader(key) if in_key_order else None,
        )

    def _estimate(self, conn: Any, tid: TableId) -> int | None:
        row = myconn.query_one(
            conn,
            "SELECT TABLE_ROWS FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (tid.catalog, tid.table),
        )
        return int(row[0]) if row and row[0] is not None else None

    def _rows(self, scan: TableScan) -> Iterator[Sequence[Any]]:
        """One table's rows in ``snapshot.fetch.size`` batches, through a streaming cursor for
        tables of at least ``min.row.count.to.stream.results`` rows."""
        cfg, table, tid = self.cfg, scan.table, scan.table.id
        fetch = int(cfg["snapshot.fetch.size"])
        stream_min = int(cfg["min.row.count.to.stream.results"])
        streaming = stream_min == 0 or (scan.estimate or 0) >= stream_min
        scan.source["ts_ms"] = int(time.time() * 1000)
        cursor = myconn.cursor(self.conn, unbuffered=streaming)
        try:
            # overrides may name the table without its database
            cursor.execute(f"USE {_quote(tid.catalog or '')}")
            if scan.after is not None and scan.key_of is not None:
                where, args = _after_key(table, scan.after)
                cursor.execute(
                    f"{select_statement(table)} WHERE {where} ORDER BY {_keys(table)}", args
                )
            else:
                cursor.execute(scan.plan)
            fetch_rows = (read_rows_compiled(cursor) if streaming else None) or cursor.fetchmany
            reorder = _reorder(table, [d[0] for d in cursor.description or ()])
            while True:
                batch = fetch_rows(fetch)
                if not batch:
                    break
                if reorder is not None:
                    batch = [[row[i] if i >= 0 else None for i in reorder] for row in batch]
                yield batch
        finally:
            cursor.close()


#: offset keys of an unfinished snapshot (cdc.snapshot.driver, cdc.pipeline.coordinator)
_SNAPSHOT_KEYS = (
    "snapshot",
    "snapshot_completed",
    "snapshot_origin",
    "snapshot_done",
    "snapshot_table",
    "snapshot_after",
)


def recovery_start(previous: Mapping[str, Any]) -> dict[str, Any]:
    """Where ``schema_only_recovery`` records the table definitions and streaming starts:
    the stored offset, or after an interrupted snapshot the position recorded before its
    first row (``snapshot_origin``; not the rows' own position, which may be later): the rows
    an earlier attempt emitted are downstream, and only the binlog from there replays their
    deletes."""
    origin = previous.get("snapshot_origin")
    base = origin if isinstance(origin, Mapping) else previous
    return {k: v for k, v in base.items() if k not in _SNAPSHOT_KEYS}


def _keys(table: Table) -> str:
    return ", ".join(_quote(k) for k in table.primary_key)


def _after_key(table: Table, after: Sequence[Any]) -> tuple[str, list[Any]]:
    """``(k1, k2) > (v1, v2)`` written out as ``k1 > v1 OR (k1 = v1 AND k2 > v2)``, which
    MariaDB turns into a range on the primary key (it does not for a row comparison)."""
    keys = [_quote(k) for k in table.primary_key]
    marks = myconn.key_marks(table, table.primary_key)
    terms, args = [], []
    for i, key in enumerate(keys):
        equal = [f"{k} = {m}" for k, m in zip(keys[:i], marks[:i], strict=True)]
        terms.append("(" + " AND ".join([*equal, f"{key} > {marks[i]}"]) + ")")
        args += [*after[:i], after[i]]
    return " OR ".join(terms), args


def _source_block(position: BinlogPosition, db: str | None, table: str | None) -> dict[str, Any]:
    """The ``source`` block of snapshot events (schema changes and rows) at ``position``."""
    return {
        "ts_ms": 0,
        "snapshot": True,
        "db": db,
        "table": table,
        "server_id": 0,  # Debezium: no binlog event read yet (the seed shows 0)
        "gtid": None,
        "file": position.file,
        "pos": position.pos,
        "row": 0,
        "thread": None,
        "query": None,
    }


def _reorder(table: Table, names: list[str]) -> list[int] | None:
    """Column positions of the result for each table column (overrides may reorder or omit
    columns); None when the result already has the table's shape."""
    expected = table.column_names()
    if names == expected:
        return None
    index = {n: i for i, n in enumerate(names)}
    return [index.get(n, -1) for n in expected]
