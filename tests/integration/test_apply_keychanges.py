"""End to end: primary-key changes of rows whose out-of-line (TOASTed) columns are unchanged.

PostgreSQL with ``REPLICA IDENTITY DEFAULT`` does not send an unchanged TOASTed value, so the
create of the new key carries the unavailable-value placeholder. The real connector captures a
workload full of key changes (chains, reused old keys, updates after the change); its topic is
then copied, record for record with headers, into a 3-partition topic (keys routed by hash) in
three stages with replayed ranges spliced in, so that new keys' creates reach the apply job
batches (and job runs) before the old keys' deletes. The Delta table must end equal to the
source in every column, with no placeholder and no NULL at any stage, under the default
configuration (only small micro-batches)."""

from __future__ import annotations

import random
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cdc.apply.job import ApplyJob
from tests.integration.pg_harness import PgHarness
from tests.integration.test_apply_acceptance import job_config
from tests.integration.test_apply_postgres import h, wait_for_key

__all__ = ["h"]  # the fixture: one database per module (SparkSession: conftest.py)

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.postgres]

PH = "__debezium_unavailable_value"
PARTITIONS = 3
Headers = list[tuple[str, str | bytes | None]]
KafkaRecord = tuple[bytes | None, bytes | None, Headers]


def big_values(rng: random.Random) -> tuple[str, bytes, list[str]]:
    """Incompressible and > 2 kB each, so PostgreSQL stores them out of line."""
    return (
        rng.randbytes(1600).hex(),
        rng.randbytes(2500),
        [rng.randbytes(16).hex() for _ in range(100)],
    )


def workload(h: PgHarness, table: str, steps: int) -> dict[str, int]:
    rng = random.Random(23)
    live = [r[0] for r in h.sql(f"SELECT id FROM {table}")]
    freed: list[int] = []
    next_id = 100_000
    done = {"key_changes": 0, "chains": 0, "reused": 0}
    with psycopg.connect(h.pg.dsn(h.dbname), autocommit=True) as c:
        for _ in range(steps):
            r = rng.random()
            target = rng.choice(live)
            if r < 0.35:  # key change, TOASTed columns unchanged
                next_id += 1
                c.execute(
                    f"UPDATE {table} SET id = %s, name = name || '>' WHERE id = %s",
                    (next_id, target),
                )
                live[live.index(target)] = next_id
                freed.append(target)
                done["key_changes"] += 1
                done["chains"] += target >= 100_000
            elif r < 0.55:
                c.execute(f"UPDATE {table} SET name = name || '+' WHERE id = %s", (target,))
            elif r < 0.62:
                big, blob, notes = big_values(rng)
                c.execute(
                    f"UPDATE {table} SET big = %s, blob = %s, notes = %s WHERE id = %s",
                    (big, blob, notes, target),
                )
            elif r < 0.7 and len(live) > 20:
                c.execute(f"DELETE FROM {table} WHERE id = %s", (target,))
                live.remove(target)
                freed.append(target)
            else:
                if freed and rng.random() < 0.6:
                    new = freed.pop(rng.randrange(len(freed)))  # an old key lives again
                    done["reused"] += 1
                else:
                    next_id += 1
                    new = next_id
                c.execute(
                    f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s)",
                    (new, f"n{new}", *big_values(rng)),
                )
                live.append(new)
    return done


def problems(row: tuple[Any, ...]) -> list[str]:
    """Columns of a Delta row holding NULL or a placeholder (the source has neither)."""
    names = ("id", "name", "big", "blob", "notes")
    out = [n for n, v in zip(names, row, strict=True) if v is None]
    out += [n for n, v in zip(names[1:3], row[1:3], strict=True) if v == PH]
    out += ["blob"] if row[3] is not None and PH.encode() in row[3] else []
    out += ["notes"] if row[4] == [PH] else []
    return out


def read_all(kafka: str, topic: str) -> list[KafkaRecord]:
    consumer = Consumer(
        {"bootstrap.servers": kafka, "group.id": uuid.uuid4().hex, "enable.auto.commit": False}
    )
    tp = TopicPartition(topic, 0, 0)
    _, high = consumer.get_watermark_offsets(tp, timeout=10)
    consumer.assign([tp])
    out: list[KafkaRecord] = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < high and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            headers: Any = msg.headers() or []
            out.append((msg.key(), msg.value(), list(headers)))
    finally:
        consumer.close()
    assert len(out) == high
    return out


def pg_rows(h: PgHarness, table: str) -> list[tuple[Any, ...]]:
    rows = h.sql(f"SELECT id, name, big, blob, notes FROM {table} ORDER BY id")
    return [(i, n, b, _bytes(bl), _list(no)) for i, n, b, bl, no in rows]


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _list(value: Any) -> list[Any] | None:
    return None if value is None else list(value)


def delta_rows(spark: Any, path: str) -> list[tuple[Any, ...]]:
    df = spark.read.format("delta").load(path).orderBy("id")
    return [
        (r["id"], r["name"], r["big"], _bytes(r["blob"]), _list(r["notes"]))
        for r in df.select("id", "name", "big", "blob", "notes").collect()
    ]


def test_key_changes_of_toasted_rows_across_lagging_partitions_replays_and_restarts(
    h: PgHarness, spark: Any, tmp_path: Path
) -> None:
    table = "docs"
    h.sql(
        f"CREATE TABLE {table} (id int PRIMARY KEY, name text NOT NULL, big text, blob bytea, "
        "notes text[])",
        *[f"ALTER TABLE {table} ALTER COLUMN {c} SET STORAGE EXTERNAL" for c in ("big", "blob")],
    )
    rng = random.Random(5)
    with psycopg.connect(h.pg.dsn(h.dbname), autocommit=True) as c, c.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s)",
            [(i, f"n{i}", *big_values(rng)) for i in range(1, 81)],
        )
    assert h.sql(f"SELECT count(*) FROM {table} WHERE pg_column_size(big) < octet_length(big)") == [
        (0,)
    ]  # stored uncompressed, out of line
    cfg = h.config(table_include_list=f"public.{table}")
    source = h.topic(cfg, table)
    with h.running(cfg) as run:
        h.wait_streaming(run, timeout=60)
        done = workload(h, table, 260)
        h.sql(f"INSERT INTO {table} (id, name) VALUES (0, 'sentinel')")
        wait_for_key(h.kafka, source, {"id": 0})
    h.drop_slot(cfg)
    assert done["key_changes"] > 50 and done["chains"] > 5 and done["reused"] > 5, done
    records = read_all(h.kafka, source)
    assert any(PH.encode() in (v or b"") for _, v, hs in records if hs), "no placeholders"

    # The copy: 3 partitions, keys routed by hash; partition 0 lags behind the others.
    topic = f"kc_{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": h.kafka})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[
        topic
    ].result(30)
    parts: list[list[KafkaRecord]] = [[] for _ in range(PARTITIONS)]
    for rec in records:
        parts[zlib.crc32(rec[0] or b"") % PARTITIONS].append(rec)
    # Idempotent, as the connector's producer is: a plain producer may reorder a partition when
    # it retries a request (the topic is brand new), and the handover relies on Kafka's order
    # per key as much as any consumer does.
    producer = Producer({"bootstrap.servers": h.kafka, "linger.ms": 5, "enable.idempotence": True})

    def produce(partition: int, recs: list[KafkaRecord]) -> None:
        for key, value, headers in recs:
            producer.produce(topic, value, key, partition=partition, headers=headers)
        assert producer.flush(60) == 0, "the copy was not acknowledged"

    job_cfg = job_config(h.kafka, tmp_path, [topic], kafka_max_offsets_per_trigger=120)
    path = job_cfg.table_location(topic)
    third = len(parts[0]) // 3
    stages = [
        [(1, parts[1]), (2, parts[2]), (0, parts[0][:third])],
        [(0, parts[0][third:]), (1, parts[1][10:90]), (2, parts[2][:40])],  # + replays
        [(0, parts[0][third - 30 : third + 90]), (1, parts[1][:50])],  # replays
    ]
    held: list[int] = []  # rows held when each job run ended
    filled = 0
    for stage in stages:
        for partition, recs in stage:
            produce(partition, recs)
        job = ApplyJob(spark, job_cfg)  # a new job each stage: restarted from its checkpoint
        job.run(timeout=600)
        assert sum(r.errors for r in job.reports) == 0
        held.append(sum(c.held for c in job.reports[-1].tables.values()))
        filled += sum(c.filled for r in job.reports for c in r.tables.values())
        got = delta_rows(spark, path)
        print("\n".join(r.line() for r in job.reports))
        assert [(r[0], problems(r)) for r in got if r[0] and problems(r)] == []
    # The lag was really there: rows waited for their old keys across a job restart.
    assert held[0] > 0 and held[-1] == 0 and filled > 0, (held, filled)
    expected = pg_rows(h, table)
    got = delta_rows(spark, path)
    assert [r[0] for r in got] == [r[0] for r in expected]
    for e, g in zip(expected, got, strict=True):
        assert g == e, f"row {e[0]} differs"
