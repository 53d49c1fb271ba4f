"""Starting a contender on a slot, and measuring it the same way whichever it is.

A *capture* contender (tidemark or Debezium Server) is a long-running process that writes
to Kafka; the harness watches the topic's end offset to know when it is done, reads the
broker's append timestamps for timing, and samples /proc/<pid> for CPU and memory. A
*limit* contender (``pg_recvlogical``, ``COPY … TO STDOUT``) exits on its own; its CPU and
peak RSS come from ``wait4``'s rusage.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench.compare import debezium
from bench.compare.common import (
    ROOT,
    BenchError,
    Kafka,
    ProcSample,
    pg_dsn,
    proc_sample,
    spawn,
    stop_process,
)
from bench.compare.workloads import Database

# Same on both sides. Java and librdkafka share these property names. batch.size is set
# explicitly because the defaults differ (Java 16 KiB, librdkafka 1 MB).
PRODUCER: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "batch.size": 1048576,
    "compression.type": "lz4",
    "max.in.flight.requests.per.connection": 5,
}

# Debezium's documented generic defaults, and the tuned profile of the Conduit benchmark (D3).
PROFILES: dict[str, dict[str, int]] = {
    "default": {"max.batch.size": 2048, "max.queue.size": 8192, "poll.interval.ms": 500},
    "tuned": {"max.batch.size": 20000, "max.queue.size": 100000, "poll.interval.ms": 100},
}

CAPTURE = ("tidemark", "debezium")
#: tidemark with snapshot.max.threads=2 (W4 only: two readers of one exported snapshot)
TIDEMARK_2R = "tidemark-2r"


@dataclass
class Options:
    """What every contender shares in one harness invocation."""

    env: dict[str, str]
    kafka: Kafka
    workdir: Path
    profile: str = "default"
    offset_flush_ms: int = 10000
    jvm_opts: list[str] = field(default_factory=list)
    java: str | None = None
    debezium_home: Path | None = None
    #: tidemark's ``envelope.version``: "3" compares like with like (no version allow-list)
    envelope_version: str = "3"


@dataclass
class Running:
    """A capture contender that is up."""

    name: str
    proc: subprocess.Popen[bytes]
    started: float
    log_path: Path
    topic_prefix: str
    slot: str
    handle: Any = None
    namespace: str = "public"  # PostgreSQL schema, or MariaDB database: the topic's middle

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])

    def topic(self, table: str) -> str:
        return f"{self.topic_prefix}.{self.namespace}.{table}"


def start_capture(
    name: str,
    opts: Options,
    db: Database,
    *,
    slot: str,
    topic_prefix: str,
    snapshot_mode: str,
    tag: str,
    extra: dict[str, str] | None = None,
) -> Running:
    """Start tidemark or Debezium Server on ``slot`` with the shared queue and producer
    settings; returns as soon as the process is spawned (``started`` is that instant).
    ``extra``: more connector keys for both (Debezium Server gets them under
    ``debezium.source.``), e.g. W8's signal table and chunk size."""
    queue = PROFILES[opts.profile]
    run_dir = opts.workdir / tag / name
    run_dir.mkdir(parents=True, exist_ok=True)
    publication = db.publication("tm" if name in ("tidemark", TIDEMARK_2R) else "dbz")
    if name in ("tidemark", TIDEMARK_2R):
        cfg = {
            "name": f"bench-{topic_prefix}",
            "topic.prefix": topic_prefix,
            "database.hostname": opts.env["TIDEMARK_PG_HOST"],
            "database.port": opts.env["TIDEMARK_PG_PORT"],
            "database.user": opts.env["TIDEMARK_PG_USER"],
            "database.password": opts.env["TIDEMARK_PG_PASSWORD"],
            "database.dbname": db.name,
            "plugin.name": "pgoutput",
            "slot.name": slot,
            "publication.name": publication,
            "publication.autocreate.mode": "disabled",
            # Streaming from the prepared slot: "never" reads no rows and streams the slot
            # from where it is, which is what Debezium 3.x's no_data does.
            "snapshot.mode": "never" if snapshot_mode == "no_data" else snapshot_mode,
            "snapshot.max.threads": "2" if name == TIDEMARK_2R else "1",
            "envelope.version": opts.envelope_version,
            **{k: v for k, v in queue.items()},
            **(extra or {}),
        }
        settings = {
            "producer": {"bootstrap.servers": opts.env["TIDEMARK_KAFKA_BOOTSTRAP"], **PRODUCER},
            "offset_flush_interval_ms": opts.offset_flush_ms,
        }
        proc, started, log_path = spawn_tidemark(cfg, settings, run_dir)
        return Running(name, proc, started, log_path, topic_prefix, slot)
    if name == "debezium":
        assert opts.java is not None and opts.debezium_home is not None
        props = debezium.properties(
            env=opts.env,
            db=db.name,
            slot=slot,
            publication=publication,
            topic_prefix=topic_prefix,
            snapshot_mode=snapshot_mode,
            queue=queue,
            producer=PRODUCER,
            offsets_file=run_dir / "offsets.dat",
            offset_flush_ms=opts.offset_flush_ms,
            http_port=debezium.new_http_port(),
        )
        props.update({f"debezium.source.{k}": v for k, v in (extra or {}).items()})
        started = time.time()
        handle = debezium.start(opts.debezium_home, opts.java, run_dir, props, opts.jvm_opts)
        return Running(name, handle.proc, started, handle.log_path, topic_prefix, slot, handle)
    raise BenchError(f"unknown contender {name}")


def spawn_tidemark(
    cfg: dict[str, Any], settings: dict[str, Any], run_dir: Path, cwd: Path = ROOT
) -> tuple[subprocess.Popen[bytes], float, Path]:
    """Start ``bench.compare.tidemark_child`` with its config saved next to its log; returns
    the process, the instant it was spawned and the log path. ``cwd``: the checkout whose
    code runs (``python -m`` imports from it first)."""
    (run_dir / "tidemark-config.json").write_text(
        json.dumps({"connector": cfg, "engine": settings}, indent=2)
    )
    log_path = run_dir / "tidemark.log"
    with open(log_path, "wb") as log:
        started = time.time()
        proc = spawn(
            [
                sys.executable,
                "-m",
                "bench.compare.tidemark_child",
                json.dumps(cfg),
                json.dumps(settings),
            ],
            cwd=cwd,
            log=log,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    return proc, started, log_path


def stop_capture(run: Running) -> None:
    stop_process(run.proc, timeout=60)
    handle = run.handle
    if handle is not None:
        handle.log.close()


class Sampler:
    """Samples /proc/<pid> in the background (1 Hz by default) so a run has an RSS and CPU
    time line, not only end points."""

    def __init__(self, pid: int, interval: float = 1.0) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[ProcSample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            s = proc_sample(self.pid)
            if s is None:
                return
            self.samples.append(s)
            self._stop.wait(self.interval)


def wait_for_count(
    kafka: Kafka,
    run: Running,
    topic: str,
    expected: int,
    timeout: float,
    poll: float = 0.1,
) -> tuple[ProcSample, int, ProcSample]:
    """Poll the topic until it holds ``expected`` records. Returns the process sample and
    record count at the first poll that saw any record, and the sample at completion."""
    deadline = time.monotonic() + timeout
    first: tuple[ProcSample, int] | None = None
    while True:
        count = kafka.end_offset(topic)
        sample = proc_sample(run.proc.pid)
        if sample is None or run.proc.poll() is not None:
            raise BenchError(
                f"{run.name} exited (code {run.proc.poll()}) with {count}/{expected} records "
                f"in {topic}:\n{run.log_tail()}"
            )
        if count and first is None:
            first = (sample, count)
        if count >= expected:
            assert first is not None
            if count > expected:
                raise BenchError(f"{topic} holds {count} records, expected {expected}")
            return first[0], first[1], sample
        if time.monotonic() > deadline:
            raise BenchError(
                f"{run.name}: only {count}/{expected} records in {topic} after {timeout:.0f} s"
                f":\n{run.log_tail()}"
            )
        time.sleep(poll)


class Source(Protocol):
    """The database side of a drain: PostgreSQL's walsender is a process whose CPU is
    recorded; a MariaDB binlog dump is a server thread (None)."""

    def walsender_pid(self, slot: str) -> int | None: ...


def measure_drain(
    opts: Options,
    run: Running,
    db: Source,
    expected: dict[str, int],
    timeout: float,
) -> dict[str, Any]:
    """Throughput of a capture contender draining a backlog (or a snapshot) into Kafka."""
    main_topic = run.topic("bench_rows")
    with Sampler(run.proc.pid) as sampler:
        first, first_count, last = wait_for_count(
            opts.kafka, run, main_topic, expected["bench_rows"], timeout
        )
        wal_pid = db.walsender_pid(run.slot)
        wal = proc_sample(wal_pid) if wal_pid else None
    n = expected["bench_rows"]
    for table, count in expected.items():
        if table == "bench_rows":
            continue
        got = _wait_exact(opts.kafka, run.topic(table), count, 30)
        if got != count:
            raise BenchError(f"{run.topic(table)} holds {got} records, expected {count}")
    t_first = opts.kafka.timestamp_at(main_topic, 0)
    t_last = opts.kafka.timestamp_at(main_topic, n - 1)
    drain_s = max(t_last - t_first, 1e-3)
    cpu_drain = last.cpu_s - first.cpu_s
    # CPU from the poll that saw the first record to the one that saw the last, divided by
    # the records produced in between, so startup and polling granularity cancel out. When
    # most records arrived before the first poll saw any (tiny runs), that window says
    # nothing: fall back to the process's whole CPU time, start-up included.
    between = n - first_count
    basis = "drain" if between >= n / 2 else "total"
    cpu_per_1m = (cpu_drain / between if basis == "drain" else last.cpu_s / n) * 1e6
    peak_rss = max([last.hwm_mb, *(s.hwm_mb for s in sampler.samples)])
    return {
        "events": n,
        "wall_s": t_last - run.started,
        "first_event_s": t_first - run.started,
        "drain_s": drain_s,
        "events_per_s": (n - 1) / drain_s if n > 1 else float("nan"),
        "cpu_total_s": last.cpu_s,
        "cpu_drain_s": cpu_drain,
        "cpu_s_per_1m": cpu_per_1m,
        "cpu_basis": basis,
        "peak_rss_mb": peak_rss,
        "rss_end_mb": last.rss_mb,
        "walsender_cpu_s": wal.cpu_s if wal else float("nan"),
    }


def _wait_exact(kafka: Kafka, topic: str, expected: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    count = kafka.end_offset(topic)
    while count < expected and time.monotonic() < deadline:
        time.sleep(0.1)
        count = kafka.end_offset(topic)
    return count


def wait4_child(
    cmd: list[str], env: dict[str, str] | None = None, stdout: Any = None
) -> dict[str, Any]:
    """Run a limit contender to completion; wall time, CPU and peak RSS from its rusage."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=stdout if stdout is not None else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise BenchError(f"{cmd[0]} failed ({proc.returncode}): {err[-1000:]}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
    }


def run_pg_recvlogical(
    opts: Options, db: Database, slot: str, end_lsn: int, events: int
) -> dict[str, Any]:
    """The decode + transport limit: pg_recvlogical (pgoutput, the same publication
    contents, protocol version 1 like both contenders) to /dev/null up to the end LSN."""
    from connectors.postgres.pgoutput import lsn_to_str
    from worker.dev.postgres import find_bindir

    cmd = [
        str(find_bindir() / "pg_recvlogical"),
        "-d",
        pg_dsn(opts.env, db.name),
        "--slot",
        slot,
        "--start",
        "-f",
        "/dev/null",
        "-o",
        "proto_version=1",
        "-o",
        f"publication_names={db.publication('recv')}",
        "--no-loop",
        f"--endpos={lsn_to_str(end_lsn)}",
    ]
    r = wait4_child(cmd, env={**os.environ, "PGPASSWORD": opts.env["TIDEMARK_PG_PASSWORD"]})
    return limit_row(r, events)


def run_copy(opts: Options, db: Database, events: int) -> dict[str, Any]:
    """The snapshot limit: ``COPY bench_rows TO STDOUT`` through psql into /dev/null."""
    from worker.dev.postgres import find_bindir

    cmd = [
        str(find_bindir() / "psql"),
        pg_dsn(opts.env, db.name),
        "-qAtc",
        "COPY bench_rows TO STDOUT",
    ]
    with open(os.devnull, "wb") as null:
        r = wait4_child(
            cmd, env={**os.environ, "PGPASSWORD": opts.env["TIDEMARK_PG_PASSWORD"]}, stdout=null
        )
    return limit_row(r, events)


def run_kafka_ceiling(
    opts: Options, kafka: Kafka, source_topic: str, topic: str, events: int, work: Path
) -> dict[str, Any]:
    """The Kafka limit (bench/compare/kafka_ceiling.py): up to 1,000 of ``source_topic``'s
    records, produced again ``events`` times in all into ``topic``."""
    sample = [
        (base64.b64encode(m.key() or b"").decode(), base64.b64encode(m.value() or b"").decode())
        for m in kafka.read(source_topic, 0, 1000)
        if m.value() is not None
    ]
    if not sample:
        raise BenchError(f"no records in {source_topic} to replay for the Kafka ceiling")
    spec = work / "kafka-ceiling.json"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps({"sample": sample, "producer": PRODUCER}))
    kafka.create_topics([topic])
    r = wait4_child(
        [sys.executable, "-m", "bench.compare.kafka_ceiling", str(spec), topic, str(events)],
        env={**os.environ, "KAFKA_BOOTSTRAP": kafka.bootstrap, "PYTHONPATH": str(ROOT)},
    )
    # Throughput as for the capture contenders: first to last broker append time.
    r["wall_s"] = kafka.timestamp_at(topic, events - 1) - kafka.timestamp_at(topic, 0)
    return limit_row(r, events)


def limit_row(r: dict[str, Any], events: int) -> dict[str, Any]:
    return {
        "events": events,
        "wall_s": r["wall_s"],
        "drain_s": r["wall_s"],
        "events_per_s": events / r["wall_s"],
        "cpu_total_s": r["cpu_s"],
        "cpu_drain_s": r["cpu_s"],
        "cpu_s_per_1m": r["cpu_s"] / events * 1e6,
        "peak_rss_mb": r["peak_rss_mb"],
    }
