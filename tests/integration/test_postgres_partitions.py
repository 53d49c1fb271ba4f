"""Partitioned tables are captured end to end (issue 25.4): their streamed changes reach the
root table's topic — list, range, hash and multi-level partitioning, rows moved between
partitions, partitions attached and detached while streaming — and a publication that would
publish the leaf partitions instead is fixed (or, when the operator owns it, refused)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import date
from typing import Any

import pytest

from cdc.errors import FatalError
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import Event, PgHarness, read_topic
from tests.integration.test_postgres_publication import stopped

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    with PgHarness(postgres, kafka, f"tm_part_{uuid.uuid4().hex[:8]}") as harness:
        yield harness


def _key(e: Event) -> tuple[Any, ...]:
    return tuple(sorted(e.key.items()))


def final_state(events: list[Event]) -> dict[tuple[Any, ...], Any]:
    """Last image per key, as a consumer applying the topic would hold it."""
    state: dict[tuple[Any, ...], Any] = {}
    for e in events:
        if e.value is None:
            continue
        if e.op == "d":
            state.pop(_key(e), None)
        else:
            state[_key(e)] = e.after["v"]
    return state


def viaroot(h: PgHarness, cfg: dict[str, Any]) -> bool:
    rows = h.sql(
        "SELECT pubviaroot FROM pg_publication WHERE pubname = %s",
        params=(cfg["publication.name"],),
    )
    return bool(rows[0][0])


SCHEMA = (
    # list
    "CREATE TABLE plist (id int, region text, v text, PRIMARY KEY (id, region)) "
    "PARTITION BY LIST (region)",
    "CREATE TABLE plist_eu PARTITION OF plist FOR VALUES IN ('eu')",
    "CREATE TABLE plist_us PARTITION OF plist FOR VALUES IN ('us')",
    # range, its first partition itself hash-partitioned (multi-level)
    "CREATE TABLE prange (id int, day date, v text, PRIMARY KEY (id, day)) "
    "PARTITION BY RANGE (day)",
    "CREATE TABLE prange_2024 PARTITION OF prange FOR VALUES FROM ('2024-01-01') "
    "TO ('2025-01-01') PARTITION BY HASH (id)",
    "CREATE TABLE prange_2024_h0 PARTITION OF prange_2024 FOR VALUES WITH (MODULUS 2, REMAINDER 0)",
    "CREATE TABLE prange_2024_h1 PARTITION OF prange_2024 FOR VALUES WITH (MODULUS 2, REMAINDER 1)",
    "CREATE TABLE prange_2025 PARTITION OF prange FOR VALUES FROM ('2025-01-01') TO ('2026-01-01')",
    # hash
    "CREATE TABLE phash (id int PRIMARY KEY, v text) PARTITION BY HASH (id)",
    "CREATE TABLE phash_0 PARTITION OF phash FOR VALUES WITH (MODULUS 3, REMAINDER 0)",
    "CREATE TABLE phash_1 PARTITION OF phash FOR VALUES WITH (MODULUS 3, REMAINDER 1)",
    "CREATE TABLE phash_2 PARTITION OF phash FOR VALUES WITH (MODULUS 3, REMAINDER 2)",
    "INSERT INTO plist SELECT g, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END, 's' "
    "FROM generate_series(1, 10) g",
    "INSERT INTO prange SELECT g, DATE '2024-06-01' + g * 30, 's' FROM generate_series(1, 10) g",
    "INSERT INTO phash SELECT g, 's' FROM generate_series(1, 10) g",
)


def stream_changes(h: PgHarness) -> None:
    h.sql(
        "INSERT INTO plist VALUES (11, 'eu', 'c'), (12, 'us', 'c')",
        "UPDATE plist SET v = 'u' WHERE id = 2",
        "UPDATE plist SET region = 'eu', v = 'moved' WHERE id = 3",  # us -> eu
        "DELETE FROM plist WHERE id = 4",
        "INSERT INTO prange VALUES (11, '2024-02-02', 'c'), (12, '2025-02-02', 'c')",
        "UPDATE prange SET v = 'u' WHERE id = 1",
        # from a hash leaf two levels down to a direct range partition
        "UPDATE prange SET day = '2025-03-03', v = 'moved' WHERE id = 2",
        "DELETE FROM prange WHERE id = 5",
        "INSERT INTO phash SELECT g, 'c' FROM generate_series(11, 16) g",
        "UPDATE phash SET v = 'u' WHERE id <= 3",
        "UPDATE phash SET id = 100, v = 'moved' WHERE id = 4",  # to another hash partition
        "DELETE FROM phash WHERE id = 6",
    )


def assert_topics_equal_tables(h: PgHarness, cfg: dict[str, Any], counts: dict[str, int]) -> None:
    for table, key_cols in (("plist", "id, region"), ("prange", "id, day"), ("phash", "id")):
        events = read_topic(h.kafka, h.topic(cfg, table), min_count=counts[table])
        rows = h.sql(f"SELECT {key_cols}, v FROM {table}")
        names = [c.strip() for c in key_cols.split(",")]
        expected = {}
        for row in rows:
            key = dict(zip(names, row[:-1], strict=True))
            if "day" in key:
                key["day"] = (key["day"] - date(1970, 1, 1)).days
            expected[tuple(sorted(key.items()))] = row[-1]
        assert final_state(events) == expected, table
        assert {e.value["source"]["table"] for e in events if e.value} == {table}
        ops = [e.op for e in events if e.value is not None]
        assert ops.count("c") >= 2 and ops.count("u") >= 1 and ops.count("d") >= 2, (table, ops)


def test_partitioned_tables_stream_to_the_root_topic(h: PgHarness) -> None:
    h.sql(*SCHEMA)
    cfg = h.config(
        table_include_list="public.plist,public.prange,public.phash",
        publication_autocreate_mode="filtered",
    )
    with h.running(cfg) as run:
        h.wait_streaming(run)
        assert viaroot(h, cfg)
        stream_changes(h)
        # 10 reads + 2 c + 1 u + (d, tombstone, c) + (d, tombstone)
        assert_topics_equal_tables(h, cfg, {"plist": 18, "prange": 18, "phash": 24})

        # A partition attached while streaming: its rows' changes go to the root topic.
        h.sql(
            "CREATE TABLE plist_asia (id int NOT NULL, region text NOT NULL, v text)",
            "ALTER TABLE plist ATTACH PARTITION plist_asia FOR VALUES IN ('asia')",
            "INSERT INTO plist VALUES (20, 'asia', 'attached')",
            "UPDATE plist SET region = 'asia', v = 'to-asia' WHERE id = 11",
        )
        events = read_topic(h.kafka, h.topic(cfg, "plist"), min_count=22)
        assert final_state(events)[(("id", 20), ("region", "asia"))] == "attached"
        assert final_state(events)[(("id", 11), ("region", "asia"))] == "to-asia"

        # A detached partition is a table of its own: its changes are not the root's.
        h.sql(
            "ALTER TABLE plist DETACH PARTITION plist_us",
            "UPDATE plist_us SET v = 'detached' WHERE id = 1",
            "INSERT INTO plist VALUES (21, 'eu', 'after-detach')",
        )
        events = read_topic(h.kafka, h.topic(cfg, "plist"), min_count=23)
        assert "detached" not in {e.after["v"] for e in events if e.after}
        assert final_state(events)[(("id", 21), ("region", "eu"))] == "after-detach"
    assert run.errors == []


def test_default_publication_publishes_via_root(h: PgHarness) -> None:
    """publication.autocreate.mode=all_tables (the default) and no include list."""
    h.sql(
        "CREATE TABLE pdefault (id int PRIMARY KEY, v text) PARTITION BY RANGE (id)",
        "CREATE TABLE pdefault_lo PARTITION OF pdefault FOR VALUES FROM (0) TO (100)",
        "CREATE TABLE pdefault_hi PARTITION OF pdefault FOR VALUES FROM (100) TO (200)",
    )
    cfg = h.config(table_include_list="public.pdefault", snapshot_mode="never")
    with h.running(cfg) as run:
        h.wait_streaming(run)
        assert viaroot(h, cfg)
        h.sql(
            "INSERT INTO pdefault VALUES (1, 'a'), (150, 'b')",
            "UPDATE pdefault SET id = 160 WHERE id = 1",
        )
        events = read_topic(h.kafka, h.topic(cfg, "pdefault"), min_count=5)
    assert [(e.op, e.key["id"]) for e in events] == [
        ("c", 1),
        ("c", 150),
        ("d", 1),
        (None, 1),
        ("c", 160),
    ]
    assert read_topic(h.kafka, h.topic(cfg, "pdefault_lo"), timeout=2) == []


def test_leaf_relations_are_routed_to_the_root(h: PgHarness) -> None:
    """Even when the publication publishes leaf partitions (publish_via_partition_root turned
    off behind the connector's back), their changes go to the root table's topic."""
    h.sql(
        "CREATE TABLE pleaf (id int PRIMARY KEY, v text) PARTITION BY LIST (id)",
        "CREATE TABLE pleaf_1 PARTITION OF pleaf FOR VALUES IN (1, 2)",
        "CREATE TABLE pleaf_2 PARTITION OF pleaf FOR VALUES IN (3, 4)",
    )
    cfg = h.config(
        table_include_list="public.pleaf",
        publication_autocreate_mode="filtered",
        snapshot_mode="never",
    )
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql(
            f"ALTER PUBLICATION {cfg['publication.name']} SET (publish_via_partition_root = false)",
            "INSERT INTO pleaf VALUES (1, 'a'), (3, 'b')",
            "UPDATE pleaf SET v = 'c' WHERE id = 3",
        )
        events = read_topic(h.kafka, h.topic(cfg, "pleaf"), min_count=3)
    assert [(e.op, e.key["id"], e.value["source"]["table"]) for e in events] == [
        ("c", 1, "pleaf"),
        ("c", 3, "pleaf"),
        ("u", 3, "pleaf"),
    ]
    assert read_topic(h.kafka, h.topic(cfg, "pleaf_2"), timeout=2) == []


def test_operator_publication_without_viaroot_is_refused(h: PgHarness) -> None:
    h.sql(
        "CREATE TABLE pown (id int PRIMARY KEY) PARTITION BY HASH (id)",
        "CREATE TABLE pown_0 PARTITION OF pown FOR VALUES WITH (MODULUS 1, REMAINDER 0)",
    )
    cfg = h.config(
        table_include_list="public.pown",
        publication_autocreate_mode="disabled",
        snapshot_mode="never",
    )
    h.sql(f"CREATE PUBLICATION {cfg['publication.name']} FOR TABLE pown")
    run = h.start(cfg)
    stopped(run)
    assert run.errors and isinstance(run.errors[0], FatalError), run.errors
    message = str(run.errors[0])
    assert "public.pown" in message and "partitioned" in message
    assert (
        f"ALTER PUBLICATION {cfg['publication.name']} SET (publish_via_partition_root = true)"
        in message
    )

    h.sql(f"ALTER PUBLICATION {cfg['publication.name']} SET (publish_via_partition_root = true)")
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO pown VALUES (7)")
        events = read_topic(h.kafka, h.topic(cfg, "pown"), min_count=1)
    assert [(e.op, e.key["id"]) for e in events] == [("c", 7)]
