"""The batch's records read by each Python worker itself, with librdkafka, instead of by Spark.

Why: Spark's Kafka source reads the records on the JVM and hands them to the Python workers
through Arrow; on the benchmark's 250k-event batches that read, the headers and the hand-over
took ~3.6 s of a ~7.5 s parse phase, while a librdkafka consumer in the worker reads the same
records for ~0.4 CPU-s. The query still uses Spark's Kafka source for everything else (the
offsets per batch, ``maxOffsetsPerTrigger``, ``startingOffsets``, new partitions, the
checkpoint), so exactly-once is unchanged: the driver takes a batch's ranges from the query's
offset log (``offset_log``) and each task reads one range here, then folds it as before
(``worker.process_records``).

What Spark's source would do at the edges, done the same way:
- records are read ``read_uncommitted`` unless ``isolation.level`` says otherwise; transaction
  markers occupy offsets but are never records, so a range is done when the consumer's position
  reaches its end, not when a record with the last offset arrived;
- a range whose start is no longer in the log (retention, ``DeleteRecords``), or a new
  partition whose earliest offset is not 0, is data loss: with ``kafka.fail.on.data.loss``
  (the default) the batch fails naming topic, partition and offsets; without it the reader
  warns and reads what is left, as Spark's source does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cdc.apply.offset_log import EARLIEST
from cdc.apply.worker import Record, WorkerSettings, process_records

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

log = logging.getLogger("tidemark.apply.direct")

#: the range rows a direct batch's tasks get, one range per Spark partition
RANGE_DDL = "topic string, partition int, start bigint, end bigint"
CHUNK = 10_000
#: librdkafka's informational consumer errors (_TRANSPORT, _ALL_BROKERS_DOWN, _TIMED_OUT,
#: _PARTITION_EOF): it reconnects by itself
_TRANSIENT = frozenset({-195, -187, -185, -191})


class DataLossError(RuntimeError):
    """Records of a batch's range are gone from Kafka (``kafka.fail.on.data.loss``)."""


@dataclass(frozen=True)
class DirectSettings:
    bootstrap_servers: str
    #: librdkafka settings (already checked and translated by the config); kept out of the
    #: repr, since they may hold the SASL password or a private key
    options: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    fail_on_data_loss: bool = True
    #: how long a range may go without progress before the task fails
    stall_timeout_s: float = 120.0

    def consumer_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": "tidemark-apply-direct",  # never joined: ranges are assigned
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "isolation.level": "read_uncommitted",
            "fetch.wait.max.ms": 10,
            "fetch.max.bytes": 64 << 20,
            "max.partition.fetch.bytes": 16 << 20,
            "queued.max.messages.kbytes": 256 << 10,
            # what librdkafka fetches ahead, also past a range's end (thrown away when the
            # range is done): two consume() calls' worth, not its default 100k records
            "queued.min.messages": 2 * CHUNK,
            **dict(self.options),
        }


_CONSUMERS: dict[DirectSettings, Any] = {}


def _consumer(settings: DirectSettings) -> Any:
    """One consumer per settings and Python worker process (Spark reuses the workers, and a
    consumer's connections and metadata outlive a task)."""
    from confluent_kafka import Consumer

    consumer = _CONSUMERS.get(settings)
    if consumer is None:
        consumer = _CONSUMERS[settings] = Consumer(settings.consumer_config())
    return consumer


def _drop(settings: DirectSettings) -> None:
    consumer = _CONSUMERS.pop(settings, None)
    if consumer is not None:
        consumer.close()


def read_ranges(
    worker: WorkerSettings, direct: DirectSettings, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function over the ranges (:data:`RANGE_DDL`): the same output as
    ``worker.process`` over Spark's Kafka source."""
    ranges = [
        row
        for batch in batches
        for row in zip(*(col.to_pylist() for col in batch.columns), strict=True)
    ]
    yield from process_records(worker, _chunks(direct, ranges))


def _chunks(
    direct: DirectSettings, ranges: list[tuple[str, int, int, int]]
) -> Iterator[list[Record]]:
    consumer = _consumer(direct)
    try:
        for topic, partition, start, end in ranges:
            yield from _read_range(consumer, direct, topic, partition, start, end)
    except BaseException:
        _drop(direct)  # a consumer left mid-range is not reused
        raise
    consumer.unassign()


def _read_range(
    consumer: Any, direct: DirectSettings, topic: str, partition: int, start: int, end: int
) -> Iterator[list[Record]]:
    from confluent_kafka import KafkaError, TopicPartition

    where = f"{topic} partition {partition}"
    if start == EARLIEST:
        low, _ = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        if low > 0:
            _lost(direct, f"{where} is new in this batch but starts at offset {low}, not 0")
        start = low
    if start >= end:
        return
    consumer.assign([TopicPartition(topic, partition, start)])
    position = start
    stalled_since = time.monotonic()
    while position < end:
        messages = consumer.consume(min(CHUNK, end - position), 1.0)
        chunk: list[Record] = []
        for m in messages:
            error = m.error()
            if error is not None:
                if error.code() == KafkaError._AUTO_OFFSET_RESET:
                    low, _ = consumer.get_watermark_offsets(
                        TopicPartition(topic, partition), timeout=30
                    )
                    _lost(direct, f"{where}: offsets {position}..{low - 1} are no longer in Kafka")
                    consumer.assign([TopicPartition(topic, partition, low)])
                    position = low
                    break
                if error.retriable() or error.code() in _TRANSIENT:
                    log.warning("reading %s at offset %d: %s; retrying", where, position, error)
                    continue  # librdkafka reconnects; the stall timeout bounds the wait
                raise RuntimeError(f"reading {where} at offset {position}: {error}")
            offset = m.offset()
            if offset >= end:
                position = end
                break
            chunk.append((topic, partition, offset, m.key(), m.value(), m.headers()))
            position = offset + 1
        if chunk:
            stalled_since = time.monotonic()
            yield chunk
        elif position < end:
            # transaction markers are offsets without records: the position passes them
            (tp,) = consumer.position([TopicPartition(topic, partition)])
            if tp.offset >= end:
                return
            if time.monotonic() - stalled_since > direct.stall_timeout_s:
                tp = TopicPartition(topic, partition)
                _, high = consumer.get_watermark_offsets(tp, timeout=30)
                if high < end:
                    _lost(direct, f"{where} ends at offset {high}, before the batch's end {end}")
                    return
                raise TimeoutError(
                    f"reading {where}: no progress at offset {position} (batch ends at {end}) "
                    f"for {direct.stall_timeout_s:.0f} s"
                )


def _lost(direct: DirectSettings, what: str) -> None:
    if direct.fail_on_data_loss:
        raise DataLossError(
            f"{what}; records were lost before this job read them. Set "
            "kafka.fail.on.data.loss: false to go on with what is left"
        )
    log.warning("%s; going on with what is left (kafka.fail.on.data.loss is false)", what)
