"""An initial snapshot SIGKILLed in the middle resumes after the last batch Kafka acknowledged
(issue 16, "the initial snapshot on the same chunk machinery"), on real PostgreSQL and
MariaDB.

The child holds the snapshot half-way through its third batch (chunk) once a fixed number of
rows were handed to the core (``hold_after_snapshot_rows`` of ``engine_child``), so the kill
lands inside a chunk on any machine; its offset flush interval is a minute, so only the
snapshot's own chunk gate stores offsets. While the task is down, rows are updated, deleted
and inserted on both sides of the stored resume key and in a table read whole before the
kill. The restart must read again only the half chunk sent after the last stored chunk, skip
the table read whole, and still end with the last event of every key equal to the table: the
rows read anew come from a newer snapshot, and streaming replays every change since the first
attempt's position on top.
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
from tests.integration.mysql_harness import MySqlHarness
from tests.integration.pg_harness import PgHarness
from tests.integration.test_engine_crash import finish, read_all, start

pytestmark = [pytest.mark.postgres, pytest.mark.mariadb, pytest.mark.kafka]

ROWS, BATCH = 5000, 1024  # batches: PostgreSQL's COPY rows, MariaDB's snapshot.fetch.size
SMALL = 300  # the table read first (tables are read in name order), whole before the kill
HALF = BATCH // 2
HOLD = SMALL + 2 * BATCH + HALF  # held half-way through batch 3 of the big table
FLUSH_MS = 60_000  # the offset flush interval: no commit of its own before the kill


class Db:
    """What the scenario needs of each database."""

    def __init__(self, h: PgHarness | MySqlHarness, kind: str, key: type, prefix: str) -> None:
        self.h, self.kind, self.key, self.prefix = h, kind, key, prefix

    def config(self, **overrides: Any) -> dict[str, Any]:
        cfg = self.h.config(**overrides)
        cfg["snapshot.resumable.chunk.size"] = str(BATCH)  # a chunk per batch
        if isinstance(self.h, MySqlHarness):
            cfg["table.include.list"] = cfg["table.include.list"].replace(
                "public.", f"{self.h.dbname}."
            )
            cfg["snapshot.fetch.size"] = str(BATCH)
            MySqlHarness.new_server_id(cfg)
        return cfg

    def fill(self, table: str, rows: int) -> None:
        if isinstance(self.h, PgHarness):  # in reverse: key order is not the physical order
            self.h.sql(
                f"INSERT INTO {table} SELECT g, 'v' || g FROM generate_series({rows}, 1, -1) g"
            )
        else:
            self.h.sql(f"INSERT INTO {table} SELECT seq, CONCAT('v', seq) FROM seq_1_to_{rows}")


@pytest.fixture(scope="module")
def pg(postgres: PgInfo, kafka: str) -> Iterator[Db]:
    with PgHarness(postgres, kafka, f"tsr_{uuid.uuid4().hex[:8]}") as harness:
        yield Db(harness, "postgres", str, f"{harness.dbname}.public")


@pytest.fixture(scope="module")
def maria(mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Db]:
    harness = MySqlHarness(
        mariadb, kafka, f"tsr_{uuid.uuid4().hex[:8]}", tmp_path_factory.mktemp("tsr")
    )
    yield Db(harness, "mysql", int, harness.dbname)
    harness.drop()


def test_postgres(pg: Db, tmp_path: Path) -> None:
    kill_mid_snapshot_and_resume(pg, tmp_path)


def test_mariadb(maria: Db, tmp_path: Path) -> None:
    kill_mid_snapshot_and_resume(maria, tmp_path)


def kill_mid_snapshot_and_resume(db: Db, tmp_path: Path) -> None:
    h = db.h
    h.sql(
        "CREATE TABLE a_small (id int PRIMARY KEY, v varchar(40))",
        "CREATE TABLE b_big (id int PRIMARY KEY, v varchar(40))",
    )
    db.fill("a_small", SMALL)
    db.fill("b_big", ROWS)
    cfg = db.config(
        table_include_list="public.a_small,public.b_big",
        snapshot_mode="initial",
        tombstones_on_delete="false",  # a delete's last event is its op=d event
    )
    offsets, spec = tmp_path / "offsets.json", tmp_path / "spec.json"
    doc = {"kind": db.kind, "bootstrap": h.kafka, "offsets": {"file": str(offsets)}}
    spec.write_text(
        json.dumps({**doc, "config": cfg, "flush_ms": FLUSH_MS, "hold_after_snapshot_rows": HOLD})
    )
    proc = start(spec)
    try:
        deadline = time.monotonic() + 90
        # the last row of batch 2 is stored: by the chunk gate, the flush interval is far off
        while stored(offsets, cfg).get("snapshot_after") != [db.key(2 * BATCH)]:
            alive(proc)
            assert time.monotonic() < deadline, f"stored offset {stored(offsets, cfg)}"
            time.sleep(0.05)
        # and half of batch 3 is in Kafka, its offsets not stored
        while len(read_all(h.kafka, h.topic(cfg, "b_big"), "read_uncommitted")) < HOLD - SMALL:
            alive(proc)
            assert time.monotonic() < deadline, "half of batch 3 never reached the topic"
            time.sleep(0.1)
    finally:
        proc.kill()  # SIGKILL
        proc.communicate()
    resume = stored(offsets, cfg)
    assert resume["snapshot_done"] == [f"{db.prefix}.a_small"]
    assert resume["snapshot_table"] == f"{db.prefix}.b_big"
    small, big = h.topic(cfg, "a_small"), h.topic(cfg, "b_big")
    first = read_all(h.kafka, big, "read_uncommitted")
    assert len(first) == HOLD - SMALL  # two and a half batches were sent
    assert [e["after"]["id"] for e in first[:BATCH]] == list(range(1, BATCH + 1))  # key order
    h.sql(
        "UPDATE a_small SET v = 'small, updated' WHERE id = 7",
        "DELETE FROM a_small WHERE id = 8",
        "INSERT INTO a_small VALUES (100000, 'small, new')",
        "UPDATE b_big SET v = 'done, updated' WHERE id = 10",
        "DELETE FROM b_big WHERE id = 11",
        f"UPDATE b_big SET v = 'sent, updated' WHERE id = {2 * BATCH + 5}",
        f"UPDATE b_big SET v = 'left, updated' WHERE id = {3 * BATCH}",
        f"DELETE FROM b_big WHERE id = {3 * BATCH + 1}",
        f"INSERT INTO b_big VALUES ({ROWS + 1}, 'new')",
    )
    want_small = {int(k): v for k, v in h.sql("SELECT id, v FROM a_small")}
    want_big = {int(k): v for k, v in h.sql("SELECT id, v FROM b_big")}
    small_before = len(read_all(h.kafka, small, "read_uncommitted"))
    if isinstance(h, MySqlHarness):
        MySqlHarness.new_server_id(cfg)
    spec.write_text(json.dumps({**doc, "config": cfg, "flush_ms": 50}))
    proc = start(spec)
    try:
        deadline = time.monotonic() + 90
        while (
            last_rows(read_all(h.kafka, big, "read_uncommitted")) != want_big
            or last_rows(read_all(h.kafka, small, "read_uncommitted")) != want_small
        ):
            alive(proc)
            assert time.monotonic() < deadline, "the topics never equalled the tables"
            time.sleep(0.3)
    finally:
        finish(proc)
    big_events = read_all(h.kafka, big, "read_uncommitted")
    small_events = read_all(h.kafka, small, "read_uncommitted")
    assert last_rows(big_events) == want_big and last_rows(small_events) == want_small
    # the table read whole is not read again: only its changes are streamed
    assert [e["op"] for e in small_events[small_before:]] == ["u", "d", "c"]
    # the big table resumed after the last stored chunk: the half chunk sent after it is read
    # again (less than one chunk), nothing at or below the stored key is
    again = Counter(e["after"]["id"] for e in big_events[len(first) :] if e["op"] == "r")
    assert min(again) == 2 * BATCH + 1
    reads = Counter(e["after"]["id"] for e in big_events if e["op"] == "r")
    assert sum(n - 1 for n in reads.values()) == HALF
    assert set(reads) >= set(range(1, ROWS + 1)) - {11, 3 * BATCH + 1}


def alive(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        _, err = proc.communicate()
        raise AssertionError(f"child exited {proc.returncode}: {err.decode()[-3000:]}")


def stored(offsets: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    """The stored offset, read without a FileOffsetStore (its start would delete the temporary
    file a live task may be about to rename)."""
    if not offsets.exists():
        return {}
    table = decode(offsets.read_bytes())
    return table.get(cfg["name"], {"server": cfg["database.server.name"]}) or {}


def last_rows(events: list[dict[str, Any]]) -> dict[int, str]:
    """Each key's last event: its row, or, deleted, none."""
    rows: dict[int, str] = {}
    for e in events:
        key = int((e["after"] or e["before"])["id"])
        if e["after"] is None:
            rows.pop(key, None)
        else:
            rows[key] = e["after"]["v"]
    return rows
