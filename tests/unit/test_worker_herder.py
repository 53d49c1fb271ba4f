"""The herder: connector lifecycle, statuses, offsets, persistence, validation.

Engines are fakes (see test_worker_task.py) and the plugin is the in-memory connector, whose
config definition is all the herder needs; the real engine runs in the integration tests.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc.errors import FatalError
from cdc.offsets.memory import MemoryOffsetStore
from tests.unit.test_worker_task import FakeEngine, wait_for
from worker.config import ConnectorEntry, WorkerSettings
from worker.herder import BadRequest, Conflict, Herder, NotFound
from worker.task import TaskState

WORKER = "127.0.0.1:8083"


class Engines:
    """Engine factory for the herder: per connector, scripted failures, then healthy engines."""

    def __init__(self) -> None:
        self.built: dict[str, list[FakeEngine]] = {}
        self.failures: dict[str, list[BaseException]] = {}
        self.configs: dict[str, dict[str, str]] = {}

    def __call__(
        self, plugin: Any, config: dict[str, str], settings: Any, store: Any
    ) -> FakeEngine:
        name = config["name"]
        self.configs[name] = config
        errors = self.failures.get(name) or []
        engine = FakeEngine(name, errors.pop(0) if errors else None)
        self.built.setdefault(name, []).append(engine)
        return engine

    def running(self, name: str) -> bool:
        engines = self.built.get(name) or []
        if not engines:
            return False
        last = engines[-1]
        return last.error is None and last.started.is_set() and not last.stopped.is_set()


def memory(**extra: Any) -> dict[str, Any]:
    return {
        "connector.class": "memory",
        "memory.database": "db",
        "topic.prefix": "srv",
        "errors.retry.delay.initial.ms": 10,
        **extra,
    }


def settings(tmp_path: Path) -> WorkerSettings:
    # the fake engines connect nowhere, and neither does a create: the connection check is
    # tested in test_connection_check.py and against the real servers
    return WorkerSettings.model_validate(
        {
            "state.dir": str(tmp_path),
            "task.shutdown.graceful.timeout.ms": 5000,
            "rest.validate.connections": False,
        }
    )


@pytest.fixture
def engines() -> Engines:
    return Engines()


@pytest.fixture
def store() -> MemoryOffsetStore:
    return MemoryOffsetStore()


def make(tmp_path: Path, engines: Engines, store: MemoryOffsetStore, **kw: Any) -> Herder:
    return Herder(
        settings(tmp_path),
        store,
        worker_id=WORKER,
        engine_factory=engines,
        state_file=tmp_path / "connectors.json",
        **kw,
    )


@pytest.fixture
def herder(tmp_path: Path, engines: Engines, store: MemoryOffsetStore) -> Iterator[Herder]:
    h = make(tmp_path, engines, store)
    h.start()
    yield h
    assert h.shutdown(5)


def task_state(h: Herder, name: str) -> str:
    tasks = h.connector_status(name)["tasks"]
    return str(tasks[0]["state"]) if tasks else "-"


def test_health_follows_startup_and_shutdown(tmp_path: Path, engines: Engines) -> None:
    h = make(tmp_path, engines, MemoryOffsetStore())
    assert h.health() == (503, {"status": "starting", "message": "Worker is still starting up."})
    h.start()
    code, body = h.health()
    assert code == 200 and body["status"] == "healthy"
    assert h.shutdown(5)
    assert h.health()[0] == 500


def test_create_returns_connector_info_and_runs_a_task(herder: Herder, engines: Engines) -> None:
    info = herder.create("c1", memory())
    assert info["name"] == "c1" and info["type"] == "source"
    assert info["tasks"] == [{"connector": "c1", "task": 0}]
    assert (
        info["config"]["name"] == "c1" and info["config"]["errors.retry.delay.initial.ms"] == "10"
    )
    wait_for(lambda: engines.running("c1"), what="engine")
    assert herder.connector_status("c1") == {
        "name": "c1",
        "connector": {"state": "RUNNING", "worker_id": WORKER},
        "tasks": [{"id": 0, "state": "RUNNING", "worker_id": WORKER}],
        "type": "source",
    }
    assert herder.task_status("c1", 0)["state"] == "RUNNING"
    tasks = herder.task_configs("c1")
    assert tasks[0]["id"] == {"connector": "c1", "task": 0}
    assert tasks[0]["config"]["task.class"] == "io.tidemark.connector.memory.MemoryConnectorTask"
    assert herder.connector_names() == ["c1"]


def test_create_refuses_duplicates_bad_configs_and_bad_names(herder: Herder) -> None:
    herder.create("c1", memory())
    with pytest.raises(Conflict, match="Connector c1 already exists"):
        herder.create("c1", memory())
    with pytest.raises(BadRequest) as info:
        herder.create("c2", {"connector.class": "memory", "max.batch.size": "many"})
    msg = info.value.message
    assert msg.startswith("Connector configuration is invalid and contains the following 3 error")
    assert "memory.database: is required" in msg and "max.batch.size: must be an integer" in msg
    with pytest.raises(BadRequest, match="doesn't match connector name in the URL"):
        herder.create("c3", memory(name="other"))
    with pytest.raises(BadRequest, match="Connector name"):
        herder.create("a/b", memory())
    with pytest.raises(BadRequest, match="initial_state"):
        herder.create("c4", memory(), "SLEEPING")
    assert herder.connector_names() == ["c1"]


def test_initial_states(herder: Herder, engines: Engines) -> None:
    herder.create("p", memory(), "PAUSED")
    herder.create("s", memory(), "STOPPED")
    wait_for(lambda: task_state(herder, "p") == "PAUSED", what="PAUSED")
    assert herder.connector_status("p")["connector"]["state"] == "PAUSED"
    assert herder.connector_status("s")["connector"]["state"] == "STOPPED"
    assert herder.connector_status("s")["tasks"] == []
    assert herder.connector_info("s")["tasks"] == []
    assert "p" not in engines.built and "s" not in engines.built
    herder.resume("s")
    wait_for(lambda: engines.running("s"), what="resumed from STOPPED")


def test_unknown_connectors_and_tasks_are_not_found(herder: Herder) -> None:
    for call in (
        lambda: herder.connector_info("nope"),
        lambda: herder.connector_status("nope"),
        lambda: herder.pause("nope"),
        lambda: herder.delete("nope"),
        lambda: herder.offsets("nope"),
    ):
        with pytest.raises(NotFound, match="Connector nope not found"):
            call()
    herder.create("c1", memory())
    with pytest.raises(NotFound, match="Task c1-3 not found"):
        herder.task_status("c1", 3)


def test_pause_stops_the_engine_and_resume_starts_another(herder: Herder, engines: Engines) -> None:
    herder.create("c1", memory())
    wait_for(lambda: engines.running("c1"), what="engine")
    herder.pause("c1")
    wait_for(lambda: task_state(herder, "c1") == "PAUSED", what="PAUSED")
    assert engines.built["c1"][0].stopped.is_set()
    assert herder.connector_status("c1")["connector"]["state"] == "PAUSED"
    herder.pause("c1")  # idempotent
    herder.resume("c1")
    wait_for(lambda: len(engines.built["c1"]) == 2 and engines.running("c1"), what="resume")
    assert herder.connector_status("c1")["connector"]["state"] == "RUNNING"


def test_config_changes_restart_the_task_only_when_the_config_changed(
    herder: Herder, engines: Engines
) -> None:
    created, _ = herder.put_config("c1", memory())
    assert created
    wait_for(lambda: engines.running("c1"), what="engine")
    created, info = herder.put_config("c1", memory())
    assert not created and len(engines.built["c1"]) == 1
    created, info = herder.put_config("c1", memory(**{"max.batch.size": "100"}))
    assert not created and info["config"]["max.batch.size"] == "100"
    wait_for(lambda: len(engines.built["c1"]) == 2 and engines.running("c1"), what="restart")
    assert engines.configs["c1"]["max.batch.size"] == "100"
    info = herder.patch_config("c1", {"max.batch.size": None, "max.queue.size": "9000"})
    assert "max.batch.size" not in info["config"] and info["config"]["max.queue.size"] == "9000"
    with pytest.raises(BadRequest, match="is required"):
        herder.patch_config("c1", {"memory.database": None})
    with pytest.raises(BadRequest):
        herder.put_config("c1", {**memory(), "name": "zzz"})


def test_secrets_are_masked_and_a_masked_value_written_back_is_kept(
    herder: Herder, engines: Engines, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "tok").write_text("token-value\n")
    token = f"${{file:{tmp_path}/secrets/tok}}"  # what REST configs may use by default
    herder.create("c1", memory(**{"database.password": "hunter22", "api.token": token}))
    cfg = herder.connector_config("c1")
    assert cfg["database.password"] == "********"
    assert cfg["api.token"] == token  # a reference, not a secret
    assert herder.connector_info("c1")["config"]["database.password"] == "********"
    assert herder.task_configs("c1")[0]["config"]["database.password"] == "********"
    # GET, change one key, PUT back: the password must survive
    herder.put_config("c1", {**cfg, "max.batch.size": "10", "api.token": "plain"})
    wait_for(lambda: len(engines.built["c1"]) == 2, what="restart")
    assert engines.configs["c1"]["database.password"] == "hunter22"
    stored = orjson.loads((tmp_path / "connectors.json").read_bytes())["connectors"][0]
    assert stored["config"]["database.password"] == "hunter22"
    assert (tmp_path / "connectors.json").stat().st_mode & 0o077 == 0


def test_traces_are_scrubbed_of_secrets(herder: Herder, engines: Engines) -> None:
    engines.failures["c1"] = [FatalError("login with password hunter22 refused")]
    herder.create("c1", memory(**{"database.password": "hunter22"}))
    wait_for(lambda: task_state(herder, "c1") == "FAILED", what="FAILED")
    trace = herder.connector_status("c1")["tasks"][0]["trace"]
    assert "hunter22" not in trace and "password ******** refused" in trace


def test_a_failed_task_keeps_the_others_running_and_restarts_on_request(
    herder: Herder, engines: Engines
) -> None:
    engines.failures["bad"] = [FatalError("wrong password")]
    herder.create("good", memory())
    herder.create("bad", memory())
    wait_for(lambda: task_state(herder, "bad") == "FAILED", what="FAILED")
    status = herder.connector_status("bad")
    assert status["connector"]["state"] == "RUNNING"  # the connector itself is fine
    assert "FatalError: wrong password" in status["tasks"][0]["trace"]
    assert engines.running("good")

    assert herder.restart_connector("good") is None  # plain restart: 204
    body = herder.restart_connector("bad", include_tasks=True, only_failed=True)
    assert body is not None
    assert body["connector"]["state"] == "RUNNING"  # not failed: not restarted
    assert body["tasks"] == [{"id": 0, "state": "RESTARTING", "worker_id": WORKER}]
    wait_for(lambda: engines.running("bad"), what="restarted task")
    assert task_state(herder, "bad") == "RUNNING"
    body = herder.restart_connector("good", include_tasks=True, only_failed=True)
    assert body is not None and body["tasks"][0]["state"] == "RUNNING"  # nothing failed
    body = herder.restart_connector("good", include_tasks=True)
    assert body is not None and body["connector"]["state"] == "RESTARTING"
    assert body["tasks"][0]["state"] == "RESTARTING"
    wait_for(lambda: len(engines.built["good"]) == 2 and engines.running("good"), what="restart")
    herder.restart_task("good", 0)
    wait_for(lambda: len(engines.built["good"]) == 3 and engines.running("good"), what="restart")


def test_offsets_can_only_change_when_stopped_and_are_validated_first(
    herder: Herder, engines: Engines, store: MemoryOffsetStore
) -> None:
    herder.create("c1", memory())
    store.put("c1", {"server": "srv"}, {"pos": 7})
    assert herder.offsets("c1") == {
        "offsets": [{"partition": {"server": "srv"}, "offset": {"pos": 7}}]
    }
    good = {"offsets": [{"partition": {"server": "srv"}, "offset": {"pos": 3}}]}
    with pytest.raises(BadRequest, match="must be in the STOPPED state"):
        herder.alter_offsets("c1", good)
    with pytest.raises(BadRequest, match="STOPPED"):
        herder.reset_offsets("c1")
    herder.pause("c1")
    with pytest.raises(BadRequest, match="STOPPED"):
        herder.alter_offsets("c1", good)
    herder.stop("c1")
    assert engines.built["c1"][0].stopped.is_set()
    for bad, why in (
        ({"offsets": []}, "need to be provided"),
        ({"nope": 1}, "Offsets must be given as"),
        ([1], "Offsets must be given as"),
        ({"offsets": [{"partition": {"server": "srv"}, "offset": {"pos": -1}}]}, "pos must be"),
        ({"offsets": [{"partition": "srv", "offset": {"pos": 1}}]}, "partition must be an object"),
        ({"offsets": [{"partition": {"server": "srv"}, "offset": 5}]}, "object or null"),
    ):
        with pytest.raises(BadRequest, match=why):
            herder.alter_offsets("c1", bad)
    assert store.get("c1", {"server": "srv"}) == {"pos": 7}, "nothing stored from a bad request"
    assert herder.alter_offsets("c1", good) == {
        "message": "The offsets for this connector have been altered successfully"
    }
    assert store.get("c1", {"server": "srv"}) == {"pos": 3}
    assert herder.reset_offsets("c1")["message"].endswith("have been reset successfully")
    assert herder.offsets("c1") == {"offsets": []}


def test_delete_stops_the_task_and_keeps_offsets(
    herder: Herder, engines: Engines, store: MemoryOffsetStore
) -> None:
    herder.create("c1", memory())
    wait_for(lambda: engines.running("c1"), what="engine")
    store.put("c1", {"server": "srv"}, {"pos": 1})
    herder.delete("c1")
    assert engines.built["c1"][0].stopped.is_set()
    with pytest.raises(NotFound):
        herder.connector_status("c1")
    assert store.get("c1", {"server": "srv"}) == {"pos": 1}
    herder.create("c1", memory())  # the name is free again


def test_state_survives_a_restart_and_yaml_wins_on_config(
    tmp_path: Path, engines: Engines, store: MemoryOffsetStore, caplog: pytest.LogCaptureFixture
) -> None:
    yaml_entry = ConnectorEntry(name="y", config=memory())
    h = make(tmp_path, engines, store)
    h.start([yaml_entry])
    h.create("r", memory(), "RUNNING")
    h.create("gone", memory())
    h.pause("r")
    h.patch_config("y", {"max.batch.size": "5"})
    h.stop("y")
    h.delete("gone")
    assert h.shutdown(5)

    h2 = make(tmp_path, Engines(), store)
    with caplog.at_level(logging.WARNING, logger="tidemark.worker.herder"):
        h2.start([yaml_entry])
    try:
        assert h2.connector_names() == ["r", "y"]
        assert h2.connector_status("r")["connector"]["state"] == "PAUSED"
        assert h2.connector_status("y")["connector"]["state"] == "STOPPED"  # target kept
        assert "max.batch.size" not in h2.connector_config("y")  # YAML config wins
        assert "the config in the YAML file replaces the stored one" in caplog.text
    finally:
        assert h2.shutdown(5)


def test_a_connector_that_cannot_start_is_failed_not_fatal(
    tmp_path: Path, engines: Engines, store: MemoryOffsetStore
) -> None:
    state = tmp_path / "connectors.json"
    state.write_text(
        orjson.dumps(
            {
                "version": 1,
                "connectors": [
                    {"name": "b", "config": {**memory(), "name": "b"}, "target_state": "STARTED"},
                ],
            }
        ).decode()
    )
    h = make(tmp_path, engines, store, env={})
    h.start([ConnectorEntry(name="a", config={**memory(), "max.batch.size": "${env:NOPE_X}"})])
    try:
        status = h.connector_status("a")
        assert status["connector"]["state"] == "FAILED"
        assert "environment variable NOPE_X is not set" in status["connector"]["trace"]
        assert status["tasks"] == []
        wait_for(lambda: engines.running("b"), what="the other connector")
        # fixed later: a connector restart picks it up
        h.env = {"NOPE_X": "10"}
        assert h.restart_connector("a") is None
        wait_for(lambda: engines.running("a"), what="restarted connector")
        assert h.connector_status("a")["connector"]["state"] == "RUNNING"
    finally:
        assert h.shutdown(5)


def test_validate_returns_config_infos(herder: Herder) -> None:
    infos = herder.validate("memory", {"max.batch.size": "x", "topic.prefix": "p"})
    assert infos["name"] == "io.tidemark.connector.memory.MemoryConnector"
    assert infos["error_count"] == 2
    by_name = {c["definition"]["name"]: c for c in infos["configs"]}
    assert by_name["max.batch.size"]["value"]["errors"] == ["must be an integer, got 'x'"]
    assert by_name["memory.database"]["value"]["errors"] == ["is required"]
    assert by_name["database.server.name"]["value"] == {
        "name": "database.server.name",
        "value": "p",
        "recommended_values": [],
        "errors": [],
        "visible": True,
    }
    d = by_name["errors.max.retries"]["definition"]
    assert d["type"] == "INT" and d["default_value"] == "-1" and d["group"] == "Error Handling"
    assert set(d) == {
        "name",
        "type",
        "required",
        "default_value",
        "importance",
        "documentation",
        "group",
        "order",
        "width",
        "display_name",
        "dependents",
    }
    assert "Error Handling" in infos["groups"]
    ok = herder.validate(
        "io.tidemark.connector.memory.MemoryConnector",
        {"connector.class": "memory", "memory.database": "d", "topic.prefix": "p"},
    )
    assert ok["error_count"] == 0
    with pytest.raises(BadRequest, match="does not match request type"):
        herder.validate("memory", {"connector.class": "postgres"})
    with pytest.raises(BadRequest, match="unknown connector class"):
        herder.validate("nope", {})
    pg = herder.validate("postgres", {"database.password": "x"})
    pw = next(c for c in pg["configs"] if c["definition"]["name"] == "database.password")
    assert pw["definition"]["type"] == "PASSWORD" and pw["value"]["value"] == "********"


def test_progress_reports_snapshot_and_streaming(herder: Herder, engines: Engines) -> None:
    herder.create("c1", memory())
    wait_for(lambda: engines.running("c1"), what="engine")
    m = engines.built["c1"][0].metrics
    m.snapshot.start(["db.t"])
    m.snapshot.rows_scanned["db.t"] = 5
    m.snapshot.rows_expected["db.t"] = 10
    m.streaming.ms_behind_source = 42
    doc = herder.progress()
    assert doc["worker"]["worker_id"] == WORKER
    task = doc["connectors"]["c1"]["tasks"][0]
    assert task["phase"] == "STREAMING"
    assert task["snapshot"]["running"] is True
    assert task["snapshot"]["tables"] == [{"table": "db.t", "rows": 5, "expected": 10}]
    assert task["streaming"]["ms_behind_source"] == 42
    assert doc["connectors"]["c1"]["status"]["tasks"][0]["state"] == str(TaskState.RUNNING)
