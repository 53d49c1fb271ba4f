"""MariaDB: the worker SIGKILLed during a DDL, under writes.

Each run: a table under writes, captured by a task process (``tests.faults.child``, file
offsets and file schema history). Two ``ALTER TABLE ... ADD COLUMN`` statements, each
followed by an update that fills the new column, kill the task at the ``ALTER``: once just
before its schema history record is written, once right after it (the history then holds a
DDL whose position no stored offset has reached), in a random order. After each kill the task
restarts and replays from its last offset; a last run adds a third column without a kill.
Rows written before, between and after the DDLs must be decoded with the table definition of
their position: verify finds the topic equal to the table (new columns included).
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from subprocess import Popen
from typing import Any

import pytest

from connectors.mysql.verify import verify_side
from tests.faults.child import spawn
from tests.faults.scenario import (
    SENTINEL,
    Writer,
    check,
    process_alive,
    stop_child,
    stored_offset,
    wait_for_sentinel,
)
from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import MySqlHarness, module_harness

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]

ROWS = 600


@pytest.fixture(scope="module")
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    yield from module_harness(mariadb, kafka, tmp_path_factory, "fdl")


def test_sigkill_during_ddl(h: MySqlHarness, tmp_path: Path, runs: int) -> None:
    for run in range(runs):
        one_run(h, tmp_path / f"run{run}", random.Random(run), f"items{run}")


def start(h: MySqlHarness, tmp: Path, cfg: dict[str, Any], **kill: str) -> Popen[bytes]:
    h.new_server_id(cfg)
    extra = {"kill_at_ddl": kill} if kill else {}
    return spawn(tmp, "mysql", h.kafka, cfg, **extra)


def streaming(tmp: Path, proc: Popen[bytes]) -> None:
    """Until the task stored an offset past its snapshot."""
    deadline = time.monotonic() + 60
    while True:
        stored = stored_offset(tmp / "offsets.json")
        if stored is not None and not stored.get("snapshot"):
            return
        process_alive(proc)()
        assert time.monotonic() < deadline, "the snapshot did not finish"
        time.sleep(0.05)


def alter(h: MySqlHarness, table: str, column: str) -> None:
    h.sql(
        f"ALTER TABLE {table} ADD COLUMN {column} int NULL",
        f"UPDATE {table} SET {column} = n + 100 WHERE id % 5 = 0",
    )


def killed(proc: Popen[bytes]) -> None:
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err.decode()[-3000:]


def one_run(h: MySqlHarness, tmp: Path, rng: random.Random, table: str) -> None:
    tmp.mkdir()
    h.sql(
        f"CREATE TABLE {table} (id int PRIMARY KEY, v longtext, n int)",
        f"INSERT INTO {table} (id, v, n) SELECT seq, CONCAT('v', seq), 0 FROM seq_1_to_{ROWS}",
    )
    cfg = h.config(table_include_list=rf"{h.dbname}\.{table}")
    topic = h.topic(cfg, table)
    writer = Writer(h.connect, table, ROWS, rng.randrange(1000))
    writer.special_after = 10
    writer.start()
    order = rng.sample(["before", "after"], 2)
    proc: Popen[bytes] | None = None
    try:
        for column, when in zip(("c1", "c2"), order, strict=True):
            proc = start(h, tmp, cfg, match=f"ADD COLUMN {column}", when=when)
            streaming(tmp, proc)
            time.sleep(rng.uniform(0.2, 1.0))
            alter(h, table, column)
            killed(proc)
        proc = start(h, tmp, cfg)
        time.sleep(0.5)
        alter(h, table, "c3")
        time.sleep(0.5)
        writer.stop()
        h.sql(f"INSERT INTO {table} (id, v, n) VALUES ({SENTINEL}, 'end', 0)")
        wait_for_sentinel(h.kafka, topic, process_alive(proc))
    finally:
        writer.stop_event.set()
        if proc is not None and proc.poll() is None:
            stop_child(proc)
    check(
        "MariaDB: SIGKILL during a DDL (before / after its history record)",
        verify_side(cfg),
        h.kafka,
        f"{h.dbname}.{table}",
        topic,
    )
