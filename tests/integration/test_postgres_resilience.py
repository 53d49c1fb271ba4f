"""PostgreSQL under stress and crashes: lossless snapshot→stream handover under concurrent
writes, a kill during the snapshot (AC-28), a kill during streaming (AC-39)."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness, read_topic
from tests.integration.test_engine_crash import end_offset, finish, start, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

SNAPSHOT_ROWS = 200_000
NO_SCHEMAS = {
    "key.converter.schemas.enable": "false",
    "value.converter.schemas.enable": "false",
}


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    with PgHarness(postgres, kafka, f"tr_{uuid.uuid4().hex[:8]}") as harness:
        yield harness


def big_table(h: PgHarness, name: str, rows: int) -> None:
    h.sql(
        f"CREATE TABLE {name} (id bigserial PRIMARY KEY, v int NOT NULL, note text)",
        f"INSERT INTO {name} (v, note) SELECT g, 'row ' || g FROM generate_series(1, {rows}) g",
    )


class Writers:
    """Threads doing single-statement inserts, updates and deletes as fast as they can."""

    def __init__(self, h: PgHarness, table: str, n: int = 4) -> None:
        self.h, self.table = h, table
        self.stop = threading.Event()
        self.ops = 0
        self.errors: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(n)
        ]

    def _run(self, seed: int) -> None:
        rnd = random.Random(seed)
        try:
            with psycopg.connect(self.h.pg.dsn(self.h.dbname), autocommit=True) as c:
                while not self.stop.is_set():
                    k = rnd.randint(1, SNAPSHOT_ROWS)
                    choice = rnd.random()
                    if choice < 0.4:
                        c.execute(f"INSERT INTO {self.table} (v, note) VALUES (%s, 'new')", (k,))
                    elif choice < 0.8:
                        c.execute(
                            f"UPDATE {self.table} SET v = v + 1, note = 'upd' WHERE id = %s", (k,)
                        )
                    else:
                        c.execute(f"DELETE FROM {self.table} WHERE id = %s", (k,))
                    self.ops += 1
        except BaseException as exc:
            self.errors.append(exc)

    def __enter__(self) -> Writers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)
        assert not self.errors, self.errors[0]


def compacted(events: list[Any]) -> dict[int, dict[str, Any]]:
    """What a compacted topic keeps: the last record per key; tombstones remove the key."""
    state: dict[int, dict[str, Any]] = {}
    for e in events:
        key = e.key["id"]
        if e.value is None or e.op == "d":
            state.pop(key, None)
        else:
            state[key] = e.after
    return state


def table_rows(h: PgHarness, table: str) -> dict[int, dict[str, Any]]:
    rows = h.sql(f"SELECT id, v, note FROM {table}")
    return {r[0]: {"id": r[0], "v": r[1], "note": r[2]} for r in rows}


def test_snapshot_to_stream_handover_under_concurrent_writes_loses_nothing(h: PgHarness) -> None:
    big_table(h, "handover", SNAPSHOT_ROWS)
    cfg = h.config(
        table_include_list="public.handover",
        **{k.replace(".", "_"): v for k, v in NO_SCHEMAS.items()},
    )
    cfg.update(NO_SCHEMAS)
    topic = h.topic(cfg, "handover")
    with Writers(h, "handover") as writers:
        time.sleep(0.5)  # writes in flight while the slot and its snapshot are created
        with h.running(cfg) as run:
            deadline = time.monotonic() + 300
            while not run.engine.metrics.snapshot.completed:
                assert not run.errors, run.errors[0]
                assert time.monotonic() < deadline, "snapshot did not finish"
                time.sleep(0.2)
            time.sleep(1.0)  # and after the handover
            writers.stop.set()
            for t in writers.threads:
                t.join(30)
            expected = table_rows(h, "handover")
            # Caught up when the topic's end stops moving.
            last, stable_since = -1, time.monotonic()
            while time.monotonic() - stable_since < 3:
                now = end_offset(h.kafka, topic)
                if now != last:
                    last, stable_since = now, time.monotonic()
                time.sleep(0.3)
    events = read_topic(h.kafka, topic, min_count=SNAPSHOT_ROWS, timeout=180, settle=2)
    snapshot_reads = sum(1 for e in events if e.op == "r")
    streamed = sum(1 for e in events if e.op in ("c", "u", "d"))
    assert writers.ops > 100 and streamed > 0
    assert snapshot_reads <= SNAPSHOT_ROWS + writers.ops
    state = compacted(events)
    missing = expected.keys() - state.keys()
    extra = state.keys() - expected.keys()
    wrong = [k for k in expected.keys() & state.keys() if state[k] != expected[k]]
    assert not missing and not extra and not wrong, (
        f"{len(missing)} missing, {len(extra)} extra, {len(wrong)} differ; "
        f"e.g. {sorted(missing)[:5]} {sorted(extra)[:5]} {wrong[:5]}"
    )


def test_parallel_snapshot_readers_split_a_table_and_lose_nothing(
    h: PgHarness, caplog: pytest.LogCaptureFixture
) -> None:
    """snapshot.max.threads=2: the big table is read in page ranges by two connections that
    share the slot's exported snapshot; under concurrent writes every row is read exactly
    once and the compacted topics equal the tables."""
    h.sql(
        "CREATE TABLE par_big (id bigserial PRIMARY KEY, v int NOT NULL, note text)",
        "INSERT INTO par_big (v, note) SELECT g, repeat('p', 100) || g "
        "FROM generate_series(1, 80000) g",
        "CREATE TABLE par_small (id bigserial PRIMARY KEY, v int NOT NULL, note text)",
        "INSERT INTO par_small (v, note) SELECT g, 'small ' || g FROM generate_series(1, 500) g",
    )
    (pages,) = h.sql("SELECT pg_relation_size('par_big') / 8192")[0]
    assert pages >= 1024, "the table must be big enough to be split"
    cfg = h.config(
        table_include_list="public.par_big,public.par_small",
        snapshot_max_threads=2,
    )
    cfg.update(NO_SCHEMAS)
    caplog.set_level("INFO", logger="tidemark.postgres.snapshot")
    with Writers(h, "par_big", n=2) as writers:
        time.sleep(0.3)
        with h.running(cfg) as run:
            deadline = time.monotonic() + 300
            while not run.engine.metrics.snapshot.completed:
                assert not run.errors, run.errors[0]
                assert time.monotonic() < deadline, "snapshot did not finish"
                time.sleep(0.2)
            time.sleep(1.0)
            writers.stop.set()
            for t in writers.threads:
                t.join(30)
            h.sql("INSERT INTO par_big (id, v, note) VALUES (0, 0, 'sentinel')")
            topic = h.topic(cfg, "par_big")
            events = read_topic(h.kafka, topic, min_count=80_000, timeout=180, settle=2)
            while not any(e.key["id"] == 0 for e in events):
                events = read_topic(h.kafka, topic, min_count=len(events) + 1, timeout=60)
    assert any("chunk(s) with 2 readers" in r.getMessage() for r in caplog.records)
    for table, evs in (
        ("par_big", events),
        ("par_small", read_topic(h.kafka, h.topic(cfg, "par_small"), min_count=500)),
    ):
        reads = [e.key["id"] for e in evs if e.op == "r"]
        assert len(reads) == len(set(reads)), f"{table}: a row was read twice"
        state = compacted(evs)
        expected = table_rows(h, table)
        assert state == expected, f"{table}: {len(state)} rows in Kafka, {len(expected)} in PG"
    assert writers.ops > 50


def child_spec(tmp: Path, h: PgHarness, cfg: dict[str, Any]) -> Path:
    path = tmp / "spec.json"
    path.write_text(
        json.dumps(
            {
                "kind": "postgres",
                "config": cfg,
                "bootstrap": h.kafka,
                "offsets": {"file": str(tmp / "offsets.json")},
                "flush_ms": 200,
            }
        )
    )
    return path


def stored_offset(tmp: Path) -> dict[str, Any] | None:
    f = tmp / "offsets.json"
    if not f.exists():
        return None
    entries = json.loads(f.read_text())["offsets"]
    return entries[0]["offset"] if entries else None


@pytest.mark.parametrize("resumable", [False, True], ids=["restarts", "resumes"])
def test_kill_during_snapshot_restarts_the_snapshot(
    tmp_path: Path, h: PgHarness, resumable: bool
) -> None:
    """AC-28: a snapshot killed before it finished is taken again at the restart — whole with
    ``snapshot.resumable=false`` (the seed's behaviour), else from after the last batch whose
    offset was stored (issue 16); either way every row arrives."""
    table = f"killsnap_{'resumes' if resumable else 'restarts'}"
    big_table(h, table, 100_000)
    cfg = h.config(
        table_include_list=f"public.{table}",
        max_batch_size="500",
        max_queue_size="1000",
        snapshot_resumable=str(resumable).lower(),
    )
    cfg.update(NO_SCHEMAS)
    topic = h.topic(cfg, table)
    spec = child_spec(tmp_path, h, cfg)
    proc = start(spec)
    wait_for(h.kafka, topic, 5_000, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    partial = end_offset(h.kafka, topic)
    assert partial < 100_000, "the snapshot finished before the kill"
    offset = stored_offset(tmp_path)
    assert offset is None or offset.get("snapshot") is True
    # the key the stored batch starts after (none: every row is read again)
    after = int(offset["snapshot_after"][0]) if offset and offset.get("snapshot_after") else 0
    if not resumable:
        assert after == 0
    expected = 100_000 - after

    proc = start(spec)
    wait_for(h.kafka, topic, partial + expected, proc, timeout=240)
    h.sql(f"INSERT INTO {table} (v, note) VALUES (-1, 'after')")
    wait_for(h.kafka, topic, partial + expected + 1, proc)
    finish(proc)
    offset = stored_offset(tmp_path)
    assert offset is not None and not offset.get("snapshot")
    events = read_topic(h.kafka, topic, min_count=partial + expected + 1, timeout=120)
    second = events[partial:]
    reads = sorted(e.key["id"] for e in second if e.op == "r")
    assert reads == list(range(after + 1, 100_001))  # each row after the stored key, once
    first = {e.key["id"] for e in events[:partial] if e.op == "r"}
    assert first | set(reads) == set(range(1, 100_001))
    assert second[-1].op == "c" and second[-1].after["v"] == -1


def test_kill_during_streaming_resumes_with_duplicates_only(tmp_path: Path, h: PgHarness) -> None:
    """AC-39."""
    h.sql("CREATE TABLE killstream (id int PRIMARY KEY, v text)")
    cfg = h.config(table_include_list="public.killstream", snapshot_mode="never")
    cfg.update(NO_SCHEMAS)
    topic = h.topic(cfg, "killstream")
    spec = child_spec(tmp_path, h, cfg)
    total = 3000
    proc = start(spec)
    deadline = time.monotonic() + 30
    while (
        h.sql(
            f"SELECT count(*) FROM pg_replication_slots WHERE slot_name = "
            f"'{cfg['slot.name']}' AND active"
        )[0][0]
        == 0
    ):
        assert time.monotonic() < deadline
        time.sleep(0.1)

    def write(lo: int, hi: int) -> None:
        with psycopg.connect(h.pg.dsn(h.dbname), autocommit=True) as c:
            for i in range(lo, hi):
                c.execute("INSERT INTO killstream VALUES (%s, 'x')", (i,))

    write(1, total // 2)
    wait_for(h.kafka, topic, total // 4, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    committed = stored_offset(tmp_path)
    assert committed is not None
    write(total // 2, total + 1)
    proc = start(spec)
    deadline = time.monotonic() + 120
    while True:
        ids = {e.key["id"] for e in read_topic(h.kafka, topic, settle=0.5, timeout=10)}
        if len(ids) >= total or time.monotonic() > deadline:
            break
    finish(proc)
    events = read_topic(h.kafka, topic, min_count=total)
    seen: dict[int, int] = {}
    for e in events:
        seen[e.key["id"]] = seen.get(e.key["id"], 0) + 1
    assert set(seen) == set(range(1, total + 1)), "an insert was lost"
    dups = [e for e in events if seen[e.key["id"]] > 1]
    assert all(e.value["source"]["lsn"] > committed["lsn"] for e in dups)
