"""The SQL Server connector end to end against the SQL Server stand-in and Kafka: snapshot,
c/u/d events with SQL Server's source block, the update fold (AC-59), ordering across two
tables (AC-57), exact resume after a graceful stop (AC-38), transaction metadata (AC-63)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cdc.apply.ordering import native_position
from cdc.offsets.memory import MemoryOffsetStore
from cdc.testing.kafka_reader import read_topic
from connectors.sqlserver.offsets import Lsn
from tests.integration.conftest import SqlServerInfo
from tests.integration.sqlserver_harness import SqlServerHarness

pytestmark = [pytest.mark.sqlserver, pytest.mark.kafka]

COLUMNS = "id int PRIMARY KEY, name varchar(20) NOT NULL, d sys.datetime, m sys.money"


@pytest.fixture
def h(sqlserver: SqlServerInfo, kafka: str) -> Iterator[SqlServerHarness]:
    harness = SqlServerHarness(sqlserver, kafka)
    yield harness
    harness.drop()


def test_snapshot_then_create_update_delete(h: SqlServerHarness) -> None:
    t = h.create_table("cud", COLUMNS)
    h.sql(f"INSERT INTO dbo.\"{t}\" VALUES (1, 'a', '2020-01-01 10:00:00.123', 12.5)")
    cfg = h.config("cud")
    with h.running(cfg) as run:
        h.sql(
            f"INSERT INTO dbo.\"{t}\" VALUES (2, 'b', NULL, NULL)",
            f"UPDATE dbo.\"{t}\" SET name = 'bb' WHERE id = 2",
            f'DELETE FROM dbo."{t}" WHERE id = 1',
        )
        events = h.read(cfg, "cud", min_count=5)
        gauges = run.engine.metrics.streaming  # Connected, SourceEventPosition, lag
        assert run.engine.metrics.extra_text["CapturedTables"]() == f"{h.dbname}.dbo.{t}"
        assert gauges.connected and gauges.ms_behind_source >= 0
        assert Lsn.parse(gauges.source_event_position["commit_lsn"]) >= Lsn.parse(
            events[3].value["source"]["commit_lsn"]
        )
    assert [(e.op, e.key["id"]) for e in events] == [
        ("r", 1),
        ("c", 2),
        ("u", 2),
        ("d", 1),
        (None, 1),
    ]
    r, c, u, d, _ = events
    assert r.after == {"id": 1, "name": "a", "d": 1577872800123, "m": r.after["m"]}
    assert r.value["source"]["snapshot"] is True and r.value["source"]["change_lsn"] is None
    assert u.before == {"id": 2, "name": "b", "d": None, "m": None}
    assert u.after == {"id": 2, "name": "bb", "d": None, "m": None}
    assert d.before["name"] == "a" and d.after is None
    # SQL Server's source block: one event per change, inserts/deletes serial 1, updates 2
    assert [e.value["source"]["event_serial_no"] for e in (c, u, d)] == [1, 2, 1]
    for e in (c, u, d):
        src = e.value["source"]
        assert src["connector"] == "sqlserver" and src["schema"] == "dbo" and src["table"] == t
        assert src["db"] == h.dbname
        assert Lsn.parse(src["change_lsn"]) < Lsn.parse(src["commit_lsn"])
    commits = [Lsn.parse(e.value["source"]["commit_lsn"]) for e in (r, c, u, d)]
    assert commits == sorted(commits) and len(set(commits[1:])) == 3


def test_order_across_tables_and_transactions(h: SqlServerHarness) -> None:
    """AC-57: T1 then T2, each touching two tables: events in (commit, change LSN) order."""
    a = h.create_table("ord_a", COLUMNS)
    b = h.create_table("ord_b", COLUMNS)
    cfg = h.config("ord_a", "ord_b", **{"provide.transaction.metadata": "true"})
    with h.running(cfg):
        with h.connect() as conn, conn.transaction():
            conn.execute(f"INSERT INTO dbo.\"{b}\" VALUES (1, 't1', NULL, NULL)")
            conn.execute(f"INSERT INTO dbo.\"{a}\" VALUES (1, 't1', NULL, NULL)")
        with h.connect() as conn, conn.transaction():
            conn.execute(f"INSERT INTO dbo.\"{a}\" VALUES (2, 't2', NULL, NULL)")
            conn.execute(f"UPDATE dbo.\"{b}\" SET name = 't2' WHERE id = 1")
        ea = h.read(cfg, "ord_a", min_count=2)
        eb = h.read(cfg, "ord_b", min_count=2)
        tx = read_topic(h.kafka, f"{cfg['database.server.name']}.transaction", min_count=4)
    # the Spark apply job's ordering rule (commit LSN, change LSN, event_serial_no) orders
    # the events of both tables as the database made them
    merged = sorted(ea + eb, key=lambda e: native_position(e.value["source"]))
    assert [(e.topic.rsplit(".", 1)[1], e.op, e.after["name"]) for e in merged] == [
        (b, "c", "t1"),
        (a, "c", "t1"),
        (a, "c", "t2"),
        (b, "u", "t2"),
    ]
    # the transaction order the core numbered matches the change order within each
    orders = [e.value["transaction"]["total_order"] for e in merged]
    assert orders == [1, 2, 1, 2]
    assert [m.value["status"] for m in tx] == ["BEGIN", "END", "BEGIN", "END"]
    assert tx[1].value["event_count"] == 2
    assert sorted(
        (c["data_collection"], c["event_count"]) for c in tx[1].value["data_collections"]
    ) == [(f"{h.dbname}.dbo.{a}", 1), (f"{h.dbname}.dbo.{b}", 1)]
    assert tx[0].value["event_count"] is None and tx[0].value["data_collections"] is None
    assert [e.value["transaction"]["data_collection_order"] for e in merged] == [1, 1, 1, 1]
    assert tx[0].value["id"] == merged[0].value["source"]["commit_lsn"]


def test_graceful_restart_resumes_exactly(h: SqlServerHarness) -> None:
    """AC-38: stop mid-stream and restart with the stored offsets: no loss, no repeat."""
    t = h.create_table("resume", COLUMNS)
    cfg = h.config("resume")
    store = MemoryOffsetStore()
    with h.running(cfg, store):
        with h.connect() as conn:
            for i in range(1, 31):
                conn.execute(f"INSERT INTO dbo.\"{t}\" VALUES ({i}, 'n{i}', NULL, NULL)")
        h.read(cfg, "resume", min_count=30, settle=0.2)
    # changes while stopped, one transaction of several rows among them
    with h.connect() as conn:
        with conn.transaction():
            for i in range(31, 36):
                conn.execute(f"INSERT INTO dbo.\"{t}\" VALUES ({i}, 'n{i}', NULL, NULL)")
        conn.execute(f"UPDATE dbo.\"{t}\" SET name = 'x' WHERE id <= 3")
    with h.running(cfg, store):
        events = h.read(cfg, "resume", min_count=38)
    keys = [(e.op, e.key["id"]) for e in events]
    assert keys == [("c", i) for i in range(1, 36)] + [("u", 1), ("u", 2), ("u", 3)]


def test_online_schema_evolution_with_two_capture_instances(h: SqlServerHarness) -> None:
    """The online procedure: ALTER TABLE, a second capture instance, the old one dropped
    later; the connector switches at the new instance's start LSN, nothing lost or repeated,
    the new column in the events from then on."""
    t = h.create_table("evolve", "id int PRIMARY KEY, name varchar(20) NOT NULL")
    cfg = h.config("evolve")
    with h.running(cfg) as run:
        h.sql(f"INSERT INTO dbo.\"{t}\" VALUES (1, 'before')")
        h.read(cfg, "evolve", min_count=1, settle=0.3)
        h.sql(f'ALTER TABLE dbo."{t}" ADD COLUMN email varchar(40)')
        h.sql(f"INSERT INTO dbo.\"{t}\" VALUES (2, 'between', 'b@x')")  # old instance only
        h.enable("evolve", instance=f"dbo_{t}_v2")
        h.sql(
            f"INSERT INTO dbo.\"{t}\" VALUES (3, 'after', 'c@x')",
            f"UPDATE dbo.\"{t}\" SET email = 'a@x' WHERE id = 1",
        )
        events = h.read(cfg, "evolve", min_count=4)
        changes = read_topic(h.kafka, cfg["database.server.name"], min_count=2)
        # the procedure's last step, once the connector has moved past the new start LSN
        h.sql("SELECT sys.sp_cdc_disable_table('dbo', %s, %s)", params=(t, f"dbo_{t}"))
        h.sql(f'DELETE FROM dbo."{t}" WHERE id = 2')
        events = h.read(cfg, "evolve", min_count=6)
        assert not run.errors
    assert [(e.op, e.key["id"]) for e in events] == [
        ("c", 1),
        ("c", 2),
        ("c", 3),
        ("u", 1),
        ("d", 2),
        (None, 2),
    ]
    assert events[1].after == {"id": 2, "name": "between"}  # the old instance's columns
    assert events[2].after == {"id": 3, "name": "after", "email": "c@x"}
    assert events[3].after == {"id": 1, "name": "before", "email": "a@x"}
    assert events[4].before == {"id": 2, "name": "between", "email": "b@x"}
    # the snapshot's CREATE, then the switch: an ALTER of the table to the new instance's
    # columns, no DDL text
    assert [c.value["source"]["table"] for c in changes] == [t, t]
    assert [c.value["tableChanges"][0]["type"] for c in changes] == ["CREATE", "ALTER"]
    [change] = changes[1].value["tableChanges"]
    assert change["type"] == "ALTER" and changes[1].value["ddl"] is None
    assert [c["name"] for c in change["table"]["columns"]] == ["id", "name", "email"]


@pytest.mark.parametrize("mode", ["schema_only", "never", "initial_only"])
def test_snapshot_modes(h: SqlServerHarness, mode: str) -> None:
    """schema_only and never: no rows from before, streaming from the start; initial_only: the rows,
    then nothing streamed."""
    t = h.create_table(f"mode_{mode}", COLUMNS)
    h.sql(f"INSERT INTO dbo.\"{t}\" VALUES (1, 'old', NULL, NULL)")
    cfg = h.config(f"mode_{mode}", **{"snapshot.mode": mode})
    run = h.start(cfg) if mode == "initial_only" else None
    if run is not None:  # initial_only ends by itself after the snapshot
        h.read(cfg, f"mode_{mode}", min_count=1)
        h.sql(f"INSERT INTO dbo.\"{t}\" VALUES (2, 'new', NULL, NULL)")
        events = h.read(cfg, f"mode_{mode}", min_count=1)
        run.stop()
        assert not run.errors
        assert [(e.op, e.key["id"]) for e in events] == [("r", 1)]
        return
    with h.running(cfg):
        h.sql(f"INSERT INTO dbo.\"{t}\" VALUES (2, 'new', NULL, NULL)")
        events = h.read(cfg, f"mode_{mode}", min_count=1)
    assert [(e.op, e.key["id"]) for e in events] == [("c", 2)]
    if mode == "schema_only":  # the structure is snapshotted: reported as a CREATE
        [change] = read_topic(h.kafka, cfg["database.server.name"], min_count=1, settle=0.3)
        assert change.value["source"]["snapshot"] is True
        assert [c["type"] for c in change.value["tableChanges"]] == ["CREATE"]


def test_snapshot_select_statement_override(h: SqlServerHarness) -> None:
    t = h.create_table("override", COLUMNS)
    h.sql(f"INSERT INTO dbo.\"{t}\" SELECT g, 'n' || g, NULL, NULL FROM generate_series(1, 6) g")
    name = f"dbo.{t}"
    cfg = h.config("override")
    cfg["snapshot.select.statement.overrides"] = name
    cfg[f"snapshot.select.statement.overrides.{name}"] = (
        f'SELECT id, name, d, m FROM dbo."{t}" WHERE id % 2 = 0'
    )
    with h.running(cfg):
        events = h.read(cfg, "override", min_count=3)
    assert [(e.op, e.key["id"]) for e in events] == [("r", 2), ("r", 4), ("r", 6)]


def test_heartbeat_action_query_runs_with_each_heartbeat(h: SqlServerHarness) -> None:
    """heartbeat.action.query runs on each heartbeat: here it updates a captured table, so
    its changes come back as events (and the heartbeat topic has records). Not while the
    snapshot holds its locks (``exclusive``): the action runs on the snapshot's thread and
    would wait for them forever."""
    t = h.create_table("beat", "id int PRIMARY KEY, beats int NOT NULL")
    h.sql(f'INSERT INTO dbo."{t}" SELECT g, 0 FROM generate_series(1, 3000) g')
    cfg = h.config(
        "beat",
        **{
            "heartbeat.interval.ms": "20",
            # five beats, then quiet (so the topic can be read to its end)
            "heartbeat.action.query": (
                f'UPDATE dbo."{t}" SET beats = beats + 1 WHERE id = 1 AND beats < 5'
            ),
            "snapshot.isolation.mode": "exclusive",
            "snapshot.fetch.size": "100",
        },
    )
    with h.running(cfg) as run:
        events = h.read(cfg, "beat", min_count=3005, settle=0.3)
        # (never quiet: a heartbeat record every 20 ms)
        topic = f"__debezium-heartbeat.{cfg['database.server.name']}"
        beats = read_topic(h.kafka, topic, min_count=1, timeout=1.0)
        assert not run.errors
    assert [e.op for e in events[:3000]] == ["r"] * 3000
    assert events[0].after == {"id": 1, "beats": 0}  # no beat before the snapshot's end
    assert [(e.op, e.after["beats"]) for e in events[3000:]] == [("u", n) for n in range(1, 6)]
    assert beats[0].key == {"serverName": cfg["database.server.name"]}


def test_reselect_post_processor_fills_nulls_from_the_table(h: SqlServerHarness) -> None:
    """The reselect post-processor with reselect.null.values: a NULL of a created row's event
    is read again from the table by key (the row as it is now, in its database)."""
    t = h.create_table("resel", "id int PRIMARY KEY, note varchar(20), other varchar(20)")
    cfg = h.config(
        "resel",
        **{
            "post.processors": "reselector",
            "reselector.type": "io.debezium.processors.reselect.ReselectColumnsPostProcessor",
            "reselector.reselect.columns.include.list": f"dbo.{t}:note",
            "reselector.reselect.null.values": "true",
        },
    )
    store = MemoryOffsetStore()
    with h.running(cfg, store):
        pass  # the snapshot (no rows) and the start of streaming, stored
    # while the connector is stopped: created with NULLs, then filled in
    h.sql(
        f'INSERT INTO dbo."{t}" VALUES (1, NULL, NULL), (2, NULL, NULL)',
        f"UPDATE dbo.\"{t}\" SET note = 'later', other = 'later' WHERE id = 1",
    )
    with h.running(cfg, store) as run:
        events = h.read(cfg, "resel", min_count=3, settle=0.3)
        assert not run.errors
    assert [(e.op, e.key["id"]) for e in events] == [("c", 1), ("c", 2), ("u", 1)]
    # the created row's note is the table's now; other is not in the include list
    assert events[0].after == {"id": 1, "note": "later", "other": None}
    assert events[1].after == {"id": 2, "note": None, "other": None}  # still NULL
