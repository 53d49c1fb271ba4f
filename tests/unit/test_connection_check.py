"""The connection check before a config sent over REST is stored (worker.connection_check).

The connector here is the in-memory one with a scripted ``check_connection`` (named
``ProbedConnector``): what it reports is set by ``memory.database``. The real checks of the
PostgreSQL and MariaDB connectors run against the real servers in
tests/integration/test_connection_check.py."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

from cdc.common_config import AMBIENT_CREDENTIALS, ambient_credentials_field
from cdc.config import ConfigDef, ConfigField, Kind
from cdc.offsets.memory import MemoryOffsetStore
from cdc.spi.connection_check import ConnectionReport
from cdc.testing.memory import CONFIG_DEF as MEMORY_DEF
from cdc.testing.memory import MemoryConnector
from tests.unit.test_worker_herder import WORKER, Engines
from worker.config import WorkerSettings
from worker.herder import BadRequest, Herder
from worker.registry import BUILTINS, PluginSpec, Registry
from worker.rest.app import App, Request


class ProbedConnector(MemoryConnector):
    """The memory connector with a connection check scripted by ``memory.database``:
    ``refuses``, ``warns``, ``hangs``, ``raises``; anything else connects fine."""

    type_name = "probed"
    class_names = ("io.tidemark.test.ProbedConnector",)
    config_def = MEMORY_DEF.extend(
        ConfigDef(
            [
                ambient_credentials_field("test"),
                ConfigField("probe.password", Kind.PASSWORD, None, doc="a secret"),
            ]
        )
    )
    seen: ClassVar[list[dict[str, Any]]] = []
    release = threading.Event()

    @classmethod
    def check_connection(cls, config: Mapping[str, Any]) -> ConnectionReport:
        cls.seen.append(dict(config))
        script = config["memory.database"]
        if script == "refuses":
            return ConnectionReport(errors=[("memory.database", "the server refused the login")])
        if script == "warns":
            secret = config.get("probe.password", "")
            return ConnectionReport(warnings=[("memory.database", f"no replication for {secret}")])
        if script == "hangs":
            cls.release.wait(10)
        if script == "raises":
            raise RuntimeError("driver bug")
        return ConnectionReport()


def probed(database: str, **extra: Any) -> dict[str, Any]:
    return {
        "connector.class": "io.tidemark.test.ProbedConnector",
        "memory.database": database,
        "topic.prefix": "srv",
        **extra,
    }


def make(tmp_path: Path, **worker: Any) -> Herder:
    settings = WorkerSettings.model_validate({"state.dir": str(tmp_path), **worker})
    registry = Registry(
        (*BUILTINS, PluginSpec("probed", f"{__name__}:ProbedConnector")), entry_points=False
    )
    return Herder(
        settings,
        MemoryOffsetStore(),
        worker_id=WORKER,
        engine_factory=Engines(),
        registry=registry,
        state_file=tmp_path / "connectors.json",
    )


@pytest.fixture
def herder(tmp_path: Path) -> Iterator[Herder]:
    ProbedConnector.seen.clear()
    ProbedConnector.release.clear()
    h = make(tmp_path)
    h.start()
    yield h
    ProbedConnector.release.set()
    assert h.shutdown(5)


def test_a_config_the_database_refuses_is_not_stored(herder: Herder) -> None:
    with pytest.raises(BadRequest) as err:
        herder.create("c", probed("refuses"))
    assert "1 error(s):\nmemory.database: the server refused the login" in err.value.message
    assert herder.connector_names() == []
    with pytest.raises(BadRequest):
        herder.put_config("c", probed("refuses"))
    assert herder.connector_names() == []


def test_an_update_the_database_refuses_keeps_the_running_config(herder: Herder) -> None:
    herder.create("c", probed("fine"))
    for change in (
        lambda: herder.put_config("c", probed("refuses")),
        lambda: herder.patch_config("c", {"memory.database": "refuses"}),
    ):
        with pytest.raises(BadRequest, match="refused the login"):
            change()
        assert herder.connector_config("c")["memory.database"] == "fine"
    assert [s["memory.database"] for s in ProbedConnector.seen] == ["fine", "refuses", "refuses"]


def test_warnings_do_not_refuse_and_are_logged_without_the_secret(
    herder: Herder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "tidemark.worker.herder")
    herder.create("c", probed("warns", **{"probe.password": "s3cret-value"}))
    assert herder.connector_names() == ["c"]
    logged = [r.getMessage() for r in caplog.records]
    assert logged == ["connector c: memory.database: no replication for ********"]


def test_validate_shows_errors_on_their_key_and_warnings(herder: Herder) -> None:
    app = App(herder, version="9.9.9", commit="abc", cluster_id=lambda: "c")

    def validate(config: dict[str, Any]) -> dict[str, Any]:
        r = app.handle(
            Request(
                "PUT",
                "/connector-plugins/ProbedConnector/config/validate",
                {},
                orjson.dumps(config),
            )
        )
        assert r.status == 200
        return dict(r.body)

    body = validate(probed("refuses"))
    assert body["error_count"] == 1
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
    assert errors["memory.database"] == ["the server refused the login"]
    body = validate(probed("warns"))
    assert body["error_count"] == 0
    assert body["warnings"] == ["memory.database: no replication for "]


def test_no_connection_is_tried_while_another_value_is_invalid(herder: Herder) -> None:
    with pytest.raises(BadRequest, match=r"snapshot\.mode"):
        herder.create("c", probed("fine", **{"snapshot.mode": "sometimes"}))
    assert ProbedConnector.seen == []


def test_a_host_that_never_answers_fails_after_the_timeout(herder: Herder) -> None:
    started = time.monotonic()
    with pytest.raises(BadRequest) as err:
        herder.create("c", probed("hangs", **{"connection.validation.timeout.ms": 300}))
    assert time.monotonic() - started < 5
    assert (
        "connection.validation.timeout.ms: Connection validation timed out after 300 ms"
        in err.value.message
    )
    assert herder.connector_names() == []


def test_a_check_that_raises_is_an_error_not_a_crash(herder: Herder) -> None:
    with pytest.raises(BadRequest, match="Error during connection validation: driver bug"):
        herder.create("c", probed("raises"))


def test_the_check_connects_without_the_worker_s_credentials(herder: Herder) -> None:
    herder.create("c", probed("fine", **{AMBIENT_CREDENTIALS: "true"}))
    assert ProbedConnector.seen[-1][AMBIENT_CREDENTIALS] == "false"


def test_the_worker_setting_turns_the_check_off(tmp_path: Path) -> None:
    ProbedConnector.seen.clear()
    h = make(tmp_path, **{"rest.validate.connections": False})
    h.start()
    try:
        h.create("c", probed("refuses"))
        assert h.connector_names() == ["c"]
        assert ProbedConnector.seen == []
    finally:
        assert h.shutdown(5)
