"""Reading a topic's offset ranges in parallel processes, for :mod:`cdc.verify.kafka_target`.

A first read of a large topic is cut into offset ranges (:func:`split_ranges`); each is read
by a child process (``python -m cdc.verify.topic_ranges``, given its task on stdin and
answering on stdout, both pickled) that keeps only the last state per key of its range.
Child processes rather than threads because the per-event work is Python (the GIL); our own
``-m`` module rather than ``multiprocessing`` so that no caller's ``__main__`` is re-imported.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from cdc.verify.canonical import CanonicalError, KeyTexts, TableSpec
from cdc.verify.event_rows import Reader, compile_reader

POLL_TIMEOUT_S = 1.0
#: empty polls in a row after which a partition short of its end counts as read
QUIET_POLLS = 5
#: messages asked of librdkafka per consume() call
BATCH = 10_000
#: larger fetches than librdkafka's defaults (1 MB per partition per request, a 100k message
#: queue): reading a 1M-event topic took 6.9 s with the defaults and 2.1 s with these, the
#: difference being round trips to the broker; the caller's own settings win
FETCH_DEFAULTS: dict[str, Any] = {
    "max.partition.fetch.bytes": 16 << 20,
    "queued.min.messages": 1_000_000,
    "fetch.queue.backoff.ms": 0,
}
#: the smallest offset range a process is given
MIN_RANGE = 50_000

#: (keys alive at the range's end -> hash, keys its last event in the range removes, events
#: read, the offset the read stopped before)
RangeResult = tuple[dict[KeyTexts, int], list[KeyTexts], int, int]


#: where an Avro topic's writer schemas are (``cdc.converters.avro_json.RegistrySettings``, kept
#: untyped here so that reading JSON topics does not import the Avro extra)
Registry = Any


class TopicError(Exception):
    """A topic that cannot be read, or an event that does not fit the table."""


@dataclass(frozen=True)
class Range:
    """Offsets ``lo <= offset < hi`` of one partition, read by one process."""

    topic: str
    partition: int
    lo: int
    hi: int


def split_ranges(topic: str, bounds: Mapping[int, tuple[int, int]], workers: int) -> list[Range]:
    """The partitions' offset ranges cut into about ``workers`` pieces of similar size, in
    offset order per partition (merging them in this order keeps each key's last event)."""
    total = sum(hi - lo for lo, hi in bounds.values())
    size = max(MIN_RANGE, -(-total // max(1, workers)))
    out = []
    for p, (lo, hi) in sorted(bounds.items()):
        start = lo
        while start < hi:
            out.append(Range(topic, p, start, min(hi, start + size)))
            start += size
    return out


def read_range(
    config: Mapping[str, Any], spec: TableSpec, rng: Range, registry: Registry = None
) -> RangeResult:
    """One process's share: (keys alive at the range's end -> hash, keys whose last event in
    the range removes them, events read, the offset it stopped before: ``hi``, or less where
    the partition's readable end came first, e.g. an open transaction under
    read_committed)."""
    consumer = Consumer({**config, "enable.partition.eof": True})
    reader = compile_reader(spec)
    alive: dict[KeyTexts, int] = {}
    gone: set[KeyTexts] = set()
    events = 0
    next_offset = rng.lo
    try:
        consumer.assign([TopicPartition(rng.topic, rng.partition, rng.lo)])
        done, quiet = False, 0
        while not done and quiet < QUIET_POLLS:
            msgs = consumer.consume(BATCH, POLL_TIMEOUT_S)
            quiet = 0 if msgs else quiet + 1
            for msg in msgs:
                offset = msg.offset() or 0
                if is_eof(spec, msg) or offset >= rng.hi:
                    next_offset, done = min(offset, rng.hi), True
                    break
                next_offset = offset + 1
                events += 1
                key, h = read_event(reader, spec, msg, registry)
                if h is None:
                    alive.pop(key, None)
                    gone.add(key)
                else:
                    alive[key] = h
                    gone.discard(key)
            if not done:
                (pos,) = consumer.position([TopicPartition(rng.topic, rng.partition)])
                if pos.offset >= rng.hi:
                    next_offset, done = rng.hi, True
    finally:
        consumer.close()
    return alive, list(gone), events, next_offset


def is_eof(spec: TableSpec, msg: Message) -> bool:
    err = msg.error()
    if err is None:
        return False
    if err.code() == KafkaError._PARTITION_EOF:
        return True
    raise TopicError(f"topic {spec.topic}: {err}") from KafkaException(err)


def read_event(
    reader: Reader, spec: TableSpec, msg: Message, registry: Registry = None
) -> tuple[KeyTexts, int | None]:
    key, value = msg.key(), msg.value()
    try:
        if (key or b"")[:1] == b"\0" or (value or b"")[:1] == b"\0":  # Confluent's framing
            key, value = _avro_as_json(spec, key, value, registry)
        return reader(key, value)
    except (CanonicalError, KeyError, ValueError, TypeError, AttributeError) as exc:
        raise TopicError(
            f"topic {spec.topic} partition {msg.partition()} offset {msg.offset()}: cannot "
            f"compare this event with {spec.identifier}: {exc}"
        ) from exc


def _avro_as_json(
    spec: TableSpec, key: bytes | None, value: bytes | None, registry: Registry
) -> tuple[bytes | None, bytes | None]:
    """An Avro record (Confluent's framing) as the JSON converter would have written it, so
    one reader serves both (the apply job reads Avro the same way, cdc.converters.avro_json)."""
    from cdc.converters.avro_json import AvroInputError, decoder, is_avro, schema_id

    framed = value if is_avro(value) else key
    if registry is None:
        assert framed is not None
        raise TopicError(
            f"topic {spec.topic}: the events are Avro (schema id {schema_id(framed)}) but the "
            "connector's config names no value.converter.schema.registry.url"
        )
    dec = decoder(registry)
    try:
        if is_avro(key):
            key = dec.to_json(spec.topic, key, is_key=True)
        if is_avro(value):
            value = dec.to_json(spec.topic, value, is_key=False)
    except AvroInputError as exc:
        raise TopicError(f"topic {spec.topic}: {exc}") from exc
    except ConnectionError as exc:
        raise TopicError(f"topic {spec.topic}: the schema registry cannot be read: {exc}") from exc
    return key, value


def read_ranges(
    config: Mapping[str, Any], spec: TableSpec, ranges: list[Range], registry: Registry = None
) -> Iterator[tuple[Range, RangeResult]]:
    """Each range read by a child process, yielded in the order given. A child's error is
    raised here (a :class:`TopicError` as such)."""
    children = []
    try:
        for rng in ranges:
            child = subprocess.Popen(
                [sys.executable, "-m", "cdc.verify.topic_ranges"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            children.append(child)
            assert child.stdin is not None
            child.stdin.write(pickle.dumps((dict(config), spec, rng, registry)))
            child.stdin.close()
        for rng, child in zip(ranges, children, strict=True):
            assert child.stdout is not None
            with child.stdout:
                data = child.stdout.read()
            code = child.wait()
            if code != 0 or not data:
                raise TopicError(
                    f"topic {rng.topic} partition {rng.partition} offsets {rng.lo}-{rng.hi}: "
                    f"the reading process exited with code {code}"
                )
            ok, result = pickle.loads(data)
            if not ok:
                raise TopicError(result)
            yield rng, result
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
            if child.stdout is not None:
                child.stdout.close()


def _child() -> None:
    config, spec, rng, registry = pickle.loads(sys.stdin.buffer.read())
    try:
        answer: tuple[bool, Any] = (True, read_range(config, spec, rng, registry))
    except TopicError as exc:
        answer = (False, str(exc))
    sys.stdout.buffer.write(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))


if __name__ == "__main__":
    _child()
