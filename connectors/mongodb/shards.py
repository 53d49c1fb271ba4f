"""A sharded cluster read shard by shard: the seed's mechanism (§4.3.2, §4.4).

Each shard is its own replica set with its own oplog. Pointed at the cluster's configuration
server replica set (the seed's setup) or a ``mongos`` with ``capture.mode=oplog`` or
``mongodb.connection.mode=replica_set``, the connector reads the shard list from
``config.shards`` and reads every shard's log directly, one thread per shard, as the seed's
task does when it holds several replica sets. The list is read again every
``mongodb.poll.interval.ms``: an added shard gets its thread (AC-56), a removed one stops.

All shards feed one task, so the task's one offset holds every shard's position
(:mod:`cdc.offsets.composite`): a record's offset is stored only after it and everything
before it were acknowledged, and it carries each shard's position as of its emission, so a
restart resumes every shard exactly where that offset says. Shard threads only read and
decode; a single thread (the source thread) hands everything to the core, which is not
thread-safe, through a bounded queue (backpressure reaches every shard).

Topics do not name the shard: a collection's changes go to ``<prefix>.<db>.<collection>``
whatever shard holds the document (AC-13); ``source.rs`` names the shard's replica set.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cdc.offsets.composite import CompositePosition
from cdc.retry import Backoff, run_with_retries
from cdc.spi import (
    Operation,
    PositionReached,
    RowChange,
    SourceContext,
    SourceEvent,
    StreamingSource,
    Table,
    TableId,
)
from cdc.spi.contract import SourceMetrics, StreamingGauges
from connectors.mongodb.connection import Client
from connectors.mongodb.streaming import give_up, retry_schedule

log = logging.getLogger("tidemark.mongodb")


@dataclass(frozen=True, slots=True)
class Shard:
    """One shard: its replica set name and its members' ``host:port``."""

    rs: str
    hosts: tuple[str, ...]


def list_shards(client: Client) -> list[Shard]:
    """The shards ``config.shards`` lists (on a configuration server or through a ``mongos``);
    empty for a plain replica set. Each entry's ``host`` is ``<rs>/<host>,<host>``."""
    shards = []
    for entry in client["config"]["shards"].find({}, {"_id": 1, "host": 1}):
        raw = str(entry.get("host") or "")
        rs, sep, members = raw.partition("/")
        if not sep:
            rs, members = str(entry.get("_id")), raw
        hosts = tuple(h.strip() for h in members.split(",") if h.strip())
        if rs and hosts:
            shards.append(Shard(rs, hosts))
    return sorted(shards, key=lambda s: s.rs)


class _ShardMetrics:
    """The task's metrics as one shard's reader sees them: the shared streaming gauges, and
    its own ``extra`` (the task exports the sums over shards, see ``ShardedStreaming``)."""

    def __init__(self, metrics: SourceMetrics) -> None:
        self._metrics = metrics
        self.extra: dict[str, Callable[[], float]] = {}
        self.extra_text: dict[str, Callable[[], str]] = {}
        self.extra_contexts: dict[str, str] = {}
        self.streaming_context = metrics.streaming_context
        self.notices = metrics.notices

    @property
    def streaming(self) -> StreamingGauges:
        return self._metrics.streaming


class _Stop(Exception):
    """The shard's reader was told to stop while it waited on a full queue."""


class _ShardContext:
    """What one shard's reader sees of the core: everything it reports goes into the task's
    queue, tagged with the shard, in the order it was reported."""

    def __init__(self, rs: str, ctx: SourceContext, out: queue.Queue[tuple[str, str, Any]]):
        self.rs = rs
        self._ctx = ctx
        self._out = out
        self.stop_event = threading.Event()
        self._metrics = _ShardMetrics(ctx.metrics)

    @property
    def metrics(self) -> SourceMetrics:
        return self._metrics

    @property
    def extra(self) -> dict[str, Callable[[], float]]:
        return self._metrics.extra

    @property
    def tx_metadata(self) -> bool:
        return self._ctx.tx_metadata

    def put(self, kind: str, payload: Any) -> None:
        while True:
            try:
                self._out.put((kind, self.rs, payload), timeout=0.2)
                return
            except queue.Full:
                if self.stop_event.is_set():
                    raise _Stop from None

    def emit(self, event: SourceEvent) -> None:
        self.put("event", event)

    def emit_row(
        self,
        op: Operation,
        table_id: TableId,
        before_row: Sequence[Any] | None,
        after_row: Sequence[Any] | None,
        source: dict[str, Any],
        offset: dict[str, Any],
        transaction_id: str | None = None,
        partial: bool = False,
    ) -> None:
        self.put(
            "event",
            RowChange(op, table_id, before_row, after_row, source, offset, transaction_id, partial),
        )

    @contextlib.contextmanager
    def batched(self, limit: int = 512) -> Iterator[Callable[[], None]]:
        yield lambda: None  # the source thread batches what it hands to the core

    def register_table(self, table: Table) -> None:
        self.put("table", table)

    def is_included(self, table_id: TableId) -> bool:
        return self._ctx.is_included(table_id)

    def snapshot_started(self, table_ids: list[TableId]) -> None:
        raise NotImplementedError("a shard's stream does not snapshot")

    def snapshot_progress(self, table_id: TableId, rows: int, total: int | None) -> None:
        raise NotImplementedError("a shard's stream does not snapshot")

    def snapshot_table_completed(self, table_id: TableId, rows: int) -> None:
        raise NotImplementedError("a shard's stream does not snapshot")

    def snapshot_completed(self) -> None:
        raise NotImplementedError("a shard's stream does not snapshot")

    def snapshot_starting(self, position: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError("a shard's stream does not snapshot")

    def snapshot_chunk_done(self) -> None:
        raise NotImplementedError("a shard's stream does not snapshot")


@dataclass
class _Reader:
    shard: Shard
    stream: StreamingSource
    ctx: _ShardContext
    thread: threading.Thread
    removed: bool = False


class ShardedStreaming(StreamingSource):
    """Every shard's stream, one thread each, into the task's one ordered queue.

    ``stream_for`` builds a shard's reader (a change stream or oplog reader on a client of that
    shard); ``start_of`` gives where a shard without a stored position starts (the oldest
    entry of its oplog: a shard added since the offset was stored is read from its start, so
    nothing written to it before its discovery is lost)."""

    def __init__(
        self,
        discover: Callable[[], list[Shard]],
        stream_for: Callable[[Shard], StreamingSource],
        start_of: Callable[[Shard], dict[str, Any] | None],
        poll_ms: int,
        queue_size: int = 1024,
    ) -> None:
        self.discover = discover
        self.stream_for = stream_for
        self.start_of = start_of
        self.poll_s = poll_ms / 1000.0
        self.queue_size = queue_size
        self.readers: dict[str, _Reader] = {}
        self.shards_added = 0
        self.shards_removed = 0

    def execute(self, ctx: SourceContext, offset: Mapping[str, Any] | None) -> None:
        out: queue.Queue[tuple[str, str, Any]] = queue.Queue(self.queue_size)
        positions = CompositePosition(offset)
        first_start = offset is None
        registered: set[TableId] = set()
        self._export_metrics(ctx)
        try:
            self._reconcile(ctx, out, positions, self.discover(), first_start)
            next_poll = time.monotonic() + self.poll_s
            with ctx.batched() as flush:
                while not ctx.stop_event.is_set():
                    if time.monotonic() >= next_poll:
                        next_poll = time.monotonic() + self.poll_s
                        try:
                            shards = self.discover()
                        except Exception as exc:  # keep streaming the known shards
                            log.warning("re-reading the shard list failed: %s", exc)
                        else:
                            self._reconcile(ctx, out, positions, shards, False)
                    try:
                        kind, rs, payload = out.get_nowait()
                    except queue.Empty:
                        flush()
                        try:
                            kind, rs, payload = out.get(timeout=0.2)
                        except queue.Empty:
                            continue
                    if kind == "event":
                        payload.offset = positions.advance(rs, payload.offset)
                        ctx.emit(payload)
                    elif kind == "table":
                        if payload.id not in registered:
                            registered.add(payload.id)
                            ctx.register_table(payload)
                    else:  # "done"
                        self._finished(ctx, positions, rs, payload)
        finally:
            self._stop_all()

    def _reconcile(
        self,
        ctx: SourceContext,
        out: queue.Queue[tuple[str, str, Any]],
        positions: CompositePosition,
        shards: list[Shard],
        first_start: bool,
    ) -> None:
        """Start a reader for each listed shard without one, stop those no longer listed."""
        listed = {s.rs: s for s in shards}
        for rs, reader in self.readers.items():
            if rs not in listed and not reader.removed:
                log.info("shard %s is no longer listed in config.shards: its reader stops", rs)
                reader.removed = True
                reader.ctx.stop_event.set()
                self.shards_removed += 1
        for rs, shard in listed.items():
            if rs in self.readers:
                continue
            start = positions.get(rs)
            if start is None and not first_start:
                start = self.start_of(shard)
                log.info("shard %s has no stored position: read from %s", rs, start)
            if self.readers:
                self.shards_added += 1
            self._start(ctx, out, shard, start)

    def _start(
        self,
        ctx: SourceContext,
        out: queue.Queue[tuple[str, str, Any]],
        shard: Shard,
        start: dict[str, Any] | None,
    ) -> None:
        shard_ctx = _ShardContext(shard.rs, ctx, out)
        stream = self.stream_for(shard)

        def run() -> None:
            error: BaseException | None = None
            try:
                stream.execute(shard_ctx, start)
            except _Stop:
                pass
            except BaseException as exc:  # reported to the source thread, which fails
                error = exc
            with contextlib.suppress(_Stop):
                shard_ctx.put("done", error)

        thread = threading.Thread(target=run, name=f"tidemark-mongodb-{shard.rs}", daemon=True)
        self.readers[shard.rs] = _Reader(shard, stream, shard_ctx, thread)
        thread.start()
        log.info("reading shard %s (%s)", shard.rs, ",".join(shard.hosts))

    def _finished(
        self,
        ctx: SourceContext,
        positions: CompositePosition,
        rs: str,
        error: BaseException | None,
    ) -> None:
        reader = self.readers.pop(rs, None)
        if reader is not None and reader.removed:
            ctx.emit(PositionReached(positions.forget(rs)))
            return
        if error is not None:
            raise error
        if not ctx.stop_event.is_set():
            raise RuntimeError(f"the reader of shard {rs} stopped without an error")

    def _stop_all(self) -> None:
        for reader in self.readers.values():
            reader.ctx.stop_event.set()
        for reader in self.readers.values():
            reader.thread.join(10)
        self.readers.clear()

    def _export_metrics(self, ctx: SourceContext) -> None:
        def total(name: str) -> Callable[[], float]:
            return lambda: sum(
                (r.ctx.extra[name]() if name in r.ctx.extra else 0.0)
                for r in list(self.readers.values())
            )

        ctx.metrics.extra["NumberOfDisconnects"] = total("NumberOfDisconnects")
        ctx.metrics.extra["NumberOfPrimaryElections"] = total("NumberOfPrimaryElections")
        ctx.metrics.extra["NumberOfShards"] = lambda: float(
            sum(1 for r in list(self.readers.values()) if not r.removed)
        )


class TopologyDiscovery(StreamingSource):
    """Streaming whose kind, one stream or shard by shard, is learnt from the server once it
    answers: an unreachable server at start is retried on the seed's schedule
    (``connect.backoff.*``, ``connect.max.attempts``) like a connection lost later, rather
    than guessed (guessing "one replica set" for an unreachable configuration server would
    stream its oplog, which holds no documents, and capture nothing)."""

    def __init__(self, choose: Callable[[], StreamingSource], backoff: Backoff) -> None:
        self.choose = choose
        self.backoff = backoff
        self.chosen: StreamingSource | None = None

    def execute(self, ctx: SourceContext, offset: Mapping[str, Any] | None) -> None:
        self.chosen = run_with_retries(
            lambda _: self.choose(),
            schedule=retry_schedule(self.backoff),
            stop=ctx.stop_event,
            give_up=give_up,
            on_failure=lambda f: log.warning(
                "MongoDB unreachable at start (attempt %d, next try in %s s): %s",
                f.attempt,
                f.delay,
                f.error,
            ),
        )
        if self.chosen is not None:
            self.chosen.execute(ctx, offset)

    def commit_offset(self, offset: Mapping[str, Any]) -> None:
        if self.chosen is not None:
            self.chosen.commit_offset(offset)
