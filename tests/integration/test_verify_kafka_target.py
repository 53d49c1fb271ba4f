"""The topic side of `tidemark verify` read by parallel processes (offset ranges of every
partition, merged in offset order) holds exactly the last state per key that one in-process
read holds, including keys updated, deleted and re-created across range edges; and a later
refresh reads on from where the processes stopped."""

from __future__ import annotations

import random
import uuid

import orjson
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cdc.verify import kafka_target, topic_ranges
from cdc.verify.canonical import ColumnSpec, TableSpec, row_hash
from cdc.verify.kafka_target import KafkaTarget

pytestmark = [pytest.mark.kafka]

SPEC_COLS = (ColumnSpec("id", "int", "int"), ColumnSpec("v", "text", "text"))


def test_parallel_read_equals_a_single_read(kafka: str, monkeypatch: pytest.MonkeyPatch) -> None:
    topic = f"tvk_{uuid.uuid4().hex[:8]}.public.t"
    admin = AdminClient({"bootstrap.servers": kafka})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result()
    spec = TableSpec("public.t", topic, SPEC_COLS, ("id",))
    producer = Producer({"bootstrap.servers": kafka, "linger.ms": 20})
    rng = random.Random(3)
    state: dict[int, str] = {}

    def send(n: int) -> None:
        for i in range(n):
            k = rng.randrange(400)
            r = rng.random()
            key = orjson.dumps({"id": k})
            if r < 0.15 and k in state:
                del state[k]
                tombstone = rng.random() < 0.5
                value = None if tombstone else orjson.dumps({"op": "d", "after": None})
                producer.produce(topic, key=key, value=value)
            else:
                state[k] = f"v{i}"
                after = {"id": k, "v": state[k]}
                producer.produce(topic, key=key, value=orjson.dumps({"op": "u", "after": after}))
        assert producer.flush(30) == 0

    def expected() -> dict[tuple[str, ...], int]:
        return {(str(k),): row_hash([str(k), v]) for k, v in state.items()}

    send(6000)
    monkeypatch.setattr(kafka_target, "PARALLEL_MIN_EVENTS", 1000)
    monkeypatch.setattr(topic_ranges, "MIN_RANGE", 300)
    parallel = KafkaTarget({"bootstrap.servers": kafka}, processes=3)
    single = KafkaTarget({"bootstrap.servers": kafka}, processes=1)
    try:
        for target in (parallel, single):
            target.refresh([spec])
            assert dict(target.rows(spec)) == expected()
            assert target.events[topic] == 6000
        send(500)  # read on from where the processes stopped
        parallel.refresh([spec])
        assert dict(parallel.rows(spec)) == expected()
        assert parallel.events[topic] == 6500
    finally:
        parallel.close()
        single.close()
        admin.delete_topics([topic])
