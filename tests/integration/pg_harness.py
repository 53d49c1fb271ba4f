"""Running the real PostgreSQL connector against the local stack, in-process, for tests."""

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
from connectors.postgres import PostgresConnector
from tests.integration import pg_cleanup
from tests.integration.conftest import PgInfo
from tests.integration.engine_runner import RunningConnector, running, start_engine, wait_streaming

__all__ = ["Event", "PgHarness", "RunningConnector", "read_topic"]


class PgHarness:
    """One database per test module; each connector run gets its own slot and topic prefix.

    Use it as a context manager (``with PgHarness(...) as h: yield h`` in a fixture): leaving
    the block drops the database and its slots, also when the test or the setup failed.
    """

    def __init__(self, pg: PgInfo, kafka: str, dbname: str) -> None:
        self.pg = pg
        self.kafka = kafka
        self.dbname = dbname
        pg_cleanup.create_database(pg.dsn(), dbname)

    def __enter__(self) -> PgHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.dispose()

    def sql(self, *statements: str, params: Any = None) -> list[Any]:
        rows: list[Any] = []
        with psycopg.connect(self.pg.dsn(self.dbname), autocommit=True) as c:
            for s in statements:
                cur = c.execute(s, params)  # type: ignore[call-overload]
                if cur.description:
                    rows = cur.fetchall()
        return rows

    def config(self, **overrides: Any) -> dict[str, Any]:
        server = "t" + uuid.uuid4().hex[:8]
        cfg = {
            "name": server,
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.server.name": server,
            "database.hostname": self.pg.host,
            "database.port": str(self.pg.port),
            "database.user": self.pg.user,
            "database.password": self.pg.password,
            "database.dbname": self.dbname,
            "plugin.name": "pgoutput",
            "slot.name": f"slot_{server}",
            "publication.name": f"pub_{server}",
            "poll.interval.ms": "100",
        }
        cfg.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
        return cfg

    def start(self, cfg: dict[str, Any], store: OffsetStore | None = None) -> RunningConnector:
        connector = PostgresConnector(cfg)
        engine = Engine(
            connector,
            connector.config,
            store or MemoryOffsetStore(),
            EngineSettings(
                producer={"bootstrap.servers": self.kafka}, offset_flush_interval_ms=200
            ),
        )
        return start_engine(engine, connector)

    @contextmanager
    def running(
        self, cfg: dict[str, Any], store: OffsetStore | None = None
    ) -> Iterator[RunningConnector]:
        with running(lambda: self.start(cfg, store)) as run:
            yield run

    def wait_streaming(self, run: RunningConnector, timeout: float = 30.0) -> None:
        wait_streaming(run, timeout)

    def topic(self, cfg: dict[str, Any], table: str, schema: str = "public") -> str:
        return f"{cfg['database.server.name']}.{schema}.{table}"

    def dispose(self) -> None:
        """Drop this harness's database and every slot on it, active or not (teardown)."""
        pg_cleanup.drop_database(self.pg.dsn(), self.dbname)

    def drop_slot(self, cfg: dict[str, Any]) -> None:
        self.sql(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            f"WHERE slot_name = '{cfg['slot.name']}' AND NOT active"
        )
