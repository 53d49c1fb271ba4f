"""PostgreSQL: the replication slot dropped while the worker is stopped.

The changes made while no slot exists are gone from the server, so the connector must not
stream on as if nothing happened. Each run: a table under writes captured for a while
(``snapshot.mode=initial``), the worker stopped, its slot dropped, then inserts, updates and
deletes with no slot. Expected, as docs/postgres.md says:

- restarted unchanged (``initial``), the task fails naming the missing slot and the
  re-snapshot that recovers, and stores nothing;
- restarted with the documented recovery (``snapshot.mode=when_needed``; ``always`` on odd
  runs), it re-creates the slot, snapshots again under new writes and streams on. The table's
  inserts and updates come back through the snapshot; the rows deleted while no slot existed
  keep their last event downstream (nothing can replay those deletes; a WARNING says so), and
  verify names exactly those keys as extra, and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.postgres.verify import verify_side
from tests.faults.pg import pg_harness, pg_run, run_child
from tests.faults.scenario import (
    SENTINEL,
    check,
    failed_child,
    process_alive,
    stop_child,
    wait_for_sentinel,
)
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

ROWS = 800
SCENARIO = "PostgreSQL: slot dropped while stopped, recovered by re-snapshot"


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    yield from pg_harness(postgres, kafka, "fsd")


def slot_exists(h: PgHarness, slot: str) -> bool:
    return bool(h.sql(f"SELECT 1 FROM pg_replication_slots WHERE slot_name = '{slot}'"))


def test_slot_dropped_while_stopped(h: PgHarness, tmp_path: Path, runs: int) -> None:
    for run in range(runs):
        one_run(h, tmp_path, run)


def one_run(h: PgHarness, tmp_path: Path, run: int) -> None:
    r = pg_run(h, tmp_path, run, ROWS, snapshot_mode="initial")
    cfg, tmp, table, topic = r.cfg, r.tmp, r.table, r.topic
    writer = r.writer(ROWS, 17 + run)
    writer.start()
    proc = run_child(h, cfg, tmp)
    try:
        time.sleep(2.0)
        writer.stop()
        stop_child(proc)
        offsets = (tmp / "offsets.json").read_bytes()
        h.drop_slot(cfg)
        assert not slot_exists(h, cfg["slot.name"])

        # No slot: these changes are not kept anywhere but in the table.
        gone = [r[0] for r in h.sql(f"SELECT id FROM {table} ORDER BY id LIMIT 5 OFFSET 100")]
        h.sql(
            f"DELETE FROM {table} WHERE id IN ({', '.join(map(str, gone))})",
            f"UPDATE {table} SET v = 'gap', n = n + 1 WHERE id IN "
            f"(SELECT id FROM {table} ORDER BY id LIMIT 5 OFFSET 200)",
            f"INSERT INTO {table} SELECT g, 'gap', 0 FROM generate_series("
            f"{SENTINEL - 100}, {SENTINEL - 96}) g",
        )

        # Unchanged config: a clear error, and the stored offsets stay as they were.
        err = failed_child(run_child(h, cfg, tmp))
        assert f"replication slot '{cfg['slot.name']}' does not exist" in err, err[-3000:]
        assert "snapshot.mode=always" in err and "when_needed" in err, err[-3000:]
        assert (tmp / "offsets.json").read_bytes() == offsets
        assert not slot_exists(h, cfg["slot.name"])

        # The documented recovery: a re-snapshot, under new writes once the slot is back.
        cfg["snapshot.mode"] = "when_needed" if run % 2 == 0 else "always"
        proc = run_child(h, cfg, tmp)
        deadline = time.monotonic() + 60
        while not slot_exists(h, cfg["slot.name"]):
            process_alive(proc)()
            assert time.monotonic() < deadline, "the slot was not re-created"
            time.sleep(0.05)
        writer = r.writer(writer.next_id + 10, 23 + run, moved_to=SENTINEL - 2)
        writer.special_after = 5
        writer.start()
        time.sleep(1.5)
        writer.stop()
        h.sql(f"INSERT INTO {table} VALUES ({SENTINEL}, 'end', 0)")
        wait_for_sentinel(h.kafka, topic, process_alive(proc))
    finally:
        writer.stop_event.set()
        if proc.poll() is None:
            err = stop_child(proc)
    assert "keep their last event downstream" in err, err[-3000:]
    check(SCENARIO, verify_side(cfg), h.kafka, f"public.{table}", topic, extra=gone)
    h.drop_slot(cfg)
