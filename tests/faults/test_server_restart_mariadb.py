"""MariaDB: the server SIGKILLed (a crash: InnoDB recovery at the next start) while writers run
and the task streams the binlog, then started again; the task reconnects by itself and, after
a last run, the topic equals the table.

The server is a private one (its own data folder and port, for this module): the shared
instance the other tests use is never touched. Writers reconnect after the outage
(``ReconnectingWriter``).
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from connectors.mysql.verify import verify_side
from tests.faults.private import private_service
from tests.faults.scenario import SENTINEL, ReconnectingWriter, check, wait_for_sentinel
from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import MySqlHarness, module_harness
from tests.integration.test_mysql_snapshot_restart import Child
from worker.dev.mariadb import MariaDBService

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]

ROWS = 1500
SCENARIO = "MariaDB: server SIGKILLed while streaming, restarted"
LOST = (pymysql.err.OperationalError, pymysql.err.InterfaceError)


@pytest.fixture(scope="module")
def server() -> Iterator[MariaDBService]:
    yield from private_service(MariaDBService)


@pytest.fixture(scope="module")
def h(
    server: MariaDBService, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    env = server.env()
    info = MySqlInfo(
        env["TIDEMARK_MYSQL_HOST"],
        int(env["TIDEMARK_MYSQL_PORT"]),
        env["TIDEMARK_MYSQL_USER"],
        env["TIDEMARK_MYSQL_PASSWORD"],
        int(env["TIDEMARK_MYSQL_SERVER_ID"]),
    )
    yield from module_harness(info, kafka, tmp_path_factory, "fmr")


def test_server_crashed_and_restarted(
    server: MariaDBService, h: MySqlHarness, tmp_path: Path, runs: int
) -> None:
    for run in range(runs):
        one_run(server, h, tmp_path / f"run{run}", random.Random(run), f"items{run}")


def one_run(
    server: MariaDBService, h: MySqlHarness, tmp: Path, rng: random.Random, table: str
) -> None:
    tmp.mkdir()
    h.sql(
        f"CREATE TABLE {table} (id int PRIMARY KEY, v longtext, n int)",
        f"INSERT INTO {table} SELECT seq, CONCAT('v', seq), 0 FROM seq_1_to_{ROWS}",
    )
    cfg = h.config(table_include_list=rf"{h.dbname}\.{table}")
    topic = h.topic(cfg, table)
    child = Child(h, cfg, tmp)
    writer = ReconnectingWriter(LOST, h.connect, table, ROWS, 21)
    try:
        child.start()
        h.wait_for(
            lambda: child.alive() and "snapshot" not in (child.stored() or {"snapshot": 1}),
            timeout=90,
        )
        writer.start()
        time.sleep(rng.uniform(1.0, 2.5))
        server.crash(signal.SIGKILL)
        time.sleep(rng.uniform(0.5, 2.0))
        server.start()
        time.sleep(rng.uniform(1.0, 2.5))  # writers and capture both back
        writer.stop()
        assert writer.reconnects > 0, "the writers never saw the server go"
        h.sql(f"INSERT INTO {table} VALUES ({SENTINEL}, 'end', 0)")
        wait_for_sentinel(h.kafka, topic, child.alive)
    finally:
        writer.stop_event.set()
        child.kill()
    check(SCENARIO, verify_side(cfg), h.kafka, f"{h.dbname}.{table}", topic)


PURGE_SCENARIO = "MariaDB: binlog purged past the stored position, recovered by re-snapshot"


def end_dump_threads(h: MySqlHarness) -> int:
    """KILL the server's binlog dump threads; how many there were."""
    dumps = [row[0] for row in h.sql("SHOW PROCESSLIST") if row[4] == "Binlog Dump"]
    for thread in dumps:
        h.sql(f"KILL {thread}")
    return len(dumps)


def test_binlog_purged_while_stopped(h: MySqlHarness, tmp_path: Path, runs: int) -> None:
    """AC-42 on a real purge: the task stopped, changes made, the binlog files holding them
    purged. Restarted unchanged (``initial``) it fails naming the purged position and stores
    nothing; with ``snapshot.mode=when_needed`` it snapshots again under new writes and streams
    on. The rows deleted during the gap (until the new snapshot's consistent point) keep their
    last event downstream (nothing can replay those deletes): verify names exactly those keys
    as extra, and nothing else."""
    for run in range(runs):
        purge_run(h, tmp_path / f"purge{run}", run, f"purged{run}")


def purge_run(h: MySqlHarness, tmp: Path, run: int, table: str) -> None:
    tmp.mkdir()
    h.sql(
        f"CREATE TABLE {table} (id int PRIMARY KEY, v longtext, n int)",
        f"INSERT INTO {table} SELECT seq, CONCAT('v', seq), 0 FROM seq_1_to_{ROWS}",
    )
    cfg = h.config(table_include_list=rf"{h.dbname}\.{table}", snapshot_mode="initial")
    topic = h.topic(cfg, table)
    child = Child(h, cfg, tmp)
    writer = ReconnectingWriter(LOST, h.connect, table, ROWS, 31 + run)
    try:
        child.start()
        h.wait_for(
            lambda: child.alive() and "snapshot" not in (child.stored() or {"snapshot": 1}),
            timeout=90,
        )
        writer.start()
        time.sleep(1.5)
        writer.stop()
        time.sleep(1.0)  # the last changes stored
        child.kill()
        stored = child.stored()

        # The gap: changes that only the binlog files about to be purged hold.
        gone = [r[0] for r in h.sql(f"SELECT id FROM {table} ORDER BY id LIMIT 5 OFFSET 100")]
        h.sql(
            f"DELETE FROM {table} WHERE id IN ({', '.join(map(str, gone))})",
            f"UPDATE {table} SET v = 'gap', n = n + 1 WHERE id IN "
            f"(SELECT id FROM (SELECT id FROM {table} ORDER BY id LIMIT 5 OFFSET 200) AS t)",
            f"INSERT INTO {table} SELECT seq, 'gap', 0 "
            f"FROM seq_{SENTINEL - 100}_to_{SENTINEL - 96}",
            "FLUSH BINARY LOGS",
        )
        # The killed task's dump thread would keep its file from being purged until the
        # server notices the closed connection: end it first.
        h.wait_for(lambda: not end_dump_threads(h), timeout=30)
        newest = h.sql("SHOW BINARY LOGS")[-1][0]

        def purged() -> bool:  # refused while InnoDB has not checkpointed the old files
            h.sql(f"PURGE BINARY LOGS TO '{newest}'")
            return [r[0] for r in h.sql("SHOW BINARY LOGS")] == [newest]

        h.wait_for(purged, timeout=60)

        # Unchanged config: a clear error naming the purged position; offsets unchanged.
        child.start()
        assert child.proc is not None
        try:
            child.proc.wait(60)
        except subprocess.TimeoutExpired:
            raise AssertionError("the task went on from a purged position") from None
        log = child.log.read_text()
        assert "purge" in log.lower() and "when_needed" in log, log[-3000:]
        assert child.stored() == stored

        # The documented recovery: a re-snapshot, under new writes.
        cfg["snapshot.mode"] = "when_needed"
        child.start()
        # New writes once the new snapshot is done: a row deleted before its consistent
        # point is one more delete nothing can replay (the gap lasts until that point).
        h.wait_for(
            lambda: (
                child.alive()
                and (child.stored() or stored) != stored
                and "snapshot" not in (child.stored() or {"snapshot": 1})
            ),
            timeout=90,
        )
        writer = ReconnectingWriter(LOST, h.connect, table, writer.next_id + 10, 41 + run)
        writer.moved_to = SENTINEL - 2
        writer.special_after = 5
        writer.start()
        time.sleep(1.5)
        writer.stop()
        h.sql(f"INSERT INTO {table} VALUES ({SENTINEL}, 'end', 0)")
        wait_for_sentinel(h.kafka, topic, child.alive)
    finally:
        writer.stop_event.set()
        child.kill()
    assert "consumers may keep rows the table no longer has" in child.log.read_text()
    check(PURGE_SCENARIO, verify_side(cfg), h.kafka, f"{h.dbname}.{table}", topic, extra=gone)
