"""`tidemark verify` on a large table against a full ``EXCEPT`` comparison (on demand, not CI).

    .venv/bin/tidemark dev up postgres kafka
    .venv/bin/python -m bench.verify_bench [--rows 1000000]

A PostgreSQL table of N rows and a topic holding one event per row (written directly, in the
connector's schemaless JSON form) are made equal, then three faults are injected: an event for
a key that does not exist (extra), an older version after the newest (stale), a tombstone
(missing). Reported: the time of ``verify`` (chunk checksums in SQL, topic read in Python,
drill-down) and of ``SELECT ... EXCEPT`` both ways between the table and a copy holding the
downstream state, which is what hand-written reconciliation does. Each is reported as wall
time and CPU seconds: this process and its children (the topic readers) and, for the SQL,
the PostgreSQL backend serving the connection (read from /proc: the database must be local).
``--processes`` sets how many processes share the first read of the topic (1: in-process).
"""

from __future__ import annotations

import argparse
import os
import resource
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
import psycopg
from confluent_kafka import Producer

from cdc.verify.canonical import ColumnSpec, TableSpec
from cdc.verify.compare import Options
from cdc.verify.kafka_target import KafkaTarget
from cdc.verify.sql_side import SqlSourceSide
from connectors.postgres.verify import PostgresDialect
from worker.verify_cli import verify

DSN = "host=127.0.0.1 port=15432 user=postgres password=postgres dbname=postgres"
KAFKA = "127.0.0.1:19092"
T = TypeVar("T")


def own_cpu() -> float:
    """CPU seconds of this process and its finished children."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def backend_cpu(conn: psycopg.Connection[Any]) -> float:
    """CPU seconds of the PostgreSQL backend process serving ``conn`` (local server)."""
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    with open(f"/proc/{row[0]}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(label: str, fn: Callable[[], T], conns: tuple[psycopg.Connection[Any], ...] = ()) -> T:
    t0, c0 = time.monotonic(), own_cpu()
    b0 = [backend_cpu(c) for c in conns]
    out = fn()
    pg = sum(backend_cpu(c) - b for c, b in zip(conns, b0, strict=True))
    print(
        f"{label}: {time.monotonic() - t0:.1f}s wall, CPU {own_cpu() - c0:.1f}s "
        f"(python) + {pg:.1f}s (postgres)"
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--processes", type=int, default=None)
    args = ap.parse_args()
    n = args.rows
    name = f"vbench_{uuid.uuid4().hex[:8]}"
    topic = f"{name}.public.t"
    conn = psycopg.connect(DSN, autocommit=True)
    conn.execute(f"CREATE TABLE {name} (id bigint PRIMARY KEY, name text, qty int)")
    conn.execute(
        f"INSERT INTO {name} SELECT g, 'name ' || g, g % 1000 FROM generate_series(1, {n}) g"
    )
    producer = Producer({"bootstrap.servers": KAFKA, "linger.ms": 50})
    t0 = time.monotonic()
    for i in range(1, n + 1):
        row = {"id": i, "name": f"name {i}", "qty": i % 1000}
        producer.produce(
            topic, key=orjson.dumps({"id": i}), value=orjson.dumps({"op": "r", "after": row})
        )
        if i % 100_000 == 0:
            producer.flush()
    producer.produce(topic, key=b'{"id":0}', value=orjson.dumps({"op": "c", "after": {"id": 0}}))
    producer.produce(
        topic,
        key=b'{"id":7}',
        value=orjson.dumps({"op": "u", "after": {"id": 7, "name": "old", "qty": 7}}),
    )
    producer.produce(topic, key=b'{"id":9}', value=None)
    producer.flush()
    print(f"topic written: {time.monotonic() - t0:.1f}s")
    # the downstream state as a table, for the EXCEPT comparison
    conn.execute(f"CREATE TABLE {name}_copy AS SELECT * FROM {name}")
    conn.execute(f"DELETE FROM {name}_copy WHERE id = 9")
    conn.execute(f"UPDATE {name}_copy SET name = 'old' WHERE id = 7")
    conn.execute(f"INSERT INTO {name}_copy VALUES (0, NULL, NULL)")
    spec = TableSpec(
        "public.t",
        topic,
        (
            ColumnSpec("id", "int", "bigint"),
            ColumnSpec("name", "text", "text"),
            ColumnSpec("qty", "int", "int"),
        ),
        ("id",),
        extra={"schema": "public", "table": name},
    )
    side_conn = psycopg.connect(DSN, autocommit=True)
    side = SqlSourceSide(PostgresDialect(side_conn), [spec])
    alone = KafkaTarget({"bootstrap.servers": KAFKA}, processes=args.processes)
    timed("topic read alone", lambda: alone.refresh([spec]))
    alone.close()
    target = KafkaTarget({"bootstrap.servers": KAFKA}, processes=args.processes)
    options = Options(chunk_rows=100_000, recheck_rounds=0)
    (result,) = timed("verify", lambda: verify(side, target, [], options), (side_conn,))
    print(f"  missing={result.missing} extra={result.extra} stale={result.stale}")

    def except_both_ways() -> tuple[Any, Any]:
        a = conn.execute(
            f"SELECT count(*) FROM (SELECT * FROM {name} EXCEPT SELECT * FROM {name}_copy) s"
        ).fetchone()
        b = conn.execute(
            f"SELECT count(*) FROM (SELECT * FROM {name}_copy EXCEPT SELECT * FROM {name}) s"
        ).fetchone()
        return a, b

    counts = timed("EXCEPT both ways (copy already in the database)", except_both_ways, (conn,))
    print(f"  rows differing: {counts}")
    target.close()
    side.close()
    conn.execute(f"DROP TABLE {name}, {name}_copy")


if __name__ == "__main__":
    main()
