"""Exactly-once: an event the failure mode handles (here one over the producer's size limit,
dead-lettered) inside a batch must not commit an offset of its own before the batch's
earlier records are in Kafka — a crash right then would lose them. Checked on the real
transactional producer by replaying the transactions the engine committed, in order."""

from __future__ import annotations

import secrets
import uuid
from typing import Any

import orjson
import pytest

from cdc.engine import Engine, EngineSettings
from cdc.offsets.kafka import KafkaOffsetStore
from cdc.spi import Operation, RowChange
from cdc.testing.memory import MemoryConnector, MemoryDatabase

pytestmark = pytest.mark.kafka


def test_dead_lettered_record_joins_its_batch_transaction(kafka: str) -> None:
    server, dbname = "eosf" + uuid.uuid4().hex[:6], "db" + uuid.uuid4().hex[:6]
    db = MemoryDatabase(dbname)
    table = db.create_table("items", [("id", "int"), ("v", "text")], ["id"])
    connector = MemoryConnector(
        {
            "name": server,
            "database.server.name": server,
            "memory.database": dbname,
            "event.processing.failure.handling.mode": "dead-letter",
            "errors.deadletterqueue.topic.name": f"{server}-dlq",
        }
    )
    store = KafkaOffsetStore(kafka, f"{server}-offsets", partitions=1)
    engine = Engine(
        connector,
        connector.config,
        store,
        EngineSettings(
            producer={"bootstrap.servers": kafka, "message.max.bytes": 100_000},
            exactly_once=True,
            transactional_id=f"tidemark-{server}",
        ),
    )
    committed: list[tuple[list[Any], dict[str, Any] | None]] = []
    current: list[Any] = []
    sink = engine.sink
    send, commit = sink.send, sink.commit

    def spy_send(topic: str, key: Any, value: Any, *args: Any, **kw: Any) -> None:
        current.append((topic, key, value))
        send(topic, key, value, *args, **kw)

    def spy_commit(*args: Any, **kw: Any) -> None:
        commit(*args, **kw)
        offsets = [v for t, _, v in current if t == f"{server}-offsets"]
        data = [k for t, k, _ in current if t.endswith(".items")]
        committed.append((data, offsets[-1] if offsets else None))
        current.clear()

    sink.send, sink.commit = spy_send, spy_commit  # type: ignore[method-assign]
    sink.init_transactions()
    store.start(settle=True)
    try:
        d = engine.dispatcher
        d.register_table(table)
        rows = [(1, "a"), (2, secrets.token_hex(100_000)), (3, "c")]
        for pos, row in enumerate(rows, 1):
            source = {"ts_ms": 0, "snapshot": False, "db": dbname, "table": "items"}
            source |= {"pos": pos, "txId": None}
            d.emit(RowChange(Operation.CREATE, table.id, None, row, source, {"pos": pos}))
        batch = engine.queue.poll(1.0)
        assert len(batch) == 3
        engine._process(batch)
    finally:
        sink.close(10)
        store.close()
    # Replaying the committed transactions in order: whenever an offset is committed, every
    # row before it that Kafka can take is already delivered.
    delivered = 0
    for data, offset in committed:
        delivered += len(data)
        if offset is not None:
            stored_pos = int(orjson.loads(offset)["pos"])
            must_have = len([p for p in (1, 3) if p <= stored_pos])
            assert delivered >= must_have, committed
    assert delivered == 2 and engine.metrics.dead_lettered == 1
