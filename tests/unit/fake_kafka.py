"""A fake Kafka for unit tests that kill a task and reconcile: the producer, the sink parts the
delivery uses, and the offsets topic. At-least-once: a flush acknowledges what was produced.
Exactly-once: a transaction's records (its offset record too) become visible when it commits;
what was in flight when the test "kills" the task is simply never acknowledged."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdc.offsets.kafka import KafkaOffsetStore
from cdc.offsets.store import OffsetItem, OffsetStore, normalise, offset_key, parse_offset_value
from cdc.sinks.kafka import KafkaSink

Kafka = list[tuple[str, Any, Any]]
"""The records Kafka holds (acknowledged, or in committed transactions)."""


class FakeProducer:
    def __init__(self, sink: FakeSink) -> None:
        self.sink = sink
        self.inflight: Kafka = []

    def produce(self, topic: str, value: Any = None, key: Any = None, **kw: Any) -> None:
        self.inflight.append((topic, key, value))

    def poll(self, timeout: float = 0.0) -> int:
        return 0

    def flush(self, timeout: float = 0.0) -> int:
        if not self.sink.transactional:
            self.sink.kafka.extend(self.inflight)
            self.inflight.clear()
        return 0

    def __len__(self) -> int:
        return len(self.inflight)


class FakeSink:
    """The parts of ``KafkaSink`` the task uses."""

    max_message_bytes = 1_000_000

    def __init__(self, kafka: Kafka, store: OffsetStore) -> None:
        self.kafka = kafka
        self.store = store
        self.transactional = isinstance(store, FakeKafkaOffsetStore)
        self.producer = FakeProducer(self)
        self.known_topics: set[str] = set()
        self.fast_topics: set[str] = set()
        self.topic_limits: dict[str, int] = {}
        self.error = None

    def ensure_topics(self, topics: Any, overrides: Any = None) -> None:
        self.known_topics.update(topics)
        self.fast_topics.update(topics)

    def existing_topics(self, prefix: str, timeout: float = 10.0) -> list[str]:
        return []

    def send(
        self, topic: str, key: Any, value: Any, headers: Any, partition: int | None = None
    ) -> None:
        self.producer.produce(topic, value, key)

    def flush(self, timeout: float) -> int:
        return self.producer.flush(timeout)

    def poll(self, timeout: float = 0.0) -> int:
        return 0

    def delivery_lag(self) -> tuple[int, float]:
        return len(self.producer), 0.0

    def close(self, timeout: float = 30.0) -> int:
        return self.flush(timeout)

    def release(self) -> None:
        pass

    # exactly-once
    def init_transactions(self, timeout: float = 60.0) -> None:
        pass

    def begin(self) -> None:
        self.producer.inflight.clear()

    def commit(self, timeout: float = 60.0) -> None:
        store = self.store
        assert isinstance(store, FakeKafkaOffsetStore)
        for topic, key, value in self.producer.inflight:
            if topic == store.topic:
                offset = parse_offset_value(value)
                store.committed[key] = offset
                store.remember(offset)
            else:
                self.kafka.append((topic, key, value))
        self.producer.inflight.clear()

    def abort(self, timeout: float = 30.0) -> None:
        self.producer.inflight.clear()


class FakeKafkaOffsetStore(KafkaOffsetStore):
    """The offsets topic as a settled read sees it: the offset records of committed
    transactions. ``history``: every offset it took, in order."""

    def __init__(self) -> None:
        super().__init__("fake:9092")
        self.committed: dict[bytes, Any] = {}
        self.history: list[dict[str, Any]] = []

    def remember(self, offset: Any) -> None:
        if offset is not None:
            self.history.append(offset)

    def start(self, *, settle: bool = False) -> None:
        pass

    def close(self) -> None:
        pass

    def get(self, connector: str, partition: Mapping[str, Any]) -> Any:
        return self.committed.get(offset_key(connector, partition))

    def put_many(self, items: Any) -> None:
        entries: list[OffsetItem] = list(items)
        for key, _connector, _partition, offset in normalise(entries):
            self.remember(offset)
            self.committed[key] = offset

    def partition_for(self, key: bytes) -> int:
        return 0


def fake_sink(kafka: Kafka, store: OffsetStore) -> KafkaSink:
    return FakeSink(kafka, store)  # type: ignore[return-value]
