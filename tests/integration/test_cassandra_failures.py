"""When things go wrong, on the real node: a hard kill duplicates only (AC-39), Kafka not
answering pauses the stream without loss (AC-40), the node going down fails the task and a
restart resumes without loss (AC-41)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc.offsets.memory import MemoryOffsetStore
from tests.integration.cassandra_harness import CassandraHarness, child_process, module_harness
from tests.integration.conftest import CassandraInfo
from tests.integration.test_kafka_outage import free_port_pair
from worker.dev import Stack
from worker.dev.kafka import KafkaService

pytestmark = [pytest.mark.cassandra, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(
    cassandra: CassandraInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CassandraHarness]:
    yield from module_harness(cassandra, kafka, tmp_path_factory, "csfail")


def test_hard_kill_duplicates_only(h: CassandraHarness) -> None:
    """AC-39: SIGKILL while rows stream in; after a restart every row is in the topic (some
    perhaps twice), none missing."""
    h.cql(f"CREATE TABLE {h.keyspace}.killed (id int PRIMARY KEY, v int) WITH cdc = true")
    cfg = h.config(**{"snapshot.mode": "never"})
    offsets = h.tmp / f"{cfg['name']}.offsets.json"
    written: list[int] = []
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            h.cql(f"INSERT INTO {h.keyspace}.killed (id, v) VALUES ({i}, {i})")
            written.append(i)
            i += 1
            time.sleep(0.005)

    proc = child_process(h, cfg, offsets)
    time.sleep(2)  # streaming
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        h.wait_for(lambda: len(h.read(cfg, "killed", settle=0.05, timeout=2)) > 50)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)  # reaped, its stdout pipe closed
        time.sleep(1)
        proc = child_process(h, cfg, offsets)
        time.sleep(2)
    finally:
        stop.set()
        thread.join()
    try:
        h.wait_for(
            lambda: (
                {e.key["id"] for e in h.read(cfg, "killed", settle=0.2, timeout=5)} >= set(written)
            ),
            timeout=60,
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    events = h.read(cfg, "killed")
    assert {e.key["id"] for e in events} == set(written)
    assert all(e.op == "c" for e in events)


def test_node_down_fails_then_resumes(h: CassandraHarness, stack: Stack) -> None:
    """AC-41: the node stops while streaming: the task fails (no silent stall); after the node
    is back a restart from the stored offset delivers what was written before and after."""
    h.cql(f"CREATE TABLE {h.keyspace}.down (id int PRIMARY KEY, v int) WITH cdc = true")
    cfg = h.config(**{"snapshot.mode": "never"})
    store = MemoryOffsetStore()
    node = stack["cassandra"]
    run = h.start(cfg, store)
    h.wait_streaming(run)
    h.cql(f"INSERT INTO {h.keyspace}.down (id, v) VALUES (1, 1)")
    h.read(cfg, "down", min_count=1)
    node.stop()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not run.errors:
            time.sleep(0.2)
        run.stop()
        assert run.errors, "the task kept running with the node down"
        assert "the Cassandra node does not answer (cassandra.hosts=127.0.0.1)" in str(
            run.errors[0]
        )
    finally:
        node.start()
    h.wait_for(lambda: _writable(h), timeout=60)
    h.cql(f"INSERT INTO {h.keyspace}.down (id, v) VALUES (2, 2)")
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {h.keyspace}.down (id, v) VALUES (3, 3)")
        events = h.read(cfg, "down", min_count=3)
    assert [e.key["id"] for e in events] == [1, 2, 3]


def _writable(h: CassandraHarness) -> bool:
    try:
        h.cql("SELECT now() FROM system.local")
        return True
    except Exception:
        return False


@pytest.fixture(scope="module")
def private_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaService]:
    """A broker of this module's own, so freezing it does not disturb other tests."""
    svc = KafkaService(Path(tmp_path_factory.mktemp("cs-kafka")), free_port_pair())
    svc.start()
    try:
        yield svc
    finally:
        pid = svc.pid()
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
        svc.stop()


def test_kafka_away_pauses_and_loses_nothing(
    h: CassandraHarness, private_kafka: KafkaService
) -> None:
    """AC-40: Kafka stops answering while the node takes writes: nothing is lost and no offset
    moves past what Kafka has; once it answers again every change arrives."""
    h.cql(f"CREATE TABLE {h.keyspace}.kafka_away (id int PRIMARY KEY, v int) WITH cdc = true")
    private = h.on_kafka(private_kafka.bootstrap)
    cfg = private.config(**{"snapshot.mode": "never"})
    store = MemoryOffsetStore()
    with private.running(cfg, store) as run:
        private.wait_streaming(run)
        for i in range(20):
            h.cql(f"INSERT INTO {h.keyspace}.kafka_away (id, v) VALUES ({i}, {i})")
        private.read(cfg, "kafka_away", min_count=20)
        pid = private_kafka.pid()
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            for i in range(20, 60):
                h.cql(f"INSERT INTO {h.keyspace}.kafka_away (id, v) VALUES ({i}, {i})")
            time.sleep(4)
            assert not run.errors
            stored = store.all(cfg["name"])
            acked_during = run.engine.metrics.records_acked
            time.sleep(2)
            assert run.engine.metrics.records_acked == acked_during  # nothing acknowledged
            assert store.all(cfg["name"]) == stored  # so no offset moved
        finally:
            os.kill(pid, signal.SIGCONT)
        events = private.read(cfg, "kafka_away", min_count=60, timeout=90)
    assert sorted({e.key["id"] for e in events}) == list(range(60))
