"""End to end: tidemark's MongoDB connector captures a collection on the stand-in
(mongo-java-server, oplog mode: its updates are live ``$set``/``$unset`` patches) into Kafka, in
both event shapes; the apply job merges inserts, patches (top-level and dotted nested
``$set``, ``$unset``) and deletes into Delta; the table then equals the collection.

Two apply runs: the first sees the snapshot and inserts with patches in the same micro-batch
(the fold applies them), the second only patches and deletes (the driver applies them to the
stored documents). Change-stream updates carrying the whole document run live on the second
stand-in (nx-27017). Change-stream ``updateDescription`` (with ``truncatedArrays``) is replayed
from a recorded stream through the connector; ``$v: 2`` diffs are covered by
tests/unit/test_apply_documents.py.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson
import pymongo
import pytest

from cdc.apply.job import ApplyError, ApplyJob
from cdc.offsets.memory import MemoryOffsetStore
from cdc.testing.kafka_reader import read_topic
from tests.integration.test_apply_acceptance import job_config
from tests.integration.test_mongodb_connector import Client, config, new_db, run, topic

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.mongodb]


@pytest.fixture(scope="module")
def client(mongodb: str) -> Any:
    c: Client = pymongo.MongoClient(mongodb)
    yield c
    c.close()


def lake(spark: Any, job: ApplyJob, table: str) -> dict[str, Any]:
    df = spark.read.format("delta").load(job.cfg.table_location(table))
    return {r["id"]: orjson.loads(r["document"]) for r in df.collect()}


def collection(coll: Any) -> dict[str, Any]:
    return {str(d["_id"]): d for d in coll.find()}


@pytest.mark.parametrize("shape", ["1.2", "3"])
def test_inserts_patches_and_deletes_apply_into_delta(
    spark: Any, mongodb: str, kafka: str, client: Client, tmp_path: Path, shape: str
) -> None:
    db = new_db(client)
    orders = db.orders
    orders.insert_many(
        [
            {"_id": 1, "item": "a", "qty": 1, "ship": {"city": "Oslo", "zip": "0150"}},
            {"_id": 2, "item": "b", "qty": 2, "note": "fragile"},
            {"_id": 3, "item": "c", "qty": 3},
        ]
    )
    cfg = config(mongodb, f"{db.name}.orders", **{"envelope.version": shape})
    name = topic(cfg, f"{db.name}.orders")
    table = name.replace(".", "_")
    job = ApplyJob(spark, job_config(kafka, tmp_path, [name]))
    with run(cfg, kafka, MemoryOffsetStore()):
        # batch 1: snapshot, then an insert patched twice before the job reads it
        orders.insert_one({"_id": 4, "item": "d", "qty": 4, "tags": ["x"]})
        orders.update_one({"_id": 4}, {"$set": {"qty": 40, "ship.city": "Bergen"}})
        orders.update_one({"_id": 4}, {"$unset": {"tags": ""}})
        events = read_topic(kafka, name, min_count=6)
        updates = [e for e in events if e.op == "u"]
        if shape == "1.2":
            assert all(e.value["patch"] and e.value["after"] is None for e in updates)
        else:
            assert all(e.value["updateDescription"] and e.value["after"] is None for e in updates)
        job.run(timeout=240)
        assert lake(spark, job, table) == collection(orders)

        # batch 2: patches of stored documents only, a delete, a new document
        orders.update_one({"_id": 1}, {"$set": {"ship.city": "Trondheim", "qty": 10}})
        orders.update_one({"_id": 1}, {"$set": {"gift": {"wrap": True}}})
        orders.update_one({"_id": 2}, {"$unset": {"note": ""}, "$set": {"item": "B"}})
        orders.delete_one({"_id": 3})
        orders.insert_one({"_id": 5, "item": "e", "qty": 5})
        read_topic(kafka, name, min_count=len(events) + 6)
        job.run(timeout=240)
    reports = job.reports
    assert lake(spark, job, table) == collection(orders)
    assert set(lake(spark, job, table)) == {"1", "2", "4", "5"}
    assert reports[-1].totals.deleted == 1


def test_replayed_update_descriptions_apply_into_delta(
    spark: Any, kafka: str, tmp_path: Path
) -> None:
    """What the stand-in cannot send: change-stream updates without ``fullDocument``
    (``updateDescription`` with dotted ``updatedFields``, ``removedFields`` and
    ``truncatedArrays``) and a replace, recorded (tests/fixtures/mongodb/apply_updates.json),
    replayed through the connector's live change-stream path, produced to Kafka and applied."""
    from confluent_kafka import Producer

    from tests.unit.test_mongodb_replay import replay

    records, _ = replay("apply_updates.json", **{"envelope.version": "3"})
    name = f"srv{uuid.uuid4().hex[:8]}.hr.people"
    job = ApplyJob(spark, job_config(kafka, tmp_path, [name]))
    producer = Producer({"bootstrap.servers": kafka})

    def produce(part: list[dict[str, Any]]) -> None:
        for r in part:
            value = None if r["value"] is None else orjson.dumps(r["value"])
            producer.produce(name, key=orjson.dumps(r["key"]), value=value)
        producer.flush(30)

    data = [r for r in records if r["topic"] == "srv.hr.people"]
    assert [r["value"] and r["value"]["op"] for r in data] == [
        "c", "u", "c", "d", None, "c", "u", "u"
    ]  # fmt: skip
    produce(data[:6])
    job.run(timeout=240)
    table = name.replace(".", "_")
    assert lake(spark, job, table) == {
        "1": {
            "_id": 1,
            "name": "alice",
            "email": "alice@10gen.com",
            "address": {"city": "Bergen", "zip": "0150"},
            "vacation": [1, 20],
            "profile": {"age": 30},
        },
        "3": {"_id": 3, "v": 1},
    }
    produce(data[6:])
    job.run(timeout=240)
    assert lake(spark, job, table) == {
        "1": {
            "_id": 1,
            "name": "alice",
            "email": "alice@10gen.com",
            "address": {"city": "Bergen"},
            "vacation": [1, 20],
            "profile": {"age": 31},
            "tags": ["a", "b"],
        },
        "3": {"_id": 3, "v": 2, "w": True},
    }
    # a patch for a document the table never held cannot be applied: the batch fails naming it
    produce([{**data[6], "key": {"id": "9"}}])
    with pytest.raises(ApplyError, match=r'\[0\]@8: update of the MongoDB document \{"id":"9"\}'):
        job.run(timeout=240)


def test_change_stream_updates_with_the_whole_document_apply_into_delta(
    spark: Any, mongonx: str, kafka: str, tmp_path: Path
) -> None:
    """Change streams live on the second stand-in (nx-27017, ``change_streams_update_full``:
    updates and replaces carry the whole document, stored as it is)."""
    nx: Client = pymongo.MongoClient(mongonx)
    db = new_db(nx)
    db.carts.insert_one({"_id": "c1", "items": 1, "owner": {"name": "ann"}})
    cfg = config(
        mongonx,
        f"{db.name}.carts",
        **{"capture.mode": "change_streams_update_full", "envelope.version": "3"},
    )
    name = topic(cfg, f"{db.name}.carts")
    job = ApplyJob(spark, job_config(kafka, tmp_path, [name]))
    with run(cfg, kafka, MemoryOffsetStore()):
        db.carts.insert_one({"_id": "c2", "items": 0})
        db.carts.update_one({"_id": "c1"}, {"$set": {"owner.name": "bo"}, "$unset": {"items": 1}})
        db.carts.replace_one({"_id": "c2"}, {"items": 9, "note": "x"})
        db.carts.insert_one({"_id": "c3", "items": 3})
        db.carts.delete_one({"_id": "c3"})
        read_topic(kafka, name, min_count=7)
    job.run(timeout=240)
    stored = lake(spark, job, name.replace(".", "_"))
    expected = {f'"{d["_id"]}"': d for d in db.carts.find()}
    nx.close()
    assert (
        stored
        == expected
        == {
            '"c1"': {"_id": "c1", "owner": {"name": "bo"}},
            '"c2"': {"_id": "c2", "items": 9, "note": "x"},
        }
    )
