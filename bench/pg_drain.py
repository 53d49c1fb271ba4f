"""PostgreSQL backlog drain: tidemark against pg_recvlogical, the physical limit.

    .venv/bin/tidemark dev up postgres kafka
    .venv/bin/python -m bench.pg_drain [--rows 1000000]

Two slots are created at the same LSN, then N rows are inserted, ``--per-tx`` (default 1) per
committed transaction. Each
contender drains the same backlog from its own slot up to the same end LSN:

- ``pg_recvlogical`` (pgoutput, same publication) writing to /dev/null: decoding and the
  replication protocol, nothing else — the limit;
- tidemark: the PostgreSQL connector → full Debezium envelope → JSON with schemas → Kafka
  (acks=all, idempotent), stopping once every event up to the end LSN is acknowledged.

Reported per contender: wall time, events/s, CPU-seconds of the capture process per 1M
events (user+sys from getrusage) and peak RSS; then tidemark/limit ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import uuid
from typing import Any

import psycopg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pg_env() -> dict[str, str]:
    from worker.dev import Stack

    return Stack().env(["postgres", "kafka"])


def dsn(env: dict[str, str], db: str) -> str:
    return (
        f"host={env['TIDEMARK_PG_HOST']} port={env['TIDEMARK_PG_PORT']} "
        f"user={env['TIDEMARK_PG_USER']} password={env['TIDEMARK_PG_PASSWORD']} dbname={db}"
    )


def prepare(env: dict[str, str], db: str, rows: int, per_tx: int = 1) -> tuple[str, str, int]:
    with psycopg.connect(dsn(env, "postgres"), autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{db}"')
    slot_tm, slot_recv = f"{db}_tm", f"{db}_recv"
    with psycopg.connect(dsn(env, db), autocommit=True) as c:
        c.execute(
            "CREATE TABLE items (id bigserial PRIMARY KEY, name text NOT NULL, "
            "price numeric(10,2), qty int, created timestamptz DEFAULT now())"
        )
        c.execute("CREATE PUBLICATION bench_pub FOR TABLE items")
        c.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot_tm,))
        c.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot_recv,))
        c.execute("""
            CREATE PROCEDURE load(n int, k int) LANGUAGE plpgsql AS $$
            BEGIN
              FOR i IN 1..n LOOP
                INSERT INTO items (name, price, qty) VALUES ('item ' || i, i * 0.01, i % 100);
                IF i % k = 0 THEN COMMIT; END IF;
              END LOOP;
              COMMIT;
            END $$""")
        c.execute("SET synchronous_commit = off")
        t0 = time.monotonic()
        c.execute("CALL load(%s, %s)", (rows, per_tx))
        row = c.execute(
            "SELECT pg_current_wal_lsn()::text, pg_current_wal_lsn() - '0/0'"
        ).fetchone()
        assert row is not None
        print(
            f"loaded {rows} rows, {per_tx} per transaction, in {time.monotonic() - t0:.1f} s",
            file=sys.stderr,
        )
    return slot_tm, slot_recv, int(row[1])


def cleanup(env: dict[str, str], db: str, slots: tuple[str, ...]) -> None:
    """Drop the bench's slots and database."""
    with psycopg.connect(dsn(env, "postgres"), autocommit=True) as c:
        for s in slots:
            c.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s AND NOT active",
                (s,),
            )
        c.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def run_pg_recvlogical(env: dict[str, str], db: str, slot: str, end_lsn: int) -> dict[str, Any]:
    from connectors.postgres.pgoutput import lsn_to_str
    from worker.dev.postgres import find_bindir

    cmd = [
        str(find_bindir() / "pg_recvlogical"),
        "-d",
        dsn(env, db),
        "--slot",
        slot,
        "--start",
        "-f",
        "/dev/null",
        "-o",
        "proto_version=1",
        "-o",
        "publication_names=bench_pub",
        "--no-loop",
        f"--endpos={lsn_to_str(end_lsn)}",
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, env={**os.environ, "PGPASSWORD": env["TIDEMARK_PG_PASSWORD"]})
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": after.ru_maxrss / 1024}


def run_tidemark(env: dict[str, str], db: str, slot: str, end_lsn: int) -> dict[str, Any]:
    cfg = {
        "name": f"bench-{db}",
        "database.server.name": f"bench{uuid.uuid4().hex[:6]}",
        "database.hostname": env["TIDEMARK_PG_HOST"],
        "database.port": env["TIDEMARK_PG_PORT"],
        "database.user": env["TIDEMARK_PG_USER"],
        "database.password": env["TIDEMARK_PG_PASSWORD"],
        "database.dbname": db,
        "slot.name": slot,
        "publication.name": "bench_pub",
        "publication.autocreate.mode": "disabled",
        "snapshot.mode": "never",
    }
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.pg_drain_child",
            json.dumps(cfg),
            env["TIDEMARK_KAFKA_BOOTSTRAP"],
            str(end_lsn),
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--per-tx", type=int, default=1, help="rows per transaction (W1b-like drains: 100)"
    )
    args = parser.parse_args(argv)
    env = pg_env()
    db = f"bench_{uuid.uuid4().hex[:6]}"
    slot_tm, slot_recv, end_lsn = prepare(env, db, args.rows, args.per_tx)
    try:
        limit = run_pg_recvlogical(env, db, slot_recv, end_lsn)
        ours = run_tidemark(env, db, slot_tm, end_lsn)
    finally:
        cleanup(env, db, (slot_tm, slot_recv))
    n = args.rows
    report: dict[str, Any] = {"rows": n}
    print(f"\nPostgreSQL backlog drain, {n} rows, {args.per_tx} per transaction")
    print(f"{'contender':<16}{'wall s':>9}{'events/s':>12}{'CPU-s/1M':>11}{'peak RSS MB':>13}")
    for name, r in (("pg_recvlogical", limit), ("tidemark", ours)):
        eps = n / r["wall_s"]
        cpu_per_m = r["cpu_s"] / n * 1e6
        report[name] = {**r, "events_per_s": eps, "cpu_s_per_1m": cpu_per_m}
        print(
            f"{name:<16}{r['wall_s']:>9.1f}{eps:>12,.0f}{cpu_per_m:>11.1f}{r['peak_rss_mb']:>13.0f}"
        )
    ratio = report["tidemark"]["events_per_s"] / report["pg_recvlogical"]["events_per_s"]
    report["ratio_events_per_s"] = ratio
    print(f"tidemark / pg_recvlogical events/s: {ratio:.2f}x (target >= 0.5x)")
    return report


if __name__ == "__main__":
    main()
