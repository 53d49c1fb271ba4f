"""An interrupted initial snapshot, restarted, loses no delete (issue 12.1).

A task process is SIGKILLed twice during its snapshot and once right after it, rows are
deleted, updated and inserted between the attempts, then a last run streams. The topic, read
as a compacted topic would keep it (last event per key), must equal the table: no key alive
in the topic that is gone from the table, nothing missing, nothing stale.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.testing.kafka_reader import read_topic
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]
ROWS = 12_000
SENTINEL = 10_000_000


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    with PgHarness(postgres, kafka, "snaprestart_" + uuid.uuid4().hex[:6]) as harness:
        yield harness


def run_child(
    h: PgHarness, cfg: dict[str, Any], tmp: Path, **faults: Any
) -> subprocess.Popen[bytes]:
    spec = {
        "kind": "postgres",
        "bootstrap": h.kafka,
        "offsets": {"file": str(tmp / "offsets.json")},
        "config": cfg,
        **faults,
    }
    path = tmp / f"spec-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(spec))
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.pg_snapshot_child", str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def killed(proc: subprocess.Popen[bytes]) -> None:
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, err.decode()[-3000:]


def stored_offset(tmp: Path) -> dict[str, Any]:
    [entry] = json.loads((tmp / "offsets.json").read_text())["offsets"]
    offset: dict[str, Any] = entry["offset"]
    return offset


def last_per_key(events: list[Any]) -> dict[int, dict[str, Any] | None]:
    """What a compacted topic keeps: the last value per key (None for a delete)."""
    state: dict[int, dict[str, Any] | None] = {}
    for e in events:
        if e.key is None:
            continue
        state[e.key["id"]] = None if e.value is None or e.op == "d" else e.after
    return state


def test_killed_snapshot_restarts_lose_no_delete(h: PgHarness, tmp_path: Path) -> None:
    h.sql(
        "CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL)",
        f"INSERT INTO items SELECT g, 'v0-' || g FROM generate_series(1, {ROWS}) g",
    )
    cfg = h.config(**{"max.queue.size": "400", "max.batch.size": "200"})
    topic = h.topic(cfg, "items")

    # Attempt 1 dies after 2,000 snapshot rows; rows it emitted are deleted, others change.
    killed(run_child(h, cfg, tmp_path, kill_after_rows=2000))
    first = stored_offset(tmp_path)
    assert first.get("snapshot") and "snapshot_origin" in first, first
    h.sql(
        "DELETE FROM items WHERE id <= 2000 AND id % 7 = 0",
        "UPDATE items SET v = 'v1-' || id WHERE id % 11 = 0",
        f"INSERT INTO items SELECT g, 'v1-' || g FROM generate_series({ROWS + 1}, {ROWS + 50}) g",
    )

    # Attempt 2 dies further in; again deletes of emitted rows, and of newly inserted ones.
    killed(run_child(h, cfg, tmp_path, kill_after_rows=6000))
    assert stored_offset(tmp_path)["snapshot_origin"] == first["snapshot_origin"]
    h.sql(
        "DELETE FROM items WHERE id <= 6000 AND id % 5 = 0",
        f"DELETE FROM items WHERE id > {ROWS + 40}",
        "UPDATE items SET v = 'v2-' || id WHERE id % 13 = 0",
    )
    temp_slots = h.sql("SELECT count(*) FROM pg_replication_slots WHERE temporary")

    # Attempt 3 completes the snapshot and dies before streaming anything.
    killed(run_child(h, cfg, tmp_path, kill_after_snapshot=True))
    done = stored_offset(tmp_path)
    assert not done.get("snapshot") and "snapshot_origin" not in done, done
    reads_before = sum(1 for e in read_topic(h.kafka, topic, settle=1.0) if e.op == "r")
    h.sql(
        "DELETE FROM items WHERE id % 17 = 0",
        "UPDATE items SET v = 'v3-' || id WHERE id % 19 = 0",
    )

    # The last run streams; the restart does not snapshot again.
    proc = run_child(h, cfg, tmp_path)
    try:
        h.sql(f"INSERT INTO items VALUES ({SENTINEL}, 'end')")
        events = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            events = read_topic(h.kafka, topic, settle=1.0)
            if any(e.key == {"id": SENTINEL} for e in events):
                break
            assert proc.poll() is None, proc.communicate()[1].decode()[-3000:]
        else:
            raise AssertionError("the sentinel never arrived")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-3000:]

    assert sum(1 for e in events if e.op == "r") == reads_before, "snapshot ran again"
    table = {i: {"id": i, "v": v} for i, v in h.sql("SELECT id, v FROM items")}
    topic_state = last_per_key(events)
    alive = {k: v for k, v in topic_state.items() if v is not None}
    ghosts = sorted(set(alive) - set(table))
    missing = sorted(set(table) - set(alive))
    stale = sorted(k for k in table if k in alive and alive[k] != table[k])
    assert (ghosts[:10], missing[:10], stale[:10]) == ([], [], [])
    assert len(alive) == len(table)
    # the kept slot served every restart; each temporary slot went with its connection
    assert h.sql("SELECT count(*) FROM pg_replication_slots WHERE temporary") == temp_slots
    assert h.sql(
        f"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{cfg['slot.name']}'"
    ) == [(1,)]
