"""Binlog events → source events, with exact resume positions (see offsets.py).

One ``BinlogProcessor`` per binlog session turns the decoded events into row changes,
transaction boundaries and schema changes. It keeps the position a restart must read from
(the current transaction's start), how many of that transaction's row events and rows were
already emitted, and the GTIDs committed before it.

``binlog.buffer.size`` > 0 holds a transaction's events until its COMMIT so a transaction that
ends in ROLLBACK (possible when non-transactional tables are involved) or rolls back to a
savepoint is not emitted; a transaction larger than the buffer is emitted as it is read (the
seed's "rewind": the outcome is the same as re-reading the overflow, without a second read).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from cdc.history.store import TableChange, TableChangeType
from cdc.pipeline.reselect import configured as reselect_configured
from cdc.spi import (
    UNAVAILABLE,
    Operation,
    PositionReached,
    RowChange,
    SchemaChange,
    SourceContext,
    SourceEvent,
    Table,
    TableId,
    TableTruncated,
    TransactionBegin,
    TransactionEnd,
)
from connectors.mysql import binlog_decoder as raw
from connectors.mysql import connection as ev
from connectors.mysql import ddl
from connectors.mysql.ddl_model import (
    AlterTable,
    CreateIndex,
    DropIndexOn,
    DropTables,
    NotTableDdl,
    RenameTables,
    TruncateTable,
    UseDatabase,
)
from connectors.mysql.errors import (
    EventDeserializationFailed,
    InconsistentSchema,
    UnparseableDdl,
    describe_position,
)
from connectors.mysql.gtid import GtidSet, MariaDbGtidSet
from connectors.mysql.json_values import apply_json_diff, normalize
from connectors.mysql.new_tables import NewTablesGate
from connectors.mysql.row_images import COLS_BITMAP, PLACEHOLDERS, RESELECTED, refusal
from connectors.mysql.rows_decoder import ABSENT, negative_time2
from connectors.mysql.schema import Applied
from connectors.mysql.state import TaskState
from connectors.mysql.types import ZERO_DATE

log = logging.getLogger("tidemark.mysql.binlog")

_ZERO_SOURCES = ("out of date range", "out of datetime range", "out of datetime2 range")
_FL_STANDALONE = 0x01  # MariaDB GTID event flag: a single statement, no COMMIT follows


@dataclass
class Resume:
    """Where to start and what of the first transaction was already emitted."""

    file: str | None
    pos: int
    gtids: str | None
    skip_events: int = 0
    skip_rows: int = 0


@dataclass
class _TableInfo:
    table: Table
    index: dict[str, int]
    checked: bool = False


class BinlogProcessor:
    def __init__(
        self,
        state: TaskState,
        ctx: SourceContext,
        resume: Resume,
        gtids: GtidSet | None,
        *,
        gate: NewTablesGate | None = None,
        offset_keys: dict[str, Any] | None = None,
        offset_keys_after_gate: dict[str, Any] | None = None,
    ) -> None:
        self.state = state
        self.cfg = state.cfg
        self.ctx = ctx
        self.emit_now = ctx.emit
        self.metrics = state.metrics
        self.core_metrics = ctx.metrics
        self.include_query = bool(self.cfg["include.query"])
        self.schema_mode = self.cfg["inconsistent.schema.handling.mode"]
        self.decode_mode = self.cfg.get("event.deserialization.failure.handling.mode") or (
            self.cfg["event.processing.failure.handling.mode"]
            if self.cfg["event.processing.failure.handling.mode"] in ("fail", "warn", "skip")
            else "fail"
        )
        self.buffer_size = int(self.cfg["binlog.buffer.size"])
        self.gate = gate
        #: extra offset keys (the filters, with snapshot.new.tables=parallel)
        self.offset_keys = offset_keys or {}
        self.offset_keys_after_gate = offset_keys_after_gate or self.offset_keys
        # position
        self.file = resume.file or ""
        self.restart_file = resume.file or ""
        self.restart_pos = resume.pos
        self.gtids = gtids
        self.gtids_text = resume.gtids or (str(gtids) if gtids is not None else None)
        self.skip_events = resume.skip_events
        self.skip_rows = resume.skip_rows
        self.resuming_txn = bool(resume.skip_events or resume.skip_rows)
        # transaction
        self.in_txn = False
        self.txn_gtid: str | None = None
        #: the open transaction's MariaDB GTID as numbers, when the decoder parsed it
        self.txn_parts: tuple[int, int, int] | None = None
        #: the position as a MariaDB set that takes parsed GTIDs (None: use ``add``)
        self.maria_gtids = gtids if isinstance(gtids, MariaDbGtidSet) else None
        self.txn_id: str | None = None
        self.began = False
        self.events_done = 0
        self.emitted = (0, 0)
        self.thread: int | None = None
        self.query: str | None = None
        self.ts_sec = 0
        self.server_id = 0
        # buffering
        self.buffer: list[SourceEvent] | None = None
        self.savepoints: dict[str, int] = {}
        self.overflowed = False
        self.tables: dict[tuple[int, int], _TableInfo] = {}
        #: tables already warned about for a partial row image
        self.partial_tables: set[TableId] = set()
        #: a reselect post-processor completes after images (see row_images.py)
        self.reselect = reselect_configured(self.cfg.raw)
        self.events_seen = 0

    # -- positions ------------------------------------------------------------------------------
    def offset(self, event: int = 0, row: int = 0) -> dict[str, Any]:
        out: dict[str, Any] = {
            "file": self.restart_file,
            "pos": self.restart_pos,
            "event": event,
            "row": row,
            "ts_sec": self.ts_sec,
            "server_id": self.server_id,
            "row_events": event,
        }
        if self.gtids_text:
            out["gtids"] = self.gtids_text
        if self.offset_keys:
            out.update(self.offset_keys)
        return out

    def resume_point(self) -> Resume:
        """Where a new session continues: the open transaction's start, skipping what this
        session already emitted of it."""
        events, rows = self.emitted if self.in_txn else (0, 0)
        if (
            self.in_txn
            and self.resuming_txn
            and (events, rows) < (self.skip_events, self.skip_rows)
        ):
            events, rows = self.skip_events, self.skip_rows
        return Resume(self.restart_file, self.restart_pos, self.gtids_text, events, rows)

    @staticmethod
    def start_of(event: Any) -> int:
        packet = event.packet
        start: int = packet.log_pos - packet.event_size
        return start if start > 0 else 0

    def _emit(self, item: SourceEvent) -> None:
        if self.buffer is not None:
            self.buffer.append(item)
            if len(self.buffer) > self.buffer_size:
                self.metrics.large_transactions += 1
                self.overflowed = True
                pending, self.buffer = self.buffer, None
                for p in pending:
                    self._deliver(p)
            return
        self._deliver(item)

    def _deliver(self, item: SourceEvent) -> None:
        if isinstance(item, RowChange):
            self.emitted = (int(item.offset["event"]), int(item.offset["row"]))
        self.emit_now(item)

    # -- dispatch -------------------------------------------------------------------------------
    def handle(self, event: Any) -> None:
        self.events_seen += 1
        kind = type(event)
        # the decoder's frequent events first, by exact type (no isinstance chain)
        if kind is raw.Rows:
            self.rows(event)
            return
        if kind is raw.MariadbGtid:
            self.begin_gtid(event, event.gtid, standalone=bool(event.flags & _FL_STANDALONE))
            self.txn_parts = event.parts
        elif kind is raw.Xid:
            self.commit(event)
        elif isinstance(event, ev.RowsEvent):
            self.rows(event)
            return
        elif isinstance(event, ev.MariadbGtidEvent):
            self.begin_gtid(event, event.gtid, standalone=bool(event.flags & _FL_STANDALONE))
        elif isinstance(event, ev.GtidEvent):
            self.begin_gtid(event, event.gtid, standalone=True)
        elif isinstance(event, raw.Xid | ev.XidEvent | ev.XAPrepareEvent):
            self.commit(event)
        elif isinstance(event, raw.Query | ev.QueryEvent):
            self.query_event(event)
        elif isinstance(event, raw.Annotate | ev.MariadbAnnotateRowsEvent):
            if self.include_query:
                self.query = event.sql_statement.decode("utf-8", "replace")
        elif isinstance(event, ev.RowsQueryLogEvent):
            if self.include_query:
                self.query = event.query
        elif isinstance(event, ev.RotateEvent):
            self.file = event.next_binlog
            if not self.in_txn and self.txn_gtid is None:
                self.restart_file, self.restart_pos = event.next_binlog, int(event.position)
            self.metrics.binlog_filename = self.file
        elif (
            isinstance(event, ev.HeartbeatLogEvent)
            and not self.in_txn
            and self.txn_gtid is None
            and not self.resuming_txn
        ):
            # idle: lets heartbeats flow and offsets advance past filtered transactions
            self.emit_now(PositionReached(self.offset()))
        self.metrics.binlog_position = event.packet.log_pos or 0

    # -- transactions ---------------------------------------------------------------------------
    def _start_txn(self, event: Any) -> None:
        if self.in_txn:
            # BEGIN without COMMIT/ROLLBACK: emit what we have and start over
            self.metrics.not_well_formed_transactions += 1
            log.warning("transaction at %s:%s has no COMMIT", self.restart_file, self.restart_pos)
            self._flush()
        self.in_txn = True
        self.events_done = 0
        self.emitted = (0, 0)
        self.began = False
        self.ts_sec = int(event.timestamp)
        self.server_id = int(event.packet.server_id)
        self.buffer = [] if self.buffer_size > 0 else None
        self.overflowed = False
        self.savepoints = {}

    def begin_gtid(self, event: Any, gtid: str, *, standalone: bool) -> None:
        if self.in_txn:
            self._start_txn(event)  # counts the malformed one
            self.in_txn = False
        self.restart_file, self.restart_pos = self.file, self.start_of(event)
        self.txn_gtid = gtid
        self.txn_parts = None
        self.txn_id = gtid
        self.ts_sec = int(event.timestamp)
        self.server_id = int(event.packet.server_id)
        self.metrics.is_gtid_mode_enabled = True
        if not standalone:  # MariaDB: the GTID event is the BEGIN
            self._start_txn(event)

    def query_event(self, event: Any) -> None:
        sql = event.query.strip()
        head = sql[:20].upper()
        if head.startswith("BEGIN") or head.startswith("XA START"):
            if self.txn_gtid is None:
                self.restart_file, self.restart_pos = self.file, self.start_of(event)
                self.txn_id = f"file={self.file},pos={self.restart_pos}"
            self._start_txn(event)
            self.thread = int(event.slave_proxy_id)
            return
        if head.startswith("COMMIT") or head.startswith("XA COMMIT") or head.startswith("XA END"):
            if head.startswith("XA END"):
                return
            self.commit(event)
            return
        if head.startswith("ROLLBACK TO") or head.startswith("ROLLBACK WORK TO"):
            self.rollback_to(sql)
            return
        if head.startswith("ROLLBACK") or head.startswith("XA ROLLBACK"):
            self.rollback(event)
            return
        if head.startswith("SAVEPOINT"):
            if self.buffer is not None:
                self.savepoints[_savepoint_name(sql)] = len(self.buffer)
            return
        self.ddl(event, sql)

    def _flush(self) -> None:
        pending, self.buffer = self.buffer, None
        for item in pending or ():
            self._deliver(item)

    def _end(self, event: Any, *, committed: bool) -> None:
        parts = self.txn_parts
        if parts is not None and self.maria_gtids is not None and self.txn_gtid is not None:
            # the decoder's MariaDB GTID: no parsing, and no new text for a one-domain position
            self.gtids_text = self.maria_gtids.add_parts(*parts, self.txn_gtid)
            self.metrics.gtid_set = self.gtids_text
        elif self.txn_gtid is not None and self.gtids is not None:
            try:
                self.gtids.add(self.txn_gtid)
            except ValueError:
                log.warning("ignoring GTID %r of another dialect", self.txn_gtid)
            self.gtids_text = str(self.gtids)
            self.metrics.gtid_set = self.gtids_text
        self.restart_file, self.restart_pos = self.file, int(event.packet.log_pos)
        if self.gate is not None and self.gate.passed(self.gtids, self.file, self.restart_pos):
            self.gate = None  # the newly captured tables are now streamed like the others
            self.offset_keys = self.offset_keys_after_gate
        txn_id = self.txn_id
        self.in_txn = False
        self.txn_gtid = self.txn_id = self.txn_parts = None
        self.began = False
        self.events_done = 0
        self.emitted = (0, 0)
        self.skip_events = self.skip_rows = 0
        self.resuming_txn = False
        self.thread = None
        self.query = None
        offset = self.offset()
        if committed and txn_id is not None:
            # also for transactions with nothing captured: the core throttles position-only
            # ends, and counts committed transactions
            self.emit_now(TransactionEnd(txn_id, self._tx_source(event), offset))
        else:
            self.emit_now(PositionReached(offset))

    def commit(self, event: Any) -> None:
        if not self.in_txn:
            self._end(event, committed=False)
            return
        self._flush()
        self._end(event, committed=True)

    def rollback(self, event: Any) -> None:
        if self.buffer is not None:
            self.metrics.rolled_back_transactions += 1
            log.info(
                "transaction at %s:%s rolled back; not emitted", self.restart_file, self.restart_pos
            )
            self.buffer = None
        elif self.in_txn and self.began:
            log.warning(
                "transaction at %s:%s was rolled back after its changes were emitted; set "
                "binlog.buffer.size to hold transactions until their end",
                self.restart_file,
                self.restart_pos,
            )
        self._end(event, committed=False)

    def rollback_to(self, sql: str) -> None:
        name = _savepoint_name(sql)
        if self.buffer is not None and name in self.savepoints:
            del self.buffer[self.savepoints[name] :]
            self.metrics.rolled_back_transactions += 1
        elif self.overflowed:
            log.warning(
                "ROLLBACK TO %s in a transaction larger than binlog.buffer.size: the "
                "rolled-back changes were already emitted",
                name,
            )

    def _tx_source(self, event: Any) -> dict[str, Any]:
        return self._source(None, None, self.start_of(event), 0)

    def _source(self, db: str | None, table: str | None, pos: int, row: int) -> dict[str, Any]:
        return {
            "ts_ms": self.ts_sec * 1000,
            "snapshot": False,
            "db": db or "",
            "table": table,
            "server_id": self.server_id,
            "gtid": self.txn_gtid,
            "file": self.file,
            "pos": pos,
            "row": row,
            "thread": self.thread,
            "query": self.query,
        }

    # -- DDL ------------------------------------------------------------------------------------
    def ddl(self, event: Any, sql: str) -> None:
        schema_name = event.schema
        db = (
            schema_name.decode("utf-8", "replace")
            if isinstance(schema_name, bytes)
            else (schema_name or None)
        )
        self.ts_sec = int(event.timestamp)
        self.server_id = int(event.packet.server_id)
        standalone = not self.in_txn
        if standalone:
            # the DDL is its own transaction: it takes effect at the position after it
            if self.txn_gtid is not None and self.gtids is not None:
                self.gtids.add(self.txn_gtid)
                self.gtids_text = str(self.gtids)
            self.restart_file, self.restart_pos = self.file, int(event.packet.log_pos)
            position = self.offset()
        else:
            position = self.offset(self.events_done, 0)
        try:
            applied = self.state.schema.apply_ddl(sql, db)
        except ddl.DdlParseError as exc:
            if not self.state.history.skip_unparseable_ddl:
                raise UnparseableDdl(sql, position, str(exc)) from exc
            log.warning(
                "skipping unparseable DDL at %s: %s (%s)",
                describe_position(position),
                sql[:200],
                exc,
            )
            applied = []
        source = self._source(db, None, self.start_of(event), 0)
        source["thread"] = int(event.slave_proxy_id)
        changes = [a for a in applied if not isinstance(a.statement, NotTableDdl | UseDatabase)]
        if changes:
            all_changes = [c for a in changes for c in a.changes]
            self.state.record(position, db, sql, all_changes, self.ctx)
            for a in changes:
                self.state.register_applied(self.ctx, a)
        schema_events = self._schema_events(changes, sql, db, source, position)
        if standalone:
            self.txn_gtid = self.txn_id = self.txn_parts = None
            self.thread = self.query = None
            self.skip_events = self.skip_rows = 0
            self.resuming_txn = False
            self.metrics.gtid_set = self.gtids_text or ""
        for item in schema_events:
            self.emit_now(item)
        if not schema_events and standalone:
            self.emit_now(PositionReached(position))

    def _schema_events(
        self,
        applied: list[Applied],
        sql: str,
        db: str | None,
        source: dict[str, Any],
        offset: dict[str, Any],
    ) -> list[SchemaChange | TableTruncated]:
        """One schema change event per database the statement touches (seed §2.1.3). They
        share the statement's offset, which says the statement was delivered whole: all but
        the last are ``continued``, so the offset is stored only with the last.

        ``TRUNCATE TABLE`` is a truncate event of the table (``op: t``, dropped by the
        default ``skipped.operations=t``), as Debezium 2.x+ emits it. Under
        ``envelope.version=3`` that is all, as in Debezium 3.x; under ``1.2`` the statement
        also goes to the schema change topic, as Debezium 1.2 wrote every DDL there."""
        keep = self.state.database_filter
        debezium_3 = self.state.cfg.get("envelope.version") == "3"
        out: list[SchemaChange] = []
        truncates: list[TableTruncated] = []
        for a in applied:
            if isinstance(a.statement, TruncateTable):
                tid = self.state.schema.known_id(a.statement.name, db)
                truncates.append(
                    TableTruncated([tid], {**source, "db": tid.catalog or ""}, offset, self.txn_id)
                )
                if debezium_3:
                    continue
            if debezium_3 and isinstance(a.statement, DropTables):
                named = [self.state.schema.known_id(n, db) for n in a.statement.names]
                out.extend(debezium3_drops(named, sql, source, offset, keep))
                continue
            if debezium_3:
                a = debezium3_changes(a)
            dbs = sorted({t.catalog or "" for t in a.table_ids}) or [a.database or db or ""]
            if len(dbs) > 1 and isinstance(a.statement, DropTables):
                for d in dbs:
                    if keep(d):
                        mine = [c for c in a.changes if (c.table.id.catalog or "") == d]
                        ids = [c.table.id for c in mine]
                        text = "DROP TABLE " + ", ".join(f"`{d}`.`{t.table}`" for t in ids)
                        out.append(
                            SchemaChange(
                                d, None, text, ids, {**source, "db": d}, offset, changes=mine
                            )
                        )
                continue
            target = dbs[0] if a.table_ids else (a.database or db or "")
            if keep(target):
                out.append(
                    SchemaChange(
                        target,
                        None,
                        sql,
                        a.table_ids,
                        {**source, "db": target},
                        offset,
                        changes=a.changes,
                    )
                )
        # the truncate last: its offset, stored once it is delivered, says the statement's
        # schema change events (if any) were delivered too
        for event in out[: len(out) - 1 + len(truncates)]:
            event.continued = True
        return [*out, *truncates]

    # -- rows -----------------------------------------------------------------------------------
    def rows(self, event: Any) -> None:
        index = self.events_done
        self.events_done += 1
        if index < self.skip_events:
            return
        skip = self.skip_rows if index == self.skip_events and self.resuming_txn else 0
        if type(event) is raw.Rows:
            tid = event.decoder.tid  # one per TABLE_MAP
            if tid is None:
                tid = event.decoder.tid = TableId(event.schema, None, event.table)
        else:
            tid = TableId(event.schema, None, event.table)
        if not self.ctx.is_included(tid) or (
            self.gate is not None
            and self.gate.skip(tid, self.txn_gtid, self.restart_file, self.restart_pos)
        ):
            if self.core_metrics is not None:
                self.core_metrics.streaming.events_filtered += 1
            return
        info = self._table_info(event, tid)
        if info is None:
            return
        images: Callable[[Any, set[int]], tuple[Any, Any]]
        try:
            if isinstance(event, raw.Rows):
                rows: list[Any] = event.images()
                op = _OPS[event.op]
                images = _images_of(op, event.partial)
            else:
                rows = event.rows
                if isinstance(event, ev.WriteRowsEvent):
                    op = Operation.CREATE
                elif isinstance(event, ev.UpdateRowsEvent):
                    op = Operation.UPDATE
                else:
                    op = Operation.DELETE
                images = self._library_images(op, self._fixer(info))
        except Exception as exc:
            self._bad_event(event, exc)
            return
        if not self.began and self.txn_id is not None and not self.resuming_txn:
            self.began = True
            self._emit(TransactionBegin(self.txn_id, self._tx_source(event), self.offset()))
        elif self.resuming_txn:
            self.began = True
        pos = self.start_of(event)
        db, name = tid.catalog, tid.table
        txn_id = self.txn_id
        absent: set[int] = set()
        for i, row in enumerate(rows):
            if i < skip:
                continue
            source = self._source(db, name, pos, i)
            offset = self.offset(index, i + 1)
            before, after = images(row, absent)
            if absent and not self._partial_image_ok(event, tid, info, absent):
                absent.clear()
                continue
            change = RowChange(op, tid, before, after, source, offset, txn_id, bool(absent))
            absent.clear()
            if self.buffer is None:  # _emit → _deliver, without reading the offset back
                self.emitted = (index, i + 1)
                self.emit_now(change)
            else:
                self._emit(change)
        if self.core_metrics is not None:
            streaming = self.core_metrics.streaming
            streaming.ms_behind_source = max(int(time.time() * 1000) - self.ts_sec * 1000, 0)
            streaming.source_event_position = {"file": self.file, "pos": str(pos)}

    def _table_info(self, event: Any, tid: TableId) -> _TableInfo | None:
        table = self.state.schema.table(tid)
        if table is None:
            self._inconsistent(event, tid, "the table is not in the connector's schema")
            return None
        key = (int(event.table_id), id(table))
        info = self.tables.get(key)
        if info is None:
            info = self.tables[key] = _TableInfo(table, {c.name: c.position for c in table.columns})
        if not info.checked:
            columns = event.columns
            if len(columns) != len(table.columns):
                self._inconsistent(
                    event,
                    tid,
                    f"the binlog has {len(columns)} columns, the schema {len(table.columns)}",
                )
                return None
            names = [c.name for c in columns]
            if all(names) and names != table.column_names():
                self._inconsistent(
                    event, tid, f"binlog columns {names} differ from {table.column_names()}"
                )
                return None
            info.checked = True
        return info

    @staticmethod
    def _library_images(
        op: Operation, fix: Callable[[dict[str, Any], dict[str, Any], Any, set[int]], list[Any]]
    ) -> Callable[[Any, set[int]], tuple[Any, Any]]:
        """(before, after) of one of the library's rows, through :meth:`_fixer`."""
        if op is Operation.UPDATE:

            def update(row: Any, absent: set[int]) -> tuple[Any, Any]:
                before = fix(row["before_values"], row["before_none_sources"], None, absent)
                after = fix(row["after_values"], row["after_none_sources"], before, absent)
                return before, after

            return update
        if op is Operation.CREATE:
            return lambda row, absent: (None, fix(row["values"], row["none_sources"], None, absent))
        return lambda row, absent: (fix(row["values"], row["none_sources"], None, absent), None)

    def _fixer(
        self, info: _TableInfo
    ) -> Callable[[dict[str, Any], dict[str, Any], Any, set[int]], list[Any]]:
        """Values in column order, with the decoder's special Nones made explicit; columns
        absent from the image (see row_images.py) become the before image's value or
        UNAVAILABLE, whose positions are added to ``absent``."""
        index = info.index

        def fix(
            values: dict[str, Any], nones: dict[str, Any], before: Any, absent: set[int]
        ) -> list[Any]:
            out = list(values.values())
            for name, why in nones.items():
                if why == "null":
                    continue
                i = index.get(name)
                if i is None:
                    continue
                if why == COLS_BITMAP:
                    if before is not None and before[i] is not UNAVAILABLE:
                        out[i] = before[i]  # not set by the UPDATE: the value it had
                    else:
                        out[i] = UNAVAILABLE
                        absent.add(i)
                elif why == "empty set":
                    out[i] = ""
                elif why in _ZERO_SOURCES:
                    out[i] = ZERO_DATE
                elif why == "same with before values" and before is not None:
                    out[i] = before[i]
            for i, v in enumerate(out):
                if isinstance(v, ev.JsonDiff):
                    out[i] = self._json_diff(before[i] if before is not None else None, v)
                elif type(v) is dt.timedelta and v.days < 0 and v.microseconds:
                    out[i] = negative_time2(v)
            return out

        return fix

    @staticmethod
    def _json_diff(before: Any, diff: Any) -> Any:
        from connectors.mysql.json_values import mysql_json_text

        doc = normalize(before)
        if isinstance(doc, str):
            import json

            doc = json.loads(doc)
        value = normalize(diff.value) if diff.value is not None else None
        path = diff.path.decode() if isinstance(diff.path, bytes) else str(diff.path)
        return mysql_json_text(apply_json_diff(doc, diff.op.name, path, value))

    def _inconsistent(self, event: Any, tid: TableId, why: str) -> None:
        position = self.offset(self.events_done - 1, 0)
        message = (
            f"row event for {tid} at {describe_position(position)} (binlog {self.file}:"
            f"{self.start_of(event)}) does not match the schema: {why}"
        )
        mode = self.schema_mode
        if mode == "fail":
            raise InconsistentSchema(
                message + ". Set inconsistent.schema.handling.mode=warn or skip to skip such "
                "events, or restart with snapshot.mode=schema_only_recovery if the schema "
                "history is incomplete."
            )
        self.metrics.skipped_events += 1
        if mode == "warn":
            log.warning("skipping: %s", message)

    def _partial_image_ok(
        self, event: Any, tid: TableId, info: _TableInfo, absent: set[int]
    ) -> bool:
        """Whether a row whose image lacks the columns ``absent`` can be emitted with the
        placeholder; otherwise refused under the deserialization failure mode."""
        where = f"{self.file}:{self.start_of(event)}"
        why = refusal(tid, [info.table.columns[i] for i in sorted(absent)], where)
        if why is None or self.reselect:
            if tid not in self.partial_tables:
                self.partial_tables.add(tid)
                log.warning(
                    "%s: a row image without every column (binlog_row_image=MINIMAL or NOBLOB "
                    "in the writing session) at %s; %s",
                    tid,
                    where,
                    RESELECTED if self.reselect else PLACEHOLDERS,
                )
            return True
        if self.decode_mode == "fail":
            raise EventDeserializationFailed(why)
        self.metrics.skipped_events += 1
        if self.decode_mode == "warn":
            log.warning("skipping: %s", why)
        return False

    def _bad_event(self, event: Any, exc: Exception) -> None:
        position = self.offset(self.events_done - 1, 0)
        message = (
            f"cannot decode {type(event).__name__} at {self.file}:{self.start_of(event)} "
            f"(offset {describe_position(position)}): {exc!r}"
        )
        if self.decode_mode == "fail":
            raise EventDeserializationFailed(message) from exc
        self.metrics.skipped_events += 1
        if self.decode_mode == "warn":
            log.warning("skipping: %s", message)


_OPS = {"c": Operation.CREATE, "u": Operation.UPDATE, "d": Operation.DELETE}


def _absent(values: list[Any], before: Any, absent: set[int]) -> list[Any]:
    """Columns the image lacks (``rows_decoder.ABSENT``) as :meth:`BinlogProcessor._fixer`
    makes them: the before image's value, else UNAVAILABLE (position added to ``absent``)."""
    for i, v in enumerate(values):
        if v is ABSENT:
            if before is not None and before[i] is not UNAVAILABLE:
                values[i] = before[i]
            else:
                values[i] = UNAVAILABLE
                absent.add(i)
    return values


def _images_of(op: Operation, partial: bool) -> Callable[[Any, set[int]], tuple[Any, Any]]:
    """(before, after) of one of the decoder's rows (rows_decoder.read_rows); ``partial``:
    whether the event's images may lack columns."""
    if not partial:
        if op is Operation.UPDATE:
            return lambda row, absent: row
        if op is Operation.CREATE:
            return lambda row, absent: (None, row[0])
        return lambda row, absent: (row[0], None)
    if op is Operation.UPDATE:

        def update(row: Any, absent: set[int]) -> tuple[Any, Any]:
            before, after = row
            if ABSENT in before:
                before = _absent(before, None, absent)
            if ABSENT in after:
                after = _absent(after, before, absent)
            return before, after

        return update

    def single(row: Any, absent: set[int]) -> tuple[Any, Any]:
        values = row[0]
        if ABSENT in values:
            values = _absent(values, None, absent)
        return (None, values) if op is Operation.CREATE else (values, None)

    return single


def _savepoint_name(sql: str) -> str:
    return sql.split()[-1].strip("`").lower()


# -- Debezium 3.x's schema change events ------------------------------------------------------

_DROP_PREFIX = re.compile(
    r"\s*DROP\s+(?:TEMPORARY\s+)?TABLES?\s+(?:IF\s+EXISTS\s+)?", re.IGNORECASE
)
_DROP_TYPE = re.compile(r"\b(RESTRICT|CASCADE)\s*(?:/\*.*\*/\s*)?;?\s*$", re.IGNORECASE)


def debezium3_drops(
    named: list[TableId],
    sql: str,
    source: dict[str, Any],
    offset: dict[str, Any],
    keep: Callable[[str], bool],
) -> list[SchemaChange]:
    """``DROP TABLE a, b`` as Debezium 3.x's binlog connectors report it: one event per
    table the statement names (also one ``IF EXISTS`` found missing), its DDL the
    statement's own opening followed by the table's qualified name (``DROP TABLE IF EXISTS
    `db`.`a```), without what the server appended (MariaDB's ``/* generated by server */``)."""
    match = _DROP_PREFIX.match(sql)
    prefix = sql[: match.end()] if match else "DROP TABLE "
    kind = _DROP_TYPE.search(sql)
    suffix = f" {kind.group(1)}" if kind else ""
    out = []
    for tid in named:
        database = tid.catalog or ""
        if not keep(database):
            continue
        text = f"{prefix}`{database}`.`{tid.table}`{suffix}"
        change = TableChange(TableChangeType.DROP, Table(tid, ()))
        out.append(
            SchemaChange(database, None, text, [tid], {**source, "db": database}, offset, [change])
        )
    return out


def debezium3_changes(a: Applied) -> Applied:
    """A renamed table as Debezium 3.x reports it: an ALTER of the table under its new name
    (tidemark's history, and its 1.2 events, keep a DROP of the old name and a CREATE). And
    ``CREATE INDEX``/``DROP INDEX`` with no table changes, as Debezium 3.x writes them (the
    history keeps the table after the index change)."""
    if isinstance(a.statement, CreateIndex | DropIndexOn):
        return replace(a, changes=[])
    if not isinstance(a.statement, RenameTables | AlterTable):
        return a
    types = [c.type for c in a.changes]
    if TableChangeType.DROP not in types or TableChangeType.CREATE not in types:
        return a
    changes = [
        TableChange(TableChangeType.ALTER, c.table)
        for c in a.changes
        if c.type is not TableChangeType.DROP
    ]
    return replace(a, changes=changes)
