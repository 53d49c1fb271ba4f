"""The embedded engine: one connector task from database to Kafka, with offsets.

Two threads. The *source* thread runs the snapshot and then the streaming source; everything
it reports goes through the dispatcher into the bounded queue. The *task* thread (the caller
of :meth:`Engine.run`) takes batches from the queue, applies transforms and converters, hands
records to the producer, and stores offsets once Kafka acknowledged them, then tells the
source (so PostgreSQL can release WAL). The worker hosts engines; tests and users can embed
one directly, as with Debezium's embedded engine.
"""

from __future__ import annotations

import logging
import threading
import time

from cdc import metrics as metrics_mod
from cdc.assembly import EngineSettings, TaskParts, assemble, table_filter_from_config
from cdc.config import Config
from cdc.offsets.store import OffsetStore
from cdc.pipeline.coordinator import SourceCoordinator, resume_origin
from cdc.pipeline.direct_send import DirectSend
from cdc.record import SourceRecord
from cdc.sinks.kafka import KafkaSink, SinkError
from cdc.spi import Connector, StreamingSource

__all__ = ["Engine", "EngineSettings", "resume_origin", "table_filter_from_config"]

log = logging.getLogger("tidemark.engine")


class Engine:
    """Runs one task: the source thread through the :class:`SourceCoordinator`, the send loop
    on the caller's thread through the parts :func:`cdc.assembly.assemble` built (or
    ``parts``, when the caller wired them itself)."""

    def __init__(
        self,
        connector: Connector,
        config: Config,
        offset_store: OffsetStore,
        settings: EngineSettings,
        *,
        sink: KafkaSink | None = None,
        parts: TaskParts | None = None,
    ) -> None:
        if parts is None:
            parts = assemble(connector, config, offset_store, settings, sink=sink)
        self.connector = connector
        self.config = config
        self.store = offset_store
        self.settings = settings
        self.name = parts.name
        self.server = parts.server
        self.partition = parts.partition
        self.metrics = parts.metrics
        self.queue = parts.queue
        self.failures = parts.failures
        self.dispatcher = parts.dispatcher
        self.transforms = parts.transforms
        self.key_converter = parts.key_converter
        self.value_converter = parts.value_converter
        self.sink = parts.sink
        self.writer = parts.writer
        self.delivery = parts.delivery
        self._stopping = parts.stopping
        self._stop_deadline = float("inf")
        self._source_done = threading.Event()
        self._source_thread: threading.Thread | None = None
        self._stopped = False
        self.coordinator = SourceCoordinator(
            connector,
            name=self.name,
            snapshot_delay_ms=int(config.get("snapshot.delay.ms", 0)),
            store=offset_store,
            writer=self.writer,
            dispatcher=self.dispatcher,
            metrics=self.metrics,
            existing_topics=lambda: self.sink.existing_topics(f"{self.server}."),
            stopping=self._stopping,
            wake_task=self.queue.wake,
        )
        #: the initial snapshot's records sent by the source thread itself when nothing is
        #: ahead of them (at-least-once only; see cdc.pipeline.direct_send)
        self._direct: DirectSend | None = None
        if self.delivery.direct_send:
            self._direct = DirectSend(self.queue, self.delivery.process)
            self.dispatcher.snapshot_hand_over = self._direct.hand_over

    @property
    def state(self) -> str:
        """CREATED, SNAPSHOT, STREAMING or STOPPED."""
        return "STOPPED" if self._stopped else self.coordinator.phase

    @state.setter
    def state(self, value: str) -> None:
        self._stopped = value == "STOPPED"
        if not self._stopped:
            self.coordinator.phase = value

    @property
    def streaming(self) -> StreamingSource | None:
        return self.coordinator.streaming

    # -- task thread ----------------------------------------------------------------------------
    def run(self) -> None:
        """Run until :meth:`stop` or a failure (re-raised here)."""
        metrics_mod.register(self.metrics)
        self.delivery.start()
        self._source_thread = threading.Thread(
            target=self.coordinator.run_guarded,
            args=(self.queue.fail, self._source_done),
            name=f"tidemark-source-{self.name}",
            daemon=True,
        )
        self._source_thread.start()
        interval = self.settings.offset_flush_interval_ms / 1000
        next_commit = time.monotonic() + interval
        next_sink_poll = 0.0
        process = self.delivery.process if self._direct is None else self._direct.task_process
        try:
            while True:
                if self._stopping.is_set():
                    wait = 0.05
                else:
                    # Wake up for the next offset commit even when the source is idle, so
                    # offset.flush.interval.ms holds rather than being rounded up to the
                    # next poll.interval.ms.
                    wait = min(self.queue.poll_interval, max(next_commit - time.monotonic(), 0))
                batch = self.queue.poll(wait)
                if batch:
                    process(batch)
                now = time.monotonic()
                if now >= next_sink_poll:
                    # Serves the producer's (error-only) delivery reports. It releases the
                    # GIL, handing it to the source thread, so not after every small batch:
                    # every 20 ms is prompt enough, and the flush before an offset is stored
                    # serves them anyway.
                    self.sink.poll(0)
                    next_sink_poll = now + 0.02
                if self.sink.error is not None:
                    raise SinkError(f"Kafka rejected a record: {self.sink.error}")
                self.coordinator.serve_store_request(self._commit, self.queue.taken_total)
                if time.monotonic() >= next_commit:
                    self._commit()
                    next_commit = time.monotonic() + interval
                if self._source_done.is_set() and not self.queue.size:
                    self.queue.poll(0)  # raises the source's failure, if it failed
                    break
                if self._stopping.is_set() and time.monotonic() > self._stop_deadline:
                    log.warning("%s: source did not stop in time; stopping anyway", self.name)
                    break
        finally:
            self._shutdown()

    def _process(self, batch: list[SourceRecord]) -> None:
        if self._direct is None:
            self.delivery.process(batch)
        else:
            self._direct.task_process(batch)  # under the lock the source's sends take

    def _commit(self, lock_timeout: float = -1) -> None:
        """Store what Kafka acknowledged. With the snapshot's direct send, under its lock:
        no record is handed to the producer between the flush and the offset write.
        ``lock_timeout``: give up (store nothing, it is re-sent) rather than wait longer."""
        direct = self._direct
        if direct is None:
            self._commit_now()
        elif direct.lock.acquire(timeout=lock_timeout):
            try:
                self._commit_now()
            finally:
                direct.lock.release()
        else:
            log.warning("%s: the source is still sending; offsets not stored", self.name)

    def _commit_now(self) -> None:
        taken = self.queue.taken_total  # every record taken so far was handed to the producer
        self.delivery.commit()
        if self.writer.pending is None:
            self.coordinator.stored(taken)

    # -- stop -----------------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask the engine to stop: the source stops reading, the queue is drained, the producer
        flushed and acknowledged offsets stored. :meth:`run` returns when that is done."""
        self._stop_deadline = time.monotonic() + self.settings.shutdown_timeout_ms / 1000
        self._stopping.set()
        self.dispatcher.stop_event.set()

    def _shutdown(self) -> None:
        self._stopping.set()
        self.dispatcher.stop_event.set()
        timeout = self.settings.shutdown_timeout_ms / 1000
        if self._source_thread is not None:
            self._source_thread.join(timeout)
        self.queue.close()
        remaining = self.sink.close(timeout)
        if remaining:
            log.warning(
                "%s: %d records not acknowledged by Kafka at shutdown; their offsets "
                "are not stored and they will be re-sent",
                self.name,
                remaining,
            )
        try:
            if not remaining and self.sink.error is None:
                # a source thread that did not stop may be in a direct send (Kafka down)
                self._commit(lock_timeout=timeout)
        finally:
            if self._source_thread is None or not self._source_thread.is_alive():
                # a source thread that outlived its join may still call the producer
                self.sink.release()
            post = self.dispatcher.post_processor
            for closeable in (self.key_converter, self.value_converter, self.transforms, post):
                close = getattr(closeable, "close", None)
                if callable(close):
                    close()
            self.connector.close()
            metrics_mod.unregister(self.metrics)
            self._stopped = True
