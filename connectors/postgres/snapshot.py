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
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from psycopg import sql

from cdc.config import Config
from cdc.snapshot.driver import ResumePoint, TableScan, one_by_one, run_snapshot
from cdc.snapshot.driver import select_override as _select_override
from cdc.spi import SnapshotSource, SourceContext, Table, TableId
from connectors.postgres import connection as pgconn
from connectors.postgres.identity import check_identities
from connectors.postgres.offsets import WalPosition, handover_offset
from connectors.postgres.pgoutput import lsn_to_str, str_to_lsn
from connectors.postgres.publication import check_included, sync_publication
from connectors.postgres.schema import PgSchema
from connectors.postgres.setup import (
    check_slot,
    temporary_slot_name,
    wait_for_inactive_slot,
)
from connectors.postgres.snapshot_chunks import ParallelReader, split_table
from connectors.postgres.snapshot_rows import text_batches
from connectors.postgres.types import Modes, TypeRegistry

log = logging.getLogger("tidemark.postgres.snapshot")


def select_override(cfg: Config, table_id: TableId) -> str | None:
    """``snapshot.select.statement.overrides`` names tables as ``<schema>.<table>``."""
    return _select_override(cfg, f"{table_id.schema}.{table_id.table}")


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
            check_included(cfg, [t for t, _ in tables], [t for t, _ in every], ctx.metrics.notices)
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
                wait_for_inactive_slot(meta, cfg, ctx.stop_event)
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
            kept_from = (
                str_to_lsn(existing.confirmed_flush_lsn)
                if existing is not None and existing.confirmed_flush_lsn
                else None
            )
            # Only a kept slot holds every change since the interrupted attempt's position,
            # which a resumed snapshot needs replayed on top of the rows it reads anew.
            resume = ResumePoint.of(previous_offset) if existing is not None else None
            return self._snapshot(
                ctx,
                meta,
                schema,
                tables,
                include_data,
                existing is not None,
                kept_from=kept_from,
                resume=resume,
            )
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
        wait_for_inactive_slot(meta, self.cfg, ctx.stop_event)
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
        kept_from: int | None = None,
        resume: ResumePoint | None = None,
    ) -> dict[str, Any]:
        steps = _Steps(self.cfg, ctx, schema, tables, include_data, keep_slot, kept_from)
        return run_snapshot(
            ctx,
            steps,
            include_data=include_data,
            handover=handover,
            resume=resume,
            chunk_rows=int(self.cfg["snapshot.resumable.chunk.size"]),
            # Runs before streaming, never inside its batched block.
            batched=True,
        )


class _Steps:
    """PostgreSQL's snapshot steps: read ``tables`` inside an exported snapshot, the new
    slot's when there is none, else a temporary slot's, streaming later from the kept slot
    (which holds every change since an earlier attempt's position). The replication
    connection stays open until every reader imported the snapshot (a temporary slot lives
    as long as it)."""

    def __init__(
        self,
        cfg: Config,
        ctx: SourceContext,
        schema: PgSchema,
        tables: list[tuple[TableId, int]],
        include_data: bool,
        keep_slot: bool,
        kept_from: int | None = None,
    ) -> None:
        self.cfg, self.ctx, self.schema = cfg, ctx, schema
        self.table_oids = tables
        self.include_data = include_data
        self.keep_slot = keep_slot
        #: the kept slot's confirmed position: it holds every change after it, and with no
        #: stored offsets (deleted, or never stored) it is the only record of where an earlier
        #: run's events end, so the handover never starts later than it
        self.kept_from = kept_from
        self.repl: Any = None
        self.readers: list[Any] = []
        self.lsn = 0
        self.loaded: list[Table] = []

    def prepare(self) -> None:
        """Create the slot (or a temporary one) exporting a snapshot, and import it into every
        reader (``snapshot.max.threads``)."""
        cfg, keep_slot = self.cfg, self.keep_slot
        self.repl = repl = pgconn.connect_replication(cfg)
        snap_slot = temporary_slot_name(cfg["slot.name"]) if keep_slot else cfg["slot.name"]
        row = repl.execute(
            sql.SQL("CREATE_REPLICATION_SLOT {} {} LOGICAL pgoutput (SNAPSHOT 'export')").format(
                sql.Identifier(snap_slot), sql.SQL("TEMPORARY" if keep_slot else "")
            )
        ).fetchone()
        assert row is not None
        consistent_point, snapshot_name = str(row[1]), str(row[2])
        self.lsn = str_to_lsn(consistent_point)
        log.info(
            "created %sslot %s at %s, snapshot %s",
            "temporary " if keep_slot else "",
            snap_slot,
            consistent_point,
            snapshot_name,
        )
        threads = int(cfg["snapshot.max.threads"]) if self.include_data else 1
        for _ in range(threads):
            self.readers.append(pgconn.connect(cfg, autocommit=False))
            _import_snapshot(self.readers[-1], snapshot_name)
        # Every reader holds the exported snapshot now; the replication connection (and with
        # it a temporary slot) may go.
        repl.close()

    def tables(self) -> Sequence[TableId]:
        return [tid for tid, _ in self.table_oids]

    def lock(self) -> None:
        """ACCESS SHARE blocks only DDL (not writes), so a table cannot change shape while it
        is read; bounded by ``snapshot.lock.timeout.ms``."""
        cfg, conn = self.cfg, self.readers[0]
        if not self.include_data or cfg["snapshot.mode"] == "exported" or not self.table_oids:
            return
        conn.execute(
            sql.SQL("SET LOCAL lock_timeout = {}").format(
                sql.Literal(f"{int(cfg['snapshot.lock.timeout.ms'])}ms")
            )
        )
        for tid, _ in self.table_oids:
            conn.execute(
                sql.SQL("LOCK TABLE {} IN ACCESS SHARE MODE").format(
                    sql.Identifier(tid.schema or "public", tid.table)
                )
            )

    def position(self) -> dict[str, Any]:
        # Streaming resumes after the consistent point; a transaction committing exactly at
        # it is still streamed (seq 0 of it is "done", which no event has). With a kept slot,
        # from its confirmed position instead when that is earlier: replaying converges,
        # skipping its backlog would lose the deletes in it.
        lsn = self.lsn
        if self.kept_from is not None and 0 < self.kept_from < lsn:
            lsn = self.kept_from
        return handover_offset({"lsn": lsn, "ts_usec": time.time_ns() // 1000})

    def structure(self) -> None:
        self.loaded = [self.schema.load(tid, oid) for tid, oid in self.table_oids]
        for table in self.loaded:
            self.ctx.register_table(table)

    def handover(self, resume: dict[str, Any]) -> dict[str, Any]:
        handover = handover_offset(resume)
        start = WalPosition.from_offset(handover)
        if start.lsn_commit < self.lsn and not self.keep_slot:
            log.warning(
                "an earlier snapshot attempt began at LSN %s but its slot %s is gone: "
                "rows it emitted and deleted since then keep their last event downstream",
                lsn_to_str(start.lsn_commit),
                self.cfg["slot.name"],
            )
        return handover

    def scans(self) -> list[TableScan]:
        conn = self.readers[0]
        # Debezium reports the snapshot transaction's id (txid_current, as its connector does).
        xid_row = conn.execute("SELECT txid_current()").fetchone()
        xid = xid_row[0] if xid_row else None
        return [self._scan(conn, table, xid) for table in self.loaded]

    def read(self, scans: list[TableScan]) -> Iterator[tuple[TableScan, Sequence[Any] | None]]:
        readers = self.readers
        if len(readers) == 1:
            conn = readers[0]
            yield from one_by_one(
                scans,
                self.ctx.stop_event.is_set,
                lambda s: text_batches(conn, _query(s), s.plan.ncols),
            )
            return
        chunks = [
            c
            for i, s in enumerate(scans)
            for c in split_table(
                i, s.plan.query, s.plan.ncols, s.plan.pages, len(readers), table=s.plan.splittable
            )
        ]
        remaining = [0] * len(scans)
        for c in chunks:
            remaining[c.table_index] += 1
        log.info(
            "snapshot of %d table(s) in %d chunk(s) with %d readers",
            len(scans),
            len(chunks),
            len(readers),
        )
        reader = ParallelReader(readers, chunks)
        for index, rows in reader.batches(self.ctx.stop_event.is_set):
            if rows is None:
                remaining[index] -= 1
                if remaining[index] == 0:
                    yield scans[index], None
                continue
            yield scans[index], rows

    def release(self, completed: bool) -> None:
        for conn in self.readers:
            conn.close()
        if self.repl is not None and not self.repl.closed:
            self.repl.close()

    def _scan(self, conn: Any, table: Table, xid: Any) -> TableScan:
        tid, lsn = table.id, self.lsn
        info = conn.execute(
            "SELECT reltuples::bigint, pg_relation_size(oid) / current_setting('block_size')::int,"
            " relkind FROM pg_class WHERE oid = %s",
            (table.extra["oid"],),
        ).fetchone()
        override = select_override(self.cfg, tid)
        ident = sql.Identifier(tid.schema or "public", tid.table)
        query: sql.Composable = (
            sql.SQL(override) if override else sql.SQL("SELECT * FROM {}").format(ident)
        )
        key = [table.column_names().index(k) for k in table.primary_key]
        in_key_order = (
            bool(key) and not override and self.cfg["snapshot.resumable"] and len(self.readers) == 1
        )
        if in_key_order:
            query = sql.SQL("{} ORDER BY {}").format(
                query, sql.SQL(", ").join(sql.Identifier(k) for k in table.primary_key)
            )
        ts_ms = time.time_ns() // 1_000_000
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
        return TableScan(
            table=table,
            source=source,
            offset={"lsn": lsn, "snapshot": True, "txId": xid, "ts_usec": ts_ms * 1000},
            estimate=max(int(info[0]), 0) if info else None,
            plan=_Plan(
                query=query,
                ncols=len(table.columns),
                pages=int(info[1]) if info else 0,
                splittable=ident if not override and info and info[2] == "r" else None,
                key=key if in_key_order else None,
                ident=ident,
            ),
            key_of=_key_reader(key) if in_key_order else None,
        )


class _Plan(NamedTuple):
    """How one table is read: its query, and whether it can be split into page ranges."""

    query: sql.Composable
    ncols: int
    pages: int
    splittable: sql.Identifier | None
    #: the primary key's column positions when read in key order
    key: list[int] | None = None
    ident: sql.Identifier | None = None


def _key_reader(positions: list[int]) -> Callable[[Sequence[Any]], list[Any]]:
    """A row's key: its primary key values as COPY gave them (text), JSON as they are."""
    return lambda row: [row[i] for i in positions]


def _query(scan: TableScan) -> sql.Composable:
    """The table's query, or, when a snapshot resumes inside it, the rows after the key its
    offset names (``(k1, k2) > ('v1', 'v2')``: the text literals take the key columns'
    types, and the row comparison follows the primary key's index)."""
    plan: _Plan = scan.plan
    if scan.after is None or plan.key is None or plan.ident is None:
        return plan.query
    names = [scan.table.columns[i].name for i in plan.key]
    cols = sql.SQL(", ").join(sql.Identifier(n) for n in names)
    return sql.SQL("SELECT * FROM {} WHERE ({}) > ({}) ORDER BY {}").format(
        plan.ident,
        cols,
        sql.SQL(", ").join(sql.Literal(v) for v in scan.after),
        cols,
    )


def _import_snapshot(conn: Any, snapshot_name: str) -> None:
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot_name)))
