"""Change streams live against the second stand-in, nx-27017, through Kafka: update events
(which mongo-java-server cannot produce) with the document after the update
(``change_streams_update_full``), the snapshot position from the server's
``postBatchResumeToken``, and a graceful restart resuming at the stored resume token.

nx-27017 turns integer ``_id``s into strings in ``documentKey``, so these tests use string
``_id``s; it has no ``updateDescription``, so the update is checked by its ``after``."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import pymongo
import pytest

from cdc.offsets.memory import MemoryOffsetStore
from cdc.testing.kafka_reader import read_topic
from tests.integration.test_mongodb_connector import config, run

pytestmark = [pytest.mark.mongodb, pytest.mark.kafka]


def test_update_full_events_and_restart_at_the_resume_token(mongonx: str, kafka: str) -> None:
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(mongonx)
    db = client[f"mnx_{uuid.uuid4().hex[:8]}"]
    coll = f"{db.name}.carts"
    db.carts.insert_one({"_id": "c1", "items": 1})
    cfg = config(
        mongonx,
        coll,
        **{"capture.mode": "change_streams_update_full", "envelope.version": "3"},
    )
    store = MemoryOffsetStore()
    with run(cfg, kafka, store):
        db.carts.insert_one({"_id": "c2", "items": 0})
        db.carts.update_one({"_id": "c2"}, {"$set": {"items": 5}})
        read_topic(kafka, f"{cfg['mongodb.name']}.{coll}", min_count=3)
    db.carts.delete_one({"_id": "c1"})  # while stopped
    with run(cfg, kafka, store):
        db.carts.replace_one({"_id": "c2"}, {"items": 9})
        events = read_topic(kafka, f"{cfg['mongodb.name']}.{coll}", min_count=6)
    client.close()
    assert [(e.op, e.key["id"]) for e in events] == [
        ("r", '"c1"'),
        ("c", '"c2"'),
        ("u", '"c2"'),
        ("d", '"c1"'),
        (None, '"c1"'),
        ("u", '"c2"'),
    ]
    update, replace = events[2].value, events[5].value
    assert orjson.loads(update["after"]) == {"_id": "c2", "items": 5}
    assert orjson.loads(replace["after"]) == {"_id": "c2", "items": 9}
    assert update["source"]["ts_ms"] > 1_600_000_000_000  # its clusterTime, a date here
    stored = store.all(cfg["name"])[0][1]
    assert stored["resume_token"].startswith("nx:")
