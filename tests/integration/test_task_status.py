"""A full re-snapshot because no offsets are stored is logged at WARNING with the reason and
shown in the task's status (Kafka Connect's ``trace``, state RUNNING) and in
``tidemark status``."""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from cdc.engine import Engine, EngineSettings
from cdc.offsets.file import FileOffsetStore
from cdc.testing.memory import MemoryConnector
from tests.integration.engine_child import build_memory_db
from worker.rest.status_view import render_status
from worker.task import RetryPolicy, TaskRunner

pytestmark = pytest.mark.kafka


@pytest.fixture
def server(kafka: str) -> Iterator[str]:
    name = "rs" + uuid.uuid4().hex[:8]
    yield name
    admin = AdminClient({"bootstrap.servers": kafka})
    topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(name)]
    for future in admin.delete_topics(topics or [name], operation_timeout=30).values():
        with contextlib.suppress(Exception):  # a topic that was never created
            future.result(30)


class StatusClient:
    """What ``tidemark status`` asks the worker, answered from one task runner."""

    url = "http://test"

    def __init__(self, runner: TaskRunner) -> None:
        self.runner = runner

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        if path == "/health":
            return 200, {"status": "healthy"}
        status = {
            "name": self.runner.connector,
            "connector": {"state": "RUNNING", "worker_id": "test"},
            "tasks": [self.runner.status()],
        }
        return 200, {"connectors": {self.runner.connector: {"status": status, "tasks": []}}}

    def get(self, path: str) -> Any:
        return {"version": "test"}


def test_full_snapshot_without_offsets_warns_and_shows_in_status(
    kafka: str, server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = "db" + uuid.uuid4().hex[:6]
    build_memory_db(db, 5, 2)
    connector = MemoryConnector(
        {
            "name": server,
            "database.server.name": server,
            "memory.database": db,
            "snapshot.mode": "initial",
            "poll.interval.ms": "50",
        }
    )
    offsets = tmp_path / "offsets.json"

    def run(until: Any) -> tuple[dict[str, Any], str]:
        runner = TaskRunner(
            server,
            0,
            lambda: Engine(
                connector,
                connector.config,
                FileOffsetStore(offsets),
                EngineSettings(producer={"bootstrap.servers": kafka}),
            ),
            RetryPolicy(),
            worker_id="test",
        )
        runner.start()
        try:
            deadline = time.monotonic() + 60
            while not until(runner):
                assert time.monotonic() < deadline, runner.status()
                time.sleep(0.05)
            return runner.status(), render_status(StatusClient(runner))  # type: ignore[arg-type]
        finally:
            runner.shutdown()
            assert runner.join(60)

    # A first start snapshots without a word of warning: nothing was delivered before.
    with caplog.at_level(logging.WARNING, logger="tidemark.engine"):
        first, _ = run(lambda r: offsets.exists())
    assert first["state"] == "RUNNING" and "trace" not in first
    assert not [r for r in caplog.records if "full snapshot" in r.getMessage()]
    # The offsets are lost while the topics hold events: every row is sent again. Say so.
    offsets.unlink()
    offsets.with_name(offsets.name + ".prev").unlink(missing_ok=True)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tidemark.engine"):
        status, text = run(lambda r: "full snapshot" in r.status().get("trace", ""))
    assert status["state"] == "RUNNING"
    reason = f"neither offsets file {offsets} nor {offsets}.prev exists"
    assert reason in status["trace"]
    assert "warning    full snapshot although 1 topic(s) of this connector exist" in text
    assert reason in text
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any(reason in r.getMessage() for r in warned)
