"""Exactly-once restart order: fence the previous producer first, then read the offsets.

The previous instance's last transaction (its events and its offset record) is committed,
but its commit markers land only while the new instance fences: the injected delay stands in
for a commit decided just before a crash whose markers the coordinator writes afterwards.
Reading the offsets before fencing misses that offset record and sends its events again.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from cdc.engine import Engine, EngineSettings
from cdc.offsets.kafka import KafkaOffsetStore
from cdc.testing.kafka_reader import read_topic
from cdc.testing.memory import MemoryConnector
from tests.integration.engine_child import build_memory_db
from tests.integration.engine_runner import running, start_engine

pytestmark = pytest.mark.kafka

TRANSACTIONS, ROWS = 40, 5


@pytest.fixture
def names(kafka: str) -> Iterator[tuple[str, str]]:
    server = "eo" + uuid.uuid4().hex[:8]
    db = "db" + uuid.uuid4().hex[:6]
    yield server, db
    admin = AdminClient({"bootstrap.servers": kafka})
    for future in admin.delete_topics(
        [f"{server}-offsets", f"{server}.{db}.items"], operation_timeout=30
    ).values():
        with contextlib.suppress(Exception):  # a topic that was never created
            future.result(30)


def test_restart_fences_before_reading_offsets(kafka: str, names: tuple[str, str]) -> None:
    server, db = names
    build_memory_db(db, TRANSACTIONS, ROWS)
    connector = MemoryConnector(
        {
            "name": server,
            "database.server.name": server,
            "memory.database": db,
            "snapshot.mode": "never",
            "poll.interval.ms": "50",
        }
    )
    partition = connector.source_partition()
    store = KafkaOffsetStore(kafka, f"{server}-offsets", partitions=3)
    store.start()
    earlier, last = 20, 150  # positions: an old stored offset, the previous instance's last
    store.put(server, partition, {"pos": earlier})

    # The previous instance's last transaction: its offset record written, commit pending.
    previous = Producer({"bootstrap.servers": kafka, "transactional.id": f"{server}-previous"})
    previous.init_transactions(30)
    previous.begin_transaction()
    topic, key, value = store.offset_record(server, partition, {"pos": last})
    previous.produce(topic, key=key, value=value, partition=store.partition_for(key))
    assert previous.flush(30) == 0

    engine = Engine(
        connector,
        connector.config,
        store,
        EngineSettings(
            producer={"bootstrap.servers": kafka},
            exactly_once=True,
            transactional_id=f"{server}-task",
        ),
    )
    fence = engine.sink.init_transactions

    def commit_lands_while_fencing(timeout: float = 60.0) -> None:
        previous.commit_transaction(30)
        fence(timeout)

    engine.sink.init_transactions = commit_lands_while_fencing  # type: ignore[method-assign]
    try:
        with running(lambda: start_engine(engine)):
            events = read_topic(
                kafka, f"{server}.{db}.items", min_count=1, isolation="read_committed"
            )
    finally:
        store.close()
    positions = sorted(e.value["source"]["pos"] for e in events)
    assert positions, "nothing streamed"
    # Resumed after the previous instance's last committed offset, not the older one.
    assert positions[0] > last, f"events at {positions[:3]} were sent again"
