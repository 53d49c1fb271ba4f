"""The apply job end to end: real Kafka, real Spark (local[2]) and real Delta tables.

Each scenario produces hand-built Debezium JSON records (byte for byte what the connectors
write, see cdc/apply/synthetic.py) to a fresh topic and runs the real streaming job with an
``available-now`` trigger, once per micro-batch the scenario needs; the job keeps its checkpoint
between runs exactly as a restarted job would. AC-78 ... AC-83 of the seed catalogue.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cdc.apply.config import ApplyConfig, from_mapping
from cdc.apply.job import ApplyError, ApplyJob, BatchReport
from cdc.apply.synthetic import SyntheticTable, col, decimal_col, mysql, pg

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

PH = "__debezium_unavailable_value"
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.memory": "1g",
    "spark.sql.shuffle.partitions": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
}


def apply_spark(kafka: str) -> Any:
    """The one SparkSession of the test run (local[2], 1 GB driver), with the Kafka and Delta
    jars resolved ahead of time through the dev tooling's Maven cache."""
    from cdc.apply.jars import POMS
    from cdc.apply.session import get_session
    from worker.dev.kafka import resolve_jars

    for pom, version in POMS:
        resolve_jars(pom, version)
    cfg = from_mapping(
        {
            "kafka.bootstrap.servers": kafka,
            "kafka.topics": ["unused"],
            "target.path": "/unused",
            "checkpoint.location": "/unused",
            "spark.master": "local[2]",
            "spark.conf": SPARK_CONF,
        }
    )
    return get_session(cfg)


def job_config(kafka: str, base: Path, topics: list[str], **extra: Any) -> ApplyConfig:
    doc: dict[str, Any] = {
        "kafka.bootstrap.servers": kafka,
        "kafka.topics": topics,
        "target.path": str(base / "lake"),
        "checkpoint.location": str(base / "checkpoint"),
        "trigger": "available-now",
    }
    doc.update({k.replace("_", "."): v for k, v in extra.items()})
    return from_mapping(doc)


class Scenario:
    """One or more synthetic tables, their topic(s), and an apply job over them."""

    def __init__(
        self, spark: Any, kafka: str, base: Path, *tables: SyntheticTable, **cfg: Any
    ) -> None:
        self.spark = spark
        self.kafka = kafka
        self.tables = tables
        self.producer = Producer({"bootstrap.servers": kafka, "linger.ms": 0})
        self.cfg = job_config(kafka, base, [t.topic for t in tables], **cfg)
        self.job = ApplyJob(spark, self.cfg)

    def send(
        self,
        t: SyntheticTable,
        op: str,
        row: dict[str, Any],
        pos: dict[str, Any],
        *,
        partition: int | None = None,
        **kw: Any,
    ) -> None:
        key, value = t.record(op, row, pos, **kw)
        if partition is None:
            self.producer.produce(t.topic, key=key, value=value)
        else:
            self.producer.produce(t.topic, key=key, value=value, partition=partition)

    def send_raw(self, t: SyntheticTable, key: bytes | None, value: bytes | None) -> None:
        self.producer.produce(t.topic, key=key, value=value)

    def apply(self) -> list[BatchReport]:
        self.producer.flush(30)
        before = len(self.job.reports)
        self.job.run(timeout=180)
        return self.job.reports[before:]

    def name(self, t: SyntheticTable) -> str:
        return t.topic.replace(".", "_")

    def rows(self, t: SyntheticTable, *, meta: bool = False) -> list[dict[str, Any]]:
        df = self.spark.read.format("delta").load(self.cfg.table_location(self.name(t)))
        out = []
        for r in df.collect():
            d = r.asDict(recursive=True)
            out.append(d if meta else {k: v for k, v in d.items() if not k.startswith("__")})
        return sorted(out, key=lambda d: tuple(str(d[k]) for k in t.key))

    def deleted_keys(self, t: SyntheticTable) -> list[dict[str, Any]]:
        df = self.spark.read.format("delta").load(self.cfg.deletes_location(self.name(t)))
        return [r.asDict(recursive=True) for r in df.collect()]


def items(name: str = "items", **kw: Any) -> SyntheticTable:
    return SyntheticTable(
        f"{name}_{uuid.uuid4().hex[:8]}",
        [("id", col("int32", optional=False)), ("name", col("string")), ("qty", col("int32"))],
        ["id"],
        **kw,
    )


def data_rows(df: Any) -> list[dict[str, Any]]:
    """A table's rows by key, source columns only (without the job's ``__`` meta columns)."""
    rows = [{k: v for k, v in r.asDict().items() if not k.startswith("__")} for r in df.collect()]
    return sorted(rows, key=lambda d: d["id"])


@pytest.fixture
def scenario(spark: Any, kafka: str, tmp_path: Path) -> Iterator[Any]:
    made: list[Scenario] = []

    def make(*tables: SyntheticTable, **cfg: Any) -> Scenario:
        s = Scenario(spark, kafka, tmp_path / f"s{len(made)}", *tables, **cfg)
        made.append(s)
        return s

    yield make


# -- AC-78 ---------------------------------------------------------------------------------------
def test_ac78_create_update_then_hard_delete(scenario: Any) -> None:
    t = items()
    s = scenario(t)
    s.send(t, "c", {"id": 1, "name": "Anne", "qty": 1}, pg(100))
    s.apply()
    assert s.rows(t) == [{"id": 1, "name": "Anne", "qty": 1}]
    s.send(t, "u", {"id": 1, "name": "Anne K", "qty": 2}, pg(200))
    (report,) = s.apply()
    assert report.totals.updated == 1
    assert s.rows(t) == [{"id": 1, "name": "Anne K", "qty": 2}]
    # The delete carries its values in `before` (after is null); the row is hard-deleted.
    s.send(t, "d", {"id": 1, "name": "", "qty": None}, pg(300))
    s.send_raw(t, t.key_bytes({"id": 1}), None)  # the tombstone that follows a delete
    (report,) = s.apply()
    assert report.totals.deleted == 1 and report.tombstones == 1
    assert s.rows(t) == []
    assert [d["__pos"] for d in s.deleted_keys(t)] == [[1, 300, 2]]


# -- AC-79 ---------------------------------------------------------------------------------------
def test_ac79_highest_lsn_wins_in_a_batch_and_across_batches(scenario: Any) -> None:
    t = items()
    s = scenario(t)
    s.send(t, "u", {"id": 1, "name": "lsn5", "qty": 5}, pg(5))
    s.send(t, "u", {"id": 1, "name": "lsn4", "qty": 4}, pg(4))  # arrives second, older
    s.apply()
    assert s.rows(t) == [{"id": 1, "name": "lsn5", "qty": 5}]
    s.send(t, "u", {"id": 1, "name": "lsn3", "qty": 3}, pg(3))
    (report,) = s.apply()
    assert report.totals.updated == 0 and report.totals.unchanged == 1
    stored = s.rows(t, meta=True)
    assert stored[0]["name"] == "lsn5" and stored[0]["__pos"] == [1, 5, 0]


# -- AC-80 ---------------------------------------------------------------------------------------
def test_ac80_mysql_binlog_and_gtid_orders_both_follow_commit_order(scenario: Any) -> None:
    """Commits in DB order, produced to Kafka shuffled. The binlog index is compared as a
    number (mysql-bin.999999 < mysql-bin.1000000, unlike the text) and GTID numbers likewise."""
    uuid_ = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
    commits = [  # (op, row, binlog file index, pos, row-in-event, gtid)
        ("c", {"id": 1, "name": "a", "qty": 1}, 999_999, 400, 0, 9),
        ("c", {"id": 2, "name": "b", "qty": 1}, 999_999, 400, 1, 9),
        ("u", {"id": 1, "name": "a2", "qty": 2}, 999_999, 900, 0, 10),
        ("d", {"id": 2, "name": "b", "qty": 1}, 1_000_000, 154, 0, 11),  # after a rotation
        ("u", {"id": 1, "name": "a3", "qty": 3}, 1_000_000, 300, 0, 12),
        ("c", {"id": 2, "name": "b-again", "qty": 7}, 1_000_000, 500, 0, 13),
    ]
    expected = [{"id": 1, "name": "a3", "qty": 3}, {"id": 2, "name": "b-again", "qty": 7}]
    shuffled = [commits[i] for i in (5, 3, 0, 4, 2, 1)]
    for mode in ("binlog", "gtid"):
        t = items(f"orders_{mode}", connector="mysql", db="shop")
        s = scenario(t, ordering_mysql=mode)
        for op, row, index, pos, r, gtid in shuffled:
            s.send(t, op, row, mysql(index, pos, r, gtid=f"{uuid_}:{gtid}"))
        s.apply()
        assert s.rows(t) == expected, mode


# -- AC-81 ---------------------------------------------------------------------------------------
def test_ac81_toast_placeholder_keeps_the_stored_value(scenario: Any) -> None:
    t = SyntheticTable(
        f"docs_{uuid.uuid4().hex[:8]}",
        [
            ("id", col("int32", optional=False)),
            ("doc", col("string")),
            ("blob", col("bytes")),
            ("tags", {"type": "array", "items": col("string"), "optional": True}),
            ("n", col("int32")),
        ],
        ["id"],
    )
    s = scenario(t)
    big = "<big>" + "x" * 20_000
    s.send(t, "c", {"id": 1, "doc": big, "blob": "AQID", "tags": ["a", "b"], "n": 0}, pg(10))
    s.apply()
    blob_ph = base64.b64encode(PH.encode()).decode()
    s.send(t, "u", {"id": 1, "doc": PH, "blob": blob_ph, "tags": [PH], "n": 1}, pg(20))
    # In the same batch, an insert's value carries over to the placeholder update that follows.
    s.send(t, "c", {"id": 2, "doc": "two", "blob": None, "tags": None, "n": 0}, pg(30))
    s.send(t, "u", {"id": 2, "doc": PH, "blob": None, "tags": None, "n": 5}, pg(40))
    s.apply()
    assert s.rows(t) == [
        {"id": 1, "doc": big, "blob": b"\x01\x02\x03", "tags": ["a", "b"], "n": 1},
        {"id": 2, "doc": "two", "blob": None, "tags": None, "n": 5},
    ]


# -- AC-82 ---------------------------------------------------------------------------------------
def test_ac82_late_update_after_delete_does_not_resurrect_the_row(
    scenario: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Insert(LSN 1), Delete(LSN 3), Update(LSN 2) in three batches. With the delete's position
    kept, the row stays deleted. A control table on the same job runs without the guard (the
    RFC's limitation, reproduced) and is resurrected: proof the test detects the bug."""
    import cdc.apply.job as jobmod

    fixed, control = items("fixed"), items("control")
    s = scenario(fixed, control)
    real_merge = jobmod.merge_table

    def merge_without_guard_for_control(*args: Any, **kw: Any) -> Any:
        if args[3] == s.cfg.table_location(s.name(control)):
            kw["deletes_nonempty"] = False  # as if deleted keys' positions were forgotten
        return real_merge(*args, **kw)

    monkeypatch.setattr(jobmod, "merge_table", merge_without_guard_for_control)
    for t in (fixed, control):
        s.send(t, "c", {"id": 1, "name": "v1", "qty": 1}, pg(1))
    s.apply()
    for t in (fixed, control):
        s.send(t, "d", {"id": 1, "name": "v1", "qty": 1}, pg(3))
    s.apply()
    assert s.rows(fixed) == [] and s.rows(control) == []
    for t in (fixed, control):
        s.send(t, "u", {"id": 1, "name": "zombie", "qty": 2}, pg(2))
    s.apply()
    assert s.rows(fixed) == []
    assert s.rows(control) == [{"id": 1, "name": "zombie", "qty": 2}]


# -- AC-83 ---------------------------------------------------------------------------------------
def test_ac83_snapshot_then_stream_equals_the_source_keyed_by_the_kafka_key(
    scenario: Any,
) -> None:
    """Composite primary key from the Kafka key; a streamed change whose LSN is *below* the
    snapshot's consistent point (a transaction that was in flight when the slot was created)
    still beats the snapshot read of its row."""
    money_type = decimal_col(12, 2)
    t = SyntheticTable(
        f"accounts_{uuid.uuid4().hex[:8]}",
        [
            ("tenant", col("string", optional=False)),
            ("id", col("int32", optional=False)),
            ("balance", money_type),
        ],
        ["tenant", "id"],
    )
    s = scenario(t)
    source: dict[tuple[str, int], str] = {}

    def money(cents: int) -> str:
        return base64.b64encode(cents.to_bytes(4, "big", signed=True)).decode()

    snapshot_lsn = 5000
    for tenant in ("a", "b"):
        for i in range(1, 4):
            s.send(t, "r", {"tenant": tenant, "id": i, "balance": money(100 * i)}, pg(snapshot_lsn))
            source[(tenant, i)] = f"{i}.00"
    s.apply()
    assert len(s.rows(t)) == 6
    s.send(t, "u", {"tenant": "a", "id": 1, "balance": money(-50)}, pg(4990))  # in-flight tx
    s.send(t, "d", {"tenant": "b", "id": 2, "balance": None}, pg(5010))
    s.send(t, "c", {"tenant": "b", "id": 9, "balance": money(12345)}, pg(5020))
    s.send(t, "u", {"tenant": "a", "id": 3, "balance": money(1)}, pg(5030))
    source[("a", 1)] = "-0.50"
    del source[("b", 2)]
    source[("b", 9)] = "123.45"
    source[("a", 3)] = "0.01"
    s.apply()
    got = {(r["tenant"], r["id"]): str(r["balance"]) for r in s.rows(t)}
    assert got == source


# -- bad input -----------------------------------------------------------------------------------
def test_bad_event_fails_the_batch_naming_topic_partition_offset(scenario: Any) -> None:
    t = items()
    s = scenario(t)
    s.send(t, "c", {"id": 1, "name": "ok", "qty": 1}, pg(1))
    s.send_raw(t, b'{"id": 2}', b"this is not an envelope")
    with pytest.raises(ApplyError) as err:
        s.apply()
    assert f"{t.topic}[0]@1: value is not valid JSON" in str(err.value)
    assert "nothing applied" in str(err.value)
    # Nothing was written, and the batch fails again on restart until the input is dealt with.
    assert not Path(s.cfg.table_location(s.name(t))).exists()
    with pytest.raises(ApplyError):
        s.apply()


def test_bad_events_go_to_the_quarantine_table_with_their_error(scenario: Any) -> None:
    t = items()
    s = scenario(t, on_error="quarantine")
    s.send(t, "c", {"id": 1, "name": "ok", "qty": 1}, pg(1))
    s.send_raw(t, b'{"id": 2}', b"this is not an envelope")
    other = items()  # same topic, a key that is not the table's key
    other.columns = [("sku", col("string", optional=False)), *other.columns]
    _, value = other.record("c", {"sku": "x", "id": 3, "name": "n", "qty": 0}, pg(2))
    s.send_raw(t, orjson_dumps({"sku": "x"}), value)
    (report,) = s.apply()
    assert report.quarantined == 2
    assert s.rows(t) == [{"id": 1, "name": "ok", "qty": 1}]
    q = s.spark.read.format("delta").load(s.cfg.quarantine_location).orderBy("offset").collect()
    assert [(r["topic"], r["partition"], r["offset"]) for r in q] == [
        (t.topic, 0, 1),
        (t.topic, 0, 2),
    ]
    assert "not valid JSON" in q[0]["error"] and q[0]["value"] == b"this is not an envelope"
    assert "does not match the table's key (id)" in q[1]["error"]


def orjson_dumps(obj: Any) -> bytes:
    import orjson

    return orjson.dumps(obj)


# -- schema evolution ----------------------------------------------------------------------------
def test_schema_evolution_adds_widens_and_keeps_removed_columns(scenario: Any) -> None:
    t = items()
    s = scenario(t)
    s.send(t, "c", {"id": 1, "name": "a", "qty": 1}, pg(1))
    s.apply()
    v2_columns = [
        ("id", col("int32", optional=False)),
        ("qty", col("int64")),
        ("email", col("string")),
    ]
    v2 = SyntheticTable(t.table, v2_columns, ["id"])
    s.send(v2, "c", {"id": 2, "qty": 2**40, "email": "e@x"}, pg(2))
    s.send(v2, "u", {"id": 1, "qty": 5, "email": "one@x"}, pg(3))
    s.apply()
    df = s.spark.read.format("delta").load(s.cfg.table_location(s.name(t)))
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types["qty"] == "bigint" and types["email"] == "string" and types["name"] == "string"
    assert s.rows(t) == [
        {"id": 1, "name": None, "qty": 5, "email": "one@x"},
        {"id": 2, "name": None, "qty": 2**40, "email": "e@x"},
    ]


def test_schema_change_forbidden_by_policy_fails(scenario: Any) -> None:
    t = items()
    s = scenario(t, schema_evolution="fail")
    s.send(t, "c", {"id": 1, "name": "a", "qty": 1}, pg(1))
    s.apply()
    v2_columns = [
        ("id", col("int32", optional=False)),
        ("name", col("string")),
        ("qty", col("string")),
    ]
    v2 = SyntheticTable(t.table, v2_columns, ["id"])
    s.send(v2, "u", {"id": 1, "name": "a", "qty": "many"}, pg(2))
    with pytest.raises(ApplyError, match=r"@1: type of column 'qty' changed from INT to STRING"):
        s.apply()


# -- exactly-once --------------------------------------------------------------------------------
def test_replayed_batch_changes_nothing(scenario: Any) -> None:
    """The same micro-batch applied twice (a crash after the writes, before Spark committed the
    offsets): the second run matches rows but changes none."""
    t = items()
    s = scenario(t)
    for i in range(1, 6):
        s.send(t, "c", {"id": i, "name": f"n{i}", "qty": i}, pg(10 * i))
    s.send(t, "d", {"id": 2, "name": "", "qty": None}, pg(100))
    s.send(t, "u", {"id": 3, "name": "changed", "qty": 0}, pg(110))
    s.producer.flush(30)
    batch = (
        s.spark.read.format("kafka")
        .option("kafka.bootstrap.servers", s.kafka)
        .option("subscribe", t.topic)
        .load()
        .select("key", "value", "topic", "partition", "offset")
    )
    first = s.job.process_batch(batch, 0)
    snapshot = s.rows(t, meta=True)
    second = s.job.process_batch(batch, 0)
    assert first.totals.inserted == 4 and first.totals.deletes_recorded == 1
    t2 = second.totals
    assert (t2.inserted, t2.updated, t2.deleted, t2.unchanged) == (0, 0, 0, 5)
    assert s.rows(t, meta=True) == snapshot
    assert len(s.deleted_keys(t)) == 1
    # Compaction keeps the one key that is still deleted (and is itself replay-safe) ...
    from cdc.apply.merge import compact_deletes

    name = s.name(t)
    table, deletes = s.cfg.table_location(name), s.cfg.deletes_location(name)
    for _ in range(2):
        compact_deletes(s.spark, table, deletes, ["id"])
        assert [d["id"] for d in s.deleted_keys(t)] == [2]
    # ... and drops it once the key lives again at a higher position.
    s.send(t, "c", {"id": 2, "name": "back", "qty": 2}, pg(200))
    s.producer.flush(30)
    s.job.process_batch(batch, 1)  # the whole topic again: old changes are no-ops
    assert [r["name"] for r in s.rows(t)] == ["n1", "back", "changed", "n4", "n5"]
    compact_deletes(s.spark, table, deletes, ["id"])
    assert s.deleted_keys(t) == []


# -- more input shapes ---------------------------------------------------------------------------
def test_schemaless_json_and_truncate(scenario: Any) -> None:
    t = items(with_schemas=False)
    s = scenario(t)
    s.send(t, "c", {"id": 1, "name": "a", "qty": 1}, pg(1))
    s.send(t, "c", {"id": 2, "name": "b", "qty": None}, pg(2))
    s.apply()
    assert s.rows(t) == [{"id": 1, "name": "a", "qty": 1}, {"id": 2, "name": "b", "qty": None}]
    import orjson

    trunc = {"op": "t", "source": t.source(pg(5), snapshot=False, ts_ms=1), "ts_ms": 2}
    s.send_raw(t, None, orjson.dumps(trunc))
    s.send(t, "c", {"id": 3, "name": "after", "qty": 3}, pg(6))
    s.apply()
    assert s.rows(t) == [{"id": 3, "name": "after", "qty": 3}]
    # Events older than the truncate in later batches (a partition that lagged, a re-send)
    # find no row and no deleted-key record: the truncate's position still keeps them out.
    s.send(t, "c", {"id": 4, "name": "before", "qty": 4}, pg(4))
    s.send(t, "u", {"id": 1, "name": "re-sent", "qty": 1}, pg(3))
    s.apply()
    assert s.rows(t) == [{"id": 3, "name": "after", "qty": 3}]
    s.job = type(s.job)(s.spark, s.cfg)  # a new run reads it back from the table
    s.send(t, "c", {"id": 5, "name": "older", "qty": 5}, pg(4))
    s.send(t, "c", {"id": 6, "name": "newer", "qty": 6}, pg(7))
    # a re-snapshot's read after the truncate: phase 0 sorts below every streamed position,
    # but by the source's position it is newer than the truncate, and it stays
    s.send(t, "r", {"id": 7, "name": "re-read", "qty": 7}, pg(8))
    s.apply()
    assert [r["id"] for r in s.rows(t)] == [3, 6, 7]


def test_a_key_change_a_truncate_erased_leaves_no_image_behind(scenario: Any) -> None:
    """A key change (1 -> 2, its create with a placeholder) and a TRUNCATE after it in one
    batch: the truncate drops the create, so the new key is never stored; its image stayed in
    the key-change side table for good (a lookup every batch, merge-on-read forced to
    copy-on-write)."""
    import orjson

    t = items()
    s = scenario(t)
    s.send(t, "c", {"id": 1, "name": "a", "qty": 1}, pg(10))
    s.apply()
    dk, dv = t.record("d", {"id": 1, "name": None, "qty": None}, pg(15))
    ck, cv = t.record("c", {"id": 2, "name": PH, "qty": 2}, pg(15))
    s.producer.produce(t.topic, key=dk, value=dv, headers=[("__debezium.newkey", b'{"id":2}')])
    s.producer.produce(t.topic, key=ck, value=cv, headers=[("__debezium.oldkey", b'{"id":1}')])
    trunc = {"op": "t", "source": t.source(pg(20), snapshot=False, ts_ms=1), "ts_ms": 2}
    s.send_raw(t, None, orjson.dumps(trunc))
    s.apply()
    assert s.rows(t) == []
    assert s.job._keychanges_of(s.name(t)).images == {}
    s.send(t, "c", {"id": 3, "name": "c", "qty": 3}, pg(30))
    s.apply()
    assert s.rows(t) == [{"id": 3, "name": "c", "qty": 3}]


def two_partition_topic(kafka: str, t: SyntheticTable) -> None:
    admin = AdminClient({"bootstrap.servers": kafka})
    admin.create_topics([NewTopic(t.topic, num_partitions=2, replication_factor=1)])[
        t.topic
    ].result(30)


def test_a_key_spread_over_partitions_is_reduced_by_position(
    scenario: Any, kafka: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a topic's partition count changed, one key's changes can sit in two partitions:
    the driver keeps the highest position per key before the MERGE. The distinct-key count that
    large batches use to decide it (forced here) must find the repeated key."""
    import cdc.apply.job as job_module

    monkeypatch.setattr(job_module, "REDUCE_CHECK_ROWS", 0)
    t = items()
    two_partition_topic(kafka, t)
    s = scenario(t)
    s.send(t, "c", {"id": 1, "name": "old", "qty": 1}, pg(10), partition=1)
    s.send(t, "u", {"id": 1, "name": "new", "qty": 2}, pg(20), partition=0)
    s.send(t, "c", {"id": 2, "name": "two", "qty": 2}, pg(15), partition=1)
    s.apply()
    assert s.rows(t) == [{"id": 1, "name": "new", "qty": 2}, {"id": 2, "name": "two", "qty": 2}]


def test_a_placeholder_takes_the_newest_value_across_partitions(scenario: Any, kafka: str) -> None:
    """A key spread over two partitions: the newest change has a TOAST placeholder, which its
    own partition's fold filled from an older change there, while a change in between sits in
    the other partition. Keeping the newest row would keep the older value; the reduction
    takes each placeholder column's value by position, as the merge-on-read fold does."""
    t = items()
    two_partition_topic(kafka, t)
    s = scenario(t)
    s.send(t, "c", {"id": 1, "name": "stored", "qty": 1}, pg(10), partition=0)
    s.apply()
    s.send(t, "u", {"id": 1, "name": "older", "qty": 2}, pg(100), partition=0)
    s.send(t, "u", {"id": 1, "name": "newer", "qty": 3}, pg(200), partition=1)
    s.send(t, "u", {"id": 1, "name": PH, "qty": 4}, pg(300), partition=0)
    s.send(t, "u", {"id": 2, "name": "two", "qty": 5}, pg(150), partition=1)
    s.send(t, "u", {"id": 2, "name": PH, "qty": 6}, pg(250), partition=0)
    s.apply()
    assert s.rows(t) == [
        {"id": 1, "name": "newer", "qty": 4},
        {"id": 2, "name": "two", "qty": 6},
    ]


# -- command line ---------------------------------------------------------------------------------
def job_yaml(base: Path, kafka: str, topic: str, extra: str = "") -> Path:
    """A job's YAML file over one topic, tables under ``base/lake``."""
    config = base / "job.yaml"
    config.write_text(
        f"kafka:\n  bootstrap.servers: {kafka}\n  topics: [{topic}]\n"
        f"target.path: {base / 'lake'}\ncheckpoint.location: {base / 'ckpt'}\n{extra}"
    )
    return config


def test_command_line_runs_the_job_from_a_yaml_file(
    spark: Any, kafka: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import time

    from cdc.apply.cli import main

    t = items()
    producer = Producer({"bootstrap.servers": kafka})
    for i in (1, 2):
        key, value = t.record("c", {"id": i, "name": f"n{i}", "qty": i}, pg(i))
        producer.produce(t.topic, key=key, value=value)
    producer.flush(30)
    config = job_yaml(tmp_path, kafka, t.topic, "query.name: cli_test\n")
    caplog.set_level(logging.INFO, logger="tidemark.apply")
    assert main([str(config), "--trigger", "available-now"]) == 0
    df = spark.read.format("delta").load(str(tmp_path / "lake" / t.topic.replace(".", "_")))
    assert sorted(r["id"] for r in df.collect()) == [1, 2]
    assert any("batch 0: events=2" in r.getMessage() for r in caplog.records)
    deadline = time.monotonic() + 10  # Spark's progress arrives through a query listener
    while time.monotonic() < deadline:
        if any("query cli_test batch 0" in r.getMessage() for r in caplog.records):
            break
        time.sleep(0.2)
    else:
        raise AssertionError("no progress line from the query listener")


def test_spark_submit_runs_the_job_as_documented(spark: Any, kafka: str, tmp_path: Path) -> None:
    """The docs' spark-submit command, run as a separate JVM: the job script, the jars from
    ``--print-jars``, the master from spark-submit."""
    import os
    import subprocess
    import sys

    t = items("submitted")
    producer = Producer({"bootstrap.servers": kafka})
    for i in (1, 2, 3):
        key, value = t.record("c", {"id": i, "name": f"n{i}", "qty": i}, pg(i))
        producer.produce(t.topic, key=key, value=value)
    key, value = t.record("d", {"id": 2, "name": "n2", "qty": 2}, pg(9))
    producer.produce(t.topic, key=key, value=value)
    producer.flush(30)
    config = tmp_path / "job.yaml"
    config.write_text(
        f"kafka:\n  bootstrap.servers: {kafka}\n  topics: [{t.topic}]\n"
        f"target.path: {tmp_path / 'lake'}\ncheckpoint.location: {tmp_path / 'ckpt'}\n"
        "trigger: available-now\nspark.conf:\n  spark.ui.enabled: 'false'\n"
    )
    bin_dir = Path(sys.executable).parent
    root = Path(__file__).resolve().parents[2]
    jars = subprocess.run(
        [sys.executable, "-m", "cdc.apply", "--print-jars"],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
    ).stdout.strip()
    assert jars.count(".jar") >= 3, jars
    proc = subprocess.run(
        [
            str(bin_dir / "spark-submit"),
            "--master",
            "local[1]",
            "--driver-memory",
            "768m",
            "--jars",
            jars,
            str(root / "cdc" / "apply" / "__main__.py"),
            str(config),
            "--set",
            "spark.jars=none",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(root)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    df = spark.read.format("delta").load(str(tmp_path / "lake" / t.topic.replace(".", "_")))
    assert sorted((r["id"], r["name"]) for r in df.collect()) == [(1, "n1"), (3, "n3")]
