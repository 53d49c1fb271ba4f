"""The snapshot: every captured collection copied as ``op=r`` events, consistent with a
position read *before* the copy (a change stream's resume token, or the newest oplog entry),
so a write made during the copy is both possibly in the copy and streamed afterwards: replayed
on top, it converges; nothing is lost. Collections are read in parallel with
``snapshot.max.threads``."""

from __future__ import annotations

import logging
import queue
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cdc.snapshot.driver import Row, TableScan, in_batches, one_by_one, run_snapshot
from cdc.spi import Operation, SnapshotSource, SourceContext, TableId
from connectors.mongodb.connection import Client
from connectors.mongodb.events import Change, Shapes
from connectors.mongodb.streaming import source_of

log = logging.getLogger("tidemark.mongodb")

SYSTEM_DATABASES = frozenset({"local", "admin", "config"})


class MongoSnapshotSteps:
    def __init__(
        self,
        ctx: SourceContext,
        client: Client,
        shapes: Shapes,
        rs: str,
        position: Callable[[], dict[str, Any]],
        available: Callable[[Mapping[str, Any]], bool],
        threads: int,
        fetch_size: int,
        only: Sequence[str] = (),
        filters: Mapping[str, Mapping[str, Any]] | None = None,
        holders: Sequence[Client] | None = None,
    ) -> None:
        #: the servers holding the documents: the one server, or each shard of a cluster
        #: read shard by shard whose configuration server holds none
        self.holders = list(holders) if holders else [client]
        self.only = [re.compile(p) for p in only]
        #: snapshot.collection.filter.overrides: the query of a collection's copy
        self.filters = dict(filters or {})
        self.ctx = ctx
        self.client = client
        self.shapes = shapes
        self.rs = rs
        self._position = position
        self.available = available
        self.threads = threads
        self.fetch_size = fetch_size
        self.ids: list[TableId] = []
        self.at: dict[str, Any] = {}

    def prepare(self) -> None:
        return None

    def tables(self) -> Sequence[TableId]:
        ids = []
        names = {
            (db, coll)
            for holder in self.holders
            for db in holder.list_database_names()
            if db not in SYSTEM_DATABASES
            for coll in holder[db].list_collection_names()
        }
        for db, coll in sorted(names):
            tid = TableId(db, None, coll)
            if coll.startswith("system.") or not self.ctx.is_included(tid):
                continue
            if self.only and not any(p.fullmatch(f"{db}.{coll}") for p in self.only):
                continue  # snapshot.include.collection.list: streamed, not copied
            ids.append(tid)
        self.ids = ids
        return ids

    def lock(self) -> None:
        return None  # MongoDB has no snapshot lock: the position is read before the copy

    def position(self) -> dict[str, Any]:
        self.at = self._position()
        return self.at

    def structure(self) -> None:
        for tid in self.ids:
            assert tid.catalog is not None
            self.ctx.register_table(self.shapes.table(tid.catalog, tid.table, self.rs))

    def handover(self, resume: dict[str, Any]) -> dict[str, Any]:
        clean = {k: v for k, v in resume.items() if k not in ("snapshot", "snapshot_completed")}
        if clean != self.at and not self.available(clean):
            log.warning(
                "the earlier snapshot's position %s is no longer in the oplog; streaming "
                "starts from this snapshot's %s",
                clean,
                self.at,
            )
            return dict(self.at)
        return clean

    def scans(self) -> list[TableScan]:
        out = []
        for tid in self.ids:
            assert tid.catalog is not None
            probe = Change(Operation.READ, tid.catalog, tid.table, None)
            probe.sec, probe.ord = int(self.at.get("sec", 0)), int(self.at.get("ord", 0))
            source = source_of(probe, self.rs, self.shapes.shape, True)
            table = self.shapes.table(tid.catalog, tid.table, self.rs)
            estimate = sum(
                h[tid.catalog][tid.table].estimated_document_count() for h in self.holders
            )
            out.append(TableScan(table, source, {**self.at, "snapshot": True}, estimate))
        return out

    def _rows(self, scan: TableScan) -> Iterator[list[Row]]:
        db, coll = scan.id.catalog, scan.id.table
        assert db is not None
        query = self.filters.get(f"{db}.{coll}", {})
        for holder in self.holders:
            cursor = holder[db][coll].find(query, batch_size=self.fetch_size)
            try:
                yield from in_batches(
                    (
                        self.shapes.row(Change(Operation.READ, db, coll, doc.get("_id"), full=doc))
                        for doc in cursor
                    ),
                    1024,
                )
            finally:
                cursor.close()

    def read(self, scans: list[TableScan]) -> Iterator[tuple[TableScan, Sequence[Row] | None]]:
        stop = self.ctx.stop_event.is_set
        if self.threads <= 1 or len(scans) <= 1:
            yield from one_by_one(scans, stop, self._rows)
            return
        yield from self._parallel(scans, stop)

    def _parallel(
        self, scans: list[TableScan], stop: Callable[[], bool]
    ) -> Iterator[tuple[TableScan, Sequence[Row] | None]]:
        """Readers fill a bounded queue; this thread emits (the core is not thread-safe)."""
        out: queue.Queue[tuple[TableScan, Sequence[Row] | None] | BaseException] = queue.Queue(8)
        quit_ = threading.Event()

        def put(item: tuple[TableScan, Sequence[Row] | None] | BaseException) -> None:
            while not quit_.is_set():
                try:
                    out.put(item, timeout=0.2)
                    return
                except queue.Full:
                    continue

        def read_one(scan: TableScan) -> None:
            try:
                for batch in self._rows(scan):
                    if quit_.is_set():
                        return
                    put((scan, batch))
                put((scan, None))
            except BaseException as exc:  # handed to the emitting thread
                put(exc)

        with ThreadPoolExecutor(self.threads, thread_name_prefix="mongodb-snapshot") as pool:
            for scan in scans:
                pool.submit(read_one, scan)
            done = 0
            try:
                while done < len(scans):
                    if stop():
                        raise InterruptedError("snapshot interrupted by stop")
                    item = out.get()
                    if isinstance(item, BaseException):
                        raise item
                    if item[1] is None:
                        done += 1
                    yield item
            finally:
                quit_.set()  # readers blocked on the full queue give up within 0.2 s

    def release(self, completed: bool) -> None:
        return None


class MongoSnapshot(SnapshotSource):
    def __init__(self, make_steps: Callable[[SourceContext], MongoSnapshotSteps]) -> None:
        self.make_steps = make_steps

    def execute(
        self, ctx: SourceContext, previous_offset: Mapping[str, Any] | None, include_data: bool
    ) -> dict[str, Any]:
        return run_snapshot(ctx, self.make_steps(ctx), include_data=include_data)
