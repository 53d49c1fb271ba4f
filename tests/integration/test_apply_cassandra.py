"""End to end: tidemark's Cassandra connector reads the real node's commit log into Kafka, the
apply job merges the cell-level writes into Delta, and the table then equals ``SELECT *``.

Three apply runs. The first sees the snapshot and streamed inserts and updates of some columns
(in-batch writes of one row combined by the fold). The second sees only partial writes of
stored rows (the MERGE keeps the columns they did not write), a cell deletion, an ``INSERT``
over an existing row, an ``UPDATE`` of a missing row, a row delete and a partition delete with
writes to that partition before and after it. A third run gets an older write of the deleted
partition sent again (as after a hard kill of the connector), which must not bring it back.
"""

from __future__ import annotations

import datetime as dt
import random
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.apply.job import ApplyJob
from cdc.offsets.memory import MemoryOffsetStore
from tests.integration.cassandra_harness import CassandraHarness, child_process, module_harness
from tests.integration.conftest import CassandraInfo
from tests.integration.test_apply_acceptance import job_config

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.cassandra]

COLUMNS = ("id", "line", "item", "qty", "price", "at", "tags")


@pytest.fixture(scope="module")
def h(
    cassandra: CassandraInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CassandraHarness]:
    yield from module_harness(cassandra, kafka, tmp_path_factory, "csapply")


def lake(
    spark: Any, job: ApplyJob, table: str, columns: tuple[str, ...] = COLUMNS
) -> dict[tuple[int, int], dict[str, Any]]:
    """The Delta table by its ``(id, line)`` key."""
    df = spark.read.format("delta").load(job.cfg.table_location(table))
    return {(r["id"], r["line"]): {c: r[c] for c in columns} for r in df.collect()}


def source(h: CassandraHarness) -> dict[tuple[int, int], dict[str, Any]]:
    out = {}
    for r in h.cql(f"SELECT {', '.join(COLUMNS)} FROM {h.keyspace}.orders"):
        row = dict(zip(COLUMNS, r, strict=True))
        row["tags"] = list(row["tags"]) if row["tags"] is not None else None
        out[(r.id, r.line)] = row
    return out


def resend(kafka: str, topic: str, offset: int) -> None:
    """Produces the record at ``offset`` of ``topic`` again, byte for byte."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka, "group.id": uuid.uuid4().hex})
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        msg = consumer.poll(30)
        assert msg is not None and msg.error() is None and msg.offset() == offset
    finally:
        consumer.close()
    producer = Producer({"bootstrap.servers": kafka})
    producer.produce(topic, key=msg.key(), value=msg.value())
    assert producer.flush(30) == 0


def test_cell_writes_and_deletes_apply_into_delta(
    spark: Any, h: CassandraHarness, kafka: str, tmp_path: Path
) -> None:
    ks = h.keyspace
    h.cql(
        f"CREATE TABLE {ks}.orders (id int, line int, item text, qty int, price double, "
        "at timestamp, tags frozen<list<text>>, PRIMARY KEY (id, line)) WITH cdc = true"
    )
    at = dt.datetime(2026, 11, 25, 12, 30, 15, 123000)
    insert = f"INSERT INTO {ks}.orders (id, line, item, qty, price, at, tags) VALUES "
    h.cql(insert + "(1, 1, 'pen', 2, 1.5, %s, ['a', 'b'])", (at,))
    h.cql(insert + "(1, 2, 'ink', 1, 4.25, %s, ['c'])", (at,))
    h.cql(insert + "(2, 1, 'pad', 5, 2.0, null, null)")
    cfg = h.config(**{"snapshot.mode": "initial"})
    name = h.topic(cfg, "orders")
    job = ApplyJob(spark, job_config(kafka, tmp_path, [name]))
    with h.running(cfg, MemoryOffsetStore()) as run:
        h.wait_streaming(run)
        # batch 1: the snapshot; a new row with some columns; partial updates, one of them of
        # the row inserted in the same batch
        h.cql(f"INSERT INTO {ks}.orders (id, line, item, qty) VALUES (3, 1, 'cup', 1)")
        h.cql(f"UPDATE {ks}.orders SET qty = 3 WHERE id = 1 AND line = 1")
        h.cql(f"UPDATE {ks}.orders SET price = 9.5, tags = ['x'] WHERE id = 3 AND line = 1")
        h.cql(insert + "(4, 1, 'gone', 1, 1.0, null, null)")
        h.cql(insert + "(4, 2, 'gone', 2, 2.0, null, null)")
        events = h.read(cfg, "orders", min_count=8)
        assert [e.op for e in events].count("r") == 3
        job.run(timeout=240)
        table = name.replace(".", "_")
        assert lake(spark, job, table) == source(h)
        assert lake(spark, job, table)[(3, 1)] == {
            "id": 3,
            "line": 1,
            "item": "cup",
            "qty": 1,
            "price": 9.5,
            "at": None,
            "tags": ["x"],
        }

        # batch 2: only writes to stored rows and deletes
        h.cql(f"UPDATE {ks}.orders SET item = 'PEN' WHERE id = 1 AND line = 1")
        h.cql(f"DELETE price FROM {ks}.orders WHERE id = 1 AND line = 1")  # a cell deletion
        h.cql(f"INSERT INTO {ks}.orders (id, line, qty) VALUES (1, 2, 10)")  # upsert
        h.cql(f"UPDATE {ks}.orders SET qty = 7 WHERE id = 5 AND line = 1")  # a missing row
        h.cql(f"DELETE FROM {ks}.orders WHERE id = 2 AND line = 1")  # a row
        h.cql(insert + "(4, 3, 'gone too', 3, 3.0, null, null)")
        h.cql(f"DELETE FROM {ks}.orders WHERE id = 4")  # the partition
        h.cql(f"INSERT INTO {ks}.orders (id, line, item) VALUES (4, 9, 'after')")
        # 8 writes, 2 deletes with their tombstones
        h.read(cfg, "orders", min_count=len(events) + 10)
        job.run(timeout=240)
    rows = lake(spark, job, table)
    assert rows == source(h)
    assert set(rows) == {(1, 1), (1, 2), (3, 1), (4, 9), (5, 1)}
    assert rows[(1, 1)] == {
        "id": 1,
        "line": 1,
        "item": "PEN",
        "qty": 3,
        "price": None,
        "at": at,
        "tags": ["a", "b"],
    }
    assert rows[(1, 2)]["item"] == "ink" and rows[(1, 2)]["qty"] == 10
    assert rows[(5, 1)] == dict.fromkeys(COLUMNS) | {"id": 5, "line": 1, "qty": 7}
    assert job.reports[-1].totals.deleted >= 1

    # batch 3: the connector sends batch 1's write of (4, 1) again (as after a hard kill): the
    # partition delete recorded in batch 2 is newer, so the row stays deleted
    again = next(e for e in events if e.op == "c" and e.key == {"id": 4, "line": 1})
    resend(kafka, name, again.offset)
    job.run(timeout=240)
    assert lake(spark, job, table) == source(h)
    assert job.reports[-1].totals.inserted == 0


def test_range_deletes_apply_into_delta(
    spark: Any, h: CassandraHarness, kafka: str, tmp_path: Path
) -> None:
    """``range.delete.handling.mode=emit``: open, closed, prefixed and descending ranges
    remove exactly the rows Cassandra removed, stored ones and ones the same batch wrote
    before the delete, while a write inside a range after the delete stays, as a new row: the
    cells written before the delete (stored, or earlier in the batch) are gone, as Cassandra
    has them. The same for a write after a partition delete. The Delta table then equals
    ``SELECT *``, also after older writes of range-deleted rows are sent again."""
    ks = h.keyspace
    h.cql(
        f"CREATE TABLE {ks}.spans (id int, a int, b text, v text, w text, "
        "PRIMARY KEY (id, a, b)) WITH CLUSTERING ORDER BY (a ASC, b DESC) AND cdc = true"
    )
    insert = f"INSERT INTO {ks}.spans (id, a, b, v, w) VALUES "
    for i in (1, 2, 3, 4):
        for a in range(1, 6):
            for b in ("c", "m", "x"):
                h.cql(insert + f"({i}, {a}, '{b}', 'snap', 'snap')")
    cfg = h.config(**{"snapshot.mode": "initial", "range.delete.handling.mode": "emit"})
    name = h.topic(cfg, "spans")
    job = ApplyJob(spark, job_config(kafka, tmp_path, [name]))
    columns = ("id", "a", "b", "v", "w")
    update = f"UPDATE {ks}.spans SET "

    def lake_rows() -> dict[tuple[int, int, str], tuple[str, str]]:
        df = spark.read.format("delta").load(job.cfg.table_location(name.replace(".", "_")))
        return {(r["id"], r["a"], r["b"]): (r["v"], r["w"]) for r in df.select(*columns).collect()}

    def source_rows() -> dict[tuple[int, int, str], tuple[str, str]]:
        return {(r.id, r.a, r.b): (r.v, r.w) for r in h.cql(f"SELECT * FROM {ks}.spans")}

    with h.running(cfg, MemoryOffsetStore()) as run:
        h.wait_streaming(run)
        h.read(cfg, "spans", min_count=60)
        job.run(timeout=240)
        assert lake_rows() == source_rows() and len(source_rows()) == 60
        # one batch: writes, then ranges over stored rows and over those writes, then writes
        # inside deleted ranges and partitions
        h.cql(insert + "(1, 9, 'q', 'new, then deleted', null)")
        h.cql(update + "w = 'before' WHERE id = 2 AND a = 3 AND b = 'c'")
        h.cql(f"DELETE FROM {ks}.spans WHERE id = 1 AND a > 3")
        h.cql(f"DELETE FROM {ks}.spans WHERE id = 1 AND a = 2 AND b > 'f'")  # b descending
        h.cql(f"DELETE FROM {ks}.spans WHERE id = 2 AND a >= 2 AND a < 4")
        h.cql(f"DELETE FROM {ks}.spans WHERE id = 3 AND a = 5 AND b >= 'c' AND b <= 'm'")
        h.cql(f"DELETE FROM {ks}.spans WHERE id = 4")  # a partition
        h.cql(insert + "(2, 3, 'm', 'written after the range delete', null)")
        h.cql(update + "v = 'after' WHERE id = 2 AND a = 3 AND b = 'c'")  # w was set before
        h.cql(update + "v = 'after' WHERE id = 2 AND a = 2 AND b = 'x'")  # w only stored
        h.cql(update + "v = 'after' WHERE id = 4 AND a = 1 AND b = 'c'")  # after the partition
        events = h.read(cfg, "spans", min_count=60 + 2 + 5 * 2 + 4)
        job.run(timeout=240)
    rows = lake_rows()
    assert rows == source_rows()
    assert (1, 9, "q") not in rows
    assert sorted(k for k in rows if k[0] == 1 and k[1] == 2) == [(1, 2, "c")]
    assert rows[(2, 3, "m")] == ("written after the range delete", None)
    assert rows[(2, 3, "c")] == rows[(2, 2, "x")] == rows[(4, 1, "c")] == ("after", None)
    assert sorted(k for k in rows if k[0] == 4) == [(4, 1, "c")]

    # the connector sends writes the range deletes removed again (as after a hard kill): the
    # snapshot read of a stored row, and the batch's own write; both stay deleted
    for key, op in (({"id": 1, "a": 4, "b": "c"}, "r"), ({"id": 1, "a": 9, "b": "q"}, "c")):
        again = next(e for e in events if e.op == op and e.key == key)
        resend(kafka, name, again.offset)
    job.run(timeout=240)
    assert lake_rows() == source_rows()
    assert job.reports[-1].totals.inserted == 0


def test_hard_kill_amid_deletes_then_apply_equals_the_table(
    spark: Any, h: CassandraHarness, kafka: str, tmp_path: Path
) -> None:
    """The connector is SIGKILLed while inserts, partial updates, row, range and partition
    deletes stream in (``range.delete.handling.mode=emit``), and restarted from its stored
    offsets: the topic then holds duplicates, never gaps. The apply job over all of it must
    give exactly the table Cassandra holds: the last word per row, duplicates and all."""
    ks = h.keyspace
    h.cql(
        f"CREATE TABLE {ks}.churn (id int, c int, v int, w text, PRIMARY KEY (id, c)) "
        "WITH cdc = true"
    )
    cfg = h.config(**{"snapshot.mode": "never", "range.delete.handling.mode": "emit"})
    cfg["table.include.list"] = rf"{ks}\.churn"
    offsets = tmp_path / "offsets.json"
    rng = random.Random(24)
    stop = threading.Event()
    written = [0]

    def one(i: int) -> None:
        k, c = rng.randrange(6), rng.randrange(12)
        roll = rng.random()
        if roll < 0.5:
            h.cql(f"INSERT INTO {ks}.churn (id, c, v, w) VALUES ({k}, {c}, {i}, 'w{i}')")
        elif roll < 0.7:
            h.cql(f"UPDATE {ks}.churn SET v = {i} WHERE id = {k} AND c = {c}")
        elif roll < 0.82:
            h.cql(f"DELETE FROM {ks}.churn WHERE id = {k} AND c = {c}")
        elif roll < 0.95:
            h.cql(f"DELETE FROM {ks}.churn WHERE id = {k} AND c >= {c} AND c < {c + 4}")
        else:
            h.cql(f"DELETE FROM {ks}.churn WHERE id = {k}")

    def writer() -> None:
        while not stop.is_set():
            one(written[0])
            written[0] += 1
            time.sleep(0.004)

    proc = child_process(h, cfg, offsets)
    time.sleep(2)  # streaming
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        h.wait_for(lambda: len(h.read(cfg, "churn", settle=0.05, timeout=2)) > 150)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)
        time.sleep(0.5)
        proc = child_process(h, cfg, offsets)
        h.wait_for(lambda: written[0] > 900, timeout=120)
    finally:
        stop.set()
        thread.join()
    try:
        h.cql(f"INSERT INTO {ks}.churn (id, c, v) VALUES (99, 0, 0)")  # the last write
        h.wait_for(
            lambda: any(
                e.key == {"id": 99, "c": 0} for e in h.read(cfg, "churn", settle=0.2, timeout=5)
            ),
            timeout=60,
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    events = h.read(cfg, "churn")
    assert sum(1 for e in events if e.value is not None and e.after["_range_start"]) > 50
    job = ApplyJob(spark, job_config(kafka, tmp_path, [h.topic(cfg, "churn")]))
    job.run(timeout=300)
    df = spark.read.format("delta").load(
        job.cfg.table_location(h.topic(cfg, "churn").replace(".", "_"))
    )
    lake_rows = {(r["id"], r["c"]): (r["v"], r["w"]) for r in df.collect()}
    source_rows = {(r.id, r.c): (r.v, r.w) for r in h.cql(f"SELECT * FROM {ks}.churn")}
    assert lake_rows == source_rows


def _timeuuid(ticks: int, clock_low: int, node: int) -> uuid.UUID:
    """A version 1 UUID at 100-ns ``ticks`` with the given clock sequence low byte and node."""
    return uuid.UUID(
        fields=(
            ticks & 0xFFFFFFFF,
            (ticks >> 32) & 0xFFFF,
            0x1000 | ((ticks >> 48) & 0x0FFF),
            0x80,
            clock_low,
            node,
        )
    )


#: range deletes over decimal, varint (tidemark's default: exact text in the lake) and inet
#: clustering columns: (table, column, CQL type, values, the delete's condition on the column)
_TEXT_ORDERED = [
    (
        "amounts",
        "d",
        "decimal",
        ["-1.55", "-1.5", "-0.001", "0", "0.001", "1.5", "1.55", "10", "100.25", "1e-30"],
        "d > -1.5 AND d <= 1.55",  # as text: '-0.001' > '-1.5' holds, '10' < '1.55' too
    ),
    (
        "counts",
        "n",
        "varint",
        [
            "-100",
            "-20",
            "-3",
            "0",
            "5",
            "40",
            "99",
            "12345678901234567890",
            "-98765432109876543210",
        ],
        "n > -20 AND n < 99",
    ),
    (
        "hosts",
        "a",
        "inet",
        [
            *("'::1'", "'9.255.255.255'", "'10.0.0.1'", "'10.0.0.2'", "'2001:db8::1'"),
            *("'192.168.0.1'", "'192.168.0.2'", "'fe80::1'", "'::ffff:0:1'"),
        ],
        "a > '9.255.255.255' AND a <= '192.168.0.1'",  # 2001:db8::1's bytes are between
    ),
]


def test_range_deletes_over_clustering_types_spark_orders_otherwise_apply_into_delta(
    spark: Any, h: CassandraHarness, kafka: str, tmp_path: Path
) -> None:
    """Ranges over clustering columns whose lake values Spark does not order as Cassandra:
    ``timeuuid`` and ``uuid`` (the time-series pattern: a timeuuid by its time, then by signed
    bytes; a uuid by version first), ``decimal`` and ``varint`` held as exact text, and
    ``inet`` (by its bytes: an IPv6 address can fall between two IPv4 ones). The lake must
    remove exactly the rows the node removed. UUID bounds fall between UUIDs of one timestamp
    that differ in a byte's sign bit, and between version 4 UUIDs whose text order has version
    1 ones among them; each other range would delete other rows if compared as text."""
    ks = h.keyspace
    tables = [("stamps", "t", "timeuuid"), ("ids", "u", "uuid")]
    tables += [(table, col, cql) for table, col, cql, _, _ in _TEXT_ORDERED]
    for table, col, cql in tables:
        h.cql(
            f"CREATE TABLE {ks}.{table} (id int, {col} {cql}, v text, "
            f"PRIMARY KEY (id, {col})) WITH cdc = true"
        )
    base = 0x1EF00000000000  # a 2025 timestamp in 100-ns ticks since 1582
    stamps = [
        _timeuuid(base + tick * 10_000, low, node)
        for tick in range(6)
        for low in (0x10, 0x90)
        for node in (0x0100000000AB, 0x8100000000AB)
    ]
    rng = random.Random(7)
    v4 = sorted((uuid.UUID(int=rng.getrandbits(128), version=4) for _ in range(16)), key=str)
    # version 1 UUIDs sort before every version 4 one in Cassandra, not so as text
    ids = v4 + [_timeuuid(base + i, 0x20, 0x42) for i in range(4)]
    for t in stamps:
        h.cql(f"INSERT INTO {ks}.stamps (id, t, v) VALUES (1, {t}, 'x')")
    for u in ids:
        h.cql(f"INSERT INTO {ks}.ids (id, u, v) VALUES (1, {u}, 'x')")
    for table, col, _, values, _ in _TEXT_ORDERED:
        for i, value in enumerate(values):
            h.cql(f"INSERT INTO {ks}.{table} (id, {col}, v) VALUES (1, {value}, '{i}')")
    cfg = h.config(**{"snapshot.mode": "initial", "range.delete.handling.mode": "emit"})
    topics = [h.topic(cfg, table) for table, _, _ in tables]
    job = ApplyJob(spark, job_config(kafka, tmp_path, topics))
    with h.running(cfg, MemoryOffsetStore()) as run:
        h.wait_streaming(run)
        h.read(cfg, "hosts", min_count=len(_TEXT_ORDERED[2][3]))
        h.cql(f"DELETE FROM {ks}.stamps WHERE id = 1 AND t > {stamps[5]} AND t <= {stamps[18]}")
        h.cql(f"DELETE FROM {ks}.ids WHERE id = 1 AND u > {v4[3]} AND u < {v4[12]}")
        for table, _, _, _, where in _TEXT_ORDERED:
            h.cql(f"DELETE FROM {ks}.{table} WHERE id = 1 AND {where}")
        for table, _, _ in tables:  # (the inserts may arrive twice: snapshot and log)
            h.wait_for(
                lambda table=table: any(
                    e.value is not None and e.after["_range_start"] is not None
                    for e in h.read(cfg, table, settle=0.2, timeout=5)
                ),
                timeout=60,
            )
        job.run(timeout=240)
    totals = {"stamps": len(stamps), "ids": len(ids)}
    totals.update((table, len(values)) for table, _, _, values, _ in _TEXT_ORDERED)
    for table, col, _ in tables:
        name = h.topic(cfg, table).replace(".", "_")
        df = spark.read.format("delta").load(job.cfg.table_location(name))
        # uuid rows by their key's text; the others by v (a number's or address's text may
        # be written otherwise than in the statement)
        tell = col if table in ("stamps", "ids") else "v"
        got = sorted(str(r[tell]) for r in df.collect())
        source = sorted(str(r[0]) for r in h.cql(f"SELECT {tell} FROM {ks}.{table}"))
        assert got == source, table
        assert 0 < len(source) < totals[table], table
