"""The snapshot: every captured collection copied as ``op=r`` events, consistent with a
position read *before* the copy (a change stream's resume token, or the newest oplog entry),
so a write made during the copy is both possibly in the copy and streamed afterwards: replayed
on top, it converges; nothing is lost. Collections are read in parallel with
``snapshot.max.threads``.

An interrupted snapshot resumes (``snapshot.resumable``, :mod:`cdc.snapshot.driver`): each
collection is read sorted by ``_id``, the restart skips the collections read whole and reads
the current one with ``{"_id": {"$gt": <stored _id>}}``, only while the oplog still holds the
interrupted attempt's position. The stored ``_id`` is JSON: integers and strings as they are,
an ObjectId as ``{"$oid": hex}``; any other ``_id`` type is not stored (the collection is read
whole again). ``$gt`` compares within one BSON type class only, so a collection whose ``_id``
values are of several classes is read whole again too. A collection spread over several
servers (a cluster read shard by shard) is not read in ``_id`` order: read whole again."""

from __future__ import annotations

import json
import logging
import queue
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bson import Decimal128, ObjectId

from cdc.snapshot.driver import (
    ResumePoint,
    Row,
    TableScan,
    in_batches,
    one_by_one,
    run_snapshot,
)
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
        resumable: bool = True,
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
        #: read each collection in _id order (one server holds it all)
        self.in_key_order = resumable and len(self.holders) == 1
        #: streaming starts at this snapshot's position, not the interrupted attempt's
        self._fell_back = False

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
            self._fell_back = True
            return dict(self.at)
        return clean

    def may_resume(self) -> bool:
        """An interrupted snapshot resumes only when streaming starts at its position (the
        oplog still holds it): the changes since are replayed on the documents read before."""
        return not self._fell_back

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
            offset = {**self.at, "snapshot": True}
            key_of = id_of if self.in_key_order else None
            out.append(TableScan(table, source, offset, estimate, key_of=key_of))
        return out

    def _rows(self, scan: TableScan) -> Iterator[list[Row]]:
        db, coll = scan.id.catalog, scan.id.table
        assert db is not None
        query: Mapping[str, Any] = self.filters.get(f"{db}.{coll}", {})
        order = None
        if scan.key_of is not None:
            order = [("_id", 1)]
            if scan.after is not None and not one_id_class(self.holders[0][db][coll], scan.after):
                log.info("%s.%s: _id values of several types, read whole again", db, coll)
                scan.after = None
            if scan.after is not None:
                after = {"_id": {"$gt": _decode_id(scan.after[0])}}
                query = {"$and": [query, after]} if query else after
        for holder in self.holders:
            cursor = holder[db][coll].find(query, batch_size=self.fetch_size, sort=order)
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


def id_of(row: Row) -> list[Any] | None:
    """A document's ``_id`` for the snapshot offset, from the row's key (strict extended
    JSON): an integer or string as it is, an ObjectId as ``{"$oid": hex}``, else None."""
    value = json.loads(row[0])
    if isinstance(value, dict):
        if set(value) == {"$oid"}:
            return [{"$oid": str(value["$oid"])}]
        if set(value) == {"$numberLong"}:
            return [int(value["$numberLong"])]
        return None
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        return [value]
    return None


def _decode_id(value: Any) -> Any:
    """The stored ``_id`` back as the driver's value (see :func:`_id_of`)."""
    if isinstance(value, dict) and set(value) == {"$oid"}:
        return ObjectId(value["$oid"])
    return value


def _id_class(value: Any) -> str:
    """The BSON comparison class of an _id (``$gt`` compares within one class only)."""
    if isinstance(value, (int, float, Decimal128)) and not isinstance(value, bool):
        return "number"
    if isinstance(value, str):
        return "string"
    return type(value).__name__


def one_id_class(coll: Any, after: Sequence[Any]) -> bool:
    """Whether every _id of ``coll`` is of the stored key's type class (``$gt`` sees no
    other): the lowest and the highest _id are, and BSON sorts type classes one after the
    other."""
    want = _id_class(_decode_id(after[0]))
    for direction in (1, -1):
        for doc in coll.find({}, {"_id": 1}, sort=[("_id", direction)], limit=1):
            if _id_class(doc.get("_id")) != want:
                return False
    return True


class MongoSnapshot(SnapshotSource):
    def __init__(
        self, make_steps: Callable[[SourceContext], MongoSnapshotSteps], chunk_rows: int
    ) -> None:
        self.make_steps = make_steps
        self.chunk_rows = chunk_rows

    def execute(
        self, ctx: SourceContext, previous_offset: Mapping[str, Any] | None, include_data: bool
    ) -> dict[str, Any]:
        resume = ResumePoint.of(previous_offset)
        return run_snapshot(
            ctx,
            self.make_steps(ctx),
            include_data=include_data,
            resume=resume,
            chunk_rows=self.chunk_rows,
            batched=True,
        )
