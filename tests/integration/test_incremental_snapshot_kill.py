"""AC-75 with a real kill: the task process is SIGKILLed in the middle of an incremental
snapshot (PostgreSQL and MariaDB); the restart resumes after the last read whose offset was
stored (no read of a key at or below it comes again), every row is read, and the last event
of each key equals the table (changes made while the task was down included).

The child holds the snapshot after a fixed number of chunks (``hold_after_chunks`` of
``engine_child``), so the kill lands inside it on any machine: polling the offsets and
killing raced the snapshot both ways on a loaded CI machine.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.offsets.file import decode
from tests.integration.conftest import MySqlInfo, PgInfo
from tests.integration.incremental_scenarios import SIGNAL_DDL, Db
from tests.integration.mysql_harness import MySqlHarness
from tests.integration.pg_harness import PgHarness
from tests.integration.test_engine_crash import end_offset, finish, read_all, start

pytestmark = [pytest.mark.postgres, pytest.mark.mariadb, pytest.mark.kafka]

ROWS, CHUNK, HOLD = 2000, 50, 8  # killed with chunk 9 of 40 open: rows 1..400 sent


@pytest.fixture(scope="module")
def pg(postgres: PgInfo, kafka: str) -> Iterator[Db]:
    with PgHarness(postgres, kafka, f"tmk_{uuid.uuid4().hex[:8]}") as harness:
        harness.sql(SIGNAL_DDL)
        yield Db(harness, schema="public", key=str, no_data="never", upsert="")


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
    cfg = db.config(
        "big",
        snapshot_mode=db.no_data,
        incremental_snapshot_chunk_size=CHUNK,
        tombstones_on_delete="false",  # a delete's last event is its op=d event
    )
    if kind == "mysql":
        MySqlHarness.new_server_id(cfg)
    offsets = tmp_path / "offsets.json"
    spec = tmp_path / "spec.json"
    doc = {"kind": kind, "bootstrap": db.kafka, "offsets": {"file": str(offsets)}, "config": cfg}
    spec.write_text(json.dumps({**doc, "flush_ms": 50, "hold_after_chunks": HOLD}))
    topic = db.topic(cfg, "big")
    acked = HOLD * CHUNK
    proc = start(spec)
    try:
        # streaming for sure once a harmless log signal reaches the signal table's topic
        deadline = time.monotonic() + 60
        while end_offset(db.kafka, db.topic(cfg, "dbz_signal")) == 0:
            alive(proc)
            assert time.monotonic() < deadline, "child not streaming"
            db.signal([], kind="log")
            time.sleep(0.5)
        db.signal(["big"])
        # the child holds chunk HOLD + 1: wait until the offset of the last read before it
        # is stored, then change rows on both sides of it while the task is down
        deadline = time.monotonic() + 60
        while (key := stored_key(offsets, cfg)) != acked:
            alive(proc)
            assert time.monotonic() < deadline, f"the stored snapshot key is {key}, not {acked}"
            time.sleep(0.05)
    finally:
        proc.kill()  # SIGKILL
        proc.communicate()  # reaps it and closes its pipes
    assert stored_key(offsets, cfg) == acked
    before = read_all(db.kafka, topic, "read_uncommitted")
    assert [(e["op"], e["after"]["id"]) for e in before] == [("r", k) for k in range(1, acked + 1)]
    db.sql(
        "UPDATE big SET v = 'sent, updated' WHERE id = 3",
        "DELETE FROM big WHERE id = 4",
        f"UPDATE big SET v = 'held, updated' WHERE id = {acked + 5}",
        f"DELETE FROM big WHERE id = {acked + 10}",
        f"DELETE FROM big WHERE id = {ROWS}",  # the snapshot's end bound, stored in the offset
        f"INSERT INTO big VALUES ({ROWS + 1}, 'above the end')",
    )
    table = {int(k): v for k, v in db.h.sql("SELECT id, v FROM big")}
    if kind == "mysql":
        MySqlHarness.new_server_id(cfg)
    spec.write_text(json.dumps({**doc, "config": cfg, "flush_ms": 50}))
    proc = start(spec)
    try:
        deadline = time.monotonic() + 60
        while last_rows(read_all(db.kafka, topic, "read_uncommitted")) != table:
            alive(proc)
            assert time.monotonic() < deadline, "the topic never equalled the table"
            time.sleep(0.3)
        time.sleep(1)  # a snapshot run again once done would send key 1 again meanwhile
    finally:
        finish(proc)
    events = read_all(db.kafka, topic, "read_uncommitted")
    assert last_rows(events) == table  # deletes included: their op=d is the last event
    after = events[len(before) :]
    reads = Counter(e["after"]["id"] for e in after if e["op"] == "r")
    # resumed after the stored key, each row left read once (the kill came after the store)
    assert sorted(reads) == sorted(set(range(acked + 1, ROWS)) - {acked + 10})
    assert set(reads.values()) == {1}
    streamed = [(e["op"], key_of(e)) for e in after if e["op"] != "r"]
    assert streamed == [
        ("u", 3),
        ("d", 4),
        ("u", acked + 5),
        ("d", acked + 10),
        ("d", ROWS),
        ("c", ROWS + 1),
    ]


def alive(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        _, err = proc.communicate()
        raise AssertionError(f"child exited {proc.returncode}: {err.decode()[-3000:]}")


def stored_offset(offsets: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    """The offset stored for the connector of ``cfg`` ({} if none), read from the file
    without a ``FileOffsetStore``: its start deletes temporary files, the very one a live
    task may be about to rename (the task then fails). The file is replaced atomically."""
    if not offsets.exists():
        return {}
    table = decode(offsets.read_bytes())
    return table.get(cfg["name"], {"server": cfg["database.server.name"]}) or {}


def stored_key(offsets: Path, cfg: dict[str, Any]) -> int | None:
    """The key of the last snapshot read whose offset is stored, if any."""
    key = stored_offset(offsets, cfg).get("incremental_snapshot_primary_key")
    return None if key is None else int(json.loads(key)[0])


def key_of(event: dict[str, Any]) -> int:
    return int((event["after"] or event["before"])["id"])


def last_rows(events: list[dict[str, Any]]) -> dict[int, str]:
    """The table as the topic tells it: each key's last event, its row or, deleted, none."""
    rows: dict[int, str] = {}
    for e in events:
        if e["after"] is None:
            rows.pop(key_of(e), None)
        else:
            rows[key_of(e)] = e["after"]["v"]
    return rows
