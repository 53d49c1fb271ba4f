"""End to end on the real node: writes whose write times (``USING TIMESTAMP``) are not in the
order the commit log holds them — as client-side timestamps from hosts with skewed clocks,
hints and repairs make them — apply into Delta cell by cell, as Cassandra resolves them, and
the table equals ``SELECT *`` after every batch (cell_merge.py).

Each statement names its write time relative to the test's start; the comments say what
Cassandra makes of it. Before per-cell positions, every case below but the first batch's left
a different table than Cassandra's (checked).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.apply.job import ApplyJob
from cdc.offsets.memory import MemoryOffsetStore
from tests.integration.cassandra_harness import CassandraHarness, module_harness
from tests.integration.conftest import CassandraInfo
from tests.integration.test_apply_acceptance import job_config

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.cassandra]

COLUMNS = ("id", "line", "item", "qty", "price", "tags")


@pytest.fixture(scope="module")
def h(
    cassandra: CassandraInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CassandraHarness]:
    yield from module_harness(cassandra, kafka, tmp_path_factory, "cswt")


class Table:
    """One Cassandra table, its topic and its Delta table."""

    def __init__(self, h: CassandraHarness, spark: Any, name: str, cfg: dict[str, Any]) -> None:
        self.h, self.spark, self.name, self.cfg = h, spark, name, cfg
        self.start = int(time.time() * 1_000_000)
        self.sent = 0
        h.cql(
            f"CREATE TABLE {h.keyspace}.{name} (id int, line int, item text, qty int, "
            "price double, tags frozen<list<text>>, PRIMARY KEY (id, line)) WITH cdc = true"
        )

    @property
    def topic(self) -> str:
        return self.h.topic(self.cfg, self.name)

    def write(self, at: int, statement: str, events: int = 1) -> None:
        """``statement`` with ``{t}`` for the table and ``{at}`` for ``USING TIMESTAMP`` of the
        test's start plus ``at`` microseconds; ``events``: how many it sends."""
        ks_table = f"{self.h.keyspace}.{self.name}"
        self.h.cql(statement.format(t=ks_table, at=f"USING TIMESTAMP {self.start + at}"))
        self.sent += events

    def wait_sent(self) -> None:
        self.h.read(self.cfg, self.name, min_count=self.sent)

    def lake(self, job: ApplyJob) -> dict[tuple[int, int], dict[str, Any]]:
        path = job.cfg.table_location(self.topic.replace(".", "_"))
        df = self.spark.read.format("delta").load(path)
        return {(r["id"], r["line"]): {c: r[c] for c in COLUMNS} for r in df.collect()}

    def source(self) -> dict[tuple[int, int], dict[str, Any]]:
        out = {}
        for r in self.h.cql(f"SELECT {', '.join(COLUMNS)} FROM {self.h.keyspace}.{self.name}"):
            row = dict(zip(COLUMNS, r, strict=True))
            row["tags"] = list(row["tags"]) if row["tags"] is not None else None
            out[(r.id, r.line)] = row
        return out


def test_out_of_order_write_times_apply_cell_by_cell(
    spark: Any, h: CassandraHarness, kafka: str, tmp_path: Path
) -> None:
    cfg = h.config(**{"snapshot.mode": "never", "range.delete.handling.mode": "emit"})
    t = Table(h, spark, "orders", cfg)
    # deletes.compact.every=1: the deleted-keys side table forgets a delete once the key is
    # stored again above it, so the third batch's late writes meet the rows' own horizon
    job = ApplyJob(spark, job_config(kafka, tmp_path, [t.topic], **{"deletes.compact.every": 1}))
    w = t.write
    with h.running(cfg, MemoryOffsetStore()) as run:
        h.wait_streaming(run)
        w(2000, "INSERT INTO {t} (id, line, item, qty) VALUES (1, 1, 'a', 1) {at}")
        w(1000, "INSERT INTO {t} (id, line, item, qty) VALUES (3, 1, 'c', 1) {at}")
        w(3000, "UPDATE {t} {at} SET qty = 3 WHERE id = 3 AND line = 1")
        w(100, "INSERT INTO {t} (id, line, item, qty) VALUES (4, 1, 'd0', 1) {at}")
        w(300, "UPDATE {t} {at} SET price = 4.0 WHERE id = 4 AND line = 1")
        w(100, "INSERT INTO {t} (id, line, item, qty, price) VALUES (2, 1, 'b', 1, 2.0) {at}")
        w(1000, "INSERT INTO {t} (id, line, item) VALUES (5, 1, 'p') {at}")
        w(3000, "UPDATE {t} {at} SET qty = 5 WHERE id = 5 AND line = 2")
        w(100, "INSERT INTO {t} (id, line, item) VALUES (5, 3, 'p') {at}")
        w(1000, "INSERT INTO {t} (id, line, item) VALUES (6, 1, 'r') {at}")
        w(100, "INSERT INTO {t} (id, line, item) VALUES (6, 2, 'r') {at}")
        w(3000, "UPDATE {t} {at} SET qty = 6 WHERE id = 6 AND line = 2")
        w(100, "INSERT INTO {t} (id, line, item) VALUES (6, 3, 'r') {at}")
        w(100, "INSERT INTO {t} (id, line, item, qty) VALUES (7, 1, 'z', 7) {at}")
        t.wait_sent()
        job.run(timeout=240)
        assert t.lake(job) == t.source()

        # late writes of older times: a column the newer write did not set is taken, one
        # it did set is not
        w(1000, "UPDATE {t} {at} SET price = 5.0 WHERE id = 1 AND line = 1")
        w(1500, "UPDATE {t} {at} SET qty = 9 WHERE id = 1 AND line = 1")
        # a late row delete: the cell older than it goes, the newer one stays, so does the row
        w(2000, "DELETE FROM {t} {at} WHERE id = 3 AND line = 1", events=2)
        # the batch's value of item (200) is newer than the stored one (100), though the
        # stored row (300) is newer than it
        w(200, "UPDATE {t} {at} SET item = 'd1' WHERE id = 4 AND line = 1")
        w(400, "UPDATE {t} {at} SET tags = ['t'] WHERE id = 4 AND line = 1")
        # in order, in one batch: a delete, then a write of one column: the others are gone
        w(500, "DELETE FROM {t} {at} WHERE id = 2 AND line = 1", events=2)
        w(600, "UPDATE {t} {at} SET qty = 2 WHERE id = 2 AND line = 1")
        # a late partition delete: (5, 1) and (5, 3) go; (5, 2) keeps its newer qty
        w(2000, "DELETE FROM {t} {at} WHERE id = 5", events=2)
        # a late range delete: (6, 1) goes, (6, 2) keeps its newer qty, (6, 3) is outside
        w(1500, "DELETE FROM {t} {at} WHERE id = 6 AND line >= 1 AND line <= 2", events=2)
        w(500, "DELETE FROM {t} {at} WHERE id = 7 AND line = 1", events=2)
        # a range delete over rows no batch has written yet
        w(1000, "DELETE FROM {t} {at} WHERE id = 8 AND line >= 1 AND line <= 5", events=2)
        t.wait_sent()
        job.run(timeout=240)
        rows = t.lake(job)
        assert rows == t.source()
        assert rows[(1, 1)]["price"] == 5.0 and rows[(1, 1)]["qty"] == 1
        assert rows[(3, 1)] == {**dict.fromkeys(COLUMNS), "id": 3, "line": 1, "qty": 3}
        assert rows[(4, 1)]["item"] == "d1" and rows[(4, 1)]["price"] == 4.0
        assert rows[(2, 1)] == {**dict.fromkeys(COLUMNS), "id": 2, "line": 1, "qty": 2}
        assert sorted(k for k in rows if k[0] in (5, 6, 7)) == [(5, 2), (6, 2), (6, 3)]
        assert rows[(6, 2)] == {**dict.fromkeys(COLUMNS), "id": 6, "line": 2, "qty": 6}

        # writes older than those deletes arrive (shadowed, nothing changes), one between a
        # row's delete and its newer write (taken), and one older than everything stored, of
        # a column never written (taken)
        w(1800, "UPDATE {t} {at} SET item = 'late' WHERE id = 3 AND line = 1")
        w(1500, "UPDATE {t} {at} SET item = 'late' WHERE id = 5 AND line = 2")
        w(1400, "UPDATE {t} {at} SET item = 'late' WHERE id = 6 AND line = 2")
        w(550, "UPDATE {t} {at} SET price = 0.5 WHERE id = 2 AND line = 1")
        w(50, "UPDATE {t} {at} SET tags = ['late'], qty = 0 WHERE id = 1 AND line = 1")
        # a deleted row and partition: a write older than the delete recorded in the last
        # batch (shadowed), then a newer one of another column (a new row with just that)
        w(300, "UPDATE {t} {at} SET item = 'late' WHERE id = 7 AND line = 1")
        w(600, "UPDATE {t} {at} SET price = 7.0 WHERE id = 7 AND line = 1")
        w(1900, "UPDATE {t} {at} SET item = 'late' WHERE id = 5 AND line = 9")
        w(2500, "UPDATE {t} {at} SET qty = 9 WHERE id = 5 AND line = 9")
        # late writes into that range: older than it (shadowed), newer (a row)
        w(900, "INSERT INTO {t} (id, line, item) VALUES (8, 2, 'late') {at}")
        w(1100, "INSERT INTO {t} (id, line, item) VALUES (8, 3, 'later') {at}")
        t.wait_sent()
        # a new job: the range deletes of earlier batches are read from their side table
        job = ApplyJob(spark, job.cfg)
        job.run(timeout=240)
    rows = t.lake(job)
    assert rows == t.source()
    assert rows[(1, 1)]["tags"] == ["late"] and rows[(1, 1)]["qty"] == 1
    assert rows[(3, 1)]["item"] is None and rows[(2, 1)]["price"] == 0.5
    assert rows[(7, 1)] == {**dict.fromkeys(COLUMNS), "id": 7, "line": 1, "price": 7.0}
    assert rows[(5, 9)] == {**dict.fromkeys(COLUMNS), "id": 5, "line": 9, "qty": 9}
    assert sorted(k for k in rows if k[0] == 8) == [(8, 3)]

    # past range.deletes.retention.ms (counted from the newest write time) the range deletes
    # are forgotten, in the job and in its side table (the connector, started afresh, sends
    # them again: past retention already, they are not recorded again)
    ranges_table = job.cfg.ranges_location(t.topic.replace(".", "_"))
    assert spark.read.format("delta").load(ranges_table).count() == 2  # partitions 6 and 8
    with h.running(cfg, MemoryOffsetStore()) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {h.keyspace}.orders (id, line, item) VALUES (9, 1, 'now')")
        t.sent += 1
        t.wait_sent()
        time.sleep(0.01)
        config = job_config(kafka, tmp_path, [t.topic], **{"range.deletes.retention.ms": 1})
        ApplyJob(spark, config).run(timeout=240)
    assert spark.read.format("delta").load(ranges_table).count() == 0
    assert t.lake(job) == t.source()


def test_a_table_from_before_cell_positions_gets_them(
    spark: Any, h: CassandraHarness, kafka: str, tmp_path: Path
) -> None:
    """A lake table written before per-cell positions (no ``__cells`` column) gets the column
    when a job loads it, and takes late writes cell by cell from then on."""
    cfg = h.config(**{"snapshot.mode": "never"})
    t = Table(h, spark, "older", cfg)
    config = job_config(kafka, tmp_path, [t.topic])
    job = ApplyJob(spark, config)
    with h.running(cfg, MemoryOffsetStore()) as run:
        h.wait_streaming(run)
        t.write(2000, "INSERT INTO {t} (id, line, item, qty) VALUES (1, 1, 'a', 1) {at}")
        t.wait_sent()
        job.run(timeout=240)
        path = job.cfg.table_location(t.topic.replace(".", "_"))
        stored = spark.read.format("delta").load(path)
        assert "__cells" in stored.columns
        (
            stored.drop("__cells")
            .write.format("delta")
            .mode("overwrite")
            .option("overwriteSchema", "true")
            .save(path)
        )
        t.write(1000, "UPDATE {t} {at} SET price = 5.0 WHERE id = 1 AND line = 1")
        t.write(1000, "UPDATE {t} {at} SET qty = 5 WHERE id = 1 AND line = 1")
        t.wait_sent()
        ApplyJob(spark, config).run(timeout=240)
    assert "__cells" in spark.read.format("delta").load(path).columns
    assert t.lake(job) == t.source()
    assert t.lake(job)[(1, 1)]["price"] == 5.0 and t.lake(job)[(1, 1)]["qty"] == 1


def test_a_key_folded_by_two_tasks_keeps_every_cell(
    spark: Any, h: CassandraHarness, kafka: str, tmp_path: Path
) -> None:
    """A key whose changes reach the job through two Kafka partitions (its topic's partition
    count changed, or two topics feed one table) is folded by two worker tasks; the driver's
    reduction of the two rows takes each cell from the newest write that set it and keeps the
    cut of a delete either task saw. The connector's records are copied into a two-partition
    topic, each key's split between the partitions, and applied in one batch."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    cfg = h.config(**{"snapshot.mode": "never"})
    t = Table(h, spark, "split", cfg)
    w = t.write
    with h.running(cfg, MemoryOffsetStore()) as run:
        h.wait_streaming(run)
        # (1, 1): the delete and the newer write in one partition, the older insert in the other
        w(100, "INSERT INTO {t} (id, line, item, qty) VALUES (1, 1, 'a', 1) {at}")
        w(200, "DELETE FROM {t} {at} WHERE id = 1 AND line = 1", events=2)
        w(300, "UPDATE {t} {at} SET price = 1.0 WHERE id = 1 AND line = 1")
        # (2, 1): the insert and the newer write in one partition, the delete in the other
        w(100, "INSERT INTO {t} (id, line, item, qty) VALUES (2, 1, 'b', 2) {at}")
        w(300, "UPDATE {t} {at} SET price = 2.0 WHERE id = 2 AND line = 1")
        w(200, "DELETE FROM {t} {at} WHERE id = 2 AND line = 1", events=2)
        # (3, 1): one column written in each partition
        w(100, "UPDATE {t} {at} SET item = 'c' WHERE id = 3 AND line = 1")
        w(200, "UPDATE {t} {at} SET qty = 3 WHERE id = 3 AND line = 1")
        t.wait_sent()
    records = raw_records(kafka, t.topic, t.sent)
    # the records in order: (1, 1) insert, delete, tombstone, update; (2, 1) insert, update,
    # delete, tombstone; (3, 1) update, update. Partition 1 of the copy gets these:
    second = {1, 2, 3, 6, 7, 9}
    copy = f"{t.topic}.split"
    admin = AdminClient({"bootstrap.servers": kafka})
    for f in admin.create_topics([NewTopic(copy, num_partitions=2, replication_factor=1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": kafka})
    for i, (key, value) in enumerate(records):
        producer.produce(copy, key=key, value=value, partition=int(i in second))
    assert producer.flush(30) == 0
    job = ApplyJob(spark, job_config(kafka, tmp_path, [copy]))
    job.run(timeout=240)
    path = job.cfg.table_location(copy.replace(".", "_"))
    df = spark.read.format("delta").load(path)
    rows = {(r["id"], r["line"]): {c: r[c] for c in COLUMNS} for r in df.collect()}
    assert rows == t.source()
    none = dict.fromkeys(COLUMNS)
    assert rows[(1, 1)] == {**none, "id": 1, "line": 1, "price": 1.0}
    assert rows[(2, 1)] == {**none, "id": 2, "line": 1, "price": 2.0}
    assert rows[(3, 1)] == {**none, "id": 3, "line": 1, "item": "c", "qty": 3}


def raw_records(kafka: str, topic: str, count: int) -> list[tuple[bytes, bytes | None]]:
    """The first ``count`` records of partition 0 of ``topic``, as bytes."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka, "group.id": f"raw-{time.time_ns()}"})
    out: list[tuple[bytes, bytes | None]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                out.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    assert len(out) == count
    return out


def test_a_row_lives_while_it_has_a_cell_or_an_insert_marker(
    spark: Any, h: CassandraHarness, kafka: str, tmp_path: Path
) -> None:
    """Cassandra shows a row while it has a live cell or a live row marker, which only an
    ``INSERT`` writes: a row made by ``UPDATE`` goes when its last cell is deleted; a row
    once inserted stays, with null columns, until a delete newer than that ``INSERT`` — also
    when later ``UPDATE``s followed it and a late delete falls between them."""
    cfg = h.config(**{"snapshot.mode": "never"})
    t = Table(h, spark, "liveness", cfg)
    # compacting the side tables after every batch: what they forget must not matter
    job = ApplyJob(spark, job_config(kafka, tmp_path, [t.topic], **{"deletes.compact.every": 1}))
    w = t.write
    with h.running(cfg, MemoryOffsetStore()) as run:
        h.wait_streaming(run)
        w(100, "UPDATE {t} {at} SET qty = 1 WHERE id = 1 AND line = 1")
        w(100, "UPDATE {t} {at} SET qty = 2, item = 'b' WHERE id = 2 AND line = 1")
        w(200, "UPDATE {t} {at} SET qty = null, item = null WHERE id = 2 AND line = 1")
        w(100, "INSERT INTO {t} (id, line, item) VALUES (3, 1, 'c') {at}")
        w(100, "INSERT INTO {t} (id, line, item) VALUES (4, 1, 'd') {at}")
        w(200, "UPDATE {t} {at} SET qty = 4 WHERE id = 4 AND line = 1")
        w(100, "UPDATE {t} {at} SET qty = 5 WHERE id = 5 AND line = 1")
        w(300, "INSERT INTO {t} (id, line, item) VALUES (6, 1, 'f') {at}")
        w(400, "UPDATE {t} {at} SET qty = 6 WHERE id = 6 AND line = 1")
        t.wait_sent()
        job.run(timeout=240)
        assert t.lake(job) == t.source()
        assert (2, 1) not in t.lake(job)

        w(300, "DELETE qty FROM {t} {at} WHERE id = 1 AND line = 1")  # its last cell
        w(300, "DELETE item FROM {t} {at} WHERE id = 3 AND line = 1")  # its INSERT keeps it
        w(300, "UPDATE {t} {at} SET item = null WHERE id = 4 AND line = 1")
        w(400, "DELETE qty FROM {t} {at} WHERE id = 4 AND line = 1")  # INSERT at 100 keeps it
        # a late row delete between the INSERT (300) and the UPDATE (400): the marker goes,
        # the newer cell keeps the row
        w(350, "DELETE FROM {t} {at} WHERE id = 6 AND line = 1", events=2)
        t.wait_sent()
        job.run(timeout=240)
        rows = t.lake(job)
        assert rows == t.source()
        assert (1, 1) not in rows and rows[(3, 1)] == {**dict.fromkeys(COLUMNS), "id": 3, "line": 1}
        assert rows[(4, 1)] == {**dict.fromkeys(COLUMNS), "id": 4, "line": 1}

        # the row of 6 now lives by its cell only: deleting that cell removes it; 5 too
        w(500, "DELETE qty FROM {t} {at} WHERE id = 6 AND line = 1")
        w(500, "UPDATE {t} {at} SET qty = null WHERE id = 5 AND line = 1")
        # an INSERT older than a stored UPDATE (in a later batch) still gives the row its
        # marker, whether or not it wins a cell
        w(500, "UPDATE {t} {at} SET qty = 7, item = 'new' WHERE id = 7 AND line = 1")
        w(500, "UPDATE {t} {at} SET qty = 8 WHERE id = 8 AND line = 1")
        t.wait_sent()
        job.run(timeout=240)
        # (each wins no cell: 7's item is older than the stored one, 8's writes only the key)
        w(400, "INSERT INTO {t} (id, line, item) VALUES (7, 1, 'old') {at}")
        w(450, "INSERT INTO {t} (id, line) VALUES (8, 1) {at}")
        t.wait_sent()
        job.run(timeout=240)
        w(600, "DELETE qty, item FROM {t} {at} WHERE id = 7 AND line = 1")
        w(600, "DELETE qty FROM {t} {at} WHERE id = 8 AND line = 1")
        # rows that go, and one never stored: their cell deletes are kept (tombstones.py)
        w(300, "UPDATE {t} {at} SET qty = 9 WHERE id = 9 AND line = 1")
        w(300, "UPDATE {t} {at} SET qty = 10 WHERE id = 10 AND line = 1")
        t.wait_sent()
        job.run(timeout=240)
        w(400, "UPDATE {t} {at} SET qty = null WHERE id = 9 AND line = 1")
        w(400, "DELETE qty FROM {t} {at} WHERE id = 10 AND line = 1")
        w(400, "UPDATE {t} {at} SET qty = null WHERE id = 11 AND line = 1")
        t.wait_sent()
        job.run(timeout=240)
        assert not {(9, 1), (10, 1), (11, 1)} & set(t.lake(job))
        # late writes: older than the cell deletes (shadowed: no row), or of another column
        # (a row with just that)
        w(350, "UPDATE {t} {at} SET qty = 5 WHERE id = 9 AND line = 1")
        w(350, "UPDATE {t} {at} SET qty = 5, item = 'x' WHERE id = 10 AND line = 1")
        w(200, "UPDATE {t} {at} SET qty = 5 WHERE id = 11 AND line = 1")
        t.wait_sent()
        job.run(timeout=240)
    rows = t.lake(job)
    assert rows == t.source()
    assert (6, 1) not in rows and (5, 1) not in rows
    assert rows[(7, 1)] == {**dict.fromkeys(COLUMNS), "id": 7, "line": 1}
    assert rows[(8, 1)] == {**dict.fromkeys(COLUMNS), "id": 8, "line": 1}
    assert (9, 1) not in rows and (11, 1) not in rows
    assert rows[(10, 1)] == {**dict.fromkeys(COLUMNS), "id": 10, "line": 1, "item": "x"}
    kept = spark.read.format("delta").load(job.cfg.tombstones_location(t.topic.replace(".", "_")))
    kept_keys = {(r["id"], r["line"]) for r in kept.collect()}
    assert {(9, 1), (11, 1)} <= kept_keys and (3, 1) not in kept_keys  # 3 is stored above it


def test_a_table_of_key_columns_only_applies(
    spark: Any, h: CassandraHarness, kafka: str, tmp_path: Path
) -> None:
    """No regular column: a row is its key and its marker; an INSERT makes it, a delete removes
    it, a late INSERT older than the delete stays shadowed."""
    cfg = h.config(**{"snapshot.mode": "never"})
    ks = h.keyspace
    h.cql(f"CREATE TABLE {ks}.pairs (id int, line int, PRIMARY KEY (id, line)) WITH cdc = true")
    topic = h.topic(cfg, "pairs")
    job = ApplyJob(spark, job_config(kafka, tmp_path, [topic], **{"deletes.compact.every": 1}))
    start = int(time.time() * 1_000_000)

    def lake() -> set[tuple[int, int]]:
        df = spark.read.format("delta").load(job.cfg.table_location(topic.replace(".", "_")))
        return {(r["id"], r["line"]) for r in df.collect()}

    def source() -> set[tuple[int, int]]:
        return {(r.id, r.line) for r in h.cql(f"SELECT id, line FROM {ks}.pairs")}

    with h.running(cfg, MemoryOffsetStore()) as run:
        h.wait_streaming(run)
        for i in (1, 2, 3):
            h.cql(
                f"INSERT INTO {ks}.pairs (id, line) VALUES ({i}, 1) USING TIMESTAMP {start + 100}"
            )
        h.cql(f"DELETE FROM {ks}.pairs USING TIMESTAMP {start + 200} WHERE id = 2 AND line = 1")
        h.read(cfg, "pairs", min_count=5)
        job.run(timeout=240)
        assert lake() == source() == {(1, 1), (3, 1)}
        h.cql(f"INSERT INTO {ks}.pairs (id, line) VALUES (2, 1) USING TIMESTAMP {start + 150}")
        h.cql(f"INSERT INTO {ks}.pairs (id, line) VALUES (4, 1) USING TIMESTAMP {start + 150}")
        # a delete and a newer INSERT in one batch: the row lives anew behind its cut
        h.cql(f"DELETE FROM {ks}.pairs USING TIMESTAMP {start + 300} WHERE id = 3 AND line = 1")
        h.cql(f"INSERT INTO {ks}.pairs (id, line) VALUES (3, 1) USING TIMESTAMP {start + 400}")
        h.read(cfg, "pairs", min_count=10)
        job.run(timeout=240)
        assert lake() == source() == {(1, 1), (3, 1), (4, 1)}
        h.cql(f"INSERT INTO {ks}.pairs (id, line) VALUES (5, 1) USING TIMESTAMP {start + 100}")
        h.read(cfg, "pairs", min_count=11)
        job.run(timeout=240)
    assert lake() == source() == {(1, 1), (3, 1), (4, 1), (5, 1)}
