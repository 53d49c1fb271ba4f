"""Several databases in one SQL Server connector (``database.names``), against the stand-in:
a second stand-in database of its own next to ``sqlserver_standin``. Snapshot and streaming
from both into ``<server>.<database>.dbo.<table>`` topics with ``source.db`` saying which; a
graceful restart resumes each database from its own position (nothing lost, nothing
repeated), a kill repeats at most what followed the stored offset; a database added to the
list later is snapshotted while the other streams on; a missing database is named."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.errors import ConfigError
from cdc.offsets.memory import MemoryOffsetStore
from cdc.testing.kafka_reader import Event, read_topic
from tests.integration.conftest import SqlServerInfo
from tests.integration.sqlserver_harness import (
    ChildConnector,
    SqlServerHarness,
    standin_database,
)

pytestmark = [pytest.mark.sqlserver, pytest.mark.kafka]


@pytest.fixture(scope="module")
def second_db(sqlserver: SqlServerInfo) -> Iterator[str]:
    """A second stand-in database with CDC enabled, created (and dropped) by this module."""
    with standin_database(sqlserver, "ss_multi_", enable_db=True) as name:
        yield name


@pytest.fixture
def two(
    sqlserver: SqlServerInfo, kafka: str, second_db: str
) -> Iterator[tuple[SqlServerHarness, SqlServerHarness]]:
    """A harness per database; each creates table ``t`` (id int primary key, v int)."""
    one, other = SqlServerHarness(sqlserver, kafka), SqlServerHarness(sqlserver, kafka, second_db)
    try:
        for h in (one, other):
            h.create_table("t", "id int PRIMARY KEY, v int NOT NULL")
        yield one, other
    finally:
        one.drop()
        other.drop()


def config(one: SqlServerHarness, other: SqlServerHarness, **overrides: Any) -> dict[str, Any]:
    """Both databases; the include list names each table with its database."""
    cfg = one.config("t", **overrides)
    cfg["database.names"] = f"{one.dbname},{other.dbname}"
    cfg["table.include.list"] = ",".join(rf"{h.dbname}\.dbo\.{h.name('t')}" for h in (one, other))
    return cfg


def topic(cfg: dict[str, Any], h: SqlServerHarness) -> str:
    return f"{cfg['database.server.name']}.{h.dbname}.dbo.{h.name('t')}"


def insert(h: SqlServerHarness, *ids: int) -> None:
    for i in ids:
        h.sql(f'INSERT INTO dbo."{h.name("t")}" VALUES ({i}, {i * 10})')


def ids(events: list[Event]) -> list[tuple[str | None, int]]:
    return [(e.op, e.after["id"]) for e in events if e.value is not None]


def read(kafka: str, cfg: dict[str, Any], h: SqlServerHarness, n: int) -> list[Event]:
    return read_topic(kafka, topic(cfg, h), min_count=n, settle=1.0)


def test_snapshot_streaming_and_graceful_restart_per_database(
    two: tuple[SqlServerHarness, SqlServerHarness], kafka: str
) -> None:
    one, other = two
    insert(one, 1, 2)
    insert(other, 101)
    cfg = config(one, other)
    store = MemoryOffsetStore()
    with one.running(cfg, store):
        insert(one, 3)
        insert(other, 102)
        a, b = read(kafka, cfg, one, 3), read(kafka, cfg, other, 2)
    assert ids(a) == [("r", 1), ("r", 2), ("c", 3)]
    assert ids(b) == [("r", 101), ("c", 102)]
    assert {e.value["source"]["db"] for e in a} == {one.dbname}
    assert {e.value["source"]["db"] for e in b} == {other.dbname}
    stored = store.get(cfg["name"], {"server": cfg["database.server.name"]})
    assert stored is not None and set(stored["positions"]) == {one.dbname, other.dbname}
    # changes while stopped, then more while running: each database resumes from its own
    # position, nothing lost, nothing repeated after a graceful stop
    insert(one, 4)
    insert(other, 103, 104)
    with one.running(cfg, store):
        insert(one, 5)
        a, b = read(kafka, cfg, one, 5), read(kafka, cfg, other, 4)
    assert ids(a) == [("r", 1), ("r", 2), ("c", 3), ("c", 4), ("c", 5)]
    assert ids(b) == [("r", 101), ("c", 102), ("c", 103), ("c", 104)]


def test_kill_repeats_at_most_what_followed_the_stored_offset(
    two: tuple[SqlServerHarness, SqlServerHarness], kafka: str, tmp_path: Path
) -> None:
    one, other = two
    cfg = config(one, other)
    child = ChildConnector(one, cfg, tmp_path)
    child.start()
    try:
        child.wait(lambda: child.stored() is not None)
        for n in range(1, 31):
            insert(one, n)
            insert(other, 1000 + n)
        # killed once an offset holding both databases' streaming positions is stored
        before = child.stored_at()
        child.wait(lambda: child.stored_at() > before and "positions" in (child.stored() or {}))
        child.kill()
        insert(one, 31)
        insert(other, 1031)
        child.start()
        a, b = read(kafka, cfg, one, 31), read(kafka, cfg, other, 31)
    finally:
        child.stop()
    got_a, got_b = [i for _, i in ids(a)], [i for _, i in ids(b)]
    assert set(got_a) == set(range(1, 32)) and set(got_b) == set(range(1001, 1032))
    # a repeat is a suffix replayed from the stored position: once a key came twice, every
    # later key comes again too; the order within each database is the commit order
    for got in (got_a, got_b):
        first = sorted(set(got), key=got.index)
        assert first == sorted(first)


def test_a_database_added_later_is_snapshotted_while_the_other_streams_on(
    two: tuple[SqlServerHarness, SqlServerHarness], kafka: str
) -> None:
    one, other = two
    insert(one, 1)
    insert(other, 101, 102)
    single = one.config("t")
    store = MemoryOffsetStore()
    with one.running(single, store):
        first = read_topic(kafka, one.topic(single, "t"), min_count=1, settle=0.5)
    # one database: Debezium 1.x topic names and the flat offset, as before
    assert ids(first) == [("r", 1)]
    flat = store.get(single["name"], {"server": single["database.server.name"]})
    assert flat is not None and "commit_lsn" in flat and "positions" not in flat
    insert(one, 2)  # while stopped: streamed from the flat offset, not snapshotted again
    cfg = config(one, other)
    cfg["name"], cfg["database.server.name"] = single["name"], single["database.server.name"]
    with one.running(cfg, store):
        insert(one, 3)
        insert(other, 103)
        a, b = read(kafka, cfg, one, 2), read(kafka, cfg, other, 3)
    assert ids(a) == [("c", 2), ("c", 3)]
    # 103 is written as the task starts: before the added database's snapshot takes its LSN
    # it is one of the snapshot's rows, after it a streamed insert; once either way
    assert ids(b) in ([("r", 101), ("r", 102), ("c", 103)], [("r", 101), ("r", 102), ("r", 103)])
    # removed again: its position is forgotten, the other goes back to a flat offset
    cfg["database.names"] = one.dbname
    with one.running(cfg, store):
        insert(one, 4)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            stored = store.get(cfg["name"], {"server": cfg["database.server.name"]}) or {}
            if "commit_lsn" in stored:
                break
            time.sleep(0.1)
    assert "positions" not in stored and stored["commit_lsn"]


def test_a_missing_database_is_named(two: tuple[SqlServerHarness, SqlServerHarness]) -> None:
    one, other = two
    missing = "ss_missing_" + uuid.uuid4().hex[:8]
    cfg = config(one, other)
    cfg["database.names"] = f"{one.dbname},{missing}"
    with pytest.raises(ConfigError) as err, one.running(cfg):
        pass
    assert f"database.names: database {missing!r} cannot be opened" in str(err.value)
