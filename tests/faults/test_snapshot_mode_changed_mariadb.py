"""MariaDB: ``snapshot.mode`` changed between runs of one connector, under writes.

A writer runs throughout (also while the task is down); the connector runs in turn with
``initial``, ``when_needed``, ``never``, ``schema_only`` and ``schema_only_recovery``, each
run SIGKILLed after a while streaming. Expected (docs/mysql.md): ``initial`` snapshots once;
every later mode finds valid offsets (the binlog still has their position) and streams on
from them, ``schema_only_recovery`` rebuilding the schema history first. The topic holds
exactly one round of snapshot reads, and verify finds it equal to the table.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc.testing.kafka_reader import read_topic
from connectors.mysql.verify import verify_side
from tests.faults.scenario import SENTINEL, Writer, check, wait_for_sentinel
from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import MySqlHarness, module_harness
from tests.integration.test_mysql_snapshot_restart import Child

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]

ROWS = 800
MODES = ("initial", "when_needed", "never", "schema_only", "schema_only_recovery")
SCENARIO = "MariaDB: snapshot.mode initial → when_needed → never → schema_only → recovery"


@pytest.fixture(scope="module")
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    yield from module_harness(mariadb, kafka, tmp_path_factory, "fsmm")


def snapshot_rounds(kafka: str, topic: str) -> dict[object, int]:
    """Snapshot reads per snapshot (its events share the snapshot's binlog position)."""
    rounds: dict[object, int] = {}
    for e in read_topic(kafka, topic, settle=0.5):
        if e.op == "r":
            at = (e.value["source"]["file"], e.value["source"]["pos"])
            rounds[at] = rounds.get(at, 0) + 1
    return rounds


def test_snapshot_mode_changed_between_runs(h: MySqlHarness, tmp_path: Path, runs: int) -> None:
    for run in range(runs):
        one_run(h, tmp_path / f"run{run}", run, f"modes{run}")


def one_run(h: MySqlHarness, tmp: Path, run: int, table: str) -> None:
    tmp.mkdir()
    h.sql(
        f"CREATE TABLE {table} (id int PRIMARY KEY, v longtext, n int)",
        f"INSERT INTO {table} SELECT seq, CONCAT('v', seq), 0 FROM seq_1_to_{ROWS}",
    )
    cfg = h.config(table_include_list=rf"{h.dbname}\.{table}")
    topic = h.topic(cfg, table)
    child = Child(h, cfg, tmp)
    writer = Writer(h.connect, table, ROWS, 51 + run)
    writer.start()
    try:
        for mode in MODES:
            cfg["snapshot.mode"] = mode
            before = child.stored()
            child.start()
            h.wait_for(  # a streaming offset newer than the last run's
                lambda b=before: (
                    child.alive()
                    and (child.stored() or b) != b
                    and "snapshot" not in (child.stored() or {"snapshot": 1})
                ),
                timeout=90,
            )
            time.sleep(0.5)
            if mode != MODES[-1]:
                child.kill()
                time.sleep(0.3)  # writes while stopped
        writer.stop()
        h.sql(f"INSERT INTO {table} VALUES ({SENTINEL}, 'end', 0)")
        wait_for_sentinel(h.kafka, topic, child.alive)
    finally:
        writer.stop_event.set()
        child.kill()
    rounds = snapshot_rounds(h.kafka, topic)
    assert len(rounds) == 1 and min(rounds.values()) >= ROWS - 100, rounds
    check(SCENARIO, verify_side(cfg), h.kafka, f"{h.dbname}.{table}", topic)
