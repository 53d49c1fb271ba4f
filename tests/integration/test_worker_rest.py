"""`tidemark run` as a real subprocess, driven through every endpoint of the REST contract
against the local PostgreSQL and Kafka.

One long scenario rather than many small tests: each step needs the state the previous one
left (a running connector, a stopped one, committed offsets, a restarted worker), and starting
a worker and a snapshot per test would take minutes on a two-core machine.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration import pg_cleanup
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import Event, read_topic
from worker.rest.client import Client

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

TIDEMARK = str(Path(sys.executable).parent / "tidemark")
PG_CLASS = "io.debezium.connector.postgresql.PostgresConnector"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@dataclass
class Setup:
    pg: PgInfo
    kafka: str
    dbname: str
    role: str
    password: str
    wrong_password: str
    prefix: str
    tmp: Path
    #: a role whose password the test changes under a stored connector
    rotated_role: str = ""
    port: int = field(default_factory=free_port)

    @property
    def topic(self) -> str:
        return f"{self.prefix}.public.customers"

    def sql(self, *statements: str) -> None:
        with psycopg.connect(self.pg.dsn(self.dbname), autocommit=True) as c:
            for s in statements:
                c.execute(s)  # type: ignore[arg-type]

    def pg_config(self, prefix: str, password: str) -> dict[str, str]:
        return {
            "connector.class": PG_CLASS,
            "database.hostname": self.pg.host,
            "database.port": str(self.pg.port),
            "database.user": self.role,
            "database.password": password,
            "database.dbname": self.dbname,
            "topic.prefix": prefix,
            "slot.name": f"slot_{prefix}",
            "publication.name": f"pub_{prefix}",
            "publication.autocreate.mode": "filtered",
            "table.include.list": "public.customers",
            "poll.interval.ms": "100",
            "status.update.interval.ms": "500",
        }

    def yaml(self) -> Path:
        cfg = self.pg_config(self.prefix, "${env:TMW_PG_PASSWORD}")
        lines = [
            "worker:",
            f"  bootstrap.servers: {self.kafka}",
            "  rest.host: 127.0.0.1",
            f"  rest.port: {self.port}",
            f"  state.dir: {self.tmp / 'state'}",
            "  offset.flush.interval.ms: 200",
            "  task.shutdown.graceful.timeout.ms: 20000",
            "  log.level: INFO",
            "connectors:",
            "  - name: inv",
            "    config:",
            *(f'      {k}: "{v}"' for k, v in cfg.items()),
        ]
        path = self.tmp / "worker.yaml"
        path.write_text("\n".join(lines) + "\n")
        return path


@pytest.fixture(scope="module")
def setup(
    postgres: PgInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Setup]:
    tag = uuid.uuid4().hex[:8]
    s = Setup(
        postgres,
        kafka,
        dbname=f"tmw_{tag}",
        role=f"tmw_{tag}",
        password=f"Pw-{uuid.uuid4().hex}",
        wrong_password=f"Wrong-{uuid.uuid4().hex}",
        rotated_role=f"tmw_{tag}_r",
        prefix=f"tw{tag}",
        tmp=tmp_path_factory.mktemp("worker"),
    )
    with psycopg.connect(postgres.dsn(), autocommit=True) as c:
        c.execute(f"CREATE ROLE {s.role} LOGIN SUPERUSER REPLICATION PASSWORD '{s.password}'")
        c.execute(f"CREATE ROLE {s.rotated_role} LOGIN PASSWORD '{s.wrong_password}'")
    try:
        pg_cleanup.create_database(postgres.dsn(), s.dbname, owner=s.role)
        s.sql(
            "CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text)",
            "INSERT INTO customers VALUES (1, 'Sally', 's@x.org'), (2, 'George', 'g@x.org'),"
            " (3, 'Edward', 'e@x.org')",
        )
        yield s
    finally:
        pg_cleanup.drop_database(postgres.dsn(), s.dbname)
        with psycopg.connect(postgres.dsn(), autocommit=True) as c:
            c.execute(f"DROP ROLE IF EXISTS {s.role}")
            c.execute(f"DROP ROLE IF EXISTS {s.rotated_role}")


class WorkerProcess:
    """`tidemark run` in a subprocess, its output in a log file."""

    def __init__(self, s: Setup, yaml: Path, run: int) -> None:
        self.log_path = s.tmp / f"worker-{run}.log"
        env = {**os.environ, "TMW_PG_PASSWORD": s.password}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [TIDEMARK, "run", str(yaml)], stdout=log, stderr=subprocess.STDOUT, env=env
            )
        self.client = Client(f"http://127.0.0.1:{s.port}", timeout=30)
        self.bodies: list[str] = []

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_healthy(self, timeout: float = 60) -> None:
        def healthy() -> bool:
            assert self.proc.poll() is None, f"worker exited:\n{self.log()}"
            try:
                return self.client.request("GET", "/health")[0] == 200
            except Exception:
                return False

        wait_for(healthy, timeout, "the worker to be healthy")

    def wait_streaming(self, name: str, timeout: float = 60) -> None:
        """Healthy, and connector ``name``'s task streaming."""
        self.wait_healthy()
        wait_for(lambda: self.streaming(name), timeout, f"{name} streaming")

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        status, doc = self.client.request(method, path, body)
        self.bodies.append(repr(doc))
        return status, doc

    def raw(self, method: str, path: str, data: bytes) -> tuple[int, bytes]:
        req = Request(f"{self.client.url}{path}", data=data, method=method)
        try:
            with urlopen(req, timeout=10) as resp:
                return resp.status, resp.read()
        except Exception as exc:
            with exc:  # type: ignore[attr-defined]
                return exc.code, exc.read()  # type: ignore[attr-defined]

    def status(self, name: str) -> dict[str, Any]:
        code, doc = self.call("GET", f"/connectors/{name}/status")
        assert code == 200, doc
        return dict(doc)

    def task_state(self, name: str) -> str:
        tasks = self.status(name)["tasks"]
        return str(tasks[0]["state"]) if tasks else "-"

    def streaming(self, name: str) -> bool:
        doc = self.client.get("/tidemark/status")["connectors"][name]
        tasks = doc["tasks"]
        return bool(tasks) and bool(tasks[0].get("streaming", {}).get("connected"))

    def terminate(self, timeout: float = 25) -> tuple[int, float]:
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout)
        return rc, time.monotonic() - t0

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def ops(events: list[Event]) -> Counter[tuple[str | None, Any]]:
    return Counter((e.op, (e.key or {}).get("id")) for e in events)


def test_worker_subprocess_drives_the_rest_contract(setup: Setup) -> None:
    s = setup
    yaml = s.yaml()
    w = WorkerProcess(s, yaml, 1)
    try:
        _first_run(s, w)
        rc, took = w.terminate()
        assert rc == 0, f"exit {rc}:\n{w.log()[-3000:]}"
        assert took < 20
        assert "worker stopped cleanly" in w.log()
        _no_secrets(s, w)
    finally:
        w.kill()

    before = read_topic(s.kafka, s.topic, min_count=1, settle=1.0)

    w2 = WorkerProcess(s, yaml, 2)
    try:
        w2.wait_healthy()
        # the REST-created connector survived the restart (and is FAILED again: bad password)
        assert sorted(w2.client.get("/connectors")) == ["bad", "inv"]
        wait_for(
            lambda: w2.task_state("inv") == "RUNNING" and w2.streaming("inv"),
            60,
            "inv streaming after restart",
        )
        s.sql("INSERT INTO customers VALUES (7, 'Seven', '7@x.org')")
        wait_for(
            lambda: ("c", 7) in ops(read_topic(s.kafka, s.topic, min_count=1, settle=0.3)),
            30,
            "the insert made after the restart",
        )
        rc, _ = w2.terminate()
        assert rc == 0, w2.log()[-3000:]
        _no_secrets(s, w2)
    finally:
        w2.kill()

    after = read_topic(s.kafka, s.topic, min_count=len(before) + 1, settle=1.0)
    assert [(e.op, e.key, e.value) for e in after[: len(before)]] == [
        (e.op, e.key, e.value) for e in before
    ]
    new = after[len(before) :]
    assert ops(new) == Counter({("c", 7): 1}), "a restart must not re-send delivered events"
    counts = ops(after)
    assert counts[("r", 1)] == counts[("r", 2)] == counts[("r", 3)] == 1, "no second snapshot"
    duplicates = {k: n for k, n in counts.items() if n > 1 and k[0] is not None}
    assert not duplicates, f"duplicated events: {duplicates}"


def _first_run(s: Setup, w: WorkerProcess) -> None:
    w.wait_healthy()
    code, root = w.call("GET", "/")
    assert code == 200 and root["version"] and root["kafka_cluster_id"]
    assert w.call("GET", "/health")[1]["status"] == "healthy"

    # -- the YAML connector snapshots, then streams ------------------------------------------
    wait_for(lambda: w.task_state("inv") == "RUNNING", 60, "inv RUNNING")
    snap = read_topic(s.kafka, s.topic, min_count=3, timeout=60, settle=0.5)
    assert sorted(ops(snap)) == [("r", 1), ("r", 2), ("r", 3)]
    wait_for(lambda: w.streaming("inv"), 60, "inv streaming")

    code, names = w.call("GET", "/connectors")
    assert code == 200 and names == ["inv"]
    code, exp = w.call("GET", "/connectors?expand=status&expand=info")
    assert code == 200 and set(exp["inv"]) == {"status", "info"}
    assert exp["inv"]["info"]["config"]["database.password"] == "${env:TMW_PG_PASSWORD}"
    assert exp["inv"]["status"]["connector"] == {
        "state": "RUNNING",
        "worker_id": f"127.0.0.1:{s.port}",
        "version": root["version"],
    }
    assert exp["inv"]["status"]["tasks"][0]["version"] == root["version"]

    # -- active topics: what the connector wrote; a reset forgets them until written again ----
    assert w.call("GET", "/connectors/inv/topics") == (200, {"inv": {"topics": [s.topic]}})
    assert w.call("PUT", "/connectors/inv/topics/reset")[0] == 202
    assert w.call("GET", "/connectors/inv/topics") == (200, {"inv": {"topics": []}})
    s.sql("UPDATE customers SET email = 'sally@x.org' WHERE id = 1")
    wait_for(
        lambda: w.call("GET", "/connectors/inv/topics")[1] == {"inv": {"topics": [s.topic]}},
        30,
        "the topic tracked again after a write",
    )

    # -- plugins and validation --------------------------------------------------------------
    code, plugins = w.call("GET", "/connector-plugins")
    assert (
        code == 200
        and {"class": PG_CLASS, "type": "source"}.items()
        <= next(p for p in plugins if p["class"] == PG_CLASS).items()
    )
    code, infos = w.call(
        "PUT",
        f"/connector-plugins/{PG_CLASS}/config/validate",
        {**s.pg_config("x", "pw"), "database.port": "not-a-port"},
    )
    assert code == 200 and infos["error_count"] == 1 and infos["name"] == PG_CLASS
    errs = {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"]}
    assert errs["database.port"] == ["must be an integer, got 'not-a-port'"]
    code, _ = w.call(
        "PUT", "/connector-plugins/postgres/config/validate", {"connector.class": "memory"}
    )
    assert code == 400

    # -- a second connector through REST, with a wrong password: refused before it is stored --
    bad = s.pg_config(f"{s.prefix}b", s.wrong_password)
    code, err = w.call("POST", "/connectors", {"name": "bad", "config": bad})
    assert (
        code == 400
        and "\ndatabase.hostname: Error while validating connector config" in (err["message"])
    )
    assert "password authentication failed" in err["message"]
    assert w.call("GET", "/connectors/bad")[0] == 404

    # -- ... and once its password is rotated under it: FAILED, others unaffected -------------
    rotated = {**bad, "database.user": s.rotated_role}  # the role's password, for now
    body = {"name": "bad", "config": rotated, "initial_state": "STOPPED"}
    code, info = w.call("POST", "/connectors", body)
    assert code == 201 and info["name"] == "bad" and info["type"] == "source"
    assert info["config"]["database.password"] == "********"
    code, dup = w.call("POST", "/connectors", {"name": "bad", "config": rotated})
    assert code == 409 and dup == {"error_code": 409, "message": "Connector bad already exists"}
    s.sql(f"ALTER ROLE {s.rotated_role} PASSWORD '{s.password}-rotated'")
    assert w.call("PUT", "/connectors/bad/resume")[0] == 202
    wait_for(lambda: w.task_state("bad") == "FAILED", 60, "bad FAILED")
    task = w.status("bad")["tasks"][0]
    assert "password authentication failed" in task["trace"]
    assert w.task_state("inv") == "RUNNING"
    status, raw = w.raw("POST", "/connectors", b"{not json")
    assert status == 400 and b'"error_code":400' in raw and b'"message"' in raw
    code, doc = w.call("GET", "/connectors/nope/status")
    assert code == 404 and doc["error_code"] == 404

    # -- config endpoints: a change the database refuses keeps the stored config -------------
    code, cfg = w.call("GET", "/connectors/bad/config")
    assert code == 200 and cfg["database.password"] == "********"
    code, err = w.call("PUT", "/connectors/bad/config", {**cfg, "poll.interval.ms": "200"})
    assert code == 400 and "password authentication failed" in err["message"]
    code, err = w.call("PATCH", "/connectors/bad/config", {"status.update.interval.ms": None})
    assert code == 400 and "password authentication failed" in err["message"]
    assert w.call("GET", "/connectors/bad/config")[1] == cfg
    code, info = w.call(
        "PUT",
        "/connectors/bad2/config",
        {
            **rotated,
            "database.password": f"{s.password}-rotated",
            "topic.prefix": f"{s.prefix}c",
            "slot.name": f"slot_{s.prefix}c",
        },
    )
    assert code == 201 and info["name"] == "bad2"
    assert w.call("DELETE", "/connectors/bad2")[0] == 204
    assert w.call("GET", "/connectors/bad2")[0] == 404
    assert w.task_state("bad") == "FAILED"

    # -- info, tasks, restarts ---------------------------------------------------------------
    code, info = w.call("GET", "/connectors/inv")
    assert code == 200 and info["tasks"] == [{"connector": "inv", "task": 0}]
    code, tasks = w.call("GET", "/connectors/inv/tasks")
    assert code == 200 and tasks[0]["id"] == {"connector": "inv", "task": 0}
    code, ts = w.call("GET", "/connectors/inv/tasks/0/status")
    assert code == 200 and ts["state"] == "RUNNING" and ts["id"] == 0 and ts["version"]
    assert w.call("GET", "/connectors/inv/tasks/7/status")[0] == 404
    code, body = w.call("POST", "/connectors/bad/restart?includeTasks=true&onlyFailed=true")
    assert code == 202 and body["tasks"][0]["state"] == "RESTARTING"
    assert body["connector"]["state"] == "RUNNING"
    assert w.call("POST", "/connectors/inv/restart")[0] == 204
    assert w.call("POST", "/connectors/inv/tasks/0/restart")[0] == 204
    wait_for(
        lambda: w.task_state("inv") == "RUNNING" and w.streaming("inv"),
        60,
        "inv streaming after a task restart",
    )
    s.sql("INSERT INTO customers VALUES (4, 'Anne', 'a@x.org')")
    wait_for(lambda: ("c", 4) in ops(read_topic(s.kafka, s.topic, settle=0.3)), 30, "insert 4")

    # -- pause: nothing arrives; resume: it arrives ------------------------------------------
    assert w.call("PUT", "/connectors/inv/pause")[0] == 202
    wait_for(lambda: w.task_state("inv") == "PAUSED", 30, "inv PAUSED")
    assert w.status("inv")["connector"]["state"] == "PAUSED"
    count = len(read_topic(s.kafka, s.topic, settle=0.3))
    s.sql("INSERT INTO customers VALUES (5, 'Five', '5@x.org')")
    time.sleep(2)
    assert len(read_topic(s.kafka, s.topic, settle=0.5)) == count, "a paused connector produced"
    assert w.call("PUT", "/connectors/inv/resume")[0] == 202
    wait_for(
        lambda: ("c", 5) in ops(read_topic(s.kafka, s.topic, settle=0.3)),
        30,
        "the insert made while paused, after resume",
    )

    # -- metrics -----------------------------------------------------------------------------
    wait_for(lambda: w.streaming("inv"), 30, "inv streaming")
    with urlopen(f"{w.client.url}/metrics", timeout=10) as resp:
        families = {f.name: f for f in text_string_to_metric_families(resp.read().decode())}
    seen = families["debezium_metrics_TotalNumberOfEventsSeen"].samples
    contexts = {x.labels["context"] for x in seen if x.labels.get("connector") == "inv"}
    assert contexts == {"snapshot", "streaming"}
    assert any(
        x.labels["connector"] == "inv" for x in families["debezium_metrics_Connected"].samples
    )
    assert "debezium_metrics_SnapshotCompleted" in families
    tasks_by_state = {x.labels["state"]: x.value for x in families["tidemark_worker_tasks"].samples}
    assert tasks_by_state["RUNNING"] == 1 and tasks_by_state["FAILED"] == 1
    assert "tidemark_worker_task_restarts" in families
    assert "tidemark_worker_offset_commit_latency_seconds" in families

    # -- offsets: only when STOPPED, validated before storing --------------------------------
    code, offsets = w.call("GET", "/connectors/inv/offsets")
    assert code == 200 and offsets["offsets"][0]["partition"] == {"server": s.prefix}
    assert isinstance(offsets["offsets"][0]["offset"]["lsn"], int)
    code, doc = w.call("PATCH", "/connectors/inv/offsets", offsets)
    assert code == 400 and "STOPPED" in doc["message"]
    assert w.call("DELETE", "/connectors/inv/offsets")[0] == 400
    assert w.call("PUT", "/connectors/inv/stop")[0] == 204
    stopped = w.status("inv")
    assert stopped["connector"]["state"] == "STOPPED" and stopped["tasks"] == []
    code, current = w.call("GET", "/connectors/inv/offsets")
    malformed = {"offsets": [{"partition": {"server": s.prefix}, "offset": {"lsn": -1}}]}
    code, doc = w.call("PATCH", "/connectors/inv/offsets", malformed)
    assert code == 400 and "lsn must be a non-negative integer" in doc["message"]
    assert w.call("GET", "/connectors/inv/offsets")[1] == current, "a bad offset was stored"
    code, doc = w.call("PATCH", "/connectors/inv/offsets", current)
    assert code == 200 and doc["message"] == (
        "The offsets for this connector have been altered successfully"
    )
    assert w.call("PUT", "/connectors/bad/stop")[0] == 204
    code, doc = w.call("DELETE", "/connectors/bad/offsets")
    assert code == 200 and "reset successfully" in doc["message"]
    assert w.call("PUT", "/connectors/inv/resume")[0] == 202
    assert w.call("PUT", "/connectors/bad/resume")[0] == 202
    wait_for(
        lambda: w.task_state("inv") == "RUNNING" and w.streaming("inv"),
        60,
        "inv streaming after stop/resume",
    )
    s.sql(
        "INSERT INTO customers VALUES (6, 'Six', '6@x.org')",
        "UPDATE customers SET email = 'six@x.org' WHERE id = 6",
        "DELETE FROM customers WHERE id = 6",
    )
    wait_for(lambda: ("d", 6) in ops(read_topic(s.kafka, s.topic, settle=0.3)), 30, "c/u/d of 6")

    # -- the rest of the surface, and the CLI against it --------------------------------------
    code, doc = w.call("GET", "/openapi.json")
    assert code == 200 and "/connectors/{connector}/offsets" in doc["paths"]
    env = {**os.environ, "TIDEMARK_URL": w.client.url}
    out = subprocess.run([TIDEMARK, "status"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "inv  postgresql  RUNNING" in out.stdout and "task 0  RUNNING" in out.stdout
    assert "password authentication failed" in out.stdout  # bad's trace, first line
    out = subprocess.run(
        [TIDEMARK, "offsets", "show", "inv", "--url", w.client.url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and '"lsn"' in out.stdout, out.stderr
    w.bodies.append(out.stdout)


def _no_secrets(s: Setup, w: WorkerProcess) -> None:
    text = w.log() + "\n".join(w.bodies)
    assert s.password not in text, "the database password leaked into a log or a response"
    assert s.wrong_password not in text, "a REST-given password leaked into a log or a response"
