"""Side by side: tidemark's Cassandra connector and Debezium's own Cassandra agent drain the same
commit log backlog into Kafka.

    .venv/bin/python -m bench.cassandra_compare [--rows 500000] [--runs 3] [--quick]
        [--profile default|tuned]

1. starts a private Cassandra 5.0.9 node (``tidemark dev``'s launcher, its own home under
   ``bench/results/cassandra-compare-node``, CQL on ``BENCH_CASSANDRA_PORT`` or 19142, internode
   17100) and the shared dev Kafka (started if it is not running), creates ``bench.t`` (the
   table of bench.cassandra_reader, ``cdc = true``) and writes ``--rows`` single-row INSERTs
   while no contender runs: the backlog, in ``cdc_raw``;
2. per run, each contender in turn (alternating which goes first) with a fresh topic prefix and
   no snapshot, reading every segment of the backlog: Debezium's agent
   (``debezium-connector-cassandra-5`` 3.4.0.Final on Java 17, real-time processing on, post
   processing off: it deletes nothing) and tidemark's connector in the Engine as its own OS
   process (bench.compare.tidemark_child, ``commit.log.transfer.class=keep``); both with the
   same Kafka producer settings (bench.compare.contenders.PRODUCER: acks=all, idempotence,
   lz4, linger 5 ms) and JSON with schemas; the agent with its defaults or ``--profile
   tuned`` (:data:`PROFILES`);
3. a run ends when the contender's topic holds ``--rows`` records (Kafka's end offset); its
   figures: the wall time from spawn to the last record (start-up included), the time from
   its first record (the record's timestamp) to its last (the drain rate), the CPU seconds
   of its process (utime + stime from /proc, start-up included) and its peak RSS.

Prints each run and the medians with the ratio tidemark/Debezium; the results go to
``bench/results/cassandra_compare-<time>.json``, docs/benchmarks.md quotes them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.cassandra_reader import RESULTS, fill, private_node
from bench.compare.common import BenchError, Kafka, loadavg, proc_sample, stack_env, stop_process
from bench.compare.contenders import PRODUCER, spawn_tidemark
from bench.debezium_cassandra import VERSION, debezium_cassandra

TABLE = "bench.t"

#: the agent's settings: its defaults (what a user runs unless told otherwise: the offset file
#: is written after every record, ``offset.flush.interval.ms=0``) and a tuned set (offsets
#: flushed every 10 s as tidemark's here, larger queue batches and a shorter poll, as the
#: tuned Debezium Server profile of bench.compare)
PROFILES: dict[str, dict[str, Any]] = {
    "default": {},
    "tuned": {
        "offset.flush.interval.ms": 10000,
        "max.offset.flush.size": 1000000,
        "max.batch.size": 20000,
        "max.queue.size": 100000,
        "poll.interval.ms": 100,
    },
}


def _wait_drained(
    kafka: Kafka, topic: str, rows: int, pid: int, started: float, timeout: float
) -> dict[str, float]:
    """Polls the topic's end offset until ``rows`` records are in; samples the process's CPU
    and memory at that moment. The drain starts at the first record's timestamp (its
    producer's clock, this machine's): polling from outside would start it late for a
    contender whose records flow before the harness watches (the agent's start is awaited
    in its log)."""
    peak = 0.0
    deadline = time.monotonic() + timeout
    while True:
        end = kafka.end_offset(topic)
        now = time.time()
        sample = proc_sample(pid)
        if sample is None:
            raise BenchError(f"the contender (pid {pid}) ended before draining {topic}")
        peak = max(peak, sample.hwm_mb)
        if end >= rows:
            if end > rows:
                raise BenchError(f"{topic} holds {end} records, expected {rows}")
            first = kafka.timestamp_at(topic, 0)
            return {
                "wall_s": now - started,
                "drain_s": max(now - first, 1e-9),
                "cpu_s": sample.cpu_s,
                "peak_rss_mb": peak,
            }
        if time.monotonic() > deadline:
            raise BenchError(f"{topic}: {end} of {rows} records after {timeout:.0f} s")
        time.sleep(0.05)


def run_debezium(
    node: Any, kafka: Kafka, rows: int, work: Path, timeout: float, profile: str, snapshot: bool
) -> dict[str, float]:
    prefix = "dbz" + uuid.uuid4().hex[:8]
    topic = f"{prefix}.{TABLE}"
    kafka.create_topics([topic])
    started = time.time()
    agent: AbstractContextManager[Any] = debezium_cassandra(
        node.host,
        node.port,
        str(node.config),
        kafka.bootstrap,
        prefix,
        work / prefix,
        snapshot_mode="INITIAL" if snapshot else "NEVER",
        producer=PRODUCER,
        extra=PROFILES[profile],
        heap="1g",
    )
    with agent as proc:
        result = _wait_drained(kafka, topic, rows, proc.pid, started, timeout)
    return _sized(kafka, topic, result)


def run_tidemark(
    node: Any, kafka: Kafka, rows: int, work: Path, timeout: float, profile: str, snapshot: bool
) -> dict[str, float]:
    del profile  # tidemark's settings are the same for both
    prefix = "tm" + uuid.uuid4().hex[:8]
    topic = f"{prefix}.{TABLE}"
    kafka.create_topics([topic])
    run_dir = work / prefix
    run_dir.mkdir(parents=True)
    cfg = {
        "name": prefix,
        "connector.class": "io.debezium.connector.cassandra.CassandraConnector",
        "topic.prefix": prefix,
        "cassandra.hosts": node.host,
        "cassandra.port": str(node.port),
        "cassandra.config": str(node.config),
        "table.include.list": r"bench\.t",
        "snapshot.mode": "initial" if snapshot else "never",
        "commit.log.transfer.class": "keep",
        "offset.backing.store.dir": str(run_dir / "offsets"),
        "cdc.dir.poll.interval.ms": "200",
    }
    settings = {
        "connector": "cassandra",
        "producer": {"bootstrap.servers": kafka.bootstrap, **PRODUCER},
        "offset_flush_interval_ms": 10000,
    }
    proc, started, log = spawn_tidemark(cfg, settings, run_dir)
    try:
        result = _wait_drained(kafka, topic, rows, proc.pid, started, timeout)
    except BenchError as exc:
        raise BenchError(f"{exc}\n{log.read_text(errors='replace')[-3000:]}") from None
    finally:
        stop_process(proc)
    return _sized(kafka, topic, result)


def _sized(kafka: Kafka, topic: str, result: dict[str, float]) -> dict[str, float]:
    """``result`` with the size of the topic's first record (key and value): both contenders
    write JSON with schemas, the records should be alike), then the topic dropped."""
    first = kafka.read(topic, 0, 1)[0]
    result["record_bytes"] = len(first.key() or b"") + len(first.value() or b"")
    kafka.delete_topics([topic])
    return result


CONTENDERS: dict[str, Callable[[Any, Kafka, int, Path, float, str, bool], dict[str, float]]] = {
    "debezium": run_debezium,
    "tidemark": run_tidemark,
}


def _show(name: str, rows: int, r: dict[str, float]) -> str:
    return (
        f"{name:9} {rows / r['wall_s']:>9,.0f} ev/s from spawn, {rows / r['drain_s']:>9,.0f} "
        f"ev/s first-to-last, {r['cpu_s'] / rows * 1e6:6.2f} CPU-s per 1M, "
        f"peak RSS {r['peak_rss_mb']:.0f} MB, {r['record_bytes']:.0f} B per record"
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the benchmark; returns what it writes to the results file."""
    p = argparse.ArgumentParser(prog="python -m bench.cassandra_compare", description=__doc__)
    p.add_argument("--rows", type=int, default=None, help="backlog of INSERTs (500,000)")
    p.add_argument("--runs", type=int, default=None, help="runs per contender (3)")
    p.add_argument("--quick", action="store_true", help="50,000 rows, one run")
    p.add_argument("--timeout", type=float, default=1800.0, help="per run (1800 s)")
    p.add_argument(
        "--profile", choices=sorted(PROFILES), default="default", help="the agent's settings"
    )
    p.add_argument(
        "--workload",
        choices=("drain", "snapshot"),
        default="drain",
        help="drain: the INSERTs from cdc_raw, no snapshot (default); snapshot: the table "
        "(CDC turned on after the INSERTs, so cdc_raw holds none) by the initial snapshot",
    )
    p.add_argument("--results", default=None, help=f"results folder (default {RESULTS})")
    args = p.parse_args(argv)
    results_dir = Path(args.results) if args.results else RESULTS
    rows = args.rows or (50_000 if args.quick else 500_000)
    runs = args.runs or (1 if args.quick else 3)
    env = stack_env([])
    kafka = Kafka(env["TIDEMARK_KAFKA_BOOTSTRAP"])
    home = results_dir / "cassandra-compare-node"
    shutil.rmtree(home, ignore_errors=True)
    work = results_dir / f"cassandra-compare-work-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    node = private_node(home)
    node.start()
    results: dict[str, list[dict[str, float]]] = {name: [] for name in CONTENDERS}
    load = [loadavg()]
    try:
        from cassandra.cluster import Cluster

        cluster = Cluster([node.host], port=node.port, protocol_version=5)
        snapshot = args.workload == "snapshot"
        fill(cluster.connect(), rows, cdc=not snapshot)
        cluster.shutdown()
        segments = len(list(node.cdc_raw.glob("CommitLog-*.log")))
        what = "rows to snapshot" if snapshot else "INSERTs"
        print(f"{args.workload}: {rows:,} {what}, {segments} segments in cdc_raw")
        for i in range(runs):
            order = list(CONTENDERS) if i % 2 == 0 else list(reversed(CONTENDERS))
            for name in order:
                r = CONTENDERS[name](node, kafka, rows, work, args.timeout, args.profile, snapshot)
                r["load_1m_after"] = loadavg()
                results[name].append(r)
                print(f"run {i + 1}: {_show(name, rows, r)}")
        load.append(loadavg())
    finally:
        kafka.close()
        node.stop(timeout=120)
    medians = {
        name: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        for name, rs in results.items()
    }
    print(f"\nmedian of {runs} run(s), {rows:,} events:")
    for name, m in medians.items():
        print(_show(name, rows, m))
    t, d = medians["tidemark"], medians["debezium"]
    ratios = {
        "events_per_s_from_spawn": d["wall_s"] / t["wall_s"],
        "events_per_s_first_to_last": d["drain_s"] / t["drain_s"],
        "cpu_per_event": t["cpu_s"] / d["cpu_s"],
    }
    print(
        f"tidemark / Debezium: {ratios['events_per_s_from_spawn']:.2f}x events/s from spawn, "
        f"{ratios['events_per_s_first_to_last']:.2f}x first-to-last, "
        f"{ratios['cpu_per_event']:.2f}x the CPU per event"
    )
    report = {
        "workload": args.workload,
        "rows": rows,
        "runs": runs,
        "debezium": f"debezium-connector-cassandra-5 {VERSION}",
        "profile": {args.profile: PROFILES[args.profile]},
        "load_1m": load,
        "results": results,
        "medians": medians,
        "ratios": ratios,
    }
    out = results_dir / f"cassandra_compare-{datetime.now(UTC):%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"results: {out}")
    return report


if __name__ == "__main__":
    main()
