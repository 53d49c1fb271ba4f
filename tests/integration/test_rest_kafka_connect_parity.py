"""The same REST calls to a real Kafka Connect worker running Debezium's PostgreSQL connector
and to a ``tidemark run`` worker, compared: status codes, content types, and the JSON shapes
(keys and value types, recursively), plus the values tooling acts on (states, messages of
conflicts and mismatches). Tools written for Kafka Connect (kcctl, Terraform providers,
health checks, UIs) read these; a difference here is a difference they see.

The differences tidemark keeps on purpose are asserted as such (``KNOWN``), so a change to
either side shows up: secrets masked, the task listed in ``POST /connectors``' answer,
and the offsets' own keys (each connector's format)."""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import PgInfo
from tests.integration.kafka_connect import KafkaConnectWorker, tidemark_worker
from tests.integration.pg_harness import PgHarness

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

TIDEMARK = str(Path(sys.executable).parent / "tidemark")
PG_CLASS = "io.debezium.connector.postgresql.PostgresConnector"


@dataclass
class Answer:
    status: int
    content_type: str
    location: str | None
    body: Any


def call(base: str, method: str, path: str, body: Any = None) -> Answer:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, headers, text = r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        status, headers, text = e.code, e.headers, e.read().decode()
    return Answer(
        status,
        (headers.get("Content-Type") or "").split(";")[0] if text else "",
        headers.get("Location"),
        json.loads(text) if text else None,
    )


def shape(value: Any) -> Any:
    """Keys and value types, recursively; a list by the shapes of its distinct items."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        out: list[Any] = []
        for item in value:
            if shape(item) not in out:
                out.append(shape(item))
        return out
    return type(value).__name__


@dataclass
class Side:
    name: str
    url: str
    db: PgHarness

    def config(self, **extra: str) -> dict[str, str]:
        return {
            "connector.class": PG_CLASS,
            "database.hostname": self.db.pg.host,
            "database.port": str(self.db.pg.port),
            "database.user": self.db.pg.user,
            "database.password": self.db.pg.password,
            "database.dbname": self.db.dbname,
            "plugin.name": "pgoutput",
            "slot.name": f"{self.name}_slot",
            "publication.name": f"{self.name}_pub",
            "publication.autocreate.mode": "filtered",
            "topic.prefix": f"{self.name}{self.db.dbname}",
            "table.include.list": "public.items",
            "snapshot.mode": "no_data",
            **extra,
        }

    def call(self, method: str, path: str, body: Any = None) -> Answer:
        return call(self.url, method, path, body)

    def wait(self, what: str, pred: Callable[[Any], bool], timeout: float = 90) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            a = self.call("GET", "/connectors/probe/status")
            if a.status == 200 and pred(a.body):
                return a.body
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: {what}: last status {a.status} {a.body}")
            time.sleep(0.3)


def states(status: dict[str, Any]) -> tuple[str, list[str]]:
    return status["connector"]["state"], [t["state"] for t in status["tasks"]]


@pytest.fixture(scope="module")
def db(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    with PgHarness(postgres, kafka, "tmkc_" + uuid.uuid4().hex[:8]) as h:
        h.sql("CREATE TABLE items (id int PRIMARY KEY, name text)")
        yield h


@pytest.fixture(scope="module")
def sides(
    db: PgHarness, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Side, Side]]:
    with (
        KafkaConnectWorker(kafka, tmp_path_factory.mktemp("kafka-connect")) as kc,
        tidemark_worker(kafka, tmp_path_factory.mktemp("tidemark")) as tm_url,
    ):
        yield Side("kc", kc.url, db), Side("tm", tm_url, db)


def both(
    sides: tuple[Side, Side], method: str, path: str, body: Any = None
) -> tuple[Answer, Answer]:
    """The same call to both; ``body`` may be a function of the side (its own slot, topics)."""
    kc, tm = sides
    return (
        kc.call(method, path, body(kc) if callable(body) else body),
        tm.call(method, path, body(tm) if callable(body) else body),
    )


def same(a: Answer, b: Answer, *, values: bool = False, drop: tuple[str, ...] = ()) -> None:
    """Same status and content type, same JSON shape (minus ``drop`` keys at the top), and
    with ``values`` the same JSON."""
    assert (a.status, a.content_type) == (b.status, b.content_type), (a, b)
    if values:
        assert a.body == b.body, (a.body, b.body)
        return
    ka = {k: v for k, v in a.body.items() if k not in drop} if isinstance(a.body, dict) else a.body
    kb = {k: v for k, v in b.body.items() if k not in drop} if isinstance(b.body, dict) else b.body
    assert shape(ka) == shape(kb), (a.body, b.body)


def test_the_rest_api_answers_as_kafka_connect_does(
    sides: tuple[Side, Side], db: PgHarness
) -> None:
    kc, tm = sides
    same(*both(sides, "GET", "/"))
    same(*both(sides, "GET", "/connectors"), values=True)
    same(*both(sides, "GET", "/connectors/missing"), values=True)
    same(*both(sides, "GET", "/health"), values=True)

    # -- create: the answers, a conflict, a name mismatch ----------------------------------
    a, b = both(sides, "POST", "/connectors", lambda s: {"name": "probe", "config": s.config()})
    assert a.status == b.status == 201
    same(a, b, drop=("tasks",))  # KNOWN: tidemark lists the task at once, Kafka Connect later
    assert a.location == f"{kc.url}/connectors/probe"
    assert b.location == f"{tm.url}/connectors/probe"
    assert a.body["config"]["database.password"] == db.pg.password
    assert b.body["config"]["database.password"] == "********"  # KNOWN: masked
    same(
        *both(sides, "POST", "/connectors", lambda s: {"name": "probe", "config": s.config()}),
        values=True,
    )
    mismatch = {"name": "other", "config": {**kc.config(), "name": "different"}}
    same(*both(sides, "POST", "/connectors", mismatch), values=True)
    for side in sides:
        side.wait("RUNNING", lambda st: states(st) == ("RUNNING", ["RUNNING"]))

    # -- reads -----------------------------------------------------------------------------
    for path in (
        "/connectors/probe",
        "/connectors/probe/status",
        "/connectors/probe/tasks",
        "/connectors/probe/tasks/0/status",
        "/connectors/probe/topics",
        "/connectors?expand=status&expand=info",
    ):
        same(*both(sides, "GET", path))
    a, b = both(sides, "GET", "/connectors/probe/config")
    same(a, b)
    assert set(a.body) == set(b.body)
    a, b = both(sides, "GET", "/connectors/probe/tasks")
    assert a.body[0]["config"]["task.class"] == b.body[0]["config"]["task.class"]
    assert set(a.body[0]["config"]) == set(b.body[0]["config"])
    a, b = both(sides, "GET", "/connectors/probe/tasks/7/status")
    assert a.status == b.status == 404 and a.content_type == b.content_type

    # -- pause, resume, restarts ------------------------------------------------------------
    same(*both(sides, "PUT", "/connectors/probe/pause"), values=True)
    for side in sides:
        side.wait("PAUSED", lambda st: states(st) == ("PAUSED", ["PAUSED"]))
    same(*both(sides, "PUT", "/connectors/probe/resume"), values=True)
    for side in sides:
        side.wait("RUNNING", lambda st: states(st) == ("RUNNING", ["RUNNING"]))
    same(*both(sides, "POST", "/connectors/probe/restart"), values=True)
    a, b = both(sides, "POST", "/connectors/probe/restart?includeTasks=true")
    same(a, b)
    assert states(a.body) == states(b.body) == ("RESTARTING", ["RESTARTING"])
    for side in sides:
        side.wait("RUNNING", lambda st: states(st) == ("RUNNING", ["RUNNING"]))
    same(*both(sides, "POST", "/connectors/probe/tasks/0/restart"), values=True)
    a, b = both(sides, "POST", "/connectors/probe/tasks/9/restart")
    assert a.status == b.status == 404

    # -- config changes ----------------------------------------------------------------------
    a, b = both(
        sides, "PUT", "/connectors/probe/config", lambda s: s.config(**{"max.batch.size": "1024"})
    )
    same(a, b)
    assert (
        a.status == 200 and a.body["config"]["max.batch.size"] == b.body["config"]["max.batch.size"]
    )
    a, b = both(
        sides,
        "PATCH",
        "/connectors/probe/config",
        {"max.batch.size": None, "poll.interval.ms": "700"},
    )
    same(a, b)
    assert (
        set(a.body["config"]) == set(b.body["config"]) and "max.batch.size" not in a.body["config"]
    )
    a, b = both(
        sides,
        "PUT",
        "/connectors/probe/config",
        lambda s: s.config(**{"database.password": "wrong"}),
    )
    assert a.status == b.status == 400  # both connect first (Debezium's validateConnection)
    assert "password authentication failed" in a.body["message"]
    assert "password authentication failed" in b.body["message"]

    # -- offsets: stopped, read, refused, reset ----------------------------------------------
    for side in sides:
        side.wait("RUNNING", lambda st: states(st) == ("RUNNING", ["RUNNING"]))
    db.sql("INSERT INTO items VALUES (1, 'one')")  # so Debezium has an offset to commit
    time.sleep(3)
    same(*both(sides, "PUT", "/connectors/probe/stop"), values=True)
    for side in sides:
        side.wait("STOPPED", lambda st: states(st) == ("STOPPED", []))
    same(*both(sides, "GET", "/connectors/probe/status"))
    a, b = both(sides, "GET", "/connectors/probe/offsets")
    assert a.status == b.status == 200
    # KNOWN: each connector's offset keys are its own (docs/switching-from-debezium.md)
    assert [o["partition"] for o in a.body["offsets"]] == [{"server": kc.config()["topic.prefix"]}]
    assert [o["partition"] for o in b.body["offsets"]] == [{"server": tm.config()["topic.prefix"]}]
    a, b = both(sides, "PATCH", "/connectors/probe/offsets", {"offsets": []})
    same(a, b, values=True)
    a, b = both(sides, "DELETE", "/connectors/probe/offsets")
    same(a, b)
    same(*both(sides, "GET", "/connectors/probe/offsets"), values=True)

    # -- plugins and validation -------------------------------------------------------------
    a, b = both(sides, "GET", "/connector-plugins")
    assert a.status == b.status == 200
    pg = [{k: p[k] for k in ("class", "type")} for p in a.body if p["class"] == PG_CLASS]
    assert pg == [{k: p[k] for k in ("class", "type")} for p in b.body if p["class"] == PG_CLASS]
    a, b = both(sides, "GET", "/connector-plugins/PostgresConnector/config")
    assert a.status == b.status == 200
    assert {tuple(sorted(d)) for d in a.body} == {tuple(sorted(d)) for d in b.body}
    a, b = both(
        sides,
        "PUT",
        "/connector-plugins/PostgresConnector/config/validate",
        lambda s: {**s.config(**{"database.password": "wrong"}), "name": "v"},
    )
    assert a.status == b.status == 200
    for answer in (a, b):
        errors = {c["value"]["name"]: c["value"]["errors"] for c in answer.body["configs"]}
        assert answer.body["error_count"] == 1
        assert "password authentication failed" in errors["database.hostname"][0]
    assert set(a.body) <= set(b.body)  # tidemark adds "warnings"
    mismatch_class = {"connector.class": "io.debezium.connector.mysql.MySqlConnector"}
    same(
        *both(sides, "PUT", "/connector-plugins/PostgresConnector/config/validate", mismatch_class),
        values=True,
    )

    # -- loggers, delete ---------------------------------------------------------------------
    same(*both(sides, "GET", "/admin/loggers/root"), values=True)
    a, b = both(sides, "PUT", "/admin/loggers/io.debezium", {"level": "DEBUG"})
    same(a, b)  # the loggers it affected: the JVM has Debezium's classes' loggers below it
    assert "io.debezium" in a.body and b.body == ["io.debezium"]
    a, b = both(sides, "GET", "/admin/loggers/io.debezium")
    same(a, b)
    assert a.body["level"] == b.body["level"] == "DEBUG"
    same(*both(sides, "DELETE", "/connectors/probe"), values=True)
    same(*both(sides, "DELETE", "/connectors/probe"), values=True)
    same(*both(sides, "GET", "/connectors"), values=True)
