"""The PostgreSQL connector against the real local PostgreSQL and Kafka (catalogue ACs)."""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from cdc.errors import FatalError, RetriableError
from cdc.offsets.memory import MemoryOffsetStore
from tests.integration import pg_cleanup
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness, read_topic

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    with PgHarness(postgres, kafka, f"tm_{uuid.uuid4().hex[:8]}") as harness:
        harness.sql("CREATE EXTENSION IF NOT EXISTS hstore")
        yield harness


def customers(h: PgHarness, name: str, rows: int = 2) -> None:
    h.sql(
        f"CREATE TABLE {name} (id int PRIMARY KEY, first_name text NOT NULL, email text)",
        f"INSERT INTO {name} SELECT g, 'name' || g, 'e' || g || '@x.org' "
        f"FROM generate_series(1, {rows}) g",
    )


def test_snapshot_then_stream_create_update_delete(h: PgHarness) -> None:
    """AC-01, AC-04, AC-14, AC-27."""
    customers(h, "c1")
    cfg = h.config(table_include_list="public.c1")
    topic = h.topic(cfg, "c1")
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO c1 VALUES (3, 'Anne', 'annek@noanswer.org')")
        h.sql("UPDATE c1 SET email = 'new@x.org' WHERE id = 3")
        h.sql("DELETE FROM c1 WHERE id = 3")
        events = read_topic(h.kafka, topic, min_count=6)
    ops = [e.op for e in events]
    assert ops == ["r", "r", "c", "u", "d", None]
    snap = events[0]
    assert snap.key == {"id": 1}
    assert snap.after == {"id": 1, "first_name": "name1", "email": "e1@x.org"}
    assert snap.value["source"]["snapshot"] is True
    create = events[2]
    assert create.before is None
    assert create.after == {"id": 3, "first_name": "Anne", "email": "annek@noanswer.org"}
    src = create.value["source"]
    assert src["connector"] == "postgresql" and src["name"] == cfg["database.server.name"]
    assert src["db"] == h.dbname and src["schema"] == "public" and src["table"] == "c1"
    assert src["snapshot"] is False and isinstance(src["lsn"], int) and src["txId"] > 0
    assert create.value["ts_ms"] >= src["ts_ms"]
    update = events[3]
    assert update.before is None  # DEFAULT identity, key unchanged: as Debezium
    assert update.after["email"] == "new@x.org"
    delete, tomb = events[4], events[5]
    assert delete.before["id"] == 3 and delete.after is None
    assert tomb.key == {"id": 3} and tomb.value is None


def test_records_carry_connect_json_schemas(h: PgHarness) -> None:
    """AC-14: key and value are {"schema", "payload"} documents with Debezium's names."""
    from confluent_kafka import Consumer, TopicPartition

    customers(h, "c14", rows=1)
    cfg = h.config(table_include_list="public.c14", snapshot_mode="initial_only")
    with h.running(cfg):
        read_topic(h.kafka, h.topic(cfg, "c14"), min_count=1)
    consumer = Consumer({"bootstrap.servers": h.kafka, "group.id": uuid.uuid4().hex})
    consumer.assign([TopicPartition(h.topic(cfg, "c14"), 0, 0)])
    msg = consumer.poll(10)
    consumer.close()
    assert msg is not None
    import orjson

    key, value = orjson.loads(msg.key()), orjson.loads(msg.value())
    server = cfg["database.server.name"]
    assert key["schema"]["name"] == f"{server}.public.c14.Key"
    assert key["schema"]["fields"] == [{"type": "int32", "optional": False, "field": "id"}]
    assert value["schema"]["name"] == f"{server}.public.c14.Envelope"
    names = [f["field"] for f in value["schema"]["fields"]]
    assert names == ["before", "after", "source", "op", "ts_ms"]
    source = value["schema"]["fields"][2]
    assert source["name"] == "io.debezium.connector.postgresql.Source"
    assert [f["field"] for f in source["fields"]] == [
        "version",
        "connector",
        "name",
        "ts_ms",
        "snapshot",
        "db",
        "schema",
        "table",
        "txId",
        "lsn",
        "xmin",
    ]


def test_primary_key_update_becomes_delete_tombstone_create(h: PgHarness) -> None:
    """AC-03."""
    customers(h, "c3", rows=1)
    cfg = h.config(table_include_list="public.c3", snapshot_mode="never")
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql("UPDATE c3 SET id = 10 WHERE id = 1")
        events = read_topic(h.kafka, h.topic(cfg, "c3"), min_count=3)
    assert [e.op for e in events] == ["d", None, "c"]
    assert events[0].key == {"id": 1} and events[1].key == {"id": 1}
    assert events[2].key == {"id": 10} and events[2].after["id"] == 10
    assert events[0].headers["__debezium.newkey"] == b'{"id":10}'
    assert events[2].headers["__debezium.oldkey"] == b'{"id":1}'


def test_table_without_key(h: PgHarness) -> None:
    """AC-05 (null key); AC-06: PostgreSQL itself refuses UPDATE/DELETE on a published table
    without a replica identity, so only inserts are ever captured."""
    h.sql("CREATE TABLE nokey (a int, b text)")
    cfg = h.config(table_include_list="public.nokey", snapshot_mode="never")
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO nokey VALUES (1, 'x')")
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
            h.sql("UPDATE nokey SET b = 'y'")
        events = read_topic(h.kafka, h.topic(cfg, "nokey"), min_count=1)
    assert [(e.op, e.key) for e in events] == [("c", None)]


def test_replica_identity_full_gives_whole_before(h: PgHarness) -> None:
    """AC-07."""
    customers(h, "c7", rows=1)
    cfg = h.config(table_include_list="public.c7", snapshot_mode="never")
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql("UPDATE c7 SET email = 'a@b' WHERE id = 1")
        h.sql("ALTER TABLE c7 REPLICA IDENTITY FULL")
        h.sql("UPDATE c7 SET email = 'c@d' WHERE id = 1")
        events = read_topic(h.kafka, h.topic(cfg, "c7"), min_count=2)
    assert events[0].before is None
    assert events[1].before == {"id": 1, "first_name": "name1", "email": "a@b"}


def test_excluded_key_column_stays_in_the_key(h: PgHarness) -> None:
    """AC-09."""
    customers(h, "c9", rows=1)
    cfg = h.config(
        table_include_list="public.c9",
        column_exclude_list=r"public\.c9\.id",
        snapshot_mode="initial_only",
    )
    with h.running(cfg):
        [event] = read_topic(h.kafka, h.topic(cfg, "c9"), min_count=1)
    assert event.key == {"id": 1}
    assert event.after == {"first_name": "name1", "email": "e1@x.org"}


TYPES_DDL = """
CREATE TABLE types (
  id int PRIMARY KEY,
  ts timestamp, ts3 timestamp(3), tstz timestamptz, d date, t time, t3 time(3), ttz timetz,
  dec numeric(10,2), num numeric, nan numeric, money money,
  b bytea, bits bit(10), bit1 bit(1), vb varbit,
  iv interval, hs hstore, j jsonb, u uuid, x xml, inet inet, arr int[], tarr text[],
  pt point, r int4range, sm smallint, bi bigint, re real, dp double precision, bo boolean,
  ch char(3), mood mood
)"""
TYPES_ROW = """
INSERT INTO types VALUES (
  1, '2018-06-20 15:13:16.945104', '2018-06-20 15:13:16.945', '2018-06-20 15:13:16.945104+02',
  '2018-06-20', '04:05:06.789012', '04:05:06.789', '04:05:06+02',
  12.34, 12.3456, 'NaN', 1234.56,
  '\\x01ff', B'1010000001', B'1', B'101',
  '1 year 2 months 3 days 04:05:06.78', 'a=>1, b=>NULL', '{"k": [1, 2]}',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '<a>1</a>', '192.168.0.1/24', '{1,NULL,3}',
  '{"a b","c"}', '(1.5,2)', '[1,5)', 7, 9000000000, 1.5, 2.25, true, 'ab', 'happy'
)"""


@pytest.fixture(scope="module")
def types_table(h: PgHarness) -> None:
    h.sql("CREATE TYPE mood AS ENUM ('sad', 'happy')", TYPES_DDL, TYPES_ROW)


def snapshot_row(h: PgHarness, **overrides: str) -> dict[str, object]:
    cfg = h.config(table_include_list="public.types", snapshot_mode="initial_only", **overrides)
    with h.running(cfg):
        [event] = read_topic(h.kafka, h.topic(cfg, "types"), min_count=1)
    return dict(event.after)


def test_type_mapping_defaults(h: PgHarness, types_table: None) -> None:
    """AC-16, AC-18, AC-19, AC-21, AC-22 (numeric), AC-23 (map), AC-25 (bytes)."""
    row = snapshot_row(h)
    assert row["ts"] == 1529507596945104
    assert row["ts3"] == 1529507596945
    assert row["tstz"] == "2018-06-20T13:13:16.945104Z"
    assert row["d"] == 17702
    assert row["t"] == 14706789012 and row["t3"] == 14706789
    assert row["ttz"] == "02:05:06Z"
    assert base64.b64decode(row["dec"]) == (1234).to_bytes(2, "big")
    unscaled = base64.b64encode((123456).to_bytes(3, "big")).decode()
    assert row["num"] == {"scale": 4, "value": unscaled}
    assert row["nan"] is None
    assert base64.b64decode(row["money"]) == (123456).to_bytes(3, "big")
    assert base64.b64decode(row["b"]) == b"\x01\xff"
    assert base64.b64decode(row["bits"]) == (0b1010000001).to_bytes(2, "little")
    assert row["bit1"] is True
    months = 14 * 365.25 / 12
    want = round((((months + 3) * 24 + 4) * 60 + 5) * 60e6 + 6.78e6)
    assert row["iv"] == want
    assert row["hs"] == '{"a":"1","b":null}'  # hstore.handling.mode=json, the default
    assert row["j"] == '{"k": [1, 2]}'
    assert row["u"] == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    assert row["x"] == "<a>1</a>" and row["inet"] == "192.168.0.1/24"
    assert row["arr"] == [1, None, 3] and row["tarr"] == ["a b", "c"]
    assert row["pt"]["x"] == 1.5 and row["pt"]["y"] == 2.0
    assert row["r"] == "[1,5)"
    assert (row["sm"], row["bi"], row["re"], row["dp"], row["bo"]) == (
        7,
        9000000000,
        1.5,
        2.25,
        True,
    )
    assert row["ch"] == "ab " and row["mood"] == "happy"


def test_type_mapping_modes(h: PgHarness, types_table: None) -> None:
    """AC-16 connect, AC-18/20 double and string, AC-22 string, AC-23 json, AC-25."""
    row = snapshot_row(
        h,
        time_precision_mode="connect",
        decimal_handling_mode="double",
        interval_handling_mode="string",
        hstore_handling_mode="map",
        binary_handling_mode="base64",
    )
    assert row["ts"] == 1529507596945
    assert row["dec"] == 12.34 and row["num"] == 12.3456
    assert row["nan"] == "NaN"  # the JSON converter's rendering of a float NaN
    assert row["iv"] == "P1Y2M3DT4H5M6.78S"
    assert row["hs"] == {"a": "1", "b": None}
    assert row["b"] == "Af8="
    row = snapshot_row(h, decimal_handling_mode="string", binary_handling_mode="hex")
    assert row["dec"] == "12.34" and row["nan"] == "NAN" and row["b"] == "01ff"


def test_initial_only_stops_and_never_streams_from_slot_creation(h: PgHarness) -> None:
    """AC-34."""
    customers(h, "c34", rows=3)
    cfg = h.config(table_include_list="public.c34", snapshot_mode="initial_only")
    run = h.start(cfg)
    run.thread.join(30)
    assert not run.thread.is_alive() and not run.errors
    assert [e.op for e in read_topic(h.kafka, h.topic(cfg, "c34"), min_count=3)] == ["r"] * 3

    cfg = h.config(table_include_list="public.c34", snapshot_mode="never")
    with h.running(cfg) as run2:
        h.wait_streaming(run2)
        h.sql("INSERT INTO c34 VALUES (4, 'd', NULL)")
        events = read_topic(h.kafka, h.topic(cfg, "c34"), min_count=1)
    assert [(e.op, e.key) for e in events] == [("c", {"id": 4})]


def test_snapshot_select_override(h: PgHarness) -> None:
    """AC-35."""
    customers(h, "c35", rows=5)
    cfg = h.config(
        table_include_list="public.c35",
        snapshot_mode="initial_only",
        snapshot_select_statement_overrides="public.c35",
    )
    cfg["snapshot.select.statement.overrides.public.c35"] = "SELECT * FROM c35 WHERE id > 3"
    with h.running(cfg):
        events = read_topic(h.kafka, h.topic(cfg, "c35"), min_count=2)
    assert sorted(e.key["id"] for e in events) == [4, 5]


def test_graceful_restart_has_no_loss_and_no_duplicates(h: PgHarness) -> None:
    """AC-38; AC-49: after a clean stop streaming starts just after the stored LSN."""
    customers(h, "c38", rows=3)
    cfg = h.config(table_include_list="public.c38")
    store = MemoryOffsetStore()
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO c38 VALUES (4, 'd', NULL)")
        read_topic(h.kafka, h.topic(cfg, "c38"), min_count=4)
    h.sql("INSERT INTO c38 VALUES (5, 'e', NULL)", "UPDATE c38 SET email = 'x' WHERE id = 1")
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO c38 VALUES (6, 'f', NULL)")
        events = read_topic(h.kafka, h.topic(cfg, "c38"), min_count=7)
    assert [(e.op, e.key["id"]) for e in events] == [
        ("r", 1),
        ("r", 2),
        ("r", 3),
        ("c", 4),
        ("c", 5),
        ("u", 1),
        ("c", 6),
    ]
    lsns = [e.value["source"]["lsn"] for e in events[3:]]
    assert lsns == sorted(lsns)


def test_unchanged_toast_value_is_the_placeholder(h: PgHarness) -> None:
    """AC-50."""
    h.sql(
        "CREATE TABLE toast (id int PRIMARY KEY, big text, n int)",
        "ALTER TABLE toast ALTER COLUMN big SET STORAGE EXTERNAL",
        "INSERT INTO toast VALUES (1, repeat('x', 20000), 0)",
    )
    cfg = h.config(
        table_include_list="public.toast",
        snapshot_mode="never",
        toasted_value_placeholder="__unavailable",
    )
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql("UPDATE toast SET n = 1")
        h.sql("ALTER TABLE toast REPLICA IDENTITY FULL")
        h.sql("UPDATE toast SET n = 2")
        events = read_topic(h.kafka, h.topic(cfg, "toast"), min_count=2)
    assert events[0].after["big"] == "__unavailable"
    assert events[1].after["big"] == "x" * 20000
    assert events[1].before["big"] == "x" * 20000


def test_publication_autocreate_modes(h: PgHarness) -> None:
    """AC-52."""
    customers(h, "c52a", rows=1)
    customers(h, "c52b", rows=1)
    cfg = h.config(
        table_include_list="public.c52a",
        publication_autocreate_mode="disabled",
        snapshot_mode="never",
    )
    run = h.start(cfg)
    run.thread.join(30)
    assert run.errors and isinstance(run.errors[0], FatalError)
    assert "does not exist" in str(run.errors[0]) and cfg["publication.name"] in str(run.errors[0])

    cfg = h.config(
        table_include_list="public.c52a",
        publication_autocreate_mode="filtered",
        snapshot_mode="initial_only",
    )
    with h.running(cfg):
        read_topic(h.kafka, h.topic(cfg, "c52a"), min_count=1)
    tables = h.sql(
        "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
        params=(cfg["publication.name"],),
    )
    assert tables == [("public", "c52a")]


def test_transaction_metadata(h: PgHarness) -> None:
    """AC-63."""
    h.sql(
        "CREATE SCHEMA s1",
        "CREATE SCHEMA s2",
        "CREATE TABLE s1.a (pk int PRIMARY KEY)",
        "CREATE TABLE s2.a (pk int PRIMARY KEY)",
    )
    cfg = h.config(
        schema_include_list="s1,s2", provide_transaction_metadata="true", snapshot_mode="never"
    )
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql("BEGIN; INSERT INTO s1.a VALUES (1); INSERT INTO s2.a VALUES (1); COMMIT")
        tx = read_topic(h.kafka, f"{cfg['database.server.name']}.transaction", min_count=2)
        a1 = read_topic(h.kafka, h.topic(cfg, "a", "s1"), min_count=1)
        a2 = read_topic(h.kafka, h.topic(cfg, "a", "s2"), min_count=1)
    begin, end = tx[0].value, tx[1].value
    assert begin["status"] == "BEGIN" and begin["event_count"] is None
    assert end["status"] == "END" and end["event_count"] == 2 and end["id"] == begin["id"]
    # schema.table, as the seed's example and Debezium name them
    assert sorted((c["data_collection"], c["event_count"]) for c in end["data_collections"]) == [
        ("s1.a", 1),
        ("s2.a", 1),
    ]
    assert a1[0].value["transaction"] == {
        "id": begin["id"],
        "total_order": 1,
        "data_collection_order": 1,
    }
    assert a2[0].value["transaction"]["total_order"] == 2


CONFIRMED = "SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots WHERE slot_name = %s"


def test_heartbeats_and_slot_advance_when_idle(h: PgHarness) -> None:
    """AC-64 and AC-51: heartbeats about once a second; the slot's confirmed LSN moves while
    the captured table is idle and other tables change."""
    customers(h, "c64", rows=1)
    h.sql("CREATE TABLE busy (id serial PRIMARY KEY, v int)")
    cfg = h.config(
        table_include_list="public.c64", heartbeat_interval_ms="1000", snapshot_mode="never"
    )
    with h.running(cfg) as run:
        h.wait_streaming(run)
        started = time.monotonic()
        time.sleep(1)
        before = h.sql(CONFIRMED, params=(cfg["slot.name"],))[0][0]
        for _ in range(20):
            h.sql("INSERT INTO busy (v) VALUES (1)")
            time.sleep(0.2)
        time.sleep(1.5)
        after = h.sql(CONFIRMED, params=(cfg["slot.name"],))[0][0]
        elapsed = time.monotonic() - started
    beats = read_topic(h.kafka, f"__debezium-heartbeat.{cfg['database.server.name']}", min_count=3)
    assert 0.5 * elapsed <= len(beats) <= 1.5 * elapsed + 1
    assert beats[0].key == {"serverName": cfg["database.server.name"]}
    assert after > before


@contextmanager
def slot_held_elsewhere(h: PgHarness, table: str, **overrides: Any) -> Iterator[dict[str, Any]]:
    """A connector's config whose slot exists (one run streamed) and is now held by another
    replication connection, as a previous owner's would be."""
    customers(h, table, rows=1)
    cfg = h.config(table_include_list=f"public.{table}", snapshot_mode="never", **overrides)
    with h.running(cfg) as run:
        h.wait_streaming(run)
    holder = psycopg.connect(h.pg.dsn(h.dbname), replication="database", autocommit=True)
    try:
        holder.pgconn.send_query(
            f'START_REPLICATION SLOT "{cfg["slot.name"]}" LOGICAL 0/0 '
            f"(proto_version '1', publication_names '\"{cfg['publication.name']}\"')".encode()
        )
        time.sleep(0.5)
        yield cfg
    finally:
        holder.close()


def test_busy_slot_retries_then_fails(h: PgHarness) -> None:
    """AC-53 (with short retry settings)."""
    with slot_held_elsewhere(h, "c53", slot_max_retries="2", slot_retry_delay_ms="200") as cfg:
        run = h.start(cfg)
        run.thread.join(60)
        assert run.errors, "the connector should fail while the slot is held"
        assert isinstance(run.errors[0], RetriableError)
        assert "in use" in str(run.errors[0])


def test_a_stop_ends_the_wait_for_a_held_slot(h: PgHarness) -> None:
    """A task stopped while its source waits for a slot another connection holds (a restart,
    a rebalance): the source thread ends with the stop, instead of waiting out
    slot.max.retries x slot.retry.delay.ms and then taking the slot from the task started in
    its place (seen in the distributed test: a restarted task's old source kept retrying for a
    minute after its engine had given up on it)."""
    with slot_held_elsewhere(h, "c53s", slot_max_retries="6", slot_retry_delay_ms="30000") as cfg:
        run = h.start(cfg)
        time.sleep(2)  # the source has found the slot busy and waits 30 s to look again
        name = f"tidemark-source-{cfg['name']}"
        source = next(t for t in threading.enumerate() if t.name == name)
        assert source.is_alive()
        t0 = time.monotonic()
        run.stop()
        source.join(5)
        assert not source.is_alive(), "the source still waits for the slot after the stop"
        assert time.monotonic() - t0 < 5
        assert not run.errors, run.errors  # a stop is a clean end, not a failure


def test_heartbeat_action_query_runs_and_slot_advances_on_a_quiet_database(
    h: PgHarness,
) -> None:
    """AC-51: the captured database is quiet while *another* database on the server is busy;
    heartbeat.action.query writes into the captured one, so its slot can still advance."""
    customers(h, "c51", rows=1)
    h.sql("CREATE TABLE hb (id serial PRIMARY KEY, ts timestamptz DEFAULT now())")
    cfg = h.config(
        table_include_list="public.c51", heartbeat_interval_ms="500", snapshot_mode="never"
    )
    cfg["heartbeat.action.query"] = "INSERT INTO hb DEFAULT VALUES"
    other = f"tb_{uuid.uuid4().hex[:6]}"
    pg_cleanup.create_database(h.pg.dsn(), other)
    try:
        with h.running(cfg) as run:
            h.wait_streaming(run)
            before = h.sql(CONFIRMED, params=(cfg["slot.name"],))[0][0]
            with psycopg.connect(h.pg.dsn(other), autocommit=True) as busy:
                busy.execute("CREATE TABLE noise (v text)")
                for _ in range(15):
                    busy.execute(
                        "INSERT INTO noise SELECT repeat('x', 1000) FROM generate_series(1, 100)"
                    )
                    time.sleep(0.2)
            time.sleep(2)
            after = h.sql(CONFIRMED, params=(cfg["slot.name"],))[0][0]
            metrics = run.engine.metrics
            assert metrics.streaming.connected and metrics.streaming.ms_behind_source >= 0
    finally:
        pg_cleanup.drop_database(h.pg.dsn(), other)
    assert h.sql("SELECT count(*) FROM hb")[0][0] >= 3  # the action query ran
    assert after > before


def test_snapshot_metrics(h: PgHarness) -> None:
    """AC-70: snapshot counters as the seed describes them."""
    customers(h, "c70a", rows=3)
    customers(h, "c70b", rows=2)
    cfg = h.config(table_include_list=r"public\.c70.*", snapshot_mode="initial_only")
    run = h.start(cfg)
    run.thread.join(60)
    assert not run.errors
    snap = run.engine.metrics.snapshot
    assert snap.completed and not snap.running and not snap.aborted
    assert snap.total_table_count == 2 and snap.remaining_table_count == 0
    assert snap.rows_scanned == {f"{h.dbname}.public.c70a": 3, f"{h.dbname}.public.c70b": 2}
    assert snap.total_events_seen == 5


def test_no_data_snapshot_keeps_the_slot_backlog(h: PgHarness) -> None:
    """snapshot.mode=no_data with an existing slot: structure only, and the changes the slot
    holds are streamed, not dropped (found by the Debezium comparison harness)."""
    customers(h, "cnd", rows=1)
    cfg = h.config(table_include_list="public.cnd", snapshot_mode="never")
    with h.running(cfg) as run:
        h.wait_streaming(run)
    h.sql("INSERT INTO cnd VALUES (2, 'while stopped', NULL)")
    cfg["snapshot.mode"] = "no_data"
    with h.running(cfg, MemoryOffsetStore()) as run:  # no stored offset: the mode applies
        h.wait_streaming(run)
        h.sql("INSERT INTO cnd VALUES (3, 'after', NULL)")
        events = read_topic(h.kafka, h.topic(cfg, "cnd"), min_count=2)
    assert [(e.op, e.key["id"]) for e in events] == [("c", 2), ("c", 3)]


def test_stop_during_snapshot_is_a_clean_stop(h: PgHarness) -> None:
    """A graceful stop (SIGTERM, REST pause, worker shutdown) that lands mid-snapshot ends the
    task without an error; the restart redoes the snapshot (its offsets say so)."""
    customers(h, "c_stop", rows=60_000)
    cfg = h.config(max_queue_size="200", max_batch_size="50")
    run = h.start(cfg)
    try:
        deadline = time.monotonic() + 60
        while sum(run.engine.metrics.snapshot.rows_scanned.values()) < 100:
            assert not run.errors, run.errors
            assert time.monotonic() < deadline, "snapshot did not start"
            time.sleep(0.01)
        assert run.engine.state == "SNAPSHOT"
    finally:
        run.stop()
    assert run.errors == []
    h.drop_slot(cfg)
