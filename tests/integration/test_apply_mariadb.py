"""End to end from MariaDB into Delta: tidemark's MariaDB connector and Debezium's own (3.6, in
Debezium Server) capture the same table while it is written to, each into its own topic; the
apply job merges each topic into its own Delta table, and both must then equal the MariaDB
table row for row.

The table holds the MySQL types whose encodings differ most on the way: ``decimal`` (Connect
Decimal bytes), ``datetime(3)`` (Debezium Timestamp, ms), ``timestamp(6)`` (ZonedTimestamp
text), ``date``, ``time(3)`` (MicroTime), ``year``, ``enum``, ``set``, ``json``, an unsigned
``bigint`` beyond the signed range (``bigint.unsigned.handling.mode=precise`` on both: the
default, ``long``, wraps it as Java's long does), ``varbinary``,
``tinyint(1)`` and ``double``. Writes: the snapshot of 40 rows, inserts, updates, updates to
NULL, deletes, a primary-key change, and a row deleted and inserted again in one
transaction; the binlog positions order them (file index, position, row).

Never skipped: if Debezium Server or its Java runtime cannot be resolved, the test fails.
"""

from __future__ import annotations

import datetime as dt
import decimal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from bench.compare import debezium
from bench.compare.common import stop_process
from cdc.apply.job import ApplyJob
from tests.integration.conftest import MySqlInfo
from tests.integration.debezium_server import debezium_server
from tests.integration.mysql_harness import (
    MySqlHarness,
    debezium_mariadb_properties,
    module_harness,
)
from tests.integration.test_apply_acceptance import job_config
from tests.integration.test_apply_postgres import wait_for_key

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.mariadb]

TABLE = (
    "CREATE TABLE items (id int PRIMARY KEY, name varchar(40), price decimal(10,2), "
    "qty smallint unsigned, big bigint unsigned, ratio double, born date, at datetime(3), "
    "seen timestamp(6) NULL DEFAULT NULL, dur time(3), yr year, state enum('new','done'), "
    "tags set('a','b','c'), doc json, raw varbinary(16), flag tinyint(1))"
)
COLUMNS = "id, name, price, qty, big, ratio, born, at, seen, dur, yr, state, tags, doc, raw, flag"


def _row(i: int) -> str:
    return (
        f"({i}, 'n{i}', {i}.25, {i * 7}, {18446744073709551000 + i}, {i / 3}, "
        f"'2000-01-01' + INTERVAL {i} DAY, '2020-02-03 04:05:06.789' + INTERVAL {i} HOUR, "
        f"'2021-06-01 12:00:00.123456' + INTERVAL {i} MINUTE, '-01:02:03.456', {1990 + i}, "
        f"'{('new', 'done')[i % 2]}', '{('a', 'a,c', '')[i % 3]}', '{{\"g\": {i}}}', "
        f"UNHEX(MD5('{i}')), {i % 2})"
    )


@pytest.fixture(scope="module")
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    yield from module_harness(mariadb, kafka, tmp_path_factory, "apmaria")


def source_rows(h: MySqlHarness) -> list[dict[str, Any]]:
    """The table as the lake holds it: the session is in UTC (timestamps read as UTC), a
    ``time`` is microseconds (Debezium MicroTime), a ``set`` its text, ``json`` parsed."""
    names = [c.strip() for c in COLUMNS.split(",")]
    rows = h.sql(
        "SET time_zone = '+00:00'",
        f"SELECT {COLUMNS}, CAST(tags AS CHAR) FROM items ORDER BY id",
    )
    out = []
    for r in rows:
        d = dict(zip(names, r[:-1], strict=True))
        d["tags"] = r[-1]
        d["dur"] = None if d["dur"] is None else d["dur"] // dt.timedelta(microseconds=1)
        d["doc"] = None if d["doc"] is None else orjson.loads(d["doc"])
        d["big"] = None if d["big"] is None else decimal.Decimal(d["big"])
        out.append(d)
    return out


def lake_rows(spark: Any, path: str) -> list[dict[str, Any]]:
    out = []
    for r in spark.read.format("delta").load(path).orderBy("id").collect():
        d = {k: v for k, v in r.asDict(recursive=True).items() if not k.startswith("__")}
        d["raw"] = None if d["raw"] is None else bytes(d["raw"])
        d["doc"] = None if d["doc"] is None else orjson.loads(d["doc"])
        if isinstance(d["seen"], dt.datetime) and d["seen"].tzinfo is not None:
            d["seen"] = d["seen"].astimezone(dt.UTC).replace(tzinfo=None)
        if d["big"] is not None:
            d["big"] = decimal.Decimal(d["big"])
        out.append(d)
    return out


def writes(h: MySqlHarness) -> None:
    h.sql(
        f"INSERT INTO items ({COLUMNS}) VALUES " + ", ".join(_row(i) for i in range(100, 110)),
        "UPDATE items SET name = 'renamed', price = price * 2, tags = 'b,c' WHERE id % 5 = 0",
        "UPDATE items SET seen = NULL, doc = NULL, raw = NULL, dur = '838:59:59' WHERE id = 3",
        "DELETE FROM items WHERE id IN (4, 7, 104)",
        "UPDATE items SET id = 9000 WHERE id = 8",  # a primary-key change
        "UPDATE items SET yr = 2155, qty = 65535, flag = NULL WHERE id = 101",
    )
    conn = h.connect()
    try:
        with conn.cursor() as cur:  # one transaction: the row deleted and inserted again
            cur.execute("BEGIN")
            cur.execute("DELETE FROM items WHERE id = 10")
            cur.execute(f"INSERT INTO items ({COLUMNS}) VALUES {_row(10)}")
            cur.execute("UPDATE items SET name = 'again' WHERE id = 10")
            cur.execute("COMMIT")
    finally:
        conn.close()
    h.sql("INSERT INTO items (id, name) VALUES (0, 'sentinel')")


def test_mariadb_topics_of_tidemark_and_debezium_apply_into_equal_delta_tables(
    h: MySqlHarness, kafka: str, spark: Any, tmp_path: Path
) -> None:
    home, java = debezium_server()
    h.sql(
        TABLE, f"INSERT INTO items ({COLUMNS}) VALUES " + ", ".join(_row(i) for i in range(1, 41))
    )
    tag = uuid.uuid4().hex[:6]
    dbz_prefix = f"dbzap{tag}"
    # both: unsigned bigint as a decimal (the default, long, wraps it into a negative number)
    cfg = h.config(snapshot_mode="initial", bigint_unsigned_handling_mode="precise")
    topics = {"tidemark": h.topic(cfg, "items"), "debezium": f"{dbz_prefix}.{h.dbname}.items"}
    admin = AdminClient({"bootstrap.servers": kafka})
    for fut in admin.create_topics([NewTopic(t, 1, 1) for t in topics.values()]).values():
        fut.result(30)
    workdir = tmp_path / "debezium"
    props = debezium_mariadb_properties(h, kafka, workdir, dbz_prefix, "initial")
    props["debezium.source.bigint.unsigned.handling.mode"] = "precise"
    run = debezium.start(home, java, workdir, props)
    try:
        with h.running(cfg) as tm:
            h.wait_streaming(tm)
            wait_for_key(kafka, topics["debezium"], {"id": 40}, timeout=120)  # its snapshot
            deadline = time.monotonic() + 120
            while "Connected to binlog" not in run.log_tail(400):  # it streams
                assert run.proc.poll() is None, run.log_tail(60)
                assert time.monotonic() < deadline, run.log_tail(60)
                time.sleep(0.5)
            writes(h)
            for topic in topics.values():
                wait_for_key(kafka, topic, {"id": 0}, timeout=120)
            assert not tm.errors, tm.errors
    except BaseException:
        print(run.log_tail(60))
        raise
    finally:
        stop_process(run.proc, timeout=60)
        run.log.close()

    expected = source_rows(h)
    assert len(expected) == 40 + 10 - 3 + 1 and expected[0]["name"] == "sentinel"
    for side, topic in topics.items():
        job_cfg = job_config(kafka, tmp_path / side, [topic])
        job = ApplyJob(spark, job_cfg)
        job.run(timeout=240)
        assert sum(r.errors for r in job.reports) == 0, side
        got = lake_rows(spark, job_cfg.table_location(topic.replace(".", "_")))
        assert [r["id"] for r in got] == [r["id"] for r in expected], side
        for e, g in zip(expected, got, strict=True):
            assert g == e, f"{side}: row {e['id']} differs"
