"""Kafka stops answering mid-stream: the producer buffers, backpressure reaches the source
(the queue fills and the source blocks), and once Kafka is back every event arrives.

Uses its own single-node broker (same launcher as the stack) so freezing it does not disturb
other tests."""

from __future__ import annotations

import os
import random
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from cdc.engine import Engine, EngineSettings
from cdc.offsets.memory import MemoryOffsetStore
from cdc.testing.kafka_reader import read_topic
from cdc.testing.memory import MemoryConnector
from tests.integration.engine_child import build_memory_db
from worker.dev.kafka import KafkaService
from worker.dev.service import StackError
from worker.task import RetryPolicy, TaskRunner

pytestmark = pytest.mark.kafka


def free_port_pair() -> int:
    """Four consecutive free ports (plain, controller, SASL_SSL and mTLS listeners) below the
    kernel's ephemeral range (32768+ here), so an outgoing connection cannot take one between
    this check and Kafka binding it."""
    rnd = random.Random()
    for _ in range(200):
        port = rnd.randrange(20000, 32000)
        if all(_bindable(p) for p in range(port, port + 4)):
            return port
    raise RuntimeError("no free port pair")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture(scope="module")
def private_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaService]:
    for attempt in range(3):  # a port taken by another process meanwhile: try new ones
        svc = KafkaService(Path(tmp_path_factory.mktemp("kafka-outage")), free_port_pair())
        try:
            svc.start()
            break
        except StackError:
            svc.stop()
            if attempt == 2:
                raise
    try:
        yield svc
    finally:
        pid = svc.pid()
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
        svc.stop()


def test_kafka_pause_backpressures_source_and_loses_nothing(private_kafka: KafkaService) -> None:
    db = "outage" + uuid.uuid4().hex[:6]
    transactions, rows = 3000, 5
    build_memory_db(db, transactions, rows)
    server = "o" + uuid.uuid4().hex[:6]
    connector = MemoryConnector(
        {
            "name": server,
            "database.server.name": server,
            "memory.database": db,
            "snapshot.mode": "never",
            "max.queue.size": "300",
            "max.batch.size": "100",
            "poll.interval.ms": "50",
            "memory.transactions.per.second": "1000",
        }
    )
    engine = Engine(
        connector,
        connector.config,
        MemoryOffsetStore(),
        EngineSettings(
            producer={
                "bootstrap.servers": private_kafka.bootstrap,
                "queue.buffering.max.messages": 1000,  # small, to reach backpressure quickly
            },
            offset_flush_interval_ms=200,
        ),
    )
    errors: list[BaseException] = []

    def run() -> None:
        try:
            engine.run()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    topic = f"{server}.{db}.items"
    deadline = time.monotonic() + 60
    while engine.metrics.records_sent < 2000:
        assert time.monotonic() < deadline and not errors, errors
        time.sleep(0.05)
    pid = private_kafka.pid()
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # Kafka stops answering
    try:
        time.sleep(6)
        sent_during = engine.metrics.records_sent
        time.sleep(2)
        # Nothing moves while Kafka is away: the producer buffer and the queue are full and
        # the source is blocked on the queue.
        assert engine.metrics.records_sent == sent_during
        assert engine.queue.remaining_capacity == 0
        assert engine.queue.blocked_seconds > 0 or engine.queue.size == engine.queue.max_size
    finally:
        os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 120
    total = transactions * rows
    while engine.metrics.records_sent < total:
        assert time.monotonic() < deadline, f"only {engine.metrics.records_sent} sent"
        assert not errors, errors
        time.sleep(0.1)
    engine.stop()
    thread.join(60)
    assert not errors, errors
    events = read_topic(private_kafka.bootstrap, topic, min_count=total, timeout=120)
    ids = {e.after["id"] for e in events}
    assert ids == set(range(1, total + 1))


def test_status_and_metrics_report_kafka_not_acknowledging(private_kafka: KafkaService) -> None:
    """While Kafka is down the task stays RUNNING (it resumes by itself) but its status says
    why it is degraded, and the metrics count what Kafka has not acknowledged."""
    db = "status" + uuid.uuid4().hex[:6]
    build_memory_db(db, 3000, 2)
    server = "s" + uuid.uuid4().hex[:6]
    connector = MemoryConnector(
        {
            "name": server,
            "database.server.name": server,
            "memory.database": db,
            "snapshot.mode": "never",
            "poll.interval.ms": "50",
            "memory.transactions.per.second": "200",
        }
    )
    runner = TaskRunner(
        server,
        0,
        lambda: Engine(
            connector,
            connector.config,
            MemoryOffsetStore(),
            EngineSettings(
                producer={"bootstrap.servers": private_kafka.bootstrap},
                offset_flush_interval_ms=200,
                offset_flush_timeout_ms=500,
            ),
        ),
        RetryPolicy(),
        worker_id="test",
    )

    def wait(what: str, check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 60
        while not check():
            assert time.monotonic() < deadline, f"{what}: {runner.status()}"
            time.sleep(0.1)

    def gauge(name: str) -> float:
        value = REGISTRY.get_sample_value(name, {"connector": server, "task": "0"})
        assert value is not None, name
        return value

    runner.start()
    try:
        wait(
            "records sent and acknowledged",
            lambda: (
                runner.metrics is not None
                and runner.metrics.records_sent > 200
                and "trace" not in runner.status()
            ),
        )
        pid = private_kafka.pid()
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            wait("degraded status", lambda: "not acknowledged" in runner.status().get("trace", ""))
            status = runner.status()
            assert status["state"] == "RUNNING"
            assert gauge("tidemark_records_unacknowledged") > 0
            assert gauge("tidemark_seconds_since_last_acknowledgement") >= 0.7
        finally:
            os.kill(pid, signal.SIGCONT)
        wait("healthy again", lambda: "trace" not in runner.status())

        # The writer keeps writing, so records may be outstanding again between two scrapes:
        # both gauges are read from one scrape.
        def scrape() -> tuple[float, float]:
            samples = {
                s.name: s.value
                for family in REGISTRY.collect()
                for s in family.samples
                if s.labels.get("connector") == server and s.labels.get("task") == "0"
            }
            return (
                samples["tidemark_records_unacknowledged"],
                samples["tidemark_seconds_since_last_acknowledgement"],
            )

        # Scrape for a while and judge only the scrapes that found nothing outstanding (at
        # 400 records/s and the producer's linger, a burst of scrapes can all land mid-flight).
        caught_up: list[tuple[float, float]] = []
        deadline = time.monotonic() + 30
        while len(caught_up) < 5 and time.monotonic() < deadline:
            sample = scrape()
            if sample[0] == 0:
                caught_up.append(sample)
            time.sleep(0.01)
        assert caught_up, "nothing was ever fully acknowledged in 30 s of scrapes"
        assert all(since == 0 for _, since in caught_up), caught_up
    finally:
        runner.shutdown()
        assert runner.join(60)
