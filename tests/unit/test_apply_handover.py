"""Unavailable values across primary-key changes (handover.py), without Spark.

``Lake`` plays the job's driver over a dict "table": one PartitionProcessor per Kafka
partition (as Spark's tasks), ``handover.step`` with lookups from the dict, the key-change state
saved and reloaded between batches (a job restart), and a MERGE with the job's guards
(position, deleted keys, placeholder columns keep the stored value unless the fill is newer).
"""

from __future__ import annotations

import logging
import random
import zlib
from typing import Any

import orjson
import pytest

from cdc.apply import keychanges as kc
from cdc.apply.events import NEW_KEY_HEADER, OLD_KEY_HEADER, ParseSettings
from cdc.apply.fold import Image
from cdc.apply.handover import Lookup, decode_image, key_text, lookup_keys, step
from cdc.apply.policy import RESERVED
from cdc.apply.synthetic import SyntheticTable, col, pg
from cdc.apply.worker import PartitionProcessor, WorkerSettings

PH = "__debezium_unavailable_value"
T = SyntheticTable(
    "docs",
    [("id", col("int32", optional=False)), ("name", col("string")), ("big", col("string"))],
    ["id"],
)
KEY = ("id",)
Record = tuple[int, bytes, bytes, list[tuple[str, bytes | None]] | None]  # partition, k, v, h


def ins(i: int, lsn: int, name: str, big: str) -> list[tuple[bytes, bytes, Any]]:
    key, value = T.record("c", {"id": i, "name": name, "big": big}, pg(lsn))
    return [(key, value, None)]


def upd(i: int, lsn: int, name: str, big: str = PH) -> list[tuple[bytes, bytes, Any]]:
    key, value = T.record("u", {"id": i, "name": name, "big": big}, pg(lsn))
    return [(key, value, None)]


def delete(i: int, lsn: int) -> list[tuple[bytes, bytes, Any]]:
    key, value = T.record("d", {"id": i, "name": None, "big": None}, pg(lsn))
    return [(key, value, None)]


def key_change(old: int, new: int, lsn: int, name: str) -> tuple[Any, Any]:
    """(old key's delete, new key's create) of ``UPDATE SET id = new`` with ``big`` unchanged
    and stored out of line: the create carries the placeholder."""
    dk, dv = T.record("d", {"id": old, "name": None, "big": None}, pg(lsn))
    ck, cv = T.record("c", {"id": new, "name": name, "big": PH}, pg(lsn))
    return (
        [(dk, dv, [(NEW_KEY_HEADER, orjson.dumps({"id": new}))])],
        [(ck, cv, [(OLD_KEY_HEADER, orjson.dumps({"id": old}))])],
    )


class Lake:
    def __init__(self) -> None:
        self.table: dict[int, dict[str, Any]] = {}
        self.deleted: dict[int, tuple[int, ...]] = {}
        self.side: list[tuple[str, str, str]] = []  # the key-change side table's rows
        self.log: dict[int, list[Any]] = {}  # partition -> records (Kafka)
        self.done: dict[int, int] = {}  # partition -> next offset to apply

    def send(self, partition: int, records: list[tuple[bytes, bytes, Any]]) -> None:
        self.log.setdefault(partition, []).extend(records)

    def batch(self, upto: dict[int, int] | None = None) -> None:
        """Applies, per partition, the records from the last applied offset up to ``upto``
        (exclusive; default: all): a micro-batch."""
        ranges = {
            p: (self.done.get(p, 0), (upto or {}).get(p, len(recs))) for p, recs in self.log.items()
        }
        self.apply(ranges)
        for p, (_, end) in ranges.items():
            self.done[p] = max(self.done.get(p, 0), end)

    def apply(self, ranges: dict[int, tuple[int, int]]) -> None:
        """One micro-batch over explicit offset ranges (a replay when already applied)."""
        rows: list[dict[str, Any]] = []
        images: list[Image] = []
        for p, (start, end) in ranges.items():
            proc = PartitionProcessor(WorkerSettings(ParseSettings(), "evolve", reserved=RESERVED))
            for offset in range(start, end):
                key, value, headers = self.log[p][offset]
                proc.record(T.topic, p, offset, key, value, headers)
            proc.finish()
            data = proc.take()
            got = [{k: v[i] for k, v in data.items()} for i in range(len(data["kind"]))]
            assert not [r for r in got if r["kind"] == "error"]
            rows += [r for r in got if r["kind"] == "row"]
            images += [decode_image(orjson.loads(r["info"])) for r in got if r["kind"] == "image"]
        state = kc.decoded(self.side)  # a restarted job reloads the side table every batch
        held = set(state.pending)
        incoming = [r for r in rows if r["refs"] or r["key_json"] in held]
        rest = [r for r in rows if r not in incoming]
        wanted = lookup_keys(state, images, incoming, KEY)
        out = step(state, images, incoming, {key_text(k): self.lookup(k) for k in wanted}, KEY)
        for rec in [*rest, *out.merge]:
            self.merge(rec)
        self.side = kc.encoded(state)

    def lookup(self, key: dict[str, Any]) -> Lookup:
        row = self.table.get(key["id"])
        return Lookup(
            tuple(row["__pos"]) if row else None,
            {"name": row["name"], "big": row["big"]} if row else {},
            self.deleted.get(key["id"]),
        )

    def merge(self, rec: dict[str, Any]) -> None:
        row = orjson.loads(rec["row_json"])
        pos = tuple(rec["pos"])
        k = row["id"]
        if k in self.deleted and pos <= self.deleted[k]:
            return
        stored = self.table.get(k)
        if stored is not None and pos <= tuple(stored["__pos"]):
            return
        if rec["op"] == "d":
            self.table.pop(k, None)
            self.deleted[k] = max(pos, self.deleted.get(k, ()))
            return
        for c in rec["unavailable"] or ():
            row[c] = stored[c] if stored else None
        for c, p in dict(rec["fills"] or {}).items():  # a list of pairs from take()
            if stored is not None and tuple(stored["__pos"]) > tuple(p):
                row[c] = stored[c]
        row["__pos"] = pos
        self.table[k] = row

    def rows(self) -> dict[int, tuple[str | None, str | None]]:
        assert all(PH not in (r["name"], r["big"]) for r in self.table.values())
        return {k: (r["name"], r["big"]) for k, r in sorted(self.table.items())}


def test_key_change_in_one_batch_takes_the_old_keys_value() -> None:
    lake = Lake()
    d, c = key_change(1, 2, 20, "moved")
    lake.send(0, ins(1, 10, "a", "BIG1") + d)
    lake.send(1, c)
    lake.batch()
    assert lake.rows() == {2: ("moved", "BIG1")}
    assert [kind for kind, _, _ in lake.side] == ["image"]  # nothing held
    lake.batch()  # the next batch sees the new key stored: the image is collected
    assert lake.side == [] and lake.rows() == {2: ("moved", "BIG1")}


def test_new_key_ahead_of_a_lagging_old_key_partition_waits_for_the_state_at_the_change() -> None:
    lake = Lake()
    d, c = key_change(1, 2, 30, "moved")
    lake.send(0, ins(1, 10, "a", "OLD"))
    lake.batch()
    lake.send(0, upd(1, 20, "a2", "NEW") + d)  # old key's partition lags
    lake.send(1, c)
    lake.batch(upto={0: 1, 1: 1})  # the create is applied, the old key's events are not
    assert lake.rows() == {1: ("a", "OLD")}  # held: never filled from the state before 20
    lake.batch(upto={0: 2})  # the update only: still not the state at the key change
    assert lake.rows() == {1: ("a2", "NEW")}
    lake.batch()
    assert lake.rows() == {2: ("moved", "NEW")}


def test_old_key_deleted_in_an_earlier_batch_and_reinserted_hands_over_its_last_image() -> None:
    lake = Lake()
    d, c = key_change(1, 2, 30, "moved")
    lake.send(0, ins(1, 10, "a", "V10") + upd(1, 20, "b", "V20") + d)
    lake.batch()
    assert lake.rows() == {}
    lake.send(0, ins(1, 40, "again", "V40"))  # the old key lives again
    lake.batch()
    lake.send(1, c)  # the new key's partition lags by two batches
    lake.batch()
    assert lake.rows() == {1: ("again", "V40"), 2: ("moved", "V20")}


def test_later_placeholder_update_of_a_held_key_inherits_the_handed_over_value() -> None:
    lake = Lake()
    d, c = key_change(1, 2, 30, "moved")
    lake.send(0, ins(1, 10, "a", "V10"))
    lake.batch()
    lake.send(0, d)
    lake.send(1, c + upd(2, 40, "renamed"))
    lake.batch(upto={0: 1})
    lake.apply({1: (0, 1)})  # a replay of the create while the newer update is held
    assert lake.rows() == {1: ("a", "V10")}
    lake.batch()
    assert lake.rows() == {2: ("renamed", "V10")}


def test_chain_of_key_changes_across_three_lagging_partitions() -> None:
    """A -> B at 20 (A in partition 0), B -> C at 30 (B in 1), C updated at 40 (C in 2);
    partitions arrive newest first."""
    lake = Lake()
    d_ab, c_ab = key_change(1, 2, 20, "b")
    d_bc, c_bc = key_change(2, 3, 30, "c")
    lake.send(0, ins(1, 10, "a", "BIG") + d_ab)
    lake.send(1, c_ab + d_bc)
    lake.send(2, c_bc + upd(3, 40, "c2"))
    lake.batch(upto={0: 0, 1: 0})
    assert lake.rows() == {}
    lake.batch(upto={0: 0})
    assert lake.rows() == {}
    lake.batch()
    assert lake.rows() == {3: ("c2", "BIG")}


def test_replays_of_any_range_change_nothing() -> None:
    lake = Lake()
    d_ab, c_ab = key_change(1, 2, 20, "b")
    d_bc, c_bc = key_change(2, 3, 30, "c")
    d_ca, c_ca = key_change(3, 1, 50, "back")  # and back to the first key
    lake.send(0, ins(1, 10, "a", "BIG") + d_ab + ins(9, 11, "x", "X") + c_ca)
    lake.send(1, c_ab + d_bc)
    lake.send(2, c_bc + upd(3, 40, "c2", "BIG2") + d_ca)
    lake.batch(upto={0: 2, 1: 1, 2: 1})
    lake.batch(upto={0: 3})
    lake.batch()
    final = {1: ("back", "BIG2"), 9: ("x", "X")}
    assert lake.rows() == final
    for start in range(4):
        for end in range(start + 1, 5):
            lake.apply({p: (min(start, len(r)), min(end, len(r))) for p, r in lake.log.items()})
            assert lake.rows() == final, (start, end)
    lake.batch()
    assert lake.side == []


def test_replayed_create_after_its_image_was_collected_is_dropped_not_held() -> None:
    lake = Lake()
    d, c = key_change(1, 2, 20, "moved")
    lake.send(0, ins(1, 10, "a", "BIG") + d)
    lake.send(1, c)
    lake.batch()
    lake.batch()
    assert lake.side == []
    lake.apply({1: (0, 1)})  # the create alone, again
    assert lake.side == [] and lake.rows() == {2: ("moved", "BIG")}


def test_key_change_re_sent_at_later_offsets_keeps_the_handed_over_value() -> None:
    """A connector restart re-sends the delete and the create (same source position, higher
    offsets) after the image was collected and the old key deleted: not a NULL."""
    lake = Lake()
    d, c = key_change(1, 2, 20, "moved")
    lake.send(0, ins(1, 10, "a", "BIG") + d + c)
    lake.batch()
    lake.batch()
    assert lake.side == []
    lake.send(0, d + c)
    lake.batch()
    assert lake.rows() == {2: ("moved", "BIG")}
    lake.send(1, c)  # and once more, in a partition of its own
    lake.batch()
    assert lake.rows() == {2: ("moved", "BIG")} and lake.side == []


def test_old_key_never_seen_by_the_lake_gives_null_not_a_placeholder(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lake = Lake()
    d, c = key_change(1, 2, 20, "moved")
    lake.send(0, d)
    lake.send(1, c)
    with caplog.at_level(logging.WARNING, logger="tidemark.apply"):
        lake.batch()
    assert lake.rows() == {2: ("moved", None)}
    # The warning names the key written with NULL and the old key that had no value.
    [warning] = [r.getMessage() for r in caplog.records]
    assert 'key {"id":2}: column big' in warning and 'from old key {"id":1}' in warning


def _random_workload(rng: random.Random) -> tuple[list[Any], dict[int, tuple[str, str]]]:
    """Records of a random workload full of key changes (chains, reused keys, placeholder
    updates, deletes with tombstones), starting from a snapshot or from inserts, and the source
    table it leaves."""
    source: dict[int, tuple[str, str]] = {}
    records: list[Any] = []
    lsn = 100
    snapshot = rng.random() < 0.5
    for i in range(1, 31):
        lsn += 1
        source[i] = (f"n{i}", f"b{i}")
        if snapshot:  # every snapshot record has the same source position
            key, value = T.record("r", {"id": i, "name": f"n{i}", "big": f"b{i}"}, pg(50))
            records.append((key, value, None))
        else:
            records += ins(i, lsn, f"n{i}", f"b{i}")
    live, freed, next_id = list(source), [], 1000
    for _ in range(150):
        lsn += 1
        r, target = rng.random(), rng.choice(live)
        if r < 0.35:
            next_id += 1
            name = source[target][0] + ">"
            d, c = key_change(target, next_id, lsn, name)
            records += [*d, (d[0][0], None, None), *c]
            source[next_id] = (name, source.pop(target)[1])
            live[live.index(target)] = next_id
            freed.append(target)
        elif r < 0.55:
            name = source[target][0] + "+"
            records += upd(target, lsn, name)
            source[target] = (name, source[target][1])
        elif r < 0.62:
            records += upd(target, lsn, source[target][0], f"B{lsn}")
            source[target] = (source[target][0], f"B{lsn}")
        elif r < 0.7 and len(live) > 10:
            d = delete(target, lsn)
            records += [*d, (d[0][0], None, None)]
            del source[target]
            live.remove(target)
            freed.append(target)
        else:
            if freed and rng.random() < 0.6:
                new = freed.pop(rng.randrange(len(freed)))
            else:
                next_id += 1
                new = next_id
            source[new] = (f"n{new}", f"I{lsn}")
            records += ins(new, lsn, f"n{new}", f"I{lsn}")
            live.append(new)
    return records, source


@pytest.mark.parametrize("seed", range(40))
def test_random_key_change_workloads_across_lagging_partitions_and_replays(seed: int) -> None:
    """As the Spark test does with a real capture: keys routed to 3 partitions, partition 0
    lagging, replayed ranges spliced in, micro-batches split across partitions by lag; no NULL
    at any stage and the source's table at the end."""
    rng = random.Random(seed)
    records, source = _random_workload(rng)
    parts: list[list[Any]] = [[], [], []]
    for rec in records:
        parts[zlib.crc32(rec[0]) % 3].append(rec)
    third = len(parts[0]) // 3
    start = rng.randint(0, 20)
    stages = [
        [(1, parts[1]), (2, parts[2]), (0, parts[0][:third])],
        [(0, parts[0][third:]), (1, parts[1][start : start + 60]), (2, parts[2][:30])],
        [(0, parts[0][max(0, third - 30) : third + 90]), (1, parts[1][:50])],
    ]
    per_batch = rng.choice([20, 40, 60, 90])
    lake = Lake()
    for p in range(3):
        lake.send(p, [])
    for stage in stages:
        for p, recs in stage:
            lake.send(p, recs)
        while lag := {p: len(recs) - lake.done.get(p, 0) for p, recs in lake.log.items()}:
            total = sum(lag.values())
            if not total:
                break
            share = 1.0 if total <= per_batch else per_batch / total
            upto = {
                p: lake.done.get(p, 0) + max(1, int(n * share)) if n else lake.done.get(p, 0)
                for p, n in lag.items()
            }
            lake.batch(upto)
        assert [k for k, r in lake.table.items() if r["big"] is None] == []
    assert lake.rows() == dict(sorted(source.items()))
