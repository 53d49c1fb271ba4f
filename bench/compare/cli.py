"""Command line of the side-by-side benchmark (see bench/README.md and docs/benchmarks.md)."""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.compare import debezium, incremental, mariadb, mariadb_runs, report
from bench.compare.common import RESULTS, ROOT, BenchError, Kafka, loadavg, stack_env
from bench.compare.contenders import PRODUCER, PROFILES, Options
from bench.compare.parity import KNOWN
from bench.compare.runs import WORKLOADS as RUNS_WORKLOADS
from bench.compare.runs import Ctx, ParityFailure

#: every PostgreSQL workload; W8 (incremental snapshot) lives in its own module
WORKLOADS: dict[str, Callable[[Ctx], None]] = {
    **RUNS_WORKLOADS,
    "W8": incremental.incremental_workload,
}
MARIADB_WORKLOADS: dict[str, Callable[[Ctx], None]] = {
    **mariadb_runs.WORKLOADS,
    "W8": incremental.mariadb_workload,
}
DATABASES = ("postgres", "mariadb")


def plan(workloads: list[str], databases: list[str]) -> list[tuple[str, Callable[[Ctx], None]]]:
    """(label, function) per workload and database, PostgreSQL first. A workload without a
    MariaDB variant is skipped there with a note, unless nothing at all would run."""
    unknown = [w for w in workloads if w not in WORKLOADS] + [
        d for d in databases if d not in DATABASES
    ]
    if unknown:
        raise SystemExit(
            f"unknown workload(s)/database(s) {unknown}; choose from {sorted(WORKLOADS)} "
            f"and {list(DATABASES)}"
        )
    steps: list[tuple[str, Callable[[Ctx], None]]] = []
    if "postgres" in databases:
        steps += [(w, WORKLOADS[w]) for w in workloads]
    if "mariadb" in databases:
        missing = [w for w in workloads if w not in MARIADB_WORKLOADS]
        if missing:
            print(f"note: {', '.join(missing)} have no MariaDB variant (W1, W1b, W4, W5, W8 do)")
        steps += [
            (mariadb_runs.label(w), MARIADB_WORKLOADS[w])
            for w in workloads
            if w in MARIADB_WORKLOADS
        ]
    if not steps:
        raise SystemExit("nothing to run for these workloads and databases")
    return steps


DEFAULT_WORKLOADS = "W7,W1,W1b,W2,W3,W5,W4,W8"
DEFAULT_DATABASES = "postgres,mariadb"


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.compare",
        description="tidemark vs Debezium Server vs the physical limit, on the local stack.",
    )
    p.add_argument("--workloads", default=DEFAULT_WORKLOADS, help=f"default {DEFAULT_WORKLOADS}")
    p.add_argument(
        "--db",
        default=DEFAULT_DATABASES,
        help="postgres, mariadb or both (comma-separated); MariaDB runs W1, W1b, W4, W5 and W8 "
        f"(default {DEFAULT_DATABASES})",
    )
    p.add_argument("--rows", type=int, default=None, help="events for W1/W1b/W2 (1,000,000)")
    p.add_argument(
        "--w3-rows", type=int, default=None, help="rows of W3's one transaction (1,000,000)"
    )
    p.add_argument("--snapshot-rows", type=int, default=None, help="W4 table rows (5,000,000)")
    p.add_argument("--runs", type=int, default=None, help="measured runs per contender (3)")
    p.add_argument("--no-warmup", action="store_true", help="skip the discarded warm-up run")
    p.add_argument(
        "--quick",
        action="store_true",
        help="development size: 20k rows (W1/W1b/W2/W3/W8), 100k snapshot rows, 1 run, no "
        "warm-up, W5 at 1,000 rows/s for 20 s, 5 s idle",
    )
    p.add_argument("--contenders", default="tidemark,debezium,limit")
    p.add_argument("--profile", choices=sorted(PROFILES), default="default")
    p.add_argument("--offset-flush-ms", type=int, default=10000)
    p.add_argument("--parity-sample", type=int, default=200, help="messages per topic (200)")
    p.add_argument(
        "--envelope-version",
        choices=("1.2", "3"),
        default="3",
        help="tidemark's envelope.version: 3 (default) writes Debezium 3.x's event shape and "
        "the parity check allows no version difference; 1.2 writes the seed's shape and "
        "accepts the documented 1.2 -> 3.x differences (K*)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="fail on the documented tidemark deviations (T*) too, not only on unknown ones",
    )
    p.add_argument("--w5-rate", type=int, default=None, help="rows/s (5,000)")
    p.add_argument("--w5-seconds", type=float, default=None, help="measured seconds (120)")
    p.add_argument("--w5-warmup-seconds", type=float, default=None, help="excluded (10)")
    p.add_argument("--w5-batch", type=int, default=10, help="rows per transaction (10)")
    p.add_argument("--w5-connections", type=int, default=4, help="generator sessions (4)")
    p.add_argument("--idle-seconds", type=float, default=None, help="W7 idle time (10)")
    p.add_argument(
        "--w8-rows", type=int, default=None, help="W8: rows of the snapshotted table (1,000,000)"
    )
    p.add_argument(
        "--w8-rate", type=int, default=2000, help="W8: events/s streamed meanwhile (2,000)"
    )
    p.add_argument(
        "--w8-chunk-size",
        type=int,
        default=1024,
        help="W8: incremental.snapshot.chunk.size for both contenders (1024, Debezium's default)",
    )
    p.add_argument(
        "--w8-warmup-seconds", type=float, default=None, help="W8: streaming before the signal (5)"
    )
    p.add_argument("--jvm-opts", default="", help="extra JVM options for Debezium Server")
    p.add_argument(
        "--results", default=None, help="results folder (default bench/results/compare-<date>)"
    )
    p.add_argument("--replot", default=None, help="redraw the plots of an earlier results folder")
    p.add_argument(
        "--docs",
        action="store_true",
        help="also copy the PNG plots to docs/img/ (the figures in docs/benchmarks.md)",
    )
    args = p.parse_args(argv)
    q = args.quick
    args.rows = args.rows or (20_000 if q else 1_000_000)
    args.snapshot_rows = args.snapshot_rows or (100_000 if q else 5_000_000)
    args.w3_rows = args.w3_rows or (20_000 if q else 1_000_000)
    args.runs = args.runs or (1 if q else 3)
    args.no_warmup = args.no_warmup or q
    args.w5_rate = args.w5_rate or (1000 if q else 5000)
    args.w5_seconds = args.w5_seconds if args.w5_seconds is not None else (20 if q else 120)
    args.w5_warmup_seconds = (
        args.w5_warmup_seconds if args.w5_warmup_seconds is not None else (3 if q else 10)
    )
    args.idle_seconds = args.idle_seconds if args.idle_seconds is not None else (5 if q else 10)
    args.w8_rows = args.w8_rows or (20_000 if q else 1_000_000)
    if args.w8_warmup_seconds is None:
        args.w8_warmup_seconds = 2.0 if q else 5.0
    return args


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _plots(
    meta: dict[str, Any],
    agg: dict[str, Any],
    lat_q: dict[str, dict[str, list[float]]],
    outdir: Path,
    docs: bool,
) -> list[Path]:
    workloads = list(meta["workloads"])
    parts = []
    base = {w.removesuffix(mariadb_runs.SUFFIX) for w in workloads}
    if {"W1", "W1b", "W2"} & base:
        parts.append(f"N={meta['rows']:,}")
    if "W3" in base:
        parts.append(f"W3 N={meta['w3_rows']:,} in one txn")
    if "W4" in base:
        parts.append(f"W4 M={meta['snapshot_rows']:,}")
    if "W8" in base and "w8" in meta:
        w8 = meta["w8"]
        parts.append(f"W8 {w8['rows']:,} rows, {w8['rate']:,} ev/s streamed")
    if "W5" in base and "w5" in meta:
        w5 = meta["w5"]
        parts.append(f"W5 {w5['rate']:,} rows/s x {w5['seconds']:g} s, {w5['batch']}/txn")
    sizes = ", ".join(parts) or "-"
    caption = (
        f"{meta['date'][:8]}, {sizes}, {meta['runs']} run(s)"
        f"{' + warm-up' if meta['warmup'] else ''}, profile {next(iter(meta['profile']))}, "
        f"Debezium Server {meta['versions']['debezium_server']}; "
        f"{meta['machine']['cores']} cores shared with PostgreSQL and Kafka, "
        f"load avg at start {meta['load_avg_start']}"
    )
    pngs = report.plots(agg, lat_q, outdir, workloads, caption)
    if docs:
        img = ROOT / "docs" / "img"
        img.mkdir(parents=True, exist_ok=True)
        for png in pngs:
            shutil.copy(png, img / png.name)
    return pngs


def replot(results: Path, docs: bool) -> list[Path]:
    """Redraw the plots of an earlier run from its results.csv and summary.json."""
    summary = json.loads((results / "summary.json").read_text())
    agg = report.aggregate(report.read_csv(results / "results.csv"))
    return _plots(summary["meta"], agg, summary.get("latency_quantiles", {}), results, docs)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    if args.replot:
        pngs = replot(Path(args.replot), args.docs)
        print("\n".join(str(p) for p in pngs))
        return {"plots": pngs}
    databases = [d.strip() for d in args.db.split(",") if d.strip()]
    steps = plan([w.strip() for w in args.workloads.split(",") if w.strip()], databases)
    workloads = [name for name, _ in steps]
    contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    # Absolute: Debezium Server runs in its own directory and resolves its offset and
    # schema history files against it, so a relative --results would put them elsewhere.
    outdir = Path(args.results).resolve() if args.results else RESULTS / f"compare-{stamp}"
    outdir.mkdir(parents=True, exist_ok=True)
    if "mariadb" in databases and "limit" in contenders:
        mariadb.require_tools()
    env = stack_env(databases)
    kafka = Kafka(env["TIDEMARK_KAFKA_BOOTSTRAP"])
    opts = Options(
        env=env,
        kafka=kafka,
        workdir=outdir,
        profile=args.profile,
        offset_flush_ms=args.offset_flush_ms,
        jvm_opts=shlex.split(args.jvm_opts),
        envelope_version=args.envelope_version,
    )
    if "debezium" in contenders:
        opts.debezium_home = debezium.resolve_distribution()
        opts.java = debezium.resolve_java()
    ctx = Ctx(
        opts=opts,
        contenders=contenders,
        runs=args.runs,
        warmup=not args.no_warmup,
        rows=args.rows,
        snapshot_rows=args.snapshot_rows,
        parity_sample=args.parity_sample,
        strict=args.strict,
        w5_rate=args.w5_rate,
        w5_seconds=args.w5_seconds,
        w5_warmup_seconds=args.w5_warmup_seconds,
        w5_batch=args.w5_batch,
        w5_connections=args.w5_connections,
        idle_seconds=args.idle_seconds,
        outdir=outdir,
        w3_rows=args.w3_rows,
        w8_rows=args.w8_rows,
        w8_rate=args.w8_rate,
        w8_chunk=args.w8_chunk_size,
        w8_warmup_seconds=args.w8_warmup_seconds,
    )
    meta: dict[str, Any] = {
        "date": stamp,
        "argv": sys.argv if argv is None else ["python", "-m", "bench.compare", *argv],
        "workloads": workloads,
        "contenders": contenders,
        "runs": args.runs,
        "warmup": not args.no_warmup,
        "databases": databases,
        "rows": args.rows,
        "w3_rows": args.w3_rows,
        "snapshot_rows": args.snapshot_rows,
        "w5": {
            "rate": args.w5_rate,
            "seconds": args.w5_seconds,
            "warmup_seconds": args.w5_warmup_seconds,
            "batch": args.w5_batch,
            "connections": args.w5_connections,
        },
        "idle_seconds": args.idle_seconds,
        "w8": {
            "rows": args.w8_rows,
            "rate": args.w8_rate,
            "chunk_size": args.w8_chunk_size,
            "warmup_seconds": args.w8_warmup_seconds,
        },
        "profile": {args.profile: PROFILES[args.profile]},
        "producer": PRODUCER,
        "offset_flush_ms": args.offset_flush_ms,
        "envelope_version": args.envelope_version,
        "jvm_opts": args.jvm_opts,
        "load_avg_start": round(loadavg(), 2),
        "machine": report.machine(),
        "versions": report.versions(opts.java, debezium.DEBEZIUM_VERSION),
    }
    print(
        f"bench.compare: {', '.join(workloads)}; {', '.join(contenders)}; runs={args.runs}"
        f"{' + warm-up' if ctx.warmup else ''}; profile {args.profile}; load average "
        f"{meta['load_avg_start']}; results in {_rel(outdir)}"
    )
    failure: BaseException | None = None
    t0 = time.monotonic()
    try:
        for _name, run_workload in steps:
            run_workload(ctx)
    except (BenchError, KeyboardInterrupt) as exc:
        failure = exc
    finally:
        kafka.close()
    meta["seconds"] = round(time.monotonic() - t0, 1)
    meta["load_avg_end"] = round(loadavg(), 2)
    agg = report.aggregate(ctx.results)
    rat = report.ratios(agg)
    table = report.markdown(agg, rat, workloads)
    report.write_csv(ctx.results, outdir / "results.csv")
    lat_q = {
        w: {name: report.quantiles(lat) for name, lat in series.items()}
        for w, series in ctx.latencies.items()
    }
    pngs = _plots(meta, agg, lat_q, outdir, args.docs and failure is None)
    summary = {
        "meta": meta,
        "parity": ctx.parity,
        "known_differences": [
            {"id": k.id, "class": k.cls, "path": k.path, "kind": k.kind, "why": k.why}
            for k in KNOWN
        ],
        "aggregate": agg,
        "ratios": rat,
        "latency_quantiles": lat_q,
        "failure": None if failure is None else str(failure),
    }
    (outdir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    (outdir / "summary.md").write_text(table + "\n")
    print(table)
    print(f"\nraw results: {_rel(outdir)}/results.csv; plots: {len(pngs)} PNG")
    if failure is not None:
        if isinstance(failure, ParityFailure):
            print(f"\nPARITY FAILED: {failure}", file=sys.stderr)
        raise failure
    return {
        "results": ctx.results,
        "parity": ctx.parity,
        "aggregate": agg,
        "ratios": rat,
        "outdir": outdir,
        "databases": ctx.databases,
        "mariadb_databases": ctx.maria_databases,
        "plots": pngs,
    }
