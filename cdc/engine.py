"""The embedded engine: one connector task from database to Kafka, with offsets.

Two threads. The *source* thread runs the snapshot and then the streaming source; everything
it reports goes through the dispatcher into the bounded queue. The *task* thread (the caller
of :meth:`Engine.run`) takes batches from the queue, applies transforms and converters, hands
records to the producer, and stores offsets once Kafka acknowledged them, then tells the
source (so PostgreSQL can release WAL). The worker hosts engines; tests and users can embed
one directly, as with Debezium's embedded engine.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from cdc import metrics as metrics_mod
from cdc.column_mappers import ColumnMappers, KeyColumns
from cdc.config import Config
from cdc.converters import Converter, converter_from_config
from cdc.errors import ConfigError, ConversionError
from cdc.filters import ColumnFilter, TableFilter
from cdc.metrics import TaskMetrics
from cdc.offsets.kafka import KafkaOffsetStore
from cdc.offsets.store import OffsetStore
from cdc.offsets.writer import OffsetWriter
from cdc.pipeline import reselect
from cdc.pipeline.dispatcher import EventDispatcher
from cdc.pipeline.failures import FailureHandler
from cdc.pipeline.queue import ChangeEventQueue, QueueClosed
from cdc.record import SourceRecord
from cdc.schema.table_schema import TableSchemaBuilder
from cdc.sinks.kafka import SIZE_ADVICE, KafkaSink, SinkError
from cdc.spi import Connector, PositionReached, StreamingSource
from cdc.topics import TopicNamer
from cdc.transforms import TransformChain, build_chain

log = logging.getLogger("tidemark.engine")


@dataclass
class EngineSettings:
    """Worker-level settings for one task (the connector's own keys live in its config)."""

    producer: dict[str, Any]
    offset_flush_interval_ms: int = 5000
    offset_flush_timeout_ms: int = 5000
    exactly_once: bool = False
    transactional_id: str | None = None
    shutdown_timeout_ms: int = 30000
    task_id: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class Engine:
    def __init__(
        self,
        connector: Connector,
        config: Config,
        offset_store: OffsetStore,
        settings: EngineSettings,
    ) -> None:
        self.connector = connector
        self.config = config
        self.name = str(config.get("name") or config["database.server.name"])
        self.server = str(config["database.server.name"])
        self.store = offset_store
        self.settings = settings
        self.partition = connector.source_partition()
        if settings.exactly_once and not isinstance(offset_store, KafkaOffsetStore):
            raise ConfigError(
                [
                    (
                        "exactly.once.source.support",
                        "requires the Kafka offset store (offset.storage=kafka)",
                    )
                ]
            )
        self.metrics = TaskMetrics(
            plugin=_plugin_name(connector.type_name),
            server=self.server,
            connector=self.name,
            task=settings.task_id,
        )
        self.queue: ChangeEventQueue[SourceRecord] = ChangeEventQueue(
            max_size=config["max.queue.size"],
            max_batch_size=config["max.batch.size"],
            poll_interval_ms=config["poll.interval.ms"],
            max_bytes=config["max.queue.size.in.bytes"],
            size_of=_approx_size,
        )
        self.metrics.queue = self.queue
        raw = config.raw
        self.failures = FailureHandler(
            config["event.processing.failure.handling.mode"],
            self.metrics,
            config.get("errors.deadletterqueue.topic.name"),
        )
        self.dispatcher = self._build_dispatcher()
        reselect.attach(self.dispatcher, connector, raw)  # post.processors, if configured
        self.transforms: TransformChain = build_chain(raw)
        self.key_converter: Converter = converter_from_config(raw, is_key=True)
        self.value_converter: Converter = converter_from_config(raw, is_key=False)
        self.sink = KafkaSink(
            settings.producer,
            transactional_id=settings.transactional_id if settings.exactly_once else None,
            topic_defaults={
                "partitions": config.get("topic.creation.default.partitions", 1),
                "replication.factor": config.get("topic.creation.default.replication.factor", 1),
                "cleanup.policy": config.get("topic.creation.default.cleanup.policy", "delete"),
            },
            create_topics=bool(config.get("topic.creation.enable", True)),
        )
        self.metrics.delivery = self.sink.delivery_lag
        # Healthy under load, everything is acknowledged at each offset commit at the latest.
        self.metrics.ack_alarm_s = (
            settings.offset_flush_interval_ms + settings.offset_flush_timeout_ms
        ) / 1000
        self.streaming: StreamingSource | None = None
        self.writer = OffsetWriter(
            offset_store, self.name, self.partition, on_committed=self._committed
        )
        self._stopping = threading.Event()
        self._stop_deadline = float("inf")
        self._source_done = threading.Event()
        self._source_thread: threading.Thread | None = None
        #: where streaming must start if a snapshot restarts (see resume_origin)
        self._earlier: dict[str, Any] | None = None
        #: an offset the source waits to see stored before it goes on (snapshot complete)
        self._store_request: dict[str, Any] | None = None
        self._stored_event = threading.Event()
        #: the records of the exactly-once batch being built (see _process_one)
        self._tx_records: list[tuple[SourceRecord, bytes | None, bytes | None]] | None = None
        self.dispatcher.snapshot_start_hook = self._snapshot_starting
        self.state = "CREATED"

    # -- construction ---------------------------------------------------------------------------
    def _build_dispatcher(self) -> EventDispatcher:
        cfg, raw, conn = self.config, self.config.raw, self.connector
        namer = TopicNamer(self.server, cfg["heartbeat.topics.prefix"])
        mappers = ColumnMappers(raw)
        problems = list(mappers.problems)
        try:
            key_columns = KeyColumns(cfg.get("message.key.columns"))
        except ValueError as exc:
            problems.append(("message.key.columns", str(exc)))
        if problems:
            raise ConfigError(problems)
        sanitize = cfg.get("sanitize.field.names")
        if sanitize is None:
            sanitize = "avro" in str(raw.get("value.converter", "")).lower()
        builder = TableSchemaBuilder(
            conn.value_converters(),
            namer,
            column_filter=ColumnFilter(cfg["column.include.list"], cfg["column.exclude.list"]),
            mappers=mappers,
            key_columns=key_columns,
            sanitize_field_names=bool(sanitize),
            propagate_source_type=cfg["column.propagate.source.type"],
            unavailable_placeholder=str(
                cfg.get("toasted.value.placeholder")
                or cfg.get("unavailable.value.placeholder")
                or "__debezium_unavailable_value"
            ),
        )
        return EventDispatcher(
            connector_type=conn.source_connector_name(),
            server_name=self.server,
            source_partition=self.partition,
            source_schema=conn.source_schema(),
            schema_builder=builder,
            table_filter=table_filter_from_config(
                cfg, getattr(conn, "system_schemas", frozenset())
            ),
            queue=self.queue,
            metrics=self.metrics,
            namer=namer,
            failures=self.failures,
            tombstones_on_delete=cfg["tombstones.on.delete"],
            provide_transaction_metadata=cfg["provide.transaction.metadata"],
            skipped_operations=frozenset(cfg["skipped.operations"]) - {"none"},
            heartbeat_interval_ms=cfg["heartbeat.interval.ms"],
            heartbeat_action=getattr(conn, "heartbeat_action", None),
            include_schema_changes=bool(cfg.get("include.schema.changes", False)),
            envelope_version=cfg.get("envelope.version", "1.2"),
            source_derive=conn.source_derive(),
        )

    # -- source thread --------------------------------------------------------------------------
    def _source_main(self) -> None:
        d = self.dispatcher
        try:
            stored = self.store.get(self.name, self.partition)
            snapshotter = self.connector.snapshotter()
            offset: Mapping[str, Any] | None = stored
            if snapshotter.should_snapshot(stored):
                delay = int(self.config.get("snapshot.delay.ms", 0)) / 1000
                if delay > 0:
                    log.info(
                        "%s: snapshot.delay.ms: waiting %.1f s before the snapshot",
                        self.name,
                        delay,
                    )
                    if d.stop_event.wait(delay):
                        return
                if stored is None:
                    self._announce_full_snapshot(snapshotter.mode)
                self._earlier = resume_origin(stored)
                if self._earlier is not None:
                    log.info(
                        "%s: an earlier attempt may have emitted events from %s; streaming "
                        "after this snapshot starts there",
                        self.name,
                        self._earlier,
                    )
                log.info("%s: starting snapshot (snapshot.mode=%s)", self.name, snapshotter.mode)
                d.phase = self.metrics.snapshot
                self.state = "SNAPSHOT"
                try:
                    offset = self.connector.snapshot_source().execute(
                        d, stored, snapshotter.include_data()
                    )
                except BaseException:
                    self.metrics.snapshot.finish(aborted=True)
                    raise
                self.metrics.snapshot.finish()
                d.emit(PositionReached(dict(offset)))
                d.phase = self.metrics.streaming
                self._store_now(dict(offset))
            elif stored is not None and "snapshot_origin" in stored:
                # An interrupted snapshot, and a mode that does not redo it: stream from the
                # position recorded before its first row.
                offset = stored["snapshot_origin"]
            if snapshotter.should_stream() and not self._stopping.is_set():
                self.state = "STREAMING"
                self.streaming = self.connector.streaming_source()
                with _frozen_heap():
                    self.streaming.execute(d, offset)
        except QueueClosed:
            pass
        except BaseException as exc:
            if not self._stopping.is_set():
                log.error("%s: source failed: %s", self.name, exc)
            self.queue.fail(exc)
        finally:
            self._source_done.set()

    def _announce_full_snapshot(self, mode: str) -> None:
        """No offsets stored: normal on a connector's first start, a warning when its topics
        already hold events (the offsets were deleted, or point elsewhere), because every
        row is then sent again. Said in the log and in the task's status."""
        reason = getattr(self.store, "missing_reason", None) or "no offsets stored"
        written = self.sink.existing_topics(f"{self.server}.")
        if not written:
            log.info("%s: first start, full snapshot (snapshot.mode=%s)", self.name, mode)
            return
        notice = (
            f"full snapshot although {len(written)} topic(s) of this connector exist "
            f"({', '.join(written[:3])}{', ...' if len(written) > 3 else ''}): {reason}"
        )
        log.warning("%s: %s (snapshot.mode=%s)", self.name, notice, mode)
        self.metrics.notices.append(notice)

    def _snapshot_starting(self, position: Mapping[str, Any]) -> dict[str, Any]:
        """The snapshot is about to emit rows: record durably, before the first one, where
        streaming must start if this attempt is interrupted, so that a restart never streams
        from later than a position this attempt (or an earlier one) emitted events from."""
        resume = dict(self._earlier if self._earlier is not None else position)
        marker = {"snapshot": True, "snapshot_origin": resume}
        self.store.put(self.name, self.partition, marker)
        self.writer.snapshot_origin = resume
        log.info("%s: snapshot under way; resume position %s recorded", self.name, resume)
        return dict(resume)

    def _store_now(self, offset: dict[str, Any]) -> None:
        """Block the source until the task thread stored ``offset`` (Kafka acknowledged every
        record before it), so a crash right after a finished snapshot does not redo it."""
        self._store_request = offset
        while not self._stored_event.wait(0.1):
            if self._stopping.is_set() or self.dispatcher.stop_event.is_set():
                return
        self.writer.snapshot_origin = None

    # -- task thread ----------------------------------------------------------------------------
    def run(self) -> None:
        """Run until :meth:`stop` or a failure (re-raised here)."""
        metrics_mod.register(self.metrics)
        if self.settings.exactly_once:
            # Fence first, then read offsets (Kafka Connect's order): fencing waits for the
            # previous producer's decided transaction, and the settled read for its commit
            # markers, so its last offset record is seen and its events are not sent again.
            self.sink.init_transactions()
            assert isinstance(self.store, KafkaOffsetStore)
            self.store.start(settle=True)
        else:
            self.store.start()
        self._source_thread = threading.Thread(
            target=self._source_main, name=f"tidemark-source-{self.name}", daemon=True
        )
        self._source_thread.start()
        interval = self.settings.offset_flush_interval_ms / 1000
        next_commit = time.monotonic() + interval
        next_sink_poll = 0.0
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
                    self._process(batch)
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
                if self._store_request is not None:
                    self._serve_store_request()
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
        if self.settings.exactly_once:
            self._process_transactional(batch)
            return
        # The per-record loop of the task thread, kept flat: everything it touches is bound
        # once per batch, transforms are skipped when there are none, and an ordinary record
        # (known topic, no headers, no fixed partition) goes straight to the producer. Anything
        # else (raw dead-letter records, a first record for a topic, a conversion failure, a
        # full producer buffer) takes the general path, in the same order.
        sink = self.sink
        known = sink.fast_topics
        produce = sink.producer.produce
        apply = self.transforms.apply if len(self.transforms) else None
        key_of = self.key_converter.from_connect
        value_of = self.value_converter.from_connect
        sent = 0
        for rec in batch:
            if not rec.topic:  # a position marker: nothing to produce
                continue
            out = rec if apply is None else apply(rec)
            if out is None:
                continue
            topic = out.topic
            if out.raw or out.headers or out.kafka_partition is not None or topic not in known:
                encoded = self._encode(out)
                if encoded is None:
                    continue
                try:
                    sink.send(topic, encoded[0], encoded[1], out.headers, out.kafka_partition)
                except KafkaException as exc:
                    self._produce_failed(out, encoded[0], encoded[1], exc)
                    continue
                sent += 1
                continue
            try:
                key = key_of(topic, out.key_schema, out.key, is_key=True)
                value = value_of(topic, out.value_schema, out.value, is_key=False)
            except Exception as exc:
                self._encode_failed(out, exc)
                continue
            try:
                produce(topic, value, key)
            except BufferError:
                sink.send(topic, key, value, None)  # waits for room, serving callbacks
            except KafkaException as exc:  # refused at once: over the producer's size limit
                self._produce_failed(out, key, value, exc)
                continue
            sent += 1
        self.metrics.records_sent += sent
        # Records are sent in order, so the batch's last offset covers everything in it.
        self.writer.track(batch[-1].source_offset)

    def _encode(self, rec: SourceRecord) -> tuple[bytes | None, bytes | None] | None:
        if rec.raw:
            self.sink.ensure_topics([rec.topic])
            return rec.key, rec.value
        try:
            key = self.key_converter.from_connect(rec.topic, rec.key_schema, rec.key, is_key=True)
            value = self.value_converter.from_connect(
                rec.topic, rec.value_schema, rec.value, is_key=False
            )
        except Exception as exc:
            self._encode_failed(rec, exc)
            return None
        sink = self.sink
        if rec.topic not in sink.known_topics:
            sink.ensure_topics((rec.topic,))
        if self.settings.exactly_once:
            # produce() would refuse it inside the transaction and abort the batch.
            size = _record_size(key, value, rec.headers)
            if size > sink.max_message_bytes:
                limit = f"the producer's {sink.max_message_bytes} bytes"
                self._too_large(rec, key, size, limit)
                return None
        elif rec.topic in sink.topic_limits:
            size = _record_size(key, value, rec.headers)
            if size > sink.limit_for(rec.topic):
                self._send_alone(rec, key, value, size)
                return None
        return key, value

    def _send_alone(
        self, rec: SourceRecord, key: bytes | None, value: bytes | None, size: int
    ) -> None:
        """A record over its topic's max.message.bytes before compression: whether the broker
        takes it depends on how well it compresses, so it is sent on its own once everything
        before it is acknowledged, and its outcome known before anything after it is sent; a
        rejection goes through the failure mode in order."""
        error = self.sink.deliver_alone(
            rec.topic, key, value, rec.headers, rec.kafka_partition, self._stopping.is_set
        )
        if error is None:
            self.metrics.records_sent += 1
            return
        if error.code() != KafkaError.MSG_SIZE_TOO_LARGE:
            raise SinkError(f"Kafka rejected a record for {rec.topic}: {error}")
        limit = f"max.message.bytes={self.sink.topic_limits[rec.topic]} of topic {rec.topic}"
        self._too_large(rec, key, size, limit)

    def _encode_failed(self, rec: SourceRecord, exc: Exception) -> None:
        error = ConversionError(
            f"cannot serialise record for {rec.topic} at {rec.source_offset}: {exc}",
            position=rec.source_offset,
        )
        error.__cause__ = exc
        self.failures.handle(error, rec, self.partition, self._process_one)

    def _produce_failed(
        self, rec: SourceRecord, key: bytes | None, value: bytes | None, exc: KafkaException
    ) -> None:
        """produce() refused the record at once. Over the producer's size limit it is an event
        Kafka cannot take, handled by the failure mode in order; anything else fails."""
        kerr = exc.args[0] if exc.args else None
        if not isinstance(kerr, KafkaError) or kerr.code() != KafkaError.MSG_SIZE_TOO_LARGE:
            raise SinkError(f"cannot produce to {rec.topic}: {exc}") from exc
        limit = f"the producer's {self.sink.max_message_bytes} bytes"
        self._too_large(rec, key, _record_size(key, value, rec.headers), limit)

    def _too_large(self, rec: SourceRecord, key: bytes | None, size: int, limit: str) -> None:
        """A record larger than Kafka accepts: through event.processing.failure.handling.mode
        like any event that cannot be written; the dead-letter record carries its key,
        position and size, not the value."""
        error = ConversionError(
            f"record for {rec.topic} at {rec.source_offset} is {size} bytes, over the limit of "
            f"{limit} (MSG_SIZE_TOO_LARGE); {SIZE_ADVICE}",
            position=rec.source_offset,
        )
        summary = {
            "topic": rec.topic,
            "key": _text_or_bytes(key),
            "size": size,
        }
        self.failures.handle(error, summary, self.partition, self._process_one)

    def _process_one(self, rec: SourceRecord) -> None:
        """What the failure mode emits instead of a record that could not be written (a
        dead-letter record, or a position marker). Inside an exactly-once batch it joins that
        batch's transaction: a transaction of its own would store its offset before the
        batch's earlier records are in Kafka."""
        pending = self._tx_records
        if pending is None:
            self._process([rec])
        elif rec.topic:
            enc = self._encode(rec)
            if enc is not None:
                pending.append((rec, enc[0], enc[1]))

    def _process_transactional(self, batch: list[SourceRecord]) -> None:
        """Exactly-once: the batch's records and its last offset in one Kafka transaction."""
        store = self.store
        assert isinstance(store, KafkaOffsetStore)
        encoded: list[tuple[SourceRecord, bytes | None, bytes | None]] = []
        last_offset: dict[str, Any] | None = None
        self._tx_records = encoded
        try:
            for rec in batch:
                last_offset = rec.source_offset
                if rec.is_marker:
                    continue
                out = self.transforms.apply(rec)
                if out is None:
                    continue
                enc = self._encode(out)
                if enc is not None:
                    encoded.append((out, enc[0], enc[1]))
        finally:
            self._tx_records = None
        if last_offset is None:
            return
        self.sink.begin()
        try:
            for out, key, value in encoded:
                self.sink.send(out.topic, key, value, out.headers, out.kafka_partition)
            topic, okey, ovalue = store.offset_record(
                self.name, self.partition, self.writer.stored_form(last_offset)
            )
            self.sink.send(topic, okey, ovalue, None, store.partition_for(okey))
            self.sink.commit()
        except BaseException:
            self.sink.abort()
            raise
        self.metrics.records_sent += len(encoded)
        self.writer.mark_stored(last_offset)

    def _serve_store_request(self) -> None:
        request = self._store_request
        if self.writer.pending == request:
            self._commit()
        if self.writer.last_committed == request:
            self._store_request = None
            self._stored_event.set()

    def _commit(self) -> None:
        if self.settings.exactly_once:
            return
        self.writer.commit(self._flush, self.settings.offset_flush_timeout_ms / 1000)
        self.metrics.offset_commits = self.writer.commits
        self.metrics.offset_commit_seconds = self.writer.commit_seconds

    def _flush(self, timeout: float) -> int:
        """Wait for Kafka's acknowledgements; a rejected record fails here, before any
        offset after it can be stored."""
        remaining = self.sink.flush(timeout)
        if self.sink.error is not None:
            raise SinkError(f"Kafka rejected a record: {self.sink.error}")
        return remaining

    def _committed(self, offset: dict[str, Any]) -> None:
        if self.streaming is not None:
            try:
                self.streaming.commit_offset(offset)
            except Exception:
                log.warning(
                    "%s: source could not confirm offset %s", self.name, offset, exc_info=True
                )

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
                self._commit()
        finally:
            post = self.dispatcher.post_processor
            for closeable in (self.key_converter, self.value_converter, self.transforms, post):
                close = getattr(closeable, "close", None)
                if callable(close):
                    close()
            self.connector.close()
            metrics_mod.unregister(self.metrics)
            self.state = "STOPPED"


_freeze_lock = threading.Lock()
_freeze_users = 0


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """Streaming allocates a few container objects per event, and the records that wait in
    the queue survive into the oldest GC generation, so full collections come every few
    thousand events, and each one scans every object of the process (modules, schemas,
    driver state): measured at about 2.5 µs per event, a sixth of the source thread. What
    exists when streaming starts is long-lived, so it is moved out of the collector's view
    (``gc.freeze``) while any engine streams; when the last one stops it is handed back
    (``gc.unfreeze``), so cyclic garbage among those objects is still collected then.
    Reference-counted freeing is unaffected either way."""
    global _freeze_users
    with _freeze_lock:
        _freeze_users += 1
        gc.freeze()
    try:
        yield
    finally:
        with _freeze_lock:
            _freeze_users -= 1
            if _freeze_users == 0:
                gc.unfreeze()


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


def _text_or_bytes(data: bytes | None) -> str | bytes | None:
    """The serialised key as text if it is text (JSON), else as bytes (shown in hex)."""
    try:
        return data.decode() if data is not None else None
    except UnicodeDecodeError:
        return data


def _record_size(key: bytes | None, value: bytes | None, headers: Any) -> int:
    size = len(key or b"") + len(value or b"")
    for name, data in headers or ():
        size += len(name) + len(data or b"")
    return size


def _approx_size(rec: SourceRecord) -> int:
    """Cheap size estimate for ``max.queue.size.in.bytes`` (exact sizes would cost a
    serialisation per event)."""
    value = rec.value
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, dict):
        after = value.get("after") or value.get("before") or {}
        return 200 + 40 * len(after) if isinstance(after, dict) else 200
    return 100


def _plugin_name(type_name: str) -> str:
    return {"postgresql": "postgres", "sqlserver": "sql_server"}.get(type_name, type_name)


def table_filter_from_config(cfg: Config, system: frozenset[str]) -> TableFilter:
    return TableFilter(
        database_include=cfg.get("database.include.list", []),
        database_exclude=cfg.get("database.exclude.list", []),
        schema_include=cfg.get("schema.include.list", []),
        schema_exclude=cfg.get("schema.exclude.list", []),
        table_include=cfg["table.include.list"],
        table_exclude=cfg["table.exclude.list"],
        system=system,
    )
