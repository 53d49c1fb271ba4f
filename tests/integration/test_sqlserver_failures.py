"""Failures a SQL Server user meets, against the stand-in: CDC not enabled on the database
or an included table (the error names the sp_cdc_enable_* call), a wrong password (names the
key), the stored LSN removed by the cleanup job (clear error, or a new snapshot with
when_needed), and a table enabled for CDC while the connector runs (AC-58)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from cdc.errors import ConfigError
from cdc.offsets.memory import MemoryOffsetStore
from cdc.testing.kafka_reader import read_topic
from connectors.sqlserver.errors import CdcNotEnabled, LsnNoLongerAvailable
from tests.integration.conftest import SqlServerInfo
from tests.integration.sqlserver_harness import SqlServerHarness, standin_database

pytestmark = [pytest.mark.sqlserver, pytest.mark.kafka]


@pytest.fixture
def h(sqlserver: SqlServerInfo, kafka: str) -> Iterator[SqlServerHarness]:
    harness = SqlServerHarness(sqlserver, kafka)
    yield harness
    harness.drop()


@pytest.fixture
def cdc_off_db(sqlserver: SqlServerInfo) -> Iterator[str]:
    """A database of its own with the stand-in installed but CDC not enabled."""
    with standin_database(sqlserver, "ss_off_", enable_db=False) as name:
        yield name


def test_database_without_cdc_names_sp_cdc_enable_db(
    sqlserver: SqlServerInfo, kafka: str, cdc_off_db: str
) -> None:
    h = SqlServerHarness(sqlserver, kafka, dbname=cdc_off_db)
    h.sql("CREATE TABLE dbo.t (id int PRIMARY KEY)")
    with pytest.raises(CdcNotEnabled) as err, h.running(h.config("t")):
        pass
    message = str(err.value)
    assert (
        "database.names" in message and f"CDC is not enabled on database '{cdc_off_db}'" in message
    )
    assert "EXEC sys.sp_cdc_enable_db" in message


def test_included_table_without_cdc_names_sp_cdc_enable_table(h: SqlServerHarness) -> None:
    h.create_table("on", "id int PRIMARY KEY")
    off = h.create_table("off", "id int PRIMARY KEY", cdc=False)
    with pytest.raises(CdcNotEnabled) as err, h.running(h.config("on", "off")):
        pass
    message = str(err.value)
    assert "table.include.list" in message and f"dbo.{off}" in message
    assert (
        f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{off}'" in message
    )


def test_wrong_password_names_the_key(h: SqlServerHarness) -> None:
    h.create_table("pw", "id int PRIMARY KEY")
    cfg = h.config("pw", **{"database.password": "wrong"})
    with pytest.raises(ConfigError) as err, h.running(cfg):
        pass
    assert "database.user" in str(err.value) and "login failed" in str(err.value)


def test_cleanup_past_the_stored_lsn(h: SqlServerHarness) -> None:
    t = h.create_table("clean", "id int PRIMARY KEY, v int NOT NULL")
    cfg = h.config("clean")
    store = MemoryOffsetStore()
    with h.running(cfg, store):
        h.sql(f'INSERT INTO dbo."{t}" VALUES (1, 1)')
        h.read(cfg, "clean", min_count=1, settle=0.5)
    # while stopped: changes, then the cleanup job removes them before they were read
    h.sql(
        f'INSERT INTO dbo."{t}" VALUES (2, 2)',
        f'DELETE FROM dbo."{t}" WHERE id = 1',
        f'INSERT INTO dbo."{t}" VALUES (3, 3)',
    )
    inst = f"dbo_{t}"
    h.sql("SELECT sys.sp_cdc_cleanup_change_table(%s, sys.fn_cdc_get_max_lsn())", params=(inst,))
    with pytest.raises(LsnNoLongerAvailable) as err, h.running(cfg, store):
        pass
    message = str(err.value)
    assert "minimum LSN" in message and inst in message
    assert "snapshot.mode=when_needed" in message
    # when_needed takes a new snapshot instead and streams on from it
    cfg["snapshot.mode"] = "when_needed"
    with h.running(cfg, store):
        h.sql(f'UPDATE dbo."{t}" SET v = 30 WHERE id = 3')
        events = h.read(cfg, "clean", min_count=4)
    assert {e.key["id"] for e in events if e.op == "r"} == {2, 3}
    assert events[-1].op == "u" and events[-1].after == {"id": 3, "v": 30}
    # row 1 was deleted among the changes the cleanup job removed: a snapshot cannot say so
    # (the warning in the log names it), its last event stays the create
    assert [e.op for e in events if e.key["id"] == 1] == ["c"]


def test_table_enabled_while_running_is_picked_up(h: SqlServerHarness) -> None:
    """AC-58: a table the include list selects, created and enabled for CDC while the
    connector runs, is captured from then on, and a CREATE ``tableChanges`` record with
    ``ddl=null`` appears on the schema change topic, after the snapshot's CREATE record of
    the table captured from the start (``source.snapshot`` true)."""
    h.create_table("first", "id int PRIMARY KEY")
    cfg = h.config("first", "later")
    with h.running(cfg):
        later = h.create_table("later", "id int PRIMARY KEY, v int")
        h.sql(f'INSERT INTO dbo."{later}" VALUES (1, 10)')
        events = h.read(cfg, "later", min_count=1)
        changes = read_topic(h.kafka, cfg["database.server.name"], min_count=2)
    assert [(e.op, e.after) for e in events] == [("c", {"id": 1, "v": 10})]
    # the snapshot's CREATE of the first table, then the one enabled while running
    assert [(c.value["source"]["table"], c.value["source"]["snapshot"]) for c in changes] == [
        (h.name("first"), True),
        (later, False),
    ]
    snap = changes[0].value
    assert snap["ddl"] is None and snap["databaseName"] == h.dbname
    assert snap["source"]["commit_lsn"] and snap["source"]["change_lsn"] is None
    [entry] = snap["tableChanges"]
    assert entry["type"] == "CREATE" and entry["id"] == f'"{h.dbname}"."dbo"."{h.name("first")}"'
    assert [c["name"] for c in entry["table"]["columns"]] == ["id"]
    assert changes[1].key == {"databaseName": h.dbname}
    value = changes[1].value
    assert value["ddl"] is None and value["schemaName"] == "dbo"
    [change] = value["tableChanges"]
    assert change["type"] == "CREATE"
    assert change["id"] == f'"{h.dbname}"."dbo"."{later}"'
    assert change["table"]["primaryKeyColumnNames"] == ["id"]
    assert [(c["name"], c["optional"]) for c in change["table"]["columns"]] == [
        ("id", False),
        ("v", True),
    ]


def test_encrypted_connection(h: SqlServerHarness) -> None:
    """database.encrypt=true reaches the driver (on the stand-in: TLS to PostgreSQL, checked
    on the server side through pg_stat_ssl)."""
    t = h.create_table("tls", "id int PRIMARY KEY")
    cfg = h.config("tls", **{"database.encrypt": "true"})
    with h.running(cfg):
        h.sql(f'INSERT INTO dbo."{t}" VALUES (1)')
        assert [e.op for e in h.read(cfg, "tls", min_count=1)] == ["c"]
        by_tls = h.sql(
            "SELECT s.ssl, count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
            "WHERE a.datname = %s AND a.application_name = 'tidemark' GROUP BY s.ssl",
            params=(h.dbname,),
        )
    # the connector's connections (application name "tidemark") are encrypted, all of them
    assert [ssl for ssl, _count in by_tls] == [True]


def test_table_disabled_and_enabled_again_while_running(h: SqlServerHarness) -> None:
    """CDC disabled on a captured table: a DROP record on the schema change topic (``ddl``
    null, the table as last captured), its changes stop; enabled again: a CREATE record and
    its changes from the new capture instance on."""
    t = h.create_table("toggle", "id int PRIMARY KEY, v int")
    other = h.create_table("other", "id serial PRIMARY KEY")  # moves the maximum LSN on
    cfg = h.config("toggle")
    schema_topic = cfg["database.server.name"]

    def types() -> list[str]:
        return [
            c.value["tableChanges"][0]["type"]
            for c in read_topic(h.kafka, schema_topic, timeout=0.5, settle=0.2)
        ]

    with h.running(cfg) as run:
        h.sql(f'INSERT INTO dbo."{t}" VALUES (1, 1)')
        h.read(cfg, "toggle", min_count=1, settle=0.3)
        h.sql("SELECT sys.sp_cdc_disable_table('dbo', %s, %s)", params=(t, f"dbo_{t}"))
        h.sql(f'INSERT INTO dbo."{t}" VALUES (2, 2)')  # not captured: CDC is off
        deadline = time.monotonic() + 10
        while "DROP" not in types():
            assert time.monotonic() < deadline, "no DROP record"
            h.sql(f'INSERT INTO dbo."{other}" DEFAULT VALUES')
        h.enable("toggle")
        h.sql(f'INSERT INTO dbo."{t}" VALUES (3, 3)')
        events = h.read(cfg, "toggle", min_count=2)
        changes = [
            c
            for c in read_topic(h.kafka, schema_topic, min_count=2)
            if not c.value["source"]["snapshot"]
        ]
        assert not run.errors
    assert [(e.op, e.key["id"]) for e in events] == [("c", 1), ("c", 3)]
    assert [c.value["tableChanges"][0]["type"] for c in changes] == ["DROP", "CREATE"]
    drop = changes[0].value
    assert changes[0].key == {"databaseName": h.dbname}
    assert drop["ddl"] is None and drop["databaseName"] == h.dbname
    assert drop["source"]["table"] == t and drop["source"]["snapshot"] is False
    [entry] = drop["tableChanges"]
    assert entry["id"] == f'"{h.dbname}"."dbo"."{t}"'
    assert [c["name"] for c in entry["table"]["columns"]] == ["id", "v"]
