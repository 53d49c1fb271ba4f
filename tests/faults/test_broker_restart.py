"""Kafka: the broker SIGKILLed while a PostgreSQL task streams under writers; the task stopped
with SIGTERM while the broker is down; the broker restarted, the task started again, and the
broker SIGKILLed and restarted once more under the running task. After a last run the topic
equals the table: the offsets stored never pass an event Kafka did not acknowledge.

The broker is a private one (its own data folder and ports, for this module): the shared
broker the other tests use is never touched.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.postgres.verify import verify_side
from tests.faults.pg import PgRun, pg_harness, pg_run, run_child, wait_streaming
from tests.faults.private import private_service
from tests.faults.scenario import SENTINEL, check, process_alive, wait_for_sentinel
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness
from worker.dev.kafka import KafkaService

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

ROWS = 2000
SCENARIO = "Kafka: broker SIGKILLed twice, task SIGTERMed while it is down"


@pytest.fixture(scope="module")
def broker() -> Iterator[KafkaService]:
    yield from private_service(KafkaService, ports=4)


@pytest.fixture(scope="module")
def h(postgres: PgInfo, broker: KafkaService) -> Iterator[PgHarness]:
    yield from pg_harness(postgres, broker.bootstrap, "fkr")


def test_broker_killed_and_restarted(
    broker: KafkaService, h: PgHarness, tmp_path: Path, runs: int
) -> None:
    for run in range(runs):
        one_run(broker, h, tmp_path, run, random.Random(run))


def one_run(broker: KafkaService, h: PgHarness, tmp: Path, run: int, rng: random.Random) -> None:
    r: PgRun = pg_run(h, tmp, run, ROWS, max_queue_size="400", max_batch_size="200")
    writer = r.writer(ROWS, 80 + run)
    proc = run_child(h, r.cfg, r.tmp)
    try:
        wait_streaming(r, proc)
        writer.start()
        time.sleep(rng.uniform(1.0, 2.5))
        broker.crash(signal.SIGKILL)
        time.sleep(rng.uniform(0.5, 1.5))
        proc.send_signal(signal.SIGTERM)  # a graceful stop that cannot flush
        proc.communicate(timeout=120)
        broker.start()
        proc = run_child(h, r.cfg, r.tmp)
        time.sleep(rng.uniform(1.5, 3.0))
        broker.crash(signal.SIGKILL)  # under the running task
        time.sleep(rng.uniform(0.5, 2.0))
        broker.start()
        time.sleep(rng.uniform(1.0, 2.0))
        writer.stop()
        h.sql(f"INSERT INTO {r.table} VALUES ({SENTINEL}, 'end', 0)")
        wait_for_sentinel(h.kafka, r.topic, process_alive(proc))
    finally:
        writer.stop_event.set()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=120)
    check(SCENARIO, verify_side(r.cfg), h.kafka, r.qualified, r.topic)
    h.drop_slot(r.cfg)
