"""Oplog entries the stand-in does not write (a transaction's ``applyOps`` with a ``$v: 2``
diff, ``lsid``/``txnNumber``, no-ops), from MongoDB's documentation of the oplog format,
replayed through the live ``OplogStreaming`` loop: a recorded ``local.oplog.rs`` stands in
for pymongo's collection (the only difference from a live run)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from bson import Timestamp, json_util

from cdc.converters import converter_from_config
from cdc.errors import FatalError
from connectors.mongodb import MongoDbConnector
from connectors.mongodb.streaming import OplogStreaming
from tests.unit.test_mongodb_replay import dispatcher_for

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mongodb" / "oplog_transaction.json"


class RecordedOplog:
    """``find``/``find_one`` over recorded entries; the stream stops after one full read."""

    def __init__(self, entries: list[Mapping[str, Any]], stop: threading.Event) -> None:
        self.entries = entries
        self.stop = stop
        #: failures to raise from the next find() calls (a lost connection)
        self.failures: list[BaseException] = []

    def find_one(self, sort: Any = None) -> Mapping[str, Any] | None:
        if not self.entries:
            return None
        return self.entries[-1] if sort and sort[0][1] == -1 else self.entries[0]

    def find(
        self, query: Mapping[str, Any], cursor_type: Any = None, batch_size: int = 0
    ) -> Iterator[Any]:
        if self.failures:
            raise self.failures.pop(0)
        cond = query.get("ts", {})
        gt, gte = cond.get("$gt"), cond.get("$gte")
        found = [
            e
            for e in self.entries
            if (gt is None or e["ts"] > gt) and (gte is None or e["ts"] >= gte)
        ]
        return _Cursor(found, self.stop)


class _Cursor:
    """Yields the entries, then sets the stop event (a tailing read that found the end)."""

    def __init__(self, entries: list[Any], stop: threading.Event) -> None:
        self.entries = entries
        self.stop = stop

    def __iter__(self) -> Iterator[Any]:
        yield from self.entries
        self.stop.set()

    def close(self) -> None:
        return None


class RecordedClient:
    def __init__(self, oplog: RecordedOplog) -> None:
        self.local = {"oplog.rs": oplog}


#: the offset of the fixture's first entry (a no-op): replays start after it
START = {"sec": 1699999999, "ord": 1, "h": None}


def replay(
    offset: dict[str, Any] | None = START,
    entries: list[Any] | None = None,
    failures: list[BaseException] | None = None,
    **cfg: str,
) -> list[dict[str, Any]]:
    raw = {"name": "m", "mongodb.name": "srv", "mongodb.hosts": "rs0/127.0.0.1:1"}
    conn = MongoDbConnector({**raw, "capture.mode": "oplog", **cfg})
    ctx, queue = dispatcher_for(conn, True)
    if entries is None:
        entries = json_util.loads(FIXTURE.read_text())["entries"]
    conn.__dict__["per_shard"] = False  # a replica set's recorded oplog: no shard list to read
    source = conn.streaming_source()
    assert isinstance(source, OplogStreaming)
    conn.close()  # the live client the source was built with is never used here
    oplog = RecordedOplog(entries, ctx.stop_event)
    oplog.failures = list(failures or [])
    source.client = RecordedClient(oplog)  # type: ignore[assignment]
    source.execute(ctx, offset)
    conv = converter_from_config({}, is_key=False)
    out = []
    for rec in queue.poll(0):
        value = conv.from_connect(rec.topic, rec.value_schema, rec.value)
        payload = json.loads(value)["payload"] if value else None
        out.append({"topic": rec.topic, "value": payload, "offset": rec.source_offset})
    return out


def test_apply_ops_transaction_in_the_seed_shape() -> None:
    records = replay()
    data = [r for r in records if r["topic"].startswith("srv.shop")]
    assert [(r["topic"], r["value"] and r["value"]["op"]) for r in data] == [
        ("srv.shop.orders", "c"),
        ("srv.shop.orders", "u"),
        ("srv.shop.stock", "c"),
        ("srv.shop.orders", "d"),
        ("srv.shop.orders", None),
    ]
    u = data[1]["value"]
    assert json.loads(u["patch"]) == {"$v": 2, "diff": {"u": {"total": 6.0}, "d": {"note": False}}}
    assert json.loads(u["filter"]) == {"_id": 1}
    txid = "dac1e964-8f68-4821-b5be-2f59ab349799:4"
    assert u["source"]["stxnid"] == txid and u["transaction"]["id"] == txid
    assert [data[i]["offset"].get("tord") for i in (1, 2, 3)] == [0, 1, 2]
    tx = [r["value"] for r in records if r["topic"] == "srv.transaction"]
    assert [(t["status"], t["event_count"]) for t in tx] == [("BEGIN", None), ("END", 3)]


def test_apply_ops_diff_as_an_update_description() -> None:
    data = [r for r in replay(**{"envelope.version": "3"}) if r["topic"] == "srv.shop.orders"]
    desc = data[1]["value"]["updateDescription"]
    assert desc["removedFields"] == ["note"] and json.loads(desc["updatedFields"]) == {"total": 6.0}


def test_restart_inside_a_transaction_skips_only_what_was_delivered() -> None:
    offset = {"sec": 1700000001, "ord": 1, "h": None, "tord": 0}
    data = [r for r in replay(offset) if r["topic"].startswith("srv.shop") and r["value"]]
    assert [(r["topic"], r["value"]["op"]) for r in data] == [
        ("srv.shop.stock", "c"),
        ("srv.shop.orders", "d"),
    ]


def test_position_gone_from_the_oplog_fails_naming_it() -> None:
    entries = json_util.loads(FIXTURE.read_text())["entries"]
    with pytest.raises(FatalError, match=r"'sec': 1600000000.*no longer in the oplog"):
        replay({"sec": 1600000000, "ord": 1}, entries)
    assert entries[0]["ts"] == Timestamp(1699999999, 1)


def test_without_an_offset_streaming_starts_at_the_end() -> None:
    assert [r for r in replay(None) if r["topic"].startswith("srv.shop")] == []


def test_a_lost_connection_is_retried_and_resumes_where_it_stopped() -> None:
    from pymongo.errors import AutoReconnect

    lost = [AutoReconnect("connection reset"), AutoReconnect("no primary")]
    data = replay(failures=lost, **{"connect.backoff.initial.delay.ms": "1"})
    rows = [r for r in data if r["topic"].startswith("srv.shop") and r["value"]]
    assert [r["value"]["op"] for r in rows] == ["c", "u", "c", "d"]


def test_connection_lost_for_good_fails_after_connect_max_attempts() -> None:
    from pymongo.errors import AutoReconnect

    from connectors.mongodb.errors import PrimaryUnreachable

    lost: list[BaseException] = [AutoReconnect("down")] * 5
    with pytest.raises(PrimaryUnreachable, match="3 reconnection attempts failed"):
        replay(
            failures=lost,
            **{"connect.backoff.initial.delay.ms": "1", "connect.max.attempts": "3"},
        )


def test_chunk_migration_entries_are_skipped_and_the_position_moves_past_them() -> None:
    """A shard read directly sees a chunk moving as inserts on the recipient and deletes on
    the donor, flagged ``fromMigrate`` (MongoDB's oplog format): not changes of the
    collection. Emitted, the donor's delete would remove a document that still exists."""
    migrated = [
        {"ts": Timestamp(1700000000, 1), "op": "i", "ns": "shop.orders", "o": {"_id": 5}},
        {
            "ts": Timestamp(1700000000, 2),
            "op": "d",
            "ns": "shop.orders",
            "o": {"_id": 5},
            "fromMigrate": True,
        },
        {
            "ts": Timestamp(1700000000, 3),
            "op": "i",
            "ns": "shop.orders",
            "o": {"_id": 6},
            "fromMigrate": True,
        },
    ]
    entries = json_util.loads(FIXTURE.read_text())["entries"][:1] + migrated
    records = replay(START, entries)
    rows = [r for r in records if r["topic"] == "srv.shop.orders"]
    assert [(r["value"]["op"], json.loads(r["value"]["after"])["_id"]) for r in rows] == [("c", 5)]
    assert records[-1]["offset"]["ord"] == 3  # moved past the skipped entries
