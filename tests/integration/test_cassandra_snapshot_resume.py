"""A Cassandra initial snapshot SIGKILLed in the middle resumes at the partition of the last
batch Kafka acknowledged, on the real node.

The scenario of ``test_snapshot_resume`` (PostgreSQL, MariaDB) and
``test_mongodb_snapshot_resume``: the task process holds the snapshot half-way through the
third chunk of the second table (``hold_after_snapshot_rows``, a minute's offset flush
interval, so only the chunk waits store offsets), rows change on both sides of the stored
token and in the table read whole while the task is down, and the restart must skip that
table, read the rest from the stored partition on (that partition again, nothing before it)
and end with the last event of every key equal to the row. The big table has ten rows per
partition, so chunks end inside partitions.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.offsets.file import decode
from cdc.testing.kafka_reader import Event
from tests.integration.cassandra_harness import CassandraHarness, module_harness
from tests.integration.conftest import CassandraInfo
from tests.integration.test_engine_crash import finish, start
from tests.integration.test_snapshot_resume import alive

pytestmark = [pytest.mark.cassandra, pytest.mark.kafka]

PARTITIONS, PER, SMALL, BATCH = 300, 10, 300, 1024  # BATCH: the snapshot's batches of rows
ROWS = PARTITIONS * PER
HOLD = SMALL + 2 * BATCH + BATCH // 2  # held half-way through batch 3 of the big table


@pytest.fixture(scope="module")
def h(
    cassandra: CassandraInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CassandraHarness]:
    yield from module_harness(cassandra, kafka, tmp_path_factory, "csresume")


def stored(offsets: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    if not offsets.exists():
        return {}
    return decode(offsets.read_bytes()).get(cfg["name"], {"server": cfg["topic.prefix"]}) or {}


def last_rows(events: list[Event], key: tuple[str, ...]) -> dict[tuple[Any, ...], Any]:
    """Each key's last row's ``v`` (deleted: absent)."""
    out: dict[tuple[Any, ...], Any] = {}
    for e in events:
        if e.value is None:
            continue  # a tombstone follows its delete
        k = tuple(e.key[c] for c in key)
        if e.op == "d":
            out.pop(k, None)
        else:
            out[k] = e.after["v"]["value"] if isinstance(e.after["v"], dict) else e.after["v"]
    return out


def test_cassandra_snapshot_resumes_at_the_stored_partition(
    h: CassandraHarness, tmp_path: Path
) -> None:
    ks = h.keyspace
    h.cql(f"CREATE TABLE {ks}.a_small (id int PRIMARY KEY, v text) WITH cdc = true")
    h.cql(f"CREATE TABLE {ks}.b_big (p int, c int, v text, PRIMARY KEY (p, c)) WITH cdc = true")
    for i in range(SMALL):
        h.cql(f"INSERT INTO {ks}.a_small (id, v) VALUES ({i}, 'v{i}')")
    insert = h.session.prepare(f"INSERT INTO {ks}.b_big (p, c, v) VALUES (?, ?, ?)")
    for p in range(PARTITIONS):
        for c in range(PER):
            h.session.execute(insert, (p, c, f"v{p}.{c}"))
    token = {int(r[1]): int(r[0]) for r in h.cql(f"SELECT token(p), p FROM {ks}.b_big")}

    cfg = h.config(**{"snapshot.resumable.chunk.size": str(BATCH)})  # a chunk per batch
    offsets, spec = tmp_path / "offsets.json", tmp_path / "spec.json"
    doc = {"kind": "cassandra", "bootstrap": h.kafka, "offsets": {"file": str(offsets)}}
    # a minute's offset flush interval: only the chunk gate stores offsets before the kill
    spec.write_text(
        json.dumps({**doc, "config": cfg, "flush_ms": 60_000, "hold_after_snapshot_rows": HOLD})
    )
    proc = start(spec)
    try:
        deadline = time.monotonic() + 90
        while stored(offsets, cfg).get("snapshot_table") != f"{ks}.b_big" or not stored(
            offsets, cfg
        ).get("snapshot_after"):
            alive(proc)
            assert time.monotonic() < deadline, f"stored offset {stored(offsets, cfg)}"
            time.sleep(0.05)
        while len(h.read(cfg, "b_big", timeout=10, settle=0.1)) < HOLD - SMALL:
            alive(proc)
            assert time.monotonic() < deadline, "half of batch 3 never reached the topic"
    finally:
        proc.kill()  # SIGKILL
        proc.communicate()
    resume = stored(offsets, cfg)
    assert resume["snapshot_done"] == [f"{ks}.a_small"]
    first = h.read(cfg, "b_big", timeout=10, settle=0.3)
    # the stored point: the last row of batch 2, in token order
    at = int(resume["snapshot_after"][0])
    assert at == token[first[2 * BATCH - 1].key["p"]]
    order = sorted(token, key=lambda p: token[p])  # partitions in reading order
    assert [e.key["p"] for e in first[::PER][:5]] == order[:5]

    # while down: changes in the table read whole and on both sides of the stored partition
    before, after = order[1], order[-1]
    h.cql(f"UPDATE {ks}.a_small SET v = 'small, updated' WHERE id = 7")
    h.cql(f"DELETE FROM {ks}.a_small WHERE id = 8")
    h.cql(f"UPDATE {ks}.b_big SET v = 'done, updated' WHERE p = {before} AND c = 3")
    h.cql(f"DELETE FROM {ks}.b_big WHERE p = {before} AND c = 4")
    h.cql(f"UPDATE {ks}.b_big SET v = 'left, updated' WHERE p = {after} AND c = 3")
    h.cql(f"DELETE FROM {ks}.b_big WHERE p = {after} AND c = 4")
    h.cql(f"INSERT INTO {ks}.b_big (p, c, v) VALUES ({PARTITIONS}, 0, 'new')")
    token = {int(r[1]): int(r[0]) for r in h.cql(f"SELECT token(p), p FROM {ks}.b_big")}
    want_small = {(r.id,): r.v for r in h.cql(f"SELECT id, v FROM {ks}.a_small")}
    want_big = {(r.p, r.c): r.v for r in h.cql(f"SELECT p, c, v FROM {ks}.b_big")}
    small_before = len(h.read(cfg, "a_small", timeout=10, settle=0.3))

    spec.write_text(json.dumps({**doc, "config": cfg, "flush_ms": 50}))
    proc = start(spec)
    try:
        deadline = time.monotonic() + 120
        while True:
            big = h.read(cfg, "b_big", timeout=10, settle=0.3)
            small = h.read(cfg, "a_small", timeout=10, settle=0.3)
            got = (last_rows(big, ("p", "c")), last_rows(small, ("id",)))
            if got == (want_big, want_small):
                break
            alive(proc)
            assert time.monotonic() < deadline, (
                f"big: {len(got[0])} keys of {len(want_big)}, "
                f"{sum(got[0].get(k) != v for k, v in want_big.items())} differ; small: "
                f"{sum(got[1].get(k) != v for k, v in want_small.items())} differ"
            )
            time.sleep(0.5)
    finally:
        finish(proc)
    # the table read whole is not read again: only its changes are streamed
    assert all(e.op != "r" for e in small[small_before:])
    # the big one resumed at the stored partition: nothing before it is read again, that
    # partition and every one after it are
    again = [e.key["p"] for e in big[len(first) :] if e.op == "r"]
    assert again[0] == first[2 * BATCH - 1].key["p"]
    assert all(token[p] >= at for p in again)
    reads = Counter((e.key["p"], e.key["c"]) for e in big if e.op == "r")
    twice = {k for k, n in reads.items() if n > 1}
    assert twice and all(token[p] >= at for p, _ in twice)
    assert len(twice) <= BATCH // 2 + PER  # the half batch sent after the stored one, and
    # the rest of the stored partition
    assert set(reads) >= {(p, c) for p in range(PARTITIONS) for c in range(PER)} - {
        (before, 4),
        (after, 4),
    }
