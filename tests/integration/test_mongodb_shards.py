"""A sharded cluster read shard by shard (AC-13, AC-56), on stand-ins through the real Kafka.

No sharded MongoDB can run here, so the cluster is built from nx-27017 stand-ins (named as
such): two "shards", each its own server, and a "configuration server" whose
``config.shards`` lists them, as a real one does (``<rs>/<host:port>``). The connector is
pointed at the configuration server, as the seed says, discovers the shards there, snapshots
each and reads each one's change stream; a shard listed later is picked up within
``mongodb.poll.interval.ms``; a graceful restart resumes every shard from its own position
in the task's one offset. What the stand-ins cannot show: a real mongos, chunk migrations
(``fromMigrate`` entries are skipped: tests/unit/test_mongodb_oplog_replay.py), and reading a
new shard's oplog from its start (nx-27017 has no oplog: a shard added here is read from
when it was found).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import orjson
import pymongo
import pytest

from cdc.offsets.composite import POSITIONS
from cdc.offsets.memory import MemoryOffsetStore
from cdc.testing.kafka_reader import read_topic
from tests.faults.private import private_service
from tests.integration.engine_runner import RunningConnector
from tests.integration.test_mongodb_connector import run
from worker.dev.mongodb import NxMongoService

pytestmark = [pytest.mark.mongodb, pytest.mark.kafka]

Client = pymongo.MongoClient[dict[str, Any]]


@contextmanager
def stand_in() -> Iterator[tuple[Client, int]]:
    """A private nx-27017 server: its client and port."""
    with contextmanager(private_service)(NxMongoService) as svc:
        client: Client = pymongo.MongoClient(svc.uri)
        try:
            yield client, svc.port
        finally:
            client.close()


def wait(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def shards(r: RunningConnector) -> float:
    return r.engine.metrics.extra["NumberOfShards"]()


def test_shards_discovered_read_into_one_topic_added_and_resumed(kafka: str) -> None:
    with ExitStack() as stack:
        cfgsrv, cfg_port = stack.enter_context(stand_in())
        (a, a_port), (b, b_port) = stack.enter_context(stand_in()), stack.enter_context(stand_in())
        listing = cfgsrv["config"]["shards"]
        listing.insert_many(
            [
                {"_id": "shA", "host": f"shA/127.0.0.1:{a_port}"},
                {"_id": "shB", "host": f"shB/127.0.0.1:{b_port}"},
            ]
        )
        db = f"msh_{uuid.uuid4().hex[:8]}"
        a[db].orders.insert_one({"_id": "a1", "n": 1})
        b[db].orders.insert_one({"_id": "b1", "n": 1})
        server = "m" + uuid.uuid4().hex[:8]
        cfg = {
            "name": server,
            "connector.class": "mongodb",
            "mongodb.name": server,
            "mongodb.hosts": f"cfgrs/127.0.0.1:{cfg_port}",
            "mongodb.members.auto.discover": "false",
            "collection.include.list": f"{db}.orders",
            "capture.mode": "change_streams_update_full",
            "envelope.version": "3",  # the document after an update in "after"
            "mongodb.poll.interval.ms": "300",
        }
        topic = f"{server}.{db}.orders"
        store = MemoryOffsetStore()
        with run(cfg, kafka, store) as r:
            assert shards(r) == 2
            a[db].orders.insert_one({"_id": "a2", "n": 2})
            b[db].orders.update_one({"_id": "b1"}, {"$set": {"n": 5}})
            a[db].orders.delete_one({"_id": "a1"})
            # AC-56: a shard joins while the connector runs
            c, c_port = stack.enter_context(stand_in())
            listing.insert_one({"_id": "shC", "host": f"shC/127.0.0.1:{c_port}"})
            wait("the added shard's reader", lambda: shards(r) == 3)
            c[db].orders.insert_one({"_id": "c1", "n": 1})
            events = read_topic(kafka, topic, min_count=7)
        got = [(e.op, e.key["id"], e.value and e.value["source"]["rs"]) for e in events]
        # AC-13: every shard's changes of the collection in the one topic, rs naming the shard
        assert sorted(got[:2]) == [("r", '"a1"', "cfgrs"), ("r", '"b1"', "cfgrs")]
        assert sorted(got[2:], key=str) == sorted(
            [
                ("c", '"a2"', "shA"),
                ("u", '"b1"', "shB"),
                ("d", '"a1"', "shA"),
                (None, '"a1"', None),
                ("c", '"c1"', "shC"),
            ],
            key=str,
        )
        assert next(g for g in got if g[0] in ("d", None))[0] == "d"  # the tombstone after
        assert orjson.loads(events[got.index(("u", '"b1"', "shB"))].value["after"]) == {
            "_id": "b1",
            "n": 5,
        }
        stored = store.all(server)[0][1]
        assert set(stored[POSITIONS]) == {"shA", "shB", "shC"}

        # while stopped: one change on an old shard, one on the added one; a shard leaves
        a[db].orders.insert_one({"_id": "a3", "n": 3})
        c[db].orders.update_one({"_id": "c1"}, {"$set": {"n": 9}})
        with run(cfg, kafka, store) as r:
            b[db].orders.insert_one({"_id": "b2", "n": 2})
            resumed = read_topic(kafka, topic, min_count=10)
            listing.delete_one({"_id": "shB"})
            wait("the removed shard's reader to stop", lambda: shards(r) == 2)
            wait(
                "the removed shard's position to be dropped",
                lambda: set(store.all(server)[0][1][POSITIONS]) == {"shA", "shC"},
            )
        after_restart = [(e.op, e.key["id"]) for e in resumed[7:]]
        # each shard resumed from its own position: nothing replayed, nothing lost
        assert sorted(after_restart) == [("c", '"a3"'), ("c", '"b2"'), ("u", '"c1"')]
