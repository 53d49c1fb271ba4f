"""Distributed mode end to end: three `tidemark run` processes in one group on the local Kafka,
two PostgreSQL connectors streaming under a writer.

- REST on any worker: a connector created on one is run by whichever worker the group gave
  its slot, and every worker answers the same status, naming that worker.
- kill -9 of the worker running a task: the task runs on another worker within the session
  timeout plus its restart, and every row written meanwhile reaches Kafka (at-least-once).
- SIGTERM of a worker: its tasks are handed over at once, nothing lost.
- A worker frozen (SIGSTOP) past the session timeout loses its task; woken up (SIGCONT) it
  fences itself, and with exactly-once its transactional producer is fenced: a read_committed
  consumer sees every row exactly once.

Measured times are printed (run with -s) and recorded in docs/distributed.md.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.conftest import PgInfo
from tests.integration.test_worker_rest import free_port, wait_for
from worker.rest.client import Client

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

TIDEMARK = str(Path(sys.executable).parent / "tidemark")
SESSION_MS = 6000  # the broker's group.min.session.timeout.ms


@dataclass
class Cluster:
    pg: PgInfo
    kafka: str
    dbname: str
    role: str
    password: str
    tag: str
    tmp: Path

    def sql(self, *statements: str) -> None:
        with psycopg.connect(self.pg.dsn(self.dbname), autocommit=True) as c:
            for s in statements:
                c.execute(s)  # type: ignore[arg-type]

    def connector(self, table: str) -> dict[str, str]:
        prefix = f"{self.tag}{table}"
        return {
            "connector.class": "postgres",
            "database.hostname": self.pg.host,
            "database.port": str(self.pg.port),
            "database.user": self.role,
            "database.password": "${env:TMD_PG_PASSWORD}",
            "database.dbname": self.dbname,
            "topic.prefix": prefix,
            "slot.name": f"slot_{prefix}",
            "publication.name": f"pub_{prefix}",
            "publication.autocreate.mode": "filtered",
            "table.include.list": f"public.{table}",
            "poll.interval.ms": "50",
            "status.update.interval.ms": "500",
            "errors.retry.delay.initial.ms": "200",
            "errors.retry.delay.max.ms": "1000",
        }

    def topic(self, table: str) -> str:
        return f"{self.tag}{table}.public.{table}"

    def yaml(self, name: str, port: int, group: str, exactly_once: bool) -> Path:
        lines = [
            "worker:",
            "  mode: distributed",
            f"  group.id: {group}",
            f"  bootstrap.servers: {self.kafka}",
            f"  config.storage.topic: {group}-configs",
            f"  status.storage.topic: {group}-status",
            f"  offset.storage.topic: {group}-offsets",
            f"  assignment.storage.topic: {group}-assignments",
            "  offset.storage.partitions: 3",
            "  assignment.storage.partitions: 12",
            f"  session.timeout.ms: {SESSION_MS}",
            "  heartbeat.interval.ms: 1000",
            "  rebalance.timeout.ms: 20000",
            "  rest.host: 127.0.0.1",
            f"  rest.port: {port}",
            f"  state.dir: {self.tmp / name}",
            "  offset.flush.interval.ms: 200",
            "  task.shutdown.graceful.timeout.ms: 10000",
            f"  exactly.once.source.support: {'enabled' if exactly_once else 'disabled'}",
            "  config.providers: env",
            "  config.providers.env.class: EnvVarConfigProvider",
            "  config.providers.env.param.allowlist.pattern: TMD_.*",
        ]
        path = self.tmp / f"{name}.yaml"
        path.write_text("\n".join(lines) + "\n")
        return path


class Worker:
    def __init__(self, c: Cluster, name: str, group: str, exactly_once: bool = False) -> None:
        self.port = free_port()
        self.id = f"127.0.0.1:{self.port}"
        self.log_path = c.tmp / f"{name}.log"
        yaml = c.yaml(name, self.port, group, exactly_once)
        env = {**os.environ, "TMD_PG_PASSWORD": c.password}
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [TIDEMARK, "run", str(yaml)], stdout=out, stderr=subprocess.STDOUT, env=env
            )
        self.client = Client(f"http://127.0.0.1:{self.port}", timeout=30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def healthy(self) -> bool:
        assert self.proc.poll() is None, f"worker exited:\n{self.log()}"
        try:
            return self.client.request("GET", "/health")[0] == 200
        except Exception:
            return False

    def task(self, name: str) -> dict[str, Any]:
        code, doc = self.client.request("GET", f"/connectors/{name}/status")
        assert code == 200, doc
        tasks = doc["tasks"]
        return dict(tasks[0]) if tasks else {}

    def end(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Writer:
    """Inserts rows into each table, one per transaction, until stopped; remembers the ids."""

    def __init__(self, c: Cluster, tables: list[str]) -> None:
        self.c, self.tables = c, tables
        self.written: dict[str, list[int]] = {t: [] for t in tables}
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        with psycopg.connect(self.c.pg.dsn(self.c.dbname), autocommit=True) as conn:
            while not self._stop.is_set():
                n += 1
                for t in self.tables:
                    conn.execute(f"INSERT INTO {t} VALUES (%s, 'x')", (n,))  # type: ignore[arg-type]
                    self.written[t].append(n)
                time.sleep(0.03)

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.thread.join()


def ids_in(kafka: str, topic: str, expected: int, isolation: str) -> Counter[int]:
    """How often each row id appears in the topic's change events, reading until ``expected``
    distinct ids arrived or 40 s passed."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka,
            "group.id": uuid.uuid4().hex,
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: Counter[int] = Counter()
    deadline = time.monotonic() + 40
    while len(seen) < expected and time.monotonic() < deadline:
        for m in consumer.consume(500, 0.5):
            if m.error() is None and m.value() is not None:
                payload = orjson.loads(m.value())
                after = (payload.get("payload") or payload).get("after")
                if after:
                    seen[int(after["id"])] += 1
    consumer.close()
    return seen


def first_event_after(kafka: str, topic: str, since_ms: int, timeout: float = 60) -> float:
    """Seconds from ``since_ms`` to the producer timestamp of the first event written after it."""
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


@pytest.fixture(scope="module")
def cluster(
    postgres: PgInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    tag = f"td{uuid.uuid4().hex[:8]}"
    c = Cluster(
        postgres,
        kafka,
        dbname=tag,
        role=tag,
        password=f"Pw-{uuid.uuid4().hex}",
        tag=tag,
        tmp=tmp_path_factory.mktemp("distributed"),
    )
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {c.role} LOGIN SUPERUSER REPLICATION PASSWORD '{c.password}'")  # type: ignore[arg-type]
        conn.execute(f'CREATE DATABASE "{c.dbname}" OWNER {c.role}')  # type: ignore[arg-type]
    c.sql(*(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)" for t in ("a", "b", "e")))
    yield c
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{c.dbname}" WITH (FORCE)')  # type: ignore[arg-type]
        conn.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            "WHERE slot_name LIKE %s AND NOT active",
            (f"slot_{tag}%",),
        )
        conn.execute(f"DROP ROLE IF EXISTS {c.role}")  # type: ignore[arg-type]
    admin = AdminClient({"bootstrap.servers": kafka})
    mine = [t for t in admin.list_topics(timeout=10).topics if t.startswith(tag)]
    if mine:
        admin.delete_topics(mine)


def start_workers(c: Cluster, group: str, n: int, exactly_once: bool = False) -> list[Worker]:
    workers = [Worker(c, f"{group}-w{i}", group, exactly_once) for i in range(n)]
    for w in workers:
        wait_for(w.healthy, 60, f"{w.id} healthy")
    # Connectors are created once the group has settled (every worker holds slots): a task
    # moved in the middle of its first snapshot redoes it, with duplicates by design.
    for w in workers:
        wait_for(lambda w=w: "assigned slot" in w.log(), 30, f"{w.id} to hold slots")
    return workers


def running_on(workers: list[Worker], name: str, exclude: str = "") -> Callable[[], str]:
    """A probe: the worker id running the task, per the first live worker, or ''."""

    def probe() -> str:
        live = next(w for w in workers if w.proc.poll() is None and w.id != exclude)
        t = live.task(name)
        if t.get("state") == "RUNNING" and t.get("worker_id") != exclude:
            return str(t["worker_id"])
        return ""

    return probe


def test_three_workers_share_connectors_and_fail_over(cluster: Cluster) -> None:
    c = cluster
    group = f"{c.tag}-g1"
    workers = start_workers(c, group, 3)
    try:
        # Writes on any worker; every worker shows the same cluster state.
        for w, table in zip(workers, ("a", "b"), strict=False):
            code, doc = w.client.request(
                "POST", "/connectors", {"name": table, "config": c.connector(table)}
            )
            assert code == 201, doc
        for table in ("a", "b"):
            wait_for(lambda t=table: bool(running_on(workers, t)()), 60, f"{table} running")
        for table in ("a", "b"):
            views = [w.client.get(f"/connectors/{table}/status") for w in workers]
            assert all(v == views[0] for v in views), views
            assert views[0]["tasks"][0]["worker_id"] in {w.id for w in workers}
        assert all(w.client.get("/connectors") == ["a", "b"] for w in workers)

        with Writer(c, ["a", "b"]) as writer:
            time.sleep(2)
            # kill -9 the worker running "a".
            owner = running_on(workers, "a")()
            victim = next(w for w in workers if w.id == owner)
            kill_ms = int(time.time() * 1000)
            t0 = time.monotonic()
            victim.proc.kill()
            victim.proc.wait()
            wait_for(
                lambda: bool(running_on(workers, "a", exclude=owner)()),
                SESSION_MS / 1000 + 30,
                "task a to run on another worker",
            )
            moved_s = time.monotonic() - t0
            first_s = first_event_after(c.kafka, c.topic("a"), kill_ms)
            print(
                f"\nkill -9: task RUNNING elsewhere after {moved_s:.1f} s, first event "
                f"from the moved task {first_s:.1f} s after the kill"
            )
            assert moved_s < SESSION_MS / 1000 + 20
            time.sleep(2)
            # SIGTERM one of the survivors: graceful hand-over.
            live = [w for w in workers if w.proc.poll() is None]
            leaving = next((w for w in live if w.id == running_on(live, "b")()), live[0])
            t1 = time.monotonic()
            leaving.proc.terminate()
            assert leaving.proc.wait(30) == 0, leaving.log()
            rest = [w for w in live if w is not leaving]
            for table in ("a", "b"):
                wait_for(
                    lambda t=table: running_on(rest, t)() == rest[0].id,
                    30,
                    f"{table} on the last worker",
                )
            print(
                f"SIGTERM: tasks running on the last worker {time.monotonic() - t1:.1f} s "
                "after the stop"
            )
            time.sleep(1)
        for table in ("a", "b"):
            seen = ids_in(c.kafka, c.topic(table), len(writer.written[table]), "read_uncommitted")
            missing = set(writer.written[table]) - set(seen)
            assert not missing, f"{table}: {len(missing)} rows lost: {sorted(missing)[:20]}"
    finally:
        for w in workers:
            w.end()


def test_frozen_worker_is_fenced_and_exactly_once_holds(cluster: Cluster) -> None:
    c = cluster
    group = f"{c.tag}-g2"
    workers = start_workers(c, group, 2, exactly_once=True)
    try:
        code, doc = workers[0].client.request(
            "POST", "/connectors", {"name": "e", "config": c.connector("e")}
        )
        assert code == 201, doc
        wait_for(lambda: bool(running_on(workers, "e")()), 60, "e running")
        with Writer(c, ["e"]) as writer:
            time.sleep(2)
            owner = running_on(workers, "e")()
            zombie = next(w for w in workers if w.id == owner)
            other = next(w for w in workers if w is not zombie)
            os.kill(zombie.proc.pid, signal.SIGSTOP)
            t0 = time.monotonic()
            wait_for(
                lambda: other.task("e").get("worker_id") == other.id,
                SESSION_MS / 1000 + 20,
                "task e taken over by the other worker",
            )
            moved_s = time.monotonic() - t0
            # The frozen worker still holds the replication slot; its producer is fenced.
            time.sleep(max(SESSION_MS / 1000 + 2 - moved_s, 1))
            os.kill(zombie.proc.pid, signal.SIGCONT)
            wait_for(
                lambda: "longer than session.timeout.ms" in zombie.log(),
                20,
                "the woken worker to fence itself",
            )
            wait_for(
                lambda: other.task("e").get("state") == "RUNNING", 30, "e running after the wake"
            )
            print(f"\nSIGSTOP: task e assigned to the other worker after {moved_s:.1f} s")
            time.sleep(3)
        # Both workers agree on the one that runs the task (the woken one may have been given
        # its slot back by the rebalance its rejoin caused: the group balances slots).
        views = [w.task("e") for w in workers]
        assert views[0] == views[1] and views[0]["state"] == "RUNNING", views
        seen = ids_in(c.kafka, c.topic("e"), len(writer.written["e"]), "read_committed")
        missing = set(writer.written["e"]) - set(seen)
        assert not missing, f"{len(missing)} rows lost: {sorted(missing)[:20]}"
        twice = {i: n for i, n in seen.items() if n > 1}
        assert not twice, f"duplicates seen by a read_committed consumer: {twice}"
        # The woken worker's pending transaction was rejected: its producer was fenced by the
        # new owner's (same transactional.id, newer epoch).
        fenced = [line for line in zombie.log().splitlines() if "fenced by a newer" in line]
        print("woken worker:", *fenced[:3], sep="\n  ")
        assert fenced, zombie.log()
    finally:
        for w in workers:
            w.end()
