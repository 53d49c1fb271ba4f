"""Rows/s of the Spark apply job against a plain Delta append of the same rows (baseline).

    .venv/bin/python -m bench.apply_bench [--events 1000000] [--batch 250000]

1. An N-row Delta table is created the way the job creates it (one seed event through the job,
   then N snapshot-read rows bulk-inserted with snapshot positions).
2. N mixed change events (55 % updates of live keys, a tenth of them with a TOAST placeholder,
   25 % inserts of new keys, 20 % deletes of live keys; JSON with schemas, as Debezium writes
   them) are produced to a fresh 2-partition topic.
3. **apply**: the real streaming job (``available-now``, ``--batch`` events per micro-batch)
   folds and MERGEs them into the table. **append**: a streaming query over the same topic and
   micro-batches that parses the envelope on the JVM and appends the flattened rows to an empty
   Delta table, with no per-key reduction and no MERGE: the floor any apply job pays.
   With ``--table-type merge-on-read`` the job appends each batch to the table's change log
   (cdc/apply/changelog.py) and one compaction after the drain MERGEs it: timed apart, and
   the ratio is printed with and without it.
4. Prints rows/s of both and their ratio, and checks the table has the expected row count. Also
   the CPU-seconds each query cost the whole process tree (driver JVM and Python workers, read
   from /proc): a figure the load of a shared machine distorts much less than wall time.

Both queries run in one SparkSession (``local[2]`` unless ``--master``), one after the other, on
data already in Kafka (a backlog drain). The topic is deleted afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from cdc.apply.config import ApplyConfig, from_mapping
from cdc.apply.job import ApplyJob, BatchReport
from cdc.apply.synthetic import SyntheticTable, col, decimal_col, pg

PH = "__debezium_unavailable_value"
COLUMNS = [
    ("id", col("int64", optional=False)),
    ("name", col("string")),
    ("email", col("string")),
    ("balance", decimal_col(12, 2)),
    ("qty", col("int32")),
    ("active", col("boolean")),
    ("updated", col("int64", name="io.debezium.time.MicroTimestamp")),
    ("note", col("string")),
]
#: The envelope as the append baseline parses it (raw JSON types: no decoding of decimals or
#: timestamps, which only makes the baseline cheaper).
RAW_ROW = (
    "id BIGINT, name STRING, email STRING, balance STRING, qty INT, active BOOLEAN, "
    "updated BIGINT, note STRING"
)
SNAPSHOT_LSN = 1_000


def money(cents: int) -> str:
    import base64

    return base64.b64encode(cents.to_bytes(6, "big", signed=True)).decode()


def row(i: int, version: int, rng: random.Random) -> dict[str, Any]:
    return {
        "id": i,
        "name": f"name-{i}-{version}",
        "email": f"user{i}@example.org",
        "balance": money(rng.randrange(-(10**9), 10**9)),
        "qty": rng.randrange(1000),
        "active": rng.random() < 0.5,
        "updated": 1_700_000_000_000_000 + version,
        "note": f"note {i} " * 8,
    }


def produce(t: SyntheticTable, bootstrap: str, n: int, seed: int = 1) -> dict[str, int]:
    """N mixed events for keys 0..N-1 (live at start) and new keys from N on."""
    from confluent_kafka import Producer

    rng = random.Random(seed)
    live = list(range(n))
    index = {k: k for k in live}
    next_id = n
    counts = {"u": 0, "c": 0, "d": 0, "toast": 0}
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 500_000,
        }
    )
    lsn = 10_000
    for _ in range(n):
        lsn += 16
        r = rng.random()
        if r < 0.55 and live:
            k = live[rng.randrange(len(live))]
            values = row(k, lsn, rng)
            if rng.random() < 0.1:
                values["note"] = PH
                counts["toast"] += 1
            op = "u"
        elif r < 0.80 or not live:
            k = next_id
            next_id += 1
            index[k] = len(live)
            live.append(k)
            values = row(k, lsn, rng)
            op = "c"
        else:
            pos = rng.randrange(len(live))
            k = live[pos]
            last = live.pop()
            if pos < len(live):
                live[pos] = last
                index[last] = pos
            del index[k]
            values = {
                "id": k,
                "name": "",
                "email": None,
                "balance": None,
                "qty": None,
                "active": None,
                "updated": None,
                "note": None,
            }
            op = "d"
        counts[op] += 1
        key, value = t.record(op, values, pg(lsn))
        while True:
            try:
                producer.produce(t.topic, key=key, value=value)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(120)
    counts["live"] = len(live)
    return counts


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[
        topic
    ].result(60)


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(60)


def seed_table(spark: Any, cfg: ApplyConfig, t: SyntheticTable, n: int) -> str:
    """Creates the table through the job (one snapshot read), then bulk-inserts N rows with
    snapshot positions, as an initial snapshot would have left them."""
    from pyspark.sql import functions as F

    key, value = t.record("r", row(-1, 0, random.Random(0)), pg(SNAPSHOT_LSN))
    seed = spark.createDataFrame(
        [(key, value, t.topic, 0, 0)],
        "key binary, value binary, topic string, partition int, offset bigint",
    )
    ApplyJob(spark, cfg).process_batch(seed, 0)
    name = t.topic.replace(".", "_")
    path = cfg.table_location(name)
    table = spark.read.format("delta").load(path)
    ids = spark.range(n).withColumnRenamed("id", "i")
    values = {
        "id": F.col("i"),
        "name": F.concat(F.lit("name-"), F.col("i").cast("string"), F.lit("-0")),
        "email": F.concat(F.lit("user"), F.col("i").cast("string"), F.lit("@example.org")),
        "balance": (F.col("i") % 100_000 / 100).cast("decimal(12,2)"),
        "qty": (F.col("i") % 1000).cast("int"),
        "active": F.col("i") % 2 == 0,
        "updated": F.expr("cast(timestamp'2024-01-01 00:00:00' as timestamp_ntz)"),
        "note": F.concat(F.lit("note "), F.col("i").cast("string")),
        "__op": F.lit("r"),
        "__pos": F.array(F.lit(0).cast("long"), F.lit(SNAPSHOT_LSN).cast("long"), F.col("i")),
        "__source_ts_ms": F.lit(1_700_000_000_000).cast("long"),
        "__ts_ms": F.lit(1_700_000_000_001).cast("long"),
        "__tx_id": F.lit(None).cast("string"),
        "__snapshot": F.lit(True),
        "__source_position": F.lit(f"lsn={SNAPSHOT_LSN}"),
        "__topic": F.lit(t.topic),
        "__partition": F.lit(0),
        "__offset": F.col("i"),
    }
    rows = ids.select(*[values[f.name].cast(f.dataType).alias(f.name) for f in table.schema])
    rows.write.format("delta").mode("append").save(path)
    return path


def tree_cpu_s(root: int | None = None) -> float:
    """CPU-seconds (user + system, with reaped children) of this process and all its
    descendants: the Spark JVM it launched and that JVM's Python workers. 0.0 off Linux."""
    import os

    proc = Path("/proc")
    if not proc.is_dir():
        return 0.0
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        ticks[int(entry.name)] = sum(int(f) for f in fields[11:15])
    total, todo = 0, [root or os.getpid()]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo += children.get(pid, [])
    return total / os.sysconf("SC_CLK_TCK")


def run_apply(spark: Any, cfg: ApplyConfig) -> tuple[float, ApplyJob]:
    job = ApplyJob(spark, cfg)
    started = time.monotonic()
    job.run(trigger="available-now")
    return time.monotonic() - started, job


def run_append(spark: Any, cfg: ApplyConfig, target: str, checkpoint: str) -> float:
    from pyspark.sql import functions as F

    envelope = (
        f"payload STRUCT<before: STRUCT<{RAW_ROW}>, after: STRUCT<{RAW_ROW}>, op: STRING, "
        "source: STRUCT<lsn: BIGINT, ts_ms: BIGINT>, ts_ms: BIGINT>"
    )
    source = ApplyJob(spark, cfg).source()
    parsed = source.select(
        F.from_json(F.col("value").cast("string"), envelope).alias("e"),
        "topic",
        "partition",
        "offset",
    )
    flat = parsed.select(
        F.coalesce(F.col("e.payload.after"), F.col("e.payload.before")).alias("r"),
        F.col("e.payload.op").alias("__op"),
        F.col("e.payload.source.lsn").alias("__lsn"),
        "topic",
        "partition",
        "offset",
    ).select("r.*", "__op", "__lsn", "topic", "partition", "offset")
    started = time.monotonic()
    query = (
        flat.writeStream.format("delta")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(target)
    )
    query.awaitTermination()
    return time.monotonic() - started


def main(argv: list[str] | None = None, spark: Any = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--events", type=int, default=1_000_000, help="change events (default 1M)")
    p.add_argument("--rows", type=int, default=None, help="initial table rows (default = events)")
    p.add_argument("--batch", type=int, default=250_000, help="events per micro-batch")
    p.add_argument("--partitions", type=int, default=2, help="partitions of the bench topic")
    p.add_argument("--bootstrap", default="127.0.0.1:19092")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="1g")
    p.add_argument("--workdir", default=None, help="where tables go (default: a temp dir)")
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting for the session, e.g. "
        "spark.databricks.delta.properties.defaults.enableDeletionVectors=true",
    )
    p.add_argument(
        "--table-type",
        default="copy-on-write",
        choices=("copy-on-write", "merge-on-read"),
        help="the job's table.type; merge-on-read also times one compaction after the drain",
    )
    p.add_argument(
        "--compaction-every",
        default="none",
        help="merge-on-read: compaction.every during the drain (default none: only the one after)",
    )
    p.add_argument("--keep", action="store_true", help="keep the topic and the tables")
    p.add_argument("--json", action="store_true", help="print the result as JSON too")
    args = p.parse_args(argv)
    n_rows = args.events if args.rows is None else args.rows
    base = Path(args.workdir or tempfile.mkdtemp(prefix="apply-bench-"))
    t = SyntheticTable(f"accounts_{uuid.uuid4().hex[:8]}", COLUMNS, ["id"], server="bench")
    cfg = from_mapping(
        {
            "kafka.bootstrap.servers": args.bootstrap,
            "kafka.topics": [t.topic],
            "kafka.max.offsets.per.trigger": args.batch,
            "target.path": str(base / "lake"),
            "checkpoint.location": str(base / "checkpoint-apply"),
            "trigger": "available-now",
            "table.type": args.table_type,
            "compaction.every": args.compaction_every,
            "spark.master": args.master,
            "spark.conf": {
                "spark.ui.enabled": "false",
                "spark.driver.memory": args.driver_memory,
                **dict(c.split("=", 1) for c in args.conf),
            },
        }
    )
    if spark is None:
        from cdc.apply.session import get_session

        spark = get_session(cfg)
    create_topic(args.bootstrap, t.topic, args.partitions)
    try:
        t0 = time.monotonic()
        counts = produce(t, args.bootstrap, args.events)
        produce_s = time.monotonic() - t0
        path = seed_table(spark, cfg, t, n_rows)
        before = spark.read.format("delta").load(path).count()
        cpu0 = tree_cpu_s()
        apply_s, job = run_apply(spark, cfg)
        apply_cpu = tree_cpu_s() - cpu0
        compact_s = compact_cpu = 0.0
        compact_phases: dict[str, int] = {}
        if cfg.merge_on_read:
            name = path.rstrip("/").rsplit("/", 1)[-1]
            viewed = job.read_table(name).count()  # the real-time view, before the compaction
            cpu0 = tree_cpu_s()
            started = time.monotonic()
            compaction = BatchReport(-1)
            job.compact_all(report=compaction)
            compact_s = time.monotonic() - started
            compact_phases = dict(compaction.timings)
            compact_cpu = tree_cpu_s() - cpu0
        after = spark.read.format("delta").load(path).count()
        if not cfg.merge_on_read:
            viewed = after
        cpu0 = tree_cpu_s()
        append_s = run_append(
            spark, cfg, str(base / "append-table"), str(base / "checkpoint-append")
        )
        append_cpu = tree_cpu_s() - cpu0
        appended = spark.read.format("delta").load(str(base / "append-table")).count()
    finally:
        if not args.keep:
            delete_topic(args.bootstrap, t.topic)
    expected = counts["live"] + (n_rows - args.events) + 1  # + the seed row
    result = {
        "events": args.events,
        "initial_rows": before,
        "final_rows": after,
        "expected_rows": expected,
        "mix": {k: counts[k] for k in ("u", "c", "d", "toast")},
        "micro_batches": len(job.reports),
        "batch_events": args.batch,
        "produce_s": round(produce_s, 1),
        "apply_s": round(apply_s, 1),
        "apply_rows_per_s": round(args.events / apply_s),
        "append_s": round(append_s, 1),
        "append_rows_per_s": round(appended / append_s),
        "ratio_apply_to_append": round((args.events / apply_s) / (appended / append_s), 3),
        "apply_cpu_s": round(apply_cpu, 1),
        "append_cpu_s": round(append_cpu, 1),
        "cpu_ratio_apply_to_append": (
            round((args.events / apply_cpu) / (appended / append_cpu), 3) if apply_cpu else None
        ),
        "batch_lines": [r.line() for r in job.reports],
        "table_type": args.table_type,
        "viewed_rows": viewed,
        "compact_s": round(compact_s, 1),
        "compact_cpu_s": round(compact_cpu, 1),
        "compact_phases_ms": compact_phases,
    }
    if cfg.merge_on_read:
        with_compaction = (args.events / (apply_s + compact_s)) / (appended / append_s)
        result["ratio_with_compaction"] = round(with_compaction, 3)
        by_cpu = (args.events / (apply_cpu + compact_cpu)) / (appended / append_cpu)
        result["cpu_ratio_with_compaction"] = round(by_cpu, 3) if apply_cpu else None
    print(
        f"events: {args.events:,} ({counts['u']:,} u incl. {counts['toast']:,} TOAST, "
        f"{counts['c']:,} c, {counts['d']:,} d) into a {before:,}-row Delta table"
    )
    for line in result["batch_lines"]:
        print("  " + line)
    print(
        f"apply : {apply_s:8.1f} s  {result['apply_rows_per_s']:>9,} rows/s  "
        f"({len(job.reports)} micro-batches of <= {args.batch:,})"
    )
    print(f"append: {append_s:8.1f} s  {result['append_rows_per_s']:>9,} rows/s  (baseline)")
    print(f"ratio apply/append: {result['ratio_apply_to_append']}")
    print(
        f"CPU-s (process tree): apply {apply_cpu:.1f}, append {append_cpu:.1f}, "
        f"ratio by CPU: {result['cpu_ratio_apply_to_append']}"
    )
    if cfg.merge_on_read:
        print(
            f"merge-on-read: the drain logged its batches; one compaction after it: "
            f"{compact_s:.1f} s, {compact_cpu:.1f} CPU-s; ratio with it: "
            f"{result['ratio_with_compaction']} (wall), {result['cpu_ratio_with_compaction']} "
            f"(CPU); real-time view before it: {viewed:,} rows"
        )
        print(
            "  compaction phases (ms): "
            + " ".join(f"{k.split(':', 1)[0]}={v}" for k, v in compact_phases.items())
        )
    print(f"rows: {after:,} in the table, {expected:,} expected")
    if args.json:
        print(json.dumps(result))
    if after != expected or viewed != expected:
        print("error: the table does not have the expected row count", file=sys.stderr)
    if not args.keep and args.workdir is None:
        shutil.rmtree(base, ignore_errors=True)
    return result


if __name__ == "__main__":
    main()
