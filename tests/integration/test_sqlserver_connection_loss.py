"""A lost database connection under the worker: the streaming source fails with a
RetriableError, the worker restarts the task with backoff, and the topic ends up equal to
the table (at-least-once across the restart)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import SqlServerInfo
from tests.integration.sqlserver_harness import SqlServerHarness, converged
from worker.config import parse_config
from worker.daemon import Daemon

pytestmark = [pytest.mark.sqlserver, pytest.mark.kafka]


@pytest.fixture
def h(sqlserver: SqlServerInfo, kafka: str) -> Iterator[SqlServerHarness]:
    harness = SqlServerHarness(sqlserver, kafka)
    yield harness
    harness.drop()


def test_lost_connection_restarts_the_task_and_loses_nothing(
    h: SqlServerHarness, tmp_path: Path
) -> None:
    t = h.create_table("lost", "id int PRIMARY KEY, v int NOT NULL")
    cfg = h.config("lost")
    settings = "\n".join(f"      {k}: '{v}'" for k, v in cfg.items() if k != "name")
    daemon = Daemon(
        parse_config(
            f"""
worker:
  bootstrap.servers: {h.kafka}
  rest.port: 0
  state.dir: {tmp_path}
  offset.storage: memory
  offset.flush.interval.ms: 200
connectors:
  - name: {cfg["name"]}
    config:
{settings}
      errors.retry.delay.initial.ms: '100'
      errors.retry.delay.max.ms: '400'
"""
        )
    )
    try:
        daemon.start()
        assert daemon.herder is not None
        runner = daemon.herder.runners()[0]

        def streaming() -> bool:
            m = runner.metrics
            return m is not None and bool(m.streaming.connected)

        wait_until(streaming)
        h.sql(f'INSERT INTO dbo."{t}" SELECT g, g FROM generate_series(1, 50) g')
        h.read(cfg, "lost", min_count=50, settle=0.2)
        # the session is killed on the server (as a failover or a network cut would)
        (killed,) = h.sql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = %s AND application_name = 'tidemark'",
            params=(h.dbname,),
        )[0]
        assert killed >= 1
        h.sql(
            f'INSERT INTO dbo."{t}" SELECT g, g FROM generate_series(51, 80) g',
            f'UPDATE dbo."{t}" SET v = -v WHERE id <= 10',
            f'DELETE FROM dbo."{t}" WHERE id BETWEEN 11 AND 20',
        )
        wait_until(lambda: runner.restarts["retriable"] >= 1)
        converged(h, cfg, "lost")
        status: dict[str, Any] = dict(daemon.herder.connector_status(cfg["name"])["tasks"][0])
        assert status["state"] == "RUNNING"
    finally:
        assert daemon.stop()


def wait_until(predicate: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)
