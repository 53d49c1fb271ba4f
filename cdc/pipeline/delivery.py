"""Delivery: records from the queue to Kafka, and their offsets into the store.

One send loop (:meth:`Delivery._send`: transforms, converters, the producer, failures in
order) and two small modes over it, as Kafka Connect has an abstract source task with an
at-least-once and an exactly-once subclass:

- :class:`AtLeastOnceDelivery` hands each batch to the producer and stores the newest offset
  at each ``offset.flush.interval.ms`` once Kafka acknowledged everything before it
  (:class:`~cdc.offsets.writer.OffsetWriter`). A crash can re-send events, never skip one.
- :class:`ExactlyOnceDelivery` writes each batch's records and its last offset in one Kafka
  transaction, so a ``read_committed`` consumer sees each event once.

Either way the offset stored is that of a source event whose records all went out: a
record marked ``continued`` (more records of its event follow, sharing its offset: a delete
and its tombstone, a primary-key change, a truncate of several tables) never has its offset
stored, because a connector resumes *after* the event an offset names. The queue cuts
batches at ``max.batch.size`` wherever that falls, so a batch may end inside an event.

The engine's task thread calls :meth:`~Delivery.start` once, :meth:`~Delivery.process` per
batch and :meth:`~Delivery.commit` on its flush interval; which mode runs is decided once, by
:func:`cdc.assembly.assemble`, not by flags in the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from cdc.converters import Converter
from cdc.converters.json import CompiledSend, compiled_send
from cdc.errors import ConversionError
from cdc.metrics import TaskMetrics
from cdc.offsets.kafka import KafkaOffsetStore
from cdc.offsets.store import OffsetStore
from cdc.offsets.writer import OffsetWriter
from cdc.pipeline.failures import FailureHandler
from cdc.record import SourceRecord
from cdc.sinks.kafka import SIZE_ADVICE, KafkaSink, SinkError
from cdc.transforms import TransformChain

log = logging.getLogger("tidemark.engine")


class Delivery:
    """The send loop shared by both modes; subclasses say how a batch is committed."""

    #: an ordinary record for a known topic may skip :meth:`_encode` (see :meth:`_send`)
    fast_path = True
    #: whether the source thread may call :meth:`process` itself (cdc.pipeline.direct_send)
    direct_send = False

    def __init__(
        self,
        *,
        sink: KafkaSink,
        store: OffsetStore,
        writer: OffsetWriter,
        transforms: TransformChain,
        key_converter: Converter,
        value_converter: Converter,
        failures: FailureHandler,
        metrics: TaskMetrics,
        partition: dict[str, Any],
        stopping: Callable[[], bool],
        flush_timeout_s: float,
    ) -> None:
        self.sink = sink
        self.store = store
        self.writer = writer
        self.transforms = transforms
        self.key_converter = key_converter
        self.value_converter = value_converter
        self.failures = failures
        self.metrics = metrics
        self.partition = partition
        self.stopping = stopping
        self.flush_timeout_s = flush_timeout_s
        #: the compiled loop for ordinary records (JSON converters; see :meth:`_send`)
        self._compiled_send = (
            compiled_send(key_converter, value_converter) if self.fast_path else None
        )

    # -- the hooks of a mode ----------------------------------------------------------------
    def start(self) -> None:
        """Before the source starts: make the stored offsets readable."""
        raise NotImplementedError

    def process(self, batch: list[SourceRecord]) -> None:
        """Send one batch from the queue."""
        raise NotImplementedError

    def commit(self) -> None:
        """Store what is safe to store (called on the flush interval and at shutdown)."""

    def _check_size(self, rec: SourceRecord, key: bytes | None, value: bytes | None) -> bool:
        """True when the record is over a limit and was handled here (not to be sent)."""
        return False

    def _failure_output(self, rec: SourceRecord) -> None:
        """Send what the failure mode emits instead of a record that could not be written."""
        raise NotImplementedError

    # -- the send loop ----------------------------------------------------------------------
    def _send(self, batch: list[SourceRecord]) -> int:
        """Hand a batch to the producer in order; returns how many records were sent.

        The per-record loop of the task thread. With no transforms and both converters
        JSON, the compiled loop (``send_json`` of ``cdc/converters/_json_c.c``) produces the
        ordinary records (known topic, no headers, no fixed partition, schemas already
        compiled) and stops at the first one it does not handle, which goes through
        :meth:`_send_one` here before the compiled loop goes on from the next. Otherwise
        every record goes through :meth:`_send_one`."""
        apply = self.transforms.apply if len(self.transforms) else None
        if apply is None and self._compiled_send is not None:
            return self._send_compiled(batch, self._compiled_send)
        send_one = self._send_one
        sent = 0
        for rec in batch:
            if not rec.topic:  # a position marker: nothing to produce
                continue
            # a dead-letter record (raw) skips the transforms, as in Kafka Connect: a filter
            # or router must not drop or divert it while its offset moves on
            out = rec if apply is None or rec.raw else apply(rec)
            if out is not None:
                sent += send_one(out)
        return sent

    def _send_compiled(self, batch: list[SourceRecord], loop: CompiledSend) -> int:
        send_json, key_state, value_state = loop
        known, produce = self.sink.fast_topics, self.sink.producer.produce
        send_one = self._send_one
        total, sent, at = len(batch), 0, 0
        while at < total:
            at, done = send_json(batch, at, known, key_state, value_state, produce)
            sent += done
            if at < total:
                sent += send_one(batch[at])
                at += 1
        return sent

    def _send_one(self, out: SourceRecord) -> int:
        """One record (after the transforms) to the producer; 1 if it was produced. An
        ordinary record goes straight to ``produce``; anything else (raw dead-letter
        records, a first record for a topic, a conversion failure, a full producer buffer)
        takes the general path."""
        sink = self.sink
        topic = out.topic
        if (
            out.raw
            or out.headers
            or out.kafka_partition is not None
            or not self.fast_path
            or topic not in sink.fast_topics
        ):
            encoded = self._encode(out)
            if encoded is None:
                return 0
            try:
                sink.send(topic, encoded[0], encoded[1], out.headers, out.kafka_partition)
            except KafkaException as exc:
                self._produce_failed(out, encoded[0], encoded[1], exc)
                return 0
            return 1
        try:
            key = self.key_converter.from_connect(topic, out.key_schema, out.key, is_key=True)
            value = self.value_converter.from_connect(
                topic, out.value_schema, out.value, is_key=False
            )
        except Exception as exc:
            self._encode_failed(out, exc)
            return 0
        try:
            sink.producer.produce(topic, value, key)
        except BufferError:
            sink.send(topic, key, value, None)  # waits for room, serving callbacks
        except KafkaException as exc:  # refused at once: over the producer's size limit
            self._produce_failed(out, key, value, exc)
            return 0
        return 1

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
        if self._check_size(rec, key, value):
            return None
        return key, value

    # -- records Kafka cannot take ----------------------------------------------------------
    def _encode_failed(self, rec: SourceRecord, exc: Exception) -> None:
        error = ConversionError(
            f"cannot serialise record for {rec.topic} at {rec.source_offset}: {exc}",
            position=rec.source_offset,
        )
        error.__cause__ = exc
        self.failures.handle(error, rec, self.partition, self._failure_output, rec.continued)

    def _produce_failed(
        self, rec: SourceRecord, key: bytes | None, value: bytes | None, exc: KafkaException
    ) -> None:
        """produce() refused the record at once. Over the producer's size limit it is an event
        Kafka cannot take, handled by the failure mode in order; anything else fails."""
        kerr = exc.args[0] if exc.args else None
        if not isinstance(kerr, KafkaError) or kerr.code() != KafkaError.MSG_SIZE_TOO_LARGE:
            raise SinkError(f"cannot produce to {rec.topic}: {exc}") from exc
        limit = f"the producer's {self.sink.max_message_bytes} bytes"
        self._too_large(rec, key, record_size(key, value, rec.headers), limit)

    def _too_large(self, rec: SourceRecord, key: bytes | None, size: int, limit: str) -> None:
        """A record larger than Kafka accepts: through event.processing.failure.handling.mode
        like any event that cannot be written; the dead-letter record carries its key,
        position and size, not the value."""
        error = ConversionError(
            f"record for {rec.topic} at {rec.source_offset} is {size} bytes, over the limit of "
            f"{limit} (MSG_SIZE_TOO_LARGE); {SIZE_ADVICE}",
            position=rec.source_offset,
        )
        summary = {"topic": rec.topic, "key": _text_or_bytes(key), "size": size}
        self.failures.handle(error, summary, self.partition, self._failure_output, rec.continued)

    def _flush(self, timeout: float) -> int:
        """Wait for Kafka's acknowledgements; a rejected record fails here, before any
        offset after it can be stored."""
        remaining = self.sink.flush(timeout)
        if self.sink.error is not None:
            raise SinkError(f"Kafka rejected a record: {self.sink.error}")
        return remaining


class AtLeastOnceDelivery(Delivery):
    """Records go to the producer as they come; offsets are stored on the flush interval,
    only once Kafka acknowledged every record before them."""

    #: an initial snapshot's source thread may call :meth:`process` itself
    #: (``cdc.pipeline.direct_send``)
    direct_send = True

    def start(self) -> None:
        self.store.start()

    def process(self, batch: list[SourceRecord]) -> None:
        self.metrics.records_sent += self._send(batch)
        # Records are sent in order, so the offset of the batch's last whole event covers
        # everything before it; a batch ending inside an event stores up to the event before
        # (the event is sent again after a crash: a duplicate, never a loss).
        last = batch[-1]
        if last.continued:
            offset = last_whole_offset(batch)
            if offset is not None:
                self.writer.track(offset)
            return
        self.writer.track(last.source_offset)

    def commit(self) -> None:
        self.writer.commit(self._flush, self.flush_timeout_s)
        self.metrics.offset_commits = self.writer.commits
        self.metrics.offset_commit_seconds = self.writer.commit_seconds

    def _failure_output(self, rec: SourceRecord) -> None:
        self.process([rec])

    def _check_size(self, rec: SourceRecord, key: bytes | None, value: bytes | None) -> bool:
        sink = self.sink
        if rec.topic not in sink.topic_limits:
            return False
        size = record_size(key, value, rec.headers)
        if size <= sink.limit_for(rec.topic):
            return False
        self._send_alone(rec, key, value, size)
        return True

    def _send_alone(
        self, rec: SourceRecord, key: bytes | None, value: bytes | None, size: int
    ) -> None:
        """A record over its topic's max.message.bytes before compression: whether the broker
        takes it depends on how well it compresses, so it is sent on its own once everything
        before it is acknowledged, and its outcome known before anything after it is sent; a
        rejection goes through the failure mode in order."""
        error = self.sink.deliver_alone(
            rec.topic, key, value, rec.headers, rec.kafka_partition, self.stopping
        )
        if error is None:
            self.metrics.records_sent += 1
            return
        if error.code() != KafkaError.MSG_SIZE_TOO_LARGE:
            raise SinkError(f"Kafka rejected a record for {rec.topic}: {error}")
        limit = f"max.message.bytes={self.sink.topic_limits[rec.topic]} of topic {rec.topic}"
        self._too_large(rec, key, size, limit)


class ExactlyOnceDelivery(Delivery):
    """Each batch's records and its last offset in one Kafka transaction (offsets in a Kafka
    topic, Connect's format); nothing to store on the flush interval."""

    #: every record through _encode, where the producer's limit is checked: produce() would
    #: refuse a larger one inside the transaction
    fast_path = False

    def __init__(self, *, store: KafkaOffsetStore, **parts: Any) -> None:
        super().__init__(store=store, **parts)
        self.kafka_store = store
        self.writer.transactional = True
        #: the records of a batch after its last whole event (``SourceRecord.continued``):
        #: they go in the next batch's transaction, with the rest of their event, so that an
        #: event is never split over two transactions (the first one's offset would claim
        #: the whole event delivered, and after a crash the rest would never come)
        self._carry: list[SourceRecord] = []

    def start(self) -> None:
        # Fence first, then read offsets (Kafka Connect's order): fencing waits for the
        # previous producer's decided transaction, and the settled read for its commit
        # markers, so its last offset record is seen and its events are not sent again.
        self.sink.init_transactions()
        self.kafka_store.start(settle=True)

    def process(self, batch: list[SourceRecord]) -> None:
        if not batch:
            return
        if self._carry:
            batch = self._carry + batch
            self._carry = []
        if batch[-1].continued:
            end = _whole_events_end(batch)
            self._carry = batch[end:]
            batch = batch[:end]
            if not batch:
                return
        last_offset = batch[-1].source_offset
        store, sink, writer = self.kafka_store, self.sink, self.writer
        sink.begin()
        try:
            sent = self._send(batch)
            topic, okey, ovalue = store.offset_record(
                writer.connector, self.partition, writer.stored_form(last_offset)
            )
            sink.send(topic, okey, ovalue, None, store.partition_for(okey))
            sink.commit()
        except BaseException:
            sink.abort()
            raise
        self.metrics.records_sent += sent
        writer.mark_stored(last_offset)

    def _failure_output(self, rec: SourceRecord) -> None:
        """A dead-letter record or position marker joins the open batch's transaction: a
        transaction of its own would store its offset before the batch's earlier records
        are in Kafka."""
        self.metrics.records_sent += self._send([rec])

    def _check_size(self, rec: SourceRecord, key: bytes | None, value: bytes | None) -> bool:
        size = record_size(key, value, rec.headers)
        if size <= self.sink.max_message_bytes:
            return False
        self._too_large(rec, key, size, f"the producer's {self.sink.max_message_bytes} bytes")
        return True


def _whole_events_end(batch: list[SourceRecord]) -> int:
    """How many records at the start of ``batch`` make whole source events: the index after
    its last record that is not ``continued`` (0 when there is none)."""
    for i in range(len(batch) - 1, -1, -1):
        if not batch[i].continued:
            return i + 1
    return 0


def last_whole_offset(batch: list[SourceRecord]) -> dict[str, Any] | None:
    """The offset of the last record of ``batch`` that ends a source event (not
    ``continued``): the newest offset that may be stored once the batch is acknowledged.
    None when the batch holds no event's end."""
    end = _whole_events_end(batch)
    return batch[end - 1].source_offset if end else None


def record_size(key: bytes | None, value: bytes | None, headers: Any) -> int:
    size = len(key or b"") + len(value or b"")
    for name, data in headers or ():
        size += len(name) + len(data or b"")
    return size


def _text_or_bytes(data: bytes | None) -> str | bytes | None:
    """The serialised key as text if it is text (JSON), else as bytes (shown in hex)."""
    try:
        return data.decode() if data is not None else None
    except UnicodeDecodeError:
        return data
