"""A stopped engine's source thread that outlives it writes no offsets (issue 17).

When a task stops (a rebalance hands it to another worker, a restart) and its source thread
does not end within the shutdown timeout — PostgreSQL waiting for a replication slot still
held by the previous connection, a connect retry — the engine gives up on it and the task
starts elsewhere. Seen in the distributed test: such a thread woke up later and recorded its
snapshot's start (``{"snapshot": true, "snapshot_origin": ...}``) in the offsets topic, outside
any transaction, after the new owner had stored its own offsets. The next owner then took
the snapshot for interrupted, redid it and streamed again from that stale origin: every row
twice for a ``read_committed`` consumer even with exactly-once.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from cdc.engine import Engine, EngineSettings
from cdc.offsets.memory import MemoryOffsetStore
from cdc.spi import SnapshotSource, SourceContext
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
