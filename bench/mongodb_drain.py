"""MongoDB backlog drain: tidemark against reading the same oplog raw with pymongo.

    .venv/bin/tidemark dev up mongodb kafka
    .venv/bin/python -m bench.mongodb_drain [--events 200000]

N change events (inserts, then a $set update of each other document) are written to a fresh
database on the `tidemark dev` stand-in (mongo-java-server); both contenders drain the same
oplog range, each in its own process so CPU and RSS are its own:

- raw: pymongo reads ``local.oplog.rs`` after the start position and discards every entry —
  the wire protocol and BSON decoding, nothing else: the limit;
- tidemark: the MongoDB connector in oplog mode from the stored start position → the seed's
  event shape → JSON with schemas → Kafka (acks=all, idempotent), until every event up to the
  end position is acknowledged.

Reported per contender: wall time, events/s, CPU-seconds per 1M events (user+sys from
getrusage) and peak RSS; then the tidemark/raw ratios. The stand-in is an in-memory Java
server, so the figures say how tidemark compares with the limit on it, not what a real
``mongod`` would give.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def cpu_now() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def usage(wall: float, cpu0: float, events: int) -> dict[str, Any]:
    """From ``cpu0`` (taken once imports and setup are done) to now."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "wall_s": wall,
        "cpu_s": cpu_now() - cpu0,
        "peak_rss_mb": r.ru_maxrss / 1024,
        "events": events,
    }


def child_raw(uri: str, start: list[int], end: list[int], ns: str) -> dict[str, Any]:
    import pymongo
    from bson import Timestamp

    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(uri)
    t0, cpu0 = time.monotonic(), cpu_now()
    n = 0
    # only the loaded collection's entries: other clients of the server write in the range too
    query = {"ts": {"$gt": Timestamp(*start), "$lte": Timestamp(*end)}, "ns": ns}
    for _ in client.local["oplog.rs"].find(query, batch_size=1000):
        n += 1
    client.close()
    return usage(time.monotonic() - t0, cpu0, n)


def child_tidemark(cfg: dict[str, Any], bootstrap: str, start: list[int], end: list[int]) -> Any:
    from cdc.engine import Engine, EngineSettings
    from cdc.offsets.memory import MemoryOffsetStore
    from connectors.mongodb import MongoDbConnector

    connector = MongoDbConnector(cfg)
    store = MemoryOffsetStore()
    partition = {"server_id": cfg["mongodb.name"], "rs": "rs0"}
    store.put_many([(cfg["name"], partition, {"sec": start[0], "ord": start[1], "h": None})])
    engine = Engine(
        connector,
        connector.config,
        store,
        EngineSettings(producer={"bootstrap.servers": bootstrap}, offset_flush_interval_ms=250),
    )
    t0, cpu0 = time.monotonic(), cpu_now()
    thread = threading.Thread(target=engine.run, daemon=True)
    thread.start()
    while True:
        done = engine.writer.last_committed
        if done is not None and (int(done["sec"]), int(done["ord"])) >= tuple(end):
            break
        if not thread.is_alive():
            raise SystemExit("engine stopped early")
        time.sleep(0.05)
    result = usage(time.monotonic() - t0, cpu0, engine.metrics.records_sent)
    engine.stop()
    thread.join(60)
    return result


def load(uri: str, db: str, events: int) -> tuple[list[int], list[int]]:
    import pymongo

    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(uri)
    client[db]["start"].insert_one({"_id": 0})  # a start position inside the oplog
    newest = client.local["oplog.rs"].find_one(sort=[("$natural", -1)])
    assert newest is not None
    start = [newest["ts"].time, newest["ts"].inc]
    inserts = events - events // 3
    coll = client[db]["items"]
    t0 = time.monotonic()
    for first in range(0, inserts, 1000):
        docs = [
            {"_id": i, "name": f"item {i}", "price": i * 0.01, "qty": i % 100, "tags": ["a", "b"]}
            for i in range(first, min(first + 1000, inserts))
        ]
        coll.insert_many(docs)
    for i in range(0, events - inserts):
        coll.update_one({"_id": i * 2}, {"$set": {"qty": -1}})
    last = client.local["oplog.rs"].find_one(sort=[("$natural", -1)])
    client.close()
    assert last is not None
    print(f"wrote {events} changes in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    return start, [last["ts"].time, last["ts"].inc]


def spawn(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.mongodb_drain", "--child", *args],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def per_million(r: dict[str, Any], events: int) -> dict[str, Any]:
    return {
        **r,
        "events_per_s": events / r["wall_s"] if r["wall_s"] else 0.0,
        "cpu_s_per_1m": r["cpu_s"] / events * 1_000_000 if events else 0.0,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        if kind == "raw":
            result = child_raw(rest[0], json.loads(rest[1]), json.loads(rest[2]), rest[3])
        else:
            result = child_tidemark(
                json.loads(rest[0]), rest[1], json.loads(rest[2]), json.loads(rest[3])
            )
        print(json.dumps(result))
        return dict(result)
    from worker.dev import Stack

    env = Stack().env(["mongodb", "kafka"])
    uri = env["TIDEMARK_MONGODB_URI"]
    db = f"bench_{uuid.uuid4().hex[:6]}"
    start, end = load(uri, db, args.events)
    port = env["TIDEMARK_MONGODB_PORT"]
    server = f"bench{uuid.uuid4().hex[:6]}"
    cfg = {
        "name": server,
        "mongodb.name": server,
        "mongodb.hosts": f"rs0/127.0.0.1:{port}",
        "mongodb.members.auto.discover": "false",
        "collection.include.list": f"{db}.items",
        "capture.mode": "oplog",
        "snapshot.mode": "never",
    }
    raw = per_million(
        spawn("raw", uri, json.dumps(start), json.dumps(end), f"{db}.items"), args.events
    )
    ours = per_million(
        spawn(
            "tidemark",
            json.dumps(cfg),
            env["TIDEMARK_KAFKA_BOOTSTRAP"],
            json.dumps(start),
            json.dumps(end),
        ),
        args.events,
    )
    report = {
        "events": args.events,
        "raw": raw,
        "tidemark": ours,
        "ratio_events_per_s": ours["events_per_s"] / raw["events_per_s"],
        "ratio_cpu_per_1m": ours["cpu_s_per_1m"] / raw["cpu_s_per_1m"],
    }
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
