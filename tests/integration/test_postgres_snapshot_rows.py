"""The snapshot's row readers (``snapshot_rows.text_batches``: a SELECT in libpq's chunked rows
mode, every column loaded as text; ``text_rows`` for an incremental snapshot's chunk) give
exactly the values ``COPY ... TO STDOUT`` gave, the reader they replace: every type family
tidemark maps, NULLs, unicode, escapes, extreme values, a select override with repeated column
names, the resume query, and batch boundaries."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from connectors.postgres import connection as pgconn
from connectors.postgres import snapshot_rows
from tests.integration import pg_cleanup
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness, read_topic

pytestmark = [pytest.mark.postgres]

DDL = [
    "CREATE EXTENSION IF NOT EXISTS hstore",
    "CREATE EXTENSION IF NOT EXISTS ltree",
    "CREATE EXTENSION IF NOT EXISTS citext",
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'hap\"py')",
    "CREATE DOMAIN posint AS int CHECK (VALUE > 0)",
    "CREATE TYPE pair AS (a int, b text)",
    """CREATE TABLE t (
        id bigint PRIMARY KEY, sm smallint, i int, bi bigint, re real, dp float8,
        n numeric, n2 numeric(12,2), money money, bo boolean,
        tx text, vc varchar(20), ch char(4), ci citext, by bytea,
        ts timestamp, tstz timestamptz, d date, tm time, ttz timetz, iv interval,
        j json, jb jsonb, x xml, u uuid, inet inet, cidr cidr, mac macaddr,
        bits bit(5), vb varbit, ia int[], ta text[], da date[], ia2 int[][],
        hs hstore, lt ltree, r int4range, tr tstzrange, pt point, ln line, bx box,
        tsv tsvector, m mood, p posint, pr pair, oid_ oid)""",
    """INSERT INTO t VALUES
      (1, -32768, -2147483648, -9223372036854775808, 'NaN', '-Infinity',
       '-1234567890123456789012345678901234567890.000000000000000000001', 0.01, -12.34, false,
       E'tab\\there\\nnewline\\r\\\\back \\\\N ünïcödé 😀 \\u00a0', 'v', 'ab', 'MiXeD',
       E'\\\\x00ff5c0a09', '-infinity', 'infinity', '-infinity', '24:00:00',
       '23:59:59.999999-15:59',
       '-178000000 years', '{"a": "x\\ty", "b": [1, null]}', '{"é": "\\\\N", "k": [1.5e300]}',
       '<a x="1">&amp;</a>', '00000000-0000-0000-0000-000000000000', '::1', '10.0.0.0/8',
       '08:00:2b:01:02:03', B'10101', B'', '{1,NULL,-3}', '{"a,b","c\\"d",NULL,"NULL","",
       "\\\\"}', '{infinity,2024-02-29}', '{{1,2},{3,4}}', 'a=>1, "b c"=>NULL, "\\"q"=>"\\\\"',
       'top.mid.leaf', 'empty', '[2024-01-01 00:00:00+00,infinity)', '(1.5,-2e-300)',
       '{1,-1,0}', '((0,0),(1,1))', 'fat:1A cat:2B', 'hap"py', 1, '(1,"x y")', 4294967295),
      (2, 32767, 2147483647, 9223372036854775807, 3.4e38, 1.7976931348623157e308,
       'NaN', 9999999999.99, 92233720368547758.07, true,
       '', '', '', '', '', '294276-12-31 23:59:59.999999', '4713-01-01 00:00:00+00 BC',
       '5874897-12-31', '00:00', '00:00+15:59', '1 mon -1 day 00:00:00.000001',
       'null', '[]', '', 'ffffffff-ffff-ffff-ffff-ffffffffffff', '2001:db8::/32', '::/0',
       'ff:ff:ff:ff:ff:ff', B'00000', B'1', '{}', '{}', '{}', '{}', '', '', '(,)', 'empty',
       '(0,0)', '{0,1,0}', '((1,1),(1,1))', '', 'sad', 2147483647, '(,)', 0)""",
    "INSERT INTO t (id) SELECT g FROM generate_series(3, 2500) g",  # all NULL but the key
    "UPDATE t SET tx = repeat('long text ', 100000) WHERE id = 3",  # TOASTed
]


@pytest.fixture(scope="module")
def conn(postgres: PgInfo) -> Iterator[psycopg.Connection[Any]]:
    name = f"tm_snaprows_{uuid.uuid4().hex[:8]}"
    pg_cleanup.create_database(postgres.dsn("postgres"), name)
    try:
        with psycopg.connect(postgres.dsn(name), autocommit=True) as setup:
            for stmt in DDL:
                setup.execute(stmt)
        with psycopg.connect(postgres.dsn(name)) as c:
            c.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield c
    finally:
        pg_cleanup.drop_database(postgres.dsn("postgres"), name)


def ncols(conn: psycopg.Connection[Any], query: sql.Composable) -> int:
    cur = conn.execute(sql.SQL("SELECT * FROM ({}) q LIMIT 0").format(query))
    return len(cur.description or ())


QUERIES = {
    "key order": sql.SQL("SELECT * FROM t ORDER BY id"),
    "resume": sql.SQL("SELECT * FROM t WHERE (id) > ({}) ORDER BY id").format(sql.Literal("1")),
    "override": sql.SQL("SELECT a.id, a.tx, b.id, b.jb FROM t a JOIN t b ON a.id = 3 - b.id"),
}


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_same_values_as_copy(conn: psycopg.Connection[Any], name: str) -> None:
    query = QUERIES[name]
    n = ncols(conn, query)
    want = list(pgconn.copy_rows(conn, query, n))
    batches = list(snapshot_rows.text_batches(conn, query, n, size=1024))
    got = [row for batch in batches for row in batch]
    assert got == want
    assert snapshot_rows.text_rows(conn, query) == want  # the incremental snapshot's chunks
    assert all(type(v) is str for row in got for v in row if v is not None)
    if name == "key order":
        assert [len(b) for b in batches] == [1024, 1024, 452]
        assert got[0][14] == "\\x00ff5c0a09" and got[1][14] == "\\x"  # bytea as text
        assert len(got[2][10]) == 1_000_000 and got[3][10] is None and len(got[3]) == 46


def test_without_chunked_rows_mode_copy_is_used(
    conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    query = QUERIES["key order"]
    n = ncols(conn, query)
    want = [row for batch in snapshot_rows.text_batches(conn, query, n, 1000) for row in batch]
    monkeypatch.setattr(snapshot_rows.capabilities, "has_stream_chunked", lambda: False)
    batches = list(snapshot_rows.text_batches(conn, query, n, 1000))
    assert [len(b) for b in batches] == [1000, 1000, 500]
    assert [row for batch in batches for row in batch] == want


def test_closed_early_leaves_the_connection_usable(conn: psycopg.Connection[Any]) -> None:
    """A stop in the middle of a table closes the reader: the query is cancelled."""
    query = QUERIES["key order"]
    batches = snapshot_rows.text_batches(conn, query, ncols(conn, query), 100)
    assert len(next(batches)) == 100
    batches.close()
    conn.rollback()
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (2500,)


@pytest.mark.kafka
def test_snapshot_through_kafka_keeps_order_and_markers(postgres: PgInfo, kafka: str) -> None:
    """Through the engine, with records handed to the queue in runs and a chunk wait every
    1,024 rows: every row once, in key order, and the 3.x snapshot markers where Debezium
    puts them (``first``, ``last_in_data_collection``, ``last`` on the very last record)."""
    h = PgHarness(postgres, kafka, f"tm_snaprows_k_{uuid.uuid4().hex[:8]}")
    try:
        h.sql(
            "CREATE TABLE a (id int PRIMARY KEY, v text)",
            "CREATE TABLE b (id int PRIMARY KEY, v text)",
            "INSERT INTO a SELECT g, 'a' || g FROM generate_series(3, 1, -1) g",
            "INSERT INTO b SELECT g, 'b' || g FROM generate_series(2600, 1, -1) g",
        )
        cfg = h.config(
            table_include_list="public.a,public.b",
            snapshot_mode="initial_only",
            envelope_version="3",
        )
        cfg["snapshot.resumable.chunk.size"] = "1024"
        with h.running(cfg) as run:
            a = read_topic(kafka, h.topic(cfg, "a"), min_count=3)
            b = read_topic(kafka, h.topic(cfg, "b"), min_count=2600)
        assert run.errors == []
        assert [e.after["id"] for e in a] == [1, 2, 3]
        assert [e.after["id"] for e in b] == list(range(1, 2601))
        marks = [e.value["source"]["snapshot"] for e in a + b]
        in_a = ["first", "true", "last_in_data_collection"]
        assert marks == [*in_a, "first_in_data_collection", *["true"] * 2598, "last"]
    finally:
        h.dispose()
