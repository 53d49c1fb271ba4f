"""PostgreSQL: the offsets file deleted while the worker is stopped, with writers running
before, between and after the two runs: the next run starts without offsets and the topic
still equals the table. (Measured: it streams on from its replication slot rather than
snapshotting again; duplicates stay near zero.)"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from connectors.postgres.verify import verify_side
from tests.faults.scenario import SENTINEL, Writer, check, process_alive, wait_for_sentinel
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness
from tests.integration.test_postgres_snapshot_restart import run_child
from tests.integration.test_verify_postgres import pg_harness

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

ROWS = 2000


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    yield from pg_harness(postgres, kafka, "fol")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-3000:]


def test_offsets_file_deleted_while_stopped(h: PgHarness, tmp_path: Path, runs: int) -> None:
    for run in range(runs):
        table = f"items{run}"
        tmp = tmp_path / f"run{run}"
        tmp.mkdir()
        h.sql(
            f"CREATE TABLE {table} (id int PRIMARY KEY, v text, n int)",
            f"ALTER TABLE {table} REPLICA IDENTITY FULL",
            f"INSERT INTO {table} SELECT g, 'v' || g, 0 FROM generate_series(1, {ROWS}) g",
        )
        cfg = h.config(table_include_list=f"public.{table}")
        topic = h.topic(cfg, table)
        connect = lambda: psycopg.connect(h.pg.dsn(h.dbname), autocommit=True)  # noqa: E731
        writer = Writer(connect, table, ROWS, 13 + run)
        writer.start()
        proc = run_child(h, cfg, tmp)
        try:
            time.sleep(3.0)
            stop(proc)
            (tmp / "offsets.json").unlink()
            time.sleep(0.5)  # writes while stopped
            proc = run_child(h, cfg, tmp)
            time.sleep(2.0)
            writer.stop()
            h.sql(f"INSERT INTO {table} VALUES ({SENTINEL}, 'end', 0)")

            wait_for_sentinel(h.kafka, topic, process_alive(proc))
        finally:
            writer.stop_event.set()
            if proc.poll() is None:
                stop(proc)
        check(
            "PostgreSQL: offsets file deleted while stopped",
            verify_side(cfg),
            h.kafka,
            f"public.{table}",
            topic,
        )
        h.drop_slot(cfg)
