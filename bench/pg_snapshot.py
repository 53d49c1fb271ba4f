"""PostgreSQL initial snapshot (W4) without Debezium: tidemark's rows/s and CPU-s per 1M rows.

    .venv/bin/tidemark dev up postgres kafka
    .venv/bin/python -m bench.pg_snapshot --rows 1000000 --runs 3 [--code DIR ...]

The table and the contender are W4's (``bench.compare``): ``bench_rows`` of N rows
(``bench_row(i)``), tidemark in its own process (``bench.compare.tidemark_child``) with
``snapshot.mode=initial``, envelope 3, the shared producer and queue settings. Throughput
is first to last broker append time of the topic; CPU is that of the contender's process
between the poll that saw the first record and the one that saw the last (``measure_drain``,
as in ``bench.compare``). ``--code DIR`` (repeatable) runs the contender from another
checkout (e.g. ``git archive <rev> | tar -x -C DIR``), alternating the code trees inside
every run, so a before/after comparison shares the machine's load; the load average is
printed with every figure. ``--profile DIR`` records each run with py-spy into DIR.
``--extra key=value`` adds connector keys (e.g. ``snapshot.max.threads=2``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.compare.common import ROOT, Kafka, pg_connect, proc_sample, stop_process
from bench.compare.contenders import (
    PRODUCER,
    PROFILES,
    Options,
    Running,
    measure_drain,
    spawn_tidemark,
)
from bench.compare.workloads import Database, checkpoint


def _load(db: Database, rows: int) -> None:
    with pg_connect(db.env, db.name) as conn:
        conn.execute(
            "INSERT INTO bench_rows SELECT (bench_row(i)).* FROM generate_series(1, %s) i",
            (rows,),
        )
        conn.execute("VACUUM ANALYZE")
    checkpoint(db)


def _start(
    code: Path, opts: Options, db: Database, prefix: str, slot: str, extra: dict[str, str]
) -> Running:
    env = opts.env
    cfg = {
        "name": f"bench-{prefix}",
        "topic.prefix": prefix,
        "database.hostname": env["TIDEMARK_PG_HOST"],
        "database.port": env["TIDEMARK_PG_PORT"],
        "database.user": env["TIDEMARK_PG_USER"],
        "database.password": env["TIDEMARK_PG_PASSWORD"],
        "database.dbname": db.name,
        "plugin.name": "pgoutput",
        "slot.name": slot,
        "publication.name": db.publication("tm"),
        "publication.autocreate.mode": "disabled",
        "snapshot.mode": "initial",
        "envelope.version": opts.envelope_version,
        **{k: str(v) for k, v in PROFILES[opts.profile].items()},
        **extra,
    }
    settings = {
        "producer": {"bootstrap.servers": env["TIDEMARK_KAFKA_BOOTSTRAP"], **PRODUCER},
        "offset_flush_interval_ms": opts.offset_flush_ms,
    }
    run_dir = opts.workdir / prefix
    run_dir.mkdir(parents=True, exist_ok=True)
    proc, started, log_path = spawn_tidemark(cfg, settings, run_dir, cwd=code)
    return Running("tidemark", proc, started, log_path, prefix, slot)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--code", action="append", default=[], help="checkout to run (repeatable)")
    p.add_argument("--extra", action="append", default=[], help="connector key=value")
    p.add_argument("--profile", default=None, help="py-spy every run into this directory")
    args = p.parse_args(argv)
    codes = [Path(c).resolve() for c in args.code] or [ROOT]
    extra = dict(kv.split("=", 1) for kv in args.extra)

    from bench.compare.common import stack_env

    env = stack_env(["postgres"])
    kafka = Kafka(env["TIDEMARK_KAFKA_BOOTSTRAP"])
    work = ROOT / "bench" / "results" / f"pg_snapshot-{int(time.time())}"
    opts = Options(env=env, kafka=kafka, workdir=work)
    db = Database(env)
    results: list[dict[str, Any]] = []
    topics: list[str] = []
    try:
        db.create(["tm"])
        t0 = time.monotonic()
        _load(db, args.rows)
        print(f"loaded {args.rows:,} rows into {db.name} in {time.monotonic() - t0:.1f} s")
        for run in range(args.runs):
            order = codes if run % 2 == 0 else codes[::-1]
            for code in order:
                label = code.name
                prefix = f"ps_{db.name[4:]}_{run}_{len(results)}"
                slot = f"{db.name}_ps_{len(results)}"
                db.slots.append(slot)
                topic = f"{prefix}.public.bench_rows"
                topics.append(topic)
                kafka.create_topics([topic])
                load = os.getloadavg()[0]
                running = _start(code, opts, db, prefix, slot, extra)
                spy = None
                if args.profile:
                    Path(args.profile).mkdir(parents=True, exist_ok=True)
                    out = Path(args.profile) / f"{label}-run{run}.txt"
                    spy = subprocess.Popen(
                        [
                            str(Path(sys.executable).parent / "py-spy"),
                            "record",
                            "-r",
                            "200",
                            "-f",
                            "raw",
                            "--threads",
                            "--gil",
                            "-o",
                            str(out),
                            "--pid",
                            str(running.proc.pid),
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                try:
                    res = measure_drain(
                        opts, running, db, {"bench_rows": args.rows}, args.rows / 200 + 300
                    )
                finally:
                    if spy is not None:
                        spy.send_signal(2)
                        spy.wait(60)
                    sample = proc_sample(running.proc.pid)
                    stop_process(running.proc, timeout=60)
                res.update(code=label, run=run, load_before=load, load_after=os.getloadavg()[0])
                res["cpu_total_s"] = sample.cpu_s if sample else float("nan")
                results.append(res)
                print(
                    f"run {run} {label:<24} {res['events_per_s']:>9,.0f} rows/s "
                    f"{res['cpu_s_per_1m']:>6.1f} CPU-s/1M  rss {res['peak_rss_mb']:.0f} MB  "
                    f"load {load:.2f}->{res['load_after']:.2f}",
                    flush=True,
                )
                kafka.delete_topics([topic])
                topics.remove(topic)
        for code in codes:
            mine = [r for r in results if r["code"] == code.name]
            print(
                f"median {code.name:<24} "
                f"{statistics.median(r['events_per_s'] for r in mine):>9,.0f} rows/s "
                f"{statistics.median(r['cpu_s_per_1m'] for r in mine):>6.1f} CPU-s/1M "
                f"({len(mine)} runs)"
            )
    finally:
        kafka.delete_topics(topics)
        db.drop()
        kafka.close()
    return results


if __name__ == "__main__":
    main()
