"""Merge-on-read tables (cdc/apply/changelog.py) against copy-on-write ones, on real Kafka,
Spark and Delta.

The same change events go to two topics: one applied copy-on-write (the reference the
acceptance tests pin down), one merge-on-read. After every batch the merge-on-read table's
real-time view must equal the copy-on-write table, while its base table stays as of its last
compaction; after a compaction the base table must equal it too. The history exercises what the
fold must get right: a key's changes over several batches, TOAST placeholders filled from an
earlier batch or from the same one, deletes and re-inserts, two Kafka partitions cut at
different offsets. Positions out of arrival order and late updates after a delete are the
explicit cases further down.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from cdc.apply.synthetic import SyntheticTable, col, pg
from tests.integration.test_apply_acceptance import (
    PH,
    Scenario,
    items,
    job_yaml,
    two_partition_topic,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def history(seed: int, batches: int, per_batch: int, keys: int) -> list[list[tuple[Any, ...]]]:
    """Batches of (op, row, lsn, partition): a consistent source history in position order,
    each key in its own Kafka partition (as a keyed producer puts it), each partition cut
    into batches at its own points, so one partition runs ahead of the other."""
    rng = random.Random(seed)
    live: dict[int, dict[str, Any]] = {}
    lsn = 100
    queues: list[list[tuple[Any, ...]]] = [[], []]
    for _ in range(batches * per_batch):
        lsn += 10
        k = rng.randrange(keys)
        if k not in live:
            row = {"id": k, "name": f"n{k}@{lsn}", "qty": rng.randrange(100)}
            live[k] = row
            op = "c"
        elif rng.random() < 0.25:
            row = live.pop(k)
            op = "d"
        else:
            row = {"id": k, "name": f"n{k}@{lsn}", "qty": rng.randrange(100)}
            live[k] = dict(row)
            if rng.random() < 0.35:
                row["name"] = PH  # unchanged TOASTed value: the stored one stays
            op = "u"
        queues[k % 2].append((op, row, lsn, k % 2))
    out: list[list[tuple[Any, ...]]] = []
    for b in range(batches):
        batch = []
        for q in queues:
            n = len(q) if b == batches - 1 else rng.randrange(len(q) // (batches - b) * 2 + 1)
            batch += q[:n]
            del q[:n]
        out.append(batch)
    return out


def rows_of(df: Any) -> list[dict[str, Any]]:
    """Rows with the meta columns, but ``__topic``: the two tables' topics differ."""
    return strip([r.asDict(recursive=True) for r in df.collect()])


def strip(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(({k: v for k, v in r.items() if k != "__topic"} for r in rows), key=by_id)


def by_id(row: dict[str, Any]) -> int:
    return int(row["id"])


def test_the_real_time_view_and_each_compaction_equal_copy_on_write(
    spark: Any, kafka: str, tmp_path: Path
) -> None:
    cow_t, mor_t = items("cow"), items("mor")
    for t in (cow_t, mor_t):
        two_partition_topic(kafka, t)
    cow = Scenario(spark, kafka, tmp_path / "cow", cow_t)
    mor = Scenario(
        spark,
        kafka,
        tmp_path / "mor",
        mor_t,
        table_type="merge-on-read",
        compaction_every="none",
    )
    name = mor.name(mor_t)
    base_path = mor.cfg.table_location(name)
    log_path = mor.cfg.changes_location(name)
    compacted_at: list[dict[str, Any]] = []
    for i, batch in enumerate(history(seed=11, batches=4, per_batch=60, keys=25)):
        for op, row, lsn, partition in batch:
            cow.send(cow_t, op, row, pg(lsn), partition=partition)
            mor.send(mor_t, op, row, pg(lsn), partition=partition)
        cow.apply()
        (report,) = mor.apply()
        expected = strip(cow.rows(cow_t, meta=True))
        assert rows_of(mor.job.read_table(name)) == expected, f"batch {i}"
        base = rows_of(spark.read.format("delta").load(base_path))
        if i == 0:
            # A new table's first batch is MERGEd (it creates the table); no log yet.
            assert report.totals.logged == 0 and base == expected
            compacted_at = base
        else:
            assert report.totals.logged > 0 and report.totals.inserted == 0
            assert base == compacted_at, "the base table changed without a compaction"
        if i == 2:
            mor.job.compact_all()
            assert rows_of(spark.read.format("delta").load(base_path)) == expected
            assert spark.read.format("delta").load(log_path).count() == 0
            compacted_at = expected
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{log_path}`").collect()[0]
    assert detail["properties"].get("delta.dataSkippingNumIndexedCols") == "0"  # read whole
    tables = mor.job.compact_all()
    assert tables[name].compactions == 1
    assert rows_of(spark.read.format("delta").load(base_path)) == expected
    assert mor.job.compact_all() == {}  # nothing left to compact


def test_a_compaction_cut_off_after_its_merge_is_completed_by_the_next(
    spark: Any, kafka: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log is emptied after the MERGE: a job killed in between merges it again, a no-op."""
    t = items("cut")
    s = Scenario(spark, kafka, tmp_path, t, table_type="merge-on-read", compaction_every="none")
    s.send(t, "c", {"id": 1, "name": "a", "qty": 1}, pg(10))
    s.send(t, "c", {"id": 2, "name": "b", "qty": 2}, pg(11))
    s.apply()
    s.send(t, "u", {"id": 1, "name": PH, "qty": 5}, pg(20))
    s.send(t, "d", {"id": 2, "name": "b", "qty": 2}, pg(21))
    s.send(t, "c", {"id": 3, "name": "c", "qty": 3}, pg(22))
    s.apply()
    expected = [
        {"id": 1, "name": "a", "qty": 5},
        {"id": 3, "name": "c", "qty": 3},
    ]
    real_sql = spark.sql

    def killed_before_the_log_is_emptied(query: str, *a: Any, **kw: Any) -> Any:
        if query.startswith("DELETE FROM") and "_tidemark/changes" in query:
            raise RuntimeError("killed")
        return real_sql(query, *a, **kw)

    monkeypatch.setattr(spark, "sql", killed_before_the_log_is_emptied)
    with pytest.raises(RuntimeError, match="killed"):
        s.job.compact_all(batch_id=7)
    monkeypatch.setattr(spark, "sql", real_sql)
    assert s.rows(t) == expected  # merged, log still full
    s.job._logged.clear()  # a restarted job knows nothing
    (counts,) = s.job.compact_all(batch_id=7).values()
    assert (counts.inserted, counts.updated, counts.deleted) == (0, 0, 0)
    assert s.rows(t) == expected
    assert [d["id"] for d in s.deleted_keys(t)] == [2]
    assert rows_of(s.job.read_table(s.name(t))) == strip(s.rows(t, meta=True))


def test_a_schema_change_compacts_first_and_merges_copy_on_write(
    spark: Any, kafka: str, tmp_path: Path
) -> None:
    t = items("evolve")
    s = Scenario(spark, kafka, tmp_path, t, table_type="merge-on-read", compaction_every="none")
    s.send(t, "c", {"id": 1, "name": "a", "qty": 1}, pg(10))
    s.apply()
    s.send(t, "u", {"id": 1, "name": "b", "qty": 2}, pg(20))
    (logged,) = s.apply()
    assert logged.totals.logged == 1 and s.rows(t) == [{"id": 1, "name": "a", "qty": 1}]
    wider = SyntheticTable(t.table, [*t.columns, ("note", col("string"))], list(t.key))
    s.send(wider, "u", {"id": 1, "name": PH, "qty": 3, "note": "new column"}, pg(30))
    (evolved,) = s.apply()
    assert evolved.totals.compactions == 1 and evolved.totals.logged == 0
    assert s.rows(t) == [{"id": 1, "name": "b", "qty": 3, "note": "new column"}]
    log = s.cfg.changes_location(s.name(t))
    assert spark.read.format("delta").load(log).count() == 0
    # Widened (qty INT -> BIGINT): compacted again, and the next batch's log rows, typed with
    # the wider column, start a log of the new shape.
    widest = SyntheticTable(
        t.table,
        [
            ("id", t.columns[0][1]),
            ("name", col("string")),
            ("qty", col("int64")),
            ("note", col("string")),
        ],
        list(t.key),
    )
    s.send(widest, "u", {"id": 1, "name": "c", "qty": 2**40, "note": "wide"}, pg(40))
    (widened,) = s.apply()
    assert widened.totals.logged == 0
    # A new run (a restart) does not know the log was emptied: it finds out before its first
    # append, or the wider rows could not be merged into the emptied log's INT schema.
    s.job = type(s.job)(s.spark, s.cfg)
    s.send(widest, "u", {"id": 1, "name": PH, "qty": 2**41, "note": "logged"}, pg(50))
    (logged_wide,) = s.apply()
    assert logged_wide.totals.logged == 1
    expected = [{"id": 1, "name": "c", "qty": 2**41, "note": "logged"}]
    assert [
        {k: v for k, v in r.items() if not k.startswith("__")}
        for r in rows_of(s.job.read_table(s.name(t)))
    ] == expected
    s.job.compact_all()
    assert s.rows(t) == expected


def test_older_changes_arriving_late_lose_before_and_after_a_compaction(
    spark: Any, kafka: str, tmp_path: Path
) -> None:
    """AC-79 and AC-82 on a merge-on-read table: an older update arriving after a newer one,
    and late updates of a deleted key, whether the delete is still in the change log or
    already compacted into the deleted-keys table."""
    t = items("late")
    s = Scenario(spark, kafka, tmp_path, t, table_type="merge-on-read", compaction_every="none")
    name = s.name(t)

    def view() -> list[dict[str, Any]]:
        return [
            {k: v for k, v in r.items() if not k.startswith("__")}
            for r in rows_of(s.job.read_table(name))
        ]

    s.send(t, "c", {"id": 1, "name": "a", "qty": 1}, pg(10))
    s.send(t, "c", {"id": 2, "name": "b", "qty": 1}, pg(11))
    s.apply()
    s.send(t, "u", {"id": 1, "name": "new", "qty": 3}, pg(30))
    s.send(t, "u", {"id": 1, "name": "older", "qty": 2}, pg(20))
    s.send(t, "d", {"id": 2, "name": "b", "qty": 1}, pg(40))
    s.apply()
    s.send(t, "u", {"id": 2, "name": "zombie", "qty": 9}, pg(35))
    s.send(t, "u", {"id": 1, "name": "late", "qty": 9}, pg(25))
    s.apply()
    assert view() == [{"id": 1, "name": "new", "qty": 3}]
    s.job.compact_all()
    assert s.rows(t) == [{"id": 1, "name": "new", "qty": 3}]
    assert [(d["id"], d["__pos"]) for d in s.deleted_keys(t)] == [
        (2, [1, 40, 4])
    ]  # the third part: the offset
    s.send(t, "u", {"id": 2, "name": "zombie again", "qty": 9}, pg(38))
    (report,) = s.apply()
    assert report.totals.logged == 1
    assert view() == [{"id": 1, "name": "new", "qty": 3}]
    s.job.compact_all()
    assert s.rows(t) == [{"id": 1, "name": "new", "qty": 3}]


def test_the_command_line_compacts_on_demand(spark: Any, kafka: str, tmp_path: Path) -> None:
    from cdc.apply.cli import main

    t = items("cli")
    producer = Producer({"bootstrap.servers": kafka})

    def send(op: str, row: dict[str, Any], lsn: int) -> None:
        key, value = t.record(op, row, pg(lsn))
        producer.produce(t.topic, key=key, value=value)
        producer.flush(30)

    config = job_yaml(
        tmp_path, kafka, t.topic, "table.type: merge-on-read\ncompaction.every: none\n"
    )
    table = str(tmp_path / "lake" / t.topic.replace(".", "_"))
    send("c", {"id": 1, "name": "a", "qty": 1}, 10)
    assert main([str(config), "--trigger", "available-now"]) == 0
    send("u", {"id": 1, "name": "b", "qty": 2}, 20)
    assert main([str(config), "--trigger", "available-now"]) == 0
    assert [r["name"] for r in spark.read.format("delta").load(table).collect()] == ["a"]
    assert main([str(config), "--compact"]) == 0
    assert [r["name"] for r in spark.read.format("delta").load(table).collect()] == ["b"]


def test_a_replayed_logged_batch_appends_nothing_twice(
    spark: Any, kafka: str, tmp_path: Path
) -> None:
    """A crash after a batch's log append, before Spark committed its offsets: the replay's
    append is skipped by Delta's idempotent-write options, so the log does not grow, and a
    replay after the compaction emptied the log does not bring the rows back."""
    t = items("replay")
    s = Scenario(spark, kafka, tmp_path, t, table_type="merge-on-read", compaction_every="none")

    def records(start: int) -> Any:
        s.producer.flush(30)
        return (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", kafka)
            .option("subscribe", t.topic)
            .option("startingOffsets", f'{{"{t.topic}": {{"0": {start}}}}}')
            .load()
            .select("key", "value", "topic", "partition", "offset")
        )

    s.send(t, "c", {"id": 1, "name": "a", "qty": 1}, pg(10))
    s.job.process_batch(records(0), 0)  # creates the table
    s.send(t, "u", {"id": 1, "name": "b", "qty": 2}, pg(20))
    s.send(t, "c", {"id": 2, "name": "c", "qty": 3}, pg(30))
    batch = records(1)
    log = s.cfg.changes_location(s.name(t))
    for _ in range(2):
        report = s.job.process_batch(batch, 1)
        assert report.totals.logged == 2
        assert spark.read.format("delta").load(log).count() == 2
    s.job.compact_all(batch_id=1)
    s.job.process_batch(batch, 1)  # replayed once more, after the compaction
    assert spark.read.format("delta").load(log).count() == 0
    expected = [{"id": 1, "name": "b", "qty": 2}, {"id": 2, "name": "c", "qty": 3}]
    assert s.rows(t) == expected


def test_switching_back_to_copy_on_write_applies_the_logged_changes_first(
    spark: Any, kafka: str, tmp_path: Path
) -> None:
    """The logged changes are past the checkpoint: a job restarted as copy-on-write must merge
    them before its first batch, or they would be lost."""
    from cdc.apply.job import ApplyJob

    t = items("switch")
    s = Scenario(spark, kafka, tmp_path, t, table_type="merge-on-read", compaction_every="none")
    s.send(t, "c", {"id": 1, "name": "a", "qty": 1}, pg(10))
    s.send(t, "c", {"id": 2, "name": "b", "qty": 1}, pg(11))
    s.apply()
    s.send(t, "u", {"id": 1, "name": "logged", "qty": 2}, pg(20))
    s.send(t, "d", {"id": 2, "name": "b", "qty": 1}, pg(21))
    (logged,) = s.apply()
    assert logged.totals.logged == 2
    s.job = ApplyJob(spark, s.cfg.with_overrides(table_type="copy-on-write"))
    s.send(t, "c", {"id": 3, "name": "c", "qty": 3}, pg(30))
    (report,) = s.apply()
    assert report.totals.compactions == 1 and report.totals.inserted == 1
    assert s.rows(t) == [{"id": 1, "name": "logged", "qty": 2}, {"id": 3, "name": "c", "qty": 3}]
    assert [d["id"] for d in s.deleted_keys(t)] == [2]
    assert spark.read.format("delta").load(s.cfg.changes_location(s.name(t))).count() == 0


def test_a_batch_logged_during_an_on_demand_compaction_is_not_lost(
    spark: Any, kafka: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--compact`` beside a running job: the job logs a batch after the compaction read the
    log and MERGEd it, before the log is emptied. That batch was not merged and its offsets
    are committed, so emptying the whole log would lose it; only what the compaction read
    may go."""
    from cdc.apply.job import ApplyJob

    t = items("beside")
    s = Scenario(spark, kafka, tmp_path, t, table_type="merge-on-read", compaction_every="none")
    s.send(t, "c", {"id": 1, "name": "a", "qty": 1}, pg(10))
    s.apply()
    s.send(t, "u", {"id": 1, "name": "b", "qty": 2}, pg(20))
    s.apply()
    real_sql = spark.sql
    landed: list[int] = []

    def a_batch_lands_first(query: str, *a: Any, **kw: Any) -> Any:
        if query.startswith("DELETE FROM") and "_tidemark/changes" in query:
            monkeypatch.setattr(spark, "sql", real_sql)
            s.send(t, "u", {"id": 1, "name": "c", "qty": 3}, pg(30))
            s.send(t, "c", {"id": 2, "name": "d", "qty": 4}, pg(31))
            (report,) = s.apply()
            landed.append(report.totals.logged)
        return real_sql(query, *a, **kw)

    monkeypatch.setattr(spark, "sql", a_batch_lands_first)
    (counts,) = ApplyJob(spark, s.cfg).compact_all().values()  # the on-demand process
    monkeypatch.setattr(spark, "sql", real_sql)
    assert landed == [2] and counts.updated == 1
    assert s.rows(t) == [{"id": 1, "name": "b", "qty": 2}]  # what the compaction read
    current = [{"id": 1, "name": "c", "qty": 3}, {"id": 2, "name": "d", "qty": 4}]
    view = s.job.read_table(s.name(t)).collect()
    plain = [{k: v for k, v in r.asDict().items() if not k.startswith("__")} for r in view]
    assert sorted(plain, key=by_id) == current  # the real-time view has the batch
    s.job.compact_all()
    assert s.rows(t) == current
