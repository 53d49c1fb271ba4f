"""End to end: the real PostgreSQL connector snapshots and streams a table while it is being
written to; the apply job catches up; the Delta table then equals the PostgreSQL table, row for
row and column for column (including unchanged TOASTed values sent as placeholders)."""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import threading
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition

from cdc.apply.job import ApplyJob
from cdc.converters.avro_json import RegistrySettings, decoder
from cdc.converters.registry_server import RegistryServer
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness
from tests.integration.test_apply_acceptance import job_config

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.postgres]


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    with PgHarness(postgres, kafka, f"ap_{uuid.uuid4().hex[:8]}") as harness:
        yield harness


COLUMNS = (
    "id int PRIMARY KEY, name text NOT NULL, balance numeric(12,2), updated timestamp, "
    "seen timestamptz, born date, active boolean, raw bytea, doc jsonb, tags int[], big text"
)


class Writer(threading.Thread):
    """Random inserts, updates (mostly leaving the TOASTed ``big`` untouched) and deletes."""

    def __init__(self, h: PgHarness, table: str, first_new_id: int) -> None:
        super().__init__(daemon=True)
        self.h = h
        self.table = table
        self.next_id = first_new_id
        self.stop_event = threading.Event()
        self.ops = 0
        self.error: BaseException | None = None
        self.rng = random.Random(7)

    def run(self) -> None:
        try:
            with psycopg.connect(self.h.pg.dsn(self.h.dbname), autocommit=True) as c:
                while not self.stop_event.is_set():
                    self.step(c)
                    self.ops += 1
                    time.sleep(0.02)
        except BaseException as exc:
            self.error = exc

    def step(self, c: Any) -> None:
        r = self.rng.random()
        ids = [
            row[0]
            for row in c.execute(f"SELECT id FROM {self.table} TABLESAMPLE SYSTEM (20) LIMIT 5")
        ]
        target = self.rng.choice(ids) if ids else None
        if r < 0.3 or target is None:
            self.next_id += 1
            c.execute(
                f"INSERT INTO {self.table} VALUES (%s, %s, %s, now()::timestamp, now(), "
                "current_date, true, %s, %s, %s, %s)",
                (
                    self.next_id,
                    f"new{self.next_id}",
                    Decimal(self.next_id) / 4,
                    bytes([self.next_id % 256, 1]),
                    orjson.dumps({"n": self.next_id}).decode(),
                    [self.next_id, None],
                    uuid.uuid4().hex * 300,
                ),
            )
        elif r < 0.8:
            c.execute(
                f"UPDATE {self.table} SET name = name || '+', balance = balance + 1, "
                "active = NOT active, updated = now()::timestamp WHERE id = %s",
                (target,),
            )
        elif r < 0.88:
            c.execute(
                f"UPDATE {self.table} SET big = %s WHERE id = %s", (uuid.uuid4().hex * 200, target)
            )
        else:
            c.execute(f"DELETE FROM {self.table} WHERE id = %s", (target,))


def wait_for_key(
    kafka: str, topic: str, key: dict[str, Any], timeout: float = 60, registry: str | None = None
) -> None:
    consumer = Consumer(
        {"bootstrap.servers": kafka, "group.id": uuid.uuid4().hex, "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None or msg.key() is None:
                continue
            raw = msg.key() or b"null"
            if registry is not None:
                raw = decoder(RegistrySettings(registry)).to_json(topic, raw, is_key=True)
            doc = orjson.loads(raw)
            if doc.get("payload", doc) == key:
                return
        raise AssertionError(f"{key} did not reach {topic}")
    finally:
        consumer.close()


def pg_rows(h: PgHarness, table: str) -> list[dict[str, Any]]:
    with psycopg.connect(h.pg.dsn(h.dbname)) as c:
        cur = c.execute(f"SELECT * FROM {table} ORDER BY id")  # type: ignore[arg-type]
        names = [d.name for d in cur.description or []]
        out = []
        for row in cur.fetchall():
            d = dict(zip(names, row, strict=True))
            if d["seen"] is not None:
                d["seen"] = d["seen"].astimezone(dt.UTC).replace(tzinfo=None)
            d["raw"] = bytes(d["raw"]) if d["raw"] is not None else None
            out.append(d)
        return out


def delta_rows(spark: Any, path: str) -> list[dict[str, Any]]:
    out = []
    for r in spark.read.format("delta").load(path).orderBy("id").collect():
        d = {k: v for k, v in r.asDict(recursive=True).items() if not k.startswith("__")}
        d["raw"] = bytes(d["raw"]) if d["raw"] is not None else None
        d["doc"] = orjson.loads(d["doc"]) if d["doc"] is not None else None
        out.append(d)
    return out


@pytest.mark.parametrize("fmt", ["json", "avro"])
def test_postgres_snapshot_and_streaming_under_writes_end_equal(
    h: PgHarness, spark: Any, tmp_path: Path, fmt: str
) -> None:
    """``avro``: the connector writes Avro through the schema registry stand-in (Confluent
    wire format) and the job reads it back through the same registry."""
    table = f"acct_{fmt}"
    h.sql(
        f"CREATE TABLE {table} ({COLUMNS})",
        f"ALTER TABLE {table} ALTER COLUMN big SET STORAGE EXTERNAL",  # always TOASTed
        f"INSERT INTO {table} SELECT g, 'n' || g, g * 1.5, '2020-01-01'::timestamp + g * "
        "interval '1 hour', '2021-06-01 12:00:00+02'::timestamptz + g * interval '1 minute', "
        "'2000-01-01'::date + g, g % 2 = 0, decode(md5(g::text), 'hex'), "
        "jsonb_build_object('g', g), ARRAY[g, g + 1], repeat(md5(g::text), 100) "
        "FROM generate_series(1, 300) g",
    )
    cfg = h.config(table_include_list=f"public.{table}")
    job_extra: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        if fmt == "avro":
            registry = stack.enter_context(RegistryServer())
            for side in ("key", "value"):
                cfg[f"{side}.converter"] = "io.confluent.connect.avro.AvroConverter"
                cfg[f"{side}.converter.schema.registry.url"] = registry.url
            job_extra = {"input.format": "avro", "schema.registry.url": registry.url}
        topic = h.topic(cfg, table)
        job_cfg = job_config(
            h.kafka, tmp_path, [topic], kafka_max_offsets_per_trigger=1000, **job_extra
        )
        job = ApplyJob(spark, job_cfg)
        writer = Writer(h, table, first_new_id=10_000)
        writer.start()  # writes run through the snapshot and the switch to streaming
        try:
            with h.running(cfg) as run:
                h.wait_streaming(run, timeout=60)
                time.sleep(1.5)
                job.run(timeout=240)  # catches up with whatever is there, while writes go on
                time.sleep(1.5)
                writer.stop_event.set()
                writer.join(30)
                assert writer.error is None, writer.error
                h.sql(f"INSERT INTO {table} (id, name) VALUES (0, 'sentinel')")
                wait_for_key(h.kafka, topic, {"id": 0}, registry=job_cfg.registry_url)
        finally:
            writer.stop_event.set()
        job.run(timeout=240)
    print("\n".join(r.line() for r in job.reports), f"\nwriter ops: {writer.ops}")
    assert writer.ops > 50
    assert len(job.reports) >= 2
    assert sum(r.errors for r in job.reports) == 0
    expected = pg_rows(h, table)
    got = delta_rows(spark, job_cfg.table_location(topic.replace(".", "_")))
    assert len(got) == len(expected)
    for e, g in zip(expected, got, strict=True):
        assert g == e, f"row {e['id']} differs"
    # The TOASTed column reached the table through placeholders too.
    assert all(r["big"] is not None and len(r["big"]) > 2000 for r in got if r["id"] != 0)
