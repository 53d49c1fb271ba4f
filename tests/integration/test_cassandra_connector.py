"""The Cassandra connector on the real node through Kafka: commit log events (AC-60),
snapshot, restarts (AC-61), the per-table snapshot record (AC-62)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.offsets.memory import MemoryOffsetStore
from tests.integration.cassandra_harness import CassandraHarness, module_harness
from tests.integration.conftest import CassandraInfo

pytestmark = [pytest.mark.cassandra, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(
    cassandra: CassandraInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CassandraHarness]:
    yield from module_harness(cassandra, kafka, tmp_path_factory, "csconn")


def _cells(after: dict[str, Any]) -> dict[str, Any]:
    return {k: v["value"] for k, v in after.items() if isinstance(v, dict)}


def test_segment_events_c_u_d_with_cell_structs(h: CassandraHarness) -> None:
    h.cql(
        f"CREATE TABLE {h.keyspace}.orders (id int, line int, item text, qty int, "
        "PRIMARY KEY (id, line)) WITH cdc = true"
    )
    cfg = h.config(**{"snapshot.mode": "never"})
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {h.keyspace}.orders (id, line, item, qty) VALUES (1, 1, 'pen', 2)")
        h.cql(f"UPDATE {h.keyspace}.orders SET qty = 3 WHERE id = 1 AND line = 1")
        h.cql(f"DELETE FROM {h.keyspace}.orders WHERE id = 1 AND line = 1")
        events = h.read(cfg, "orders", min_count=4)
        streaming = run.engine.metrics.streaming
        assert streaming.connected and 0 <= streaming.ms_behind_source < 60_000
        assert run.engine.metrics.extra["number-of-processed-mutations"]() >= 3
    assert [(e.op, e.key) for e in events] == [
        ("c", {"id": 1, "line": 1}),
        ("u", {"id": 1, "line": 1}),
        ("d", {"id": 1, "line": 1}),
        (None, {"id": 1, "line": 1}),  # the tombstone
    ]
    c, u, d, _ = events
    assert c.before is None
    assert c.after["id"] == 1 and c.after["line"] == 1
    assert c.after["item"] == {"value": "pen", "deletion_ts": None, "set": True}
    assert c.after["qty"] == {"value": 2, "deletion_ts": None, "set": True}
    assert u.after["qty"] == {"value": 3, "deletion_ts": None, "set": True}
    assert u.after["item"] is None  # not written by the UPDATE
    assert d.after == {"id": 1, "line": 1, "item": None, "qty": None}
    src = c.value["source"]
    assert src["connector"] == "cassandra" and src["cluster"] == "tidemark-dev"
    assert (src["keyspace"], src["table"], src["snapshot"]) == (h.keyspace, "orders", False)
    assert src["file"].startswith("CommitLog-") and src["pos"] > 0
    assert src["ts_micro"] // 1000 == src["ts_ms"]
    assert [e.value["source"]["pos"] for e in (c, u, d)] == sorted(
        e.value["source"]["pos"] for e in (c, u, d)
    )


def test_delivered_segment_is_deleted_from_cdc_raw(h: CassandraHarness) -> None:
    """AC-60: once a segment is COMPLETED and all its events are in Kafka, the default
    CommitLogTransfer deletes it (and its _cdc.idx)."""
    h.cql(f"CREATE TABLE {h.keyspace}.blobs (id int PRIMARY KEY, body text) WITH cdc = true")
    cfg = h.config(**{"snapshot.mode": "never"})
    raw = Path(h.node.cdc_raw)
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {h.keyspace}.blobs (id, body) VALUES (0, 'first')")
        first = h.read(cfg, "blobs", min_count=1)[0]
        segment = raw / first.value["source"]["file"]
        body = "x" * 8000
        n = 1
        # the dev node's segments are 1 MiB: fill this one until Cassandra closes it
        while segment.exists() and n < 400:
            for _ in range(20):
                h.cql(f"INSERT INTO {h.keyspace}.blobs (id, body) VALUES ({n}, '{body}')")
                n += 1
            time.sleep(0.2)
        h.wait_for(lambda: not segment.exists(), run=run)
        assert not segment.with_name(segment.name[:-4] + "_cdc.idx").exists()
        events = h.read(cfg, "blobs", min_count=n)
    assert sorted(e.key["id"] for e in events) == list(range(n))
    assert len({e.value["source"]["file"] for e in events}) >= 2


def test_snapshot_then_stream_and_per_table_record(h: CassandraHarness) -> None:
    """Snapshot rows are r events with cell structs; AC-62: removing a table's line from
    snapshot_offset.properties snapshots that table (only) again on the next start."""
    for t in ("snap_a", "snap_b"):
        h.cql(f"CREATE TABLE {h.keyspace}.{t} (id int PRIMARY KEY, v text) WITH cdc = true")
        for i in range(3):
            h.cql(f"INSERT INTO {h.keyspace}.{t} (id, v) VALUES ({i}, 'v{i}')")
    cfg = h.config(**{"snapshot.mode": "initial", "table.include.list": rf"{h.keyspace}\.snap_.*"})
    store = MemoryOffsetStore()
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {h.keyspace}.snap_a (id, v) VALUES (10, 'streamed')")
        h.wait_for(
            lambda: any(
                e.op == "c" and e.key["id"] == 10 for e in h.read(cfg, "snap_a", settle=0.3)
            )
        )
        a = h.read(cfg, "snap_a")
        # the seed's kebab-case snapshot metrics
        gauges = {k: fn() for k, fn in run.engine.metrics.extra.items()}
        assert gauges["total-table-count"] == 2 and gauges["remaining-table-count"] == 0
        assert gauges["rows-scanned"] == 6 and gauges["snapshot-completed"] == 1
        assert gauges["snapshot-running"] == 0 and gauges["snapshot-aborted"] == 0
        assert run.engine.metrics.extra_contexts["rows-scanned"] == "snapshot"
    reads = [e for e in a if e.op == "r"]
    assert sorted(e.key["id"] for e in reads) == [0, 1, 2]
    assert reads[0].after["v"]["set"] is True and reads[0].value["source"]["snapshot"] is True
    assert reads[0].after["v"]["value"] == f"v{reads[0].key['id']}"
    # no lock in Cassandra: writes just before the snapshot may also be streamed (as c)
    streamed = [(e.op, e.key["id"]) for e in a if e.op != "r"]
    assert streamed[-1] == ("c", 10) and set(streamed) <= {("c", i) for i in (0, 1, 2, 10)}
    record = Path(cfg["offset.backing.store.dir"]) / "snapshot_offset.properties"
    lines = record.read_text().splitlines()
    assert sorted(line.split("=")[0] for line in lines) == [
        f"{h.keyspace}.snap_a",
        f"{h.keyspace}.snap_b",
    ]
    assert all(line.split("=")[1].startswith("done") for line in lines)
    record.write_text("".join(f"{ln}\n" for ln in lines if "snap_b" not in ln))
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.wait_for(
            lambda: len([e for e in h.read(cfg, "snap_b", settle=0.3) if e.op == "r"]) >= 6,
            timeout=60,
        )
        b = h.read(cfg, "snap_b")
        a_again = h.read(cfg, "snap_a")
    assert sorted(e.key["id"] for e in b if e.op == "r") == [0, 0, 1, 1, 2, 2]
    assert len([e for e in a_again if e.op == "r"]) == 3  # snap_a was not snapshotted again


def test_graceful_restart_resumes_without_gaps_or_repeats(h: CassandraHarness) -> None:
    """AC-61: stop, write while stopped, restart: every change once, in order."""
    h.cql(f"CREATE TABLE {h.keyspace}.restart (id int PRIMARY KEY, v int) WITH cdc = true")
    cfg = h.config(**{"snapshot.mode": "never"})
    store = MemoryOffsetStore()
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        for i in range(5):
            h.cql(f"INSERT INTO {h.keyspace}.restart (id, v) VALUES ({i}, {i})")
        h.read(cfg, "restart", min_count=5)
    for i in range(5, 10):  # while stopped
        h.cql(f"INSERT INTO {h.keyspace}.restart (id, v) VALUES ({i}, {i})")
    # an unlogged batch over two partitions (two mutations, order not defined)
    h.cql(
        f"BEGIN UNLOGGED BATCH INSERT INTO {h.keyspace}.restart (id, v) VALUES (10, 10); "
        f"INSERT INTO {h.keyspace}.restart (id, v) VALUES (11, 11); APPLY BATCH"
    )
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {h.keyspace}.restart (id, v) VALUES (12, 12)")
        events = h.read(cfg, "restart", min_count=13)
    ids = [e.key["id"] for e in events]
    assert ids[:10] == list(range(10)) and ids[-1] == 12
    assert sorted(ids) == list(range(13))  # the batch's two partitions in either order


def test_table_enabled_for_cdc_while_running(h: CassandraHarness) -> None:
    """AC-37: ALTER TABLE ... WITH cdc = true while the connector streams: its later
    changes arrive (the schema is re-read within schema.refresh.interval.ms)."""
    h.cql(f"CREATE TABLE {h.keyspace}.late (id int PRIMARY KEY, v text)")
    cfg = h.config(**{"snapshot.mode": "never"})
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {h.keyspace}.late (id, v) VALUES (1, 'before cdc')")
        h.cql(f"ALTER TABLE {h.keyspace}.late WITH cdc = true")
        time.sleep(1.5)
        h.cql(f"INSERT INTO {h.keyspace}.late (id, v) VALUES (2, 'after cdc')")
        events = h.read(cfg, "late", min_count=1)
    # Cassandra does not mark which mutations were written while cdc was off: one read after
    # the schema refresh saw cdc = true may be emitted too
    ops = [(e.op, e.key["id"]) for e in events]
    assert ops[-1] == ("c", 2) and set(ops) <= {("c", 1), ("c", 2)}


def test_always_snapshots_a_table_enabled_while_running(h: CassandraHarness) -> None:
    h.cql(f"CREATE TABLE {h.keyspace}.later (id int PRIMARY KEY, v text)")
    for i in range(3):
        h.cql(f"INSERT INTO {h.keyspace}.later (id, v) VALUES ({i}, 'old')")
    cfg = h.config(**{"snapshot.mode": "always", "table.include.list": rf"{h.keyspace}\.later"})
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.cql(f"ALTER TABLE {h.keyspace}.later WITH cdc = true")
        h.wait_for(lambda: len([e for e in h.read(cfg, "later", settle=0.2) if e.op == "r"]) >= 3)
        h.cql(f"INSERT INTO {h.keyspace}.later (id, v) VALUES (9, 'new')")
        h.wait_for(lambda: any(e.key["id"] == 9 for e in h.read(cfg, "later", settle=0.2)))
        events = h.read(cfg, "later")
    reads = [e for e in events if e.op == "r"]
    assert sorted(e.key["id"] for e in reads) == [0, 1, 2]
    assert all(e.after["v"]["value"] == "old" and e.value["source"]["snapshot"] for e in reads)
    assert (events[-1].op, events[-1].key["id"]) == ("c", 9)


def test_interrupted_snapshot_rebootstraps_the_table(h: CassandraHarness) -> None:
    """AC-28 (Debezium's behaviour, ``snapshot.resumable=false``): a stop in the middle of a
    table's snapshot; the next start snapshots that table again in full (its line in
    snapshot_offset.properties was never 'done'). The default resumes instead:
    test_cassandra_snapshot_resume.py."""
    from cassandra.concurrent import execute_concurrent_with_args

    h.cql(f"CREATE TABLE {h.keyspace}.big (id int PRIMARY KEY, v text) WITH cdc = true")
    insert = h.session.prepare(f"INSERT INTO {h.keyspace}.big (id, v) VALUES (?, ?)")
    n = 5000
    execute_concurrent_with_args(h.session, insert, [(i, "v" * 50) for i in range(n)])
    cfg = h.config(
        **{
            "snapshot.mode": "initial",
            "snapshot.fetch.size": "20",
            "snapshot.resumable": "false",
            "table.include.list": rf"{h.keyspace}\.big",
        }
    )
    store = MemoryOffsetStore()
    run = h.start(cfg, store)
    h.wait_for(lambda: run.engine.metrics.snapshot.running, run=run)
    run.stop()  # at once: 500 pages of 20 rows take far longer than a stop
    assert not run.errors
    assert not run.engine.metrics.snapshot.completed, "the snapshot was not interrupted"
    first = h.read(cfg, "big")
    assert len(first) < n
    record = Path(cfg["offset.backing.store.dir"]) / "snapshot_offset.properties"
    assert "done" not in (record.read_text() if record.exists() else "")
    with h.running(cfg, store) as run:
        h.wait_streaming(run, timeout=120)
        events = h.read(cfg, "big", min_count=len(first) + n)
    second = events[len(first) :]
    assert sorted(e.key["id"] for e in second if e.op == "r") == list(range(n))
    assert record.read_text().split("=")[1].startswith("done")


def test_mutation_written_before_a_column_drop(h: CassandraHarness) -> None:
    """A segment still holds cells of a column dropped since: they decode with the dropped
    column's type (system_schema.dropped_columns) and are left out of the event."""
    h.cql(f"CREATE TABLE {h.keyspace}.dropcol (id int PRIMARY KEY, a text, b int) WITH cdc = true")
    cfg = h.config(**{"snapshot.mode": "never"})
    store = MemoryOffsetStore()
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {h.keyspace}.dropcol (id, a, b) VALUES (1, 'one', 1)")
        h.read(cfg, "dropcol", min_count=1)
    h.cql(f"INSERT INTO {h.keyspace}.dropcol (id, a, b) VALUES (2, 'two', 2)")
    h.cql(f"ALTER TABLE {h.keyspace}.dropcol DROP b")
    h.cql(f"INSERT INTO {h.keyspace}.dropcol (id, a) VALUES (3, 'three')")
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        events = h.read(cfg, "dropcol", min_count=3)
    assert [e.key["id"] for e in events] == [1, 2, 3]
    assert events[0].after["b"]["value"] == 1
    assert "b" not in events[1].after and events[1].after["a"]["value"] == "two"
    assert "b" not in events[2].after


def test_resume_inside_a_multi_row_mutation(h: CassandraHarness) -> None:
    """One mutation, three rows (a batch on one partition). The offset after its first row is
    {file, pos: <mutation start>, row: 1}: a restart from there delivers rows 2 and 3 only."""
    from connectors.cassandra.commitlog import iter_entries, read_cdc_index

    h.cql(
        f"CREATE TABLE {h.keyspace}.lines (p int, c int, v text, PRIMARY KEY (p, c)) "
        "WITH cdc = true"
    )
    cfg = h.config(
        **{
            "snapshot.mode": "never",
            "table.include.list": rf"{h.keyspace}\.lines",
            "commit.log.transfer.class": "keep",  # the test reads the segment afterwards
        }
    )
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.cql(
            f"BEGIN UNLOGGED BATCH "
            f"INSERT INTO {h.keyspace}.lines (p, c, v) VALUES (1, 1, 'a'); "
            f"INSERT INTO {h.keyspace}.lines (p, c, v) VALUES (1, 2, 'b'); "
            f"INSERT INTO {h.keyspace}.lines (p, c, v) VALUES (1, 3, 'c'); APPLY BATCH"
        )
        events = h.read(cfg, "lines", min_count=3)
    assert [e.key["c"] for e in events] == [1, 2, 3]
    src = events[0].value["source"]
    assert {e.value["source"]["pos"] for e in events} == {src["pos"]}  # one mutation
    segment = Path(h.node.cdc_raw) / src["file"]
    idx = read_cdc_index(segment)
    assert idx is not None
    start = next(
        e.start
        for e in iter_entries(segment.read_bytes(), segment.name, limit=idx.offset)
        if e.end == src["pos"]
    )
    again = h.config(
        **{
            "snapshot.mode": "never",
            "table.include.list": rf"{h.keyspace}\.lines",
            "commit.log.transfer.class": "keep",
        }
    )
    store = MemoryOffsetStore()
    store.put_many(
        [
            (
                again["name"],
                {"server": again["topic.prefix"]},
                {"file": src["file"], "pos": start, "row": 1},
            )
        ]
    )
    with h.running(again, store) as run:
        h.wait_streaming(run)
        resumed = h.read(again, "lines", min_count=2)
    assert [e.key["c"] for e in resumed] == [2, 3]


TYPES_TABLE = (
    "(id int PRIMARY KEY, t text, a ascii, bi bigint, si smallint, ti tinyint, b boolean, "
    "f float, d double, ts timestamp, dt date, tm time, u uuid, tu timeuuid, ip inet, "
    "bl blob, vi varint, de decimal, du duration, l list<int>, s set<text>, m map<int, text>, "
    "fl frozen<list<text>>, tp tuple<int, text>, ld list<decimal>, mv map<text, varint>)"
)
TYPES_VALUES = (
    "'txt', 'asc', 9000000000, 300, -5, true, 1.5, 2.25, '2024-01-02 03:04:05.678+0000', "
    "'2024-01-02', '12:34:56.789', 5b6962dd-3f90-4c93-8f61-eabfa4a803e2, "
    "50554d6e-29bb-11e5-b345-feff819cdc9f, '10.1.2.3', 0xcafe, 123456789012345678901234, "
    "-12.345, 1h2m, [1, 2], {'x', 'y'}, {1: 'one'}, ['p', 'q'], (7, 'seven'), [1e-3, 2.50], "
    "{'k': -7}"
)
#: decimal.handling.mode, varint.handling.mode -> the values of de, vi, ld and mv
NUMBER_MODES = {
    ("string", "string"): ("-12.345", "123456789012345678901234", ["0.001", "2.50"], {"k": "-7"}),
    ("double", "precise"): (-12.345, "GiSbHxCgbJav8g==", [0.001, 2.5], {"k": "+Q=="}),
    ("precise", "string"): (
        {"scale": 3, "value": "z8c="},
        "123456789012345678901234",
        [{"scale": 3, "value": "AQ=="}, {"scale": 2, "value": "APo="}],
        {"k": "-7"},
    ),
}


@pytest.mark.parametrize(("decimal_mode", "varint_mode"), list(NUMBER_MODES))
def test_snapshot_and_commit_log_give_the_same_values(
    h: CassandraHarness, decimal_mode: str, varint_mode: str
) -> None:
    """Every supported type: the snapshot (driver values) and the commit log decoder (bytes)
    must produce the same event values for the same row, in each decimal/varint mode."""
    snap_t, log_t = f"types_snap_{decimal_mode}", f"types_log_{decimal_mode}"
    for t in (snap_t, log_t):
        h.cql(f"CREATE TABLE {h.keyspace}.{t} {TYPES_TABLE} WITH cdc = true")
    cols = (
        "id, t, a, bi, si, ti, b, f, d, ts, dt, tm, u, tu, ip, bl, vi, de, du, l, s, m, fl, tp, "
        "ld, mv"
    )
    h.cql(f"INSERT INTO {h.keyspace}.{snap_t} ({cols}) VALUES (1, {TYPES_VALUES})")
    cfg = h.config(
        **{
            "snapshot.mode": "initial",
            "table.include.list": rf"{h.keyspace}\.types_.*_{decimal_mode}",
            "decimal.handling.mode": decimal_mode.upper(),  # Debezium spells them so
            "varint.handling.mode": varint_mode,
        }
    )
    time.sleep(1.2)  # durable before the snapshot position: no streamed copy
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {h.keyspace}.{log_t} ({cols}) VALUES (1, {TYPES_VALUES})")
        snap = h.read(cfg, snap_t, min_count=1)[0]
        log = h.read(cfg, log_t, min_count=1)[0]
    assert (snap.op, log.op) == ("r", "c")
    snap_values = {k: v["value"] if isinstance(v, dict) else v for k, v in snap.after.items()}
    log_values = {k: v["value"] if isinstance(v, dict) else v for k, v in log.after.items()}
    assert snap_values == log_values
    assert log_values["ts"] == 1704164645678 and log_values["dt"] == 19724
    assert log_values["tm"] == 45296789000000 and log_values["s"] == ["x", "y"]
    assert log_values["m"] == {"1": "one"}
    assert log_values["tp"] == '[7, "seven"]' and log_values["du"] == "0mo0d3720000000000ns"
    numbers = tuple(log_values[c] for c in ("de", "vi", "ld", "mv"))
    assert numbers == NUMBER_MODES[(decimal_mode, varint_mode)]


def test_element_wise_set_and_map_writes_carry_what_they_removed(h: CassandraHarness) -> None:
    """A non-frozen set or map written by element is a delta of the stored collection: its
    cell lists the elements (keys) the write removed, an empty list for a pure addition,
    and null for a whole write, which also sets ``deletion_ts`` (the collection tombstone).
    Lists keep the plain cell (their removals are by hidden cell path)."""
    h.cql(
        f"CREATE TABLE {h.keyspace}.deltas (id int PRIMARY KEY, s set<int>, m map<int, text>, "
        "l list<int>, fs frozen<set<int>>) WITH cdc = true"
    )
    cfg = h.config(**{"snapshot.mode": "never", "table.include.list": rf"{h.keyspace}\.deltas"})
    t = f"{h.keyspace}.deltas"
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {t} (id, s, m, l, fs) VALUES (1, {{1, 2}}, {{1: 'a'}}, [1], {{1}})")
        h.cql(f"UPDATE {t} SET s = s + {{3}}, m[2] = 'b', l = l + [2] WHERE id = 1")
        h.cql(f"UPDATE {t} SET s = s - {{1, 9}}, m = m - {{1}} WHERE id = 1")
        h.cql(f"DELETE m[2] FROM {t} WHERE id = 1")
        h.cql(f"UPDATE {t} SET s = {{7}}, m = {{}} WHERE id = 1")
        events = h.read(cfg, "deltas", min_count=5)
    cells = [{c: e.after[c] for c in ("s", "m", "l", "fs") if e.after[c]} for e in events]
    insert, add, remove, delete_key, overwrite = cells
    assert insert["s"]["value"] == [1, 2] and insert["s"]["removed"] is None
    assert insert["s"]["deletion_ts"] is not None  # an INSERT writes the collection whole
    assert insert["m"]["value"] == {"1": "a"} and insert["m"]["removed"] is None
    assert "removed" not in insert["l"] and "removed" not in insert["fs"]
    assert (add["s"]["value"], add["s"]["removed"], add["s"]["deletion_ts"]) == ([3], [], None)
    assert (add["m"]["value"], add["m"]["removed"]) == ({"2": "b"}, [])
    assert add["l"]["value"] == [2]
    # a removal names the elements whether or not the collection held them (no read)
    assert (remove["s"]["value"], remove["s"]["removed"]) == ([], [1, 9])
    assert (remove["m"]["value"], remove["m"]["removed"]) == ({}, ["1"])
    assert (delete_key["m"]["value"], delete_key["m"]["removed"]) == ({}, ["2"])
    assert (overwrite["s"]["value"], overwrite["s"]["removed"]) == ([7], None)
    assert overwrite["s"]["deletion_ts"] is not None
    assert overwrite["m"]["value"] is None and overwrite["m"]["removed"] is None


def test_user_defined_types_are_structs_in_the_snapshot_and_the_commit_log(
    h: CassandraHarness, caplog: pytest.LogCaptureFixture
) -> None:
    """Frozen user-defined types, nested, in collections, in a map's values and keys and as a
    clustering column: structs named by the type, the same from the snapshot (driver values)
    and the commit log (bytes). A non-frozen UDT column leaves its table undecoded, named."""
    ks = h.keyspace
    h.cql(f"CREATE TYPE {ks}.address (street text, city text, zip int)")
    h.cql(
        f"CREATE TYPE {ks}.person (name text, addr frozen<address>, tags frozen<set<text>>, "
        '"Odd Name" decimal)'
    )
    cols = "id, home, who, places, byname, bykey"
    table = (
        "(id int, home frozen<address>, who frozen<person>, places list<frozen<address>>, "
        "byname map<text, frozen<address>>, bykey map<frozen<address>, int>, "
        "PRIMARY KEY (id, home)) WITH cdc = true"
    )
    values = (
        "1, {street: 'a st', city: 'x', zip: 1}, "
        "{name: 'ann', addr: {street: 'b st', city: null, zip: 2}, tags: {'t1', 't2'}, "
        '"Odd Name": 1.50}, '
        "[{street: 'c st', city: 'y', zip: 3}], {'w': {street: 'd st', city: 'z', zip: 4}}, "
        "{{street: 'e st', city: 'v', zip: 5}: 7}"
    )
    for t in ("udt_snap", "udt_log"):
        h.cql(f"CREATE TABLE {ks}.{t} {table}")
    h.cql(f"INSERT INTO {ks}.udt_snap ({cols}) VALUES ({values})")
    h.cql(f"CREATE TABLE {ks}.udt_open (id int PRIMARY KEY, a address) WITH cdc = true")
    cfg = h.config(**{"snapshot.mode": "initial", "table.include.list": rf"{ks}\.udt_.*"})
    time.sleep(1.2)  # durable before the snapshot position: no streamed copy
    with caplog.at_level(logging.WARNING, "tidemark.cassandra"), h.running(cfg) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {ks}.udt_log ({cols}) VALUES ({values})")
        snap = h.read(cfg, "udt_snap", min_count=1)[0]
        log = h.read(cfg, "udt_log", min_count=1)[0]
    assert (snap.op, log.op) == ("r", "c")
    values_of = [
        {k: v["value"] if k not in snap.key else v for k, v in e.after.items()} for e in (snap, log)
    ]
    assert values_of[0] == values_of[1]
    got = values_of[1]
    assert log.key == {"id": 1, "home": {"street": "a st", "city": "x", "zip": 1}}
    assert got["who"] == {
        "name": "ann",
        "addr": {"street": "b st", "city": None, "zip": 2},
        "tags": ["t1", "t2"],
        "Odd Name": "1.50",
    }
    assert got["places"] == [{"street": "c st", "city": "y", "zip": 3}]
    assert got["byname"] == {"w": {"street": "d st", "city": "z", "zip": 4}}
    assert got["bykey"] == {'{"street": "e st", "city": "v", "zip": 5}': 7}
    refused = [r.getMessage() for r in caplog.records if f"{ks}.udt_open" in r.getMessage()]
    assert refused and "non-frozen user-defined type" in refused[0]


def test_varint_beyond_64_bits_in_long_mode_follows_the_failure_mode(
    h: CassandraHarness,
) -> None:
    """Debezium's long mode wraps 2**64 + 5 to 5; here the event fails (or is skipped by the
    configured mode) and never arrives with a wrong number."""
    h.cql(f"CREATE TABLE {h.keyspace}.wide (id int PRIMARY KEY, vi varint) WITH cdc = true")
    cfg = h.config(
        **{
            "snapshot.mode": "never",
            "table.include.list": rf"{h.keyspace}\.wide",
            "varint.handling.mode": "long",
            "event.processing.failure.handling.mode": "skip",
        }
    )
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {h.keyspace}.wide (id, vi) VALUES (1, {2**64 + 5})")
        h.cql(f"INSERT INTO {h.keyspace}.wide (id, vi) VALUES (2, -9223372036854775808)")
        events = h.read(cfg, "wide", min_count=1)
    assert [(e.key["id"], e.after["vi"]["value"]) for e in events] == [(2, -9223372036854775808)]


def test_range_deletes_and_static_writes_are_counted_and_warned_not_lost_silently(
    h: CassandraHarness, caplog: pytest.LogCaptureFixture
) -> None:
    """The two writes the connector does not emit (the seed's unsupported list): a range
    delete is warned about once per table, naming it, and both are counted."""
    h.cql(
        f"CREATE TABLE {h.keyspace}.ranged (id int, c int, s int static, v text, "
        "PRIMARY KEY (id, c)) WITH cdc = true"
    )
    cfg = h.config(**{"snapshot.mode": "never", "table.include.list": rf"{h.keyspace}\.ranged"})
    with caplog.at_level(logging.WARNING, "tidemark.cassandra.streaming"), h.running(cfg) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {h.keyspace}.ranged (id, c, v) VALUES (1, 1, 'a')")
        h.cql(f"DELETE FROM {h.keyspace}.ranged WHERE id = 1 AND c > 0")  # a range
        h.cql(f"DELETE FROM {h.keyspace}.ranged WHERE id = 1 AND c >= 5 AND c < 9")
        h.cql(f"UPDATE {h.keyspace}.ranged SET s = 7 WHERE id = 1")  # static only
        h.cql(f"INSERT INTO {h.keyspace}.ranged (id, c, v) VALUES (2, 1, 'sentinel')")
        events = h.read(cfg, "ranged", min_count=2)
        unsupported = run.engine.metrics.extra["number-of-unsupported-changes"]()
    assert [(e.op, e.key) for e in events] == [("c", {"id": 1, "c": 1}), ("c", {"id": 2, "c": 1})]
    assert unsupported >= 3  # this test's; other tests' keyspaces may add theirs
    warned = [r for r in caplog.records if "range delete" in r.getMessage()]
    assert len(warned) == 1 and f"{h.keyspace}.ranged" in warned[0].getMessage()


def test_a_row_before_an_unsent_range_delete_moves_the_offset_past_the_mutation(
    h: CassandraHarness,
) -> None:
    """Under the default ``warn``, a batch writing a row and then a range delete after it is
    one mutation whose last entry is not sent: the row's event must carry the offset past
    the whole mutation (else the segment would wait for a later one to be released)."""
    h.cql(
        f"CREATE TABLE {h.keyspace}.tail (id int, c int, v text, PRIMARY KEY (id, c)) "
        "WITH cdc = true"
    )
    cfg = h.config(**{"snapshot.mode": "never", "table.include.list": rf"{h.keyspace}\.tail"})
    store = MemoryOffsetStore()
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.cql(
            "BEGIN UNLOGGED BATCH "
            f"INSERT INTO {h.keyspace}.tail (id, c, v) VALUES (1, 1, 'kept'); "
            f"DELETE FROM {h.keyspace}.tail WHERE id = 1 AND c > 5; "
            "APPLY BATCH"
        )
        events = h.read(cfg, "tail", min_count=1)
        h.wait_for(lambda: any(o for _, o in store.all(cfg["name"])), run=run)
    assert [(e.op, e.key) for e in events] == [("c", {"id": 1, "c": 1})]
    assert events[0].value["source"]["pos"] > 0
    (_, offset), *_ = [(p, o) for p, o in store.all(cfg["name"]) if o]
    assert "row" not in offset and offset["pos"] == events[0].value["source"]["pos"]


def _bound(method: str, **values: Any) -> dict[str, Any]:
    return {
        "method": method,
        "values": {"a": values.get("a"), "b": values.get("b")},
        "clustering": [
            {"name": "a", "type": "int", "descending": False},
            {"name": "b", "type": "text", "descending": True},
        ],
    }


def test_range_deletes_are_events_with_their_bounds_under_emit(h: CassandraHarness) -> None:
    """``range.delete.handling.mode=emit``: each range delete is a ``d`` whose ``after``
    carries the bounds in clustering order (typed prefix values, ``b`` descending), and every
    other event's ``after`` has the two fields null. Two overlapping range deletes of one
    batch reach the commit log as a boundary marker: two events, each with its own time."""
    h.cql(
        f"CREATE TABLE {h.keyspace}.spans (id int, a int, b text, v text, "
        "PRIMARY KEY (id, a, b)) WITH CLUSTERING ORDER BY (a ASC, b DESC) AND cdc = true"
    )
    h.cql(f"INSERT INTO {h.keyspace}.spans (id, a, b, v) VALUES (0, 1, 'x', 'snap')")
    cfg = h.config(
        **{"table.include.list": rf"{h.keyspace}\.spans", "range.delete.handling.mode": "emit"}
    )
    time.sleep(1.2)  # durable before the snapshot position: no streamed copy
    with h.running(cfg) as run:
        h.wait_streaming(run)
        t = f"{h.keyspace}.spans"
        h.cql(f"INSERT INTO {t} (id, a, b, v) VALUES (1, 1, 'x', 'kept')")
        h.cql(f"DELETE FROM {t} USING TIMESTAMP 1000 WHERE id = 1 AND a > 0")
        h.cql(f"DELETE FROM {t} WHERE id = 1 AND a >= 5 AND a < 9")
        h.cql(f"DELETE FROM {t} WHERE id = 1 AND a = 3 AND b > 'm'")
        h.cql(
            "BEGIN UNLOGGED BATCH "
            f"DELETE FROM {t} USING TIMESTAMP 100 WHERE id = 2 AND a >= 1 AND a <= 5; "
            f"DELETE FROM {t} USING TIMESTAMP 200 WHERE id = 2 AND a >= 3 AND a <= 8; "
            "APPLY BATCH"
        )
        h.cql(f"INSERT INTO {t} (id, a, b, v) VALUES (9, 9, 'z', 'sentinel')")
        events = h.read(cfg, "spans", min_count=9)
        unsupported = run.engine.metrics.extra["number-of-unsupported-changes"]()
    values = [e for e in events if e.value is not None]
    assert [(e.op, e.key) for e in values] == [
        ("r", {"id": 0, "a": 1, "b": "x"}),
        ("c", {"id": 1, "a": 1, "b": "x"}),
        *[("d", {"id": i, "a": None, "b": None}) for i in (1, 1, 1, 2, 2)],
        ("c", {"id": 9, "a": 9, "b": "z"}),
    ]
    assert unsupported == 0
    for e in (values[0], values[1], values[-1]):
        assert e.after["_range_start"] is None and e.after["_range_end"] is None
    ranges = [(e.after["_range_start"], e.after["_range_end"]) for e in values[2:7]]
    assert ranges == [
        (_bound("EXCL_START_BOUND", a=0), _bound("INCL_END_BOUND")),
        (_bound("INCL_START_BOUND", a=5), _bound("EXCL_END_BOUND", a=9)),
        # b is descending: b > 'm' comes first in clustering order
        (_bound("INCL_START_BOUND", a=3), _bound("EXCL_END_BOUND", a=3, b="m")),
        (_bound("INCL_START_BOUND", a=1), _bound("EXCL_END_BOUND", a=3)),
        (_bound("INCL_START_BOUND", a=3), _bound("INCL_END_BOUND", a=8)),
    ]
    for e in values[2:7]:
        cells = {k: v for k, v in e.after.items() if k not in ("_range_start", "_range_end")}
        assert cells == {"id": e.key["id"], "a": None, "b": None, "v": None}
    times = [e.value["source"]["ts_micro"] for e in values[2:7]]
    assert times[0] == 1000 and times[3:] == [100, 200]


def test_a_range_delete_fails_the_task_under_fail_and_is_read_again_after(
    h: CassandraHarness,
) -> None:
    """``range.delete.handling.mode=fail``: the task stops at the range delete with its table
    and position; the stored offset stays before it, so a restart with ``emit`` sends it."""
    h.cql(
        f"CREATE TABLE {h.keyspace}.strict (id int, c int, v text, PRIMARY KEY (id, c)) "
        "WITH cdc = true"
    )
    cfg = h.config(
        **{
            "snapshot.mode": "never",
            "table.include.list": rf"{h.keyspace}\.strict",
            "range.delete.handling.mode": "fail",
        }
    )
    store = MemoryOffsetStore()
    run = h.start(cfg, store)
    try:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {h.keyspace}.strict (id, c, v) VALUES (1, 1, 'before')")
        h.cql(f"DELETE FROM {h.keyspace}.strict WHERE id = 1 AND c > 0")
        h.cql(f"INSERT INTO {h.keyspace}.strict (id, c, v) VALUES (1, 2, 'after')")
        h.wait_for(lambda: bool(run.errors) or not run.thread.is_alive(), timeout=60)
    finally:
        run.stop()
    assert run.errors, "the task did not fail"
    message = str(run.errors[0])
    assert f"{h.keyspace}.strict" in message and "range.delete.handling.mode" in message
    first = h.read(cfg, "strict", min_count=1)
    assert [(e.op, e.key) for e in first] == [("c", {"id": 1, "c": 1})]
    emit = {**cfg, "range.delete.handling.mode": "emit"}
    with h.running(emit, store):
        events = h.read(cfg, "strict", min_count=4)
    assert [(e.op, e.key) for e in events if e.value is not None][-2:] == [
        ("d", {"id": 1, "c": None}),
        ("c", {"id": 1, "c": 2}),
    ]


def test_field_exclude_list_leaves_a_column_out_of_snapshot_and_stream(
    h: CassandraHarness,
) -> None:
    """Debezium's Cassandra name for the column filter (``<keyspace>.<table>.<column>``)."""
    h.cql(
        f"CREATE TABLE {h.keyspace}.secrets (id int PRIMARY KEY, v text, pin text) WITH cdc = true"
    )
    h.cql(f"INSERT INTO {h.keyspace}.secrets (id, v, pin) VALUES (1, 'a', '1234')")
    cfg = h.config(
        **{
            "snapshot.mode": "initial",
            "table.include.list": rf"{h.keyspace}\.secrets",
            "field.exclude.list": f"{h.keyspace}.secrets.pin",
        }
    )
    time.sleep(1.2)  # durable before the snapshot position: no streamed copy
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {h.keyspace}.secrets (id, v, pin) VALUES (2, 'b', '5678')")
        events = h.read(cfg, "secrets", min_count=2)
    assert [(e.op, e.key["id"]) for e in events] == [("r", 1), ("c", 2)]
    assert all(set(e.after) == {"id", "v"} for e in events)
    assert "1234" not in str(events) and "5678" not in str(events)


def test_lost_offsets_with_every_table_recorded_reads_the_log(h: CassandraHarness) -> None:
    """The stored offsets are gone but snapshot_offset.properties says every table is done:
    nothing is snapshotted, so nothing may be skipped either: streaming starts at the oldest
    segment in cdc_raw and a change made while no connector ran arrives."""
    h.cql(f"CREATE TABLE {h.keyspace}.lost (id int PRIMARY KEY, v int) WITH cdc = true")
    cfg = h.config(**{"snapshot.mode": "initial", "table.include.list": rf"{h.keyspace}\.lost"})
    with h.running(cfg) as run:
        h.wait_streaming(run)
    record = Path(cfg["offset.backing.store.dir"]) / "snapshot_offset.properties"
    assert record.read_text().startswith(f"{h.keyspace}.lost=done")
    h.cql(f"INSERT INTO {h.keyspace}.lost (id, v) VALUES (1, 1)")  # while stopped
    time.sleep(1.2)
    with h.running(cfg, MemoryOffsetStore()) as run:  # offsets lost
        h.wait_streaming(run)
        events = h.read(cfg, "lost", min_count=1)
    assert [(e.op, e.key["id"]) for e in events] == [("c", 1)]


def test_envelope_version_3(h: CassandraHarness) -> None:
    h.cql(f"CREATE TABLE {h.keyspace}.env3 (id int PRIMARY KEY, v text) WITH cdc = true")
    cfg = h.config(**{"snapshot.mode": "never", "envelope.version": "3"})
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {h.keyspace}.env3 (id, v) VALUES (1, 'x')")
        (event,) = h.read(cfg, "env3", min_count=1)
    src = event.value["source"]
    assert (src["db"], src["keyspace"], src["table"], src["snapshot"]) == (
        h.keyspace,
        h.keyspace,
        "env3",
        "false",
    )
    assert src["ts_us"] == src["ts_micro"] and src["ts_us"] // 1000 == src["ts_ms"]
    assert event.after["v"]["value"] == "x"
