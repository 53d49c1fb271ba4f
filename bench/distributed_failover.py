"""Distributed mode failover: time from a worker's death to the first event of its moved task.

    .venv/bin/tidemark dev up postgres kafka
    .venv/bin/python -m bench.distributed_failover [--runs 5] [--workers 3] [--session-ms 6000]

Starts ``--workers`` ``tidemark run`` processes in one group (exactly-once on, as a cautious
production setup would run), one PostgreSQL connector under a writer (one row every 20 ms),
then ``--runs`` times: ``kill -9`` the worker running the task, and measure

- **RUNNING elsewhere**: until a surviving worker's REST API reports the task RUNNING on
  another worker;
- **first event**: until the Kafka timestamp (producer CreateTime) of the first event written
  after the kill; only the new owner can write those, so it is the real capture gap.

The killed worker is started again (same port and worker id) and the group rebalanced before
the next run. Prints one line per run and the median; docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from worker.rest.client import Client

#: one per run, shared by its workers (docs/distributed.md#secrets-in-the-config-topic)
SEALING_KEY = secrets.token_urlsafe(32)
TIDEMARK = str(Path(sys.executable).parent / "tidemark")


def stack_env() -> dict[str, str]:
    from worker.dev import Stack

    return Stack().env(["postgres", "kafka"])


class Bench:
    def __init__(self, env: dict[str, str], args: argparse.Namespace, tmp: Path) -> None:
        self.env, self.args, self.tmp = env, args, tmp
        self.tag = f"fo{uuid.uuid4().hex[:8]}"
        self.kafka = env["TIDEMARK_KAFKA_BOOTSTRAP"]
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.stop = threading.Event()

    def dsn(self, db: str) -> str:
        e = self.env
        return (
            f"host={e['TIDEMARK_PG_HOST']} port={e['TIDEMARK_PG_PORT']} "
            f"user={e['TIDEMARK_PG_USER']} password={e['TIDEMARK_PG_PASSWORD']} dbname={db}"
        )

    # -- the cluster --------------------------------------------------------------------------
    def worker_yaml(self, port: int) -> Path:
        g = self.tag
        keys = {
            "mode": "distributed",
            "group.id": g,
            "bootstrap.servers": self.kafka,
            "config.storage.topic": f"{g}-configs",
            "status.storage.topic": f"{g}-status",
            "offset.storage.topic": f"{g}-offsets",
            "assignment.storage.topic": f"{g}-assignments",
            "session.timeout.ms": self.args.session_ms,
            "heartbeat.interval.ms": max(self.args.session_ms // 6, 100),
            "rest.host": "127.0.0.1",
            "rest.port": port,
            "state.dir": str(self.tmp / str(port)),
            "exactly.once.source.support": "enabled",
            # the connector's literal password is sealed in the config topic with it
            "config.storage.encryption.key": SEALING_KEY,
        }
        path = self.tmp / f"{port}.yaml"
        path.write_text("worker:\n" + "".join(f"  {k}: {v}\n" for k, v in keys.items()))
        return path

    def start_worker(self, port: int) -> None:
        log = open(self.tmp / f"{port}.log", "ab")  # noqa: SIM115 - the child keeps it
        self.procs[port] = subprocess.Popen(
            [TIDEMARK, "run", str(self.worker_yaml(port))], stdout=log, stderr=subprocess.STDOUT
        )

    def status(self, port: int) -> dict[str, Any]:
        try:
            code, doc = Client(f"http://127.0.0.1:{port}", timeout=5).request(
                "GET", f"/connectors/{self.tag}/status"
            )
        except Exception:
            return {}
        return dict(doc["tasks"][0]) if code == 200 and doc.get("tasks") else {}

    def wait(self, what: str, pred: Any, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what} (logs in {self.tmp})")
            time.sleep(0.05)

    # -- the source ---------------------------------------------------------------------------
    def setup(self) -> None:
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{self.tag}"')  # type: ignore[arg-type]
        with psycopg.connect(self.dsn(self.tag), autocommit=True) as c:
            c.execute("CREATE TABLE t (id bigserial PRIMARY KEY, v text)")

    def write(self) -> None:
        with psycopg.connect(self.dsn(self.tag), autocommit=True) as c:
            while not self.stop.is_set():
                c.execute("INSERT INTO t (v) VALUES ('x')")
                time.sleep(0.02)

    def connector(self) -> dict[str, Any]:
        e = self.env
        return {
            "name": self.tag,
            "config": {
                "connector.class": "postgres",
                "database.hostname": e["TIDEMARK_PG_HOST"],
                "database.port": e["TIDEMARK_PG_PORT"],
                "database.user": e["TIDEMARK_PG_USER"],
                "database.password": e["TIDEMARK_PG_PASSWORD"],
                "database.dbname": self.tag,
                "topic.prefix": self.tag,
                "slot.name": f"slot_{self.tag}",
                "publication.name": f"pub_{self.tag}",
                "publication.autocreate.mode": "filtered",
                "table.include.list": "public.t",
                "poll.interval.ms": "50",
            },
        }

    # -- the runs -----------------------------------------------------------------------------
    def run(self) -> list[tuple[float, float]]:
        ports = [free_port() for _ in range(self.args.workers)]
        for p in ports:
            self.start_worker(p)
        self.wait("the workers", lambda: all(self.healthy(p) for p in ports))
        code, doc = Client(f"http://127.0.0.1:{ports[0]}", timeout=30).request(
            "POST", "/connectors", self.connector()
        )
        assert code == 201, doc
        self.wait("the task", lambda: self.status(ports[0]).get("state") == "RUNNING")
        threading.Thread(target=self.write, daemon=True).start()
        out: list[tuple[float, float]] = []
        for i in range(self.args.runs):
            time.sleep(3)
            owner = self.status(ports[0]).get("worker_id", "")
            victim = int(owner.rsplit(":", 1)[1])
            survivor = next(p for p in ports if p != victim)
            kill_ms, t0 = int(time.time() * 1000), time.monotonic()
            self.procs[victim].send_signal(signal.SIGKILL)
            self.procs[victim].wait()
            self.wait(
                "the task to move",
                lambda s=survivor, o=owner: (
                    self.status(s).get("state") == "RUNNING" and self.status(s)["worker_id"] != o
                ),
            )
            running = time.monotonic() - t0
            first = first_event_after(self.kafka, f"{self.tag}.public.t", kill_ms)
            out.append((running, first))
            print(f"run {i + 1}: RUNNING elsewhere {running:.2f} s, first event {first:.2f} s")
            self.start_worker(victim)
            self.wait("the restarted worker", lambda v=victim: self.healthy(v))
            self.wait("the task", lambda s=survivor: self.status(s).get("state") == "RUNNING")
        return out

    def healthy(self, port: int) -> bool:
        try:
            return Client(f"http://127.0.0.1:{port}", timeout=2).request("GET", "/health")[0] == 200
        except Exception:
            return False

    def cleanup(self) -> None:
        self.stop.set()
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{self.tag}" WITH (FORCE)')  # type: ignore[arg-type]
            c.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s AND NOT active",
                (f"slot_{self.tag}",),
            )
        admin = AdminClient({"bootstrap.servers": self.kafka})
        mine = [t for t in admin.list_topics(timeout=10).topics if t.startswith(self.tag)]
        if mine:
            admin.delete_topics(mine)


def first_event_after(kafka: str, topic: str, since_ms: int, timeout: float = 60) -> float:
    """Seconds from ``since_ms`` to the producer timestamp of the first event written after it
    (after a kill, only the task's new owner can have written it)."""
    consumer = Consumer(
        {"bootstrap.servers": kafka, "group.id": uuid.uuid4().hex, "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                if m.error() is None and m.timestamp()[1] > since_ms:
                    return (m.timestamp()[1] - since_ms) / 1000
    finally:
        consumer.close()
    raise AssertionError(f"no event in {topic} after the failover")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--session-ms", type=int, default=6000, help="session.timeout.ms")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tidemark-failover-") as tmp:
        bench = Bench(stack_env(), args, Path(tmp))
        bench.setup()
        try:
            results = bench.run()
        finally:
            bench.cleanup()
    running = statistics.median(r for r, _ in results)
    first = statistics.median(f for _, f in results)
    print(
        f"median over {len(results)} kill -9 (session.timeout.ms={args.session_ms}, "
        f"{args.workers} workers): RUNNING elsewhere {running:.2f} s, first event {first:.2f} s"
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
