"""Issue 12.1 (MySQL/MariaDB): an interrupted initial snapshot must not lose deletes.

A restart snapshots again, but streams from the position of the *first* attempt, so the
deletes of rows an earlier attempt already emitted reach the topic. Each test reconciles the
table against the last event per key in the topic: nothing alive in the topic that is gone
from the table, nothing missing, nothing stale.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.offsets.memory import MemoryOffsetStore
from cdc.snapshot.driver import plain_key_reader
from cdc.spi import TableId
from connectors.mysql import connection as myconn
from connectors.mysql.chunks import _range
from connectors.mysql.config import parse_config
from connectors.mysql.schema import MySqlSchema
from connectors.mysql.snapshot import _after_key
from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import Event, MySqlHarness, module_harness

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    yield from module_harness(mariadb, kafka, tmp_path_factory, "tr")


def numbers(h: MySqlHarness, name: str, rows: int) -> None:
    h.sql(
        f"CREATE TABLE {name} (id int PRIMARY KEY, v varchar(20), n int)",
        f"INSERT INTO {name} SELECT seq, CONCAT('v', seq), 0 FROM seq_1_to_{rows}",
    )


def slow(cfg: dict[str, Any], h: MySqlHarness, table: str, sleep: float) -> None:
    name = f"{h.dbname}.{table}"
    cfg["snapshot.select.statement.overrides"] = name
    cfg[f"snapshot.select.statement.overrides.{name}"] = (
        f"SELECT * FROM {table} WHERE SLEEP({sleep}) = 0"
    )


def fast(cfg: dict[str, Any], h: MySqlHarness, table: str) -> None:
    cfg.pop(f"snapshot.select.statement.overrides.{h.dbname}.{table}", None)
    cfg["snapshot.select.statement.overrides"] = ""


def reconcile(h: MySqlHarness, table: str, events: list[Event], columns: str = "id, v, n") -> None:
    """The last event per key equals the table: no ghost, nothing missing, nothing stale."""
    last: dict[int, Any] = {}
    for e in events:
        last[e.key["id"]] = e.after  # a delete's after and a tombstone are None
    topic = {k: v for k, v in last.items() if v is not None}
    names = [c.strip() for c in columns.split(",")]
    table_rows = {
        r[0]: dict(zip(names, r, strict=True)) for r in h.sql(f"SELECT {columns} FROM {table}")
    }
    ghosts = sorted(set(topic) - set(table_rows))
    missing = sorted(set(table_rows) - set(topic))
    stale = sorted(k for k in table_rows if k in topic and topic[k] != table_rows[k])
    assert (ghosts, missing, stale) == ([], [], []), (ghosts[:10], missing[:10], stale[:10])


def snapshot_rows(h: MySqlHarness, cfg: dict[str, Any], table: str) -> int:
    return sum(1 for e in h.read(cfg, table, timeout=2, settle=0.2) if e.op == "r")


class Child:
    """The connector in a child process with a file offset store, for SIGKILL."""

    def __init__(self, h: MySqlHarness, cfg: dict[str, Any], tmp: Path) -> None:
        self.spec = tmp / "spec.json"
        self.offsets = tmp / "offsets.json"
        self.log = tmp / "child.log"
        self.h, self.cfg = h, cfg
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.h.new_server_id(self.cfg)
        self.spec.write_text(
            json.dumps({"config": self.cfg, "kafka": self.h.kafka, "offsets": str(self.offsets)})
        )
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.integration.mysql_harness", str(self.spec)],
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                stdout=subprocess.DEVNULL,
                stderr=out,
            )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stored(self) -> dict[str, Any] | None:
        """The stored offset, read without opening a store (which would clean up the
        running child's temporary files)."""
        if not self.offsets.exists():
            return None
        for entry in json.loads(self.offsets.read_text())["offsets"]:
            if entry["connector"] == self.cfg["name"]:
                return dict(entry["offset"])
        return None

    def alive(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(self.log.read_text()[-3000:])
        return True


def test_sigkilled_snapshots_then_deletes_leave_no_ghost_rows(
    h: MySqlHarness, tmp_path: Path
) -> None:
    numbers(h, "ghosts", 2000)
    cfg = h.config(table_include_list=rf"{h.dbname}\.ghosts", snapshot_fetch_size="50")
    slow(cfg, h, "ghosts", 0.002)
    child = Child(h, cfg, tmp_path)
    deleted = 0
    try:
        for attempt in range(2):
            goal = snapshot_rows(h, cfg, "ghosts") + 150
            child.start()
            h.wait_for(lambda g=goal: child.alive() and snapshot_rows(h, cfg, "ghosts") > g)
            child.kill()
            stored = child.stored()
            assert stored is not None and stored.get("snapshot") is True, stored
            # rows the killed attempt emitted go away, others change, new ones appear
            h.sql(
                f"DELETE FROM ghosts WHERE id BETWEEN {attempt * 50 + 1} AND {attempt * 50 + 40}",
                "UPDATE ghosts SET n = n + 1 WHERE id BETWEEN 100 AND 130",
                f"INSERT INTO ghosts VALUES ({5000 + attempt}, 'new', 0)",
            )
            deleted += 40
        fast(cfg, h, "ghosts")
        child.start()
        h.wait_for(lambda: child.alive() and "snapshot" not in (child.stored() or {"snapshot": 1}))
        h.sql("DELETE FROM ghosts WHERE id = 1000", "UPDATE ghosts SET v = 'after' WHERE id = 7")
        total = 2000 - deleted + 2
        events = h.read(cfg, "ghosts", min_count=total, settle=1.5, timeout=60)
    finally:
        child.kill()
    reconcile(h, "ghosts", events)
    assert any(e.op == "d" and e.key["id"] == 1 for e in events)  # replayed from attempt 1


def test_kill_right_after_a_finished_snapshot_does_not_snapshot_again(
    h: MySqlHarness, tmp_path: Path
) -> None:
    numbers(h, "done", 300)
    cfg = h.config(table_include_list=rf"{h.dbname}\.done")
    child = Child(h, cfg, tmp_path)
    try:
        child.start()
        h.wait_for(lambda: child.alive() and "snapshot" not in (child.stored() or {"snapshot": 1}))
        child.kill()  # the snapshot-complete offset is stored before streaming starts
        h.sql("DELETE FROM done WHERE id = 3")
        child.start()
        events = h.read(cfg, "done", min_count=302, settle=2.0, timeout=60)
        child.alive()
    finally:
        child.kill()
    assert sum(1 for e in events if e.op == "r") == 300
    reconcile(h, "done", events)


def test_ddl_between_attempts_is_decoded_by_position(h: MySqlHarness) -> None:
    """Streaming replays the binlog from the first attempt's position with the schema of that
    position: rows before an ALTER decode with the old columns, rows after with the new."""
    numbers(h, "evolve", 1500)
    cfg = h.config(table_include_list=rf"{h.dbname}\.evolve", snapshot_fetch_size="50")
    slow(cfg, h, "evolve", 0.002)
    store = MemoryOffsetStore()
    run = h.start(cfg, store)
    h.wait_for(lambda: snapshot_rows(h, cfg, "evolve") > 150, run=run)
    run.stop()
    h.sql(
        "DELETE FROM evolve WHERE id BETWEEN 1 AND 20",
        "UPDATE evolve SET n = 5 WHERE id = 21",
        "ALTER TABLE evolve ADD COLUMN extra varchar(10) DEFAULT 'd' AFTER v",
        "DELETE FROM evolve WHERE id BETWEEN 21 AND 30",
        "UPDATE evolve SET extra = 'x', n = 6 WHERE id = 31",
    )
    fast(cfg, h, "evolve")
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        events = h.read(cfg, "evolve", min_count=1470, settle=1.5)
        assert not run.errors
    reconcile(h, "evolve", events, "id, v, extra, n")
    before_alter = [e for e in events if e.op == "u" and e.key["id"] == 21]
    assert before_alter and "extra" not in before_alter[-1].after  # decoded with old columns


def test_unavailable_earlier_position_warns_and_streams_from_the_snapshot(
    h: MySqlHarness, caplog: pytest.LogCaptureFixture
) -> None:
    """snapshot.mode=when_needed replacing a stored offset the server no longer has (as after
    a purge, which a shared server cannot do in a test): the new snapshot's position is used,
    with a warning about possibly missing deletes."""
    numbers(h, "purged", 10)
    cfg = h.config(table_include_list=rf"{h.dbname}\.purged", snapshot_mode="when_needed")
    store = MemoryOffsetStore()
    gone = {"file": "mariadb-bin.000000", "pos": 4, "event": 0, "row": 0}
    store.put(cfg["name"], {"server": cfg["database.server.name"]}, gone)
    warnings = caplog.at_level(logging.WARNING, logger="tidemark.mysql.snapshot")
    with warnings, h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.sql("DELETE FROM purged WHERE id = 2")
        events = h.read(cfg, "purged", min_count=11, settle=0.5)
    reconcile(h, "purged", events)
    assert any("deletes of rows emitted before may be" in r.getMessage() for r in caplog.records)


def test_a_datetime_key_read_as_text_resumes_exactly_after_it(h: MySqlHarness) -> None:
    """A snapshot session reads DATETIME as the server's text, so a table keyed by DATETIME
    (alone, or after a DATE) is read in key order and resumes after its last stored key.
    The resume query compares the key columns with that text: it must return exactly the
    rows after the key, in order, fractions and zero dates included."""
    h.sql(
        "CREATE TABLE stamps (id datetime(3) PRIMARY KEY, v int)",
        "INSERT INTO stamps SELECT TIMESTAMP'2024-01-01 00:00:00' "
        "+ INTERVAL (seq * 1500) * 1000 MICROSECOND, seq FROM seq_1_to_400",
        "INSERT INTO stamps VALUES ('0000-00-00 00:00:00', 0), ('1999-12-31 23:59:59.999', -1)",
        "CREATE TABLE pairs (d date, t datetime(6), v int, PRIMARY KEY (d, t))",
        "INSERT INTO pairs SELECT DATE'2024-01-01' + INTERVAL (seq % 7) DAY, "
        "TIMESTAMP'2024-01-01 00:00:00' + INTERVAL (seq * 123457) MICROSECOND, seq "
        "FROM seq_1_to_300",
    )
    _check_key_ranges(h, [("stamps", ("id",)), ("pairs", ("d", "t"))], seed=5)


def test_a_decimal_key_read_as_text_resumes_and_chunks_exactly(h: MySqlHarness) -> None:
    """A snapshot session reads DECIMAL as the server's text, so a DECIMAL-keyed table is
    resumable. Keys here differ only past the 15th significant digit (equal as doubles, as
    MySQL's documented rule would compare a DECIMAL column with a string): the resume query
    (``_after_key``) and the incremental snapshot's chunk range (``chunks._range``), which cast
    the text back to the column's DECIMAL, must return exactly the rows after (and up to) a
    key, alone or after another key column."""
    h.sql(
        "CREATE TABLE amounts (id decimal(30,20) PRIMARY KEY, v int)",
        # 1.00000000000000000001, ...02, ...: all the same double
        "INSERT INTO amounts SELECT 1 + seq * 0.00000000000000000001, seq FROM seq_1_to_300",
        "INSERT INTO amounts VALUES (-99999999.99999999999999999999, -1), (0, 0)",
        "CREATE TABLE ledger (acct decimal(20,0), amt decimal(30,12), v int, "
        "PRIMARY KEY (acct, amt))",
        "INSERT INTO ledger SELECT 12345678901234567890 - (seq % 3), "
        "1000 + seq * 0.000000000001, seq FROM seq_1_to_240",
    )
    _check_key_ranges(h, [("amounts", ("id",)), ("ledger", ("acct", "amt"))], seed=7)


def _check_key_ranges(
    h: MySqlHarness, tables: list[tuple[str, tuple[str, ...]]], seed: int
) -> None:
    """For each table, its keys as a snapshot session reads them (text, resumable), and for
    27 of them: the resume query (``_after_key``) returns exactly the rows after the key, and
    the incremental snapshot's chunk range (``chunks._range``) exactly those up to a later one."""
    cfg = parse_config(h.config())
    conn = myconn.connect(cfg, snapshot=True)
    try:
        myconn.execute(conn, f"USE {h.dbname}")
        rng = random.Random(seed)
        for table, keys in tables:
            columns = ", ".join(keys)
            rows = myconn.query(conn, f"SELECT {columns}, v FROM {table} ORDER BY {columns}")
            assert all(type(value) is str for row in rows for value in row[:-1]), rows[:3]
            assert plain_key_reader(range(len(keys)))(rows[0]) is not None  # resumable
            schema = MySqlSchema()
            [(_, ddl)] = myconn.query(conn, f"SHOW CREATE TABLE {table}")
            schema.apply_ddl(ddl, h.dbname)
            spec = schema.table(TableId(h.dbname, None, table))
            assert spec is not None

            def read(
                where: str, args: list[Any], columns: str = columns, table: str = table
            ) -> list[tuple[Any, ...]]:
                sql = f"SELECT {columns}, v FROM {table} WHERE {where} ORDER BY {columns}"
                return [tuple(r) for r in myconn.query(conn, sql, args)]

            for at in [0, len(rows) - 1, *rng.sample(range(len(rows)), 25)]:
                key = rows[at][: len(keys)]
                assert read(*_after_key(spec, key)) == [tuple(r) for r in rows[at + 1 :]], at
                upto = min(at + 1 + rng.randrange(40), len(rows) - 1)
                chunk = read(*_range(spec, keys, key, rows[upto][: len(keys)], None))
                assert chunk == [tuple(r) for r in rows[at + 1 : upto + 1]], (at, upto)
    finally:
        conn.close()
