"""The MongoDB stand-in of `tidemark dev` starts and shows what the connector relies on: the
wire protocol through pymongo, every ``_id`` type the seed's key table lists, and an oplog
with insert/update/delete entries in order."""

from __future__ import annotations

import uuid

import pymongo
import pytest
from bson import Binary, Int64, ObjectId

pytestmark = pytest.mark.mongodb


def test_standin_serves_ids_and_oplog(mongodb: str) -> None:
    client: pymongo.MongoClient[dict[str, object]] = pymongo.MongoClient(mongodb)
    db = client[f"standin_{uuid.uuid4().hex[:8]}"]
    ids = [1234, Int64(2**40), 12.34, "1234", {"hi": "kafka"}, ObjectId(), Binary(b"kafka", 0)]
    for i in ids:
        db.c.insert_one({"_id": i, "v": 1})
    db.c.update_one({"_id": 1234}, {"$set": {"v": 2}})
    db.c.delete_one({"_id": "1234"})
    assert [d["_id"] for d in db.c.find({"_id": {"$in": [1234, ids[5]]}})] == [1234, ids[5]]
    ns = f"{db.name}.c"
    ops = [(e["op"], e.get("o2", e["o"])["_id"]) for e in client.local["oplog.rs"].find({"ns": ns})]
    # pymongo hands binary subtype 0 back as bytes
    expected_ids = [*ids[:-1], b"kafka"]
    assert ops == [*(("i", i) for i in expected_ids), ("u", 1234), ("d", "1234")]
    client.close()
