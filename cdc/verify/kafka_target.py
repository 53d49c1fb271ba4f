"""The topic as a copy of the table: the last event per key, read from every partition.

A key is alive when its last event carries a row (``c``, ``r``, ``u``, or an unwrapped row
from ``ExtractNewRecordState``); a delete (``op: d``, ``__deleted: true``) or a tombstone
removes it. This holds for compacted and uncompacted topics alike, since compaction only
drops events that a later event of the same key supersedes.

The first read of a large topic is split into offset ranges read by processes in parallel
(each keeps the last state per key of its range; merged in offset order); events are turned
into key and row hash by a reader generated per table (:mod:`cdc.verify.event_rows`). Each
:meth:`KafkaTarget.refresh` then consumes on from where the previous one stopped until every
partition reports its end, so re-checking a chunk while capture runs reads only what was
written since.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from cdc.verify.canonical import KeyTexts, TableSpec
from cdc.verify.event_rows import Reader, compile_reader
from cdc.verify.topic_ranges import (
    BATCH,
    FETCH_DEFAULTS,
    POLL_TIMEOUT_S,
    QUIET_POLLS,
    Range,
    Registry,
    TopicError,
    is_eof,
    read_event,
    read_ranges,
    split_ranges,
)

#: a first read of at least this many events is split across processes
PARALLEL_MIN_EVENTS = 200_000


def default_processes() -> int:
    """One CPU left to the database and the broker: on 2 CPUs reading in parallel measured
    no faster than one process (docs/verify.md)."""
    return max(1, min(4, len(os.sched_getaffinity(0)) - 1))


class KafkaTarget:
    """The topics as copies. ``processes``: how many processes share the first read of a
    large topic (default: :func:`default_processes`); 1 reads in this process."""

    name = "kafka"

    def __init__(
        self,
        client_config: Mapping[str, Any],
        *,
        isolation: str = "read_committed",
        processes: int | None = None,
        registry: Registry = None,
        field_name: Callable[[str], str] | None = None,
    ) -> None:
        self.registry = registry
        self.field_name = field_name
        self._config = {
            **FETCH_DEFAULTS,
            **client_config,
            "group.id": f"tidemark-verify-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
        self.processes = processes or default_processes()
        self._consumers: dict[str, Consumer] = {}
        self._rows: dict[str, dict[KeyTexts, int]] = {}
        self._readers: dict[str, Reader] = {}
        #: events read per topic (all of them, superseded ones included)
        self.events: dict[str, int] = {}

    def refresh(self, specs: Sequence[TableSpec]) -> None:
        for spec in specs:
            self._catch_up(spec)

    def rows(self, spec: TableSpec) -> Mapping[KeyTexts, int]:
        return self._rows.get(spec.topic, {})

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
        self._consumers.clear()

    def _consumer(self, spec: TableSpec) -> Consumer:
        """The topic's consumer; on first use, a large topic is read up to its current end by
        processes in parallel and the consumer starts where they stopped."""
        topic = spec.topic
        consumer = self._consumers.get(topic)
        if consumer is not None:
            return consumer
        consumer = Consumer(self._config)
        meta = consumer.list_topics(topic, timeout=30)
        tmeta = meta.topics.get(topic)
        if tmeta is None or tmeta.error is not None or not tmeta.partitions:
            consumer.close()
            why = tmeta.error if tmeta is not None and tmeta.error else "it does not exist"
            raise TopicError(f"topic {topic} cannot be read: {why}")
        bounds = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)
            for p in sorted(tmeta.partitions)
        }
        starts = {p: lo for p, (lo, _) in bounds.items()}
        total = sum(hi - lo for lo, hi in bounds.values())
        if self.processes > 1 and total >= PARALLEL_MIN_EVENTS:
            starts.update(self._read_parallel(spec, split_ranges(topic, bounds, self.processes)))
        consumer.assign([TopicPartition(topic, p, off) for p, off in starts.items()])
        self._consumers[topic] = consumer
        return consumer

    def _as_written(self, spec: TableSpec) -> TableSpec:
        """The spec with its columns named as the events name them (Avro sanitizes names
        such as ``weird-col`` to ``weird_col``)."""
        rename = self.field_name
        if rename is None:
            return spec
        return replace(
            spec,
            columns=tuple(replace(c, name=rename(c.name)) for c in spec.columns),
            key=tuple(rename(k) for k in spec.key),
        )

    def _read_parallel(self, spec: TableSpec, ranges: list[Range]) -> dict[int, int]:
        """Read the ranges in processes and merge them; returns the offset per partition
        this process reads on from (where the first range that stopped short stopped)."""
        rows = self._rows.setdefault(spec.topic, {})
        starts: dict[int, int] = {}
        short: set[int] = set()
        results = read_ranges(self._config, self._as_written(spec), ranges, self.registry)
        for rng, (alive, gone, events, next_offset) in results:
            if rng.partition in short:
                continue  # read again from where the earlier range stopped
            # in offset order: a later range overrides an earlier one
            for key in gone:
                rows.pop(key, None)
            rows.update(alive)
            self.events[spec.topic] = self.events.get(spec.topic, 0) + events
            starts[rng.partition] = next_offset
            if next_offset < rng.hi:
                short.add(rng.partition)
        return starts

    def _catch_up(self, spec: TableSpec) -> None:
        """Consume until every partition reached the end it had when this call started (or
        reports its end: the end of a read_committed read may stop short of it)."""
        consumer = self._consumer(spec)
        rows = self._rows.setdefault(spec.topic, {})
        reader = self._readers.get(spec.topic)
        if reader is None:
            reader = self._readers[spec.topic] = compile_reader(self._as_written(spec))
        ends = {
            tp.partition: consumer.get_watermark_offsets(tp, timeout=30, cached=False)[1]
            for tp in consumer.assignment()
        }
        quiet = 0
        while ends and quiet < QUIET_POLLS:
            msgs = consumer.consume(BATCH, POLL_TIMEOUT_S)
            quiet = 0 if msgs else quiet + 1
            for msg in msgs:
                if is_eof(spec, msg):
                    ends.pop(int(msg.partition() or 0), None)
                    continue
                self.events[spec.topic] = self.events.get(spec.topic, 0) + 1
                key, h = read_event(reader, spec, msg, self.registry)
                if h is None:
                    rows.pop(key, None)
                else:
                    rows[key] = h
            for tp in consumer.position([TopicPartition(spec.topic, p) for p in list(ends)]):
                if tp.offset >= 0 and tp.offset >= ends[tp.partition]:
                    ends.pop(tp.partition, None)
