"""Distributed mode end to end: `tidemark run` processes in one group on the local Kafka, with
PostgreSQL (two databases) and MariaDB connectors streaming under writers.

- Three workers, three connectors created on three different workers: each worker runs one
  (the assignment spreads tasks evenly), and every worker answers the same status.
- Exactly-once enabled: kill -9 of a worker moves its task within the session timeout plus its
  restart (measured); the killed worker restarted gets a task back; then a rolling restart of
  all three workers under load. Reconciliation: each table equals the last event per key in
  its topic, and a read_committed consumer sees every change exactly once.
- A worker frozen (SIGSTOP) past the session timeout loses its task; woken up (SIGCONT) it
  fences itself, and a read_committed consumer sees every row exactly once.
- scheduled.rebalance.max.delay.ms: a killed worker restarted within the delay gets its task
  back without it running elsewhere; not restarted, its task moves once the delay is over.

TIDEMARK_DISTRIBUTED_ROUNDS=N (default 1) repeats the kill -9 and rolling restart N times
under load, on demand. Measured times are printed (run with -s); docs/distributed.md has them.
"""

from __future__ import annotations

import os
import random
import secrets
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
import pymysql
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.distributed_failover import first_event_after
from tests.integration import pg_cleanup
from tests.integration.conftest import MySqlInfo, PgInfo
from tests.integration.test_distributed_stores import raw_records
from tests.integration.test_worker_rest import free_port, wait_for
from worker.rest.client import Client

pytestmark = [pytest.mark.postgres, pytest.mark.mariadb, pytest.mark.kafka]

TIDEMARK = str(Path(sys.executable).parent / "tidemark")
SESSION_MS = 6000  # the broker's group.min.session.timeout.ms
ROUNDS = int(os.environ.get("TIDEMARK_DISTRIBUTED_ROUNDS", "1"))


@dataclass
class Cluster:
    pg: PgInfo
    my: MySqlInfo
    kafka: str
    tag: str
    password: str
    tmp: Path

    @property
    def db1(self) -> str:
        return self.tag

    @property
    def db2(self) -> str:
        return f"{self.tag}_2"

    def sql(self, db: str, *statements: str) -> None:
        with psycopg.connect(self.pg.dsn(db), autocommit=True) as c:
            for st in statements:
                c.execute(st)  # type: ignore[arg-type]

    def pg_connector(self, name: str, db: str, table: str) -> dict[str, str]:
        prefix = f"{self.tag}{name}"
        return {
            "connector.class": "postgres",
            "database.hostname": self.pg.host,
            "database.port": str(self.pg.port),
            "database.user": self.tag,
            "database.password": "${env:TMD_PG_PASSWORD}",
            "database.dbname": db,
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

    def maria_connector(self, name: str, table: str) -> dict[str, str]:
        return {
            "connector.class": "mysql",
            "database.hostname": self.my.host,
            "database.port": str(self.my.port),
            "database.user": self.my.user,
            "database.password": "${env:TMD_MY_PASSWORD}",
            "database.server.id": str(5400 + random.randint(1, 99999) * 1000),
            "topic.prefix": f"{self.tag}{name}",
            "database.include.list": self.db1,
            "table.include.list": f"{self.db1}.{table}",
            "poll.interval.ms": "50",
            "connect.backoff.initial.delay.ms": "200",
            "connect.backoff.max.delay.ms": "1000",
        }

    def drop_slots(self) -> None:
        """Free this module's replication slots as soon as a test is done with them (the
        shared server has few)."""
        with psycopg.connect(self.pg.dsn(), autocommit=True) as conn:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name LIKE %s AND NOT active",
                (f"slot_{self.tag}%",),
            )

    def topic(self, name: str, table: str) -> str:
        return f"{self.tag}{name}.public.{table}"

    def yaml(self, name: str, port: int, group: str, extra: dict[str, str]) -> Path:
        keys = {
            "mode": "distributed",
            "group.id": group,
            "bootstrap.servers": self.kafka,
            "config.storage.topic": f"{group}-configs",
            "status.storage.topic": f"{group}-status",
            "offset.storage.topic": f"{group}-offsets",
            "assignment.storage.topic": f"{group}-assignments",
            "offset.storage.partitions": "3",
            "session.timeout.ms": str(SESSION_MS),
            "heartbeat.interval.ms": "1000",
            "rebalance.timeout.ms": "20000",
            "rest.host": "127.0.0.1",
            "rest.port": str(port),
            "state.dir": str(self.tmp / name),
            "offset.flush.interval.ms": "200",
            "task.shutdown.graceful.timeout.ms": "10000",
            "config.providers": "env",
            "config.providers.env.class": "EnvVarConfigProvider",
            "config.providers.env.param.allowlist.pattern": "TMD_.*",
            **extra,
        }
        path = self.tmp / f"{name}.yaml"
        path.write_text("worker:\n" + "".join(f"  {k}: {v}\n" for k, v in keys.items()))
        return path


class Worker:
    def __init__(self, c: Cluster, name: str, group: str, **extra: str) -> None:
        self.port = free_port()
        self.id = f"127.0.0.1:{self.port}"
        self.log_path = c.tmp / f"{name}.log"
        self.yaml = c.yaml(
            name, self.port, group, {k.replace("_", "."): v for k, v in extra.items()}
        )
        self.env = {
            **os.environ,
            "TMD_PG_PASSWORD": c.password,
            "TMD_MY_PASSWORD": c.my.password,
            "PYTHONFAULTHANDLER": "1",  # SIGABRT dumps every thread (see thread_dumps)
        }
        self.client = Client(f"http://127.0.0.1:{self.port}", timeout=30)
        self.start()

    def start(self) -> None:
        """Start (or start again: same config, port and worker id)."""
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [TIDEMARK, "run", str(self.yaml)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
            )

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def healthy(self) -> bool:
        assert self.alive, f"worker exited:\n{self.log()}"
        try:
            return self.client.request("GET", "/health")[0] == 200
        except Exception:
            return False

    def task(self, name: str) -> dict[str, Any]:
        code, doc = self.client.request("GET", f"/connectors/{name}/status")
        assert code == 200, doc
        tasks = doc["tasks"]
        return dict(tasks[0]) if tasks else {}

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def end(self) -> None:
        if self.alive:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


class Writer:
    """Writes to each table until stopped: every round inserts row n and updates row n - 5,
    one transaction each, so the last event per key must match the table."""

    def __init__(self, c: Cluster, pg: list[tuple[str, str]], maria: tuple[str, ...] = ()) -> None:
        self.c, self.pg, self.maria = c, pg, list(maria)
        self.rounds = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            self._write()
        except BaseException as exc:  # reported by __exit__
            self.error = exc

    def _write(self) -> None:
        pgs = {db: psycopg.connect(self.c.pg.dsn(db), autocommit=True) for db, _ in self.pg}
        my = pymysql.connect(
            host=self.c.my.host,
            port=self.c.my.port,
            user=self.c.my.user,
            password=self.c.my.password,
            database=self.c.db1,
            autocommit=True,
        )
        try:
            n = 0
            while not self._stop.is_set():
                n += 1
                for db, table in self.pg:
                    pgs[db].execute(f"INSERT INTO {table} VALUES (%s, 'x')", (n,))  # type: ignore[arg-type]
                    pgs[db].execute(f"UPDATE {table} SET v = %s WHERE id = %s", (f"u{n}", n - 5))  # type: ignore[arg-type]
                with my.cursor() as cur:
                    for table in self.maria:
                        cur.execute(f"INSERT INTO {table} VALUES (%s, 'x')", (n,))
                        cur.execute(f"UPDATE {table} SET v = %s WHERE id = %s", (f"u{n}", n - 5))
                self.rounds = n
                time.sleep(0.03)
        finally:
            my.close()
            for conn in pgs.values():
                conn.close()

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.thread.join()
        assert self.error is None, self.error


def table_rows(c: Cluster, db: str, table: str, maria: bool = False) -> dict[int, str]:
    if maria:
        conn = pymysql.connect(
            host=c.my.host, port=c.my.port, user=c.my.user, password=c.my.password, database=db
        )
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT id, v FROM {table}")
                return {int(r[0]): str(r[1]) for r in cur.fetchall()}
        finally:
            conn.close()
    with psycopg.connect(c.pg.dsn(db)) as pc:
        return {int(r[0]): str(r[1]) for r in pc.execute(f"SELECT id, v FROM {table}")}  # type: ignore[arg-type]


def reconcile(
    kafka: str, topic: str, table: dict[int, str], isolation: str
) -> Counter[tuple[int, str]]:
    """Read ``topic`` until the last event per key equals ``table`` (or 60 s passed), assert
    they are equal, and return how often each (id, value) image was seen."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka,
            "group.id": uuid.uuid4().hex,
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: Counter[tuple[int, str]] = Counter()
    last: dict[int, str] = {}
    deadline = time.monotonic() + 60
    try:
        while last != table and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                if m.error() is None and m.value() is not None:
                    payload = orjson.loads(m.value())
                    after = (payload.get("payload") or payload).get("after")
                    if after:
                        image = (int(after["id"]), str(after["v"]))
                        seen[image] += 1
                        last[image[0]] = image[1]
    finally:
        consumer.close()
    missing = {k: v for k, v in table.items() if last.get(k) != v}
    assert not missing, (
        f"{topic}: {len(missing)} rows differ from their last event: {sorted(missing.items())[:10]}"
    )
    return seen


SOURCE_KEYS = ("snapshot", "lsn", "txId", "file", "pos", "row", "gtid", "thread")


def occurrences(kafka: str, topic: str, images: set[tuple[int, str]]) -> list[str]:
    """Every read_committed event of ``topic`` carrying one of ``images``: its Kafka offset,
    op and source position, for the diagnosis of a duplicate."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka,
            "group.id": uuid.uuid4().hex,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[str] = []
    try:
        while True:
            m = consumer.poll(5)
            if m is None or m.error() is not None:
                break
            if m.value() is None:
                continue
            payload = orjson.loads(m.value())
            body = payload.get("payload") or payload
            after = body.get("after") or {}
            if after and (int(after["id"]), str(after["v"])) in images:
                src = body.get("source") or {}
                where = {k: src[k] for k in SOURCE_KEYS if src.get(k) not in (None, "")}
                out.append(f"@{m.offset()} op={body.get('op')} {after} {where}")
    finally:
        consumer.close()
    return out


def offset_records(kafka: str, topic: str, connector: str) -> list[str]:
    """The offsets topic's committed records of ``connector``, in order per partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka,
            "group.id": uuid.uuid4().hex,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    parts = AdminClient({"bootstrap.servers": kafka}).list_topics(topic, timeout=10)
    count = len(parts.topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(count)])
    out: list[str] = []
    eof: set[int] = set()
    try:
        while len(eof) < count:
            m = consumer.poll(5)
            if m is None:
                break
            if m.error() is not None:
                eof.add(m.partition() or 0)
                continue
            if connector.encode() in (m.key() or b""):
                value = (m.value() or b"").decode()
                out.append(f"[{m.partition()}]@{m.offset()} t={m.timestamp()[1]} {value}")
    finally:
        consumer.close()
    return out


def thread_dumps(workers: list[Worker], why: str) -> str:
    """Every live worker's threads (SIGABRT: Python's fault handler writes their stacks to
    the log, and the worker dies), for a failure where a worker stopped making progress."""
    for w in workers:
        if w.alive:
            os.kill(w.proc.pid, signal.SIGABRT)
            w.proc.wait(10)
    return log_tails(workers, why, 12_000)


def log_tails(workers: list[Worker], why: str, chars: int = 4000) -> str:
    """The end of every worker's log, for a failure that depends on what they did."""
    return f"{why}; worker logs:\n" + "\n".join(f"--- {w.id}\n{w.log()[-chars:]}" for w in workers)


def assert_once(topic: str, seen: Counter[tuple[int, str]]) -> None:
    twice = {k: n for k, n in seen.items() if n > 1}
    assert not twice, f"{topic}: changes seen more than once by read_committed: {twice}"


@pytest.fixture(scope="module")
def cluster(
    postgres: PgInfo, mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    tag = f"td{uuid.uuid4().hex[:8]}"
    c = Cluster(
        postgres,
        mariadb,
        kafka,
        tag=tag,
        password=f"Pw-{uuid.uuid4().hex}",
        tmp=tmp_path_factory.mktemp("distributed"),
    )
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {tag} LOGIN SUPERUSER REPLICATION PASSWORD '{c.password}'")  # type: ignore[arg-type]
    for db in (c.db1, c.db2):
        pg_cleanup.create_database(postgres.dsn(), db, owner=tag)
    c.sql(c.db1, *(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)" for t in ("a", "e", "f")))
    c.sql(c.db2, "CREATE TABLE b (id int PRIMARY KEY, v text)")
    my = pymysql.connect(
        host=mariadb.host,
        port=mariadb.port,
        user=mariadb.user,
        password=mariadb.password,
        autocommit=True,
    )
    with my.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{c.db1}`")
        cur.execute(f"CREATE TABLE `{c.db1}`.m (id int PRIMARY KEY, v varchar(20))")
    yield c
    with my.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{c.db1}`")
    my.close()
    for db in (c.db1, c.db2):  # with their slots, also one a worker still holds
        pg_cleanup.drop_database(postgres.dsn(), db)
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {tag}")  # type: ignore[arg-type]
    admin = AdminClient({"bootstrap.servers": kafka})
    mine = [t for t in admin.list_topics(timeout=10).topics if t.startswith(tag)]
    if mine:
        admin.delete_topics(mine)


def start_workers(c: Cluster, group: str, n: int, **extra: str) -> list[Worker]:
    """``n`` healthy workers; if one does not get there, the others are ended before the
    failure is raised (a test's own cleanup has not begun yet: they would outlive it)."""
    workers: list[Worker] = []
    try:
        for i in range(n):
            workers.append(Worker(c, f"{group}-w{i}", group, **extra))
        for w in workers:
            wait_for(w.healthy, 60, f"{w.id} healthy")
    except BaseException:
        for w in workers:
            w.end()
        raise
    return workers


def running_on(workers: list[Worker], name: str, exclude: str = "") -> Callable[[], str]:
    """A probe: the worker id running the task, per the first live worker, or ''."""

    def probe() -> str:
        live = next(w for w in workers if w.alive and w.id != exclude)
        t = live.task(name)
        if t.get("state") == "RUNNING" and t.get("worker_id") != exclude:
            return str(t["worker_id"])
        return ""

    return probe


def streaming(workers: list[Worker], names: list[str]) -> Callable[[], bool]:
    """A probe: every task past its snapshot, per the worker running it (a kill -9 during a
    snapshot redoes it, and its rows come again even with exactly-once, as in Kafka Connect;
    see docs/distributed.md)."""

    def probe() -> bool:
        phases: dict[str, str] = {}
        for w in workers:
            if w.alive:
                doc = w.client.get("/tidemark/status")["connectors"]
                for n in names:
                    for t in doc.get(n, {}).get("tasks", []):
                        phases[n] = str(t.get("phase"))
        return all(phases.get(n) == "STREAMING" for n in names)

    return probe


def same_view(workers: list[Worker], path: str) -> bool:
    """Every live worker answers ``path`` the same (each follows the topics on its own)."""
    views = [w.client.get(path) for w in workers if w.alive]
    return all(v == views[0] for v in views)


def placement(workers: list[Worker], names: list[str]) -> dict[str, str]:
    return {n: running_on(workers, n)() for n in names}


def spread(workers: list[Worker], names: list[str]) -> Callable[[], bool]:
    """A probe: every task RUNNING, one per live worker."""

    def probe() -> bool:
        where = placement(workers, names)
        return all(where.values()) and len(set(where.values())) == len(names)

    return probe


def rejoined(workers: list[Worker], names: list[str], what: str) -> None:
    """After a worker rejoins: every task runs (asserted), and the group spreads them one per
    worker again — waited for, but only reported when a heavily loaded machine makes the
    rebalance slower than the wait (the even spread itself is asserted at the start)."""
    wait_for(lambda: all(placement(workers, names).values()), 60, f"every task running {what}")
    deadline = time.monotonic() + 60
    while not spread(workers, names)() and time.monotonic() < deadline:
        time.sleep(0.2)
    if not spread(workers, names)():
        print(f"\nnote: tasks not yet one per worker {what}: {placement(workers, names)}")


def run_one(c: Cluster, workers: list[Worker], short: str, table: str) -> tuple[str, Worker]:
    """Create a PostgreSQL connector on ``table`` and wait until it runs: its name and the
    worker running it."""
    name = f"{c.tag}-{short}"
    code, doc = workers[0].client.request(
        "POST", "/connectors", {"name": name, "config": c.pg_connector(short, c.db1, table)}
    )
    assert code == 201, doc
    wait_for(lambda: bool(running_on(workers, name)()), 60, f"{name} running")
    return name, next(w for w in workers if w.id == running_on(workers, name)())


def test_three_workers_spread_fail_over_and_roll_exactly_once(cluster: Cluster) -> None:
    c = cluster
    group = f"{c.tag}-g1"
    workers = start_workers(c, group, 3, exactly_once_source_support="enabled")
    pa, pb, my = f"{c.tag}-pa", f"{c.tag}-pb", f"{c.tag}-my"
    names = [pa, pb, my]
    configs = {
        pa: c.pg_connector("pa", c.db1, "a"),
        pb: c.pg_connector("pb", c.db2, "b"),
        my: c.maria_connector("my", "m"),
    }
    topics = {pa: c.topic("pa", "a"), pb: c.topic("pb", "b"), my: f"{c.tag}my.{c.db1}.m"}
    try:
        # Writes on any worker; one task per worker; every worker shows the same state.
        for w, name in zip(workers, names, strict=True):
            code, doc = w.client.request(
                "POST", "/connectors", {"name": name, "config": configs[name]}
            )
            assert code == 201, doc
        wait_for(spread(workers, names), 90, "one task on each worker")
        for name in names:
            wait_for(lambda n=name: same_view(workers, f"/connectors/{n}/status"), 30, "one view")
        assert all(w.client.get("/connectors") == sorted(names) for w in workers)
        # A restart asked of a worker that does not run the task: its owner restarts it.
        owner = next(w for w in workers if w.id == running_on(workers, pa)())
        asker = next(w for w in workers if w is not owner)
        code, doc = asker.client.request("POST", f"/connectors/{pa}/restart?includeTasks=true")
        assert code in (202, 204), doc
        wait_for(lambda: f"connector {pa} restarted on request" in owner.log(), 30, "the restart")
        wait_for(spread(workers, names), 30, "every task running after the restart")
        wait_for(streaming(workers, names), 120, "every task streaming")

        with Writer(c, [(c.db1, "a"), (c.db2, "b")], ("m",)):
            for _ in range(ROUNDS):
                time.sleep(2)
                # kill -9 the worker running the MariaDB connector: its task moves.
                victim = next(w for w in workers if w.id == running_on(workers, my)())
                kill_ms, t0 = int(time.time() * 1000), time.monotonic()
                victim.kill()
                wait_for(
                    lambda v=victim: bool(running_on(workers, my, exclude=v.id)()),
                    SESSION_MS / 1000 + 30,
                    "the MariaDB task to run on another worker",
                )
                moved_s = time.monotonic() - t0
                first_s = first_event_after(c.kafka, topics[my], kill_ms)
                print(
                    f"\nkill -9: task RUNNING elsewhere after {moved_s:.1f} s, first event from "
                    f"the moved task {first_s:.1f} s after the kill"
                )
                if moved_s >= SESSION_MS / 1000 + 20:
                    pytest.fail(thread_dumps(workers, f"moved late ({moved_s:.1f} s)"))
                # Back in the group, the worker gets one task again (balance restored).
                victim.start()
                wait_for(victim.healthy, 60, f"{victim.id} healthy again")
                rejoined(workers, names, "after the rejoin")
                # Rolling restart under load: each worker stopped (SIGTERM) and started again.
                for w in workers:
                    t1 = time.monotonic()
                    w.proc.terminate()
                    assert w.proc.wait(30) == 0, w.log()
                    others = [o for o in workers if o is not w]
                    wait_for(
                        lambda o=others: all(placement(o, names).values()),
                        30,
                        f"every task running while {w.id} is down",
                    )
                    handed_s = time.monotonic() - t1
                    w.start()
                    wait_for(w.healthy, 60, f"{w.id} healthy again")
                    rejoined(workers, names, f"after {w.id} restarted")
                    print(f"rolling restart of {w.id}: tasks handed over in {handed_s:.1f} s")
                time.sleep(1)
        # Reconciliation: each table equals the last event per key of its topic, and with
        # exactly-once no change was seen twice across the kill, the rejoins and the restarts.
        tables = {
            pa: table_rows(c, c.db1, "a"),
            pb: table_rows(c, c.db2, "b"),
            my: table_rows(c, c.db1, "m", maria=True),
        }
        for name in names:
            assert len(tables[name]) > 50, tables[name]
            seen = reconcile(c.kafka, topics[name], tables[name], "read_committed")
            twice = {k for k, n in seen.items() if n > 1}
            if twice:  # the events, the stored offsets and the workers' story
                print(log_tails(workers, f"{name} saw changes twice", 20_000))
                print("\n".join(["duplicates:", *occurrences(c.kafka, topics[name], twice)]))
                offsets = offset_records(c.kafka, f"{group}-offsets", name)
                print("\n".join(["offset records:", *offsets[-60:]]))
            assert_once(topics[name], seen)
    finally:
        for w in workers:
            w.end()
        c.drop_slots()


def test_frozen_worker_is_fenced_and_exactly_once_holds(cluster: Cluster) -> None:
    c = cluster
    group = f"{c.tag}-g2"
    workers = start_workers(c, group, 2, exactly_once_source_support="enabled")
    try:
        name, _ = run_one(c, workers, "pe", "e")
        with Writer(c, [(c.db1, "e")]):
            time.sleep(2)
            zombie = next(w for w in workers if w.id == running_on(workers, name)())
            other = next(w for w in workers if w is not zombie)
            os.kill(zombie.proc.pid, signal.SIGSTOP)
            t0 = time.monotonic()
            wait_for(
                lambda: other.task(name).get("worker_id") == other.id,
                SESSION_MS / 1000 + 20,
                "task e taken over by the other worker",
            )
            moved_s = time.monotonic() - t0
            # Frozen, the zombie still holds the replication slot while rows keep coming; the
            # new owner's producer (same transactional.id) has fenced the zombie's.
            time.sleep(max(SESSION_MS / 1000 + 2 - moved_s, 1))
            os.kill(zombie.proc.pid, signal.SIGCONT)
            # What the woken worker reports, deterministically: it measured the gap, stopped
            # its tasks without writing their status, and joined again.
            wait_for(
                lambda: "longer than session.timeout.ms" in zombie.log(),
                20,
                "the woken worker to fence itself",
            )
            wait_for(lambda: bool(running_on(workers, name)()), 30, "e running after the wake")
            print(f"\nSIGSTOP: task e assigned to the other worker after {moved_s:.1f} s")
            time.sleep(3)
        # Both workers agree on the one that runs the task (the woken one may have been given
        # the slot back by the rebalance its rejoin caused).
        wait_for(
            lambda: (
                same_view(workers, f"/connectors/{name}/status")
                and workers[0].task(name).get("state") == "RUNNING"
            ),
            30,
            "both workers to show the task RUNNING on the same worker",
        )
        topic = c.topic("pe", "e")
        assert_once(topic, reconcile(c.kafka, topic, table_rows(c, c.db1, "e"), "read_committed"))
        # Whatever the woken worker tried to commit was rejected as fenced (it may have had
        # nothing in flight: then it wrote nothing, which the check above also shows).
        errors = [
            ln for ln in zombie.log().splitlines() if "Kafka rejected" in ln or "fenced" in ln
        ]
        print("woken worker:", *errors[:3], sep="\n  ")
        assert all("fenced" in ln.lower() for ln in errors if "Kafka rejected" in ln), errors
    finally:
        for w in workers:
            w.end()
        c.drop_slots()


def test_departed_worker_keeps_its_task_for_the_scheduled_delay(cluster: Cluster) -> None:
    """scheduled.rebalance.max.delay.ms: a killed worker's task is not moved while the delay
    runs; the worker restarted within it, the task runs again at once; not restarted, the
    task moves once the session timeout plus the delay is over."""
    c = cluster
    group = f"{c.tag}-g3"
    delay_ms = 8000
    workers = start_workers(c, group, 2, scheduled_rebalance_max_delay_ms=str(delay_ms))
    try:
        name, owner = run_one(c, workers, "pf", "f")
        other = next(w for w in workers if w is not owner)

        def given(w: Worker) -> int:
            return w.log().count("assigned slot")

        before = given(other), given(owner)
        owner.kill()
        # Without the delay the slot would move once the session expires; with it, it waits.
        time.sleep(SESSION_MS / 1000 + 2)
        assert given(other) == before[0], f"the slot moved within the delay:\n{other.log()}"
        owner.start()
        wait_for(
            lambda: given(owner) > before[1] or given(other) > before[0],
            60,
            "the slot to be assigned once its worker is back",
        )
        wait_for(lambda: bool(running_on(workers, name)()), 30, "f running again")
        # Not back: the task waits the session timeout plus the delay, then moves.
        runner = owner if given(owner) > before[1] else other
        survivor = other if runner is owner else owner
        gone = given(survivor)
        runner.kill()
        t0 = time.monotonic()
        wait_for(
            lambda: given(survivor) > gone,
            (SESSION_MS + delay_ms) / 1000 + 30,
            "f to move once the delay is over",
        )
        moved_s = time.monotonic() - t0
        print(f"\nscheduled.rebalance.max.delay.ms={delay_ms}: moved {moved_s:.1f} s after kill -9")
    finally:
        for w in workers:
            w.end()
        c.drop_slots()


def test_literal_secrets_are_sealed_in_the_config_topic_and_keys_rotate(cluster: Cluster) -> None:
    """A password sent in clear over REST: refused by a group without a key (nothing is
    written), sealed by one with a key (the worker logs in with it; the topic never holds it);
    a worker with another key fails the connector and names the key, and a key change with the
    old key among the previous ones seals the value again under the new key."""
    c = cluster
    key, new_key = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    name = f"{c.tag}-sealed"
    config = {**c.pg_connector("sl", c.db1, "s"), "database.password": c.password}
    c.sql(c.db1, "CREATE TABLE s (id int PRIMARY KEY, v text)")
    [plain] = start_workers(c, f"{c.tag}-g4", 1)
    try:
        code, doc = plain.client.request("POST", "/connectors", {"name": name, "config": config})
        assert code == 400, doc
        assert "database.password" in doc["message"]
        assert "config.storage.encryption.key" in doc["message"]
        assert plain.client.get("/connectors") == []
    finally:
        plain.end()

    group = f"{c.tag}-g5"
    topic = f"{group}-configs"

    def sealed_with() -> str:
        """The id of the key the connector's latest record was sealed with."""
        records = dict(raw_records(c.kafka, topic))
        token = records[f"connector-{name}"]["tidemark.sealed"]["database.password"]
        return str(token).split(":")[1]

    def state(w: Worker) -> dict[str, Any]:
        return dict(w.client.get(f"/connectors/{name}/status")["connector"])

    [w] = start_workers(c, group, 1, config_storage_encryption_key=key)
    try:
        code, doc = w.client.request("POST", "/connectors", {"name": name, "config": config})
        assert code == 201, doc
        wait_for(lambda: bool(running_on([w], name)()), 60, f"{name} running")
        c.sql(c.db1, "INSERT INTO s VALUES (1, 'one')")
        reconcile(c.kafka, c.topic("sl", "s"), table_rows(c, c.db1, "s"), "read_uncommitted")
        assert c.password.encode() not in b"".join(
            orjson.dumps(v) for _, v in raw_records(c.kafka, topic)
        )
        first_id = sealed_with()
    finally:
        w.end()

    [w] = start_workers(c, group, 1, config_storage_encryption_key=new_key)
    try:
        wait_for(lambda: state(w)["state"] == "FAILED", 60, f"{name} failed without the key")
        assert f"sealed with key {first_id}" in state(w)["trace"]
        shown = w.client.get(f"/connectors/{name}/config")
        assert shown["database.password"] == "********"
        code, doc = w.client.request("PUT", f"/connectors/{name}/config", shown)
        assert code == 400 and "send the secret again" in doc["message"], doc
    finally:
        w.end()

    [w] = start_workers(
        c,
        group,
        1,
        config_storage_encryption_key=new_key,
        config_storage_encryption_previous_keys=key,
    )
    try:
        wait_for(lambda: bool(running_on([w], name)()), 60, f"{name} running again")
        wait_for(lambda: sealed_with() != first_id, 30, "the value sealed under the new key")
        c.sql(c.db1, "INSERT INTO s VALUES (2, 'two')")
        reconcile(c.kafka, c.topic("sl", "s"), table_rows(c, c.db1, "s"), "read_uncommitted")
        assert c.password not in w.log()
        code, _ = w.client.request("DELETE", f"/connectors/{name}")
        assert code == 204
    finally:
        w.end()
        c.drop_slots()
