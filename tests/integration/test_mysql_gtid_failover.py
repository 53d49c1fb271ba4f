"""AC-43: the connector switched to another member of a GTID replication group finds its
position there by GTID and continues without loss.

Two private MariaDB servers of the same Debian package as the shared one (so the shared
server's binlog stays out of it): a primary and a replica replicating from it with
``MASTER_USE_GTID=slave_pos`` and ``log_slave_updates``. The connector snapshots and streams
the primary; it is stopped, the primary takes more writes (replicated), then dies; the
replica takes writes of its own; the connector, restarted against the replica with the same
offsets, must deliver exactly the changes it had not delivered: no snapshot again, no
change twice, none missing. The binlog file names are the same on both servers
(``mariadb-bin.000001``) with other contents at each position, so a restart by file and
position would go wrong without an error: only the GTIDs locate the position.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from cdc.offsets.memory import MemoryOffsetStore
from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import MySqlHarness
from tests.integration.test_worker_rest import free_port
from worker.dev.mariadb import PASSWORD, USER, MariaDBService

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]


def info(svc: MariaDBService) -> MySqlInfo:
    return MySqlInfo(svc.host, svc.port, USER, PASSWORD, svc.server_id)


def query(svc: MariaDBService, *statements: str) -> list[tuple[object, ...]]:
    conn = pymysql.connect(
        host=svc.host, port=svc.port, user=USER, password=PASSWORD, autocommit=True
    )
    rows: list[tuple[object, ...]] = []
    try:
        with conn.cursor() as cur:
            for s in statements:
                cur.execute(s)
                rows = list(cur.fetchall())
    finally:
        conn.close()
    return rows


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[MariaDBService, MariaDBService]]:
    root = Path(tempfile.mkdtemp(prefix="tidemark-gtid-failover-"))
    root.chmod(0o755)  # the servers run as mysql
    primary = MariaDBService(root / "primary", free_port(), server_id=11)
    replica = MariaDBService(root / "replica", free_port(), server_id=12)
    try:
        primary.start()
        replica.start()
        query(
            replica,
            f"CHANGE MASTER TO MASTER_HOST='{primary.host}', MASTER_PORT={primary.port}, "
            f"MASTER_USER='{USER}', MASTER_PASSWORD='{PASSWORD}', MASTER_USE_GTID=slave_pos",
            "START SLAVE",
        )
        yield primary, replica
    finally:
        replica.stop()
        primary.stop()
        shutil.rmtree(root, ignore_errors=True)


def caught_up(primary: MariaDBService, replica: MariaDBService) -> None:
    (want,) = query(primary, "SELECT @@gtid_binlog_pos")[0]
    deadline = time.monotonic() + 30
    while query(replica, "SELECT @@gtid_slave_pos")[0][0] != want:
        status = query(replica, "SHOW SLAVE STATUS")
        assert time.monotonic() < deadline, f"the replica did not catch up: {status}"
        time.sleep(0.1)


def test_switch_to_a_replica_continues_by_gtid_without_loss(
    pair: tuple[MariaDBService, MariaDBService], kafka: str, tmp_path: Path
) -> None:
    primary, replica = pair
    h = MySqlHarness(info(primary), kafka, "failover", tmp_path)
    h.sql(
        "CREATE TABLE t (id int PRIMARY KEY, v varchar(20))",
        "INSERT INTO t VALUES " + ",".join(f"({i}, 'v{i}')" for i in range(1, 21)),
    )
    cfg = h.config(snapshot_mode="initial")
    store = MemoryOffsetStore()
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.sql(
            "INSERT INTO t VALUES " + ",".join(f"({i}, 'v{i}')" for i in range(21, 31)),
            "UPDATE t SET v = 'five' WHERE id = 5",
            "DELETE FROM t WHERE id = 6",
        )
        h.wait_for(lambda: len(h.read(cfg, "t", timeout=5, settle=0.2)) >= 20 + 10 + 1 + 2, run=run)
    delivered = len(h.read(cfg, "t", timeout=10, settle=0.5))

    # while the connector is down: more on the primary, replicated; then the primary dies
    h.sql(
        "INSERT INTO t VALUES " + ",".join(f"({i}, 'v{i}')" for i in range(31, 41)),
        "UPDATE t SET v = 'seven' WHERE id = 7",
        "DELETE FROM t WHERE id = 8",
    )
    caught_up(primary, replica)
    primary.stop()
    # the replica takes over: writes of its own (its server id in the GTIDs)
    on_replica = copy.copy(h)  # the same database and topics, on the replica
    on_replica.db = info(replica)
    query(replica, "STOP SLAVE")
    on_replica.sql(
        "INSERT INTO t VALUES " + ",".join(f"({i}, 'v{i}')" for i in range(41, 46)),
        "UPDATE t SET v = 'nine' WHERE id = 9",
    )
    want = {int(r[0]): str(r[1]) for r in on_replica.sql("SELECT id, v FROM t")}

    moved = {**cfg, "database.hostname": replica.host, "database.port": str(replica.port)}
    with on_replica.running(moved, store) as run:
        deadline = time.monotonic() + 60
        while True:
            events = on_replica.read(cfg, "t", timeout=5, settle=0.3)
            last: dict[int, str | None] = {}
            for e in events:
                if e.value is None:
                    continue
                row = e.after or e.before
                last[int(row["id"])] = None if e.op == "d" else e.after["v"]
            got = {k: v for k, v in last.items() if v is not None}
            if got == want:
                break
            assert not run.errors, run.errors
            assert time.monotonic() < deadline, (
                f"missing {sorted(want.keys() - got.keys())}, extra "
                f"{sorted(got.keys() - want.keys())}, wrong "
                f"{sorted(k for k in got.keys() & want.keys() if got[k] != want[k])}"
            )
            time.sleep(0.5)
    after = [e for e in events[delivered:] if e.value is not None]
    # no snapshot again, and each change exactly once
    assert all(e.op != "r" for e in after), [e.op for e in after]
    changes = Counter((e.op, int((e.after or e.before)["id"])) for e in after)
    expected = Counter([("c", i) for i in range(31, 46)] + [("u", 7), ("d", 8), ("u", 9)])
    assert changes == expected
