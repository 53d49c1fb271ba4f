"""The workloads, each as one function over a fresh database.

Every workload writes one row per (contender, run) into ``ctx.results``; run 0 is the discarded
warm-up. Parity is checked on the first tidemark/Debezium pair of a drain workload *before*
the measured runs, and the harness stops there if it fails.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson
import psycopg

from bench.compare import parity
from bench.compare.common import BenchError, Kafka, loadavg, pg_connect, pg_dsn, proc_sample
from bench.compare.contenders import (
    CAPTURE,
    TIDEMARK_2R,
    Options,
    Running,
    Sampler,
    measure_drain,
    run_copy,
    run_kafka_ceiling,
    run_pg_recvlogical,
    start_capture,
    stop_capture,
    wait_for_count,
)
from bench.compare.workloads import (
    PARITY_STREAM_EVENTS,
    TABLES,
    Database,
    checkpoint,
    install_loaders,
    load_inserts,
    load_mixed,
    mixed_events,
    preload,
)

SHORT = {"tidemark": "tm", TIDEMARK_2R: "tm2", "debezium": "dbz", "limit": "recv"}


class ParityFailure(BenchError):
    """tidemark and Debezium disagree beyond the documented differences: no figures."""


@dataclass
class Ctx:
    opts: Options
    contenders: list[str]  # subset of tidemark, debezium, limit
    runs: int
    warmup: bool
    rows: int
    snapshot_rows: int
    parity_sample: int
    strict: bool
    w5_rate: int
    w5_seconds: float
    w5_warmup_seconds: float
    w5_batch: int
    w5_connections: int
    idle_seconds: float
    outdir: Path
    results: list[dict[str, Any]] = field(default_factory=list)
    parity: dict[str, dict[str, Any]] = field(default_factory=dict)
    latencies: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    databases: list[str] = field(default_factory=list)
    maria_databases: list[str] = field(default_factory=list)
    w3_rows: int = 0
    #: W8 (bench/compare/incremental.py): table rows, streamed events/s, chunk size, warm-up
    w8_rows: int = 0
    w8_rate: int = 2000
    w8_chunk: int = 1024
    w8_warmup_seconds: float = 5.0
    log: Callable[[str], None] = print

    @property
    def kafka(self) -> Kafka:
        return self.opts.kafka

    def run_numbers(self) -> list[int]:
        return ([0] if self.warmup else []) + list(range(1, self.runs + 1))

    def capture(self) -> list[str]:
        return [c for c in self.contenders if c in CAPTURE]

    def record(
        self, workload: str, contender: str, run: int, res: dict[str, Any], **extra: Any
    ) -> None:
        row = {
            "workload": workload,
            "contender": contender,
            "run": run,
            "warmup": run == 0,
            "load_avg": round(loadavg(), 2),
            **extra,
            **res,
        }
        self.results.append(row)
        eps = res.get("events_per_s")
        cpu = res.get("cpu_s_per_1m")
        rss = res.get("peak_rss_mb")
        parts = [f"{workload} run {run}{' (warm-up)' if run == 0 else ''} {contender:<9}"]
        if eps is not None:
            parts.append(f"{eps:>10,.0f} ev/s")
        if cpu is not None:
            parts.append(f"{cpu:>7.1f} CPU-s/1M")
        if rss is not None:
            parts.append(f"{rss:>6.0f} MB peak")
        for k in ("p50_ms", "p99_ms", "first_event_s", "idle_rss_mb"):
            if k in res:
                parts.append(f"{k}={res[k]:.1f}")
        self.log("  " + "  ".join(parts))


def _topics(prefix: str) -> list[str]:
    return [f"{prefix}.public.{t}" for t in TABLES]


def _prefix(contender: str, db: Database, run: int) -> str:
    return f"{SHORT[contender]}_{db.name[4:]}_{run}"


def _timed_capture(
    ctx: Ctx,
    contender: str,
    db: Database,
    slot: str,
    snapshot_mode: str,
    workload: str,
    run: int,
    expected: dict[str, int],
    timeout: float,
    created_topics: list[str],
) -> str:
    """One capture contender on a prepared slot: fresh topics, start, time the drain until
    ``expected`` is in Kafka, stop, record. Returns its topic prefix (for the parity check)."""
    prefix = _prefix(contender, db, run)
    created_topics += _topics(prefix)
    ctx.kafka.create_topics(_topics(prefix))
    running = start_capture(
        contender,
        ctx.opts,
        db,
        slot=slot,
        topic_prefix=prefix,
        snapshot_mode=snapshot_mode,
        tag=f"{workload}-run{run}",
    )
    try:
        res = measure_drain(ctx.opts, running, db, expected, timeout)
    finally:
        stop_capture(running)
    ctx.record(workload, contender, run, res)
    return prefix


def _order(contenders: list[str], run: int) -> list[str]:
    """Alternate the order of tidemark and Debezium between runs (page cache, broker state)."""
    cap = [c for c in contenders if c in CAPTURE or c == TIDEMARK_2R]
    if run % 2 == 0:
        cap.reverse()
    return ([c for c in contenders if c == "limit"]) + cap


# -- drains: W1, W1b, W2 ---------------------------------------------------------------------------
def drain_workload(ctx: Ctx, workload: str, kind: str) -> None:
    """A backlog committed while every contender's slot waits at the same LSN. ``kind``:
    ``single`` (W1), ``batched`` (W1b, 100 rows per transaction), ``mixed`` (W2) or
    ``one_txn`` (W3: all ``w3_rows`` rows in one transaction, the memory test)."""
    db = Database(ctx.opts.env)
    ctx.databases.append(db.name)
    created_topics: list[str] = []
    ctx.log(f"\n== {workload}: {describe(workload, ctx)} (database {db.name})")
    try:
        db.create(["tm", "dbz", "recv"])
        install_loaders(db)
        n = ctx.w3_rows if kind == "one_txn" else ctx.rows
        if kind == "mixed":
            groups, _ = mixed_events(n)
            preload(db, groups)
        runs = ctx.run_numbers()
        for run in runs:
            for c in ctx.contenders:
                db.create_slot(db.slot_name(SHORT[c], run))
        db.apply_parity_dml()
        if kind == "mixed":
            groups, events = mixed_events(n)
            secs = load_mixed(db, groups, groups, 10)
            ctx.log(f"   loaded {groups * 5} mixed operations (K=10) in {secs:.1f} s")
        else:
            k = {"single": 1, "batched": 100, "one_txn": n}[kind]
            secs = load_inserts(db, 1, n, k)
            events = n
            ctx.log(f"   loaded {n} inserts, {k} per transaction, in {secs:.1f} s")
        end_lsn = db.current_lsn()
        checkpoint(db)
        expected = {"bench_rows": events, **PARITY_STREAM_EVENTS}
        timeout = events / 200 + 300
        for run in runs:
            prefixes: dict[str, str] = {}
            for c in _order(ctx.contenders, run):
                slot = db.slot_name(SHORT[c], run)
                if c == "limit":
                    res = run_pg_recvlogical(ctx.opts, db, slot, end_lsn, events)
                    ctx.record(workload, "pg_recvlogical", run, res)
                    continue
                prefixes[c] = _timed_capture(
                    ctx, c, db, slot, "no_data", workload, run, expected, timeout, created_topics
                )
            if "limit" in ctx.contenders and "tidemark" in prefixes:
                ceiling = f"{prefixes['tidemark']}.kafka_ceiling"
                created_topics.append(ceiling)
                res = run_kafka_ceiling(
                    ctx.opts,
                    ctx.kafka,
                    f"{prefixes['tidemark']}.public.bench_rows",
                    ceiling,
                    events,
                    ctx.opts.workdir / f"{workload}-run{run}",
                )
                ctx.record(workload, "kafka_produce", run, res)
            if run == runs[0]:
                _parity(ctx, workload, expected, prefixes)
            # A run's topics go as soon as it is checked: a 1M-event run writes ~1 GB.
            ctx.kafka.delete_topics(created_topics)
            created_topics.clear()
    finally:
        ctx.kafka.delete_topics(created_topics)
        db.drop()


def _parity(
    ctx: Ctx,
    workload: str,
    expected: dict[str, int],
    prefixes: dict[str, str],
    namespace: str = "public",
    also_ignored: tuple[str, ...] = (),
    by_key: bool = False,
) -> None:
    if "tidemark" not in prefixes or "debezium" not in prefixes:
        return
    rep = parity.check(
        ctx.kafka,
        expected,
        prefixes["tidemark"],
        prefixes["debezium"],
        ctx.parity_sample,
        strict=ctx.strict,
        namespace=namespace,
        also_ignored=also_ignored,
        allow_version=ctx.opts.envelope_version != "3",
        by_key=by_key,
    )
    ctx.parity[workload] = rep.as_dict()
    ctx.log("   " + rep.summary().replace("\n", "\n   "))
    if not rep.ok:
        raise ParityFailure(
            f"{workload}: tidemark and Debezium disagree beyond the documented differences "
            f"(see docs/benchmarks.md); no figures are reported.\n{rep.summary()}"
        )


# -- W4: initial snapshot --------------------------------------------------------------------------
def snapshot_workload(ctx: Ctx, workload: str = "W4") -> None:
    db = Database(ctx.opts.env)
    ctx.databases.append(db.name)
    created_topics: list[str] = []
    m = ctx.snapshot_rows
    ctx.log(f"\n== {workload}: {describe(workload, ctx)} (database {db.name})")
    try:
        db.create(["tm", "dbz", "recv"])
        db.apply_parity_dml()
        t0 = time.monotonic()
        with pg_connect(db.env, db.name) as conn:
            conn.execute(
                "INSERT INTO bench_rows SELECT (bench_row(i)).* FROM generate_series(1, %s) i", (m,)
            )
            conn.execute("VACUUM ANALYZE")
        checkpoint(db)
        ctx.log(f"   loaded {m} rows in {time.monotonic() - t0:.1f} s")
        expected = {t: int(db.scalar(f"SELECT count(*) FROM {t}")) for t in TABLES}
        timeout = m / 200 + 300
        runs = ctx.run_numbers()
        # tidemark once with one reader and once with two (snapshot.max.threads=2)
        contenders = ctx.contenders + ([TIDEMARK_2R] if "tidemark" in ctx.contenders else [])
        for run in runs:
            prefixes: dict[str, str] = {}
            for c in _order(contenders, run):
                if c == "limit":
                    ctx.record(workload, "COPY", run, run_copy(ctx.opts, db, m))
                    continue
                slot = db.slot_name(SHORT[c], run)
                db.slots.append(slot)
                prefixes[c] = _timed_capture(
                    ctx, c, db, slot, "initial", workload, run, expected, timeout, created_topics
                )
            if run == runs[0]:
                _parity(ctx, workload, expected, prefixes, by_key=True)
            # A run's topics go as soon as it is checked: a 1M-event run writes ~1 GB.
            ctx.kafka.delete_topics(created_topics)
            created_topics.clear()
    finally:
        ctx.kafka.delete_topics(created_topics)
        db.drop()


# -- W5: commit -> Kafka latency at a fixed rate ---------------------------------------------------
class RowSession(Protocol):
    """One generator session: commits rows ``lo..hi`` (``bench_row`` ids) as one
    transaction and returns when the COMMIT has returned."""

    def commit_rows(self, lo: int, hi: int) -> None: ...

    def close(self) -> None: ...


class PgRows:
    """A PostgreSQL generator session (autocommit, synchronous_commit on, prepared)."""

    SQL = (
        "INSERT INTO bench_rows SELECT (bench_row(i)).* "
        "FROM generate_series(%s::bigint, %s::bigint) i"
    )

    def __init__(self, env: dict[str, str], db: str) -> None:
        self.conn = psycopg.connect(pg_dsn(env, db), autocommit=True)
        self.cur = self.conn.cursor()

    def commit_rows(self, lo: int, hi: int) -> None:
        self.cur.execute(self.SQL, (lo, hi), prepare=True)

    def close(self) -> None:
        self.conn.close()


def generate(
    open_session: Callable[[], RowSession],
    first_id: int,
    rate: int,
    seconds: float,
    batch: int = 1,
    connections: int = 4,
) -> tuple[list[float], float]:
    """Open-loop load: transactions of ``batch`` rows scheduled at ``rate`` rows/s, spread
    round-robin over ``connections`` sessions, every commit durable.

    Several sessions are needed because with a durable commit every COMMIT waits for a log
    flush: one session cannot commit faster than the disk flushes (about 500/s here), while
    concurrent sessions share flushes (group commit). Returns the wall-clock time at which
    the COMMIT of each row's transaction returned (index = id - first_id) and the achieved
    row rate. A late session catches up without sleeping; nothing is ever slowed down."""
    txns = int(rate * seconds) // batch
    total = txns * batch
    commits = [0.0] * total
    txn_rate = rate / batch
    sessions = [open_session() for _ in range(connections)]
    errors: list[BaseException] = []
    t0 = time.perf_counter() + 0.2

    def session(j: int) -> None:
        try:
            for t in range(j, txns, connections):
                delay = t0 + t / txn_rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                lo = first_id + t * batch
                sessions[j].commit_rows(lo, lo + batch - 1)
                done = time.time()
                for k in range(t * batch, (t + 1) * batch):
                    commits[k] = done
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=session, args=(j,)) for j in range(connections)]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        for sess in sessions:
            sess.close()
    if errors:
        raise BenchError(f"load generator failed: {errors[0]!r}")
    elapsed = time.perf_counter() - t0
    return commits, total / elapsed


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    idx = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[idx]


def latency_stats(lat: list[float]) -> dict[str, float]:
    """p50/p95/p99/p99.9, max and mean (ms) of a sorted latency sample (W5, W8)."""
    return {
        "p50_ms": percentile(lat, 50),
        "p95_ms": percentile(lat, 95),
        "p99_ms": percentile(lat, 99),
        "p999_ms": percentile(lat, 99.9),
        "max_ms": lat[-1] if lat else float("nan"),
        "mean_ms": statistics.fmean(lat) if lat else float("nan"),
    }


@dataclass
class LiveTarget:
    """What W5 needs from a database: a way to wait until a started contender streams, and
    generator sessions. ``wait_streaming(running, next_id)`` returns how many ``bench_rows``
    ids (and records) it used: PostgreSQL pings with one row, which the slot is sure to
    keep; MariaDB pings through ``bench_marker`` (a row committed before the contender read
    its start position would never arrive)."""

    wait_streaming: Callable[[Running, int], int]
    open_session: Callable[[], RowSession]


def pg_wait_streaming(ctx: Ctx, db: Database) -> Callable[[Running, int], int]:
    """Commit one row and wait until it is in Kafka: the contender is then streaming."""

    def wait(running: Running, ping_id: int) -> int:
        db.execute("INSERT INTO bench_rows SELECT (bench_row(%s)).*", (ping_id,))
        wait_for_count(ctx.kafka, running, running.topic("bench_rows"), 1, 180, poll=0.2)
        return 1

    return wait


def measure_latency(
    ctx: Ctx, workload: str, running: Running, run: int, next_id: int, target: LiveTarget
) -> int:
    """Commit -> Kafka latency of a started contender at the W5 rate; stops the contender,
    records the row and returns the next free row id."""
    rate, secs, warm = ctx.w5_rate, ctx.w5_seconds, ctx.w5_warmup_seconds
    try:
        used = target.wait_streaming(running, next_id)
        first = next_id + used
        with Sampler(running.proc.pid) as sampler:
            before = proc_sample(running.proc.pid)
            commits, achieved = generate(
                target.open_session,
                first,
                rate,
                warm + secs,
                ctx.w5_batch,
                ctx.w5_connections,
            )
            total = len(commits)
            wait_for_count(
                ctx.kafka,
                running,
                running.topic("bench_rows"),
                total + used,
                total / 200 + 300,
                poll=0.2,
            )
            after = proc_sample(running.proc.pid)
    finally:
        stop_capture(running)
    lat: list[float] = []
    warm_n = int(rate * warm)
    for m in ctx.kafka.scan(running.topic("bench_rows"), used, total):
        key = orjson.loads(m.key())
        i = int(key["payload"]["id"]) - first
        if i >= warm_n:
            lat.append(m.timestamp()[1] - commits[i] * 1000.0)
    lat.sort()
    assert before is not None and after is not None
    peak = max([after.hwm_mb, *(s.hwm_mb for s in sampler.samples)])
    res = {
        "events": total,
        "target_rate": rate,
        "achieved_rate": achieved,
        **latency_stats(lat),
        "cpu_s_per_1m": (after.cpu_s - before.cpu_s) / total * 1e6,
        "cpu_pct": 100 * (after.cpu_s - before.cpu_s) / (warm + secs),
        "peak_rss_mb": peak,
        "rss_end_mb": after.rss_mb,
    }
    if achieved < 0.95 * rate:
        ctx.log(f"   note: the generator reached only {achieved:,.0f} of {rate:,} rows/s")
    ctx.latencies.setdefault(workload, {})[f"{running.name}#{run}"] = lat
    ctx.record(workload, running.name, run, res)
    return first + total


def latency_workload(ctx: Ctx, workload: str = "W5") -> None:
    db = Database(ctx.opts.env)
    ctx.databases.append(db.name)
    created_topics: list[str] = []
    ctx.log(f"\n== {workload}: {describe(workload, ctx)} (database {db.name})")
    target = LiveTarget(pg_wait_streaming(ctx, db), lambda: PgRows(ctx.opts.env, db.name))
    try:
        db.create(["tm", "dbz", "recv"])
        next_id = 1
        for run in ctx.run_numbers():
            for c in _order(ctx.capture(), run):
                slot = db.slot_name(SHORT[c], run)
                db.create_slot(slot)
                prefix = _prefix(c, db, run)
                created_topics += _topics(prefix)
                ctx.kafka.create_topics(_topics(prefix))
                running = start_capture(
                    c,
                    ctx.opts,
                    db,
                    slot=slot,
                    topic_prefix=prefix,
                    snapshot_mode="no_data",
                    tag=f"{workload}-run{run}",
                )
                next_id = measure_latency(ctx, workload, running, run, next_id, target)
                ctx.kafka.delete_topics(created_topics)
                created_topics.clear()
    finally:
        ctx.kafka.delete_topics(created_topics)
        db.drop()


# -- W7: memory and startup ------------------------------------------------------------------------
def startup_workload(ctx: Ctx, workload: str = "W7") -> None:
    """Process start to first event in Kafka (one row already committed), then RSS and CPU
    after ``idle_seconds`` with nothing to do. RSS under load is W1/W5's peak RSS."""
    db = Database(ctx.opts.env)
    ctx.databases.append(db.name)
    created_topics: list[str] = []
    ctx.log(f"\n== {workload}: {describe(workload, ctx)} (database {db.name})")
    try:
        db.create(["tm", "dbz", "recv"])
        next_id = 1
        for run in ctx.run_numbers():
            for c in _order(ctx.capture(), run):
                slot = db.slot_name(SHORT[c], run)
                db.create_slot(slot)
                db.execute("INSERT INTO bench_rows SELECT (bench_row(%s)).*", (next_id,))
                next_id += 1
                prefix = _prefix(c, db, run)
                created_topics += _topics(prefix)
                ctx.kafka.create_topics(_topics(prefix))
                running = start_capture(
                    c,
                    ctx.opts,
                    db,
                    slot=slot,
                    topic_prefix=prefix,
                    snapshot_mode="no_data",
                    tag=f"{workload}-run{run}",
                )
                try:
                    _first, _n, at_first = wait_for_count(
                        ctx.kafka, running, running.topic("bench_rows"), 1, 180, poll=0.05
                    )
                    t_first = ctx.kafka.timestamp_at(running.topic("bench_rows"), 0)
                    time.sleep(ctx.idle_seconds)
                    idle = proc_sample(running.proc.pid)
                finally:
                    stop_capture(running)
                assert idle is not None
                ctx.record(
                    workload,
                    c,
                    run,
                    {
                        "first_event_s": t_first - running.started,
                        "startup_cpu_s": at_first.cpu_s,
                        "idle_rss_mb": idle.rss_mb,
                        "idle_cpu_pct": 100 * (idle.cpu_s - at_first.cpu_s) / ctx.idle_seconds,
                        "peak_rss_mb": idle.hwm_mb,
                    },
                )
    finally:
        ctx.kafka.delete_topics(created_topics)
        db.drop()


def describe(workload: str, ctx: Ctx) -> str:
    n = f"{ctx.rows:,}"
    return {
        "W3": f"backlog drain, one transaction of {ctx.w3_rows:,} INSERTs (peak memory)",
        "W1": f"backlog drain, {n} single-row INSERT transactions",
        "W1b": f"backlog drain, {n} INSERTs in 100-row transactions",
        "W2": f"backlog drain, {n} mixed operations 40/40/20 insert/update/delete, 10 per "
        "transaction",
        "W4": f"initial snapshot of {ctx.snapshot_rows:,} rows",
        "W5": f"commit -> Kafka latency, {ctx.w5_rate:,} rows/s in {ctx.w5_batch}-row "
        f"transactions over {ctx.w5_connections} sessions for {ctx.w5_seconds:g} s "
        f"(+{ctx.w5_warmup_seconds:g} s warm-up)",
        "W7": f"start -> first event, RSS and CPU after {ctx.idle_seconds:g} s idle",
    }[workload]


WORKLOADS: dict[str, Callable[[Ctx], None]] = {
    "W7": startup_workload,
    "W1": lambda ctx: drain_workload(ctx, "W1", "single"),
    "W1b": lambda ctx: drain_workload(ctx, "W1b", "batched"),
    "W2": lambda ctx: drain_workload(ctx, "W2", "mixed"),
    "W3": lambda ctx: drain_workload(ctx, "W3", "one_txn"),
    "W5": latency_workload,
    "W4": snapshot_workload,
}
