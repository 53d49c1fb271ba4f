"""MariaDB: the worker SIGKILLed at random points (during the initial snapshot, right after
it, during streaming) while writers run; after a last run the topic equals the table.

Each run: a table of 1,500 rows whose snapshot is slowed (a SLEEP per row through
``snapshot.select.statement.overrides``) so a kill lands inside it, a writer running
throughout, a task process (``tests.integration.mysql_harness``'s child, file offsets) killed
after a random number of snapshot rows, the next killed as soon as its snapshot-complete
offset is stored, a third killed after a random time streaming, and a last one stopped once
the sentinel row reached the topic.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.mysql.verify import verify_side
from tests.faults.scenario import SENTINEL, Writer, check, wait_for_sentinel
from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import MySqlHarness, module_harness
from tests.integration.test_mysql_snapshot_restart import Child, fast, slow, snapshot_rows

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]

ROWS = 1500


@pytest.fixture(scope="module")
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    yield from module_harness(mariadb, kafka, tmp_path_factory, "fk")


def test_sigkill_at_random_points(h: MySqlHarness, tmp_path: Path, runs: int) -> None:
    for run in range(runs):
        one_run(h, tmp_path / f"run{run}", random.Random(run), f"items{run}")


def one_run(h: MySqlHarness, tmp: Path, rng: random.Random, table: str) -> None:
    tmp.mkdir()
    h.sql(
        f"CREATE TABLE {table} (id int PRIMARY KEY, v longtext, n int)",
        f"INSERT INTO {table} SELECT seq, CONCAT('v', seq), 0 FROM seq_1_to_{ROWS}",
    )
    cfg = h.config(table_include_list=rf"{h.dbname}\.{table}", snapshot_fetch_size="50")
    slow(cfg, h, table, 0.002)
    topic = h.topic(cfg, table)
    child = Child(h, cfg, tmp)
    writer = Writer(h.connect, table, ROWS, 11)
    writer.start()
    try:
        goal = rng.randint(100, ROWS - 300)
        child.start()
        h.wait_for(lambda: child.alive() and snapshot_rows(h, cfg, table) > goal, timeout=90)
        child.kill()
        fast(cfg, h, table)
        child.start()
        h.wait_for(
            lambda: child.alive() and "snapshot" not in (child.stored() or {"snapshot": 1}),
            timeout=90,
        )
        child.kill()
        child.start()
        time.sleep(rng.uniform(1.0, 4.0))
        child.kill()
        child.start()
        time.sleep(1.0)
        writer.stop()
        h.sql(f"INSERT INTO {table} VALUES ({SENTINEL}, 'end', 0)")
        wait_for_sentinel(h.kafka, topic, child.alive)
    finally:
        writer.stop_event.set()
        child.kill()
    check(
        "MariaDB: SIGKILL during snapshot, after it, streaming",
        verify_side(cfg),
        h.kafka,
        f"{h.dbname}.{table}",
        topic,
    )
