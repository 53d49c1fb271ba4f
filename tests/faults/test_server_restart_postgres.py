"""PostgreSQL: the server stopped with ``pg_ctl stop -m immediate`` (SIGQUIT to the postmaster:
no checkpoint, crash recovery at the next start) while writers run and the task streams, then
started again; the task reconnects by itself and, after a last run, the topic equals the table.

The server is a private one (its own data folder and port, started for this module), so the
shared instance the other tests use is never stopped. Writers that lose their connection
reconnect and go on (``ReconnectingWriter``).
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from connectors.postgres.verify import verify_side
from tests.faults.pg import PgRun, pg_harness, pg_run, run_child, wait_streaming
from tests.faults.private import private_service
from tests.faults.scenario import (
    SENTINEL,
    ReconnectingWriter,
    check,
    process_alive,
    wait_for_sentinel,
)
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness
from worker.dev.postgres import PostgresService

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

ROWS = 2000
SCENARIO = "PostgreSQL: server stopped -m immediate while streaming, restarted"


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresService]:
    yield from private_service(PostgresService)


@pytest.fixture(scope="module")
def h(server: PostgresService, kafka: str) -> Iterator[PgHarness]:
    env = server.env()
    info = PgInfo(
        env["TIDEMARK_PG_HOST"],
        int(env["TIDEMARK_PG_PORT"]),
        env["TIDEMARK_PG_USER"],
        env["TIDEMARK_PG_PASSWORD"],
        env["TIDEMARK_PG_DBNAME"],
    )
    yield from pg_harness(info, kafka, "fpr")


def test_server_stopped_immediately_and_restarted(
    server: PostgresService, h: PgHarness, tmp_path: Path, runs: int
) -> None:
    for run in range(runs):
        one_run(server, h, tmp_path, run, random.Random(run))


def one_run(server: PostgresService, h: PgHarness, tmp: Path, run: int, rng: random.Random) -> None:
    r: PgRun = pg_run(h, tmp, run, ROWS, max_queue_size="400", max_batch_size="200")
    writer = ReconnectingWriter((psycopg.OperationalError,), r.connect, r.table, ROWS, 60 + run)
    proc = run_child(h, r.cfg, r.tmp)
    try:
        wait_streaming(r, proc)
        writer.start()
        time.sleep(rng.uniform(1.0, 2.5))
        server.crash(signal.SIGQUIT)  # what pg_ctl stop -m immediate sends
        time.sleep(rng.uniform(0.5, 2.0))
        server.start()
        time.sleep(rng.uniform(1.0, 2.5))  # writers and capture both back
        writer.stop()
        assert writer.reconnects > 0, "the writers never saw the server go"
        h.sql(f"INSERT INTO {r.table} VALUES ({SENTINEL}, 'end', 0)")
        wait_for_sentinel(h.kafka, r.topic, process_alive(proc))
    finally:
        writer.stop_event.set()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
    check(SCENARIO, verify_side(r.cfg), h.kafka, r.qualified, r.topic)
    h.drop_slot(r.cfg)
