"""The direct reader (the workers read a batch's Kafka ranges themselves) against Spark's Kafka
source: same tables from the same topic, transaction markers at the ends of ranges, and records
removed from Kafka before the job read them (real Kafka, real Spark).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from cdc.apply.job import ApplyJob
from cdc.apply.synthetic import pg
from tests.integration.test_apply_acceptance import (
    PH,
    Scenario,
    items,
    job_config,
    two_partition_topic,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def table_rows(spark: Any, path: str) -> list[dict[str, Any]]:
    df = spark.read.format("delta").load(path)
    return sorted(
        ({k: v for k, v in r.asDict().items() if k != "__offsets"} for r in df.collect()),
        key=lambda d: d["id"],
    )


def test_both_readers_give_the_same_tables(spark: Any, kafka: str, tmp_path: Path) -> None:
    t = items("both")
    two_partition_topic(kafka, t)
    producer = Producer({"bootstrap.servers": kafka, "linger.ms": 0})
    lsn = 100
    for rnd in range(3):
        for i in range(1, 13):
            lsn += 1
            if rnd == 2 and i % 4 == 0:
                op, row = "d", {"id": i, "name": "", "qty": None}
            elif rnd == 1 and i % 3 == 0:
                op, row = "u", {"id": i, "name": PH, "qty": 10 * i}  # unchanged TOAST column
            else:
                op, row = ("c" if rnd == 0 else "u"), {"id": i, "name": f"n{rnd}.{i}", "qty": i}
            key, value = t.record(op, row, pg(lsn))
            producer.produce(t.topic, key=key, value=value, partition=i % 2)
            if op == "d":
                producer.produce(t.topic, key=key, value=None, partition=i % 2)
    assert producer.flush(30) == 0
    tables = {}
    for reader in ("spark", "direct"):
        cfg = job_config(
            kafka,
            tmp_path / reader,
            [t.topic],
            kafka_reader=reader,
            kafka_max_offsets_per_trigger=20,  # two batches, ranges ending mid-stream
        )
        job = ApplyJob(spark, cfg)
        job.run(timeout=180)
        assert {r.reader for r in job.reports} == {reader}
        assert sum(r.events for r in job.reports) == 39
        assert len(job.reports) >= 2
        tables[reader] = table_rows(spark, cfg.table_location(t.topic.replace(".", "_")))
    assert tables["direct"] == tables["spark"]
    live = {r["id"]: (r["name"], r["qty"]) for r in tables["direct"]}
    assert sorted(live) == [1, 2, 3, 5, 6, 7, 9, 10, 11]
    assert live[3] == ("n2.3", 3) and live[6] == ("n2.6", 6)


def test_ranges_ending_on_transaction_markers(scenario_base: Path, spark: Any, kafka: str) -> None:
    """A transactional producer's commit marker takes an offset that holds no record; a batch
    ending right after one is done when the consumer's position passes it."""
    t = items("txn")
    s = Scenario(spark, kafka, scenario_base, t, kafka_max_offsets_per_trigger=4)
    producer = Producer({"bootstrap.servers": kafka, "transactional.id": f"tx-{uuid.uuid4().hex}"})
    producer.init_transactions()
    lsn = 100
    for txn in range(2):  # offsets 0-2 records, 3 a marker; 4-6 records, 7 a marker
        producer.begin_transaction()
        for i in range(1, 4):
            lsn += 1
            key, value = t.record(
                "c" if txn == 0 else "u", {"id": i, "name": f"t{txn}", "qty": i}, pg(lsn)
            )
            producer.produce(t.topic, key=key, value=value)
        producer.commit_transaction(30)
    reports = s.apply()
    assert {r.reader for r in reports} == {"direct"}
    assert len(reports) == 2 and sum(r.events for r in reports) == 6
    assert s.rows(t) == [{"id": i, "name": "t1", "qty": i} for i in (1, 2, 3)]


def test_records_removed_before_the_job_read_them(
    scenario_base: Path, spark: Any, kafka: str
) -> None:
    """Records deleted from Kafka (retention; here DeleteRecords) between two batches fail the
    batch, naming where, with kafka.fail.on.data.loss (the default), and the checkpoint does not
    move past them; without it the job warns and applies what is left."""
    t = items("lost")
    s = Scenario(spark, kafka, scenario_base / "strict", t)
    for i in range(1, 4):
        s.send(t, "c", {"id": i, "name": "first", "qty": i}, pg(100 + i))
    s.apply()
    for i in range(1, 4):
        s.send(t, "u", {"id": i, "name": "second", "qty": 10 * i}, pg(200 + i))
    s.producer.flush(30)
    admin = AdminClient({"bootstrap.servers": kafka})
    (future,) = admin.delete_records([TopicPartition(t.topic, 0, 5)]).values()
    future.result(30)
    with pytest.raises(Exception, match=r"offsets 3\.\.4 are no longer in Kafka"):
        s.apply()
    assert s.rows(t) == [{"id": i, "name": "first", "qty": i} for i in (1, 2, 3)]
    with pytest.raises(Exception, match="no longer in Kafka"):
        s.apply()  # the restarted job meets the same loss: its checkpoint did not move

    lenient = Scenario(
        spark, kafka, scenario_base / "strict", t, kafka_fail_on_data_loss=False
    )  # the same checkpoint and tables
    reports = lenient.apply()
    assert sum(r.events for r in reports) == 1
    assert lenient.rows(t) == [
        {"id": 1, "name": "first", "qty": 1},
        {"id": 2, "name": "first", "qty": 2},
        {"id": 3, "name": "second", "qty": 30},
    ]


def test_a_topic_gone_since_the_last_batch_is_data_loss(
    scenario_base: Path, spark: Any, kafka: str
) -> None:
    """A topic of the job's pattern deleted between two batches. The direct reader reads only
    the partitions of the batch's end offsets, so it relies on Spark's micro-batch planning to
    report the lost one as data loss, as Spark's own reader would: with kafka.fail.on.data.loss
    the batch fails and the checkpoint does not move; without it the other topic's records
    are applied."""
    tag = uuid.uuid4().hex[:8]
    kept, gone = items(f"gone{tag}_a"), items(f"gone{tag}_b")
    producer = Producer({"bootstrap.servers": kafka, "linger.ms": 0})

    def send(t: Any, name: str, lsn: int) -> None:
        key, value = t.record("c" if lsn < 200 else "u", {"id": 1, "name": name, "qty": 1}, pg(lsn))
        producer.produce(t.topic, key=key, value=value)
        assert producer.flush(30) == 0

    def job(**extra: Any) -> ApplyJob:
        pattern = rf"srv\.public\.gone{tag}_.*"
        cfg = job_config(kafka, scenario_base, [], kafka_topic_pattern=pattern, **extra)
        return ApplyJob(spark, cfg)

    def name_of(t: Any) -> str:
        return t.topic.replace(".", "_")

    send(kept, "first", 101)
    send(gone, "first", 102)
    first = job()
    first.run(timeout=180)
    assert {r.reader for r in first.reports} == {"direct"}
    admin = AdminClient({"bootstrap.servers": kafka})
    admin.delete_topics([gone.topic])[gone.topic].result(30)
    for _ in range(100):
        if gone.topic not in admin.list_topics(timeout=10).topics:
            break
        time.sleep(0.1)
    send(kept, "second", 201)

    with pytest.raises(Exception, match="have been deleted"):
        job().run(timeout=180)
    location = first.cfg.table_location(name_of(kept))
    assert [r["name"] for r in table_rows(spark, location)] == ["first"]

    lenient = job(kafka_fail_on_data_loss=False)
    lenient.run(timeout=180)
    assert [r["name"] for r in table_rows(spark, location)] == ["second"]
    assert [r["name"] for r in table_rows(spark, first.cfg.table_location(name_of(gone)))] == [
        "first"
    ]


def test_a_batch_that_crashed_after_its_writes_is_read_again_from_its_offsets(
    scenario_base: Path, spark: Any, kafka: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after batch 1 wrote its table, before Spark committed its offsets: the restarted
    query runs batch 1 again, and the direct reader reads the same ranges again from the offset
    log (not from where the crash happened, not from the end of the topic). The table then
    holds every key's last change exactly, including deletes."""
    t = items("crash")
    two_partition_topic(kafka, t)
    s = Scenario(spark, kafka, scenario_base, t, kafka_max_offsets_per_trigger=9)
    lsn = 100
    expected: dict[int, dict[str, Any] | None] = {}
    for i in range(1, 19):
        lsn += 1
        key_id = (i - 1) % 9 + 1
        if i > 9 and key_id % 3 == 0:
            s.send(t, "d", {"id": key_id, "name": "", "qty": None}, pg(lsn), partition=key_id % 2)
            expected[key_id] = None
        else:
            row = {"id": key_id, "name": f"v{i}", "qty": i}
            s.send(t, "c" if i <= 9 else "u", row, pg(lsn), partition=key_id % 2)
            expected[key_id] = row
    real_apply = ApplyJob._apply
    crashed: list[int] = []

    def crash_after_batch_1_wrote(self: ApplyJob, parsed: Any, side: Any, *a: Any) -> None:
        real_apply(self, parsed, side, *a)
        if a[1].batch_id == 1 and not crashed:  # a[1]: the batch's report
            crashed.append(1)
            raise RuntimeError("crashed after the writes")

    monkeypatch.setattr(ApplyJob, "_apply", crash_after_batch_1_wrote)
    with pytest.raises(Exception, match="crashed after the writes"):
        s.apply()
    assert [r.batch_id for r in s.job.reports] == [0]  # batch 1 never reported
    restarted = Scenario(spark, kafka, scenario_base, t, kafka_max_offsets_per_trigger=9)
    reports = restarted.apply()
    assert reports[0].batch_id == 1  # the crashed batch first, then the rest of the topic
    assert {r.reader for r in reports} == {"direct"}
    assert s.job.reports[0].events + sum(r.events for r in reports) == 18
    assert restarted.rows(t) == sorted(
        (row for row in expected.values() if row is not None), key=lambda r: str(r["id"])
    )


@pytest.fixture
def scenario_base(tmp_path: Path) -> Path:
    return tmp_path
