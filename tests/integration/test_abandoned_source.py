"""A stopped engine's source thread that outlives it writes no offsets (issue 17).

When a task stops (a rebalance hands it to another worker, a restart) and its source thread
does not end within the shutdown timeout — PostgreSQL waiting for a replication slot still
held by the previous connection, a connect retry — the engine gives up on it and the task
starts elsewhere. Seen in the distributed test: such a thread woke up later and recorded its
snapshot's start (``{"snapshot": true, "snapshot_origin": ...}``) in the offsets topic, outside
any transaction, after the new owner had stored its own offsets. The next owner then took
the snapshot for interrupted, redid it and streamed again from that stale origin: every row
twice for a ``read_committed`` consumer even with exactly-once.

With exactly-once the snapshot's start is not recorded at all: its rows are visible only with
their offsets, which carry the origin. A task that dies before its first commit (a kill -9
right after the connector's first snapshot began, also seen in that test) leaves no offsets,
so the next owner snapshots afresh and streams from its own snapshot, not from the dead
attempt's origin (whose changes the new snapshot already holds: seen twice before).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from cdc.engine import Engine, EngineSettings
from cdc.offsets.kafka import KafkaOffsetStore
from cdc.offsets.memory import MemoryOffsetStore
from cdc.spi import SnapshotSource, SourceContext
from cdc.testing.kafka_reader import read_topic
from cdc.testing.memory import MemoryConnector, MemoryDatabase, MemorySnapshot
from tests.integration.engine_runner import start_engine

pytestmark = pytest.mark.kafka


class HeldSnapshot(SnapshotSource):
    """The memory snapshot, held before it records its start until ``release`` is set (as a
    source waits for a replication slot)."""

    def __init__(self, inner: MemorySnapshot, held: threading.Event, release: threading.Event):
        self.inner, self.held, self.release = inner, held, release

    def execute(
        self, ctx: SourceContext, previous_offset: Mapping[str, Any] | None, include_data: bool
    ) -> dict[str, Any]:
        self.held.set()
        self.release.wait(30)
        return self.inner.execute(ctx, previous_offset, include_data)


class HeldConnector(MemoryConnector):
    held = threading.Event()
    release = threading.Event()

    def snapshot_source(self) -> SnapshotSource:
        inner = super().snapshot_source()
        assert isinstance(inner, MemorySnapshot)
        return HeldSnapshot(inner, self.held, self.release)


def test_source_thread_of_a_stopped_engine_stores_no_snapshot_marker(kafka: str) -> None:
    server, dbname = "abandon" + uuid.uuid4().hex[:6], "db" + uuid.uuid4().hex[:6]
    db = MemoryDatabase(dbname)
    db.create_table("items", [("id", "int"), ("v", "text")], ["id"])
    db.transaction([("c", "items", (1, "a"))])
    cfg = {"name": server, "database.server.name": server, "memory.database": dbname}
    connector = HeldConnector(cfg)
    HeldConnector.held.clear()
    HeldConnector.release.clear()
    store = MemoryOffsetStore()
    engine = Engine(
        connector,
        connector.config,
        store,
        EngineSettings(producer={"bootstrap.servers": kafka}, shutdown_timeout_ms=300),
    )
    run = start_engine(engine, connector)
    try:
        assert HeldConnector.held.wait(30), "the snapshot did not start"
        source = engine._source_thread
        assert source is not None
        run.stop()  # the source thread is still held: the engine stops without it
        assert source.is_alive()
        # Meanwhile the task runs elsewhere and stores its progress.
        partition = connector.source_partition()
        store.put(server, partition, {"pos": 1})
    finally:
        HeldConnector.release.set()
    source.join(10)
    assert not source.is_alive()
    time.sleep(0.1)
    assert store.get(server, partition) == {"pos": 1}, store.get(server, partition)
    assert not run.errors, run.errors


def test_exactly_once_task_dead_before_its_first_commit_snapshots_afresh(kafka: str) -> None:
    server, dbname = "eoabandon" + uuid.uuid4().hex[:6], "db" + uuid.uuid4().hex[:6]
    db = MemoryDatabase(dbname)
    db.create_table("items", [("id", "int"), ("v", "text")], ["id"])
    db.transaction([("c", "items", (i, "a")) for i in range(1, 6)])
    cfg = {
        "name": server,
        "database.server.name": server,
        "memory.database": dbname,
        "poll.interval.ms": "20",
    }
    settings = EngineSettings(
        producer={"bootstrap.servers": kafka},
        exactly_once=True,
        transactional_id=f"{server}-0",
        shutdown_timeout_ms=300,
    )
    topic = f"{server}.{dbname}.items"
    store = KafkaOffsetStore(kafka, f"{server}-offsets", partitions=3)
    try:
        # The first attempt records its start, then dies before any row is committed.
        first = MemoryConnector(cfg)
        engine = Engine(first, first.config, store, settings)
        started, release = threading.Event(), threading.Event()
        record_start = engine.dispatcher.snapshot_start_hook
        assert record_start is not None

        def hold(position: Mapping[str, Any]) -> dict[str, Any]:
            origin = record_start(position)
            started.set()
            release.wait(30)
            return origin

        engine.dispatcher.snapshot_start_hook = hold
        run = start_engine(engine, first)
        assert started.wait(30), "the first snapshot did not start"
        run.stop()
        release.set()
        store.refresh()
        assert store.get(server, first.source_partition()) is None
        # Changes while no task runs; the next one's snapshot holds them.
        db.transaction([("u", "items", (i, "b")) for i in range(1, 6)])
        second = MemoryConnector(cfg)
        engine = Engine(second, second.config, store, settings)
        run = start_engine(engine, second)
        try:
            db.transaction([("c", "items", (6, "c"))])
            events = read_topic(kafka, topic, min_count=6, isolation="read_committed")
        finally:
            run.stop()
        assert not run.errors, run.errors
    finally:
        store.close()
        AdminClient({"bootstrap.servers": kafka}).delete_topics([topic, f"{server}-offsets"])
    images = sorted((e.after["id"], e.after["v"]) for e in events if e.after)
    assert images == [(1, "b"), (2, "b"), (3, "b"), (4, "b"), (5, "b"), (6, "c")], images
