"""The MongoDB connector live against the `tidemark dev` stand-in (mongo-java-server) through
the real Kafka: snapshot, oplog and change-stream capture, both event shapes, keys for every
``_id`` type, filters, field controls, skipped operations, restart from the stored offset.

The stand-in's change stream events for updates are malformed (its documentKey is the update
spec), so updates are captured live in oplog mode; change-stream updates, transactions and
invalidation are replayed from recorded documents in tests/unit/test_mongodb_replay.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pymongo
import pytest
from bson import Binary, Int64, ObjectId

from cdc.engine import Engine, EngineSettings
from cdc.offsets.memory import MemoryOffsetStore
from cdc.offsets.store import OffsetStore
from cdc.testing.kafka_reader import read_topic
from connectors.mongodb import MongoDbConnector
from tests.integration.engine_runner import RunningConnector, running, start_engine, wait_streaming

pytestmark = [pytest.mark.mongodb, pytest.mark.kafka]

Client = pymongo.MongoClient[dict[str, Any]]


@pytest.fixture(scope="module")
def client(mongodb: str) -> Iterator[Client]:
    c: Client = pymongo.MongoClient(mongodb)
    yield c
    c.close()


def config(mongodb: str, coll: str, **overrides: str) -> dict[str, Any]:
    server = "m" + uuid.uuid4().hex[:8]
    port = mongodb.split(":")[2].split("/")[0]
    cfg = {
        "name": server,
        "connector.class": "io.debezium.connector.mongodb.MongoDbConnector",
        "mongodb.name": server,
        "mongodb.hosts": f"rs0/127.0.0.1:{port}",
        "mongodb.members.auto.discover": "false",
        "collection.include.list": coll,
        "capture.mode": "oplog",
    }
    cfg.update(overrides)
    return cfg


def start_task(cfg: dict[str, Any], kafka: str, store: OffsetStore) -> RunningConnector:
    """The connector task in a thread of this process (the engine a worker runs)."""
    connector = MongoDbConnector(cfg)
    engine = Engine(
        connector,
        connector.config,
        store,
        EngineSettings(producer={"bootstrap.servers": kafka}, offset_flush_interval_ms=200),
    )
    return start_engine(engine, connector)


@contextmanager
def run(cfg: dict[str, Any], kafka: str, store: OffsetStore) -> Iterator[RunningConnector]:
    with running(lambda: start_task(cfg, kafka, store)) as r:
        wait_streaming(r)
        yield r


def topic(cfg: dict[str, Any], coll: str) -> str:
    return f"{cfg['mongodb.name']}.{coll}"


def doc(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


def new_db(client: Client) -> pymongo.database.Database[dict[str, Any]]:
    return client[f"mdb_{uuid.uuid4().hex[:8]}"]


def test_snapshot_then_oplog_stream_in_the_seed_shape(
    mongodb: str, kafka: str, client: Client
) -> None:
    db = new_db(client)
    db.customers.insert_one({"_id": 1004, "first_name": "Anne", "nested": {"a": 1}})
    cfg = config(mongodb, f"{db.name}.customers")
    with run(cfg, kafka, MemoryOffsetStore()):
        db.customers.insert_one({"_id": 1005, "first_name": "Bob"})
        db.customers.update_one({"_id": 1005}, {"$set": {"first_name": "Bobby"}})
        db.customers.delete_one({"_id": 1004})
        events = read_topic(kafka, topic(cfg, f"{db.name}.customers"), min_count=5)
    assert [(e.op, e.key) for e in events] == [
        ("r", {"id": "1004"}),
        ("c", {"id": "1005"}),
        ("u", {"id": "1005"}),
        ("d", {"id": "1004"}),
        (None, {"id": "1004"}),
    ]
    r, c, u, d, _ = events
    assert doc(r.value["after"]) == {"_id": 1004, "first_name": "Anne", "nested": {"a": 1}}
    assert r.value["source"]["snapshot"] is True and r.value["patch"] is None
    assert doc(c.value["after"]) == {"_id": 1005, "first_name": "Bob"}
    assert doc(u.value["patch"]) == {"$set": {"first_name": "Bobby"}}
    assert doc(u.value["filter"]) == {"_id": 1005} and u.value["after"] is None
    assert doc(d.value["filter"]) == {"_id": 1004} and d.value["after"] is None
    assert "before" not in c.value
    src = c.value["source"]
    assert (src["connector"], src["rs"], src["db"], src["collection"]) == (
        "mongodb",
        "rs0",
        db.name,
        "customers",
    )
    assert src["snapshot"] is False and src["ts_ms"] % 1000 == 0 and src["ord"] > 0


def test_keys_for_every_id_type(mongodb: str, kafka: str, client: Client) -> None:
    db = new_db(client)
    oid = ObjectId("596e275826f08b2730779e1f")
    ids: list[Any] = [
        1234,
        Int64(1004),
        12.34,
        "1234",
        {"hi": "kafka", "nums": [10.0, 100.0, 1000.0]},
        oid,
        Binary(b"kafka", 0),
        Binary(uuid.UUID("00112233-4455-6677-8899-aabbccddeeff").bytes, 4),
    ]
    cfg = config(mongodb, f"{db.name}.ids")
    with run(cfg, kafka, MemoryOffsetStore()):
        for i in ids:
            db.ids.insert_one({"_id": i})
        events = read_topic(kafka, topic(cfg, f"{db.name}.ids"), min_count=len(ids))
    assert [e.key["id"] for e in events] == [
        "1234",
        '{"$numberLong" : "1004"}',
        "12.34",
        '"1234"',
        '{"hi" : "kafka", "nums" : [10.0, 100.0, 1000.0]}',
        '{"$oid" : "596e275826f08b2730779e1f"}',
        '{"$binary" : "a2Fma2E=", "$type" : "00"}',
        '{"$binary" : "ABEiM0RVZneImaq7zN3u/w==", "$type" : "04"}',
    ]


def test_filters_fields_and_skipped_operations(mongodb: str, kafka: str, client: Client) -> None:
    db = new_db(client)
    cfg = config(
        mongodb,
        f"{db.name}.kept",
        **{
            "field.exclude.list": f"{db.name}.kept.secret,*.*.nested.hidden",
            "field.renames": f"{db.name}.kept.nested.old:new",
            "skipped.operations": "d",
            "heartbeat.interval.ms": "100",
        },
    )
    with run(cfg, kafka, MemoryOffsetStore()):
        db.other.insert_one({"_id": 1})  # not in collection.include.list
        db.kept.insert_one(
            {"_id": 1, "secret": "x", "nested": {"old": 1, "hidden": 2, "keep": 3}, "v": 0}
        )
        db.kept.update_one({"_id": 1}, {"$set": {"nested.old": 5, "secret": "y", "v": 1}})
        db.kept.delete_one({"_id": 1})
        db.kept.insert_one({"_id": 2})
        events = read_topic(kafka, topic(cfg, f"{db.name}.kept"), min_count=3)
    assert [(e.op, e.key["id"]) for e in events] == [("c", "1"), ("u", "1"), ("c", "2")]
    assert doc(events[0].value["after"]) == {"_id": 1, "nested": {"new": 1, "keep": 3}, "v": 0}
    assert doc(events[1].value["patch"]) == {"$set": {"nested.new": 5, "v": 1}}
    assert read_topic(kafka, topic(cfg, f"{db.name}.other"), timeout=2) == []
    beats = read_topic(kafka, f"__debezium-heartbeat.{cfg['mongodb.name']}", min_count=1)
    assert beats and beats[-1].key == {"serverName": cfg["mongodb.name"]}


def test_change_streams_current_shape_and_restart(mongodb: str, kafka: str, client: Client) -> None:
    """Change streams (the default capture mode) in the current Debezium shape; a graceful
    restart resumes after the last event: what was written while stopped arrives once."""
    db = new_db(client)
    coll = f"{db.name}.orders"
    db.orders.insert_one({"_id": 1, "item": "a"})
    cfg = config(mongodb, coll, **{"capture.mode": "change_streams", "envelope.version": "3"})
    store = MemoryOffsetStore()
    with run(cfg, kafka, store):
        db.orders.insert_one({"_id": 2, "item": "b"})
        read_topic(kafka, topic(cfg, coll), min_count=2)
    db.orders.insert_one({"_id": 3, "item": "c"})  # while stopped
    with run(cfg, kafka, store):
        db.orders.delete_one({"_id": 1})
        events = read_topic(kafka, topic(cfg, coll), min_count=5)
    assert [(e.op, e.key["id"]) for e in events] == [
        ("r", "1"),
        ("c", "2"),
        ("c", "3"),
        ("d", "1"),
        (None, "1"),
    ]
    c = events[1].value
    assert doc(c["after"]) == {"_id": 2, "item": "b"}
    assert c["before"] is None and c["updateDescription"] is None
    assert c["source"]["snapshot"] == "false" and "ts_us" in c
    assert events[3].value["after"] is None


def test_unreachable_server_fails_after_connect_max_attempts(kafka: str) -> None:
    """The seed's retry schedule, shortened: delays double from the initial delay and the
    task fails after connect.max.attempts attempts, naming them."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    cfg = config(
        f"mongodb://127.0.0.1:{port}/",
        "shop.orders",
        **{
            "capture.mode": "change_streams",
            "snapshot.mode": "never",
            "connect.backoff.initial.delay.ms": "10",
            "connect.backoff.max.delay.ms": "40",
            "connect.max.attempts": "3",
            "mongodb.server.selection.timeout.ms": "100",
        },
    )
    r = start_task(cfg, kafka, MemoryOffsetStore())
    r.thread.join(60)
    assert not r.thread.is_alive(), "the task should have failed"
    assert r.errors, "the task should have failed with an error"
    text = str(r.errors[0])
    assert "3 reconnection attempts failed" in text and "connect.max.attempts=3" in text


def test_oplog_graceful_restart_resumes_exactly(mongodb: str, kafka: str, client: Client) -> None:
    db = new_db(client)
    coll = f"{db.name}.items"
    cfg = config(mongodb, coll)
    store = MemoryOffsetStore()
    with run(cfg, kafka, store):
        db.items.insert_one({"_id": 1})
        db.items.update_one({"_id": 1}, {"$set": {"v": 1}})
        read_topic(kafka, topic(cfg, coll), min_count=2)
    db.items.update_one({"_id": 1}, {"$set": {"v": 2}})  # while stopped
    db.items.insert_one({"_id": 2})
    with run(cfg, kafka, store):
        db.items.delete_one({"_id": 2})
        events = read_topic(kafka, topic(cfg, coll), min_count=6)
    assert [(e.op, e.key["id"]) for e in events] == [
        ("c", "1"),
        ("u", "1"),
        ("u", "1"),
        ("c", "2"),
        ("d", "2"),
        (None, "2"),
    ]
    assert [doc(e.value["patch"]) for e in events[1:3]] == [{"$set": {"v": 1}}, {"$set": {"v": 2}}]


def test_skipped_operations_in_the_seeds_spelling(mongodb: str, kafka: str, client: Client) -> None:
    """The seed's 1.2 list names inserts ``i`` (oplog operation codes): ``i,d`` skips inserts
    and deletes, updates still arrive."""
    db = new_db(client)
    cfg = config(mongodb, f"{db.name}.c", **{"skipped.operations": "i,d"})
    with run(cfg, kafka, MemoryOffsetStore()):
        db.c.insert_one({"_id": 1, "v": 0})
        db.c.update_one({"_id": 1}, {"$set": {"v": 1}})
        db.c.delete_one({"_id": 1})
        db.c.update_one({"_id": 9}, {"$set": {"v": 9}})  # matches nothing: no event
        events = read_topic(kafka, topic(cfg, f"{db.name}.c"), min_count=1)
    assert [(e.op, e.key["id"]) for e in events] == [("u", "1")]
