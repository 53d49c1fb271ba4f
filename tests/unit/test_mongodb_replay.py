"""Change documents the stand-in cannot produce (updateDescription, pre-images, replace,
transactions, drop/invalidate, error 286), written from MongoDB's documentation
(tests/fixtures/mongodb), replayed through the connector's live change-stream path: the same
``ChangeStreamStreaming`` loop with a recorded cursor in place of the server's, into the real
dispatcher and JSON converter (what a consumer reads)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from bson import json_util
from pymongo.errors import OperationFailure

from cdc.converters import converter_from_config
from cdc.errors import FatalError
from cdc.filters import TableFilter
from cdc.metrics import TaskMetrics
from cdc.pipeline.dispatcher import EventDispatcher
from cdc.pipeline.failures import FailureHandler
from cdc.pipeline.queue import ChangeEventQueue
from cdc.record import SourceRecord
from cdc.schema.table_schema import TableSchemaBuilder
from cdc.topics import TopicNamer
from connectors.mongodb import MongoDbConnector
from connectors.mongodb.streaming import ChangeStreamStreaming

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mongodb"


def connector(**overrides: str) -> MongoDbConnector:
    cfg = {"name": "m", "mongodb.name": "srv", "mongodb.hosts": "rs0/127.0.0.1:1", **overrides}
    return MongoDbConnector(cfg)


def dispatcher_for(
    conn: MongoDbConnector, tx: bool
) -> tuple[EventDispatcher, ChangeEventQueue[SourceRecord]]:
    """The core's dispatcher (the source context of a live run) for this connector."""
    namer = TopicNamer("srv")
    metrics = TaskMetrics("mongodb", "srv", "t")
    queue: ChangeEventQueue[SourceRecord] = ChangeEventQueue(1000, 100, 100)
    ctx = EventDispatcher(
        connector_type="mongodb",
        server_name="srv",
        source_partition=conn.source_partition(),
        source_schema=conn.source_schema(),
        schema_builder=TableSchemaBuilder(conn.value_converters(), namer),
        table_filter=TableFilter(system=conn.system_schemas),
        queue=queue,
        metrics=metrics,
        namer=namer,
        failures=FailureHandler("fail", metrics),
        provide_transaction_metadata=tx,
        envelope_version=str(conn.config.get("envelope.version")),
    )
    return ctx, queue


class Recorded:
    """The fixture's batches, then its error or an empty batch that stops the loop."""

    def __init__(self, name: str, stop: Any) -> None:
        doc = json_util.loads((FIXTURES / name).read_text())
        self.batches: list[list[Mapping[str, Any]]] = list(doc["batches"])
        self.error = doc.get("error")
        self.stop = stop
        self.opened: list[Mapping[str, Any] | None] = []
        self.metrics: dict[str, float] = {}

    def open(self, offset: Mapping[str, Any] | None) -> Recorded:
        self.opened.append(offset)
        return self

    def next_batch(self) -> tuple[Sequence[Mapping[str, Any]], Mapping[str, Any] | None]:
        if self.batches:
            return self.batches.pop(0), None
        if self.error:
            raise OperationFailure(self.error["errmsg"], self.error["code"], self.error)
        self.stop.set()
        return [], None

    def close(self) -> None:
        return None


def replay(
    name: str,
    offset: dict[str, Any] | None = None,
    tx: bool = False,
    cursor_type: type[Recorded] | None = None,
    **cfg: str,
) -> tuple[list[dict[str, Any]], Recorded]:
    conn = connector(**cfg)
    ctx, queue = dispatcher_for(conn, tx)
    cursor = (cursor_type or Recorded)(name, ctx.stop_event)
    conn.__dict__["per_shard"] = False  # a replica set's recorded stream: no shard list to read
    source = conn.streaming_source()
    assert isinstance(source, ChangeStreamStreaming)
    source.opener = cursor.open  # the only difference from a live run
    source.execute(ctx, offset)
    cursor.metrics = {k: f() for k, f in ctx.metrics.extra.items()}
    out = []
    key_conv = converter_from_config({}, is_key=True)
    value_conv = converter_from_config({}, is_key=False)
    for rec in queue.poll(0):
        key = key_conv.from_connect(rec.topic, rec.key_schema, rec.key)
        value = value_conv.from_connect(rec.topic, rec.value_schema, rec.value)
        out.append(
            {
                "topic": rec.topic,
                "key": json.loads(key)["payload"] if key else None,
                "value": json.loads(value)["payload"] if value else None,
                "offset": rec.source_offset,
            }
        )
    return out, cursor


def rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["topic"].startswith("srv.") and r["topic"] != "srv.transaction"]


def test_update_in_the_current_shape_carries_the_update_description_and_images() -> None:
    records, _ = replay(
        "update_description.json",
        **{"envelope.version": "3", "field.exclude.list": "engineering.users.profile.secret"},
    )
    u, rep, d, tomb = rows(records)
    assert u["topic"] == "srv.engineering.users"
    assert u["key"] == {"id": '{"$oid" : "599af247bb69cd89961c986d"}'}
    v = u["value"]
    assert v["op"] == "u"
    assert v["updateDescription"] == {
        "removedFields": ["phoneNumber"],
        "updatedFields": '{"email" : "alice@10gen.com", "address.city" : "Oslo"}',
        "truncatedArrays": [{"field": "vacation_time", "size": 36}],
    }
    assert json.loads(v["after"])["profile"] == {"age": 30}  # secret excluded
    assert json.loads(v["before"])["phoneNumber"] == "555"
    assert v["source"]["ts_ms"] == 1666193824000 and v["source"]["ord"] == 1
    assert v["source"]["wallTime"] == 1666193824604
    assert rep["value"]["op"] == "u" and rep["value"]["updateDescription"] is None
    assert json.loads(rep["value"]["after"]) == {
        "_id": {"$oid": "599af247bb69cd89961c986d"},
        "name": "alice v2",
    }
    assert d["value"]["op"] == "d" and d["value"]["after"] is None
    assert json.loads(d["value"]["before"])["name"] == "alice v2"
    assert tomb["value"] is None and tomb["key"] == u["key"]
    assert d["offset"]["resume_token"] == "82635019A0000000032B042C0100296E5A1004"


def test_update_in_the_seed_shape_is_patch_and_filter() -> None:
    """AC-12."""
    records, _ = replay("update_description.json", **{"field.renames": "*.*.address.city:town"})
    u, rep, d, _ = rows(records)
    assert set(u["value"]) == {"after", "patch", "filter", "source", "op", "ts_ms"}
    assert u["value"]["after"] is None
    assert json.loads(u["value"]["patch"]) == {
        "$set": {"email": "alice@10gen.com", "profile.secret": "s3", "address.town": "Oslo"},
        "$unset": {"phoneNumber": True, "profile.secret": True},
    }
    assert json.loads(u["value"]["filter"]) == {"_id": {"$oid": "599af247bb69cd89961c986d"}}
    assert json.loads(rep["value"]["patch"])["name"] == "alice v2"
    assert d["value"]["patch"] is None and d["value"]["after"] is None
    assert json.loads(d["value"]["filter"]) == {"_id": {"$oid": "599af247bb69cd89961c986d"}}
    src = u["value"]["source"]
    assert (src["rs"], src["db"], src["collection"], src["h"], src["stxnid"]) == (
        "rs0",
        "engineering",
        "users",
        None,
        None,
    )


def test_transaction_events_are_grouped_by_lsid_and_txn_number() -> None:
    records, _ = replay("transaction.json", tx=True)
    tx_topic = [r["value"] for r in records if r["topic"] == "srv.transaction"]
    txid = "dac1e964-8f68-4821-b5be-2f59ab349799:1"
    assert [(t["status"], t["id"]) for t in tx_topic] == [("BEGIN", txid), ("END", txid)]
    assert tx_topic[1]["event_count"] == 2
    # in the order of Debezium's HashMap of counts (tests/integration/test_java_hash_jvm.py)
    assert tx_topic[1]["data_collections"] == [
        {"data_collection": "rs0.shop.stock", "event_count": 1},
        {"data_collection": "rs0.shop.orders", "event_count": 1},
    ]
    data = rows(records)
    assert [(r["topic"], r["key"]["id"]) for r in data] == [
        ("srv.shop.orders", "1"),
        ("srv.shop.stock", "7"),
        ("srv.shop.orders", "2"),
    ]
    assert data[0]["value"]["source"]["stxnid"] == txid
    assert data[0]["value"]["transaction"]["id"] == txid
    assert data[1]["value"]["transaction"] == {
        "id": txid,
        "total_order": 2,
        "data_collection_order": 1,
    }
    assert data[2]["value"]["transaction"] is None
    assert json.loads(data[0]["value"]["after"]) == {"_id": 1, "total": 9.5}


def test_transaction_fields_in_the_current_source_block() -> None:
    records, _ = replay("transaction.json", **{"envelope.version": "3"})
    src = rows(records)[0]["value"]["source"]
    assert src["lsid"] == "dac1e964-8f68-4821-b5be-2f59ab349799" and src["txnNumber"] == 1


def test_invalidate_restarts_the_stream_after_it() -> None:
    records, cursor = replay("invalidate.json")
    assert [r["key"]["id"] for r in rows(records)] == ['"c1"']
    assert len(cursor.opened) == 2
    reopened = cursor.opened[1]
    assert reopened is not None
    assert reopened["start_after"] == {"_data": "8263516A40000000022B022C0100296E5A1004"}


def test_history_lost_fails_naming_the_position() -> None:
    offset = {"sec": 1666193824, "ord": 3, "resume_token": "8263"}
    with pytest.raises(FatalError) as err:
        replay("history_lost.json", offset)
    text = str(err.value)
    assert "'resume_token': '8263'" in text and "286" in text and "snapshot.mode" in text


def test_stream_options_resume_from_token_or_after_the_stored_time() -> None:
    from bson import Timestamp

    from connectors.mongodb.streaming import stream_options

    assert stream_options({"sec": 5, "ord": 2, "resume_token": "ab"}, "change_streams") == {
        "resumeAfter": {"_data": "ab"}
    }
    assert stream_options({"sec": 5, "ord": 2}, "change_streams_update_full_with_pre_image") == {
        "startAtOperationTime": Timestamp(5, 3),
        "fullDocument": "updateLookup",
        "fullDocumentBeforeChange": "whenAvailable",
    }


class SteppedDown(Recorded):
    """The primary steps down after the first batch (NotWritablePrimary, 10107); the stream
    re-opened on the new primary delivers the rest."""

    def open(self, offset: Mapping[str, Any] | None) -> Recorded:
        self.opened.append(offset)
        if len(self.opened) == 1:
            self.rest, self.batches = self.batches[1:], self.batches[:1]
            self.error = {"code": 10107, "errmsg": "not primary"}
        else:
            self.batches, self.error = self.rest, None
        return self


def test_primary_step_down_reconnects_at_the_same_position() -> None:
    """AC-54 (recorded change documents; no real replica set here)."""
    records, cursor = replay(
        "transaction.json", cursor_type=SteppedDown, **{"connect.backoff.initial.delay.ms": "1"}
    )
    assert [r["key"]["id"] for r in rows(records)] == ["1", "7", "2"]
    assert len(cursor.opened) == 2
    assert cursor.opened[0] is None
    resumed = cursor.opened[1]
    assert (
        resumed is not None and resumed["resume_token"] == "8263515EE6000000012B022C0100296E5A1006"
    )
    assert cursor.metrics["NumberOfPrimaryElections"] == 1.0
    assert cursor.metrics["NumberOfDisconnects"] == 1.0


def test_an_acknowledged_begin_does_not_store_its_transactions_first_change() -> None:
    """The BEGIN record carries the resume token of the transaction's first change (a change
    stream has no position between two changes). Acknowledged and stored before that change
    was produced, it made the restart resume after the change: lost."""
    from cdc.offsets.memory import MemoryOffsetStore
    from cdc.offsets.writer import OffsetWriter
    from cdc.pipeline.delivery import AtLeastOnceDelivery
    from cdc.transforms import build_chain
    from tests.unit.fake_kafka import FakeSink

    conn = connector()
    ctx, queue = dispatcher_for(conn, True)
    cursor = Recorded("transaction.json", ctx.stop_event)
    conn.__dict__["per_shard"] = False
    src = conn.streaming_source()
    src.opener = cursor.open  # type: ignore[attr-defined]
    src.execute(ctx, None)
    records = queue.poll(0)
    begin = next(i for i, r in enumerate(records) if r.topic == "srv.transaction")
    first = records[begin + 1]
    assert first.topic and first.topic != "srv.transaction"

    kafka: list[Any] = []
    store = MemoryOffsetStore()
    part = conn.source_partition()
    metrics = TaskMetrics("mongodb", "srv", "t")
    delivery = AtLeastOnceDelivery(
        sink=FakeSink(kafka, store),
        store=store,
        writer=OffsetWriter(store, "m", part),
        transforms=build_chain({}),
        key_converter=converter_from_config({}, is_key=True),
        value_converter=converter_from_config({}, is_key=False),
        failures=FailureHandler("fail", metrics),
        metrics=metrics,
        partition=part,
        stopping=lambda: False,
        flush_timeout_s=1.0,
    )
    store.start()
    for record in records[: begin + 1]:  # a queue poll that ends right after the BEGIN
        delivery.process([record])
    delivery.commit()
    stored = store.get("m", part) or {}
    assert stored.get("resume_token") != first.source_offset["resume_token"]
    # once the first change is in Kafka, its position is stored
    delivery.process([first])
    delivery.commit()
    assert store.get("m", part)["resume_token"] == first.source_offset["resume_token"]
