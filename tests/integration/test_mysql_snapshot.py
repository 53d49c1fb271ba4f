"""Snapshot modes, locking and the snapshot → binlog handover, against MariaDB and Kafka."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from cdc.errors import FatalError
from cdc.offsets.memory import MemoryOffsetStore
from connectors.mysql.errors import BinlogPositionLost, HistoryMissing
from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import MySqlHarness, read_topic

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    harness = MySqlHarness(
        mariadb, kafka, f"ts_{uuid.uuid4().hex[:8]}", tmp_path_factory.mktemp("mysnap")
    )
    yield harness
    harness.drop()


def numbers(h: MySqlHarness, name: str, rows: int) -> None:
    h.sql(
        f"CREATE TABLE {name} (id int PRIMARY KEY, v varchar(20), n int)",
        f"INSERT INTO {name} SELECT seq, CONCAT('v', seq), 0 FROM seq_1_to_{rows}",
    )


def partition(cfg: dict[str, Any]) -> dict[str, Any]:
    return {"server": cfg["database.server.name"]}


def slow_select(h: MySqlHarness, cfg: dict[str, Any], table: str, sleep: float) -> None:
    """Make the row scan take a while (the per-row SLEEP) without touching the schema phase."""
    name = f"{h.dbname}.{table}"
    cfg["snapshot.select.statement.overrides"] = name
    cfg[f"snapshot.select.statement.overrides.{name}"] = (
        f"SELECT * FROM {table} WHERE SLEEP({sleep}) = 0"
    )


def test_interrupted_snapshot_starts_over(h: MySqlHarness) -> None:
    """AC-28."""
    numbers(h, "big", 3000)
    cfg = h.config(table_include_list=rf"{h.dbname}\.big", snapshot_fetch_size="100")
    slow_select(h, cfg, "big", 0.001)
    store = MemoryOffsetStore()
    run = h.start(cfg, store)
    h.wait_for(lambda: run.engine.metrics.snapshot.total_events_seen > 200, run=run)
    time.sleep(0.5)
    run.stop()
    stored = store.get(cfg["name"], partition(cfg))
    assert stored is not None and stored.get("snapshot") is True
    first = len(h.read(cfg, "big", settle=0.3))
    assert 0 < first < 3000
    del cfg[f"snapshot.select.statement.overrides.{h.dbname}.big"]
    cfg["snapshot.select.statement.overrides"] = ""
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        events = h.read(cfg, "big", min_count=first + 3000, settle=0.5)
    again = events[first:]
    assert sorted(e.key["id"] for e in again) == list(range(1, 3001))
    assert all(e.op == "r" for e in again)
    assert "snapshot" not in (store.get(cfg["name"], partition(cfg)) or {})


def _try_write(h: MySqlHarness, table: str) -> bool:
    conn = h.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION lock_wait_timeout = 1")
            cur.execute(f"UPDATE {table} SET n = n + 1 WHERE id = 1")
        return True
    except pymysql.err.OperationalError as exc:
        assert exc.args[0] == 1205, exc
        return False
    finally:
        conn.close()


@pytest.mark.parametrize("mode", ["minimal", "extended"])
def test_global_read_lock_duration(h: MySqlHarness, mode: str) -> None:
    """AC-29: writes are blocked only while the schema is read (minimal), or for the whole
    snapshot (extended); HoldingGlobalLock follows."""
    table = f"lk_{mode}"
    numbers(h, table, 1500)
    cfg = h.config(
        table_include_list=rf"{h.dbname}\.{table}",
        snapshot_locking_mode=mode,
        snapshot_fetch_size="50",
    )
    slow_select(h, cfg, table, 0.004)
    held: list[bool] = []
    with h.running(cfg) as run:
        h.wait_for(lambda: run.engine.metrics.snapshot.total_events_seen > 50, run=run)
        held.append(run.connector.metrics.holding_global_lock)
        wrote = _try_write(h, table)
        h.wait_streaming(run)
        held.append(run.connector.metrics.holding_global_lock)
    if mode == "minimal":
        assert held == [False, False] and wrote
    else:
        assert held == [True, False] and not wrote
    assert _try_write(h, table)


def test_table_locks_without_global_lock_privilege(h: MySqlHarness) -> None:
    """AC-30: without RELOAD the snapshot falls back to LOCK TABLES and releases them."""
    user = f"norel_{uuid.uuid4().hex[:6]}"
    h.sql(
        f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'",
        f"GRANT SELECT, LOCK TABLES, SHOW DATABASES, REPLICATION SLAVE, BINLOG MONITOR "
        f"ON *.* TO '{user}'@'%'",
        db="",
    )
    try:
        numbers(h, "tl", 200)
        numbers(h, "tl_other", 1)
        cfg = h.config(
            table_include_list=rf"{h.dbname}\.tl", database_user=user, database_password="pw"
        )
        held: list[bool] = []
        with h.running(cfg) as run:
            sampler = threading.Thread(
                target=lambda: [
                    held.append(run.connector.metrics.holding_global_lock) or time.sleep(0.001)
                    for _ in range(3000)
                ],
                daemon=True,
            )
            sampler.start()
            h.wait_streaming(run)
            events = h.read(cfg, "tl", min_count=200, settle=0.3)
            h.sql("INSERT INTO tl VALUES (1000, 'x', 0)")  # the locks are gone
            after = h.read(cfg, "tl", min_count=201, settle=0.3)
        assert len(events) == 200 and after[-1].key == {"id": 1000}
        assert True in held and not run.connector.metrics.holding_global_lock
    finally:
        h.sql(f"DROP USER '{user}'@'%'", db="")


def test_lock_timeout_fails_the_snapshot(h: MySqlHarness) -> None:
    """AC-31."""
    numbers(h, "locked", 1)
    holder = h.connect()
    try:
        with holder.cursor() as cur:
            cur.execute("LOCK TABLES locked WRITE")
        cfg = h.config(table_include_list=rf"{h.dbname}\.locked", snapshot_lock_timeout_ms="1000")
        run = h.start(cfg)
        run.thread.join(30)
        assert run.errors and isinstance(run.errors[0], FatalError)
        assert "snapshot.lock.timeout.ms=1000" in str(run.errors[0])
    finally:
        holder.close()


def test_schema_only_and_recovery_of_a_lost_history(h: MySqlHarness) -> None:
    """AC-32 (schema_only: history + schema change topic, no rows, stream from now) and AC-33
    (history deleted: the plain restart refuses; schema_only_recovery rebuilds it)."""
    numbers(h, "so", 5)
    cfg = h.config(table_include_list=rf"{h.dbname}\.so", snapshot_mode="schema_only")
    store = MemoryOffsetStore()
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO so VALUES (6, 'v6', 0)")
        events = h.read(cfg, "so", min_count=1, settle=0.5)
    assert [(e.op, e.key["id"]) for e in events] == [("c", 6)]
    ddl = read_topic(h.kafka, cfg["database.server.name"], min_count=2, settle=0.3)
    assert any(e.value["ddl"].startswith("CREATE TABLE `so`") for e in ddl)
    history = Path(cfg["database.history.file.filename"])
    assert history.exists()
    history.unlink()
    h.sql("INSERT INTO so VALUES (7, 'v7', 0)")
    run = h.start(cfg, store)
    run.thread.join(30)
    assert run.errors and isinstance(run.errors[0], HistoryMissing)
    assert "schema_only_recovery" in str(run.errors[0])
    cfg["snapshot.mode"] = "schema_only_recovery"
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        events = h.read(cfg, "so", min_count=2, settle=0.5)
    assert [(e.op, e.key["id"]) for e in events] == [("c", 6), ("c", 7)]
    assert history.exists()


def test_select_override_and_initial_only(h: MySqlHarness) -> None:
    """AC-35 and initial_only (snapshot, then stop)."""
    numbers(h, "ov", 5)
    cfg = h.config(table_include_list=rf"{h.dbname}\.ov", snapshot_mode="initial_only")
    cfg["snapshot.select.statement.overrides"] = f"{h.dbname}.ov"
    cfg[f"snapshot.select.statement.overrides.{h.dbname}.ov"] = "SELECT * FROM ov WHERE id > 3"
    run = h.start(cfg)
    run.thread.join(30)
    assert not run.thread.is_alive() and not run.errors
    assert sorted(e.key["id"] for e in h.read(cfg, "ov", min_count=2, settle=0.3)) == [4, 5]


def test_purged_position(h: MySqlHarness) -> None:
    """AC-42: an offset in a binlog the server no longer has: initial and never fail and say
    what to do, when_needed takes a new snapshot."""
    numbers(h, "pg", 2)
    cfg = h.config(table_include_list=rf"{h.dbname}\.pg")
    gone = {
        "file": "mariadb-bin.000000",
        "pos": 4,
        "event": 0,
        "row": 0,
        "ts_sec": 0,
        "server_id": 1,
    }
    for mode in ("initial", "never"):
        store = MemoryOffsetStore()
        store.put(cfg["name"], partition(cfg), gone)
        cfg["snapshot.mode"] = mode
        run = h.start(cfg, store)
        run.thread.join(30)
        assert run.errors and isinstance(run.errors[0], BinlogPositionLost)
        assert "mariadb-bin.000000 is gone" in str(run.errors[0])
        assert "snapshot.mode=when_needed" in str(run.errors[0])
    store = MemoryOffsetStore()
    store.put(cfg["name"], partition(cfg), gone)
    cfg["snapshot.mode"] = "when_needed"
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        events = h.read(cfg, "pg", min_count=2, settle=0.3)
    assert [e.op for e in events] == ["r", "r"]


def _handover(h: MySqlHarness, rows: int) -> None:
    """AC-27, AC-70: writers change the table throughout the snapshot; afterwards the topic
    compacted by key equals the table."""
    table = f"ho_{rows}"
    numbers(h, table, rows)
    cfg = h.config(table_include_list=rf"{h.dbname}\.{table}", snapshot_fetch_size="2048")
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        conn = h.connect()
        i = 0
        try:
            with conn.cursor() as cur:
                while not stop.is_set():
                    i += 1
                    key = (seed * 7919 + i * 104729) % rows + 1
                    cur.execute(
                        f"UPDATE {table} SET n = n + 1, v = 'w{seed}' WHERE id = %s", (key,)
                    )
                    cur.execute(
                        f"INSERT INTO {table} VALUES (%s, 'new', 0)", (rows + seed * 1_000_000 + i,)
                    )
                    if i % 5 == 0:
                        cur.execute(f"DELETE FROM {table} WHERE id = %s", (key + 1,))
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)
        finally:
            conn.close()

    writers = [threading.Thread(target=writer, args=(s,), daemon=True) for s in (1, 2)]
    for w in writers:
        w.start()
    time.sleep(0.3)
    with h.running(cfg) as run:
        h.wait_streaming(run, timeout=120)
        time.sleep(0.5)
        stop.set()
        for w in writers:
            w.join(30)
        assert not errors
        expected = {r[0]: r for r in h.sql(f"SELECT id, v, n FROM {table}")}
        snap = run.engine.metrics.snapshot
        assert snap.completed and snap.remaining_table_count == 0 and snap.total_table_count == 1
        assert snap.rows_scanned[f"{h.dbname}.{table}"] >= rows * 0.9
        events = h.read(cfg, table, min_count=len(expected), settle=2.0, timeout=120)
    state: dict[int, tuple[Any, ...] | None] = {}
    for e in events:
        if e.value is None:
            state[e.key["id"]] = None
        elif e.after is not None:
            state[e.key["id"]] = (e.after["id"], e.after["v"], e.after["n"])
    compacted = {k: v for k, v in state.items() if v is not None}
    assert compacted == expected


def test_handover_with_concurrent_writers(h: MySqlHarness) -> None:
    """The issue's acceptance: concurrent writers during a 200k-row snapshot."""
    _handover(h, 200_000)


def test_newly_captured_tables_are_snapshotted(h: MySqlHarness) -> None:
    """snapshot.new.tables=parallel: a table added to the filters is snapshotted at a new
    position, its earlier changes are not streamed again, the old tables continue from the
    stored offset."""
    numbers(h, "na", 2)
    numbers(h, "nb", 2)
    cfg = h.config(table_include_list=rf"{h.dbname}\.na", snapshot_new_tables="parallel")
    store = MemoryOffsetStore()
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO na VALUES (3, 'v3', 0)", "INSERT INTO nb VALUES (3, 'v3', 0)")
        h.read(cfg, "na", min_count=3, settle=0.3)
    stored = store.get(cfg["name"], partition(cfg)) or {}
    assert stored["table_whitelist"] == rf"{h.dbname}\.na"
    h.sql("INSERT INTO na VALUES (4, 'v4', 0)", "UPDATE nb SET v = 'changed' WHERE id = 1")
    cfg["table.include.list"] = rf"{h.dbname}\.na,{h.dbname}\.nb"
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO nb VALUES (5, 'v5', 0)")
        na = h.read(cfg, "na", min_count=4, settle=0.3)
        nb = h.read(cfg, "nb", min_count=4, settle=0.5)
    assert [(e.op, e.key["id"]) for e in na] == [("r", 1), ("r", 2), ("c", 3), ("c", 4)]
    assert sorted((e.op, e.key["id"]) for e in nb[:3]) == [("r", 1), ("r", 2), ("r", 3)]
    assert next(e for e in nb if e.key["id"] == 1).after["v"] == "changed"
    assert [(e.op, e.key["id"]) for e in nb[3:]] == [("c", 5)]
    stored = store.get(cfg["name"], partition(cfg)) or {}
    assert stored["table_whitelist"] == rf"{h.dbname}\.na,{h.dbname}\.nb"
