"""The REST layer: Kafka Connect's status codes and shapes, errors, OpenAPI, /metrics.

Most tests call :meth:`App.handle` directly; one goes through a real socket, so the HTTP
plumbing (headers, bodies, keep-alive, error statuses) is covered too.
"""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cdc.offsets.memory import MemoryOffsetStore
from tests.unit.test_worker_herder import WORKER, Engines, memory, settings
from tests.unit.test_worker_task import wait_for
from worker.herder import Herder
from worker.rest import App, Request, Response, RestServer
from worker.rest import metrics as worker_metrics
from worker.rest.client import Client
from worker.rest.server import base_url
from worker.rest.status_view import bar, render_status


@pytest.fixture
def engines() -> Engines:
    return Engines()


@pytest.fixture
def app(tmp_path: Path, engines: Engines) -> Iterator[App]:
    herder = Herder(
        settings(tmp_path),
        MemoryOffsetStore(),
        worker_id=WORKER,
        engine_factory=engines,
        state_file=tmp_path / "connectors.json",
    )
    herder.start()
    worker_metrics.track(herder)
    yield App(herder, version="9.9.9", commit="abc", cluster_id=lambda: "cluster-1")
    worker_metrics.untrack(herder)
    assert herder.shutdown(5)


def call(app: App, method: str, path: str, body: Any = None, raw: bytes | None = None) -> Response:
    path, _, qs = path.partition("?")
    query: dict[str, list[str]] = {}
    for part in filter(None, qs.split("&")):
        k, _, v = part.partition("=")
        query.setdefault(k, []).append(v)
    data = raw if raw is not None else (b"" if body is None else orjson.dumps(body))
    return app.handle(Request(method, path, query, data))


def test_root_and_health(app: App) -> None:
    r = call(app, "GET", "/")
    assert r.status == 200
    assert r.body == {"version": "9.9.9", "commit": "abc", "kafka_cluster_id": "cluster-1"}
    r = call(app, "GET", "/health")
    assert r.status == 200 and r.body["status"] == "healthy"


def test_connector_crud_status_codes_and_shapes(app: App, engines: Engines) -> None:
    assert call(app, "GET", "/connectors").body == []
    r = call(app, "POST", "/connectors", {"name": "c 1", "config": memory()})
    assert r.status == 201
    assert r.headers["Location"] == "/connectors/c%201"
    assert set(r.body) == {"name", "config", "tasks", "type"}
    assert call(app, "POST", "/connectors", {"name": "c 1", "config": memory()}).status == 409
    wait_for(lambda: engines.running("c 1"), what="engine")

    assert call(app, "GET", "/connectors/c%201").body["name"] == "c 1"
    assert call(app, "GET", "/connectors/c%201/config").body["memory.database"] == "db"
    r = call(app, "PUT", "/connectors/c%201/config", {**memory(), "max.batch.size": "9"})
    assert r.status == 200 and r.body["config"]["max.batch.size"] == "9"
    r = call(app, "PUT", "/connectors/c2/config", memory())
    assert r.status == 201 and r.headers["Location"] == "/connectors/c2"
    r = call(app, "PATCH", "/connectors/c2/config", {"max.batch.size": "7"})
    assert r.status == 200 and r.body["config"]["max.batch.size"] == "7"

    status = call(app, "GET", "/connectors/c2/status").body
    assert set(status) == {"name", "connector", "tasks", "type"}
    assert call(app, "GET", "/connectors/c2/tasks").body[0]["id"] == {"connector": "c2", "task": 0}
    assert list(call(app, "GET", "/connectors/c2/tasks-config").body) == ["c2-0"]
    wait_for(lambda: engines.running("c2"), what="engine")
    r = call(app, "GET", "/connectors/c2/tasks/0/status")
    assert r.status == 200
    assert r.body == {"id": 0, "state": "RUNNING", "worker_id": WORKER, "version": "9.9.9"}
    assert status["connector"]["version"] == "9.9.9"  # Kafka Connect 4.x reports the version
    assert call(app, "GET", "/connectors/c2/tasks/5/status").status == 404
    assert call(app, "GET", "/connectors/c2/tasks/x/status").status == 404
    assert call(app, "POST", "/connectors/c2/tasks/0/restart").status == 204

    expanded = call(app, "GET", "/connectors?expand=status&expand=info").body
    assert set(expanded) == {"c 1", "c2"}
    assert set(expanded["c2"]) == {"status", "info"}
    assert set(call(app, "GET", "/connectors?expand=status").body["c2"]) == {"status"}
    assert expanded["c2"]["status"]["tasks"][0]["version"] == "9.9.9"

    assert call(app, "POST", "/connectors/c2/restart").status == 204
    r = call(app, "POST", "/connectors/c2/restart?includeTasks=true&onlyFailed=false")
    assert r.status == 202 and r.body["tasks"][0]["state"] == "RESTARTING"
    assert r.body["connector"]["version"] == r.body["tasks"][0]["version"] == "9.9.9"
    assert call(app, "POST", "/connectors/c2/restart?includeTasks=maybe").status == 400
    # the fake engines write nothing; the real topics are in tests/integration/test_worker_rest
    assert call(app, "GET", "/connectors/c2/topics").body == {"c2": {"topics": []}}
    assert call(app, "PUT", "/connectors/c2/topics/reset").status == 202
    assert call(app, "PUT", "/connectors/c2/pause").status == 202
    assert call(app, "PUT", "/connectors/c2/resume").status == 202
    assert call(app, "PUT", "/connectors/c2/stop").status == 204
    assert call(app, "GET", "/connectors/c2/status").body["connector"]["state"] == "STOPPED"
    assert call(app, "DELETE", "/connectors/c2").status == 204
    assert call(app, "GET", "/connectors/c2").status == 404
    assert call(app, "GET", "/connectors/c2/topics").status == 404
    assert call(app, "PUT", "/connectors/c2/topics/reset").status == 404


def test_offsets_endpoints(app: App) -> None:
    call(app, "POST", "/connectors", {"name": "c", "config": memory()})
    assert call(app, "GET", "/connectors/c/offsets").body == {"offsets": []}
    good = {"offsets": [{"partition": {"server": "srv"}, "offset": {"pos": 4}}]}
    r = call(app, "PATCH", "/connectors/c/offsets", good)
    assert r.status == 400 and "STOPPED" in r.body["message"]
    assert call(app, "DELETE", "/connectors/c/offsets").status == 400
    assert call(app, "PUT", "/connectors/c/stop").status == 204
    bad = {"offsets": [{"partition": {"server": "srv"}, "offset": {"pos": "x"}}]}
    r = call(app, "PATCH", "/connectors/c/offsets", bad)
    assert r.status == 400 and r.body["error_code"] == 400
    assert call(app, "GET", "/connectors/c/offsets").body == {"offsets": []}
    r = call(app, "PATCH", "/connectors/c/offsets", good)
    assert r.status == 200 and r.body == {
        "message": "The offsets for this connector have been altered successfully"
    }
    assert call(app, "GET", "/connectors/c/offsets").body == good
    r = call(app, "DELETE", "/connectors/c/offsets")
    assert r.status == 200 and "reset successfully" in r.body["message"]
    assert call(app, "PATCH", "/connectors/zz/offsets", good).status == 404


def test_errors_have_kafka_connects_shape(app: App) -> None:
    for method, path, raw, status in (
        ("POST", "/connectors", b"not json", 400),
        ("POST", "/connectors", b"", 400),
        ("POST", "/connectors", b"[1]", 400),
        ("POST", "/connectors", b'{"name": "x"}', 400),
        ("POST", "/connectors", b'{"config": {}}', 400),
        ("PUT", "/connectors/x/config", b"{", 400),
        ("GET", "/connectors/unknown", b"", 404),
        ("GET", "/connectors/unknown/status", b"", 404),
        ("PUT", "/connectors/unknown/pause", b"", 404),
        ("GET", "/nowhere", b"", 404),
        ("DELETE", "/connectors", b"", 405),
    ):
        r = call(app, method, path, raw=raw)
        assert r.status == status, (method, path, r.body)
        assert set(r.body) == {"error_code", "message"} and r.body["error_code"] == status
    assert call(app, "DELETE", "/connectors", raw=b"").headers["Allow"] == "GET, POST"


def test_plugins_and_validation(app: App) -> None:
    plugins = call(app, "GET", "/connector-plugins").body
    classes = {p["class"] for p in plugins}
    assert "io.debezium.connector.postgresql.PostgresConnector" in classes
    assert all(p["type"] == "source" and p["version"] for p in plugins)
    everything = call(app, "GET", "/connector-plugins?connectorsOnly=false").body
    by_type: dict[str, set[str]] = {}
    for p in everything:
        by_type.setdefault(p["type"], set()).add(p["class"])
    assert by_type["source"] == classes
    assert "org.apache.kafka.connect.transforms.InsertField$Value" in by_type["transformation"]
    assert "io.debezium.transforms.ExtractNewRecordState" in by_type["transformation"]
    tombstone = "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"
    assert tombstone in by_type["predicate"]
    assert "org.apache.kafka.connect.json.JsonConverter" in by_type["converter"]
    assert call(app, "GET", "/connector-plugins?connectorsOnly=maybe").status == 400
    defs = call(app, "GET", "/connector-plugins/PostgresConnector/config").body
    assert any(d["name"] == "database.hostname" and d["required"] for d in defs)
    assert call(app, "GET", "/connector-plugins/nope/config").status == 404
    r = call(
        app,
        "PUT",
        "/connector-plugins/io.debezium.connector.postgresql.PostgresConnector/config/validate",
        {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.port": "x",
        },
    )
    assert r.status == 200
    assert r.body["error_count"] >= 4  # port + hostname, user, dbname, topic.prefix
    errors = {c["value"]["name"]: c["value"]["errors"] for c in r.body["configs"]}
    assert errors["database.port"] == ["must be an integer, got 'x'"]
    r = call(
        app, "PUT", "/connector-plugins/postgres/config/validate", {"connector.class": "memory"}
    )
    assert r.status == 400


def test_openapi_lists_every_route(app: App) -> None:
    doc = call(app, "GET", "/openapi.json").body
    assert doc["openapi"].startswith("3.")
    for route in app.routes:
        assert route.method.lower() in doc["paths"][route.template]
    post = doc["paths"]["/connectors"]["post"]
    assert set(post["responses"]) == {"201", "400", "409"}
    assert post["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "CreateConnectorRequest"
    )
    orjson.dumps(doc)


def test_metrics_parse_and_include_worker_metrics(app: App, engines: Engines) -> None:
    call(app, "POST", "/connectors", {"name": "m1", "config": memory()})
    wait_for(lambda: engines.running("m1"), what="engine")
    r = call(app, "GET", "/metrics")
    assert r.status == 200 and r.content_type.startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(r.encoded().decode())}
    tasks = families["tidemark_worker_tasks"]
    running = [s for s in tasks.samples if s.labels == {"worker": WORKER, "state": "RUNNING"}]
    assert running and running[0].value == 1
    restarts = families["tidemark_worker_task_restarts"]
    assert {s.labels["reason"] for s in restarts.samples if s.labels["connector"] == "m1"} == {
        "retriable",
        "requested",
    }
    assert "tidemark_worker_task_state" in families


def test_loggers(app: App) -> None:
    logging.getLogger("tidemark.testlogger.child")
    r = call(app, "PUT", "/admin/loggers/tidemark.testlogger", {"level": "DEBUG"})
    assert r.status == 200 and r.body == ["tidemark.testlogger"]
    try:
        got = call(app, "GET", "/admin/loggers/tidemark.testlogger").body
        assert got["level"] == "DEBUG" and got["last_modified"] > 0
        assert "tidemark.testlogger" in call(app, "GET", "/admin/loggers").body
        assert call(app, "GET", "/admin/loggers/no.such.logger.zz").status == 404
        assert call(app, "PUT", "/admin/loggers/x", {"level": "LOUD"}).status == 400
        r = call(app, "PUT", "/admin/loggers/tidemark.testlogger?scope=cluster", {"level": "WARN"})
        assert r.status == 204
        assert logging.getLogger("tidemark.testlogger").level == logging.WARNING
    finally:
        logging.getLogger("tidemark.testlogger").setLevel(logging.NOTSET)


def test_over_a_real_socket(app: App, engines: Engines) -> None:
    server = RestServer("127.0.0.1", 0)
    client = Client(server.url)
    server.start(app)
    try:
        status, body = client.request("GET", "/health")
        assert status == 200
        status, body = client.request("POST", "/connectors", {"name": "s1", "config": memory()})
        assert status == 201 and body["name"] == "s1"
        status, body = client.request("PUT", "/connectors/s1/pause")
        assert status == 202 and body is None
        # Location is absolute on the host the client addressed, as Kafka Connect's
        req = urllib.request.Request(
            f"{server.url}/connectors/s2/config",
            data=orjson.dumps(memory()),
            method="PUT",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 201
            assert resp.headers["Location"] == f"{server.url}/connectors/s2"
        status, body = client.request("GET", "/connectors/none")
        assert status == 404 and body == {"error_code": 404, "message": "Connector none not found"}
        assert client.get(Client.connector_path("s1", "/status"))["name"] == "s1"
        wait_for(lambda: client.get("/connectors/s1/status")["tasks"][0]["state"] == "PAUSED")
        text = render_status(client)
        assert "s1  memory  PAUSED" in text and "task 0  PAUSED" in text
    finally:
        server.close()


def test_base_url_takes_only_a_plain_host_header() -> None:
    scope: dict[str, Any] = {"scheme": "https"}
    assert base_url(scope, {"host": "connect.example:8083"}) == "https://connect.example:8083"
    assert base_url({"scheme": "http"}, {"host": "[::1]:8083"}) == "http://[::1]:8083"
    for bad in ("", "evil.example/path", "a b", "user@host", "host:port"):
        assert base_url(scope, {"host": bad}) == "", bad
    assert base_url(scope, {}) == ""


def test_progress_bar() -> None:
    assert bar(5, 10) == "[############------------] 5/10 rows  50%"
    assert bar(7, None).endswith("7 rows")


def test_the_grafana_dashboard_uses_only_metrics_the_worker_exports(
    app: App, engines: Engines
) -> None:
    """Every metric a panel queries exists on /metrics (renamed metrics break dashboards
    silently)."""
    import re

    from cdc import metrics as cdc_metrics
    from cdc.metrics import TaskMetrics

    dashboard = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"
    doc = orjson.loads(dashboard.read_bytes())
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    queried = {m for e in exprs for m in re.findall(r"\b((?:debezium_metrics|tidemark)_\w+)", e)}
    m = TaskMetrics(plugin="postgres", server="s", connector="dash")
    m.snapshot.rows_scanned["t"] = 1
    m.offset_commits = 1

    class Queue:  # what the collector reads of the engine's queue
        max_size, remaining_capacity, max_bytes, current_bytes = 10, 5, 0, 0

    m.queue = Queue()
    cdc_metrics.register(m)
    try:
        call(app, "POST", "/connectors", {"name": "dash", "config": memory()})
        wait_for(lambda: engines.running("dash"), what="engine")
        engines.built["dash"][0].metrics.offset_commits = 1
        text = call(app, "GET", "/metrics").encoded().decode()
    finally:
        cdc_metrics.unregister(m)
    exported = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    missing = sorted(queried - exported)
    assert not missing, f"the dashboard queries metrics nobody exports: {missing}"
    assert len(queried) > 15


def test_transform_settings_are_validated_with_the_config(app: App) -> None:
    """As in Kafka Connect: a bad transform is refused when the config is submitted or
    validated, not discovered when the task starts."""
    bad = {
        "connector.class": "memory",
        "memory.database": "db",
        "topic.prefix": "srv",
        "transforms": "r,t",
        "transforms.r.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
        "transforms.r.renames": "x",
        "transforms.t.type": "org.apache.kafka.connect.transforms.TimestampRouter",
    }
    r = call(app, "POST", "/connectors", {"name": "bad", "config": bad})
    assert r.status == 400
    assert "transforms.r.renames: Invalid rename mapping: x" in r.body["message"]
    assert "transforms.t.type: unknown transformation type" in r.body["message"]
    assert call(app, "GET", "/connectors").body == []
    r = call(app, "PUT", "/connector-plugins/memory/config/validate", bad)
    assert r.status == 200 and r.body["error_count"] == 2
    errors = {c["value"]["name"]: c["value"]["errors"] for c in r.body["configs"]}
    assert errors["transforms.r.renames"] == ["Invalid rename mapping: x (expected old:new)"]
