"""Decode the same Cassandra commit log segments with tidemark's pure-Python reader and with
Cassandra's own ``CommitLogReader`` on the JVM (the anchor), from the same node's jars.

    .venv/bin/python -m bench.cassandra_reader [--rows 200000] [--runs 3] [--reuse]

1. starts a private Cassandra 5.0.9 node (``tidemark dev``'s launcher, its own home under
   ``bench/results/cassandra-node`` and ports 19142/17100), creates a CDC table and writes
   ``--rows`` single-row INSERTs (one mutation each, plus the node's own system writes);
2. stops the node (it drains and closes its segments) and copies the segments from cdc_raw;
3. times both readers over all segments, ``--runs`` times after a warm-up: mutations/s and
   CPU seconds per million mutations. The JVM figures are measured inside the JVM (thread
   CPU time, no JVM start-up or schema load); the JVM needs ``javac`` (a JDK) to compile the
   anchor.

``--reuse`` decodes the segments of the last run again, with the table definitions saved next
to them (``segments/schema.json``): no node is started. Results go to
``bench/results/cassandra_reader-<time>.json``; docs/benchmarks.md quotes them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

ANCHOR = Path(__file__).with_name("cassandra_reader_anchor.java")

RESULTS = Path(__file__).parent / "results"


def private_node(home: Path) -> Any:
    """A private node beside the shared one: CQL on ``BENCH_CASSANDRA_PORT`` (19142),
    internode on ``BENCH_CASSANDRA_STORAGE_PORT`` (17100), whatever the stack's variables
    say (a test run's own node keeps its ports)."""
    from worker.dev.cassandra import CassandraService

    node = CassandraService(home, int(os.environ.get("BENCH_CASSANDRA_PORT", "19142")))
    node.storage_port = int(os.environ.get("BENCH_CASSANDRA_STORAGE_PORT", "17100"))
    return node


def fill(session: Any, rows: int, cdc: bool = True) -> None:
    """Creates ``bench.t`` afresh and writes ``rows`` single-row INSERTs. With ``cdc`` the
    table is a CDC table from the start (the INSERTs reach ``cdc_raw``); without, CDC is
    turned on after them (a table to snapshot with nothing in ``cdc_raw``)."""
    from cassandra.concurrent import execute_concurrent_with_args

    session.execute("DROP KEYSPACE IF EXISTS bench")
    session.execute(
        "CREATE KEYSPACE bench WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    session.execute(
        "CREATE TABLE bench.t (id int, ck int, v text, n bigint, d double, "
        f"PRIMARY KEY (id, ck)) WITH cdc = {str(cdc).lower()}"
    )
    stmt = session.prepare("INSERT INTO bench.t (id, ck, v, n, d) VALUES (?, ?, ?, ?, ?)")
    t0 = time.monotonic()
    for start in range(0, rows, 20000):
        args = [
            (i, i % 7, f"value-{i}", i * 3, i / 7) for i in range(start, min(rows, start + 20000))
        ]
        execute_concurrent_with_args(session, stmt, args, concurrency=64)
    print(f"wrote {rows} rows in {time.monotonic() - t0:.1f} s")
    if not cdc:
        session.execute("ALTER TABLE bench.t WITH cdc = true")


def write_segments(rows: int, home: Path, out: Path) -> list[Path]:
    from cassandra.cluster import Cluster

    node = private_node(home)
    node.start()
    try:
        session = Cluster([node.host], port=node.port, protocol_version=5).connect()
        fill(session, rows)
        session.cluster.shutdown()
    finally:
        node.stop(timeout=120)  # drains: segments are synced and closed
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    segments = []
    for p in sorted(node.cdc_raw.glob("CommitLog-*.log")):
        if p.with_name(p.name[:-4] + "_cdc.idx").exists():
            shutil.copy(p, out / p.name)
            shutil.copy(p.with_name(p.name[:-4] + "_cdc.idx"), out)
            segments.append(out / p.name)
    return segments


def python_reader(segments: list[Path], tables: Any, runs: int) -> list[dict[str, float]]:
    from connectors.cassandra.commitlog import iter_mutations, read_cdc_index

    lookup, by_raw = tables
    datas = []
    for p in segments:
        idx = read_cdc_index(p)
        datas.append((p.name, p.read_bytes(), idx.offset if idx else None))
    out = []
    for run in range(runs + 1):
        mutations = rows = 0
        c0, t0 = time.process_time(), time.perf_counter()
        for name, data, limit in datas:
            # as the connector reads a segment (without its keyspace filter): every entry
            # framed, CRC-checked and decoded; a mutation that does not decode (an unknown
            # table) comes with its error
            for _, _, _, updates, _ in iter_mutations(data, name, lookup, by_raw, limit=limit):
                mutations += 1
                for _, update_rows, _ in updates:
                    rows += len(update_rows)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        out.append({"run": run, "mutations": mutations, "rows": rows, "cpu_s": cpu, "wall_s": wall})
        print("python", out[-1])
    return out[1:]


def schema_lookup(home: Path, saved: Path) -> Any:
    """The table definitions, read from the node over CQL (started again briefly) and saved
    next to the segments; ``--reuse`` reads the saved ones instead of starting the node."""
    from connectors.cassandra.tabledef import table_from_json, tables_by_raw_id

    if not saved.exists():
        from cassandra.cluster import Cluster

        from connectors.cassandra.schema import SchemaCache

        node = private_node(home)
        node.start()
        try:
            session = Cluster([node.host], port=node.port, protocol_version=5).connect()
            cache = SchemaCache(session)
            session.cluster.shutdown()
        finally:
            node.stop(timeout=120)
        saved.write_text(json.dumps([t.to_json() for t in cache.by_id.values()]))
    tables = {t.id: t for t in map(table_from_json, json.loads(saved.read_text()))}
    return tables.get, tables_by_raw_id(tables.values())


def jvm_reader(segments: list[Path], home: Path, runs: int, work: Path) -> list[dict[str, float]]:
    from worker.dev.cassandra import CASSANDRA_VERSION, JVM17_OPTIONS
    from worker.dev.kafka import resolve_jars

    javac = shutil.which("javac")
    if javac is None:
        raise SystemExit(
            "javac not found: the JVM anchor needs a JDK (apt-get install openjdk-17-jdk-headless)"
        )
    lib = resolve_jars("cassandra", CASSANDRA_VERSION)
    subprocess.run([javac, "-cp", f"{lib}/*", "-d", str(work), str(ANCHOR)], check=True)
    node = private_node(home)
    node.prepare()
    jamm = sorted(lib.glob("jamm-*.jar"))
    cmd = [
        "java",
        "-Xmx1g",
        f"-javaagent:{jamm[0]}",
        *JVM17_OPTIONS,
        f"-Dcassandra.config=file://{node.config}",
        f"-Dcassandra.storagedir={node.data}",
        "-Dcassandra.logdir=" + str(work),
        "-Dlogback.configurationFile="
        + str(Path(__file__).parents[1] / "worker" / "dev" / "conf" / "cassandra-logback.xml"),
        "-cp",
        f"{work}:{lib}/*",
        "CommitLogBench",
        str(runs),
        *map(str, segments),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"the JVM anchor failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    for ln in lines:
        print("jvm", ln)
    return lines[1:]


def summary(runs: list[dict[str, float]]) -> dict[str, float]:
    best = sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]  # median by wall time
    return {
        "mutations": best["mutations"],
        "rows": best["rows"],
        "mutations_per_s": best["mutations"] / best["wall_s"],
        "cpu_s_per_1m": best["cpu_s"] / best["mutations"] * 1e6,
        "wall_s": best["wall_s"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reuse", action="store_true", help="use the segments of the last run")
    args = ap.parse_args()
    work = RESULTS / "cassandra-reader"
    home = work / "node"
    segdir = work / "segments"
    if args.reuse and segdir.exists():
        segments = sorted(segdir.glob("CommitLog-*.log"))
    else:
        shutil.rmtree(home, ignore_errors=True)
        segments = write_segments(args.rows, home, segdir)
    lookup = schema_lookup(home, segdir / "schema.json")
    py = summary(python_reader(segments, lookup, args.runs))
    jvm = summary(jvm_reader(segments, home, args.runs, work))
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "segments": len(segments),
        "bytes": sum(p.stat().st_size for p in segments),
        "python": py,
        "jvm": jvm,
        "ratio_mutations_per_s": py["mutations_per_s"] / jvm["mutations_per_s"],
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"cassandra_reader-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
