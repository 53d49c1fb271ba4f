"""Issue 23 part 1 against a real `tidemark run` process, PostgreSQL and Kafka: the
exfiltration request of the issue is refused with default settings, and connectors that fail
with known secret values (a user name from the environment, a password and a host name from
files, a REST-supplied password from the secrets directory) leave those values in no REST
answer, no log line and no state file — while the traces still say what went wrong."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import PgInfo
from tests.integration.test_worker_rest import PG_CLASS, Setup, WorkerProcess, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


@pytest.fixture
def setup(postgres: PgInfo, kafka: str, tmp_path: Path) -> Iterator[Setup]:
    tag = uuid.uuid4().hex[:8]
    yield Setup(
        postgres,
        kafka,
        dbname="postgres",
        role=f"Leaky-User-{tag}",  # never created: the login fails and PostgreSQL echoes it
        password=f"Pw-{uuid.uuid4().hex}",
        wrong_password=f"Wrong-{uuid.uuid4().hex}",
        prefix=f"tws{tag}",
        tmp=tmp_path,
    )


def connector(s: Setup, name: str, **overrides: str) -> dict[str, str]:
    return {
        **s.pg_config(f"{s.prefix}{name}", "unused"),
        "database.user": "postgres",
        "errors.max.retries": "1",
        "errors.retry.delay.initial.ms": "100",
        **overrides,
    }


def write_yaml(s: Setup, connectors: dict[str, dict[str, str]]) -> Path:
    lines = [
        "worker:",
        f"  bootstrap.servers: {s.kafka}",
        f"  rest.port: {s.port}",
        f"  state.dir: {s.tmp / 'state'}",
        "  log.level: DEBUG",
        "connectors:",
    ]
    for name, cfg in connectors.items():
        lines += [f"  - name: {name}", "    config:"]
        lines += [f'      {k}: "{v}"' for k, v in cfg.items()]
    path = s.tmp / "worker.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_secrets_never_leave_the_worker(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    s = setup
    host = f"leaky-host-{uuid.uuid4().hex[:10]}.invalid"
    rest_password = f"RestPw-{uuid.uuid4().hex}"
    (s.tmp / "db.properties").write_text(f"password={s.password}\n")
    (s.tmp / "host.txt").write_text(host + "\n")
    secrets_dir = s.tmp / "state" / "secrets"
    secrets_dir.mkdir(parents=True)
    (secrets_dir / "pw").write_text(rest_password + "\n")
    (s.tmp / "private.key").write_text("-----BEGIN PRIVATE KEY----- Zz9-not-for-rest\n")
    monkeypatch.setenv("TMS_USER", s.role)
    yaml = write_yaml(
        s,
        {
            "auth": connector(
                s,
                "a",
                **{
                    "database.user": "${env:TMS_USER}",
                    "database.password": f"${{file:{s.tmp / 'db.properties'}:password}}",
                },
            ),
            "dns": connector(s, "d", **{"database.hostname": f"${{file:{s.tmp / 'host.txt'}}}"}),
        },
    )
    secrets = [s.role, s.password, host, rest_password, "Zz9-not-for-rest"]
    w = WorkerProcess(s, yaml, 1)
    try:
        w.wait_healthy()
        # -- the request, with default settings: refused, nothing created ----------
        code, doc = w.call(
            "POST",
            "/connectors",
            {
                "name": "x",
                "config": {
                    **connector(s, "x"),
                    "database.hostname": f"${{file:{s.tmp / 'private.key'}}}",
                    "database.user": "${env:TMS_USER}",
                },
            },
        )
        assert code == 400, doc
        assert "config provider 'env' may not be used in configs sent over REST" in doc["message"]
        assert "is outside config.providers.file.param.allowed.paths" in doc["message"]
        assert w.call("GET", "/connectors/x")[0] == 404
        code, doc = w.call(
            "PUT",
            f"/connector-plugins/{PG_CLASS}/config/validate",
            {**connector(s, "x"), "topic.prefix": f"${{file:{s.tmp / 'private.key'}}}"},
        )
        assert code == 400, doc

        # -- nor may it carry Python: a Filter condition reading the worker's environment ---
        env_read = (
            '"{0.field.__globals__[dataclass].__globals__[sys].modules[os].environ[TMS_USER]}"'
            ".format(valueSchema) == ''"
        )
        python_filter = {
            "transforms": "f",
            "transforms.f.type": "io.debezium.transforms.Filter",
            "transforms.f.language": "python",
            "transforms.f.condition": env_read,
        }
        code, doc = w.call(
            "POST", "/connectors", {"name": "py", "config": {**connector(s, "py"), **python_filter}}
        )
        assert code == 400, doc
        assert (
            "transforms.f.condition: a Python condition cannot be set over REST" in doc["message"]
        )
        assert w.call("GET", "/connectors/py")[0] == 404

        # -- a REST connector may read the documented secrets directory ---------------------
        rest = connector(
            s,
            "r",
            **{"database.password": f"${{file:{secrets_dir}/pw}}"},
        )
        code, doc = w.call("POST", "/connectors", {"name": "rest", "config": rest})
        # ... and the connection check used it: PostgreSQL refused it (it is not postgres's
        # password), which the 400 says without showing it
        assert code == 400, doc
        assert 'password authentication failed for user "postgres"' in doc["message"]
        assert w.call("GET", "/connectors/rest")[0] == 404

        for name in ("auth", "dns"):
            wait_for(lambda n=name: w.task_state(n) == "FAILED", 60, f"{name} FAILED")
        traces = {n: w.status(n)["tasks"][0]["trace"] for n in ("auth", "dns")}
        # the traces still explain the failure, with the values masked
        assert 'password authentication failed for user "********"' in traces["auth"]
        assert "********" in traces["dns"] and "host" in traces["dns"].lower()

        for path in (
            "/connectors?expand=status&expand=info",
            "/connectors/auth/config",
            "/connectors/dns/tasks/0/status",
            "/connectors/auth/tasks",
            "/tidemark/status",
            "/metrics",
        ):
            code, _ = w.call("GET", path)
            assert code == 200, path
        rc, _ = w.terminate()
        assert rc == 0, w.log()[-3000:]
    finally:
        w.kill()

    outputs = {"REST answers": "\n".join(w.bodies), "the log": w.log()}
    for f in (s.tmp / "state").rglob("*"):
        if f.is_file() and f.parent != secrets_dir:
            outputs[str(f)] = f.read_text(errors="replace")
    assert "connectors.json" in " ".join(outputs)
    for where, text in outputs.items():
        for secret in secrets:
            assert secret.lower() not in text.lower(), f"{secret!r} found in {where}"
