"""The source coordinator: the phases of a source and the offsets each phase commits.

Every connector goes through the same sequence, owned here and nowhere else (Debezium's
``ChangeEventSourceCoordinator``):

1. read the stored offset;
2. ask the connector's :class:`~cdc.spi.Snapshotter` whether to snapshot;
3. wait ``snapshot.delay.ms``;
4. run the :class:`~cdc.spi.SnapshotSource`; before its first row it calls
   ``ctx.snapshot_starting(position)``, and the coordinator records durably where streaming
   must start if this attempt is interrupted (:meth:`SourceCoordinator.snapshot_starting`);
5. hand over: store the snapshot-complete offset once Kafka acknowledged every row
   (:meth:`SourceCoordinator.store_now`), so a crash right after the snapshot does not redo it;
6. stream from the offset the snapshot returned (or the stored one).

The rule for snapshots that restart is kept here, once, for every connector: a restarted
snapshot never hands over from later than a position an earlier attempt may have emitted
events from (see :func:`resume_origin`), because a row that attempt emitted and that was
deleted in between would stay alive downstream forever.

The coordinator runs on the source thread; the task thread serves its requests to store an
offset (:meth:`serve_store_request`) because only the task thread knows what Kafka
acknowledged.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from cdc.errors import FatalError
from cdc.metrics import TaskMetrics
from cdc.offsets.store import OffsetStore
from cdc.offsets.writer import OffsetWriter
from cdc.pipeline.dispatcher import EventDispatcher
from cdc.pipeline.queue import QueueClosed
from cdc.signals import registry as signal_registry
from cdc.signals.file_channel import FileSignalChannel
from cdc.signals.kafka_channel import KafkaSignalChannel
from cdc.signals.notifications import Notifier
from cdc.snapshot.driver import ResumePoint
from cdc.snapshot.incremental import IncrementalSnapshot, SignalledContext
from cdc.spi import Connector, PositionReached, SourceContext, StreamingSource

log = logging.getLogger("tidemark.engine")


class SourceCoordinator:
    """Runs a connector's snapshot and streaming sources in order on the source thread."""

    def __init__(
        self,
        connector: Connector,
        *,
        name: str,
        snapshot_delay_ms: int,
        store: OffsetStore,
        writer: OffsetWriter,
        dispatcher: EventDispatcher,
        metrics: TaskMetrics,
        existing_topics: Callable[[], list[str]],
        stopping: threading.Event,
        wake_task: Callable[[], None] = lambda: None,
    ) -> None:
        self.connector = connector
        self.name = name
        self.snapshot_delay_s = snapshot_delay_ms / 1000
        self.store = store
        self.writer = writer
        self.dispatcher = dispatcher
        self.metrics = metrics
        self.existing_topics = existing_topics
        self.stopping = stopping
        #: CREATED, SNAPSHOT, STREAMING: the phase, as shown in the task's status
        self.phase = "CREATED"
        self.streaming: StreamingSource | None = None
        #: incremental snapshots by signal, while streaming with signal.data.collection set
        self.incremental: IncrementalSnapshot | None = None
        #: stop the signal channels started with streaming
        self._channel_stops: list[Callable[[], None]] = []
        #: where streaming must start if a snapshot restarts (see resume_origin)
        self._earlier: dict[str, Any] | None = None
        #: how far an interrupted snapshot got (cdc.snapshot.driver.ResumePoint)
        self._resume: ResumePoint | None = None
        #: an offset the source waits to see stored before it goes on (snapshot complete)
        self._store_request: dict[str, Any] | None = None
        self._stored_event = threading.Event()
        #: the chunk gate of resumable snapshots, counted in queue records (put and taken
        #: totals): store through this record, and the records whose offsets are stored
        self._store_through = 0
        self.stored_through = 0
        self._chunk_stored = threading.Event()
        self._wake_task = wake_task
        writer.on_committed = self._committed
        dispatcher.snapshot_start_hook = self.snapshot_starting
        dispatcher.snapshot_chunk_hook = self.snapshot_chunk_done
        dispatcher.snapshot_chunk_wait = self.wait_for_chunk

    # -- source thread ------------------------------------------------------------------------
    def run(self) -> None:
        """The phases in order; returns when streaming stops (or the mode does not stream)."""
        d = self.dispatcher
        stored = self.store.get(self.name, self.writer.partition)
        snapshotter = self.connector.snapshotter()
        offset: Mapping[str, Any] | None = stored
        if snapshotter.should_snapshot(stored):
            if self.snapshot_delay_s > 0:
                log.info(
                    "%s: snapshot.delay.ms: waiting %.1f s before the snapshot",
                    self.name,
                    self.snapshot_delay_s,
                )
                if d.stop_event.wait(self.snapshot_delay_s):
                    return
            if stored is None:
                self._announce_full_snapshot(snapshotter.mode)
            self._earlier = resume_origin(stored)
            self._resume = ResumePoint.of(stored)
            # Kept in every snapshot offset stored from now on, also those of records the
            # snapshot emits before its snapshot_starting (MySQL's structure step): storing
            # one without it would replace the earlier origin with this attempt's position.
            self.writer.snapshot_origin = self._earlier
            self.writer.snapshot_resume = self._resume.fields() if self._resume else None
            if self._earlier is not None:
                log.info(
                    "%s: an earlier attempt may have emitted events from %s; streaming "
                    "after this snapshot starts there",
                    self.name,
                    self._earlier,
                )
            log.info("%s: starting snapshot (snapshot.mode=%s)", self.name, snapshotter.mode)
            d.phase = self.metrics.snapshot
            self.phase = "SNAPSHOT"
            try:
                with _frozen_heap():
                    offset = self.connector.snapshot_source().execute(
                        d, stored, snapshotter.include_data()
                    )
            except BaseException:
                self.metrics.snapshot.finish(aborted=True)
                raise
            self.metrics.snapshot.finish()
            d.snapshot_completed()  # a source that did not say so itself
            d.emit(PositionReached(dict(offset)))
            d.phase = self.metrics.streaming
            self.store_now(dict(offset))
        elif stored is not None and "snapshot_origin" in stored:
            # An interrupted snapshot, and a mode that does not redo it: stream from the
            # position recorded before its first row.
            offset = stored["snapshot_origin"]
        if snapshotter.should_stream() and not self.stopping.is_set():
            self.phase = "STREAMING"
            self.streaming = self.connector.streaming_source()
            ctx, incremental = self._signalled(offset)
            try:
                with _frozen_heap():
                    self.streaming.execute(ctx, offset)
            finally:
                for stop in self._channel_stops:
                    stop()
                self._channel_stops.clear()
                if incremental is not None:
                    incremental.reader.close()

    def run_guarded(self, fail: Callable[[BaseException], None], done: threading.Event) -> None:
        """:meth:`run` as a thread's target: a failure goes to ``fail`` (the queue, so the task
        thread re-raises it), and ``done`` is set however it ends."""
        try:
            self.run()
        except QueueClosed:
            pass
        except InterruptedError as exc:
            # A snapshot cut short by a graceful stop is a clean end (its offsets say it is
            # unfinished, so the next start redoes it); without a stop request, a failure.
            if not self.stopping.is_set():
                log.error("%s: source failed: %s", self.name, exc)
                fail(exc)
        except BaseException as exc:
            if not self.stopping.is_set():
                log.error("%s: source failed: %s", self.name, exc)
            fail(exc)
        finally:
            done.set()

    def _signalled(
        self, offset: Mapping[str, Any] | None
    ) -> tuple[SourceContext, IncrementalSnapshot | None]:
        """The context streaming gets: the dispatcher, or, with ``signal.data.collection``
        set, the dispatcher watched by the incremental snapshot (``cdc.snapshot.incremental``),
        which resumes a snapshot the offset says was under way; the other signal channels
        (``signal.enabled.channels``) start here and stop with streaming."""
        cfg = self.connector.config
        if cfg is None:
            return self.dispatcher, None
        table = cfg.get("signal.data.collection")
        channels = set(cfg.get("signal.enabled.channels") or ["source"])
        read_only = bool(cfg.get("read.only"))  # no signal table needed (nor written)
        if not table and not read_only:
            if channels - {"source"}:
                raise FatalError(
                    f"signal.enabled.channels={','.join(sorted(channels))} needs "
                    "signal.data.collection: incremental snapshots write their watermarks there"
                )
            return self.dispatcher, None
        notify = set(cfg.get("notification.enabled.channels") or [])
        if "sink" in notify and not cfg.get("notification.sink.topic.name"):
            raise FatalError(
                "notification.enabled.channels includes sink but notification.sink.topic.name "
                "is not set"
            )
        reader = self.connector.chunk_reader()
        if reader is None:
            log.warning(
                "%s: %s is set but this connector has no incremental snapshots; signals are "
                "ignored",
                self.name,
                "signal.data.collection" if table else "read.only",
            )
            return self.dispatcher, None
        if read_only and not callable(getattr(reader, "begin_chunk_read", None)):
            reader.close()
            raise FatalError(
                "read.only=true: this connector has no read-only watermarks (PostgreSQL and "
                "MySQL/MariaDB have them); set read.only=false to write watermark rows into "
                "signal.data.collection"
            )
        incremental = IncrementalSnapshot(
            self.dispatcher,
            reader,
            name=self.name,
            signal_table=str(table) if table else None,
            read_only=read_only,
            chunk_size=int(cfg.get("incremental.snapshot.chunk.size") or 1024),
            source_signals="source" in channels,
            notifier=Notifier(
                self.dispatcher,
                connector=self.name,
                channels=notify,
                topic=cfg.get("notification.sink.topic.name"),
            ),
        )
        self.incremental = incremental
        incremental.check_signal_table()
        incremental.restore(offset)
        if "kafka" not in channels:
            incremental.forget_signal_position()
        incremental.start()
        if "rest" in channels:
            signal_registry.register(self.name, incremental.submit)
            self._channel_stops.append(
                lambda: signal_registry.unregister(self.name, incremental.submit)
            )
        if "kafka" in channels:
            channel = self._kafka_channel(cfg, incremental)
            incremental.on_signal_durable = channel.durable
            channel.start()
            self._channel_stops.append(channel.stop)
        if "file" in channels:
            files = FileSignalChannel(
                str(cfg.get("signal.file") or "file-signals.txt"),
                incremental.submit,
                int(cfg.get("signal.poll.interval.ms") or 5000) / 1000,
            )
            files.start()
            self._channel_stops.append(files.stop)
        return SignalledContext(self.dispatcher, incremental), incremental

    def _kafka_channel(self, cfg: Any, incremental: IncrementalSnapshot) -> KafkaSignalChannel:
        server = str(cfg.get("database.server.name") or self.name)
        bootstrap = cfg.get("signal.kafka.bootstrap.servers")
        if not bootstrap:
            raise FatalError(
                "signal.enabled.channels includes kafka but signal.kafka.bootstrap.servers "
                "is not set"
            )
        prefix = "signal.consumer."
        extra = {
            k[len(prefix) :]: v
            for k, v in self.connector.raw_config.items()
            if k.startswith(prefix)
        }
        return KafkaSignalChannel(
            topic=str(cfg.get("signal.kafka.topic") or f"{server}-signal"),
            consumer_config={
                "bootstrap.servers": bootstrap,
                "group.id": cfg.get("signal.kafka.groupId") or "kafka-signal",
                **extra,
            },
            keys={server, self.name},
            submit=incremental.submit,
            poll_timeout_s=int(cfg.get("signal.kafka.poll.timeout.ms") or 100) / 1000,
            start_after=incremental.signal_position,
            committed=incremental.signal_committed_at,
        )

    def _announce_full_snapshot(self, mode: str) -> None:
        """No offsets stored: normal on a connector's first start, a warning when its topics
        already hold events (the offsets were deleted, or point elsewhere), because every
        row is then sent again. Said in the log and in the task's status."""
        reason = getattr(self.store, "missing_reason", None) or "no offsets stored"
        written = self.existing_topics()
        if not written:
            log.info("%s: first start, full snapshot (snapshot.mode=%s)", self.name, mode)
            return
        notice = (
            f"full snapshot although {len(written)} topic(s) of this connector exist "
            f"({', '.join(written[:3])}{', ...' if len(written) > 3 else ''}): {reason}"
        )
        log.warning("%s: %s (snapshot.mode=%s)", self.name, notice, mode)
        self.metrics.notices.append(notice)

    def snapshot_starting(self, position: Mapping[str, Any]) -> dict[str, Any]:
        """The snapshot is about to emit rows: record durably, before the first one, where
        streaming must start if this attempt is interrupted, so that a restart never streams
        from later than a position this attempt (or an earlier one) emitted events from."""
        resume = dict(self._earlier if self._earlier is not None else position)
        marker = {"snapshot": True, "snapshot_origin": resume}
        if self._resume is not None:
            # kept until this attempt stores a row offset of its own: a crash before that
            # still resumes where the interrupted attempt got to
            marker.update(self._resume.fields())
        if self.stopping.is_set():
            # A stopped engine's source thread, still in a retry or connect when the engine
            # gave up on it: its task may run elsewhere by now, and this write (outside any
            # transaction, unfenced) would land after the new owner's offsets, so the next
            # start would redo the snapshot and stream again from this stale origin.
            raise InterruptedError(f"{self.name}: stopped before the snapshot's first row")
        # Before the marker: an offset the task thread stores meanwhile carries the origin
        # too, and never replaces the marker with one that lacks it.
        self.writer.snapshot_origin = resume
        self.writer.snapshot_resume = self._resume.fields() if self._resume else None
        if not self.writer.transactional:
            # Exactly-once: no marker. Rows are visible only with their offsets, which carry
            # the origin (OffsetWriter.stored_form); a crash before the first commit leaves
            # nothing to replay, and a marker outside the transactions is not fenced.
            self.store.put(self.name, self.writer.partition, marker)
        log.info("%s: snapshot under way; resume position %s recorded", self.name, resume)
        return dict(resume)

    def store_now(self, offset: dict[str, Any]) -> None:
        """Block the source until the task thread stored ``offset`` (Kafka acknowledged every
        record before it), so a crash right after a finished snapshot does not redo it."""
        self._store_request = offset
        while not self._stored_event.wait(0.1):
            if self.stopping.is_set() or self.dispatcher.stop_event.is_set():
                return
        self.writer.snapshot_origin = None
        self.writer.snapshot_resume = None

    def snapshot_chunk_done(self, mark: int, wait: bool = True) -> None:
        """A resumable snapshot emitted a chunk, ending with queue record ``mark``: the source
        sends nothing more until the offset of that chunk's last row is stored (Kafka
        acknowledged it and every record before it); it waits here, or, with ``wait`` False,
        in :meth:`wait_for_chunk` before its next hand-over. The offset flush interval alone
        lets tens of thousands of rows go out unstored at snapshot speed, all read again after
        a crash; with this, a crash re-reads at most the chunk under way. The wait costs a
        producer round trip and an offset write per chunk."""
        self._store_through = mark
        self._wake_task()
        if wait:
            self.wait_for_chunk(mark)

    def wait_for_chunk(self, mark: int) -> None:
        """The wait of :meth:`snapshot_chunk_done`, on its own: the initial snapshot's direct
        send asks for the store at the chunk's end and waits only before it hands the next
        records over, so the next batch is read from the database while Kafka acknowledges
        and the offset is written (the task thread's part of that is mostly without the
        interpreter lock)."""
        stop = self.dispatcher.stop_event
        while True:
            self._chunk_stored.clear()
            if self.stored_through >= mark or self.stopping.is_set() or stop.is_set():
                return
            self._chunk_stored.wait(0.1)

    # -- task thread --------------------------------------------------------------------------
    def stored(self, taken: int) -> None:
        """Every record up to queue record ``taken`` has its offset stored (or needs none)."""
        if taken > self.stored_through:
            self.stored_through = taken
            self._chunk_stored.set()

    def serve_store_request(self, commit: Callable[[], None], taken: int = 0) -> None:
        """Called by the task thread after each batch, ``taken`` records taken from the queue
        so far: when the source waits for an offset to be stored, commit it (``commit``
        stores only what Kafka acknowledged, and reports it through :meth:`stored`) and wake
        the source."""
        if self.stored_through < self._store_through <= taken:
            commit()
        request = self._store_request
        if request is None:
            return
        if self.writer.pending == request:
            commit()
        if self.writer.last_committed == request:
            self._store_request = None
            self._stored_event.set()

    def _committed(self, offset: dict[str, Any]) -> None:
        """An offset was stored: the streaming source may release its log up to it."""
        if self.incremental is not None:
            self.incremental.stored(offset)  # a Kafka signal it holds is durable
        if self.streaming is not None:
            try:
                self.streaming.commit_offset(offset)
            except Exception:
                log.warning(
                    "%s: source could not confirm offset %s", self.name, offset, exc_info=True
                )


def resume_origin(stored: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Where streaming must start after a snapshot that begins with ``stored`` offsets: the
    position an interrupted snapshot recorded before its first row, or the streaming offset
    a re-snapshot replaces (its events are downstream already); None on a first start. An
    interrupted snapshot of an older release recorded no origin: its row offsets carry the
    snapshot's own position, which is the origin minus the snapshot flag."""
    if stored is None:
        return None
    origin = stored.get("snapshot_origin")
    if isinstance(origin, dict):
        return dict(origin)
    return {k: v for k, v in stored.items() if k not in ("snapshot", "snapshot_completed")}


_freeze_lock = threading.Lock()
_freeze_users = 0
_saved_thresholds: tuple[int, ...] | None = None
#: Collection thresholds while an engine snapshots or streams (each generation's own, or
#: the interpreter's if higher): a young collection every 20,000 net container allocations
#: instead of 700, so a record is usually freed by reference counting before any
#: collection sees it, instead of being traversed and promoted while it waits in the queue.
#: Measured on W4 (PostgreSQL, 1M rows): 149-153k -> 159-168k rows/s; 5,000 gained nothing.
BUSY_THRESHOLDS = (20_000, 20, 20)


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """Streaming and snapshots allocate a few container objects per event, and the records
    that wait in the queue survive into the oldest GC generation, so full collections come
    every few thousand events, and each one scans every object of the process (modules,
    schemas, driver state): measured at about 2.5 µs per event, a sixth of the source thread
    (and ~10 % of a MariaDB snapshot's CPU). What exists when a snapshot or streaming starts
    is long-lived, so it is moved out of the collector's view (``gc.freeze``) while any
    engine snapshots or streams, and collections run less often (``BUSY_THRESHOLDS``); when
    the last one stops both are handed back (``gc.unfreeze``, the thresholds it found), so
    cyclic garbage among those objects is still collected then. Reference-counted freeing
    is unaffected either way. Freezing moves garbage too, so each entry collects first (~25
    ms once per snapshot or streaming start): a task restarted while another engine streams
    would otherwise leave its predecessor's cycles frozen for as long as the worker is
    busy."""
    global _freeze_users, _saved_thresholds
    with _freeze_lock:
        _freeze_users += 1
        gc.collect()
        gc.freeze()
        if _freeze_users == 1:
            _saved_thresholds = gc.get_threshold()
            pairs = zip(_saved_thresholds, BUSY_THRESHOLDS, strict=False)
            gc.set_threshold(*(max(a, b) for a, b in pairs))
    try:
        yield
    finally:
        with _freeze_lock:
            _freeze_users -= 1
            if _freeze_users == 0:
                gc.unfreeze()
                if _saved_thresholds is not None:
                    gc.set_threshold(*_saved_thresholds)
                    _saved_thresholds = None
