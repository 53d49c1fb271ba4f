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
