"""AC-75 with a real kill: the task process is SIGKILLed in the middle of an incremental
snapshot (PostgreSQL and MariaDB); the restart resumes after the last read whose offset was
stored (no read of a key at or below it comes again), and every row is read."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc.offsets.file import FileOffsetStore
from tests.integration.conftest import MySqlInfo, PgInfo
from tests.integration.incremental_scenarios import SIGNAL_DDL, Db
from tests.integration.mysql_harness import MySqlHarness
from tests.integration.pg_harness import PgHarness
from tests.integration.test_engine_crash import end_offset, finish, read_all, start, wait_for

# known_failing (issue 16): on the CI machine the 6,000-row incremental snapshot can finish
# before the kill lands (it did twice), so the test cannot show a mid-snapshot kill there; it
# needs a snapshot the test can hold mid-way. Resume after a kill is also shown by
# test_incremental_snapshot_signal_kill.py, which passes in CI.
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.mariadb,
    pytest.mark.kafka,
    pytest.mark.known_failing,
]

ROWS, CHUNK = 6000, 25  # the kill must land mid-snapshot even on a slow, loaded machine


@pytest.fixture(scope="module")
def pg(postgres: PgInfo, kafka: str) -> Iterator[Db]:
    harness = PgHarness(postgres, kafka, f"tmk_{uuid.uuid4().hex[:8]}")
    harness.sql(SIGNAL_DDL)
    yield Db(harness, schema="public", key=str, no_data="never", upsert="")
    harness.dispose()


@pytest.fixture(scope="module")
def maria(mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Db]:
    harness = MySqlHarness(
        mariadb, kafka, f"tmk_{uuid.uuid4().hex[:8]}", tmp_path_factory.mktemp("kill")
    )
    harness.sql(SIGNAL_DDL)
    yield Db(harness, schema=harness.dbname, key=int, no_data="schema_only", upsert="")
    harness.drop()


def test_sigkill_postgres(pg: Db, tmp_path: Path) -> None:
    kill_mid_snapshot(pg, tmp_path, "postgres")


def test_sigkill_mariadb(maria: Db, tmp_path: Path) -> None:
    kill_mid_snapshot(maria, tmp_path, "mysql")


def kill_mid_snapshot(db: Db, tmp_path: Path, kind: str) -> None:
    db.sql("CREATE TABLE big (id int PRIMARY KEY, v varchar(20))")
    db.fill("big", range(1, ROWS + 1), lambda i: f"'v{i}'")
    cfg = db.config("big", snapshot_mode=db.no_data, incremental_snapshot_chunk_size=CHUNK)
    if kind == "mysql":
        MySqlHarness.new_server_id(cfg)
    offsets = tmp_path / "offsets.json"
    spec = tmp_path / "spec.json"
    doc = {"kind": kind, "bootstrap": db.kafka, "offsets": {"file": str(offsets)}, "config": cfg}
    spec.write_text(json.dumps({**doc, "flush_ms": 50}))
    topic = db.topic(cfg, "big")
    proc = start(spec)
    try:
        # streaming for sure once a harmless log signal reaches the signal table's topic
        deadline = time.monotonic() + 60
        while end_offset(db.kafka, db.topic(cfg, "dbz_signal")) == 0:
            assert proc.poll() is None and time.monotonic() < deadline, "child not streaming"
            db.signal([], kind="log")
            time.sleep(0.5)
        db.signal(["big"])
        # kill once an offset inside the snapshot is stored (a count of records alone raced
        # the offset flush on a loaded machine: killed before any, or after the last chunk)
        deadline = time.monotonic() + 120
        while "incremental_snapshot_primary_key" not in (
            offsets.read_text() if offsets.exists() else ""
        ):
            assert proc.poll() is None and time.monotonic() < deadline, "no snapshot offset"
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()  # reaps it and closes its pipes
    store = FileOffsetStore(str(offsets))
    store.start()
    stored = store.get(cfg["name"], {"server": cfg["database.server.name"]})
    store.close()
    assert stored is not None
    acked = int(json.loads(stored["incremental_snapshot_primary_key"])[0])
    before = [e["after"]["id"] for e in read_all(db.kafka, topic, "read_uncommitted")]
    assert 0 < acked <= max(before) < ROWS  # killed mid-snapshot, after some offsets stored
    if kind == "mysql":
        MySqlHarness.new_server_id(cfg)
        spec.write_text(json.dumps({**doc, "config": cfg, "flush_ms": 50}))
    proc = start(spec)
    try:
        wait_for(db.kafka, topic, len(before) + ROWS - acked, proc)
    finally:
        finish(proc)
    ids = [e["after"]["id"] for e in read_all(db.kafka, topic, "read_uncommitted")]
    counts = Counter(ids)
    assert set(counts) == set(range(1, ROWS + 1))
    again = sorted(k for k, n in counts.items() if n > 1)
    assert all(k > acked for k in again)  # nothing at or below the stored key is read again
    assert all(n <= 2 for n in counts.values())
