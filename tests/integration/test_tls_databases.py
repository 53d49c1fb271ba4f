"""PostgreSQL ``database.sslmode=verify-full`` and MariaDB ``database.ssl.mode=verify_identity``
against the local stack's TLS servers: the connectors' own connections are encrypted, and a
server whose certificate (from the same trusted CA) names another host is refused with an error
that says so.

The wrong-host servers are private instances started from the same launcher, each serving a
certificate issued only for ``wrong.invalid``, so the trust chain is fine and only the name is
wrong."""

from __future__ import annotations

import random
import shutil
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pymysql  # type: ignore[import-untyped]
import pytest

from cdc.config import Config
from connectors.mysql import connection as my_connection
from connectors.postgres import connection as pg_connection
from tests.integration.conftest import MySqlInfo, PgInfo
from worker.dev import Stack
from worker.dev.mariadb import MariaDBService
from worker.dev.postgres import PostgresService
from worker.dev.service import Service, StackError
from worker.dev.tls import TlsFiles, issue
from worker.registry import Registry

pytestmark = [pytest.mark.postgres, pytest.mark.mariadb]

WRONG_HOST = "wrong.invalid"


def free_port() -> int:
    """A free port below the ephemeral range (see test_kafka_outage)."""
    rnd = random.Random()
    for _ in range(200):
        port = rnd.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port")


def ca(stack: Stack) -> TlsFiles:
    return TlsFiles.at(stack.home / "tls")


def pg_config(pg: PgInfo, root: Path, port: int | None = None) -> Config:
    return (
        Registry()
        .resolve("postgres")
        .config_def.parse(
            {
                "name": "tls",
                "connector.class": "postgres",
                "database.hostname": pg.host,
                "database.port": str(port or pg.port),
                "database.user": pg.user,
                "database.password": pg.password,
                "database.dbname": pg.dbname,
                "topic.prefix": "tls",
                "database.sslmode": "verify-full",
                "database.sslrootcert": str(root),
            }
        )
    )


def my_config(my: MySqlInfo, root: Path, port: int | None = None) -> Config:
    return (
        Registry()
        .resolve("mysql")
        .config_def.parse(
            {
                "name": "tls",
                "connector.class": "mysql",
                "database.hostname": my.host,
                "database.port": str(port or my.port),
                "database.user": my.user,
                "database.password": my.password,
                "database.server.id": "4242",
                "topic.prefix": "tls",
                "database.ssl.mode": "verify_identity",
                "database.ssl.ca": str(root),
            }
        )
    )


def wrong_host_server(cls: type[Service], stack: Stack) -> Iterator[Service]:
    """A private server whose certificate, from the stack's CA, names only ``wrong.invalid``.
    Its folder is under the stack's (the database's OS user can reach that one; pytest's
    temporary folders are private to the user running the tests)."""
    home = stack.home / "private" / f"{cls.name}-wrong-host-{uuid.uuid4().hex[:8]}"
    tls = TlsFiles.at(home / "tls")
    tls.dir.mkdir(parents=True)
    shutil.copyfile(ca(stack).ca_cert, tls.ca_cert)
    shutil.copyfile(ca(stack).ca_key, tls.ca_key)
    issue(tls, tls.server_cert, tls.server_key, (WRONG_HOST,), server=True)
    for attempt in range(3):
        svc = cls(home, free_port())
        try:
            svc.start()
            break
        except StackError:
            svc.stop()
            if attempt == 2:
                raise
    try:
        yield svc
    finally:
        svc.stop()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def wrong_pg(stack: Stack, postgres: PgInfo) -> Iterator[Service]:
    yield from wrong_host_server(PostgresService, stack)


@pytest.fixture(scope="module")
def wrong_mariadb(stack: Stack, mariadb: MySqlInfo) -> Iterator[Service]:
    yield from wrong_host_server(MariaDBService, stack)


def test_postgres_verify_full_connects_encrypted(stack: Stack, postgres: PgInfo) -> None:
    with pg_connection.connect(pg_config(postgres, ca(stack).ca_cert)) as conn:
        row = conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()
    assert row == (True,)
    # The replication connection (logical decoding) too.
    with pg_connection.connect_replication(pg_config(postgres, ca(stack).ca_cert)) as conn:
        assert conn.pgconn.ssl_in_use


def test_postgres_verify_full_refuses_a_certificate_for_another_host(
    stack: Stack, postgres: PgInfo, wrong_pg: Service
) -> None:
    cfg = pg_config(postgres, ca(stack).ca_cert, wrong_pg.port)
    with pytest.raises(psycopg.OperationalError) as info:
        pg_connection.connect(cfg)
    message = str(info.value)
    assert "does not match host name" in message and "127.0.0.1" in message


def session_tls_version(cfg: Config) -> str:
    """The TLS version of a session the connector opens with ``cfg`` ("" in plain text)."""
    conn: Any = my_connection.connect(cfg)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
            _, version = cur.fetchone()
    finally:
        conn.close()
    return str(version)


def test_mariadb_verify_identity_connects_encrypted(stack: Stack, mariadb: MySqlInfo) -> None:
    assert session_tls_version(my_config(mariadb, ca(stack).ca_cert)).startswith("TLS")


def test_mariadb_verify_identity_refuses_a_certificate_for_another_host(
    stack: Stack, mariadb: MySqlInfo, wrong_mariadb: Service
) -> None:
    cfg = my_config(mariadb, ca(stack).ca_cert, wrong_mariadb.port)
    with pytest.raises(pymysql.err.OperationalError) as info:
        my_connection.connect(cfg)
    assert "certificate is not valid for '127.0.0.1'" in str(info.value)
