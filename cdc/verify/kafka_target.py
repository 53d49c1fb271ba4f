"""The topic as a copy of the table: the last event per key, read from every partition.

A key is alive when its last event carries a row (``c``, ``r``, ``u``, or an unwrapped row
from ``ExtractNewRecordState``); a delete (``op: d``, ``__deleted: true``) or a tombstone
removes it. This holds for compacted and uncompacted topics alike, since compaction only
drops events that a later event of the same key supersedes.

Each :meth:`KafkaTarget.refresh` consumes on from where the previous one stopped until every
partition reports its end, so re-checking a chunk while capture runs reads only what was
written since.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from cdc.verify.canonical import (
    CanonicalError,
    ColumnSpec,
    KeyTexts,
    TableSpec,
    from_event,
    row_hash,
)

_POLL_TIMEOUT_S = 1.0
#: empty polls in a row after which a partition short of its end counts as read
_QUIET_POLLS = 5


class TopicError(Exception):
    """A topic that cannot be read, or an event that does not fit the table."""


def _payload(raw: bytes | None) -> Any:
    if raw is None:
        return None
    doc = orjson.loads(raw)
    if isinstance(doc, dict) and "payload" in doc and "schema" in doc:
        return doc["payload"]
    return doc


class KafkaTarget:
    name = "kafka"

    def __init__(
        self, client_config: Mapping[str, Any], *, isolation: str = "read_committed"
    ) -> None:
        self._config = {
            **client_config,
            "group.id": f"tidemark-verify-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
        self._consumers: dict[str, Consumer] = {}
        self._rows: dict[str, dict[KeyTexts, int]] = {}
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

    def _consumer(self, topic: str) -> tuple[Consumer, int]:
        consumer = self._consumers.get(topic)
        if consumer is None:
            consumer = Consumer(self._config)
            meta = consumer.list_topics(topic, timeout=30)
            tmeta = meta.topics.get(topic)
            if tmeta is None or tmeta.error is not None or not tmeta.partitions:
                consumer.close()
                why = tmeta.error if tmeta is not None and tmeta.error else "it does not exist"
                raise TopicError(f"topic {topic} cannot be read: {why}")
            consumer.assign([TopicPartition(topic, p, 0) for p in sorted(tmeta.partitions)])
            self._consumers[topic] = consumer
        return consumer, len(consumer.assignment())

    def _catch_up(self, spec: TableSpec) -> None:
        """Consume until every partition reached the end it had when this call started (or
        reports its end: the end of a read_committed read may stop short of it)."""
        consumer, _ = self._consumer(spec.topic)
        rows = self._rows.setdefault(spec.topic, {})
        key_cols = spec.key_columns
        ends = {
            tp.partition: consumer.get_watermark_offsets(tp, timeout=30, cached=False)[1]
            for tp in consumer.assignment()
        }
        quiet = 0
        while ends and quiet < _QUIET_POLLS:
            msgs = consumer.consume(1000, _POLL_TIMEOUT_S)
            quiet = 0 if msgs else quiet + 1
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        ends.pop(int(msg.partition() or 0), None)
                        continue
                    raise TopicError(f"topic {spec.topic}: {err}") from KafkaException(err)
                self.events[spec.topic] = self.events.get(spec.topic, 0) + 1
                try:
                    self._apply(spec, key_cols, rows, msg.key(), msg.value())
                except (CanonicalError, KeyError, orjson.JSONDecodeError) as exc:
                    raise TopicError(
                        f"topic {spec.topic} partition {msg.partition()} offset "
                        f"{msg.offset()}: cannot compare this event with {spec.identifier}: "
                        f"{exc}"
                    ) from exc
            for tp in consumer.position([TopicPartition(spec.topic, p) for p in list(ends)]):
                if tp.offset >= 0 and tp.offset >= ends[tp.partition]:
                    ends.pop(tp.partition, None)

    @staticmethod
    def _apply(
        spec: TableSpec,
        key_cols: tuple[ColumnSpec, ...],
        rows: dict[KeyTexts, int],
        raw_key: bytes | None,
        raw_value: bytes | None,
    ) -> None:
        key_doc = _payload(raw_key)
        if not isinstance(key_doc, dict):
            raise CanonicalError(f"the key {key_doc!r} is not a struct of {spec.key}")
        key = tuple(from_event(c, key_doc[c.name]) or "" for c in key_cols)
        value = _payload(raw_value)
        if value is None:
            rows.pop(key, None)
            return
        if "op" in value and ("after" in value or "before" in value):
            after = value.get("after") if value["op"] != "d" else None
        else:  # an unwrapped row (ExtractNewRecordState)
            after = None if str(value.get("__deleted", "false")) == "true" else value
        if after is None:
            rows.pop(key, None)
            return
        rows[key] = row_hash(from_event(c, after.get(c.name)) for c in spec.columns)
