"""A SQL Server initial snapshot SIGKILLed in the middle resumes after the last batch Kafka
acknowledged (issue 16), on the SQL Server stand-in: the scenario of
``test_snapshot_resume`` (held after two batches of the second table, rows changed on both
sides of the stored key and in the table read whole while the task is down, the restart
skipping that table and re-reading at most one batch, the last event of every key equal to
the table), in a stand-in database of its own so the tables keep their plain names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.integration.conftest import SqlServerInfo
from tests.integration.sqlserver_harness import SqlServerHarness, standin_database
from tests.integration.test_snapshot_resume import BATCH, Db, kill_mid_snapshot_and_resume

pytestmark = [pytest.mark.sqlserver, pytest.mark.kafka]


class _PlainNames(SqlServerHarness):
    """Tables in ``dbo`` under their own names (the database is this test's alone), the
    scenario's unqualified SQL resolved there."""

    def name(self, table: str) -> str:
        return table

    def connect(self) -> psycopg.Connection[Any]:
        conn = super().connect()
        conn.execute("SET search_path = dbo")
        return conn


class _SqlServerDb(Db):
    h: _PlainNames

    def config(self, **overrides: Any) -> dict[str, Any]:
        include = overrides.pop("table_include_list").replace("public.", "dbo.")
        return self.h.config(
            **overrides, table_include_list=include, snapshot_fetch_size=str(BATCH)
        )

    def fill(self, table: str, rows: int) -> None:
        self.h.enable(table)  # created by the scenario; captured before its rows
        self.h.sql(f"INSERT INTO {table} SELECT g, 'v' || g FROM generate_series({rows}, 1, -1) g")


@pytest.fixture
def db(sqlserver: SqlServerInfo, kafka: str) -> Iterator[Db]:
    with standin_database(sqlserver, "ss_resume_", enable_db=True) as name:
        yield _SqlServerDb(_PlainNames(sqlserver, kafka, name), "sqlserver", int, f"{name}.dbo")


def test_sqlserver(db: Db, tmp_path: Path) -> None:
    kill_mid_snapshot_and_resume(db, tmp_path)
