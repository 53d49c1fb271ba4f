"""The shared connector conformance suite (cdc/testing/conformance.py) on MariaDB.

TRUNCATE is DDL in MySQL, read from the binlog's query event; as in Debezium 2.x+, it becomes
a ``t`` event of the table unless ``skipped.operations`` has ``t`` (the default)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from cdc.offsets.memory import MemoryOffsetStore
from cdc.testing.conformance import CHECKS, Target
from cdc.testing.kafka_reader import Event, read_topic
from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import MySqlHarness, RunningConnector

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]


class MySqlTarget:
    supports_truncate = True

    def __init__(self, h: MySqlHarness) -> None:
        self.h = h

    def create_table(self, table: str) -> None:
        self.h.sql(
            f"CREATE TABLE {table} (id int PRIMARY KEY, name varchar(50) NOT NULL, score int)"
        )

    def execute(self, table: str, op: str, *args: Any) -> None:
        if op == "insert":
            sql, params = f"INSERT INTO {table} VALUES (%s, %s, %s)", args
        elif op == "update":
            sql, params = f"UPDATE {table} SET name = %s WHERE id = %s", (args[1], args[0])
        elif op == "update_pk":
            sql, params = f"UPDATE {table} SET id = %s WHERE id = %s", (args[1], args[0])
        elif op == "delete":
            sql, params = f"DELETE FROM {table} WHERE id = %s", args
        else:
            sql, params = f"TRUNCATE {table}", None
        self.h.sql(sql, params=params)

    def config(self, table: str, **overrides: str) -> dict[str, Any]:
        cfg = self.h.config(table_include_list=rf"{self.h.dbname}\.{table}")
        cfg.update(overrides)
        return cfg

    def running(self, cfg: dict[str, Any], store: Any) -> AbstractContextManager[RunningConnector]:
        return self.h.running(cfg, store)

    def wait_streaming(self, run: RunningConnector) -> None:
        self.h.wait_streaming(run)

    def read(self, cfg: dict[str, Any], table: str, min_count: int) -> list[Event]:
        return read_topic(self.h.kafka, self.h.topic(cfg, table), min_count=min_count)

    def new_offset_store(self) -> MemoryOffsetStore:
        return MemoryOffsetStore()


@pytest.fixture(scope="module")
def target(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    tmp: Path = tmp_path_factory.mktemp("myconf")
    h = MySqlHarness(mariadb, kafka, f"tc_{uuid.uuid4().hex[:8]}", tmp)
    yield MySqlTarget(h)
    h.drop()


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_conformance(check: Any, target: Target) -> None:
    check(target)
