"""Running the real SQL Server connector against the SQL Server stand-in and Kafka, in-process.

The stand-in (worker/dev/sqlserver_standin.py) is a PostgreSQL database with SQL Server's CDC
catalog and functions; writers change it with psycopg (PostgreSQL DDL, SQL Server's
``sys.sp_cdc_enable_table`` called as a function), the connector reads it through pyodbc and
the PostgreSQL ODBC driver. Tables get a per-harness suffix so concurrent runs never meet;
every connector run gets its own ``database.server.name`` (topic prefix).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from cdc.engine import Engine, EngineSettings
from cdc.offsets.memory import MemoryOffsetStore
from cdc.offsets.store import OffsetStore
from cdc.testing.kafka_reader import Event, read_topic
from connectors.sqlserver import SqlServerConnector
from tests.integration.conftest import SqlServerInfo
from tests.integration.engine_runner import RunningConnector, running, start_engine, wait_streaming

__all__ = ["Event", "RunningConnector", "SqlServerHarness"]


class SqlServerHarness:
    def __init__(self, db: SqlServerInfo, kafka: str, dbname: str | None = None) -> None:
        self.db = db
        self.kafka = kafka
        self.dbname = dbname or db.dbname
        self.suffix = uuid.uuid4().hex[:8]
        self.created: list[str] = []

    def name(self, table: str) -> str:
        """The real table name of ``table`` in this harness."""
        return f"{table}_{self.suffix}"

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host=self.db.host,
            port=self.db.port,
            user=self.db.user,
            password=self.db.password,
            dbname=self.dbname,
            autocommit=True,
        )

    def sql(self, *statements: str, params: Any = None) -> list[Any]:
        rows: list[Any] = []
        with self.connect() as conn:
            for s in statements:
                cur = conn.execute(s, params)
                if cur.description:
                    rows = list(cur.fetchall())
        return rows

    def create_table(self, table: str, columns: str, *, cdc: bool = True) -> str:
        """``CREATE TABLE dbo.<table>_<suffix> (columns)`` and (by default) enable CDC on it."""
        real = self.name(table)
        self.sql(f'CREATE TABLE dbo."{real}" ({columns})')
        self.created.append(real)
        if cdc:
            self.enable(table)
        return real

    def enable(self, table: str, instance: str | None = None) -> None:
        self.sql(
            "SELECT sys.sp_cdc_enable_table(source_schema => 'dbo', source_name => %s, "
            "role_name => NULL, capture_instance => %s)",
            params=(self.name(table), instance),
        )

    def drop(self) -> None:
        with self.connect() as conn:
            for real in self.created:
                for (inst,) in conn.execute(
                    "SELECT ct.capture_instance FROM cdc.change_tables ct "
                    "WHERE ct.source_object_id = %s::regclass::oid::int",
                    (f'dbo."{real}"',),
                ).fetchall():
                    conn.execute("SELECT sys.sp_cdc_disable_table('dbo', %s, %s)", (real, inst))
                conn.execute(f'DROP TABLE IF EXISTS dbo."{real}"')

    def config(self, *tables: str, **overrides: Any) -> dict[str, Any]:
        server = "ss" + uuid.uuid4().hex[:8]
        cfg = {
            "name": server,
            "connector.class": "io.debezium.connector.sqlserver.SqlServerConnector",
            "database.server.name": server,
            "database.hostname": self.db.host,
            "database.port": str(self.db.port),
            "database.user": self.db.user,
            "database.password": self.db.password,
            "database.names": self.dbname,
            "sqlserver.dialect": "postgres-standin",
            "table.include.list": ",".join(rf"dbo\.{self.name(t)}" for t in tables),
            "streaming.poll.interval.ms": "100",
        }
        cfg.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
        return cfg

    @contextmanager
    def running(
        self, cfg: dict[str, Any], store: OffsetStore | None = None
    ) -> Iterator[RunningConnector]:
        """The connector on an in-process engine until the block ends (a graceful stop)."""

        def start() -> RunningConnector:
            connector = SqlServerConnector(cfg)
            settings = EngineSettings(
                producer={"bootstrap.servers": self.kafka}, offset_flush_interval_ms=200
            )
            offsets = store or MemoryOffsetStore()
            return start_engine(Engine(connector, connector.config, offsets, settings), connector)

        with running(start) as run:
            wait_streaming(run, 30.0)
            yield run

    def topic(self, cfg: dict[str, Any], table: str) -> str:
        return f"{cfg['database.server.name']}.dbo.{self.name(table)}"

    def read(self, cfg: dict[str, Any], table: str, **kw: Any) -> list[Event]:
        return read_topic(self.kafka, self.topic(cfg, table), **kw)
