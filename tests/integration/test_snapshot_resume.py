"""An initial snapshot SIGKILLed in the middle resumes after the last batch Kafka acknowledged
(issue 16, "the initial snapshot on the same chunk machinery"), on real PostgreSQL.

The child holds the snapshot once a fixed number of rows were handed to the core
(``hold_after_snapshot_rows`` of ``engine_child``) so the kill lands inside the snapshot on
any machine. While the task is down, rows are updated, deleted and inserted on both sides of
the stored resume key and in a table read whole before the kill. The restart must read only
what was not acknowledged (at most one batch again), skip the table read whole, and still
end with the last event of every key equal to the table: the rows read anew come from a newer
snapshot, and streaming replays every change since the first attempt's position on top.
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
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness
from tests.integration.test_engine_crash import finish, read_all, start

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

ROWS, BATCH = 5000, 1024  # PostgreSQL's snapshot reads COPY rows in batches of 1024
SMALL = 300  # the table read first (tables are read in name order), whole before the kill
HOLD = SMALL + 2 * BATCH  # held with batch 3 of the big table unsent


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    harness = PgHarness(postgres, kafka, f"tsr_{uuid.uuid4().hex[:8]}")
    yield harness
    harness.dispose()


def test_sigkill_mid_snapshot_resumes_after_the_last_acknowledged_batch(
    h: PgHarness, tmp_path: Path
) -> None:
    h.sql(
        "CREATE TABLE a_small (id int PRIMARY KEY, v text)",
        "CREATE TABLE b_big (id int PRIMARY KEY, v text)",
        f"INSERT INTO a_small SELECT g, 'v' || g FROM generate_series(1, {SMALL}) g",
        # inserted in reverse: key order is not the physical order
        f"INSERT INTO b_big SELECT g, 'v' || g FROM generate_series({ROWS}, 1, -1) g",
    )
    cfg = h.config(
        table_include_list="public.a_small,public.b_big",
        snapshot_mode="initial",
        tombstones_on_delete="false",  # a delete's last event is its op=d event
    )
    offsets, spec = tmp_path / "offsets.json", tmp_path / "spec.json"
    doc = {"kind": "postgres", "bootstrap": h.kafka, "offsets": {"file": str(offsets)}}
    spec.write_text(
        json.dumps({**doc, "config": cfg, "flush_ms": 50, "hold_after_snapshot_rows": HOLD})
    )
    proc = start(spec)
    try:
        deadline = time.monotonic() + 90
        while stored(offsets, cfg).get("snapshot_after") != [str(BATCH)]:
            alive(proc)
            assert time.monotonic() < deadline, f"stored offset {stored(offsets, cfg)}"
            time.sleep(0.05)
    finally:
        proc.kill()  # SIGKILL
        proc.communicate()
    resume = stored(offsets, cfg)
    assert resume["snapshot_done"] == [f"{h.dbname}.public.a_small"]
    assert resume["snapshot_table"] == f"{h.dbname}.public.b_big"
    small, big = h.topic(cfg, "a_small"), h.topic(cfg, "b_big")
    first = read_all(h.kafka, big, "read_uncommitted")
    assert len(first) >= 2 * BATCH  # two batches were acknowledged
    assert [e["after"]["id"] for e in first[:BATCH]] == list(range(1, BATCH + 1))  # key order
    h.sql(
        "UPDATE a_small SET v = 'small, updated' WHERE id = 7",
        "DELETE FROM a_small WHERE id = 8",
        "INSERT INTO a_small VALUES (100000, 'small, new')",
        "UPDATE b_big SET v = 'done, updated' WHERE id = 10",
        "DELETE FROM b_big WHERE id = 11",
        f"UPDATE b_big SET v = 'left, updated' WHERE id = {3 * BATCH}",
        f"DELETE FROM b_big WHERE id = {3 * BATCH + 1}",
        f"INSERT INTO b_big VALUES ({ROWS + 1}, 'new')",
    )
    want_small = dict(h.sql("SELECT id, v FROM a_small"))
    want_big = dict(h.sql("SELECT id, v FROM b_big"))
    small_before = len(read_all(h.kafka, small, "read_uncommitted"))
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
    # the big table resumed after the stored key: the unacknowledged batch is read again,
    # nothing at or below the stored key is
    again = Counter(e["after"]["id"] for e in big_events[len(first) :] if e["op"] == "r")
    assert min(again) == BATCH + 1
    reads = Counter(e["after"]["id"] for e in big_events if e["op"] == "r")
    assert sum(n - 1 for n in reads.values()) <= BATCH  # at most one batch read twice
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
