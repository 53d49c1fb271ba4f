"""tidemark's topics feed Debezium's JDBC sink connector as Debezium's own do.

Users coming from Debezium often keep their sinks. Here one real Kafka Connect worker runs
Debezium's PostgreSQL connector and Debezium's JDBC sink; a ``tidemark run`` worker captures
the same table. Each topic goes through its own JDBC sink into its own PostgreSQL database, and
the two resulting tables must be the same, column types and values: whatever the sink makes of
a type (it is lossy for some, e.g. ``money``, ``interval``, unconstrained ``numeric``), it makes
the same of tidemark's events. Both hold the source's rows after a snapshot, updates, a primary
key change and a delete."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.integration import pg_cleanup
from tests.integration.conftest import PgInfo
from tests.integration.kafka_connect import (
    KafkaConnectWorker,
    jdbc_sink_plugin_path,
    tidemark_worker,
)
from tests.integration.pg_harness import PgHarness

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

TABLE = """
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE t (
  id int PRIMARY KEY,
  c_small smallint, c_big bigint, c_num numeric(10,2), c_numfree numeric, c_real real,
  c_double double precision, c_bool boolean, c_text text, c_varchar varchar(20), c_char char(5),
  c_bytea bytea, c_date date, c_time time, c_timetz timetz, c_ts timestamp(6), c_tstz timestamptz,
  c_interval interval, c_uuid uuid, c_json json, c_jsonb jsonb, c_intarr int[], c_textarr text[],
  c_inet inet, c_mood mood, c_money money, c_ts3 timestamp(3), c_time0 time(0), c_bit bit(3),
  c_varbit varbit(8), c_xml xml
);
ALTER TABLE t REPLICA IDENTITY FULL;
"""
SNAPSHOT_ROWS = """
INSERT INTO t VALUES (1, 1, 9007199254740993, 12345678.91, 3.14159265358979323846, 1.5,
  2.718281828459045, true, 'héllo ☃', 'vc', 'ab', '\\x00ff10', '2024-02-29', '13:45:59.123456',
  '13:45:59.5+02', '2024-02-29 13:45:59.123456', '2024-02-29 13:45:59.123456+05:30',
  '1 year 2 mons 3 days 04:05:06.789', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
  '{"a": [1, 2]}', '{"b": {"c": null}}', '{1,2,3}', '{"x","y z"}', '192.168.1.0/24', 'happy',
  12.34, '2024-01-01 00:00:00.123', '23:59:59', B'101', B'1101', '<a>1</a>');
INSERT INTO t (id) VALUES (2);
INSERT INTO t (id, c_num, c_numfree, c_date, c_ts, c_tstz, c_text) VALUES
  (3, -0.01, -1e-20, '0001-01-01', '1970-01-01 00:00:00', '1969-12-31 23:59:59.999999+00', '');
"""
STREAMED = (
    "INSERT INTO t (id, c_date, c_ts, c_tstz, c_num) VALUES "
    "(4, '9999-12-31', '9999-12-31 23:59:59.999999', '2262-04-11 23:47:16.854775+00', 99.99)",
    "UPDATE t SET c_text = 'updated', c_num = 0.5, c_jsonb = '[1, {\"k\": \"v\"}]' WHERE id = 1",
    "UPDATE t SET id = 20 WHERE id = 2",
    "DELETE FROM t WHERE id = 3",
)


def call(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            text = r.read().decode()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        return e.code, json.loads(text) if text else None


def tasks(base: str, name: str) -> list[dict[str, Any]]:
    """The connector's tasks from its status; none while the worker has no status for it yet
    (Kafka Connect answers 404 between a POST and the connector's start, more so under load)."""
    status, body = call(base, "GET", f"/connectors/{name}/status")
    return list(body.get("tasks") or []) if status == 200 and isinstance(body, dict) else []


def rows(pg: PgInfo, dbname: str) -> tuple[dict[str, str], list[tuple[Any, ...]]]:
    """The table's column types, and its rows with every value as PostgreSQL's text."""
    with psycopg.connect(pg.dsn(dbname), autocommit=True) as c:
        types = dict(
            c.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = 'public' AND table_name = 't'"
            ).fetchall()
        )
        if not types:
            return {}, []
        cols = ", ".join(f"{name}::text" for name in sorted(types))
        return types, c.execute(f"SELECT {cols} FROM t ORDER BY id").fetchall()


@pytest.fixture(scope="module")
def source(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    with PgHarness(postgres, kafka, "tmjs_" + uuid.uuid4().hex[:8]) as h:
        h.sql(TABLE, SNAPSHOT_ROWS)
        yield h


@pytest.fixture(scope="module")
def targets(postgres: PgInfo) -> Iterator[dict[str, str]]:
    names = {side: f"tmjt_{side}_{uuid.uuid4().hex[:8]}" for side in ("kc", "tm")}
    for name in names.values():
        pg_cleanup.create_database(postgres.dsn(), name)
    try:
        yield names
    finally:
        for name in names.values():
            pg_cleanup.drop_database(postgres.dsn(), name)


def test_the_jdbc_sink_writes_tidemark_s_events_as_debezium_s(
    source: PgHarness,
    targets: dict[str, str],
    kafka: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    pg = source.pg
    plugins = jdbc_sink_plugin_path()
    with (
        KafkaConnectWorker(kafka, tmp_path_factory.mktemp("kafka-connect"), plugins) as kc,
        tidemark_worker(kafka, tmp_path_factory.mktemp("tidemark")) as tm_url,
    ):
        urls = {"kc": kc.url, "tm": tm_url}
        prefix = {side: f"{side}{source.dbname}" for side in urls}
        for side, url in urls.items():
            config = {
                "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "database.hostname": pg.host,
                "database.port": str(pg.port),
                "database.user": pg.user,
                "database.password": pg.password,
                "database.dbname": source.dbname,
                "plugin.name": "pgoutput",
                "slot.name": f"{side}_{source.dbname}",
                "publication.name": f"{side}_{source.dbname}",
                "publication.autocreate.mode": "filtered",
                "topic.prefix": prefix[side],
                "table.include.list": "public.t",
            }
            status, body = call(url, "POST", "/connectors", {"name": "src", "config": config})
            assert status == 201, (side, body)
        try:
            deadline = time.monotonic() + 90
            while not all(
                [t["state"] for t in tasks(url, "src")] == ["RUNNING"] for url in urls.values()
            ):
                assert time.monotonic() < deadline, "the sources did not start"
                time.sleep(0.5)
            time.sleep(5)  # both snapshots done, both streaming
            source.sql(*STREAMED)
            for side in urls:
                sink = {
                    "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
                    "topics": f"{prefix[side]}.public.t",
                    "connection.url": f"jdbc:postgresql://{pg.host}:{pg.port}/{targets[side]}",
                    "connection.username": pg.user,
                    "connection.password": pg.password,
                    "insert.mode": "upsert",
                    "delete.enabled": "true",
                    "primary.key.mode": "record_key",
                    "schema.evolution": "basic",
                    "collection.name.format": "t",
                    "consumer.override.auto.offset.reset": "earliest",
                }
                status, body = call(
                    kc.url, "POST", "/connectors", {"name": f"sink-{side}", "config": sink}
                )
                assert status == 201, (side, body)

            expected_ids = [r[0] for r in source.sql("SELECT id::text FROM t ORDER BY id")]
            deadline = time.monotonic() + 90
            while True:
                written = {side: rows(pg, targets[side]) for side in urls}
                ids = {
                    side: [r[sorted(t).index("id")] for r in rs]
                    for side, (t, rs) in written.items()
                    if t
                }
                if ids.get("kc") == ids.get("tm") == expected_ids:
                    break
                for side in urls:
                    failed = [
                        t.get("trace", "")[:3000]
                        for t in tasks(kc.url, f"sink-{side}")
                        if t["state"] == "FAILED"
                    ]
                    assert not failed, f"sink of {side}'s topic failed: {failed[0]}"
                assert time.monotonic() < deadline, f"targets {ids}, source {expected_ids}"
                time.sleep(1)
            assert written["tm"][0] == written["kc"][0]  # the column types the sink chose
            assert written["tm"][1] == written["kc"][1]  # every value
            assert len(written["tm"][0]) == 31
        finally:
            for url in urls.values():
                call(url, "DELETE", "/connectors/src")
