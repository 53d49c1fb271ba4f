"""PostgreSQL: ``snapshot.mode`` changed between runs of one connector, under writes.

A writer runs throughout (also while the worker is stopped); the connector runs in turn with
``initial``, ``when_needed``, ``never`` and ``always``, stopped (SIGTERM) between the runs.
Expected (docs/postgres.md): ``initial`` snapshots once; ``when_needed`` finds valid offsets
and a live slot and streams on without a snapshot; ``never`` streams on; ``always``
snapshots again and then resumes streaming from the offset the re-snapshot replaces. The
topic holds exactly two rounds of snapshot reads, and verify finds it equal to the table.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc.testing.kafka_reader import read_topic
from connectors.postgres.verify import verify_side
from tests.faults.pg import pg_harness, pg_run, ready, run_child, wait_streaming
from tests.faults.scenario import (
    SENTINEL,
    check,
    process_alive,
    stop_child,
    wait_for_sentinel,
)
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

ROWS = 800
MODES = ("initial", "when_needed", "never", "always")


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    yield from pg_harness(postgres, kafka, "fsm")


def snapshot_rounds(kafka: str, topic: str) -> dict[object, int]:
    """Snapshot reads per snapshot (its events share the snapshot's LSN)."""
    rounds: dict[object, int] = {}
    for e in read_topic(kafka, topic, settle=0.5):
        if e.op == "r":
            lsn = e.value["source"]["lsn"]
            rounds[lsn] = rounds.get(lsn, 0) + 1
    return rounds


def test_snapshot_mode_changed_between_runs(h: PgHarness, tmp_path: Path, runs: int) -> None:
    for run in range(runs):
        r = pg_run(h, tmp_path, run, ROWS)
        cfg, tmp, table, topic = r.cfg, r.tmp, r.table, r.topic
        writer = r.writer(ROWS, 31 + run)
        writer.start()
        proc = None
        try:
            for mode in MODES:
                cfg["snapshot.mode"] = mode
                proc = ready(run_child(h, cfg, tmp))
                wait_streaming(r, proc)  # a stop during a snapshot fails it: not this fault
                time.sleep(0.5)
                process_alive(proc)()
                if mode != MODES[-1]:
                    stop_child(proc)
                    time.sleep(0.3)  # writes while stopped
            writer.stop()
            h.sql(f"INSERT INTO {table} VALUES ({SENTINEL}, 'end', 0)")
            assert proc is not None
            wait_for_sentinel(h.kafka, topic, process_alive(proc))
        finally:
            writer.stop_event.set()
            if proc is not None and proc.poll() is None:
                stop_child(proc)
        rounds = snapshot_rounds(h.kafka, topic)
        assert len(rounds) == 2, f"snapshot rounds (LSN: reads): {rounds}"
        assert min(rounds.values()) >= ROWS - 100, rounds
        check(
            "PostgreSQL: snapshot.mode initial → when_needed → never → always",
            verify_side(cfg),
            h.kafka,
            f"public.{table}",
            topic,
        )
        h.drop_slot(cfg)
