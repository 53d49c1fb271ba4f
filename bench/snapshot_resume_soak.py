"""Issue 16's acceptance run for resumable initial snapshots, on demand:

    .venv/bin/python -m bench.snapshot_resume_soak [--db postgres|mariadb] [--rows 500000]
                                                   [--kills 10] [--writers 4] [--chunk 1024]
                                                   [--flush-ms 60000]

A table of ``--rows`` rows is snapshotted by a connector task in its own process while
``--writers`` threads insert, update and delete rows all the time. The task is SIGKILLed
``--kills`` times at random points inside the snapshot; each restart must resume from the
stored chunk (the rows read again per kill are counted: the rows after the stored resume key
that the killed attempt had already sent; at most ``--chunk`` per kill, whatever the offset
flush interval, Kafka Connect's default of a minute here), and once the writers stop, the last
event of every key in the topic must equal the table (deletes included). Prints one line per
kill and the verdict; exits 1 when the topic does not equal the table.

Each killed attempt's log is kept in the run's temporary folder (printed at the end). Needs
the dev stack (``tidemark dev up postgres mariadb kafka``). The test suite runs the
one-kill version (tests/integration/test_snapshot_resume.py).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from tests.integration.test_engine_crash import end_offset, finish, read_all, start
from tests.integration.test_snapshot_resume import last_rows, stored
from worker.dev.stack import Stack, default_home

BATCH = 1024


def _harness(db: str, tmp: Path) -> Any:
    """A harness on the running dev stack (the same ones the tests use)."""
    stack = Stack(default_home())
    kafka = stack["kafka"].env()["TIDEMARK_KAFKA_BOOTSTRAP"]
    if db == "postgres":
        from tests.integration.conftest import PgInfo
        from tests.integration.pg_harness import PgHarness

        env = stack["postgres"].env()
        info = PgInfo(
            env["TIDEMARK_PG_HOST"],
            int(env["TIDEMARK_PG_PORT"]),
            env["TIDEMARK_PG_USER"],
            env["TIDEMARK_PG_PASSWORD"],
            env["TIDEMARK_PG_DBNAME"],
        )
        return PgHarness(info, kafka, f"soak_{uuid.uuid4().hex[:8]}")
    from tests.integration.conftest import MySqlInfo
    from tests.integration.mysql_harness import MySqlHarness

    env = stack["mariadb"].env()
    minfo = MySqlInfo(
        env["TIDEMARK_MYSQL_HOST"],
        int(env["TIDEMARK_MYSQL_PORT"]),
        env["TIDEMARK_MYSQL_USER"],
        env["TIDEMARK_MYSQL_PASSWORD"],
        int(env["TIDEMARK_MYSQL_SERVER_ID"]),
    )
    return MySqlHarness(minfo, kafka, f"soak_{uuid.uuid4().hex[:8]}", tmp)


def _progress(offset: dict[str, Any]) -> Any:
    """How far a snapshot got by its stored offset (changes when a later batch is stored)."""
    if not offset.get("snapshot"):
        return "done" if offset else None
    return (offset.get("snapshot_table"), offset.get("snapshot_after"))


class Writers:
    """Threads changing random rows until stopped: updates, deletes and inserts."""

    def __init__(self, h: Any, rows: int, count: int) -> None:
        self.h, self.rows, self.stop = h, rows, threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,)) for i in range(count)]
        self.changes = 0

    def _run(self, n: int) -> None:
        rnd = random.Random(n)
        fresh = self.rows + 1 + n * 10_000_000
        while not self.stop.is_set():
            key = rnd.randint(1, self.rows)
            op = rnd.random()
            if op < 0.6:
                stmt = f"UPDATE big SET v = 'w{n}-{self.changes}' WHERE id = {key}"
            elif op < 0.8:
                stmt = f"DELETE FROM big WHERE id = {key}"
            else:
                stmt = f"INSERT INTO big VALUES ({fresh}, 'new-{n}')"
                fresh += 1
            try:
                self.h.sql(stmt)
                self.changes += 1
            except Exception:  # a rare conflict between writers: try another row
                continue
            time.sleep(0.005)

    def __enter__(self) -> Writers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()


def reread_per_kill(events: list[dict[str, Any]], ends: list[int]) -> list[int]:
    """Rows each restart read again: ``op=r`` events after kill k whose key an earlier
    attempt had already read (counted until the next kill)."""
    seen: set[int] = set()
    out, start = [], 0
    for end in [*ends, len(events)]:
        again = 0
        for e in events[start:end]:
            if e["op"] == "r":
                key = int(e["after"]["id"])
                again += key in seen
                seen.add(key)
        out.append(again)
        start = end
    return out[1:]  # the first attempt read nothing again


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", choices=("postgres", "mariadb"), default="postgres")
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--chunk", type=int, default=BATCH, help="snapshot.resumable.chunk.size")
    ap.add_argument("--flush-ms", type=int, default=60_000, help="offset.flush.interval.ms")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rnd = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="tidemark-soak-"))
    h = _harness(args.db, tmp)
    try:
        return _soak(args, rnd, tmp, h)
    finally:  # the database (and its slots) go also when the soak fails
        if hasattr(h, "dispose"):
            h.dispose()
        else:
            h.drop()


def _soak(args: argparse.Namespace, rnd: random.Random, tmp: Path, h: Any) -> int:
    mysql = args.db == "mariadb"
    h.sql("CREATE TABLE big (id bigint PRIMARY KEY, v varchar(40))")
    if mysql:
        h.sql(f"INSERT INTO big SELECT seq, CONCAT('v', seq) FROM seq_1_to_{args.rows}")
    else:
        h.sql(f"INSERT INTO big SELECT g, 'v' || g FROM generate_series(1, {args.rows}) g")
    include = f"{h.dbname}.big" if mysql else "public.big"
    cfg = h.config(
        table_include_list=include, snapshot_mode="initial", tombstones_on_delete="false"
    )
    if mysql:
        cfg["snapshot.fetch.size"] = str(BATCH)
    cfg["snapshot.resumable.chunk.size"] = str(args.chunk)
    offsets, spec = tmp / "offsets.json", tmp / "spec.json"
    doc = {"kind": "mysql" if mysql else "postgres", "bootstrap": h.kafka}
    doc["offsets"] = {"file": str(offsets)}
    topic = h.topic(cfg, "big")
    t0 = time.monotonic()
    ends: list[int] = []  # the topic's end after each kill: where the next attempt's events start
    with Writers(h, args.rows, args.writers) as writers:
        for kill in range(1, args.kills + 1):
            if mysql:
                h.new_server_id(cfg)
            spec.write_text(json.dumps({**doc, "config": cfg, "flush_ms": args.flush_ms}))
            before = stored(offsets, cfg)
            proc = start(spec)
            deadline = time.monotonic() + 300
            # into the snapshot: this attempt stored a resume point past the last one (or
            # finished), then a random moment
            while _progress(stored(offsets, cfg)) == _progress(before):
                if proc.poll() is not None or time.monotonic() > deadline:
                    _, err = proc.communicate()
                    print(err.decode()[-3000:], file=sys.stderr)
                    return 1
                time.sleep(0.05)
            time.sleep(rnd.uniform(0.0, 2.0))
            proc.kill()
            _, err = proc.communicate()
            (tmp / f"attempt-{kill}.stderr").write_bytes(err)
            ends.append(end_offset(h.kafka, topic))
            point = stored(offsets, cfg)
            if not point.get("snapshot"):
                print(f"kill {kill}: the snapshot had finished; stopping the kills")
                break
            print(
                f"kill {kill}: stored resume point table={point.get('snapshot_table')} "
                f"after={point.get('snapshot_after')}",
                flush=True,
            )
        if mysql:
            h.new_server_id(cfg)
        spec.write_text(json.dumps({**doc, "config": cfg, "flush_ms": args.flush_ms}))
        proc = start(spec)
        while "snapshot" in stored(offsets, cfg) and proc.poll() is None:
            time.sleep(0.5)
        changes = writers.changes
    # writers stopped: the topic must converge to the table
    want = {int(k): v for k, v in h.sql("SELECT id, v FROM big")}
    deadline = time.monotonic() + 300
    events = read_all(h.kafka, topic, "read_uncommitted")
    while last_rows(events) != want and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(2)
        events = read_all(h.kafka, topic, "read_uncommitted")
    finish(proc)
    got = last_rows(events)
    reads = Counter(int(e["after"]["id"]) for e in events if e["op"] == "r")
    again = sum(n - 1 for n in reads.values())
    per_kill = reread_per_kill(events, ends)
    missing = len(set(want) - set(got))
    stale = sum(1 for k in want if k in got and got[k] != want[k])
    extra = len(set(got) - set(want))
    print(
        f"{args.db}: {args.rows} rows, {kill} kills, {args.writers} writers ({changes} changes) "
        f"in {time.monotonic() - t0:.0f} s; rows read more than once: {again} "
        f"({again / max(kill, 1):.0f} per kill, max {max(per_kill, default=0)}; batch {BATCH}, "
        f"chunk {args.chunk}, offset flush {args.flush_ms} ms); "
        f"topic vs table: missing {missing}, stale {stale}, extra {extra}"
    )
    print(f"rows read again per kill: {per_kill}")
    print(f"attempt logs in {tmp}")
    return 0 if (missing, stale, extra) == (0, 0, 0) else 1


if __name__ == "__main__":
    sys.exit(main())
