"""Restarts and failures: graceful stop, SIGKILL, lost connections, an unreachable server, and
resuming inside a multi-row transaction — against MariaDB and Kafka."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.offsets.file import FileOffsetStore
from cdc.offsets.memory import MemoryOffsetStore
from connectors.mysql.errors import ConnectionLost
from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import Event, MySqlHarness, TcpProxy

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    harness = MySqlHarness(
        mariadb, kafka, f"tf_{uuid.uuid4().hex[:8]}", tmp_path_factory.mktemp("myfail")
    )
    yield harness
    harness.drop()


def table(h: MySqlHarness, name: str) -> None:
    h.sql(f"CREATE TABLE {name} (id int PRIMARY KEY, v varchar(20))")


def ids(events: list[Event]) -> list[int]:
    return [e.key["id"] for e in events if e.value is not None]


def test_graceful_restart_has_no_loss_and_no_duplicates(h: MySqlHarness) -> None:
    """AC-38."""
    table(h, "g")
    h.sql("INSERT INTO g VALUES (1, 'a'), (2, 'b')")
    cfg = h.config(table_include_list=rf"{h.dbname}\.g")
    store = MemoryOffsetStore()
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO g VALUES (3, 'c')")
        h.read(cfg, "g", min_count=3, settle=0.3)
    h.sql("INSERT INTO g VALUES (4, 'd')", "UPDATE g SET v = 'x' WHERE id = 1")
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO g VALUES (5, 'e')")
        events = h.read(cfg, "g", min_count=6, settle=0.5)
    assert [(e.op, e.key["id"]) for e in events] == [
        ("r", 1),
        ("r", 2),
        ("c", 3),
        ("c", 4),
        ("u", 1),
        ("c", 5),
    ]


def _mid_statement_offset(
    h: MySqlHarness, name: str
) -> tuple[Any, MemoryOffsetStore, dict[str, Any], int]:
    """A 3000-row statement streamed once, and tidemark's offset of its 1500th row."""
    table(h, name)
    cfg = h.config(table_include_list=rf"{h.dbname}\.{name}", snapshot_mode="schema_only")
    store = MemoryOffsetStore()
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.sql(f"INSERT INTO {name} SELECT seq, CONCAT('v', seq) FROM seq_1_to_3000")
        events = h.read(cfg, name, min_count=3000, settle=0.5)
    sources = [e.value["source"] for e in events]
    assert len({s["gtid"] for s in sources}) == 1
    positions = list(dict.fromkeys(s["pos"] for s in sources))  # one per row event
    assert len(positions) > 3, "expected the statement to span several row events"
    cut = 1500
    src = sources[cut - 1]
    domain, server, seq = (int(x) for x in src["gtid"].split("-"))
    offset = {
        "file": src["file"],
        "pos": 4,
        "gtids": f"{domain}-{server}-{seq - 1}",
        "event": positions.index(src["pos"]),
        "row": src["row"] + 1,
        "ts_sec": 0,
        "server_id": server,
        "row_events": positions.index(src["pos"]),
    }
    assert offset["row"] > 1 and offset["event"] > 0  # really in the middle of an event
    return cfg, store, offset, cut


def test_resume_inside_a_multi_row_transaction(h: MySqlHarness) -> None:
    """Offsets name the transaction start plus the row events and rows already emitted: a
    restart from an offset in the middle of a 3000-row statement emits exactly the rest."""
    cfg, store, offset, cut = _mid_statement_offset(h, "mt")
    store.put(cfg["name"], {"server": cfg["database.server.name"]}, offset)
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        again = h.read(cfg, "mt", min_count=3000 + 1500, settle=0.5)
    assert ids(again[3000:]) == list(range(cut + 1, 3001))


def test_debezium_offset_inside_a_transaction_loses_nothing(h: MySqlHarness) -> None:
    """Debezium's ``event`` counts every binlog event since the transaction's start (GTID,
    table maps, row events), not row events: read as tidemark's count, the same point would
    skip rows never delivered. An offset without tidemark's ``row_events`` restarts its
    transaction from the start: the delivered part again, nothing lost."""
    cfg, store, offset, _cut = _mid_statement_offset(h, "dz")
    row_events = offset.pop("row_events")
    # Debezium's count for the same row: the GTID event, then a table map and a row event
    # per row event before it, and the table map of the current one
    offset["event"] = 1 + 2 * row_events + 1
    store.put(cfg["name"], {"server": cfg["database.server.name"]}, offset)
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO dz VALUES (5000, 'after')")
        again = h.read(cfg, "dz", min_count=3000 + 3001, settle=0.5)
    assert ids(again[3000:]) == [*range(1, 3001), 5000]


def test_lost_connection_is_re_established(h: MySqlHarness) -> None:
    """Server-side disconnect (as on a server restart): the connector reconnects from its own
    checkpoint, without loss or duplicates."""
    user = f"repl_{uuid.uuid4().hex[:6]}"
    h.sql(
        f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'", f"GRANT ALL ON *.* TO '{user}'@'%'", db=""
    )
    try:
        table(h, "rc")
        cfg = h.config(
            table_include_list=rf"{h.dbname}\.rc",
            snapshot_mode="schema_only",
            database_user=user,
            database_password="pw",
        )
        with h.running(cfg) as run:
            h.wait_streaming(run)
            h.sql("INSERT INTO rc VALUES (1, 'a')")
            h.read(cfg, "rc", min_count=1, settle=0.2)
            for new_id in (2, 3):
                dumps = h.sql(
                    "SELECT ID FROM information_schema.PROCESSLIST "
                    f"WHERE USER = '{user}' AND COMMAND LIKE 'Binlog Dump%'",
                    db="",
                )
                assert dumps
                for (pid,) in dumps:
                    h.sql(f"KILL {pid}", db="")
                h.sql("INSERT INTO rc VALUES (%s, 'b')", params=(new_id,))
                h.wait_for(lambda: run.engine.metrics.streaming.connected, run=run)
                time.sleep(0.3)
            events = h.read(cfg, "rc", min_count=3, settle=0.5)
        assert run.connector.metrics.disconnects >= 2
        assert ids(events) == [1, 2, 3]
    finally:
        h.sql(f"DROP USER '{user}'@'%'", db="")


def test_unreachable_server_fails_then_resumes(h: MySqlHarness) -> None:
    """AC-41: the server goes away → the task fails (after the reconnect budget); restarted
    once the server is back, it resumes from the stored offset."""
    table(h, "ur")
    proxy = TcpProxy(h.db.host, h.db.port)
    proxy.resume()
    cfg = h.config(
        table_include_list=rf"{h.dbname}\.ur",
        snapshot_mode="schema_only",
        database_hostname="127.0.0.1",
        database_port=str(proxy.port),
        connect_max_attempts="2",
        connect_timeout_ms="1000",
    )
    store = MemoryOffsetStore()
    run = h.start(cfg, store)
    h.wait_streaming(run)
    h.sql("INSERT INTO ur VALUES (1, 'a')")
    h.read(cfg, "ur", min_count=1, settle=0.3)
    time.sleep(0.5)
    proxy.cut()
    h.sql("INSERT INTO ur VALUES (2, 'b')")  # written while the connector cannot see it
    run.thread.join(60)
    assert run.errors and isinstance(run.errors[0], ConnectionLost)
    assert "restart the connector" in str(run.errors[0])
    proxy.resume()
    try:
        with h.running(cfg, store) as run:
            h.wait_streaming(run)
            h.sql("INSERT INTO ur VALUES (3, 'c')")
            events = h.read(cfg, "ur", min_count=3, settle=0.5)
    finally:
        proxy.cut()
    assert ids(events) == [1, 2, 3]


def test_sigkill_resumes_from_the_last_committed_offset(h: MySqlHarness, tmp_path: Path) -> None:
    """AC-39: a SIGKILLed connector restarts from its last stored offset: duplicates (same
    file/pos/row) are possible, loss is not."""
    table(h, "sk")
    cfg = h.new_server_id(
        h.config(table_include_list=rf"{h.dbname}\.sk", snapshot_mode="schema_only")
    )
    spec = tmp_path / "spec.json"
    offsets = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"config": cfg, "kafka": h.kafka, "offsets": str(offsets)}))
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    log = tmp_path / "child.log"

    def child() -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "tests.integration.mysql_harness", str(spec)],
                cwd=REPO,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=out,
            )

    proc = child()
    try:
        h.wait_for(lambda: offsets.exists() or proc.poll() is not None, timeout=60)
        assert proc.poll() is None, log.read_text()
        for i in range(1, 301):
            h.sql("INSERT INTO sk VALUES (%s, 'x')", params=(i,))
        h.wait_for(lambda: len(h.read(cfg, "sk", timeout=1, settle=0.1)) >= 100, timeout=60)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        stored = FileOffsetStore(offsets)
        stored.start()
        assert stored.get(cfg["name"], {"server": cfg["database.server.name"]}) is not None
        for i in range(301, 401):
            h.sql("INSERT INTO sk VALUES (%s, 'y')", params=(i,))
        proc = child()
        events = h.read(cfg, "sk", min_count=400, settle=1.0, timeout=90)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    got = ids(events)
    assert set(got) == set(range(1, 401))  # no loss
    seen: dict[int, Any] = {}
    for e in events:
        s = e.value["source"]
        where = (s["file"], s["pos"], s["row"])
        assert seen.setdefault(e.key["id"], where) == where  # a duplicate is the same event
