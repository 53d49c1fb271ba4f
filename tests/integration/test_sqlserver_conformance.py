"""The shared connector conformance suite (cdc/testing/conformance.py) on the SQL Server
stand-in. SQL Server refuses TRUNCATE on a CDC-enabled table (the stand-in too), so the
connector never sees one and the truncate check does not apply."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from cdc.offsets.memory import MemoryOffsetStore
from cdc.testing.conformance import CHECKS, Target
from cdc.testing.kafka_reader import Event
from tests.integration.conftest import SqlServerInfo
from tests.integration.sqlserver_harness import RunningConnector, SqlServerHarness

pytestmark = [pytest.mark.sqlserver, pytest.mark.kafka]


class SqlServerTarget:
    supports_truncate = False

    def __init__(self, h: SqlServerHarness) -> None:
        self.h = h

    def create_table(self, table: str) -> None:
        self.h.create_table(table, "id int PRIMARY KEY, name varchar(50) NOT NULL, score int")

    def execute(self, table: str, op: str, *args: Any) -> None:
        t = f'dbo."{self.h.name(table)}"'
        if op == "insert":
            sql, params = f"INSERT INTO {t} VALUES (%s, %s, %s)", args
        elif op == "update":
            sql, params = f"UPDATE {t} SET name = %s WHERE id = %s", (args[1], args[0])
        elif op == "update_pk":
            sql, params = f"UPDATE {t} SET id = %s WHERE id = %s", (args[1], args[0])
        elif op == "delete":
            sql, params = f"DELETE FROM {t} WHERE id = %s", args
        else:
            raise AssertionError("TRUNCATE is refused on CDC-enabled tables")
        self.h.sql(sql, params=params)

    def config(self, table: str, **overrides: str) -> dict[str, Any]:
        cfg = self.h.config(table)
        cfg.update(overrides)
        return cfg

    def running(self, cfg: dict[str, Any], store: Any) -> AbstractContextManager[RunningConnector]:
        return self.h.running(cfg, store)

    def wait_streaming(self, run: RunningConnector) -> None:
        """``running`` returns once the connector streams."""

    def read(self, cfg: dict[str, Any], table: str, min_count: int) -> list[Event]:
        return self.h.read(cfg, table, min_count=min_count)

    def new_offset_store(self) -> MemoryOffsetStore:
        return MemoryOffsetStore()


@pytest.fixture(scope="module")
def target(sqlserver: SqlServerInfo, kafka: str) -> Iterator[Target]:
    h = SqlServerHarness(sqlserver, kafka)
    yield SqlServerTarget(h)
    h.drop()


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_conformance(check: Any, target: Target) -> None:
    check(target)


def test_truncate_is_refused_on_a_captured_table(sqlserver: SqlServerInfo, kafka: str) -> None:
    """What the truncate check would need cannot happen: the stand-in, like SQL Server,
    refuses TRUNCATE on a table enabled for CDC."""
    h = SqlServerHarness(sqlserver, kafka)
    try:
        t = h.create_table("trunc", "id int PRIMARY KEY")
        with pytest.raises(Exception, match="enabled for Change Data Capture"):
            h.sql(f'TRUNCATE dbo."{t}"')
    finally:
        h.drop()
