"""The apply job killed with SIGKILL mid-drain, as a lost node or an OOM kill would end it.

The job runs as users run it (``python -m cdc.apply job.yaml``, its own Spark JVM and Python
workers) over a two-partition topic holding a seeded history of inserts, updates (some with a
TOAST placeholder), deletes with their tombstones and re-inserts of deleted keys. Its whole
process group is killed at a seeded moment while the second micro-batch is in flight, then it
runs to the end. The table must then hold exactly the source's last state per key: every live
row with every column, no deleted key, no row twice. For merge-on-read tables that batch also
compacts the change log (``compaction.every: 2``), so the kill may land in the compaction; the
real-time view is reconciled, then the table itself after a final compaction.

Why a real kill and not an exception in a batch (test_apply_direct_reader covers that): a
kill also cuts Delta's commit and Spark's checkpoint writes at any instruction, and leaves no
chance to clean up; what survives must be enough for the restart.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from cdc.apply import config as cfgmod
from cdc.apply.job import ApplyJob
from cdc.apply.synthetic import SyntheticTable, pg
from tests.integration.test_apply_acceptance import (
    data_rows,
    items,
    job_yaml,
    two_partition_topic,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

PH = "__debezium_unavailable_value"
ROOT = Path(__file__).resolve().parents[2]
KEYS = 600
EVENTS = 5_000
PER_BATCH = 2_000


def history(t: SyntheticTable, kafka: str, seed: int) -> dict[int, dict[str, Any]]:
    """Produces the seeded history; returns the source's last state (live rows by key)."""
    rng = random.Random(seed)
    producer = Producer({"bootstrap.servers": kafka, "linger.ms": 20})
    live: dict[int, dict[str, Any]] = {}
    lsn = 1_000
    for n in range(EVENTS):
        lsn += 8
        k = rng.randrange(KEYS)
        old = live.get(k)
        if old is None:
            op, row = "c", {"id": k, "name": f"n{k}.{n}", "qty": n}
            live[k] = row
        elif rng.random() < 0.2:
            op, row = "d", old
            del live[k]
        else:
            op = "u"
            if rng.random() < 0.15:  # unchanged TOAST column: the stored value stays
                row = {"id": k, "name": PH, "qty": n}
                live[k] = {**old, "qty": n}
            else:
                row = {"id": k, "name": f"n{k}.{n}", "qty": n}
                live[k] = row
        key, value = t.record(op, row, pg(lsn))
        producer.produce(t.topic, key=key, value=value)
        if op == "d":
            producer.produce(t.topic, key=key, value=None)  # Debezium's tombstone
        producer.poll(0)
    assert producer.flush(60) == 0
    return live


def batch_ids(checkpoint: Path, kind: str) -> set[int]:
    d = checkpoint / kind
    return {int(p.name) for p in d.iterdir() if p.name.isdigit()} if d.is_dir() else set()


def start_job(config: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "cdc.apply", str(config), "--trigger", "available-now"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the JVM and Python workers too
        )


def kill_mid_batch(
    proc: subprocess.Popen[bytes], checkpoint: Path, after: int, rng: random.Random, log: Path
) -> int:
    """Waits until at least ``after`` batches are committed and the next one is in flight
    (its offsets logged, its commit not yet), then kills the job's whole process group a
    random moment later. Returns the batches committed before the kill."""
    deadline = time.monotonic() + 240
    while True:
        committed = batch_ids(checkpoint, "commits")
        if len(committed) >= after and batch_ids(checkpoint, "offsets") - committed:
            break
        if proc.poll() is not None:
            pytest.fail(f"the job ended (rc {proc.returncode}) before the kill:\n{tail(log)}")
        if time.monotonic() > deadline:
            pytest.fail(f"no batch in flight after {after} commits:\n{tail(log)}")
        time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 1.5))
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL, tail(log)
    return len(committed)


def tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-40:])


@pytest.mark.parametrize("table_type", ["copy-on-write", "merge-on-read"])
def test_the_table_reconciles_after_a_kill_mid_batch(
    spark: Any, kafka: str, tmp_path: Path, table_type: str
) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    t = items("sigkill")
    two_partition_topic(kafka, t)
    expected = history(t, kafka, seed)
    extra = f"table.type: {table_type}\nkafka.max.offsets.per.trigger: {PER_BATCH}\n"
    if table_type == "merge-on-read":
        extra += "compaction.every: 2\n"
    extra += "spark.master: local[2]\nspark.conf:\n  spark.ui.enabled: 'false'\n"
    config = job_yaml(tmp_path, kafka, t.topic, extra)
    checkpoint = tmp_path / "ckpt"
    log = tmp_path / "job.log"

    killed_after = kill_mid_batch(start_job(config, log), checkpoint, 1, rng, log)
    last = tmp_path / "last-run.log"
    proc = start_job(config, last)
    assert proc.wait(300) == 0, tail(last)
    # a clean exit: the last batch's progress line reached the log, and no listener error
    # (Spark's listener bus used to post it after the Python side had gone)
    final = max(batch_ids(checkpoint, "commits"))
    assert f"batch {final}: input_rows=" in last.read_text(), tail(last)
    assert "PythonStreamingQueryListenerWrapper threw" not in last.read_text(), tail(last)

    context = f"seed {seed}, killed after {killed_after} committed batches"
    cfg = cfgmod.load(config)
    job = ApplyJob(spark, cfg)
    name = t.topic.replace(".", "_")
    want = [expected[k] for k in sorted(expected)]
    got = data_rows(job.read_table(name))
    assert len({r["id"] for r in got}) == len(got), context
    assert got == want, context
    if table_type == "merge-on-read":
        job.compact_all()
        got = data_rows(spark.read.format("delta").load(cfg.table_location(name)))
        assert got == want, context
