"""Who wrote a connector config decides what its placeholders and its database client may
read: the operator's YAML file resolves with unlimited providers and lets libpq use the
worker's own credentials; values written over REST get the REST providers and no ambient
credentials, also when they reach the herder without the REST layer's check (a state file
edited by hand, a config topic written by another worker)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc.common_config import AMBIENT_CREDENTIALS
from cdc.errors import ConfigError
from cdc.offsets.memory import MemoryOffsetStore
from connectors.postgres.connection import conninfo
from connectors.postgres.connector import PostgresConnector
from tests.unit.test_worker_herder import Engines, make, memory, task_state
from tests.unit.test_worker_task import wait_for
from worker.config import ConnectorEntry
from worker.config_providers import Origin, Provider, resolve_config
from worker.herder import BadRequest

SECRET = "s3cret-from-the-environment"


def postgres(**extra: Any) -> dict[str, Any]:
    return {
        "connector.class": "postgres",
        "database.hostname": "db.example",
        "database.user": "cdc",
        "database.dbname": "inventory",
        "topic.prefix": "srv",
        "errors.retry.delay.initial.ms": 10,
        **extra,
    }


def test_values_not_from_the_yaml_file_resolve_with_the_rest_providers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TMO_SECRET", SECRET)
    rest = {"file": Provider("file", "file", allowed_paths=(Path("/nowhere"),))}
    yaml = {"a": "${env:TMO_SECRET}", "b": "${env:TMO_SECRET}"}
    config = {"a": "${env:TMO_SECRET}", "b": "${env:TMO_SECRET}x"}
    resolved, problems = resolve_config(config, origin=Origin(rest, yaml))
    assert resolved["a"] == SECRET  # the file's own value
    assert [k for k, _ in problems] == ["b"] and "'env'" in problems[0][1]
    assert resolved["b"] == "${env:TMO_SECRET}x"  # not resolved
    # no YAML config at all (created over REST): nothing is the operator's
    _, problems = resolve_config({"a": "${env:TMO_SECRET}"}, origin=Origin(rest))
    assert [k for k, _ in problems] == ["a"]
    # no origin: a caller inside the process (the YAML loader, the CLI)
    assert resolve_config(config)[0]["b"] == SECRET + "x"


def _stored_rest_connector(tmp_path: Path, **extra: Any) -> None:
    config = {**memory(**extra), "name": "r"}
    doc = {"version": 1, "connectors": [{"name": "r", "config": config, "source": "rest"}]}
    (tmp_path / "connectors.json").write_bytes(orjson.dumps(doc))


def test_a_stored_rest_config_with_a_forbidden_placeholder_does_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The REST check refuses ``${env:...}`` before storing; a state file that holds one
    anyway (edited by hand, or written by an older version) must not resolve it."""
    monkeypatch.setenv("TMO_SECRET", SECRET)
    _stored_rest_connector(tmp_path, **{"api.token": "${env:TMO_SECRET}"})
    engines = Engines()
    h = make(tmp_path, engines, MemoryOffsetStore())
    h.start()
    try:
        status = h.connector_status("r")
        assert status["connector"]["state"] == "FAILED"
        assert "unknown config provider 'env'" in status["connector"]["trace"]
        assert "r" not in engines.built
        assert SECRET not in orjson.dumps(status).decode()
    finally:
        assert h.shutdown(5)


def test_a_yaml_connector_keeps_its_placeholders_until_its_endpoint_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMO_SECRET", SECRET)
    engines = Engines()
    h = make(tmp_path, engines, MemoryOffsetStore())
    h.start([ConnectorEntry(name="y", config=memory(**{"api.token": "${env:TMO_SECRET}"}))])
    try:
        wait_for(lambda: engines.running("y"), what="running")
        assert engines.configs["y"]["api.token"] == SECRET
        # an edit of another key over REST: the file's placeholder still resolves
        h.patch_config("y", {"max.batch.size": "5"})
        wait_for(lambda: len(engines.built["y"]) == 2, what="restart")
        assert engines.configs["y"]["api.token"] == SECRET
        # the same placeholder with a new endpoint: the worker's secret would go there
        with pytest.raises(BadRequest, match="config provider 'env'"):
            h.patch_config("y", {"database.hostname": "elsewhere.example"})
        assert task_state(h, "y") == "RUNNING"  # the refused edit changed nothing
        # a new placeholder on the file's connector is not the file's either
        with pytest.raises(BadRequest, match=r"api\.key: unknown config provider 'env'"):
            h.patch_config("y", {"api.key": "${env:TMO_SECRET}"})
    finally:
        assert h.shutdown(5)


def test_only_the_yaml_file_lets_a_connector_use_the_worker_s_own_credentials(
    tmp_path: Path,
) -> None:
    """The fake engines connect nowhere: the real plugin is read for its config only."""
    engines = Engines()
    h = make(tmp_path, engines, MemoryOffsetStore())
    h.start([ConnectorEntry(name="y", config=postgres())])
    try:
        wait_for(lambda: engines.running("y"), what="y running")
        assert AMBIENT_CREDENTIALS not in engines.configs["y"]  # libpq's defaults apply

        h.create("r", postgres())
        wait_for(lambda: engines.running("r"), what="r running")
        assert engines.configs["r"][AMBIENT_CREDENTIALS] == "false"

        h.create("r2", postgres(**{AMBIENT_CREDENTIALS: "true"}))  # asking is not enough
        wait_for(lambda: engines.running("r2"), what="r2 running")
        assert engines.configs["r2"][AMBIENT_CREDENTIALS] == "false"

        h.patch_config("y", {"snapshot.mode": "never"})  # same server: still the operator's
        wait_for(lambda: len(engines.built["y"]) == 2, what="y restart")
        assert AMBIENT_CREDENTIALS not in engines.configs["y"]

        h.patch_config("y", {"database.hostname": "other.example"})
        wait_for(lambda: len(engines.built["y"]) == 3, what="y restart")
        assert engines.configs["y"][AMBIENT_CREDENTIALS] == "false"
    finally:
        assert h.shutdown(5)


def test_without_ambient_credentials_libpq_gets_every_credential_setting_explicitly() -> None:
    cfg = PostgresConnector.config_def.parse(postgres(**{AMBIENT_CREDENTIALS: "false"}))
    params = conninfo(cfg)
    # set, so libpq reads neither PGPASSWORD nor ~/.pgpass, PGSSLCERT nor ~/.postgresql
    assert params["password"] == ""
    assert params["passfile"].startswith("/dev/null/")
    assert params["sslcert"].startswith("/dev/null/") and params["sslkey"].startswith("/dev/")
    assert params["gssencmode"] == "disable" and params["require_auth"] == "!gss,!sspi"
    given = PostgresConnector.config_def.parse(
        postgres(
            **{
                AMBIENT_CREDENTIALS: "false",
                "database.password": "pw",
                "database.sslcert": "/etc/c.pem",
                "database.sslkey": "/etc/k.pem",
            }
        )
    )
    params = conninfo(given)
    assert (params["password"], params["sslcert"], params["sslkey"]) == (
        "pw",
        "/etc/c.pem",
        "/etc/k.pem",
    )
    default = conninfo(PostgresConnector.config_def.parse(postgres()))
    assert not {"password", "passfile", "sslcert", "require_auth"} & set(default)


@pytest.mark.parametrize("host", ["/var/run/postgresql", "db.example,/tmp", "@abstract"])
def test_without_ambient_credentials_a_unix_socket_host_is_refused(host: str) -> None:
    cfg = PostgresConnector.config_def.parse(
        postgres(**{AMBIENT_CREDENTIALS: "false", "database.hostname": host})
    )
    with pytest.raises(ConfigError) as info:
        conninfo(cfg)
    assert info.value.problems[0][0] == "database.hostname"
    assert "Unix socket" in info.value.problems[0][1]


@pytest.mark.parametrize(
    ("uri", "refused"),
    [
        ("mongodb://h:27017/?authMechanism=MONGODB-AWS", "authMechanism=MONGODB-AWS"),
        ("mongodb://u@h/?authmechanism=GSSAPI&authSource=$external", "authMechanism=GSSAPI"),
        ("mongodb://h/?tls=true&tlsCertificateKeyFile=/etc/k.pem", "tlscertificatekeyfile"),
        # the driver also separates options with ';', which parse_qs alone does not
        (
            "mongodb://h/?replicaSet=rs0;authMechanism=MONGODB-OIDC;"
            "authMechanismProperties=ENVIRONMENT:k8s",
            "authMechanism=MONGODB-OIDC",
        ),
        ("mongodb://h/?tls=true;tlsCertificateKeyFile=/etc/k.pem", "tlscertificatekeyfile"),
    ],
)
def test_without_ambient_credentials_a_mongodb_uri_may_not_ask_for_the_worker_s(
    uri: str, refused: str
) -> None:
    from connectors.mongodb.connection import check_no_ambient_credentials

    with pytest.raises(ConfigError) as info:
        check_no_ambient_credentials(uri)
    key, reason = info.value.problems[0]
    assert key == "mongodb.connection.string" and refused in reason
    check_no_ambient_credentials("mongodb://u:p@h:27017/?authMechanism=SCRAM-SHA-256&tls=true")


def test_a_connection_string_hidden_in_mongodb_hosts_is_refused() -> None:
    """pymongo reads a seed with '://' as a whole connection string, options and all, which
    the connection string's checks never saw."""
    from connectors.mongodb.config import CONFIG_DEF
    from connectors.mongodb.connection import connect

    hosts = "rs0/mongodb://evil.example/?tls=true&tlsCertificateKeyFile=/etc/tidemark/k.pem"
    problems = dict(CONFIG_DEF.validate({"mongodb.name": "m", "mongodb.hosts": hosts})[1])
    assert "is not a host or host:port" in problems["mongodb.hosts"]
    # and at connect time, whatever let the config through
    cfg = CONFIG_DEF.parse({"mongodb.name": "m", "mongodb.hosts": "rs0/h:27017"})
    cfg.values["mongodb.hosts"] = hosts
    with pytest.raises(ConfigError, match="is not a host or host:port"):
        connect(cfg)


def test_without_ambient_credentials_sql_server_needs_its_own_driver_and_a_password() -> None:
    from connectors.sqlserver.connection import check_no_ambient_credentials
    from connectors.sqlserver.connector import SqlServerConnector

    base = {
        "connector.class": "sqlserver",
        "database.hostname": "h",
        "database.user": "u",
        "database.names": "d",
        "topic.prefix": "srv",
    }
    cfg = SqlServerConnector.config_def.parse(base)
    with pytest.raises(ConfigError) as info:
        check_no_ambient_credentials(cfg, "PostgreSQL Unicode")
    assert [k for k, _ in info.value.problems] == ["database.odbc.driver", "database.password"]
    given = SqlServerConnector.config_def.parse({**base, "database.password": "pw"})
    check_no_ambient_credentials(given, "FreeTDS")


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"schema.history.internal.file.filename": "/etc/hosts"}, "may only name a path under"),
        (
            {"transforms": "f", "transforms.f.type": "io.debezium.transforms.Filter",
             "transforms.f.language": "python", "transforms.f.condition": "True"},
            "a Python condition cannot be set over REST",
        ),
    ],
)  # fmt: skip
def test_rest_rules_on_paths_and_code_hold_again_when_the_task_starts(
    tmp_path: Path, extra: dict[str, str], reason: str
) -> None:
    """A stored config that never passed the REST check (or passed it on a worker with
    other settings) is held to this worker's rules; the same values from the YAML file run."""
    _stored_rest_connector(tmp_path, **extra)
    engines = Engines()
    h = make(tmp_path, engines, MemoryOffsetStore())
    h.start([ConnectorEntry(name="y", config=memory(**extra))])
    try:
        status = h.connector_status("r")
        assert status["connector"]["state"] == "FAILED"
        assert reason in status["connector"]["trace"], status["connector"]["trace"]
        assert "r" not in engines.built
        wait_for(lambda: engines.running("y"), what="the YAML file's connector")
    finally:
        assert h.shutdown(5)


def test_a_shards_connection_keeps_the_connectors_own_settings_over_the_uris(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The connection string's TLS and auth options apply to a shard reached directly, but
    not over the connector's own settings (option names are read in any case: the URI's
    authsource would have overridden mongodb.authsource)."""
    import pymongo

    from connectors.mongodb.config import CONFIG_DEF
    from connectors.mongodb.connection import connect

    seen: dict[str, object] = {}
    monkeypatch.setattr(pymongo, "MongoClient", lambda host, **kw: seen.update(kw))  # stand-in
    cfg = CONFIG_DEF.parse(
        {
            "mongodb.name": "m",
            "mongodb.connection.string": "mongodb://h:27017/?authSource=fromuri&tls=true",
            "mongodb.user": "u",
            "mongodb.password": "p",
            "mongodb.authsource": "admin",
        }
    )
    connect(cfg, hosts=["shard1:27018"])
    assert seen["authSource"] == "admin" and "authsource" not in seen
    assert seen["tls"] == "true"
