"""MongoDB snapshots live against the stand-in through Kafka: several collections copied in
parallel while documents change (nothing lost: the position is read before the copy), the
three snapshot modes, and a stored position the oplog no longer holds."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import orjson
import pymongo
import pytest

from cdc.offsets.memory import MemoryOffsetStore
from cdc.testing.kafka_reader import read_topic
from tests.integration.test_mongodb_connector import config, run, start_task

pytestmark = [pytest.mark.mongodb, pytest.mark.kafka]


def last_per_key(events: list[Any]) -> dict[str, Any]:
    """What a consumer of inserts/deletes keeps: the last document per key."""
    state: dict[str, Any] = {}
    for e in events:
        if e.value is None or e.op == "d":
            state.pop(e.key["id"], None)
        elif e.op in ("r", "c"):
            state[e.key["id"]] = orjson.loads(e.value["after"])
    return state


def test_parallel_snapshot_under_writes_loses_nothing(mongodb: str, kafka: str) -> None:
    """AC-36 (snapshot.max.threads)."""
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(mongodb)
    db = client[f"msnap_{uuid.uuid4().hex[:8]}"]
    names = ["a", "b", "c"]
    for n in names:
        db[n].insert_many([{"_id": i, "n": n} for i in range(500)])
    cfg = config(
        mongodb,
        rf"{db.name}\..*",
        **{"snapshot.max.threads": "3", "snapshot.fetch.size": "50"},
    )
    stop = threading.Event()

    def writer() -> None:  # inserts and deletes only: the fold below needs no patches
        i = 1000
        while not stop.is_set():
            db[names[i % 3]].insert_one({"_id": i, "n": "new"})
            db[names[(i + 1) % 3]].delete_one({"_id": i % 500})
            i += 1

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        with run(cfg, kafka, MemoryOffsetStore()):
            time.sleep(1.0)
            stop.set()
            thread.join(10)
            expected = {n: {str(d["_id"]): d for d in db[n].find({})} for n in names}
            got = {}
            for n in names:
                events = read_topic(
                    kafka, f"{cfg['mongodb.name']}.{db.name}.{n}", min_count=len(expected[n])
                )
                assert any(e.op == "r" and e.value["source"]["snapshot"] for e in events)
                got[n] = last_per_key(events)
    finally:
        stop.set()
        client.close()
    assert got == expected


def test_snapshot_modes(mongodb: str, kafka: str) -> None:
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(mongodb)
    db = client[f"mmode_{uuid.uuid4().hex[:8]}"]
    db.c.insert_many([{"_id": 1}, {"_id": 2}])
    coll = f"{db.name}.c"
    # never: only what is written after the start
    cfg = config(mongodb, coll, **{"snapshot.mode": "never"})
    with run(cfg, kafka, MemoryOffsetStore()):
        db.c.insert_one({"_id": 3})
        events = read_topic(kafka, f"{cfg['mongodb.name']}.{coll}", min_count=1)
    assert [(e.op, e.key["id"]) for e in events] == [("c", "3")]
    # initial_only: the copy, then the task ends without streaming
    cfg = config(mongodb, coll, **{"snapshot.mode": "initial_only"})
    r = start_task(cfg, kafka, MemoryOffsetStore())
    r.thread.join(30)
    assert not r.thread.is_alive() and not r.errors
    db.c.insert_one({"_id": 4})
    events = read_topic(kafka, f"{cfg['mongodb.name']}.{coll}", min_count=3)
    assert sorted((e.op, e.key["id"]) for e in events) == [("r", "1"), ("r", "2"), ("r", "3")]
    client.close()


def test_position_gone_from_the_oplog(mongodb: str, kafka: str) -> None:
    """initial: a new snapshot; never: the task fails naming the position."""
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(mongodb)
    db = client[f"mlost_{uuid.uuid4().hex[:8]}"]
    db.c.insert_one({"_id": 1})
    coll = f"{db.name}.c"
    gone = {"sec": 1, "ord": 1, "h": 0}
    cfg = config(mongodb, coll)
    store = MemoryOffsetStore()
    store.put_many([(cfg["name"], {"server_id": cfg["mongodb.name"], "rs": "rs0"}, gone)])
    with run(cfg, kafka, store):
        events = read_topic(kafka, f"{cfg['mongodb.name']}.{coll}", min_count=1)
    assert [(e.op, e.key["id"]) for e in events] == [("r", "1")]

    cfg = config(mongodb, coll, **{"snapshot.mode": "never"})
    store = MemoryOffsetStore()
    store.put_many([(cfg["name"], {"server_id": cfg["mongodb.name"], "rs": "rs0"}, gone)])
    r = start_task(cfg, kafka, store)
    r.thread.join(30)
    assert r.errors, "streaming from a lost position must fail"
    assert "{'sec': 1, 'ord': 1" in str(r.errors[0]) and "no longer in the oplog" in str(
        r.errors[0]
    )
    client.close()


def test_snapshot_include_collection_list_copies_a_subset(mongodb: str, kafka: str) -> None:
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(mongodb)
    db = client[f"msub_{uuid.uuid4().hex[:8]}"]
    db.copied.insert_one({"_id": 1})
    db.streamed.insert_one({"_id": 1})
    cfg = config(
        mongodb,
        rf"{db.name}\..*",
        **{"snapshot.include.collection.list": rf"{db.name}\.copied"},
    )
    with run(cfg, kafka, MemoryOffsetStore()):
        db.streamed.insert_one({"_id": 2})
        prefix = f"{cfg['mongodb.name']}.{db.name}"
        copied = read_topic(kafka, f"{prefix}.copied", min_count=1)
        streamed = read_topic(kafka, f"{prefix}.streamed", min_count=1)
    client.close()
    assert [(e.op, e.key["id"]) for e in copied] == [("r", "1")]
    assert [(e.op, e.key["id"]) for e in streamed] == [("c", "2")]


def test_snapshot_collection_filter_overrides(mongodb: str, kafka: str) -> None:
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(mongodb)
    db = client[f"mflt_{uuid.uuid4().hex[:8]}"]
    db.orders.insert_many([{"_id": 1, "open": True}, {"_id": 2, "open": False}])
    coll = f"{db.name}.orders"
    cfg = config(
        mongodb,
        coll,
        **{
            "snapshot.collection.filter.overrides": coll,
            f"snapshot.collection.filter.overrides.{coll}": '{"open": true}',
        },
    )
    with run(cfg, kafka, MemoryOffsetStore()):
        db.orders.insert_one({"_id": 3, "open": False})  # streamed whatever the filter
        events = read_topic(kafka, f"{cfg['mongodb.name']}.{coll}", min_count=2)
    client.close()
    assert [(e.op, e.key["id"]) for e in events] == [("r", "1"), ("c", "3")]
