"""A config sent over REST is checked against the real database before it is stored, as Kafka
Connect does with Debezium's connectors: ``POST /connectors`` with a wrong password is a 400
naming ``database.hostname`` and the server's message; ``/validate`` shows it on that key, and
what would fail only once the task streams as a warning.

The REST app and herder run in-process; their engines are the unit tests' fakes (nothing is
captured here), the connection checks are the connectors' own, against the local PostgreSQL,
MariaDB, the SQL Server stand-in (a PostgreSQL database with SQL Server's CDC catalog, reached
through pyodbc) and the MongoDB stand-in (mongo-java-server)."""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pymysql
import pytest

from cdc.offsets.memory import MemoryOffsetStore
from connectors.sqlserver import SqlServerConnector
from tests.integration.conftest import MySqlInfo, PgInfo, SqlServerInfo
from tests.integration.test_worker_rest import TIDEMARK
from tests.unit.test_worker_herder import WORKER, Engines
from worker.config import WorkerSettings
from worker.herder import Herder
from worker.rest.app import App, Request, Response


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    settings = WorkerSettings.model_validate({"state.dir": str(tmp_path)})
    herder = Herder(settings, MemoryOffsetStore(), worker_id=WORKER, engine_factory=Engines())
    herder.start()
    yield App(herder, version="9.9.9", commit="abc", cluster_id=lambda: "c")
    assert herder.shutdown(5)


def post(app: App, config: dict[str, Any]) -> Response:
    body = {"name": "c" + uuid.uuid4().hex[:6], "config": config}
    return app.handle(Request("POST", "/connectors", {}, orjson.dumps(body)))


def validate(app: App, config: dict[str, Any]) -> tuple[dict[str, list[str]], list[str]]:
    plugin = config["connector.class"].rsplit(".", 1)[-1]
    r = app.handle(
        Request("PUT", f"/connector-plugins/{plugin}/config/validate", {}, orjson.dumps(config))
    )
    assert r.status == 200, r.body
    errors = {c["value"]["name"]: c["value"]["errors"] for c in r.body["configs"]}
    return {k: v for k, v in errors.items() if v}, list(r.body["warnings"])


def refused(r: Response, key: str, text: str) -> None:
    assert r.status == 400, r.body
    assert f"\n{key}: " in r.body["message"] and text in r.body["message"], r.body["message"]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections (the kernel's backlog) and never says a word."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


# -- PostgreSQL --------------------------------------------------------------------------------
def pg_config(pg: PgInfo, **extra: Any) -> dict[str, Any]:
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": pg.host,
        "database.port": str(pg.port),
        "database.user": pg.user,
        "database.password": pg.password,
        "database.dbname": pg.dbname,
        "topic.prefix": "chk",
        "slot.name": "tm_check_" + uuid.uuid4().hex[:8],
        **extra,
    }


@pytest.mark.postgres
def test_postgres_a_wrong_password_is_refused_before_the_config_is_stored(
    app: App, postgres: PgInfo
) -> None:
    assert post(app, pg_config(postgres)).status == 201
    r = post(app, pg_config(postgres, **{"database.password": "wrong"}))
    refused(r, "database.hostname", "password authentication failed")
    assert "wrong" not in r.body["message"]
    errors, warnings = validate(app, pg_config(postgres, **{"database.password": "wrong"}))
    assert list(errors) == ["database.hostname"] and not warnings
    assert len(app.herder.connector_names()) == 1


@pytest.mark.postgres
def test_postgres_a_closed_port_and_a_silent_one(
    app: App, postgres: PgInfo, silent_port: int
) -> None:
    with socket.socket() as s:  # a port nothing listens on once this closes
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    refused(
        post(app, pg_config(postgres, **{"database.port": str(closed)})),
        "database.hostname",
        "Connection refused",
    )
    r = post(
        app,
        pg_config(
            postgres,
            **{"database.port": str(silent_port), "connection.validation.timeout.ms": "700"},
        ),
    )
    refused(r, "database.hostname", "Connection validation timed out after 700 ms")


@pytest.mark.postgres
def test_postgres_a_rest_config_does_not_log_in_with_the_worker_s_password(
    app: App, postgres: PgInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libpq would take PGPASSWORD from the worker's environment; a REST caller's config
    may not (docs/security.md), and the check connects as the task would."""
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    config = pg_config(postgres)
    del config["database.password"]
    refused(post(app, config), "database.hostname", "password")


@pytest.mark.postgres
def test_postgres_what_would_fail_only_when_streaming_is_a_warning(
    app: App, postgres: PgInfo
) -> None:
    role = "tm_check_" + uuid.uuid4().hex[:8]
    slot = "tm_check_" + uuid.uuid4().hex[:8]
    with psycopg.connect(postgres.dsn(), autocommit=True) as c:
        c.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw-{role}'")
        c.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (slot,))
    try:
        config = pg_config(postgres, **{"database.user": role, "database.password": f"pw-{role}"})
        errors, warnings = validate(app, config)
        assert not errors
        assert [w.split(":")[0] for w in warnings] == ["database.user"]
        assert f"role {role} has neither the REPLICATION attribute" in warnings[0]
        assert post(app, config).status == 201  # a warning never refuses

        errors, warnings = validate(app, pg_config(postgres, **{"slot.name": slot}))
        assert not errors
        assert warnings == [
            f"slot.name: slot {slot} exists for database {postgres.dbname} with plugin "
            f"test_decoding; this connector needs one for {postgres.dbname} with pgoutput: "
            "choose another slot.name or drop that slot"
        ]
        # initial_only never streams: nothing of this matters to it
        assert validate(
            app, pg_config(postgres, **{"slot.name": slot, "snapshot.mode": "initial_only"})
        ) == ({}, [])
    finally:
        with psycopg.connect(postgres.dsn(), autocommit=True) as c:
            c.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
            c.execute(f"DROP ROLE {role}")


# -- MariaDB -----------------------------------------------------------------------------------
def my_config(db: MySqlInfo, **extra: Any) -> dict[str, Any]:
    return {
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "database.hostname": db.host,
        "database.port": str(db.port),
        "database.user": db.user,
        "database.password": db.password,
        "database.server.id": "5999",
        "topic.prefix": "chk",
        **extra,
    }


@pytest.mark.mariadb
def test_mariadb_a_wrong_password_is_refused_and_missing_grants_warned(
    app: App, mariadb: MySqlInfo
) -> None:
    assert post(app, my_config(mariadb)).status == 201
    refused(
        post(app, my_config(mariadb, **{"database.password": "wrong"})),
        "database.hostname",
        'Unable to connect: (1045, "Access denied for user',
    )
    user = "tm_check_" + uuid.uuid4().hex[:6]
    admin = pymysql.connect(**mariadb.settings(), autocommit=True)  # type: ignore[arg-type]
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw-{user}'")
        errors, warnings = validate(
            app, my_config(mariadb, **{"database.user": user, "database.password": f"pw-{user}"})
        )
        assert not errors
        assert len(warnings) == 1 and warnings[0].startswith(
            "database.user: cannot read the binary log position: (1227"
        ), warnings
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP USER '{user}'@'%'")
        admin.close()


# -- the stand-ins -----------------------------------------------------------------------------
@pytest.mark.sqlserver
def test_sqlserver_standin_login_is_checked(sqlserver: SqlServerInfo) -> None:
    """Called as the herder calls it: a REST config may name only SQL Server's own ODBC
    drivers, and the stand-in is reached through PostgreSQL's."""
    config = {
        "database.hostname": sqlserver.host,
        "database.port": str(sqlserver.port),
        "database.user": sqlserver.user,
        "database.password": sqlserver.password,
        "database.names": sqlserver.dbname,
        "sqlserver.dialect": "postgres-standin",
        "topic.prefix": "chk",
    }
    report = SqlServerConnector.check_connection(config)
    assert (report.errors, report.warnings) == ([], [])
    report = SqlServerConnector.check_connection({**config, "database.password": "wrong"})
    # the connector's error translation names the login (SQL Server's 18456 and the
    # stand-in's 28P01 alike)
    assert [k for k, _ in report.errors] == ["database.user"]
    assert "password authentication failed" in report.errors[0][1]


@pytest.mark.mongodb
def test_mongodb_standin_answers_and_a_closed_port_does_not(app: App, mongodb: str) -> None:
    port = mongodb.split(":")[2].split("/")[0]
    config = {
        "connector.class": "io.debezium.connector.mongodb.MongoDbConnector",
        "mongodb.hosts": f"rs0/127.0.0.1:{port}",
        "mongodb.members.auto.discover": "false",
        "topic.prefix": "chk",
        "mongodb.server.selection.timeout.ms": "1000",
    }
    assert validate(app, config) == ({}, [])
    # the stand-in is a single server that names no replica set: without the rs0/ form the
    # task would refuse it, so the check does
    errors, _ = validate(app, {**config, "mongodb.hosts": f"127.0.0.1:{port}"})
    assert list(errors) == ["mongodb.hosts"] and "no replica set name" in errors["mongodb.hosts"][0]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    r = post(app, {**config, "mongodb.hosts": f"rs0/127.0.0.1:{closed}"})
    refused(r, "mongodb.hosts", "Unable to connect:")


@pytest.mark.postgres
def test_validate_connect_checks_the_yaml_file_s_connectors(
    postgres: PgInfo, tmp_path: Path
) -> None:
    """``tidemark validate --connect``: the file's connectors, with its placeholders resolved
    from the environment, as the worker would start them."""
    good = pg_config(postgres, **{"database.password": "${env:TMC_PASSWORD}"})
    bad = pg_config(postgres, **{"database.password": "not-the-password"})
    lines = ["worker:", f"  state.dir: {tmp_path}", "connectors:"]
    for name, cfg in (("good", good), ("bad", bad)):
        lines += [f"  - name: {name}", "    config:"]
        lines += [f'      {k}: "{v}"' for k, v in cfg.items()]
    path = tmp_path / "worker.yaml"
    path.write_text("\n".join(lines) + "\n")
    env = {**os.environ, "TMC_PASSWORD": postgres.password}
    out = subprocess.run(
        [TIDEMARK, "validate", str(path), "--connect"], capture_output=True, text=True, env=env
    )
    assert out.returncode == 1, out
    assert out.stderr.splitlines()[0].startswith(
        "connectors[1].config.database.hostname: Error while validating connector config:"
    ), out.stderr
    assert "password authentication failed" in out.stderr
    assert "connectors[0]" not in out.stderr
    without = subprocess.run(
        [TIDEMARK, "validate", str(path)], capture_output=True, text=True, env=env
    )
    assert without.returncode == 0, without
