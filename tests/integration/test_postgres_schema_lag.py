"""Schema changes while the connector is behind (issue 26): the worker is stopped, the table
changes (primary key, NOT NULL, type), rows are written on both sides of the change, and the
worker is restarted. Every event is keyed by the replica identity in force when its row was
written (no ghost row in a compacted topic) and carries the values the row had (no invented
zero for a NULL), with a schema that allows them; an enum label added while streaming is in
the schema of the first event that uses it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition

from cdc.offsets.memory import MemoryOffsetStore
from cdc.testing import kafka_reader
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness
from tests.integration.test_engine_crash import end_offset, finish, start, wait_for
from tests.integration.test_postgres_resilience import child_spec

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    with PgHarness(postgres, kafka, f"tm_schlag_{uuid.uuid4().hex[:8]}") as harness:
        yield harness


def read_with_schemas(
    h: PgHarness, topic: str, count: int, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[Any, Any]]:
    """(key, value) documents of ``topic`` with their ``schema`` and ``payload`` parts."""
    with monkeypatch.context() as m:
        m.setattr(kafka_reader, "payload", lambda raw: None if raw is None else orjson.loads(raw))
        events = kafka_reader.read_topic(h.kafka, topic, min_count=count)
    return [(e.key, e.value) for e in events]


def wait_for_end_row(kafka: str, topic: str, proc: subprocess.Popen[bytes]) -> None:
    """Until the record of the row ``(-1, -1, 'end')``, written last, is in ``topic``."""
    consumer = Consumer(
        {"bootstrap.servers": kafka, "group.id": uuid.uuid4().hex, "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + 180
    try:
        while True:
            assert proc.poll() is None, f"child exited {proc.returncode}"
            assert time.monotonic() < deadline, f"the end row never reached {topic}"
            for m in consumer.consume(1000, 0.5):
                if m.error() is None and m.value() and b'"v":"end"' in m.value():
                    return
    finally:
        consumer.close()


def field(doc: dict[str, Any], image: str, name: str) -> dict[str, Any]:
    """The schema of field ``name`` of the ``before``/``after`` struct of an envelope."""
    envelope = {f["field"]: f for f in doc["schema"]["fields"]}
    return next(f for f in envelope[image]["fields"] if f["field"] == name)


def behind(
    h: PgHarness, table: str, while_stopped: list[str], count: int, mp: pytest.MonkeyPatch
) -> list[tuple[Any, Any]]:
    """Streams ``table`` with a first row (0, 0), stops the worker, runs ``while_stopped``,
    restarts it on the same offsets and gives the ``count`` events of the topic."""
    cfg = h.config(table_include_list=f"public.{table}", snapshot_mode="never")
    store = MemoryOffsetStore()
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.sql(f"INSERT INTO {table} (id, x) VALUES (0, 0)")
        kafka_reader.read_topic(h.kafka, h.topic(cfg, table), min_count=1, settle=0.5)
    h.sql(*while_stopped)
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        return read_with_schemas(h, h.topic(cfg, table), count, mp)


def compacted(events: list[tuple[Any, Any]]) -> dict[str, Any]:
    """What a compacted topic keeps: the last value per key (a tombstone removes the key)."""
    state: dict[str, Any] = {}
    for key, value in events:
        k = orjson.dumps(key["payload"], option=orjson.OPT_SORT_KEYS).decode()
        if value is None:
            state.pop(k, None)
        else:
            state[k] = value["payload"]["after"]
    return {k: v for k, v in state.items() if v is not None}


def test_primary_key_changed_while_behind_leaves_no_ghost_row(
    h: PgHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h.sql("CREATE TABLE c (id int PRIMARY KEY, x int NOT NULL, m numeric(10,2), s varchar(10))")
    events = behind(
        h,
        "c",
        [
            "INSERT INTO c VALUES (1, 1, 1.25, 'a')",
            "UPDATE c SET s = 'a2' WHERE id = 1",
            "DELETE FROM c WHERE id = 1",
            "ALTER TABLE c DROP CONSTRAINT c_pkey, ADD PRIMARY KEY (id, x)",
            "INSERT INTO c VALUES (1, 2, 2.5, 'after pk')",
            "ALTER TABLE c ALTER COLUMN m TYPE numeric(12,4)",
            "INSERT INTO c VALUES (3, 3, 3.5, 'after ty')",
        ],
        7,
        monkeypatch,
    )
    got = [
        (key["payload"], None if value is None else value["payload"]["op"]) for key, value in events
    ]
    assert got == [
        ({"id": 0}, "c"),
        ({"id": 1}, "c"),
        ({"id": 1}, "u"),
        ({"id": 1}, "d"),
        ({"id": 1}, None),  # the tombstone removes the key the row had
        ({"id": 1, "x": 2}, "c"),
        ({"id": 3, "x": 3}, "c"),
    ]
    # the key schemas say which columns form the key at each event
    assert [[f["field"] for f in key["schema"]["fields"]] for key, _ in events[1:5]] == [["id"]] * 4
    after = [v["payload"]["after"] for _, v in events if v is not None and v["payload"]["after"]]
    assert [(a["id"], a["x"], a["s"]) for a in after] == [
        (0, 0, None),
        (1, 1, "a"),
        (1, 1, "a2"),
        (1, 2, "after pk"),
        (3, 3, "after ty"),
    ]
    # the type each value was written with: numeric(10,2) before the ALTER, (12,4) after
    scales = [
        field(v, "after", "m")["parameters"]["scale"]
        for _, v in events
        if v is not None and v["payload"]["after"]
    ]
    assert scales == ["2", "2", "2", "2", "4"]
    # reconciliation: what the compacted topic keeps is the table, row for row
    kept = sorted(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) for r in compacted(events).values())
    rows = h.sql("SELECT id, x, s FROM c ORDER BY id")
    assert [(r["id"], r["x"], r["s"]) for r in map(orjson.loads, kept)] == rows


def test_set_not_null_while_behind_keeps_the_null(
    h: PgHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h.sql("CREATE TABLE n (id int PRIMARY KEY, x int, note text)")
    events = behind(
        h,
        "n",
        [
            "INSERT INTO n VALUES (1, NULL, 'null x')",
            "UPDATE n SET note = 'still null' WHERE id = 1",
            "UPDATE n SET x = 5 WHERE id = 1",
            "ALTER TABLE n ALTER COLUMN x SET NOT NULL",
            "INSERT INTO n VALUES (2, 7, 'after')",
        ],
        5,
        monkeypatch,
    )
    values = [v for _, v in events]
    assert [(v["payload"]["op"], v["payload"]["after"]) for v in values] == [
        ("c", {"id": 0, "x": 0, "note": None}),
        ("c", {"id": 1, "x": None, "note": "null x"}),  # not an invented 0
        ("u", {"id": 1, "x": None, "note": "still null"}),
        ("u", {"id": 1, "x": 5, "note": "still null"}),
        ("c", {"id": 2, "x": 7, "note": "after"}),
    ]
    # a schema that allows the NULL where the row had one; required once the log says so
    assert [field(v, "after", "x")["optional"] for v in values] == [True, True, True, True, False]


def test_enum_label_added_while_streaming_is_in_the_next_events_schema(
    h: PgHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ALTER TYPE ... ADD VALUE`` sends no Relation message: the first value outside the
    cached labels reloads them before its event is written (a strict Avro enum would reject
    an event whose schema lacks its value)."""
    h.sql(
        "CREATE TYPE mood AS ENUM ('sad', 'ok')",
        "CREATE DOMAIN moody AS mood",
        "CREATE TABLE e (id int PRIMARY KEY, md mood, dm moody, mds mood[])",
    )
    cfg = h.config(table_include_list="public.e", snapshot_mode="never")
    topic = h.topic(cfg, "e")
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO e VALUES (1, 'ok', 'sad', '{ok}')")
        kafka_reader.read_topic(h.kafka, topic, min_count=1, settle=0.5)
        h.sql(
            "ALTER TYPE mood ADD VALUE 'happy'",
            "INSERT INTO e VALUES (2, 'happy', 'ok', '{sad}')",
            "INSERT INTO e VALUES (3, 'ok', 'happy', '{sad}')",
            "INSERT INTO e VALUES (4, 'ok', 'ok', '{sad,happy}')",
        )
        events = read_with_schemas(h, topic, 4, monkeypatch)
    values = [v for _, v in events]
    assert [v["payload"]["after"] for v in values] == [
        {"id": 1, "md": "ok", "dm": "sad", "mds": ["ok"]},
        {"id": 2, "md": "happy", "dm": "ok", "mds": ["sad"]},
        {"id": 3, "md": "ok", "dm": "happy", "mds": ["sad"]},
        {"id": 4, "md": "ok", "dm": "ok", "mds": ["sad", "happy"]},
    ]

    def allowed(v: dict[str, Any], name: str) -> str:
        schema = field(v, "after", name)
        return str((schema.get("items") or schema)["parameters"]["allowed"])

    assert allowed(values[0], "md") == "sad,ok"
    for v in values[1:]:
        assert [allowed(v, n) for n in ("md", "dm", "mds")] == ["sad,ok,happy"] * 3


def test_killed_while_catching_up_across_the_changes_keeps_keys_and_values(
    h: PgHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker stops; rows (some with NULLs) are written, half deleted, the NULLs filled,
    the column made NOT NULL and the primary key widened, more rows written and deleted; the
    worker restarts, is SIGKILLed while catching up, and restarts again. The compacted topic
    is the table, and no event carries a value its row did not have."""
    # large enough that the catch-up (~4n events) outlasts a loaded box's delay between
    # seeing the first tenth of it and the kill (10_000 was caught up once before the kill)
    n = 30_000
    h.sql("CREATE TABLE k (id int PRIMARY KEY, x int, v text)")
    cfg = h.config(
        table_include_list="public.k",
        snapshot_mode="never",
        max_batch_size="20",
        max_queue_size="40",
    )
    topic = h.topic(cfg, "k")
    path = child_spec(tmp_path, h, cfg)
    proc = start(path)
    try:
        deadline = time.monotonic() + 30
        active = f"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{cfg['slot.name']}'"
        while h.sql(active + " AND active") != [(1,)]:
            assert time.monotonic() < deadline and proc.poll() is None, "the child never streamed"
            time.sleep(0.2)
        h.sql("INSERT INTO k VALUES (0, 100, 'marker')")
        wait_for(h.kafka, topic, 1, proc)
    finally:
        finish(proc)
    for lo in range(1, n + 1, 2500):
        h.sql(
            "INSERT INTO k SELECT i, CASE WHEN i % 2 = 0 THEN NULL ELSE i END, 'v' || i "
            f"FROM generate_series({lo}, {lo + 2499}) AS i"
        )
    h.sql(
        f"DELETE FROM k WHERE id BETWEEN 1 AND {n // 2}",
        "UPDATE k SET x = -id WHERE x IS NULL",
        "ALTER TABLE k ALTER COLUMN x SET NOT NULL",
        "ALTER TABLE k DROP CONSTRAINT k_pkey, ADD PRIMARY KEY (id, x)",
        f"INSERT INTO k SELECT i, i, 'w' || i FROM generate_series({n + 1}, {2 * n}) AS i",
        f"DELETE FROM k WHERE id > {n} AND id % 3 = 0",
        "INSERT INTO k VALUES (-1, -1, 'end')",
    )
    # marker, n inserts, n/2 deletes + tombstones, n/4 fills, n inserts, n/3 deletes +
    # tombstones, the end row
    total = 1 + n + n + n // 4 + n + 2 * (n // 3) + 1
    proc = start(path)
    try:
        wait_for(h.kafka, topic, total // 20, proc)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert end_offset(h.kafka, topic) < total, "caught up before the kill"
    proc = start(path)
    try:  # not a record count: the kill left duplicates, which reach it before the end row
        wait_for_end_row(h.kafka, topic, proc)
    finally:
        finish(proc)
    events = read_with_schemas(h, topic, total, monkeypatch)

    def expected_x(row_id: int) -> set[int | None]:
        if row_id == 0:
            return {100}
        if row_id == -1:
            return {-1}
        if row_id > n or row_id % 2:
            return {row_id}
        return {None, -row_id}  # NULL until the fill, then -id: never 0

    for key, value in events:
        if value is None:
            continue
        op, before, after = (value["payload"][f] for f in ("op", "before", "after"))
        image = after if op != "d" else before
        assert image["x"] in expected_x(image["id"]) or op == "d", (op, image)
        # the key holds the columns of the identity at its position, with the row's values
        assert all(image[f] == v for f, v in key["payload"].items()), (key, image)
        if op == "c" and image["x"] is None:
            assert field(value, "after", "x")["optional"] is True
    kept = sorted((r["id"], r["x"], r["v"]) for r in compacted(events).values() if r is not None)
    assert kept == h.sql("SELECT id, x, v FROM k ORDER BY id")
