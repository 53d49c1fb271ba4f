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
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cdc.config import Config
from cdc.snapshot.driver import Row, TableScan, one_by_one, run_snapshot, select_override
from cdc.spi import SnapshotSource, SourceContext, Table, TableId
from connectors.sqlserver.config import database_name
from connectors.sqlserver.connection import connect, dialect_of
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


class SqlServerSnapshotSteps:
    def __init__(self, cfg: Config, ctx: SourceContext, include_data: bool) -> None:
        self.cfg = cfg
        self.ctx = ctx
        self.include_data = include_data
        self.dialect = dialect_of(cfg)
        self.database = database_name(cfg)
        self.mode = cfg["snapshot.isolation.mode"]
        self.catalog_conn: Any = None
        self.conn: Any = None
        self.catalog: Catalog | None = None
        self.captured: dict[TableId, CaptureInstance] = {}
        self.structures: dict[TableId, Table] = {}
        self.pos = SqlServerPosition(None)
        self.registered: dict[TableId, str] = {}

    def prepare(self) -> None:
        self.catalog_conn = connect(self.cfg)
        self.catalog = Catalog(self.catalog_conn, self.dialect, self.database)
        self.catalog.check_cdc_enabled()
        self.conn = connect(self.cfg, autocommit=False)

    def tables(self) -> Sequence[TableId]:
        assert self.catalog is not None
        by_table = current_instances(self.catalog.instances(), self.ctx.is_included, self.database)
        # the newest instance describes the table as it is now
        self.captured = {tid: insts[-1] for tid, insts in by_table.items()}
        check_captured(self.catalog, self.ctx.is_included, explicit_tables(self.cfg), self.captured)
        return sorted(self.captured)

    def lock(self) -> None:
        cur = self.conn.cursor()
        cur.execute(self.dialect.set_isolation(self.mode))
        if self.mode == "exclusive":
            for tid in sorted(self.captured):
                cur.execute(self.dialect.lock_exclusive(tid.schema or "dbo", tid.table))
                if cur.description:
                    cur.fetchall()
        cur.close()

    def position(self) -> dict[str, Any]:
        cur = self.conn.cursor()
        cur.execute(self.dialect.max_lsn())
        row = cur.fetchone()
        cur.close()
        self.pos = SqlServerPosition(Lsn.of(row[0]) if row else None)
        log.info("snapshot consistent with commit LSN %s", self.pos.commit_lsn)
        return self.pos.to_offset()

    def structure(self) -> None:
        assert self.catalog is not None
        for tid, inst in sorted(self.captured.items()):
            table = self.catalog.table(inst)
            self.structures[tid] = table
            self.ctx.register_table(table)
            self.registered[tid] = inst.name

    def handover(self, resume: dict[str, Any]) -> dict[str, Any]:
        """Stream from ``resume`` (an earlier attempt's position) while the change tables
        still hold it; else from this snapshot's own position, with a warning: deletes made
        between the two may be missing downstream."""
        assert self.catalog is not None
        if resume == self.pos.to_offset():
            return resume
        lost = position_lost(
            self.catalog, SqlServerPosition.from_offset(resume), self.ctx.is_included
        )
        if lost is None:
            return resume
        log.warning(
            "streaming starts at this snapshot's position %s, not at the earlier %s: %s "
            "Rows deleted in between may still be present downstream.",
            self.pos.commit_lsn,
            resume.get("commit_lsn"),
            lost,
        )
        return self.pos.to_offset()

    def scans(self) -> list[TableScan]:
        ts = int(time.time() * 1000)
        commit = str(self.pos.commit_lsn) if self.pos.commit_lsn else None
        out = []
        for tid, table in sorted(self.structures.items()):
            source = {
                "ts_ms": ts,
                "snapshot": True,
                "db": self.database,
                "schema": tid.schema,
                "table": tid.table,
                "change_lsn": None,
                "commit_lsn": commit,
                "event_serial_no": None,
            }
            offset = {**self.pos.to_offset(), "snapshot": True}
            # snapshot.select.statement.overrides.<schema.table>: the user's SELECT, giving
            # the captured columns in the table's order
            sql = select_override(self.cfg, f"{tid.schema}.{tid.table}")
            sql = sql or self.dialect.snapshot_select(
                tid.schema or "dbo", tid.table, table.column_names()
            )
            out.append(TableScan(table, source, offset, None, plan=sql))
        return out

    def read(self, scans: list[TableScan]) -> Iterator[tuple[TableScan, Sequence[Row] | None]]:
        return one_by_one(scans, self.ctx.stop_event.is_set, self._rows)

    def _rows(self, scan: TableScan) -> Iterator[Sequence[Row]]:
        size = int(self.cfg["snapshot.fetch.size"])
        cur = self.conn.cursor()
        try:
            cur.execute(scan.plan)
            while batch := cur.fetchmany(size):
                yield [tuple(r) for r in batch]
        finally:
            cur.close()

    def release(self, completed: bool) -> None:
        for conn, finish in ((self.conn, completed), (self.catalog_conn, False)):
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
        self.conn = self.catalog_conn = None


class SqlServerSnapshot(SnapshotSource):
    def __init__(self, cfg: Config, registered: dict[TableId, str]) -> None:
        self.cfg = cfg
        #: shared with the streaming source: the tables the core has structures for
        self.registered = registered

    def execute(
        self, ctx: SourceContext, previous_offset: Mapping[str, Any] | None, include_data: bool
    ) -> dict[str, Any]:
        steps = SqlServerSnapshotSteps(self.cfg, ctx, include_data)
        offset = run_snapshot(ctx, steps, include_data=include_data)
        self.registered.update(steps.registered)
        return offset
