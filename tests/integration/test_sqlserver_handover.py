"""Snapshot then streaming under 4 concurrent writers (AC-27), and 5 SIGKILLs of the
connector process at random points under writes (AC-39): each time the last event per key in
the topic equals the row, nothing missing (duplicates allowed after a kill)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import SqlServerInfo
from tests.integration.sqlserver_harness import SqlServerHarness, Writers, converged

pytestmark = [pytest.mark.sqlserver, pytest.mark.kafka]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def h(sqlserver: SqlServerInfo, kafka: str) -> Iterator[SqlServerHarness]:
    harness = SqlServerHarness(sqlserver, kafka)
    yield harness
    harness.drop()


def seed(h: SqlServerHarness, table: str, rows: int = 2000) -> None:
    h.create_table(table, "id int PRIMARY KEY, v int NOT NULL")
    h.sql(f'INSERT INTO dbo."{h.name(table)}" SELECT g, g FROM generate_series(1, {rows}) g')


@pytest.mark.parametrize("isolation", ["snapshot", "exclusive", "read_committed"])
def test_snapshot_hands_over_under_concurrent_writers(h: SqlServerHarness, isolation: str) -> None:
    seed(h, "handover")
    cfg = h.config(
        "handover",
        **{"snapshot.isolation.mode": isolation, "snapshot.fetch.size": "50"},
    )
    writers = Writers(h, h.name("handover"), keys=2400).__enter__()
    try:
        time.sleep(0.3)  # the snapshot starts under writes
        with h.running(cfg):
            time.sleep(1.5)  # ... and streaming continues under them
            writers.__exit__()
            assert writers.commits > 20
            converged(h, cfg, "handover")
    finally:
        writers.__exit__()


def test_five_kills_under_writes_lose_nothing(h: SqlServerHarness, tmp_path: Path) -> None:
    seed(h, "kills", rows=500)
    cfg = h.config("kills", **{"max.iteration.transactions": "20"})
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps({"config": cfg, "kafka": h.kafka, "offsets": str(tmp_path / "offsets.json")})
    )

    log = tmp_path / "child.log"

    def child() -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "tests.integration.sqlserver_harness", str(spec)],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=out,
            )

    rnd = random.Random(7)
    with Writers(h, h.name("kills"), keys=700):
        for _ in range(5):
            proc = child()
            time.sleep(rnd.uniform(0.8, 2.5))
            assert proc.poll() is None, log.read_text()[-2000:]
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
    proc = child()
    try:
        converged(h, cfg, "kills", timeout=90)
    finally:
        proc.terminate()
        proc.wait(20)
