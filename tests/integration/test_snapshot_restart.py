"""The core's snapshot restart rule, on real Kafka with the in-memory connector.

A snapshot that is interrupted and redone must not stream from the redo's own position: rows
the first attempt already emitted and that were deleted before the redo would stay alive
downstream forever (only ``r`` events, never a ``d``). The reconciliation below compares the
last event per key in the topic with the table, as a compacted topic or a sink would see it.
And a finished snapshot is stored at once, so a crash right after it does not redo it.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from cdc.engine import Engine, EngineSettings
from cdc.offsets.file import FileOffsetStore
from cdc.testing.kafka_reader import Event, read_topic
from cdc.testing.memory import MemoryConnector, MemoryDatabase
from tests.integration.engine_runner import RunningConnector, running, start_engine

pytestmark = pytest.mark.kafka

ROWS = 300


def _config(server: str, db: str, **extra: str) -> dict[str, Any]:
    return {
        "name": server,
        "database.server.name": server,
        "memory.database": db,
        "snapshot.mode": "initial",
        "max.batch.size": "20",
        "poll.interval.ms": "20",
        **extra,
    }


def _engine(kafka: str, cfg: dict[str, Any], offsets: Path, flush_ms: int = 50) -> Engine:
    connector = MemoryConnector(cfg)
    return Engine(
        connector,
        connector.config,
        FileOffsetStore(str(offsets)),
        EngineSettings(producer={"bootstrap.servers": kafka}, offset_flush_interval_ms=flush_ms),
    )


def wait_streaming(run: RunningConnector, timeout: float = 30.0) -> None:
    """The memory connector has no connection to report; the engine's phase says it."""
    deadline = time.monotonic() + timeout
    while run.engine.state != "STREAMING":
        if run.errors:
            raise run.errors[0]
        assert time.monotonic() < deadline, "connector did not start streaming"
        time.sleep(0.02)


def _last_per_key(events: list[Event]) -> dict[int, Any]:
    """What a compacted topic keeps: the last value per key (None for a tombstone)."""
    last: dict[int, Any] = {}
    for e in events:
        last[e.key["id"]] = e.after if e.value is not None else None
    return {k: v for k, v in last.items() if v is not None}


def _table(db: MemoryDatabase) -> dict[int, Any]:
    return {row[0]: {"id": row[0], "v": row[1]} for row in db.tables["items"].rows.values()}


@pytest.mark.parametrize("fail_after", [1, 40, 299])
def test_interrupted_snapshot_then_deletes_reconcile(
    kafka: str, tmp_path: Path, fail_after: int
) -> None:
    server, dbname = "snaprs" + uuid.uuid4().hex[:6], "db" + uuid.uuid4().hex[:6]
    db = MemoryDatabase(dbname)
    db.create_table("items", [("id", "int"), ("v", "text")], ["id"])
    db.transaction([("c", "items", (i, f"v{i}")) for i in range(1, ROWS + 1)])
    offsets = tmp_path / "offsets.json"

    first = _config(server, dbname, **{"memory.snapshot.fail.after.rows": str(fail_after)})
    engine = _engine(kafka, first, offsets)
    with pytest.raises(RuntimeError, match=r"fail\.after\.rows"):
        engine.run()

    # Between the attempts: rows the first attempt may have emitted are deleted or changed.
    db.transaction([("d", "items", (i,)) for i in range(1, ROWS + 1, 7)])
    db.transaction([("u", "items", (i, f"w{i}")) for i in range(2, ROWS + 1, 11) if i % 7 != 1])

    cfg = _config(server, dbname)
    with running(lambda: start_engine(_engine(kafka, cfg, offsets))) as run:
        wait_streaming(run)
        db.transaction([("d", "items", (3,)), ("c", "items", (ROWS + 1, "new"))])
        topic = f"{server}.{dbname}.items"
        expected = _table(db)
        events = read_topic(kafka, topic, min_count=len(expected), settle=2.0)
    assert _last_per_key(events) == expected


def test_finished_snapshot_is_stored_before_streaming(kafka: str, tmp_path: Path) -> None:
    """With a long flush interval, nothing but the snapshot's completion can have stored the
    offset by the time streaming runs; a restart then streams instead of snapshotting."""
    server, dbname = "snapst" + uuid.uuid4().hex[:6], "db" + uuid.uuid4().hex[:6]
    db = MemoryDatabase(dbname)
    db.create_table("items", [("id", "int"), ("v", "text")], ["id"])
    db.transaction([("c", "items", (i, f"v{i}")) for i in range(1, 51)])
    offsets = tmp_path / "offsets.json"
    cfg = _config(server, dbname)
    engine = _engine(kafka, cfg, offsets, flush_ms=600_000)
    run = start_engine(engine)
    try:
        wait_streaming(run)
        stored = FileOffsetStore(str(offsets))
        stored.start()
        offset = stored.get(server, {"server": server})
        stored.close()
    finally:
        run.stop()
    assert offset is not None and not offset.get("snapshot"), offset
    assert "snapshot_origin" not in offset
