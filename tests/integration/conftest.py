"""Session fixtures: real services from the same launcher as `tidemark dev up`.

Each service starts at most once per test run, on first use, and is stopped at the end if this
run started it. A service that cannot start fails the tests that need it: never a skip.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import STARTED_SERVICES
from tests.integration import pg_cleanup
from worker.dev import Stack
from worker.dev.kafka import KafkaService
from worker.dev.mariadb import MariaDBService
from worker.dev.postgres import PostgresService


@pytest.fixture(scope="session")
def stack() -> Stack:
    return Stack()


def _run(stack: Stack, name: str) -> Iterator[None]:
    shared = os.environ.get(STARTED_SERVICES)
    if shared is None:
        started = stack[name].start()
        yield
        if started and not os.environ.get("TIDEMARK_KEEP_STACK"):
            stack[name].stop()
        return
    # a parallel run (tests/conftest.py): one worker starts it, the controller stops it
    with open(shared + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stack[name].start():
            with open(shared, "a") as started:
                started.write(name + "\n")
    yield


@dataclass(frozen=True)
class PgInfo:
    host: str
    port: int
    user: str
    password: str
    dbname: str

    def dsn(self, dbname: str | None = None, **extra: str) -> str:
        parts = {
            "host": self.host,
            "port": str(self.port),
            "user": self.user,
            "password": self.password,
            "dbname": dbname or self.dbname,
            **extra,
        }
        return " ".join(f"{k}={v}" for k, v in parts.items())


@dataclass(frozen=True)
class MySqlInfo:
    host: str
    port: int
    user: str
    password: str
    server_id: int

    def settings(self) -> dict[str, object]:
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password}


@pytest.fixture(scope="session")
def postgres(stack: Stack) -> Iterator[PgInfo]:
    svc = stack["postgres"]
    assert isinstance(svc, PostgresService)
    left: list[str] = []
    for _ in _run(stack, "postgres"):
        env = svc.env()
        info = PgInfo(
            env["TIDEMARK_PG_HOST"],
            int(env["TIDEMARK_PG_PORT"]),
            env["TIDEMARK_PG_USER"],
            env["TIDEMARK_PG_PASSWORD"],
            env["TIDEMARK_PG_DBNAME"],
        )
        yield info
        left = pg_cleanup.leftovers(info.dsn())
    if left:  # only what this run created (tests/integration/pg_cleanup.py)
        pytest.fail(
            "this run left behind in PostgreSQL (drop them in the test's teardown): "
            + "; ".join(left),
            pytrace=False,
        )


@pytest.fixture(scope="session")
def mariadb(stack: Stack) -> Iterator[MySqlInfo]:
    svc = stack["mariadb"]
    assert isinstance(svc, MariaDBService)
    for _ in _run(stack, "mariadb"):
        env = svc.env()
        yield MySqlInfo(
            env["TIDEMARK_MYSQL_HOST"],
            int(env["TIDEMARK_MYSQL_PORT"]),
            env["TIDEMARK_MYSQL_USER"],
            env["TIDEMARK_MYSQL_PASSWORD"],
            int(env["TIDEMARK_MYSQL_SERVER_ID"]),
        )


@pytest.fixture(scope="session")
def kafka(stack: Stack) -> Iterator[str]:
    """The bootstrap address of the real local Kafka broker."""
    svc = stack["kafka"]
    assert isinstance(svc, KafkaService)
    for _ in _run(stack, "kafka"):
        yield svc.bootstrap


@dataclass(frozen=True)
class CassandraInfo:
    """The local Cassandra node: its CQL address and the directories a per-node agent reads."""

    host: str
    port: int
    cdc_raw: str
    commitlog: str
    config: str
    #: the stack's CA and client certificate (the node takes TLS on the same port)
    tls_dir: str = ""


@pytest.fixture(scope="session")
def cassandra(stack: Stack) -> Iterator[CassandraInfo]:
    from worker.dev.cassandra import CassandraService

    svc = stack["cassandra"]
    assert isinstance(svc, CassandraService)
    for _ in _run(stack, "cassandra"):
        env = svc.env()
        yield CassandraInfo(
            env["TIDEMARK_CASSANDRA_HOST"],
            int(env["TIDEMARK_CASSANDRA_PORT"]),
            env["TIDEMARK_CASSANDRA_CDC_RAW"],
            env["TIDEMARK_CASSANDRA_COMMITLOG"],
            env["TIDEMARK_CASSANDRA_CONFIG"],
            env["TIDEMARK_CASSANDRA_TLS_DIR"],
        )


@pytest.fixture(scope="session")
def mongodb(stack: Stack) -> Iterator[str]:
    """The connection string of the MongoDB stand-in (mongo-java-server, oplog enabled)."""
    from worker.dev.mongodb import MongoDBService

    svc = stack["mongodb"]
    assert isinstance(svc, MongoDBService)
    for _ in _run(stack, "mongodb"):
        yield svc.uri


@dataclass(frozen=True)
class SqlServerInfo:
    """The SQL Server stand-in: a database in the local PostgreSQL with SQL Server's CDC
    catalog and functions (worker/dev/sqlserver_standin.py), reached through pyodbc."""

    host: str
    port: int
    user: str
    password: str
    dbname: str


@pytest.fixture(scope="session")
def sqlserver(stack: Stack, postgres: PgInfo) -> Iterator[SqlServerInfo]:
    from worker.dev.sqlserver_standin import SqlServerStandinService

    svc = stack["sqlserver"]
    assert isinstance(svc, SqlServerStandinService)
    for _ in _run(stack, "sqlserver"):
        env = svc.env()
        yield SqlServerInfo(
            env["TIDEMARK_SQLSERVER_HOST"],
            int(env["TIDEMARK_SQLSERVER_PORT"]),
            env["TIDEMARK_SQLSERVER_USER"],
            env["TIDEMARK_SQLSERVER_PASSWORD"],
            env["TIDEMARK_SQLSERVER_DBNAME"],
        )


@pytest.fixture(scope="session")
def mongonx(stack: Stack) -> Iterator[str]:
    """The connection string of the second MongoDB stand-in (nx-27017: change streams with
    update events, no oplog)."""
    from worker.dev.mongodb import NxMongoService

    svc = stack["mongonx"]
    assert isinstance(svc, NxMongoService)
    for _ in _run(stack, "mongonx"):
        yield svc.uri


@pytest.fixture(scope="session")
def spark(kafka: str) -> Any:
    """The one SparkSession of the run for the apply job's tests (local[2], the Kafka and Delta
    jars resolved ahead of time): tests/integration/test_apply_acceptance.py:apply_spark."""
    from tests.integration.test_apply_acceptance import apply_spark

    return apply_spark(kafka)
