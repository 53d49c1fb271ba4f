"""A MongoDB initial snapshot SIGKILLed in the middle resumes after the last batch Kafka
acknowledged (issue 16), on the mongo-java-server stand-in in oplog mode (nx-27017 streams
changes of one collection only: a database or cluster change stream over the two collections
here delivers nothing on it, so the replay this test needs cannot run there).

The scenario of ``test_snapshot_resume``: the child holds the snapshot after two batches of
the second collection (``hold_after_snapshot_rows``), documents are changed on both sides of
the stored ``_id`` and in the collection copied whole while the task is down, and the restart
must skip that collection, copy the rest after the stored ``_id`` (at most one batch again)
and end with the last event of every ``_id`` equal to the document. The big collection's
``_id`` are ObjectIds inserted in reverse order: the stored key is ``{"$oid": ...}`` and the
copy is in ``_id`` order, not the natural one.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymongo
import pytest
from bson import ObjectId

from cdc.offsets.file import decode
from cdc.testing.kafka_reader import read_topic
from connectors.mongodb.extjson import key_id
from connectors.mongodb.snapshot import one_id_class
from tests.integration.test_engine_crash import finish, start
from tests.integration.test_mongodb_connector import config
from tests.integration.test_mongodb_kill import fold
from tests.integration.test_snapshot_resume import alive

pytestmark = [pytest.mark.mongodb, pytest.mark.kafka]

ROWS, BATCH, SMALL = 3000, 1024, 300  # BATCH: the snapshot's batches of rows
HALF = BATCH // 2
HOLD = SMALL + 2 * BATCH + HALF  # held half-way through batch 3 of the big collection


@pytest.fixture
def db(mongodb: str) -> Iterator[Any]:
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(mongodb)
    name = f"mresume_{uuid.uuid4().hex[:8]}"
    yield client[name]
    client.drop_database(name)
    client.close()


def stored(offsets: Path, server: str) -> dict[str, Any]:
    if not offsets.exists():
        return {}
    return decode(offsets.read_bytes()).get(server, {"server_id": server, "rs": "rs0"}) or {}


def state(kafka: str, topic: str) -> tuple[list[Any], dict[str, Any]]:
    """The topic's events and each _id's last value of ``v`` (deleted: absent)."""
    events = read_topic(kafka, topic, timeout=10, settle=0.3)
    return events, {k: doc.get("v") for k, doc in fold(events).items()}


def test_mongodb_snapshot_resumes_after_the_stored_id(
    db: Any, mongodb: str, kafka: str, tmp_path: Path
) -> None:
    ids = [ObjectId() for _ in range(ROWS + 1)]  # increasing; the last is inserted later
    db.a_small.insert_many([{"_id": i, "v": f"v{i}"} for i in range(SMALL, 0, -1)])
    db.b_big.insert_many([{"_id": ids[i], "v": f"v{i}"} for i in range(ROWS - 1, -1, -1)])
    cfg = config(
        mongodb,
        f"{db.name}.a_small,{db.name}.b_big",
        **{
            "capture.mode": "oplog",
            "mongodb.oplog.poll.interval.ms": "50",
            "tombstones.on.delete": "false",
            "snapshot.resumable.chunk.size": str(BATCH),  # a chunk per batch
        },
    )
    server = cfg["name"]
    offsets, spec = tmp_path / "offsets.json", tmp_path / "spec.json"
    doc = {"kind": "mongodb", "bootstrap": kafka, "offsets": {"file": str(offsets)}}
    spec.write_text(
        # a minute's offset flush interval: only the chunk gate stores offsets before the kill
        json.dumps({**doc, "config": cfg, "flush_ms": 60_000, "hold_after_snapshot_rows": HOLD})
    )
    small_topic, big_topic = f"{server}.{db.name}.a_small", f"{server}.{db.name}.b_big"
    proc = start(spec)
    try:
        deadline = time.monotonic() + 60
        want_after = [{"$oid": str(ids[2 * BATCH - 1])}]  # batch 2's last row, stored
        while stored(offsets, server).get("snapshot_after") != want_after:
            alive(proc)
            assert time.monotonic() < deadline, f"stored offset {stored(offsets, server)}"
            time.sleep(0.05)
        # and half of batch 3 is in Kafka, its offsets not stored
        while len(read_topic(kafka, big_topic, timeout=10, settle=0.1)) < HOLD - SMALL:
            alive(proc)
            assert time.monotonic() < deadline, "half of batch 3 never reached the topic"
    finally:
        proc.kill()  # SIGKILL
        proc.communicate()
    resume = stored(offsets, server)
    assert resume["snapshot_done"] == [f"{db.name}.a_small"]
    assert resume["snapshot_table"] == f"{db.name}.b_big"
    first = read_topic(kafka, big_topic, timeout=10, settle=0.3)
    assert [e.key["id"] for e in first[:BATCH]] == [key_id(i) for i in ids[:BATCH]]  # _id order
    db.a_small.update_one({"_id": 7}, {"$set": {"v": "small, updated"}})
    db.a_small.delete_one({"_id": 8})
    db.a_small.insert_one({"_id": 100000, "v": "small, new"})
    db.b_big.update_one({"_id": ids[10]}, {"$set": {"v": "done, updated"}})
    db.b_big.delete_one({"_id": ids[11]})
    db.b_big.update_one({"_id": ids[2 * BATCH + 5]}, {"$set": {"v": "left, updated"}})
    db.b_big.delete_one({"_id": ids[2 * BATCH + 6]})
    db.b_big.insert_one({"_id": ids[ROWS], "v": "new"})
    want_small = {key_id(d["_id"]): d["v"] for d in db.a_small.find({})}
    want_big = {key_id(d["_id"]): d["v"] for d in db.b_big.find({})}
    small_before = len(read_topic(kafka, small_topic, timeout=10, settle=0.3))
    spec.write_text(json.dumps({**doc, "config": cfg, "flush_ms": 50}))
    proc = start(spec)
    try:
        deadline = time.monotonic() + 60
        while (got := (state(kafka, big_topic)[1], state(kafka, small_topic)[1])) != (
            want_big,
            want_small,
        ):
            alive(proc)
            assert time.monotonic() < deadline, differences(got, (want_big, want_small))
    finally:
        finish(proc)
    big_events, got_big = state(kafka, big_topic)
    small_events, got_small = state(kafka, small_topic)
    assert (got_big, got_small) == (want_big, want_small)
    # the collection copied whole is not copied again: only its changes are streamed
    assert [e.op for e in small_events[small_before:]] == ["u", "d", "c"]
    # the big one resumed after the last stored chunk: the half chunk sent after it is read
    # again, nothing before
    again = [e.key["id"] for e in big_events[len(first) :] if e.op == "r"]
    assert again[0] == key_id(ids[2 * BATCH])
    reads = Counter(e.key["id"] for e in big_events if e.op == "r")
    # (but for ids[2 * BATCH + 6], sent in that half and deleted before the restart)
    assert sum(n - 1 for n in reads.values()) == HALF - 1
    gone = {key_id(ids[11]), key_id(ids[2 * BATCH + 6])}
    assert set(reads) >= {key_id(i) for i in ids[:ROWS]} - gone


def differences(got: tuple[dict[str, Any], ...], want: tuple[dict[str, Any], ...]) -> str:
    """What the topics got wrong, per collection: missing, extra and wrong ``_id``."""
    out = []
    for g, w in zip(got, want, strict=True):
        wrong = sorted(k for k in g.keys() & w.keys() if g[k] != w[k])
        missing, extra = sorted(w.keys() - g.keys())[:5], sorted(g.keys() - w.keys())[:5]
        out.append(f"missing {missing} extra {extra} wrong {[(k, g[k], w[k]) for k in wrong[:5]]}")
    return "; ".join(out)


def test_ids_of_several_types_make_the_collection_read_whole(db: Any) -> None:
    """``$gt`` after an integer would never return string ``_id``s (BSON sorts them after
    every number): such a collection is read whole again instead of resumed."""
    db.mixed.insert_many([{"_id": 1}, {"_id": 2}, {"_id": "a"}])
    db.ints.insert_many([{"_id": 1}, {"_id": 2.5}])
    assert not one_id_class(db.mixed, [1])
    assert not one_id_class(db.mixed, ["a"])
    assert one_id_class(db.ints, [1])
