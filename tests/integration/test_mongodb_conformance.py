"""The shared conformance suite (cdc/testing/conformance.py) where it applies to MongoDB, live
on the mongo-java-server stand-in in oplog mode, events in the seed's 1.2 shape.

Applies: snapshot reads, create/update/delete with tombstones, restart without loss or
repeats. Does not apply: the primary-key change split (``_id`` cannot change) and truncation
(a dropped collection is not a truncate).

The suite speaks of relational rows; a MongoDB event carries the document as extended JSON
(``after`` on create and read), an update as the ``patch`` MongoDB logged, and a delete as the
``filter`` naming the document. The target reads them back the way a downstream consumer
must: documents parsed (``_id`` as ``id``), each patch applied to the document the earlier
events of its key built (the update's image is what folding gives, so a wrong or missing
patch fails the check), and a delete's ``before`` is the document its filter names.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import orjson
import pymongo
import pytest

from cdc.offsets.memory import MemoryOffsetStore
from cdc.testing.conformance import (
    Target,
    create_update_delete_images,
    restart_resumes_without_loss_or_repeats,
    snapshot_reads_every_row,
)
from cdc.testing.kafka_reader import Event, read_topic
from tests.integration.engine_runner import RunningConnector
from tests.integration.engine_runner import wait_streaming as wait_connected
from tests.integration.test_mongodb_connector import config, run

pytestmark = [pytest.mark.mongodb, pytest.mark.kafka]

APPLICABLE = [
    snapshot_reads_every_row,
    create_update_delete_images,
    restart_resumes_without_loss_or_repeats,
]


def _document(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    doc = dict(orjson.loads(text))
    return {"id": doc.pop("_id"), **doc}


def _patched(doc: dict[str, Any] | None, patch: dict[str, Any]) -> dict[str, Any] | None:
    """``$set``/``$unset`` as MongoDB applies them (top-level fields: all the suite writes),
    or a replacement document."""
    if not any(k.startswith("$") for k in patch):
        return {"id": doc["id"] if doc else None, **patch}
    if doc is None:
        return None  # an update of a document no earlier event created: the check fails
    out = dict(doc)
    out.update(patch.get("$set", {}))
    for field in patch.get("$unset", {}):
        out.pop(field, None)
    return out


def relational(events: list[Event]) -> list[Event]:
    """Each event with ``key.id`` the ``_id`` value and ``before``/``after`` as rows."""
    state: dict[Any, dict[str, Any] | None] = {}
    for e in events:
        ident = orjson.loads(e.key["id"])
        e.key = {"id": ident}
        if e.value is None:
            continue
        value = e.value
        if value["op"] in ("c", "r"):
            value["after"] = state[ident] = _document(value["after"])
        elif value["op"] == "u":
            value["after"] = state[ident] = _patched(state.get(ident), orjson.loads(value["patch"]))
        elif value["op"] == "d":
            named = orjson.loads(value["filter"])["_id"]
            value["before"] = state.pop(ident, None) or {"id": named}
            value["after"] = None
    return events


class MongoTarget:
    supports_truncate = False

    def __init__(self, uri: str, kafka: str, client: pymongo.MongoClient[dict[str, Any]]) -> None:
        self.uri = uri
        self.kafka = kafka
        self.db = client[f"mconf_{uuid.uuid4().hex[:8]}"]

    def create_table(self, table: str) -> None:
        self.db.create_collection(table)

    def execute(self, table: str, op: str, *args: Any) -> None:
        coll = self.db[table]
        if op == "insert":
            coll.insert_one({"_id": args[0], "name": args[1], "score": args[2]})
        elif op == "update":
            coll.update_one({"_id": args[0]}, {"$set": {"name": args[1]}})
        elif op == "delete":
            coll.delete_one({"_id": args[0]})
        else:
            raise AssertionError(f"{op} does not apply to MongoDB")

    def config(self, table: str, **overrides: str) -> dict[str, Any]:
        return config(self.uri, f"{self.db.name}.{table}", **overrides)

    def running(self, cfg: dict[str, Any], store: Any) -> AbstractContextManager[Any]:
        return run(cfg, self.kafka, store)

    def wait_streaming(self, run: RunningConnector) -> None:
        wait_connected(run)

    def read(self, cfg: dict[str, Any], table: str, min_count: int) -> list[Event]:
        topic = f"{cfg['mongodb.name']}.{self.db.name}.{table}"
        return relational(read_topic(self.kafka, topic, min_count=min_count))

    def new_offset_store(self) -> MemoryOffsetStore:
        return MemoryOffsetStore()


@pytest.fixture(scope="module")
def target(mongodb: str, kafka: str) -> Iterator[Target]:
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(mongodb)
    yield MongoTarget(mongodb, kafka, client)
    client.close()


@pytest.mark.parametrize("check", APPLICABLE, ids=lambda c: c.__name__)
def test_conformance(check: Any, target: Target) -> None:
    check(target)
