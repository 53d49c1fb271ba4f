"""PostgreSQL: the offsets file truncated (torn) while the worker is stopped, under writes.

Each run: a table captured for a while; the worker stopped and ``offsets.json`` cut to half
its length; writes while stopped. Expected (cdc/offsets/file.py, docs/worker.md):

- the next start finds the main file unreadable, resumes from the previous generation
  (``offsets.json.prev``) with a WARNING, and streams on from the slot;
- with both generations torn it refuses to start, naming both files and what to do;
- the documented way out, deleting both files, starts from scratch: a full snapshot, then
  streaming from the kept slot's confirmed position (the only record left of where the
  earlier run's events end), so the rows deleted while stopped get their deletes too and
  verify finds the topic equal to the table.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.postgres.verify import verify_side
from tests.faults.pg import pg_harness, pg_run, ready, run_child, wait_streaming
from tests.faults.scenario import SENTINEL, check, failed_child, process_alive, stop_child
from tests.faults.scenario import wait_for_sentinel as arrived
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

ROWS = 800


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    yield from pg_harness(postgres, kafka, "fot")


def tear(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_offsets_file_torn_while_stopped(h: PgHarness, tmp_path: Path, runs: int) -> None:
    for run in range(runs):
        r = pg_run(h, tmp_path, run, ROWS)
        main, prev = r.tmp / "offsets.json", r.tmp / "offsets.json.prev"
        writer = r.writer(ROWS, 51 + run)
        writer.special_after = 10
        writer.start()
        proc = run_child(h, r.cfg, r.tmp)
        try:
            wait_streaming(r, proc)
            time.sleep(0.5)
            stop_child(proc)
            assert prev.exists(), "no previous generation was kept"
            tear(main)
            time.sleep(0.3)  # writes while stopped
            proc = ready(run_child(h, r.cfg, r.tmp))
            time.sleep(1.0)
            writer.stop()
            err = stop_child(proc)
            assert "using the previous generation" in err, err[-3000:]

            tear(main)
            tear(prev)
            err = failed_child(run_child(h, r.cfg, r.tmp))
            assert "cannot read stored offsets" in err and str(prev) in err, err[-3000:]
            assert "delete both to start from scratch" in err, err[-3000:]

            gone = [x[0] for x in h.sql(f"SELECT id FROM {r.table} ORDER BY id LIMIT 3")]
            h.sql(f"DELETE FROM {r.table} WHERE id IN ({', '.join(map(str, gone))})")
            main.unlink()
            prev.unlink()
            proc = run_child(h, r.cfg, r.tmp)
            h.sql(f"INSERT INTO {r.table} VALUES ({SENTINEL}, 'end', 0)")
            arrived(h.kafka, r.topic, process_alive(proc))
        finally:
            writer.stop_event.set()
            if proc.poll() is None:
                stop_child(proc)
        check(
            "PostgreSQL: offsets file torn while stopped",
            verify_side(r.cfg),
            h.kafka,
            r.qualified,
            r.topic,
        )
        h.drop_slot(r.cfg)
