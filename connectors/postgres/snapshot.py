"""Initial snapshot that hands over to streaming without losing or doubling a change.

Every snapshot reads inside the snapshot that PostgreSQL exports when the replication slot
is created, and streaming starts at that slot's consistent point: a change committed before
it is in the snapshot, one committed after it is in the stream, none is in both or neither.
This is the seed's ``exported`` mode, used for every mode (Debezium 1.2's other modes read a
fresh snapshot and can lose changes at the handover, DBZ-2337).

A slot that already exists is never dropped: it holds every change since the position an
earlier attempt (an interrupted snapshot, or the streaming a re-snapshot replaces) may have
emitted events from, and the topic holds those events. Re-creating the slot would stream only
from the new snapshot's position, so a row the earlier attempt emitted and that was deleted
in between would stay alive downstream forever. Instead the snapshot is read from the exported
snapshot of a TEMPORARY slot, and streaming hands over from the earlier position on the kept
slot (``SourceContext.snapshot_starting`` records that position durably before the first
row): replaying older changes on top of a newer snapshot converges to the table.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from psycopg import sql

from cdc.config import Config
from cdc.errors import FatalError
from cdc.spi import Operation, RowChange, SnapshotSource, SourceContext, Table, TableId
from connectors.postgres import connection as pgconn
from connectors.postgres.identity import check_identities
from connectors.postgres.offsets import handover_offset
from connectors.postgres.pgoutput import lsn_to_str, str_to_lsn
from connectors.postgres.publication import check_included, sync_publication
from connectors.postgres.schema import PgSchema
from connectors.postgres.setup import (
    check_slot,
    temporary_slot_name,
    wait_for_inactive_slot,
)
from connectors.postgres.snapshot_chunks import ParallelReader, split_table
from connectors.postgres.types import Modes, TypeRegistry

log = logging.getLogger("tidemark.postgres.snapshot")

PROGRESS_EVERY_ROWS = 10_000


def select_override(cfg: Config, table_id: TableId) -> str | None:
    """``snapshot.select.statement.overrides`` lists tables; the statement for each is in
    ``snapshot.select.statement.overrides.<schema>.<table>``."""
    listed = {t.strip() for t in cfg["snapshot.select.statement.overrides"]}
    name = f"{table_id.schema}.{table_id.table}"
    if name not in listed:
        return None
    stmt = cfg.raw.get(f"snapshot.select.statement.overrides.{name}")
    if not stmt:
        raise FatalError(
            f"snapshot.select.statement.overrides lists {name} but "
            f"snapshot.select.statement.overrides.{name} is not set"
        )
    return str(stmt).rstrip(";")


class PostgresSnapshot(SnapshotSource):
    def __init__(
        self,
        cfg: Config,
        modes: Modes,
        registry: TypeRegistry,
        *,
        only_tables: list[TableId] | None = None,
    ) -> None:
        self.cfg = cfg
        self.modes = modes
        self.registry = registry
        #: snapshot just these newly published tables, then resume the stored offset
        self.only_tables = only_tables

    def execute(
        self, ctx: SourceContext, previous_offset: Mapping[str, Any] | None, include_data: bool
    ) -> dict[str, Any]:
        cfg = self.cfg
        dbname = cfg["database.dbname"]
        slot = cfg["slot.name"]
        meta = pgconn.connect(cfg)
        try:
            schema = PgSchema(meta, dbname, self.registry)
            every = pgconn.list_tables(meta, dbname)
            tables = [(tid, oid) for tid, oid in every if ctx.is_included(tid)]
            check_included(cfg, [t for t, _ in tables], [t for t, _ in every])
            check_identities(meta, cfg, tables)
            existing = pgconn.slot_info(meta, slot)
            if self.only_tables and previous_offset is not None and existing is not None:
                return self._new_tables(ctx, meta, schema, tables, previous_offset)
            sync_publication(meta, cfg, [t for t, _ in tables])
            if existing is not None and not include_data:
                # Structure only (no_data / schema_only): the slot's backlog is the data
                # still to stream, so keep the slot and stream from where it is.
                for tid, oid in tables:
                    ctx.register_table(schema.load(tid, oid))
                return handover_offset({"lsn": 0, "lsn_commit": 0, "complete": True})
            if existing is not None:
                wait_for_inactive_slot(meta, cfg)
                if existing.wal_status == "lost":
                    # Its changes are gone already; a new slot starts at the new snapshot.
                    log.warning(
                        "slot %s was invalidated (wal_status lost): re-creating it; rows "
                        "deleted while it was lost may keep their last event downstream",
                        slot,
                    )
                    pgconn.drop_slot(meta, slot)
                    existing = None
                else:
                    check_slot(existing, cfg)
            return self._snapshot(ctx, meta, schema, tables, include_data, existing is not None)
        finally:
            meta.close()

    def _new_tables(
        self,
        ctx: SourceContext,
        meta: Any,
        schema: PgSchema,
        tables: list[tuple[TableId, int]],
        previous_offset: Mapping[str, Any],
    ) -> dict[str, Any]:
        """The publication gains tables (a changed include list): their changes before the
        ``ALTER PUBLICATION`` were never published, so they are read from a temporary slot's
        exported snapshot taken after it, and streaming resumes the stored offset on the kept
        slot. The restart position is recorded before the publication changes: if this is
        interrupted, the next start re-snapshots every table (it cannot tell which were new)
        and still resumes from the stored offset."""
        wait_for_inactive_slot(meta, self.cfg)
        handover = handover_offset(ctx.snapshot_starting(handover_offset(dict(previous_offset))))
        added = sync_publication(meta, self.cfg, [t for t, _ in tables])
        new = {(t.schema, t.table) for t in added}
        log.info("snapshot of the newly published table(s): %s", ", ".join(map(str, added)))
        only = [(tid, oid) for tid, oid in tables if (tid.schema, tid.table) in new]
        return self._snapshot(ctx, meta, schema, only, True, True, handover)

    def _snapshot(
        self,
        ctx: SourceContext,
        meta: Any,
        schema: PgSchema,
        tables: list[tuple[TableId, int]],
        include_data: bool,
        keep_slot: bool,
        handover: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Read ``tables`` inside an exported snapshot: the new slot's when there is none, else
        a temporary slot's, streaming later from the kept slot (which holds every change
        since an earlier attempt's position). The replication connection stays open until
        every reader imported the snapshot (a temporary slot lives as long as it)."""
        cfg = self.cfg
        slot = cfg["slot.name"]
        repl = pgconn.connect_replication(cfg)
        try:
            snap_slot = temporary_slot_name(slot) if keep_slot else slot
            row = repl.execute(
                sql.SQL(
                    "CREATE_REPLICATION_SLOT {} {} LOGICAL pgoutput (SNAPSHOT 'export')"
                ).format(sql.Identifier(snap_slot), sql.SQL("TEMPORARY" if keep_slot else ""))
            ).fetchone()
            assert row is not None
            consistent_point, snapshot_name = str(row[1]), str(row[2])
            lsn = str_to_lsn(consistent_point)
            log.info(
                "created %sslot %s at %s, snapshot %s",
                "temporary " if keep_slot else "",
                snap_slot,
                consistent_point,
                snapshot_name,
            )
            # Streaming resumes after the consistent point; a transaction committing exactly
            # at it is still streamed (seq 0 of it is "done", which no event has).
            position = handover_offset({"lsn": lsn, "ts_usec": time.time_ns() // 1000})
            # Recorded durably before the first row; an earlier attempt's position comes back
            # when there is one, and streaming must start there (its events are downstream).
            if handover is None:
                handover = (
                    handover_offset(ctx.snapshot_starting(position)) if include_data else position
                )
            if handover["lsn_commit"] < lsn and not keep_slot:
                log.warning(
                    "an earlier snapshot attempt began at LSN %s but its slot %s is gone: "
                    "rows it emitted and deleted since then keep their last event downstream",
                    lsn_to_str(handover["lsn_commit"]),
                    slot,
                )
            threads = int(cfg["snapshot.max.threads"]) if include_data else 1
            readers: list[Any] = []
            try:
                for _ in range(threads):
                    readers.append(pgconn.connect(cfg, autocommit=False))
                    _import_snapshot(readers[-1], snapshot_name)
                # Every reader holds the exported snapshot now; the replication connection
                # (and with it a temporary slot) may go.
                repl.close()
                loaded = [schema.load(tid, oid) for tid, oid in tables]
                for table in loaded:
                    ctx.register_table(table)
                if include_data:
                    self._lock(readers[0], loaded)
                    self._read_all(ctx, readers, loaded, lsn)
                readers[0].rollback()
            finally:
                for conn in readers:
                    conn.close()
        finally:
            if not repl.closed:
                repl.close()
        return handover

    def _lock(self, conn: Any, tables: list[Table]) -> None:
        """ACCESS SHARE blocks only DDL (not writes), so a table cannot change shape while it
        is read; bounded by ``snapshot.lock.timeout.ms``."""
        if self.cfg["snapshot.mode"] == "exported" or not tables:
            return
        conn.execute(
            sql.SQL("SET LOCAL lock_timeout = {}").format(
                sql.Literal(f"{int(self.cfg['snapshot.lock.timeout.ms'])}ms")
            )
        )
        for t in tables:
            conn.execute(
                sql.SQL("LOCK TABLE {} IN ACCESS SHARE MODE").format(
                    sql.Identifier(t.id.schema or "public", t.id.table)
                )
            )

    def _read_all(
        self, ctx: SourceContext, readers: list[Any], tables: list[Table], lsn: int
    ) -> None:
        conn = readers[0]
        # Debezium reports the snapshot transaction's id (txid_current, as its connector does).
        xid_row = conn.execute("SELECT txid_current()").fetchone()
        xid = xid_row[0] if xid_row else None
        plans = [self._plan(conn, table, lsn, xid) for table in tables]
        ctx.snapshot_started([t.id for t in tables])
        if len(readers) == 1:
            for n, plan in enumerate(plans, 1):
                if ctx.stop_event.is_set():
                    raise InterruptedError("snapshot interrupted by stop")
                log.info(
                    "snapshot table %d/%d %s (about %s rows)", n, len(plans), plan.id, plan.estimate
                )
                for row in pgconn.copy_rows(conn, plan.query, plan.ncols):
                    plan.emit_row(ctx, row)
                plan.completed(ctx)
            return
        chunks = [
            c
            for i, plan in enumerate(plans)
            for c in split_table(
                i, plan.query, plan.ncols, plan.pages, len(readers), table=plan.splittable
            )
        ]
        remaining = [0] * len(plans)
        for c in chunks:
            remaining[c.table_index] += 1
        log.info(
            "snapshot of %d table(s) in %d chunk(s) with %d readers",
            len(plans),
            len(chunks),
            len(readers),
        )
        reader = ParallelReader(readers, chunks)
        for index, rows in reader.batches(ctx.stop_event.is_set):
            plan = plans[index]
            if rows is None:
                remaining[index] -= 1
                if remaining[index] == 0:
                    plan.completed(ctx)
                continue
            for row in rows:
                plan.emit_row(ctx, row)

    def _plan(self, conn: Any, table: Table, lsn: int, xid: Any) -> _TablePlan:
        tid = table.id
        info = conn.execute(
            "SELECT reltuples::bigint, pg_relation_size(oid) / current_setting('block_size')::int,"
            " relkind FROM pg_class WHERE oid = %s",
            (table.extra["oid"],),
        ).fetchone()
        estimate = max(int(info[0]), 0) if info else None
        override = select_override(self.cfg, tid)
        ident = sql.Identifier(tid.schema or "public", tid.table)
        query: sql.Composable = (
            sql.SQL(override) if override else sql.SQL("SELECT * FROM {}").format(ident)
        )
        ts_ms = time.time_ns() // 1_000_000
        offset = {"lsn": lsn, "snapshot": True, "txId": xid, "ts_usec": ts_ms * 1000}
        source = {
            "ts_ms": ts_ms,
            "snapshot": True,
            "db": self.cfg["database.dbname"],
            "schema": tid.schema,
            "table": tid.table,
            "txId": xid,
            "lsn": lsn,
            "xmin": None,
        }
        return _TablePlan(
            id=tid,
            query=query,
            ncols=len(table.columns),
            estimate=estimate,
            pages=int(info[1]) if info else 0,
            splittable=ident if not override and info and info[2] == "r" else None,
            source=source,
            offset=offset,
        )

    @staticmethod
    def _log_progress(tid: TableId, rows: int, estimate: int | None, t0: float) -> None:
        elapsed = time.monotonic() - t0
        rate = rows / elapsed if elapsed > 0 else 0.0
        if estimate and rate and estimate > rows:
            eta = (estimate - rows) / rate
            log.info(
                "snapshot %s: %d/%d rows (%.0f%%), %.0f rows/s, ETA %.0f s",
                tid,
                rows,
                estimate,
                100 * rows / estimate,
                rate,
                eta,
            )
        else:
            log.info("snapshot %s: %d rows, %.0f rows/s", tid, rows, rate)


@dataclass
class _TablePlan:
    """One table's snapshot: its query, the source block its events carry, and progress."""

    id: TableId
    query: sql.Composable
    ncols: int
    estimate: int | None
    pages: int
    splittable: sql.Identifier | None
    source: dict[str, Any]
    offset: dict[str, Any]
    rows: int = 0
    t0: float = field(default_factory=time.monotonic)

    def emit_row(self, ctx: SourceContext, row: tuple[Any, ...]) -> None:
        ctx.emit(RowChange(Operation.READ, self.id, None, row, self.source, self.offset))
        self.rows += 1
        if self.rows % PROGRESS_EVERY_ROWS == 0:
            ctx.snapshot_progress(self.id, self.rows, self.estimate)
            if ctx.stop_event.is_set():
                raise InterruptedError("snapshot interrupted by stop")
            PostgresSnapshot._log_progress(self.id, self.rows, self.estimate, self.t0)

    def completed(self, ctx: SourceContext) -> None:
        ctx.snapshot_table_completed(self.id, self.rows)
        log.info(
            "snapshot of %s done: %d rows in %.1f s", self.id, self.rows, time.monotonic() - self.t0
        )


def _import_snapshot(conn: Any, snapshot_name: str) -> None:
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot_name)))
