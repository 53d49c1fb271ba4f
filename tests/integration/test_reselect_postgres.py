"""The reselect post-processor on PostgreSQL (issue 22 parts 2 and 3): unchanged TOASTed
values (an incompressible text far over the 2 kB TOAST threshold) re-read by key, in batches;
a row deleted before the reselect keeps the placeholder; a failing reselect under each
``event.processing.failure.handling.mode``; the include/exclude lists and NULL reselect; and
the start-up warning about tables whose out-of-line columns updates will not carry.

Changes are written while no connector runs (each test creates its slots first), so the
reselect runs after all of them: that is how a row is gone, or newer, when it is re-read."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from cdc.errors import ConversionError
from connectors.postgres import PostgresConnector
from connectors.postgres.reselect import warn_unavailable_values
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness, read_topic

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

PH = "__debezium_unavailable_value"
RESELECT = "io.debezium.processors.reselect.ReselectColumnsPostProcessor"
#: 8,000 random hex digits: pglz finds no repeats to compress, so the value is TOASTed
BIG = "(SELECT string_agg(md5(random()::text || g), '') FROM generate_series(1, 250) g)"


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    with PgHarness(postgres, kafka, f"tm_rs_{uuid.uuid4().hex[:8]}") as harness:
        yield harness


def reselect_config(h: PgHarness, table: str, **reselect: str) -> dict[str, Any]:
    """A connector of ``table`` with the reselect post-processor, its slot and publication
    created now (so it streams every change made from here on)."""
    cfg = h.config(
        table_include_list=f"public.{table}",
        snapshot_mode="never",
        publication_autocreate_mode="disabled",
    )
    cfg.update(
        {
            "post.processors": "reselector",
            "reselector.type": RESELECT,
            **{f"reselector.reselect.{k}": v for k, v in reselect.items()},
        }
    )
    h.sql(
        f"CREATE PUBLICATION {cfg['publication.name']} FOR TABLE {table}",
        f"SELECT pg_create_logical_replication_slot('{cfg['slot.name']}', 'pgoutput')",
    )
    return cfg


def docs(h: PgHarness, table: str, rows: int) -> dict[int, str]:
    """A table of ``rows`` rows with a TOASTed ``big`` column; returns the big values."""
    h.sql(
        f"CREATE TABLE {table} (id int PRIMARY KEY, big text, n int, note text)",
        f"INSERT INTO {table} SELECT g, {BIG}, 0, 'note' || g FROM generate_series(1, {rows}) g",
    )
    return dict(h.sql(f"SELECT id, big FROM {table} ORDER BY id"))


def updates(events: list[Any]) -> list[dict[str, Any]]:
    return [e.after for e in events if e.op == "u"]


def test_unchanged_toast_values_are_reselected_in_one_query(h: PgHarness) -> None:
    big = docs(h, "rs1", 4)
    cfg = reselect_config(h, "rs1")
    h.sql("UPDATE rs1 SET n = 1")  # four events, none carries big
    h.sql("DELETE FROM rs1 WHERE id = 2")  # gone before the reselect runs
    h.sql(f"UPDATE rs1 SET big = {BIG} WHERE id = 4")  # newer than the first event of row 4
    h.sql("UPDATE rs1 SET note = NULL WHERE id = 3")
    h.sql("UPDATE rs1 SET id = 10 WHERE id = 1")  # key change: the create of 10 lacks big
    now = dict(h.sql("SELECT id, big FROM rs1"))
    assert now[4] != big[4] and len(big[1]) == 8000
    with h.running(cfg) as run:
        h.wait_streaming(run)
        events = read_topic(h.kafka, h.topic(cfg, "rs1"), min_count=11)
        post = run.engine.dispatcher.post_processor
        assert post is not None
        queries = post.queries
    first = updates(events)[:4]
    assert [a["id"] for a in first] == [1, 2, 3, 4]
    # key 1 moved to 10 before the reselect: no row under key 1 any more, placeholder kept
    assert first[0] == {"id": 1, "big": PH, "n": 1, "note": "note1"}
    # deleted before the reselect: the placeholder stays, nothing fails
    assert first[1] == {"id": 2, "big": PH, "n": 1, "note": "note2"}
    # only the missing column is re-read: note keeps the event's value
    assert first[2] == {"id": 3, "big": big[3], "n": 1, "note": "note3"}
    assert first[3]["big"] == now[4]  # newer than this event: Debezium's trade-off
    assert [e.key for e in events if e.op == "d"] == [{"id": 2}, {"id": 1}]
    assert updates(events)[-1] == {"id": 3, "big": big[3], "n": 1, "note": None}
    create = [e for e in events if e.op == "c"]
    assert [(e.key, e.after["big"]) for e in create] == [({"id": 10}, big[1])]
    assert create[0].headers["__debezium.oldkey"] == b'{"id":1}'
    # six events needed a reselect; the four of one statement share a query
    assert queries < 6


def test_include_exclude_lists_and_null_values(h: PgHarness) -> None:
    big = docs(h, "rs2", 2)
    include = reselect_config(
        h, "rs2", **{"columns.include.list": r"public\.rs2:BIG", "null.values": "false"}
    )
    exclude = reselect_config(h, "rs2", **{"columns.exclude.list": r"public\.rs2:big"})
    plain = reselect_config(h, "rs2")
    h.sql("UPDATE rs2 SET n = 1, note = NULL WHERE id = 1")
    h.sql("UPDATE rs2 SET note = 'later' WHERE id = 1")
    results = {}
    for name, cfg in (("include", include), ("exclude", exclude), ("plain", plain)):
        with h.running(cfg) as run:
            h.wait_streaming(run)
            results[name] = updates(read_topic(h.kafka, h.topic(cfg, "rs2"), min_count=2))[0]
    # include list (matched case-insensitively), null.values=false: big only
    assert results["include"] == {"id": 1, "big": big[1], "n": 1, "note": None}
    # exclude list: big keeps its placeholder; the NULL note is re-read (its value now)
    assert results["exclude"] == {"id": 1, "big": PH, "n": 1, "note": "later"}
    assert results["plain"] == {"id": 1, "big": big[1], "n": 1, "note": "later"}


@pytest.fixture
def limited_role(h: PgHarness) -> Iterator[str]:
    """A login role that may stream but may not read rs3.big: its reselect fails."""
    role = f"tm_rs_{uuid.uuid4().hex[:8]}"
    h.sql(
        f"CREATE ROLE {role} LOGIN REPLICATION PASSWORD 'pw'",
        f"GRANT SELECT (id, n, note) ON rs3 TO {role}",
    )
    yield role
    h.sql(f"REVOKE ALL ON rs3 FROM {role}", f"DROP ROLE {role}")


@pytest.fixture
def rs3(h: PgHarness) -> dict[int, str]:
    return docs(h, "rs3", 1)


def test_a_failing_reselect_follows_the_failure_handling_mode(
    h: PgHarness, rs3: dict[int, str], limited_role: str
) -> None:
    modes = ("fail", "warn", "skip", "dead-letter")
    cfgs = {}
    for mode in modes:
        cfg = reselect_config(h, "rs3", **{"columns.include.list": r"public\.rs3:big"})
        cfg.update(
            {
                "database.user": limited_role,
                "database.password": "pw",
                "event.processing.failure.handling.mode": mode,
                "errors.deadletterqueue.topic.name": cfg["name"] + ".dlq",
            }
        )
        cfgs[mode] = cfg
    h.sql("INSERT INTO rs3 VALUES (2, 'small', 0, 'x')")  # needs nothing: delivered first
    h.sql("UPDATE rs3 SET n = 1 WHERE id = 1")  # big unchanged: reselect denied
    seen = {}
    for mode in modes:
        cfg = cfgs[mode]
        topic = h.topic(cfg, "rs3")
        if mode == "fail":
            with pytest.raises(ConversionError) as err, h.running(cfg) as run:
                h.wait_streaming(run)
                read_topic(h.kafka, topic, min_count=1)
                deadline_events(run)
            assert "cannot reselect big of 1 row(s) of" in str(err.value)
            assert "permission denied" in str(err.value)
            assert "event.processing.failure.handling.mode=warn" in str(err.value)
            seen[mode] = read_topic(h.kafka, topic, min_count=1)
            continue
        with h.running(cfg) as run:
            h.wait_streaming(run)
            seen[mode] = read_topic(h.kafka, topic, min_count=2)
            if mode == "dead-letter":
                dlq = read_topic(h.kafka, cfg["errors.deadletterqueue.topic.name"], min_count=1)
    # fail: the insert before the event is delivered, the update is not
    assert [e.op for e in seen["fail"]] == ["c"]
    for mode in ("warn", "skip", "dead-letter"):
        assert [e.op for e in seen[mode]] == ["c", "u"]
        assert seen[mode][1].after == {"id": 1, "big": PH, "n": 1, "note": "note1"}
    assert len(dlq) == 1
    assert "permission denied" in dlq[0].value["error"]


def deadline_events(run: Any, timeout: float = 30.0) -> None:
    """Wait until the engine failed (the test expects it to)."""
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end and not run.errors:
        time.sleep(0.05)


def test_start_warns_about_out_of_line_columns_without_a_remedy(
    h: PgHarness, postgres: PgInfo
) -> None:
    h.sql(
        "CREATE TABLE w_plain (id int PRIMARY KEY, body text, doc jsonb, tags int[], n int)",
        "CREATE TABLE w_full (id int PRIMARY KEY, body text)",
        "ALTER TABLE w_full REPLICA IDENTITY FULL",
        "CREATE TABLE w_nums (id int PRIMARY KEY, n bigint, at timestamptz)",
    )

    def warnings(**extra: str) -> list[str]:
        cfg = h.config(table_include_list=r"public\.w_.*")
        cfg.update(extra)
        config = PostgresConnector(cfg).config
        with psycopg.connect(postgres.dsn(h.dbname), autocommit=True) as c:
            rows = c.execute(
                "SELECT relname, oid FROM pg_class WHERE relname LIKE 'w\\_%' AND relkind = 'r'"
            ).fetchall()
            tables = [(h_table(h, name), int(oid)) for name, oid in rows]
            return warn_unavailable_values(c, config, tables)

    plain = warnings()
    assert len(plain) == 1  # not the FULL table, not the one without out-of-line columns
    assert "table public.w_plain: column(s) body, doc, tags can be stored out of line" in plain[0]
    assert "ALTER TABLE public.w_plain REPLICA IDENTITY FULL" in plain[0]
    assert "post.processors=reselector" in plain[0]
    covered = {"post.processors": "reselector", "reselector.type": RESELECT}
    assert warnings(**covered) == []
    partly = {**covered, "reselector.reselect.columns.include.list": r"public\.w_plain:body"}
    assert "column(s) doc, tags can be" in warnings(**partly)[0]


def h_table(h: PgHarness, name: str) -> Any:
    from cdc.spi import TableId

    return TableId(h.dbname, "public", name)
