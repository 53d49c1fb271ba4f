"""Streaming: change streams (a cursor of change documents) or the oplog (``local.oplog.rs``).

Both readers hand every document to one :class:`ChangeEmitter`, which is also what the
recorded change documents of the tests go through: :class:`ChangeStreamStreaming` takes the
cursor it reads as a parameter (:class:`CommandCursor` against a server, a recorded one in
tests), so a replayed ``updateDescription``, transaction or ``invalidate`` follows exactly the
path a live one does.
"""

from __future__ import annotations

import contextlib
import logging
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from bson import Timestamp
from pymongo import CursorType
from pymongo.errors import OperationFailure

from cdc.errors import ErrorKind, FatalError
from cdc.retry import Backoff, Failure, run_with_retries
from cdc.spi import (
    PositionReached,
    SourceContext,
    StreamingSource,
    TableId,
    TransactionBegin,
    TransactionEnd,
)
from connectors.mongodb.connection import Client
from connectors.mongodb.errors import ERRORS, PrimaryUnreachable, is_election, with_user
from connectors.mongodb.events import (
    SHAPE_V1,
    Change,
    Invalidated,
    Shapes,
    from_change_stream,
    from_oplog,
)

log = logging.getLogger("tidemark.mongodb")

#: ChangeStreamHistoryLost, ChangeStreamFatalError, CappedPositionLost: the position is gone
HISTORY_LOST = frozenset({286, 280, 136})


def history_lost(offset: Mapping[str, Any] | None, exc: OperationFailure) -> FatalError:
    return FatalError(
        f"the stored position {dict(offset or {})} is no longer in the oplog (MongoDB error "
        f"{exc.code}: {exc}). With snapshot.mode=initial the connector takes a new snapshot "
        "at its next start; with snapshot.mode=never delete the stored offsets (REST "
        "DELETE /connectors/<name>/offsets) to start from the current position"
    )


def source_of(change: Change, rs: str, shape: str, snapshot: bool) -> dict[str, Any]:
    """The connector's part of the ``source`` block (seed §4.4.6.3; current Debezium's)."""
    common = {
        "ts_ms": change.sec * 1000,
        "snapshot": snapshot,
        "db": change.db,
        "rs": rs,
        "collection": change.coll,
        "ord": change.ord,
    }
    if shape == SHAPE_V1:
        return {**common, "h": change.h, "stxnid": change.txn}
    return {
        **common,
        "lsid": change.lsid,
        "txnNumber": change.txn_number,
        "wallTime": change.wall_ms,
    }


class ChangeEmitter:
    """Changes to the core: filters, table registration, transactions, rows."""

    def __init__(self, ctx: SourceContext, shapes: Shapes, rs: str) -> None:
        self.ctx = ctx
        self.shapes = shapes
        self.rs = rs
        self.registered: set[TableId] = set()
        self._txn: Change | None = None

    def register(self, db: str, coll: str) -> TableId:
        tid = TableId(db, None, coll)
        if tid not in self.registered:
            self.ctx.register_table(self.shapes.table(db, coll, self.rs))
            self.registered.add(tid)
        return tid

    def change(self, change: Change) -> None:
        ctx = self.ctx
        tid = TableId(change.db, None, change.coll)
        if change.txn != (self._txn.txn if self._txn else None):
            self.end_transaction()
            if change.txn is not None:
                self._txn = change
                if ctx.tx_metadata:
                    source = source_of(change, self.rs, self.shapes.shape, False)
                    ctx.emit(TransactionBegin(change.txn, source, change.offset))
        elif change.txn is not None:
            self._txn = change
        if not ctx.is_included(tid):
            ctx.emit(PositionReached(change.offset))
            return
        self.register(change.db, change.coll)
        source = source_of(change, self.rs, self.shapes.shape, False)
        ctx.emit_row(
            change.op, tid, None, self.shapes.row(change), source, change.offset, change.txn
        )

    def moved(self, offset: dict[str, Any]) -> None:
        self.end_transaction()
        self.ctx.emit(PositionReached(offset))

    def end_transaction(self) -> None:
        last, self._txn = self._txn, None
        if last is not None and last.txn is not None:
            source = source_of(last, self.rs, self.shapes.shape, False)
            self.ctx.emit(TransactionEnd(last.txn, source, last.offset))


class Cursor(Protocol):
    """A change stream as batches: ``(documents, postBatchResumeToken or None)``; raises
    ``OperationFailure`` as the server does."""

    def next_batch(self) -> tuple[Sequence[Mapping[str, Any]], Mapping[str, Any] | None]: ...

    def close(self) -> None: ...


def stream_options(offset: Mapping[str, Any] | None, mode: str) -> dict[str, Any]:
    """``$changeStream`` options: where to start (a resume token, else the operation after
    ``sec``/``ord``, i.e. exclusive of the stored position) and the images the mode asks."""
    opts: dict[str, Any] = {}
    if offset and offset.get("start_after"):
        opts["startAfter"] = offset["start_after"]
    elif offset and offset.get("resume_token"):
        opts["resumeAfter"] = {"_data": offset["resume_token"]}
    elif offset and offset.get("sec") is not None:
        opts["startAtOperationTime"] = Timestamp(int(offset["sec"]), int(offset["ord"]) + 1)
    if "update_full" in mode:
        opts["fullDocument"] = "updateLookup"
    if "pre_image" in mode:
        opts["fullDocumentBeforeChange"] = "whenAvailable"
    return opts


class CommandCursor:
    """A change stream through ``aggregate``/``getMore`` commands: collection, database or
    cluster level (``namespace`` = (db, coll), (db, None) or (None, None))."""

    def __init__(
        self,
        client: Client,
        namespace: tuple[str | None, str | None],
        options: dict[str, Any],
        max_await_ms: int = 500,
    ) -> None:
        db, coll = namespace
        self.db = client[db or "admin"]
        if db is None:
            options = {**options, "allChangesForCluster": True}
        self.collection = coll or "$cmd.aggregate"
        reply = self.db.command(
            {"aggregate": coll or 1, "pipeline": [{"$changeStream": options}], "cursor": {}}
        )
        self.cursor_id = reply["cursor"]["id"]
        self.first: list[Mapping[str, Any]] | None = list(reply["cursor"]["firstBatch"])
        self.token = reply["cursor"].get("postBatchResumeToken")
        self.max_await_ms = max_await_ms

    def next_batch(self) -> tuple[Sequence[Mapping[str, Any]], Mapping[str, Any] | None]:
        if self.first is not None:
            batch, self.first = self.first, None
            return batch, self.token
        reply = self.db.command(
            {
                "getMore": self.cursor_id,
                "collection": self.collection,
                "maxTimeMS": self.max_await_ms,
            }
        )
        cursor = reply["cursor"]
        self.cursor_id = cursor["id"]
        return list(cursor["nextBatch"]), cursor.get("postBatchResumeToken")

    def close(self) -> None:
        if self.cursor_id:
            with contextlib.suppress(Exception):  # closing is best effort
                self.db.command({"killCursors": self.collection, "cursors": [self.cursor_id]})


Opener = Callable[[Mapping[str, Any] | None], Cursor]


def retry_schedule(backoff: Backoff) -> Callable[[BaseException], Backoff | None]:
    def schedule(exc: BaseException) -> Backoff | None:
        return backoff if ERRORS.classify(exc) == ErrorKind.RETRIABLE else None

    return schedule


def give_up(failure: Failure) -> BaseException:
    return PrimaryUnreachable(
        f"MongoDB could not be reached: {failure.attempt - 1} reconnection attempts failed "
        f"(connect.max.attempts={failure.backoff.max_retries}, delays doubling from "
        f"connect.backoff.initial.delay.ms to connect.backoff.max.delay.ms): {failure.error}"
    )


class RetryingStream(StreamingSource):
    """Runs ``_run(ctx, state)`` again after a lost connection, on the seed's schedule
    (``connect.backoff.*``, ``connect.max.attempts``); ``state["offset"]`` is where the next
    attempt resumes, ``state["progress"]`` whether the failed attempt got work done."""

    backoff: Backoff
    user: str | None = None
    disconnects: int = 0
    elections: int = 0

    @abstractmethod
    def _run(self, ctx: SourceContext, state: dict[str, Any]) -> None:
        """One connected attempt: stream until stopped, or raise."""

    def execute(self, ctx: SourceContext, offset: Mapping[str, Any] | None) -> None:
        state: dict[str, Any] = {"offset": dict(offset) if offset else None, "progress": False}

        def progressed() -> bool:
            done, state["progress"] = state["progress"], False
            return bool(done)

        def attempt(_: int) -> None:
            self._run(ctx, state)

        ctx.metrics.streaming.connected = True
        ctx.metrics.extra["NumberOfDisconnects"] = lambda: float(self.disconnects)
        ctx.metrics.extra["NumberOfPrimaryElections"] = lambda: float(self.elections)
        try:
            run_with_retries(
                attempt,
                schedule=retry_schedule(self.backoff),
                stop=ctx.stop_event,
                progressed=progressed,
                give_up=give_up,
                translate=lambda exc: with_user(exc, self.user),
                on_failure=self._disconnected,
            )
        finally:
            ctx.metrics.streaming.connected = False

    def _disconnected(self, failure: Failure) -> None:
        self.disconnects += 1
        if is_election(failure.error):
            self.elections += 1
        log.warning(
            "MongoDB unreachable (attempt %d, next try in %s s): %s",
            failure.attempt,
            failure.delay,
            failure.error,
        )


class ChangeStreamStreaming(RetryingStream):
    """Reads a change stream from the stored resume token (or operation time)."""

    def __init__(
        self,
        opener: Opener,
        shapes: Shapes,
        rs: str,
        watched: tuple[str, str] | None,
        backoff: Backoff,
        user: str | None = None,
    ) -> None:
        self.user = user
        self.disconnects = 0
        self.opener = opener
        self.shapes = shapes
        self.rs = rs
        self.watched = watched
        self.backoff = backoff

    def _run(self, ctx: SourceContext, state: dict[str, Any]) -> None:
        emitter = ChangeEmitter(ctx, self.shapes, self.rs)
        if self.watched is not None:
            emitter.register(*self.watched)
        try:
            cursor = self.opener(state["offset"])
        except OperationFailure as exc:
            if exc.code in HISTORY_LOST:
                raise history_lost(state["offset"], exc) from exc
            raise
        try:
            with ctx.batched() as flush:
                while not ctx.stop_event.is_set():
                    try:
                        batch, token = cursor.next_batch()
                    except OperationFailure as exc:
                        if exc.code in HISTORY_LOST:
                            raise history_lost(state["offset"], exc) from exc
                        raise
                    for doc in batch:
                        event = from_change_stream(doc, self.watched)
                        state["offset"], state["progress"] = event.offset, True
                        if isinstance(event, Change):
                            emitter.change(event)
                        elif isinstance(event, Invalidated):
                            emitter.moved(event.offset)
                            log.warning(
                                "change stream invalidated (collection dropped or renamed) at "
                                "%s; continuing after it",
                                event.offset,
                            )
                            cursor.close()
                            state["offset"] = {**event.offset, "start_after": dict(event.token)}
                            cursor = self.opener(state["offset"])
                            break
                        else:
                            emitter.moved(event.offset)
                    if not batch:
                        emitter.end_transaction()
                        if token is not None and state["offset"] is not None:
                            data = token.get("_data")
                            if data and data != state["offset"].get("resume_token"):
                                state["offset"] = {**state["offset"], "resume_token": data}
                                state["offset"].pop("start_after", None)
                        if state["offset"] is not None:  # idle: heartbeats, offset commits
                            ctx.emit(PositionReached(state["offset"]))
                        flush()
        finally:
            cursor.close()


class OplogStreaming(RetryingStream):
    """The seed's mechanism: entries of ``local.oplog.rs`` after the stored ``sec``/``ord``,
    read with a tailable cursor, re-opened (after ``poll_ms``) when a server ends it."""

    def __init__(
        self, client: Client, shapes: Shapes, rs: str, poll_ms: int, backoff: Backoff
    ) -> None:
        self.client = client
        self.shapes = shapes
        self.rs = rs
        self.poll_s = poll_ms / 1000.0
        self.backoff = backoff

    def _run(self, ctx: SourceContext, state: dict[str, Any]) -> None:
        emitter = ChangeEmitter(ctx, self.shapes, self.rs)
        position = state["offset"]
        oplog = self.client.local["oplog.rs"]
        if position is None:  # no offset (snapshot.mode=never): from the current end
            newest = oplog.find_one(sort=[("$natural", -1)])
            if newest is not None:
                position = {"sec": newest["ts"].time, "ord": newest["ts"].inc, "h": None}
        else:
            first = oplog.find_one(sort=[("$natural", 1)])
            stored = Timestamp(int(position["sec"]), int(position["ord"]))
            if first is not None and first["ts"] > stored:
                raise FatalError(
                    f"the stored position {position} is no longer in the oplog (its oldest "
                    f"entry is {first['ts']}). With snapshot.mode=initial the connector takes "
                    "a new snapshot at its next start; with snapshot.mode=never delete the "
                    "stored offsets to start from the current position"
                )
        with ctx.batched() as flush:
            while not ctx.stop_event.is_set():
                query: dict[str, Any] = {}
                if position is not None:
                    ts = Timestamp(int(position["sec"]), int(position["ord"]))
                    query = {"ts": {"$gte" if "tord" in position else "$gt": ts}}
                cursor = oplog.find(query, cursor_type=CursorType.TAILABLE_AWAIT, batch_size=1000)
                read = 0
                try:
                    for entry in cursor:
                        for event in from_oplog(entry):
                            if position is not None and _done(event.offset, position):
                                continue
                            if isinstance(event, Change):
                                emitter.change(event)
                            else:
                                emitter.moved(event.offset)
                            position = state["offset"] = event.offset
                            state["progress"] = True
                            read += 1
                        if ctx.stop_event.is_set():
                            break
                finally:
                    cursor.close()
                emitter.end_transaction()
                if not read and position is not None:  # idle: heartbeats, offset commits
                    ctx.emit(PositionReached(position))
                flush()
                if not read:
                    ctx.stop_event.wait(self.poll_s)


def _done(candidate: Mapping[str, Any], position: Mapping[str, Any]) -> bool:
    """Whether ``candidate`` is at or before the stored position (inside a transaction's
    entry: its operations up to the stored ``tord``)."""
    a = (candidate["sec"], candidate["ord"])
    b = (position["sec"], position["ord"])
    if a != b:
        return a < b
    if "tord" not in position:
        return True
    return "tord" not in candidate or candidate["tord"] <= position["tord"]
