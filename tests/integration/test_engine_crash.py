"""Kill -9 the task process mid-stream: nothing is lost, duplicates only after the last
committed offset; in exactly-once mode a read_committed consumer sees each event once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]
TRANSACTIONS, ROWS_PER_TX = 8000, 5
TOTAL = TRANSACTIONS * ROWS_PER_TX


def spec(tmp: Path, kafka: str, *, exactly_once: bool) -> tuple[Path, str]:
    server = "crash" + uuid.uuid4().hex[:6]
    db = "db" + uuid.uuid4().hex[:6]
    offsets: dict[str, Any] = (
        {"kafka_topic": f"{server}-offsets"}
        if exactly_once
        else {"file": str(tmp / "offsets.json")}
    )
    doc = {
        "kind": "memory",
        "bootstrap": kafka,
        "exactly_once": exactly_once,
        "offsets": offsets,
        "memory": {"transactions": TRANSACTIONS, "rows_per_tx": ROWS_PER_TX},
        "config": {
            "name": server,
            "database.server.name": server,
            "memory.database": db,
            "snapshot.mode": "never",
            "max.queue.size": "500",
            "max.batch.size": "200",
            "poll.interval.ms": "50",
            "memory.transactions.per.second": "2000",
        },
    }
    path = tmp / "spec.json"
    path.write_text(json.dumps(doc))
    return path, f"{server}.{db}.items"


def start(path: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.engine_child", str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def end_offset(kafka: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": kafka, "group.id": uuid.uuid4().hex})
    try:
        return _high_watermark(consumer, topic)
    finally:
        consumer.close()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.communicate()


def wait_for(
    kafka: str, topic: str, count: int, proc: subprocess.Popen[bytes], timeout: float = 120
) -> None:
    """Until ``topic`` holds ``count`` records. One consumer asks for the watermark every
    20 ms: a kill test that stops the child "after N records" must see N soon after it is
    reached, and a snapshot of 100k rows can finish in under a second."""
    deadline = time.monotonic() + timeout
    consumer = Consumer({"bootstrap.servers": kafka, "group.id": uuid.uuid4().hex})
    try:
        while _high_watermark(consumer, topic) < count:
            if proc.poll() is not None:
                _, err = proc.communicate()
                raise AssertionError(f"child exited {proc.returncode}: {err.decode()[-3000:]}")
            if time.monotonic() > deadline:
                _kill(proc)  # a timed-out child would outlive the test, holding its slot
                raise AssertionError(f"fewer than {count} records on {topic}")
            time.sleep(0.02)
    finally:
        consumer.close()


def _high_watermark(consumer: Consumer, topic: str) -> int:
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
    except Exception:
        return 0  # the topic does not exist yet
    return int(high)


def wait_for_last_event(
    kafka: str, topic: str, proc: subprocess.Popen[bytes], timeout: float = 120
) -> None:
    """Until the event of the last row (id ``TOTAL``, emitted last) is in ``topic``. Not a
    record count: after a kill the re-sent duplicates reach any count early."""
    deadline = time.monotonic() + timeout
    while not any(e["after"]["id"] == TOTAL for e in read_all(kafka, topic, "read_uncommitted")):
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"child exited {proc.returncode}: {err.decode()[-3000:]}")
        if time.monotonic() > deadline:
            _kill(proc)
            raise AssertionError(f"the last event never reached {topic}")
        time.sleep(0.2)


def read_all(kafka: str, topic: str, isolation: str) -> list[dict[str, Any]]:
    consumer = Consumer(
        {
            "bootstrap.servers": kafka,
            "group.id": uuid.uuid4().hex,
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    high = end_offset(kafka, topic)
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            msgs = consumer.consume(1000, 0.5)
            for m in msgs:
                assert m.error() is None, m.error()
                out.append(orjson.loads(m.value())["payload"])
            position = consumer.position([TopicPartition(topic, 0)])[0].offset
            if not msgs and position >= high:
                break
    finally:
        consumer.close()
    return out


def finish(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-3000:]


def test_sigkill_mid_stream_loses_nothing_and_duplicates_only_after_committed(
    tmp_path: Path, kafka: str
) -> None:
    path, topic = spec(tmp_path, kafka, exactly_once=False)
    proc = start(path)
    wait_for(kafka, topic, TOTAL // 8, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    stored = json.loads((tmp_path / "offsets.json").read_text())
    [entry] = stored["offsets"]
    committed_pos = entry["offset"]["pos"]
    assert 0 < committed_pos < TRANSACTIONS * (ROWS_PER_TX + 2), "not killed mid-stream"

    proc = start(path)
    wait_for_last_event(kafka, topic, proc)
    finish(proc)

    events = read_all(kafka, topic, "read_uncommitted")
    ids = Counter(e["after"]["id"] for e in events)
    assert set(ids) == set(range(1, TOTAL + 1)), "an event was lost"
    duplicates = [e for e in events if ids[e["after"]["id"]] > 1]
    # Every duplicate was re-sent because its position was past the last stored offset.
    assert all(e["source"]["pos"] > committed_pos for e in duplicates)
    print(f"\n{len(events) - TOTAL} duplicates after kill at offset pos {committed_pos}")


def test_exactly_once_mode_after_sigkill(tmp_path: Path, kafka: str) -> None:
    path, topic = spec(tmp_path, kafka, exactly_once=True)
    proc = start(path)
    wait_for(kafka, topic, TOTAL // 8, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    proc = start(path)
    deadline = time.monotonic() + 180
    while True:
        events = read_all(kafka, topic, "read_committed")
        if len({e["after"]["id"] for e in events}) >= TOTAL or time.monotonic() > deadline:
            break
        assert proc.poll() is None, proc.communicate()[1].decode()[-3000:]
        time.sleep(1)
    finish(proc)
    events = read_all(kafka, topic, "read_committed")
    ids = Counter(e["after"]["id"] for e in events)
    assert set(ids) == set(range(1, TOTAL + 1))
    assert max(ids.values()) == 1, "a read_committed consumer saw an event twice"
