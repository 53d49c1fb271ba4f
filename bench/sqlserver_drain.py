"""SQL Server change-table drain: tidemark against a bare pyodbc read of the same rows (the
limit), on the SQL Server stand-in of ``tidemark dev``.

    .venv/bin/tidemark dev up sqlserver kafka
    .venv/bin/python -m bench.sqlserver_drain [--rows 200000] [--rows-per-tx 10]

A database of its own gets the stand-in, a CDC-enabled table ``dbo.items`` and N inserted rows
(in transactions of ``--rows-per-tx``). Each contender then reads every change row, in its own
process so its CPU is its own:

- the limit: ``SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_items(min, max, N'all update
  old') ORDER BY ...`` through pyodbc, rows fetched and discarded;
- tidemark: the SQL Server connector from the capture instance's start (stored offset) →
  Debezium envelope → JSON with schemas → Kafka (acks=all, idempotent), stopping once every
  change up to the maximum LSN is acknowledged.

Reported: wall time, events/s, CPU-seconds per 1M events, peak RSS, and the ratio. What the
stand-in's server side costs (PL/pgSQL change functions over PostgreSQL) is in both numbers;
a real SQL Server's would differ.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env() -> dict[str, str]:
    from worker.dev import Stack

    return Stack().env(["sqlserver", "kafka"])


def _admin(env: dict[str, str], db: str) -> Any:
    import psycopg

    return psycopg.connect(
        host=env["TIDEMARK_SQLSERVER_HOST"],
        port=env["TIDEMARK_SQLSERVER_PORT"],
        user=env["TIDEMARK_SQLSERVER_USER"],
        password=env["TIDEMARK_SQLSERVER_PASSWORD"],
        dbname=db,
        autocommit=True,
    )


def prepare(env: dict[str, str], db: str, rows: int, per_tx: int) -> None:
    from worker.dev.sqlserver_standin import install

    with _admin(env, "postgres") as c:
        c.execute(f'CREATE DATABASE "{db}"')
    with _admin(env, db) as c:
        install(c)
        c.execute(
            "CREATE TABLE dbo.items (id bigint PRIMARY KEY, name varchar(40) NOT NULL, "
            "price numeric(10, 2), qty int, created sys.datetime)"
        )
        c.execute("SELECT sys.sp_cdc_enable_table('dbo', 'items', NULL)")
        c.execute(f"""
            CREATE PROCEDURE load(n int) LANGUAGE plpgsql AS $$
            BEGIN
              FOR i IN 1..n LOOP
                INSERT INTO dbo.items VALUES (i, 'item ' || i, i * 0.01, i % 100,
                                              '2026-01-01'::timestamp + i * interval '1 s');
                IF i % {per_tx} = 0 THEN COMMIT; END IF;
              END LOOP;
            END $$""")
        c.execute("SET synchronous_commit = off")
        t0 = time.monotonic()
        c.execute("CALL load(%s)", (rows,))
        print(f"loaded {rows} rows in {time.monotonic() - t0:.1f} s", file=sys.stderr)


def config(env: dict[str, str], db: str, max_tx: int) -> dict[str, str]:
    server = f"ssbench{uuid.uuid4().hex[:6]}"
    return {
        "name": server,
        "database.server.name": server,
        "database.hostname": env["TIDEMARK_SQLSERVER_HOST"],
        "database.port": env["TIDEMARK_SQLSERVER_PORT"],
        "database.user": env["TIDEMARK_SQLSERVER_USER"],
        "database.password": env["TIDEMARK_SQLSERVER_PASSWORD"],
        "database.names": db,
        "sqlserver.dialect": "postgres-standin",
        "table.include.list": r"dbo\.items",
        "streaming.poll.interval.ms": "100",
        "max.iteration.transactions": str(max_tx),
    }


def _usage(t0: float) -> dict[str, Any]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "wall_s": time.monotonic() - t0,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
    }


def child_limit(cfg: dict[str, str]) -> dict[str, Any]:
    """The limit: fetch every change row over pyodbc and drop it."""
    from connectors.sqlserver.config import CONFIG_DEF
    from connectors.sqlserver.connection import connect, dialect_of

    parsed = CONFIG_DEF.parse(cfg)
    t0 = time.monotonic()
    conn = connect(parsed)
    cur = conn.cursor()
    cur.execute("SELECT sys.fn_cdc_get_min_lsn(?), sys.fn_cdc_get_max_lsn()", "dbo_items")
    lo, hi = cur.fetchone()
    cur.execute(dialect_of(parsed).changes("dbo_items"), lo, hi)
    rows = 0
    while batch := cur.fetchmany(10_000):
        rows += len(batch)
    conn.close()
    return {**_usage(t0), "events": rows}


def child_tidemark(cfg: dict[str, str], bootstrap: str) -> dict[str, Any]:
    from cdc.engine import Engine, EngineSettings
    from cdc.offsets.memory import MemoryOffsetStore
    from connectors.sqlserver import SqlServerConnector
    from connectors.sqlserver.connection import connect
    from connectors.sqlserver.offsets import Lsn, SqlServerPosition

    connector = SqlServerConnector(cfg)
    conn = connect(connector.config)
    cur = conn.cursor()
    cur.execute("SELECT sys.fn_cdc_get_min_lsn(?), sys.fn_cdc_get_max_lsn()", "dbo_items")
    lo, hi = cur.fetchone()
    conn.close()
    end = Lsn(bytes(hi))
    store = MemoryOffsetStore()
    # streaming from the capture instance's start, as if a snapshot had ended there
    store.put(
        cfg["name"], connector.source_partition(), SqlServerPosition(Lsn(bytes(lo))).to_offset()
    )
    engine = Engine(
        connector,
        connector.config,
        store,
        EngineSettings(producer={"bootstrap.servers": bootstrap}, offset_flush_interval_ms=250),
    )
    t0 = time.monotonic()
    thread = threading.Thread(target=engine.run, daemon=True)
    thread.start()
    while True:
        done = engine.writer.last_committed
        commit = done.get("commit_lsn") if done else None
        if commit and Lsn.parse(commit) >= end:
            break
        if not thread.is_alive():
            raise SystemExit("engine stopped early")
        time.sleep(0.05)
    result = {**_usage(t0), "events": engine.metrics.records_sent}
    engine.stop()
    thread.join(60)
    return result


def run_child(kind: str, cfg: dict[str, str], bootstrap: str) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.sqlserver_drain",
            "--child",
            kind,
            json.dumps(cfg),
            bootstrap,
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
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rows-per-tx", type=int, default=10)
    parser.add_argument(
        "--max-iteration-transactions", type=int, default=500, help="0: one window, all of it"
    )
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, cfg, bootstrap = args.child[0], json.loads(args.child[1]), args.child[2]
        result = child_limit(cfg) if kind == "limit" else child_tidemark(cfg, bootstrap)
        print(json.dumps(result))
        return result
    env = _env()
    db = f"ss_bench_{uuid.uuid4().hex[:6]}"
    prepare(env, db, args.rows, args.rows_per_tx)
    try:
        cfg = config(env, db, args.max_iteration_transactions)
        limit = run_child("limit", cfg, env["TIDEMARK_KAFKA_BOOTSTRAP"])
        ours = run_child("tidemark", cfg, env["TIDEMARK_KAFKA_BOOTSTRAP"])
    finally:
        with _admin(env, "postgres") as c:
            c.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    report = summarise(args.rows, {"pyodbc select": limit, "tidemark": ours})
    report["rows_per_tx"] = args.rows_per_tx
    report["max_iteration_transactions"] = args.max_iteration_transactions
    print(
        f"\nSQL Server (stand-in) change-table drain, {args.rows} rows, "
        f"{args.rows // args.rows_per_tx} transactions, "
        f"max.iteration.transactions={args.max_iteration_transactions}"
    )
    for name in ("pyodbc select", "tidemark"):
        r = report[name]
        print(
            f"  {name}: {r['wall_s']:.1f} s, {r['events_per_s']:,.0f} events/s, "
            f"{r['cpu_s_per_1m']:.1f} CPU-s per 1M events, peak RSS {r['peak_rss_mb']:.0f} MB"
        )
    print(f"  tidemark / pyodbc select events/s: {report['ratio_events_per_s']:.2f}x")
    return report


def summarise(rows: int, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per contender: its measurements plus events/s and CPU-s per 1M events; the ratio."""
    report: dict[str, Any] = {"rows": rows}
    for name, r in results.items():
        report[name] = r | {
            "events_per_s": rows / r["wall_s"],
            "cpu_s_per_1m": r["cpu_s"] * 1e6 / rows,
        }
    report["ratio_events_per_s"] = (
        report["tidemark"]["events_per_s"] / report["pyodbc select"]["events_per_s"]
    )
    return report


if __name__ == "__main__":
    main()
