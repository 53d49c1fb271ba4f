"""The issue's acceptance run: the worker SIGKILLed 5 times at random points while documents
are inserted, updated and deleted, then restarted; the last event per ``_id`` (events folded
as a consumer of the seed's shape folds them: ``after``, then ``patch``es, ``filter`` deletes)
equals the document in the database, nothing missing. A kill only duplicates events.

The task runs in a child process (this module run with ``python -m``), oplog mode against the
stand-in, offsets in a file as a standalone worker keeps them.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pymongo
import pytest

from cdc.testing.kafka_reader import read_topic

pytestmark = [pytest.mark.mongodb, pytest.mark.kafka]


def child(spec_path: str) -> None:
    from cdc.engine import Engine, EngineSettings
    from cdc.offsets.file import FileOffsetStore
    from connectors.mongodb import MongoDbConnector

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    spec = json.loads(Path(spec_path).read_text())
    connector = MongoDbConnector(spec["config"])
    engine = Engine(
        connector,
        connector.config,
        FileOffsetStore(spec["offsets"]),
        EngineSettings(
            producer={"bootstrap.servers": spec["bootstrap"]}, offset_flush_interval_ms=100
        ),
    )
    signal.signal(signal.SIGTERM, lambda *_: engine.stop())
    print("READY", flush=True)
    engine.run()


def start(spec: Path) -> subprocess.Popen[bytes]:
    """The child task; its log goes to ``child.log`` beside the spec."""
    with open(spec.parent / "child.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.integration.test_mongodb_kill", str(spec)],
            cwd=Path(__file__).resolve().parents[2],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def apply_patch(doc: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    if not any(k.startswith("$") for k in patch):
        return patch  # a replacement document
    out = dict(doc)
    out.update(patch.get("$set", {}))
    for field in patch.get("$unset", {}):
        out.pop(field, None)
    return out


def fold(events: list[Any]) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for e in events:
        key = e.key["id"]
        if e.value is None or e.op == "d":
            state.pop(key, None)
        elif e.op in ("c", "r"):
            state[key] = orjson.loads(e.value["after"])
        elif e.op == "u" and key in state:
            state[key] = apply_patch(state[key], orjson.loads(e.value["patch"]))
        # An update of a document the fold does not hold is replayed history: a restarted
        # snapshot copied the collection after that document was deleted, and streaming
        # replays from the first attempt's earlier position. Its delete follows; skip it.
    return state


def writer(coll: Any, stop: threading.Event, seed: int) -> None:
    rnd = random.Random(seed)
    next_id = 1000
    while not stop.is_set():
        ids = [d["_id"] for d in coll.find({}, {"_id": 1})]
        roll = rnd.random()
        if roll < 0.4 or not ids:
            coll.insert_one({"_id": next_id, "v": 0, "tag": "t"})
            next_id += 1
        elif roll < 0.75:
            # $set only: the stand-in logs $inc as is (a real server logs the $set it did)
            coll.update_one(
                {"_id": rnd.choice(ids)}, {"$set": {"v": rnd.randint(1, 99), "tag": "u"}}
            )
        elif roll < 0.85:
            coll.update_one({"_id": rnd.choice(ids)}, {"$unset": {"tag": ""}})
        else:
            coll.delete_one({"_id": rnd.choice(ids)})
        time.sleep(0.005)


def test_five_kills_lose_nothing(mongodb: str, kafka: str, tmp_path: Path) -> None:
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(mongodb)
    db = client[f"mkill_{uuid.uuid4().hex[:8]}"]
    coll = db.docs
    coll.insert_many([{"_id": i, "v": 0, "tag": "s"} for i in range(200)])
    server = "k" + uuid.uuid4().hex[:8]
    port = mongodb.split(":")[2].split("/")[0]
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "config": {
                    "name": server,
                    "mongodb.name": server,
                    "mongodb.hosts": f"rs0/127.0.0.1:{port}",
                    "mongodb.members.auto.discover": "false",
                    "collection.include.list": f"{db.name}.docs",
                    "capture.mode": "oplog",
                    "mongodb.oplog.poll.interval.ms": "50",
                },
                "bootstrap": kafka,
                "offsets": str(tmp_path / "offsets.json"),
            }
        )
    )
    stop = threading.Event()
    thread = threading.Thread(target=writer, args=(coll, stop, 7), daemon=True)
    thread.start()
    rnd = random.Random(11)
    try:
        for _ in range(5):
            proc = start(spec)
            time.sleep(rnd.uniform(0.3, 2.5))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
    finally:
        stop.set()
        thread.join(10)
    proc = start(spec)
    try:
        expected = {json.dumps(d["_id"]): {k: v for k, v in d.items()} for d in coll.find({})}
        topic = f"{server}.{db.name}.docs"
        deadline = time.monotonic() + 60
        while True:
            events = read_topic(kafka, topic, timeout=10, settle=2.0)
            got = fold(events)
            if got == expected or time.monotonic() > deadline:
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        client.close()
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    wrong = sorted(k for k in expected.keys() & got.keys() if expected[k] != got[k])
    log = (tmp_path / "child.log").read_text(errors="replace")[-2000:]
    assert (missing, extra, wrong) == ([], [], []), log
    assert len(events) > len(expected)  # the kills replayed some events: duplicates only


if __name__ == "__main__":
    child(sys.argv[1])
