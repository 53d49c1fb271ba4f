"""PostgreSQL: the worker SIGKILLed at random points (during the initial snapshot, right after
it, during streaming) while writers run; after a last run the topic equals the table.

Each run: a table of 3,000 rows (REPLICA IDENTITY FULL, so updates carry the large value), a
writer running throughout, a task process (``tests.integration.pg_snapshot_child``, file
offsets) killed after a random number of snapshot rows, a second killed right after storing
the snapshot-complete offset, a third killed after a random time streaming, and a last one
stopped once the sentinel row reached the topic.
"""

from __future__ import annotations

import random
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
from tests.integration.test_postgres_snapshot_restart import killed, run_child
from tests.integration.test_verify_postgres import pg_harness

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

ROWS = 3000


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    yield from pg_harness(postgres, kafka, "fpk")


def test_sigkill_at_random_points(h: PgHarness, tmp_path: Path, runs: int) -> None:
    for run in range(runs):
        one_run(h, tmp_path / f"run{run}", random.Random(run), f"items{run}")


def one_run(h: PgHarness, tmp: Path, rng: random.Random, table: str) -> None:
    tmp.mkdir()
    h.sql(
        f"CREATE TABLE {table} (id int PRIMARY KEY, v text, n int)",
        f"ALTER TABLE {table} REPLICA IDENTITY FULL",
        f"INSERT INTO {table} SELECT g, 'v' || g, 0 FROM generate_series(1, {ROWS}) g",
    )
    cfg = h.config(table_include_list=f"public.{table}", max_queue_size="400", max_batch_size="200")
    topic = h.topic(cfg, table)
    writer = Writer(lambda: psycopg.connect(h.pg.dsn(h.dbname), autocommit=True), table, ROWS, 7)
    writer.start()
    proc: subprocess.Popen[bytes] | None = None
    try:
        killed(run_child(h, cfg, tmp, kill_after_rows=rng.randint(200, ROWS - 200)))
        killed(run_child(h, cfg, tmp, kill_after_snapshot=True))
        proc = run_child(h, cfg, tmp)
        time.sleep(rng.uniform(1.0, 4.0))
        proc.kill()
        proc.communicate(timeout=30)
        proc = run_child(h, cfg, tmp)
        time.sleep(1.0)
        writer.stop()
        h.sql(f"INSERT INTO {table} VALUES ({SENTINEL}, 'end', 0)")

        wait_for_sentinel(h.kafka, topic, process_alive(proc))
    finally:
        writer.stop_event.set()
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
    check(
        "PostgreSQL: SIGKILL during snapshot, after it, streaming",
        verify_side(cfg),
        h.kafka,
        f"public.{table}",
        topic,
    )
    h.drop_slot(cfg)
