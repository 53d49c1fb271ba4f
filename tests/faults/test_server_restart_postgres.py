"""PostgreSQL: the server stopped with ``pg_ctl stop -m immediate`` (SIGQUIT to the postmaster:
no checkpoint, crash recovery at the next start) while writers run and the task streams, then
started again; the task reconnects by itself and, after a last run, the topic equals the table.

The server is a private one (its own data folder and port, started for this module), so the
shared instance the other tests use is never stopped. Writers that lose their connection
reconnect and go on: a statement cut by the stop may or may not have committed, which verify
does not care about (it compares the topic with the table as it is at the end).
"""

from __future__ import annotations

import random
import shutil
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from connectors.postgres.verify import verify_side
from tests.faults.pg import PgRun, pg_harness, pg_run, run_child, wait_streaming
from tests.faults.scenario import SENTINEL, Writer, check, process_alive, wait_for_sentinel
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness
from worker.dev.postgres import PostgresService
from worker.dev.stack import default_home

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

ROWS = 2000
SCENARIO = "PostgreSQL: server stopped -m immediate while streaming, restarted"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresService]:
    # Beside the dev stack's data, not under pytest's tmp (private to the user running the
    # tests: the server runs as the postgres user when the tests run as root).
    home = default_home() / "private" / f"pg-{uuid.uuid4().hex[:8]}"
    svc = PostgresService(home, free_port())
    svc.start()  # raises (fails the test) when it cannot start
    try:
        yield svc
    finally:
        svc.stop()
        shutil.rmtree(home, ignore_errors=True)


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


class ReconnectingWriter(Writer):
    """The fault suite's writer, carrying on across the server's restart."""

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                conn = self.connect()
            except psycopg.OperationalError:
                time.sleep(0.2)  # the server is down
                continue
            try:
                cur = conn.cursor()
                while not self.stop_event.is_set():
                    self.step(cur)
                    self.ops += 1
                    time.sleep(0.01)
            except psycopg.OperationalError:
                continue  # cut by the stop: connect again
            except BaseException as exc:  # surfaced by stop()
                self.error = exc
                return
            finally:
                conn.close()


def test_server_stopped_immediately_and_restarted(
    server: PostgresService, h: PgHarness, tmp_path: Path, runs: int
) -> None:
    for run in range(runs):
        one_run(server, h, tmp_path, run, random.Random(run))


def one_run(server: PostgresService, h: PgHarness, tmp: Path, run: int, rng: random.Random) -> None:
    r: PgRun = pg_run(h, tmp, run, ROWS, max_queue_size="400", max_batch_size="200")
    writer = ReconnectingWriter(r.connect, r.table, ROWS, 60 + run)
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
        h.sql(f"INSERT INTO {r.table} VALUES ({SENTINEL}, 'end', 0)")
        wait_for_sentinel(h.kafka, r.topic, process_alive(proc))
    finally:
        writer.stop_event.set()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
    check(SCENARIO, verify_side(r.cfg), h.kafka, r.qualified, r.topic)
    h.drop_slot(r.cfg)
