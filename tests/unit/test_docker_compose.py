"""Checks on docker/: the compose file, the worker image's Dockerfile and worker.yaml.

No Docker engine is needed. `docker compose config` (client-side validation against the
Compose specification) runs when the Compose v2 CLI is installed; the structural checks
below always run.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE_FILE = DOCKER / "docker-compose.yml"
DOCKERFILE = DOCKER / "Dockerfile"
WORKER_YAML = DOCKER / "worker.yaml"

SERVICES = {"kafka", "postgres", "mysql", "mongodb", "sqlserver", "cassandra", "tidemark"}
EXTRAS = {"postgres", "mysql", "mongodb", "sqlserver", "cassandra", "avro"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict), "docker-compose.yml is not a mapping"
    return data


def _service(compose: dict[str, Any], name: str) -> dict[str, Any]:
    svc = compose["services"][name]
    assert isinstance(svc, dict)
    return svc


def _env(svc: dict[str, Any]) -> dict[str, str]:
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): str(v) for k, v in env.items()}


def _words(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def _options(svc: dict[str, Any]) -> dict[str, str]:
    """`--some_option=value` / `-c some_option=value` words of a command, keys normalised."""
    opts = {}
    for word in _words(svc.get("command")):
        key, sep, value = word.lstrip("-").partition("=")
        if sep:
            opts[key.lower().replace("_", "-")] = value
    return opts


def _text(value: Any) -> str:
    return json.dumps(value)


def _volume_mounts(svc: dict[str, Any]) -> dict[str, str]:
    """target -> source, for the short `source:target[:mode]` syntax."""
    mounts = {}
    for item in svc.get("volumes", []):
        source, target = item.split(":")[:2]
        mounts[target] = source
    return mounts


# --- docker compose config ------------------------------------------------------------


def _compose_cli() -> list[str] | None:
    candidates = []
    if shutil.which("docker"):
        candidates.append(["docker", "compose"])
    if shutil.which("docker-compose"):
        candidates.append(["docker-compose"])
    for cmd in candidates:
        try:
            out = subprocess.run(
                [*cmd, "version", "--short"], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip().lstrip("v").startswith("2"):
            return cmd
    return None


def test_docker_compose_config_validates() -> None:
    cli = _compose_cli()
    if cli is None:
        pytest.skip(
            "Compose v2 CLI not installed: `docker compose config` not run "
            "(the structural checks in this file still ran)"
        )
    result = subprocess.run(
        [*cli, "-f", str(COMPOSE_FILE), "--profile", "all", "config", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    model = json.loads(result.stdout)
    assert set(model["services"]) == SERVICES
    tidemark = model["services"]["tidemark"]
    assert tidemark["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert Path(tidemark["build"]["context"]) == ROOT
    assert (Path(tidemark["build"]["context"]) / tidemark["build"]["dockerfile"]) == DOCKERFILE

    # A plain `up` (no profile) must still bring up a working worker.
    result = subprocess.run(
        [*cli, "-f", str(COMPOSE_FILE), "config", "--services"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) == {"kafka", "postgres", "tidemark"}


# --- structure of docker-compose.yml -----------------------------------------------------


def test_services_present_with_healthchecks(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == SERVICES
    for name in SERVICES:
        assert _service(compose, name).get("healthcheck", {}).get("test"), name


def test_depends_on_waits_for_healthy_services(compose: dict[str, Any]) -> None:
    deps = _service(compose, "tidemark")["depends_on"]
    assert isinstance(deps, dict)
    assert deps["kafka"] == {"condition": "service_healthy"}
    assert deps["postgres"] == {"condition": "service_healthy"}
    for name in deps:
        # A dependency behind a profile would break a plain `docker compose up`.
        assert not _service(compose, name).get("profiles"), name


def test_optional_services_share_the_all_profile(compose: dict[str, Any]) -> None:
    for name in ("mysql", "mongodb", "sqlserver", "cassandra"):
        assert "all" in _service(compose, name).get("profiles", []), name


def test_volumes_are_named_and_declared(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    for name in SERVICES:
        for target, source in _volume_mounts(_service(compose, name)).items():
            if not source.startswith((".", "/")):
                assert source in declared, f"{name}: volume {source} not declared"
            elif target != "/etc/tidemark/worker.yaml":
                pytest.fail(f"{name}: bind mount {source}:{target}, want a named volume")


def test_kafka_kraft_single_node_with_transactions(compose: dict[str, Any]) -> None:
    kafka = _service(compose, "kafka")
    assert kafka["image"] == "apache/kafka:4.1.1"
    env = _env(kafka)
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "1"
    assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "1"
    assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "1"
    advertised = env["KAFKA_ADVERTISED_LISTENERS"]
    assert "//kafka:9092" in advertised and "//localhost:29092" in advertised
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", env["CLUSTER_ID"]), "CLUSTER_ID: base64 UUID"
    assert "29092:29092" in kafka["ports"]


def test_postgres_logical_decoding(compose: dict[str, Any]) -> None:
    pg = _service(compose, "postgres")
    assert pg["image"] == "postgres:15"
    opts = _options(pg)
    assert opts["wal-level"] == "logical"
    assert int(opts["max-replication-slots"]) >= 1 and int(opts["max-wal-senders"]) >= 1
    assert {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"} <= set(_env(pg))
    assert "5432:5432" in pg["ports"]


def test_mysql_row_binlog_and_gtid(compose: dict[str, Any]) -> None:
    mysql = _service(compose, "mysql")
    assert mysql["image"] == "mysql:8.0"
    opts = _options(mysql)
    assert opts["binlog-format"].upper() == "ROW"
    assert opts["binlog-row-image"].upper() == "FULL"
    assert opts["gtid-mode"].upper() == "ON"
    assert opts["enforce-gtid-consistency"].upper() == "ON"
    assert int(opts["server-id"]) > 0
    assert "3306:3306" in mysql["ports"]


def test_mongodb_single_node_replica_set(compose: dict[str, Any]) -> None:
    mongo = _service(compose, "mongodb")
    assert mongo["image"] == "mongo:7"
    words = _words(mongo["command"])
    assert words[words.index("--replSet") + 1] == "rs0"
    assert "rs.initiate" in _text(mongo["healthcheck"]["test"])
    assert "27017:27017" in mongo["ports"]


def test_sqlserver_agent_enabled(compose: dict[str, Any]) -> None:
    mssql = _service(compose, "sqlserver")
    assert mssql["image"] == "mcr.microsoft.com/mssql/server:2022-latest"
    env = _env(mssql)
    assert env["MSSQL_AGENT_ENABLED"].lower() == "true"
    assert env["ACCEPT_EULA"] == "Y"
    assert re.fullmatch(r"\$\{MSSQL_SA_PASSWORD:-.+\}", env["MSSQL_SA_PASSWORD"])
    assert "1433:1433" in mssql["ports"]


def test_cassandra_cdc_enabled_and_shared_with_worker(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    cass = _service(compose, "cassandra")
    assert cass["image"] == "cassandra:5.0"
    assert "9042:9042" in cass["ports"]
    # Apply the entrypoint's sed edits to the CDC lines of Cassandra 5.0's stock cassandra.yaml.
    script = "\n".join(_words(cass["entrypoint"]))
    assert "/etc/cassandra/cassandra.yaml" in script and "exec docker-entrypoint.sh" in script
    edits = re.findall(r"-e\s+'([^']*)'", script)
    assert edits, "no sed edits of cassandra.yaml in the cassandra entrypoint"
    conf = tmp_path / "cassandra.yaml"
    conf.write_text(
        "cdc_enabled: false\n# cdc_block_writes: true\n"
        "# cdc_raw_directory: /var/lib/cassandra/cdc_raw\n"
    )
    sed = [a for e in edits for a in ("-e", e)]
    subprocess.run(["sed", "-i", *sed, str(conf)], check=True, timeout=10)
    edited = yaml.safe_load(conf.read_text())
    assert edited == {"cdc_enabled": True, "cdc_raw_directory": "/var/lib/cassandra/cdc_raw"}
    # cdc_raw gets hard links of commit-log segments: it must be on the same volume as
    # the commit log (/var/lib/cassandra), and that volume is mounted in the worker.
    volume = _volume_mounts(cass)["/var/lib/cassandra"]
    assert _volume_mounts(_service(compose, "tidemark"))["/var/lib/cassandra"] == volume


def test_tidemark_worker_service(compose: dict[str, Any]) -> None:
    tm = _service(compose, "tidemark")
    assert tm["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}
    assert (COMPOSE_FILE.parent / tm["build"]["context"] / tm["build"]["dockerfile"]).is_file()
    assert _words(tm["command"]) == ["run", "/etc/tidemark/worker.yaml"]
    assert "8083:8083" in tm["ports"]
    assert _volume_mounts(tm)["/etc/tidemark/worker.yaml"] == "./worker.yaml"
    assert "/var/lib/tidemark" in _volume_mounts(tm)


# --- docker/Dockerfile -------------------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def test_dockerfile_runtime_stage() -> None:
    instructions = _instructions()
    froms = [i for i, (kw, _) in enumerate(instructions) if kw == "FROM"]
    assert all(instructions[i][1].startswith("python:3.11-slim") for i in froms)
    final = instructions[froms[-1] :]
    args = {kw: rest for kw, rest in final}  # last of each kind wins, as in Docker
    assert json.loads(args["ENTRYPOINT"]) == ["tidemark"]
    assert json.loads(args["CMD"]) == ["run", "/etc/tidemark/worker.yaml"]
    assert args["EXPOSE"] == "8083"
    assert args["USER"] not in {"root", "0"}
    assert "localhost:8083/health" in args["HEALTHCHECK"]
    assert "curl" not in args["HEALTHCHECK"]
    runs = " ".join(rest for kw, rest in final if kw == "RUN").split()
    assert {"tdsodbc", "unixodbc"} <= set(runs)


def test_dockerfile_installs_all_extras() -> None:
    runs = [rest for kw, rest in _instructions() if kw == "RUN" and "pip install" in rest]
    found = set()
    for run in runs:
        for match in re.finditer(r"\.\[([a-z,\s-]+)\]", run):
            found |= {e.strip() for e in match.group(1).split(",")}
    assert found >= EXTRAS
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert found <= set(declared["optional-dependencies"]), "extra missing in pyproject.toml"


# --- docker/worker.yaml ------------------------------------------------------------------


def test_worker_yaml_matches_compose(compose: dict[str, Any]) -> None:
    cfg = yaml.safe_load(WORKER_YAML.read_text())
    assert cfg["worker"]["bootstrap.servers"] == "kafka:9092"
    assert cfg["worker"]["rest.port"] == 8083
    assert cfg["worker"]["state.dir"] == "/var/lib/tidemark"
    env = _env(_service(compose, "tidemark"))
    for connector in cfg["connectors"]:
        conf = connector["config"]
        assert conf["database.hostname"] in compose["services"], connector["name"]
        for var in re.findall(r"\$\{env:(\w+)\}", _text(conf)):
            assert var in env, f"{connector['name']} needs {var} in the tidemark service"
