"""PostgreSQL: the offsets file deleted while the worker is stopped, with writers running
before, between and after the two runs: the next run starts from what is left and the topic
still equals the table. Only ``offsets.json`` is deleted; the file store keeps the previous
generation as ``offsets.json.prev`` and resumes from it (with a WARNING), so the run streams
on from its replication slot rather than snapshotting again; duplicates stay near zero."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.postgres.verify import verify_side
from tests.faults.pg import pg_harness, pg_run, run_child
from tests.faults.scenario import SENTINEL, check, process_alive, stop_child, wait_for_sentinel
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

ROWS = 2000


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    yield from pg_harness(postgres, kafka, "fol")


def test_offsets_file_deleted_while_stopped(h: PgHarness, tmp_path: Path, runs: int) -> None:
    for run in range(runs):
        r = pg_run(h, tmp_path, run, ROWS)
        writer = r.writer(ROWS, 13 + run)
        writer.start()
        proc = run_child(h, r.cfg, r.tmp)
        try:
            time.sleep(3.0)
            stop_child(proc)
            (r.tmp / "offsets.json").unlink()
            time.sleep(0.5)  # writes while stopped
            proc = run_child(h, r.cfg, r.tmp)
            time.sleep(2.0)
            writer.stop()
            h.sql(f"INSERT INTO {r.table} VALUES ({SENTINEL}, 'end', 0)")

            wait_for_sentinel(h.kafka, r.topic, process_alive(proc))
        finally:
            writer.stop_event.set()
            if proc.poll() is None:
                err = stop_child(proc)
        assert "using the previous generation" in err, err[-3000:]
        check(
            "PostgreSQL: offsets file deleted while stopped",
            verify_side(r.cfg),
            h.kafka,
            r.qualified,
            r.topic,
        )
        h.drop_slot(r.cfg)
