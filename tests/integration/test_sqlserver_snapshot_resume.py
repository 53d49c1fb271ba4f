"""A SQL Server initial snapshot SIGKILLed in the middle resumes after the last batch Kafka
acknowledged (issue 16), on the SQL Server stand-in: the scenario of
``test_snapshot_resume`` (held after two batches of the second table, rows changed on both
sides of the stored key and in the table read whole while the task is down, the restart
skipping that table and re-reading at most one batch, the last event of every key equal to
the table), in a stand-in database of its own so the tables keep their plain names. Run with
that database alone (a flat offset) and with a second one listed after it in
``database.names`` (a composite offset carrying the resume point; its table, never reached
before the kill, is copied after the restart)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cdc.testing.kafka_reader import read_topic
from tests.integration.conftest import SqlServerInfo
from tests.integration.sqlserver_harness import SqlServerHarness, standin_database
from tests.integration.test_snapshot_resume import (
    BATCH,
    Db,
    kill_mid_snapshot_and_resume,
    stored,
)

pytestmark = [pytest.mark.sqlserver, pytest.mark.kafka]


class _PlainNames(SqlServerHarness):
    """Tables in ``dbo`` under their own names (the database is this test's alone), the
    scenario's unqualified SQL resolved there; ``second``: another database captured too."""

    second: str | None = None

    def topic(self, cfg: dict[str, Any], table: str) -> str:
        if self.second is None:
            return super().topic(cfg, table)
        return f"{cfg['database.server.name']}.{self.dbname}.dbo.{table}"

    def name(self, table: str) -> str:
        return table

    def connect(self) -> psycopg.Connection[Any]:
        conn = super().connect()
        conn.execute("SET search_path = dbo")
        return conn


class _SqlServerDb(Db):
    h: _PlainNames
    #: the connector's configuration, as the scenario made it
    cfg: dict[str, Any]

    def config(self, **overrides: Any) -> dict[str, Any]:
        include = overrides.pop("table_include_list").replace("public.", f"{self.h.dbname}.dbo.")
        cfg = self.h.config(**overrides, table_include_list=include, snapshot_fetch_size=str(BATCH))
        cfg["snapshot.resumable.chunk.size"] = str(BATCH)  # a chunk per batch
        if self.h.second is not None:
            cfg["database.names"] = f"{self.h.dbname},{self.h.second}"
            cfg["table.include.list"] += f",{self.h.second}.dbo.c_other"
        self.cfg = cfg
        return cfg

    def fill(self, table: str, rows: int) -> None:
        self.h.enable(table)  # created by the scenario; captured before its rows
        self.h.sql(f"INSERT INTO {table} SELECT g, 'v' || g FROM generate_series({rows}, 1, -1) g")


@pytest.fixture
def db(sqlserver: SqlServerInfo, kafka: str) -> Iterator[_SqlServerDb]:
    with standin_database(sqlserver, "ss_resume_", enable_db=True) as name:
        yield _SqlServerDb(_PlainNames(sqlserver, kafka, name), "sqlserver", int, f"{name}.dbo")


def test_sqlserver(db: Db, tmp_path: Path) -> None:
    kill_mid_snapshot_and_resume(db, tmp_path)


def test_sqlserver_two_databases(
    db: _SqlServerDb, sqlserver: SqlServerInfo, tmp_path: Path
) -> None:
    h = db.h
    # "ss_resumez..." sorts after "ss_resume_...": its table is read after the scenario's
    with standin_database(sqlserver, "ss_resumez", enable_db=True) as second:
        other = _PlainNames(sqlserver, h.kafka, second)
        other.sql("CREATE TABLE c_other (id int PRIMARY KEY, v varchar(40))")
        other.enable("c_other")
        other.sql("INSERT INTO c_other SELECT g, 'o' || g FROM generate_series(1, 50) g")
        h.second = second
        kill_mid_snapshot_and_resume(db, tmp_path)
        # the composite offset's resume point named the table with its database; the second
        # database's table, not reached before the kill, was copied after the restart
        assert set(stored(tmp_path / "offsets.json", db.cfg)["positions"]) == {h.dbname, second}
        server = db.cfg["database.server.name"]
        copied = read_topic(h.kafka, f"{server}.{second}.dbo.c_other", min_count=50)
        assert sorted(e.after["id"] for e in copied if e.op == "r") == list(range(1, 51))
