"""Signals and snapshot state survive a SIGKILL of the task (PostgreSQL through Kafka).

- An ``execute-snapshot`` read from the Kafka signal topic, the task killed after the
  snapshot began but before any offset holding it was stored: the restart reads the signal
  again and the snapshot completes (the consumer offset was not committed at hand-off). Killed
  again once offsets holding it were stored: the restart resumes after the stored key, it does
  not start the snapshot over, and the group's committed offset is past the signal.
- A paused snapshot killed stays paused after the restart until ``resume-snapshot``.

The signal consumer keeps its default session timeout: the channel assigns itself the
partition (no group membership), so each restart reads the signal topic at once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration import test_incremental_snapshot_kill
from tests.integration.incremental_scenarios import Db
from tests.integration.test_engine_crash import end_offset, finish, read_all, start, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

#: a PostgreSQL database with the signal table (the fixture of the kill test)
pg = test_incremental_snapshot_kill.pg

#: 20 chunks; the first run is held after 2 chunks, the second after 6 (``hold_after_chunks``
#: of engine_child), so each kill lands inside the snapshot on any machine
ROWS, CHUNK, FIRST, SECOND = 1000, 50, 2, 6


class Child:
    """The task in a child process, with its offsets in a file."""

    def __init__(self, db: Db, cfg: dict[str, Any], tmp_path: Path) -> None:
        self.db, self.cfg = db, cfg
        self.offsets = tmp_path / "offsets.json"
        self.spec = tmp_path / "spec.json"

    def start(self, flush_ms: int, hold: int | None = None) -> subprocess.Popen[bytes]:
        doc = {
            "kind": "postgres",
            "bootstrap": self.db.kafka,
            "offsets": {"file": str(self.offsets)},
            "config": self.cfg,
            "flush_ms": flush_ms,
        }
        if hold is not None:
            doc["hold_after_chunks"] = hold
        self.spec.write_text(json.dumps(doc))
        proc = start(self.spec)
        # streaming for sure once a harmless log signal reaches the signal table's topic
        topic = self.db.topic(self.cfg, "dbz_signal")
        seen = end_offset(self.db.kafka, topic)
        deadline = time.monotonic() + 60
        while end_offset(self.db.kafka, topic) == seen:
            if proc.poll() is not None or time.monotonic() > deadline:
                os.kill(proc.pid, signal.SIGKILL)  # not left holding the replication slot
                _, err = proc.communicate()
                raise AssertionError(f"child not streaming: {err.decode()[-3000:]}")
            self.db.signal([], kind="log")
            time.sleep(0.5)
        return proc

    def stored(self) -> dict[str, Any]:
        # not through a FileOffsetStore: its start deletes the live task's temporary file
        return test_incremental_snapshot_kill.stored_offset(self.offsets, self.cfg)


def kill(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()  # reaps it and closes its pipes


def ids(db: Db, topic: str) -> list[int]:
    return [int(e["after"]["id"]) for e in read_all(db.kafka, topic, "read_uncommitted")]


def test_kafka_signal_survives_kills(pg: Db, tmp_path: Path) -> None:
    pg.sql("CREATE TABLE kbig (id int PRIMARY KEY, v varchar(20))")
    pg.fill("kbig", range(1, ROWS + 1), lambda i: f"'v{i}'")
    cfg = pg.config(
        "kbig",
        snapshot_mode=pg.no_data,
        incremental_snapshot_chunk_size=CHUNK,
        signal_enabled_channels="source,kafka",
        signal_kafka_bootstrap_servers=pg.kafka,
    )
    group = f"sig-{uuid.uuid4().hex[:8]}"
    cfg["signal.kafka.groupId"] = group
    # no session-timeout setting: the channel assigns itself the partition (no group
    # membership), so a restart after a kill reads the signal topic at once
    server, topic = cfg["database.server.name"], pg.topic(cfg, "kbig")
    child = Child(pg, cfg, tmp_path)

    # 1: no offset is stored while the snapshot runs (a long flush interval), killed mid-way
    proc = child.start(flush_ms=600_000, hold=FIRST)
    try:
        message = {"id": "snap-1", "type": "execute-snapshot"}
        message["data"] = {"data-collections": [pg.q("kbig")]}  # type: ignore[assignment]
        producer = Producer({"bootstrap.servers": pg.kafka})
        producer.produce(f"{server}-signal", json.dumps(message).encode(), server.encode())
        producer.flush(10)
        wait_for(pg.kafka, topic, CHUNK * FIRST, proc)
    finally:
        kill(proc)
    first = ids(pg, topic)
    assert first == list(range(1, CHUNK * FIRST + 1))
    assert "incremental_snapshot_collections" not in child.stored()  # the window: not durable

    # 2: the signal is read again and the snapshot runs; killed once offsets hold it
    proc = child.start(flush_ms=50, hold=SECOND)
    acked = CHUNK * SECOND
    try:
        deadline = time.monotonic() + 60
        while test_incremental_snapshot_kill.stored_key(child.offsets, cfg) != acked:
            assert proc.poll() is None and time.monotonic() < deadline, "snapshot not re-run"
            time.sleep(0.05)
    finally:
        kill(proc)
    stored = child.stored()
    assert stored["incremental_snapshot_signal_id"] == "snap-1"
    second = ids(pg, topic)
    assert second == first + list(range(1, acked + 1))  # started over: the signal read again

    # 3: resumes after the stored key, completes, and the signal is not run again
    proc = child.start(flush_ms=50)
    try:
        deadline = time.monotonic() + 60
        while set(ids(pg, topic)) != set(range(1, ROWS + 1)):
            assert proc.poll() is None and time.monotonic() < deadline, "snapshot incomplete"
            time.sleep(0.5)
        # the group's offset is committed past the signal once its effect is stored
        while committed(pg, group, f"{server}-signal") != 1:
            assert proc.poll() is None and time.monotonic() < deadline, "signal not committed"
            time.sleep(0.2)
        time.sleep(1)  # a snapshot started over would send key 1 again meanwhile
    finally:
        finish(proc)
    final = ids(pg, topic)
    third = final[len(second) :]
    assert third == list(range(acked + 1, ROWS + 1))  # resumed after the stored key
    counts = Counter(final)
    assert counts[1] == 2  # read by runs 1 and 2 only: never started over once durable
    assert Counter(third)[ROWS] == 1
    assert committed(pg, group, f"{server}-signal") == 1  # and not moved by the stop


def committed(db: Db, group: str, topic: str) -> int:
    """The offset ``group`` committed on partition 0 of ``topic`` (negative: none)."""
    consumer = Consumer({"bootstrap.servers": db.kafka, "group.id": group})
    try:
        return int(consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset)
    finally:
        consumer.close()


def test_paused_snapshot_stays_paused_after_a_kill(pg: Db, tmp_path: Path) -> None:
    rows, chunk = 300, 10
    pg.sql("CREATE TABLE pz (id int PRIMARY KEY, v varchar(20))")
    pg.fill("pz", range(1, rows + 1), lambda i: f"'v{i}'")
    cfg = pg.config("pz", snapshot_mode=pg.no_data, incremental_snapshot_chunk_size=chunk)
    topic = pg.topic(cfg, "pz")
    child = Child(pg, cfg, tmp_path)
    proc = child.start(flush_ms=50)
    try:
        # one statement, one transaction: the pause is seen inside the first chunk's window
        data = json.dumps({"data-collections": [pg.q("pz")]})
        pg.sql(
            "INSERT INTO dbz_signal VALUES "
            "(%s, 'execute-snapshot', %s), (%s, 'pause-snapshot', '')",
            params=(uuid.uuid4().hex, data, uuid.uuid4().hex),
        )
        deadline = time.monotonic() + 60
        while child.stored().get("incremental_snapshot_paused") is not True:
            assert proc.poll() is None and time.monotonic() < deadline, "not paused"
            time.sleep(0.2)
        time.sleep(1)
    finally:
        kill(proc)
    paused = ids(pg, topic)
    assert paused == list(range(1, chunk + 1))
    proc = child.start(flush_ms=50)
    try:
        time.sleep(3)
        assert ids(pg, topic) == paused  # still paused after the restart
        pg.signal([], kind="resume-snapshot")
        deadline = time.monotonic() + 60
        while len(ids(pg, topic)) < rows:
            assert proc.poll() is None and time.monotonic() < deadline, "not resumed"
            time.sleep(0.3)
    finally:
        finish(proc)
    assert sorted(ids(pg, topic)) == list(range(1, rows + 1))  # each row once
