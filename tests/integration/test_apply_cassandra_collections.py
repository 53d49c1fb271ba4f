"""End to end on the real node: non-frozen sets and maps written by element (``s = s + {...}``,
``s = s - {...}``, ``m[k] = v``, ``DELETE m[k]``) apply into Delta as Cassandra applies them,
and the table equals ``SELECT *`` after every batch (deltas.py); user-defined types apply as
structs.

Before the connector's cells carried what a write removed, each such write made the column
just the elements it added: every batch below but the first left a different table (checked).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.apply.job import ApplyJob
from cdc.offsets.memory import MemoryOffsetStore
from tests.integration.cassandra_harness import CassandraHarness, module_harness
from tests.integration.conftest import CassandraInfo
from tests.integration.test_apply_acceptance import job_config

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.cassandra]

COLUMNS = ("id", "line", "tags", "nums", "attrs", "note")


@pytest.fixture(scope="module")
def h(
    cassandra: CassandraInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CassandraHarness]:
    yield from module_harness(cassandra, kafka, tmp_path_factory, "cscol")


def _plain(col: str, value: Any) -> Any:
    """A value compared as a set (sets, in any order), a map with text keys, or as it is."""
    if value is None or col in ("id", "line", "note"):
        return value
    if col == "attrs":
        return {str(k): v for k, v in dict(value).items()}
    return sorted(value)


def test_sets_and_maps_written_by_element_apply_as_cassandra_does(
    spark: Any, h: CassandraHarness, kafka: str, tmp_path: Path
) -> None:
    t = f"{h.keyspace}.carts"
    h.cql(
        f"CREATE TABLE {t} (id int, line int, tags set<text>, nums set<int>, "
        "attrs map<int, text>, note text, PRIMARY KEY (id, line)) WITH cdc = true"
    )
    cfg = h.config(**{"snapshot.mode": "never"})
    topic = h.topic(cfg, "carts")
    job = ApplyJob(spark, job_config(kafka, tmp_path, [topic]))
    sent = 0

    def cql(*statements: str, events: int = 1) -> None:
        nonlocal sent
        for s in statements:
            h.cql(s.format(t=t))
        sent += events * len(statements)

    def lake() -> dict[tuple[int, int], dict[str, Any]]:
        df = spark.read.format("delta").load(job.cfg.table_location(topic.replace(".", "_")))
        return {(r["id"], r["line"]): {c: _plain(c, r[c]) for c in COLUMNS} for r in df.collect()}

    def source() -> dict[tuple[int, int], dict[str, Any]]:
        rows = h.cql(f"SELECT {', '.join(COLUMNS)} FROM {t}")
        return {
            (r.id, r.line): {c: _plain(c, v) for c, v in zip(COLUMNS, r, strict=True)} for r in rows
        }

    def apply() -> dict[tuple[int, int], dict[str, Any]]:
        h.read(cfg, "carts", min_count=sent)
        job.run(timeout=240)
        rows = lake()
        assert rows == source()
        return rows

    with h.running(cfg, MemoryOffsetStore()) as run:
        h.wait_streaming(run)
        # one batch: whole writes, then element-wise ones on top, in order
        cql(
            "INSERT INTO {t} (id, line, tags, nums, attrs) "
            "VALUES (1, 1, {{'a', 'b'}}, {{1, 2}}, {{1: 'one'}})",
            "UPDATE {t} SET tags = tags + {{'c'}}, nums = nums - {{1}} WHERE id = 1 AND line = 1",
            "UPDATE {t} SET tags = tags - {{'a', 'zz'}}, attrs[2] = 'two' "
            "WHERE id = 1 AND line = 1",
            # deltas of a row the table never held: applied to no collection
            "UPDATE {t} SET tags = tags + {{'p', 'q'}}, nums = nums + {{7}} "
            "WHERE id = 2 AND line = 1",
            "INSERT INTO {t} (id, line, tags, note) VALUES (3, 1, {{'x'}}, 'n')",
            "UPDATE {t} SET attrs = attrs + {{5: 'five', 6: 'six'}} WHERE id = 4 AND line = 1",
        )
        rows = apply()
        assert rows[(1, 1)]["tags"] == ["b", "c"] and rows[(1, 1)]["nums"] == [2]
        assert rows[(1, 1)]["attrs"] == {"1": "one", "2": "two"}

        # the next batches' deltas apply to the stored collections
        cql(
            "UPDATE {t} SET tags = tags + {{'d'}}, attrs = attrs - {{1}} WHERE id = 1 AND line = 1",
            "UPDATE {t} SET tags = tags - {{'q'}}, nums = nums + {{8}} WHERE id = 2 AND line = 1",
            "UPDATE {t} SET note = 'kept' WHERE id = 3 AND line = 1",
            "UPDATE {t} SET tags = tags + {{'y'}} WHERE id = 3 AND line = 1",
            # an overwrite, then a delta on top of it, in one batch
            "UPDATE {t} SET attrs = {{9: 'nine'}} WHERE id = 4 AND line = 1",
            "UPDATE {t} SET attrs[10] = 'ten' WHERE id = 4 AND line = 1",
        )
        cql("DELETE attrs[2] FROM {t} WHERE id = 1 AND line = 1")
        rows = apply()
        assert rows[(1, 1)]["tags"] == ["b", "c", "d"] and rows[(1, 1)]["attrs"] is None
        assert rows[(2, 1)]["tags"] == ["p"] and rows[(2, 1)]["nums"] == [7, 8]
        assert rows[(3, 1)]["tags"] == ["x", "y"] and rows[(4, 1)]["attrs"] == {
            "9": "nine",
            "10": "ten",
        }

        # a row delete, then a delta: the stored set is gone, the delta starts a new one; a
        # delta after a partition delete likewise; a removal of the last element
        cql("DELETE FROM {t} WHERE id = 3 AND line = 1", events=2)
        cql(
            "UPDATE {t} SET tags = tags + {{'new'}} WHERE id = 3 AND line = 1",
            "UPDATE {t} SET nums = nums - {{2}} WHERE id = 1 AND line = 1",
        )
        cql("DELETE FROM {t} WHERE id = 4", events=2)
        cql("UPDATE {t} SET attrs[11] = 'eleven' WHERE id = 4 AND line = 1")
        # a new job: nothing of the deltas is kept in memory between runs
        job = ApplyJob(spark, job.cfg)
        rows = apply()
    assert rows[(3, 1)] == {**dict.fromkeys(COLUMNS), "id": 3, "line": 1, "tags": ["new"]}
    assert rows[(1, 1)]["nums"] is None
    assert rows[(4, 1)]["attrs"] == {"11": "eleven"}


def _udt(value: Any) -> Any:
    """A Cassandra UDT value (the driver's named tuple) or a Spark struct (Row) as a dict,
    recursively; lists of them as lists."""
    if value is None:
        return None
    if hasattr(value, "asDict"):
        return {k: _udt(v) for k, v in value.asDict().items()}
    if hasattr(value, "_fields"):
        return {k: _udt(getattr(value, k)) for k in value._fields}
    if isinstance(value, list | tuple):
        return [_udt(v) for v in value]
    return value


def test_user_defined_types_apply_as_structs(
    spark: Any, h: CassandraHarness, kafka: str, tmp_path: Path
) -> None:
    """Frozen UDT columns (nested, in a list) become Spark structs; the snapshot, inserts,
    partial updates and a delete apply so that the table equals ``SELECT *``."""
    ks = h.keyspace
    h.cql(f"CREATE TYPE {ks}.address (street text, city text, zip int)")
    h.cql(f"CREATE TYPE {ks}.person (name text, addr frozen<address>)")
    t = f"{ks}.people"
    h.cql(
        f"CREATE TABLE {t} (id int PRIMARY KEY, home frozen<address>, "
        "places list<frozen<address>>, who frozen<person>, note text) WITH cdc = true"
    )
    h.cql(
        f"INSERT INTO {t} (id, home, who) VALUES (1, {{street: 's1', city: 'c1', zip: 1}}, "
        "{name: 'ann', addr: {street: 's2', city: null, zip: 2}})"
    )
    cfg = h.config(**{"snapshot.mode": "initial", "table.include.list": rf"{ks}\.people"})
    topic = h.topic(cfg, "people")
    job = ApplyJob(spark, job_config(kafka, tmp_path, [topic]))
    names = ("id", "home", "places", "who", "note")

    def lake() -> dict[int, dict[str, Any]]:
        df = spark.read.format("delta").load(job.cfg.table_location(topic.replace(".", "_")))
        return {r["id"]: {c: _udt(r[c]) for c in names} for r in df.collect()}

    def source() -> dict[int, dict[str, Any]]:
        rows = h.cql(f"SELECT {', '.join(names)} FROM {t}")
        return {r.id: {c: _udt(getattr(r, c)) for c in names} for r in rows}

    time.sleep(1.2)  # durable before the snapshot position: no streamed copy
    with h.running(cfg, MemoryOffsetStore()) as run:
        h.wait_streaming(run)
        h.cql(
            f"INSERT INTO {t} (id, places, note) VALUES (2, [{{street: 'p', city: 'q', zip: 3}}, "
            "{street: 'r', city: null, zip: null}], 'n')"
        )
        h.cql(f"UPDATE {t} SET home = {{street: 's9', city: 'c9', zip: 9}} WHERE id = 1")
        h.cql(f"UPDATE {t} SET who = {{name: 'bob'}} WHERE id = 3")
        h.read(cfg, "people", min_count=4)
        job.run(timeout=240)
        rows = lake()
        assert rows == source()
        assert rows[1]["home"] == {"street": "s9", "city": "c9", "zip": 9}
        assert rows[1]["who"] == {"name": "ann", "addr": {"street": "s2", "city": None, "zip": 2}}
        assert rows[3]["who"] == {"name": "bob", "addr": None}
        h.cql(f"DELETE home FROM {t} WHERE id = 1")
        h.cql(f"DELETE FROM {t} WHERE id = 2")
        h.read(cfg, "people", min_count=7)
        job.run(timeout=240)
    assert lake() == source()
