"""The demo's README command must keep working: the connector it sends over REST may only use
what the worker allows REST configs to read (it once sent ``${env:...}``, which the worker
rightly refuses, and the demo stopped with a 400)."""

from __future__ import annotations

from pathlib import Path

from worker.config import WorkerSettings
from worker.config_providers import check_placeholders, resolve_config
from worker.demo import Demo, mariadb_connector
from worker.path_policy import path_problems


def test_demo_mariadb_connector_passes_the_rest_placeholder_rule(tmp_path: Path) -> None:
    demo = Demo(work=tmp_path)
    demo.env = {
        "TIDEMARK_MYSQL_HOST": "127.0.0.1",
        "TIDEMARK_MYSQL_PORT": "13306",
        "TIDEMARK_MYSQL_USER": "tidemark",
        "TIDEMARK_MYSQL_PASSWORD": "Demo-Secret-1",
    }
    state = tmp_path / "worker-state"
    name, config = mariadb_connector(demo, state)
    settings = WorkerSettings.model_validate({"bootstrap.servers": "x:9092", "state.dir": state})
    assert check_placeholders(config, settings.rest_providers()) == []
    assert path_problems(config, settings, settings.rest_providers()) == []
    resolved, problems = resolve_config(config, {})
    assert problems == [] and resolved["database.password"] == "Demo-Secret-1"
    assert name and "Demo-Secret-1" not in str(config)
