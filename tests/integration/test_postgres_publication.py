"""The publication carries exactly the included tables (issue 20.1): a changed include list
is applied on start, newly included tables are snapshotted so none of their rows or changes
is lost, and the modes that do not manage the table set fail loudly instead of streaming
without a table."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from cdc.errors import FatalError
from cdc.offsets.memory import MemoryOffsetStore
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness, RunningConnector, read_topic

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    with PgHarness(postgres, kafka, f"tm_pub_{uuid.uuid4().hex[:8]}") as harness:
        yield harness


def published(h: PgHarness, cfg: dict[str, Any]) -> list[tuple[str, str]]:
    return h.sql(
        "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s "
        "ORDER BY tablename",
        params=(cfg["publication.name"],),
    )


def stopped(run: RunningConnector) -> None:
    """Wait for a start that must fail; stop it if it did not."""
    run.thread.join(30)
    if run.thread.is_alive():
        run.stop()


def test_newly_included_table_is_published_and_snapshotted(h: PgHarness) -> None:
    h.sql(
        "CREATE TABLE other (id int PRIMARY KEY, v text)",
        "CREATE TABLE items (id int PRIMARY KEY, v text)",
        "INSERT INTO other SELECT g, 'o' FROM generate_series(1, 3) g",
        "INSERT INTO items SELECT g, 'i0' FROM generate_series(1, 1000) g",
    )
    cfg = h.config(table_include_list="public.other", publication_autocreate_mode="filtered")
    store = MemoryOffsetStore()
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO other VALUES (4, 'o')")
        read_topic(h.kafka, h.topic(cfg, "other"), min_count=4)
    assert published(h, cfg) == [("public", "other")]

    # While stopped: changes to the table about to be included, and to the captured one.
    h.sql(
        "UPDATE items SET v = 'i1' WHERE id <= 200",
        "DELETE FROM items WHERE id > 990",
        "INSERT INTO other VALUES (5, 'o')",
    )
    cfg["table.include.list"] = "public.other,public.items"
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.sql("UPDATE items SET v = 'i2' WHERE id <= 10", "INSERT INTO other VALUES (6, 'o')")
        items = read_topic(h.kafka, h.topic(cfg, "items"), min_count=1000)
        other = read_topic(h.kafka, h.topic(cfg, "other"), min_count=6)
    assert published(h, cfg) == [("public", "items"), ("public", "other")]

    reads = {e.key["id"]: e.after["v"] for e in items if e.op == "r"}
    assert len(reads) == 990 and reads[1] in ("i1", "i2") and reads[500] == "i0"
    final = {}
    for e in items:
        final[e.key["id"]] = None if e.op == "d" else e.after["v"]
    table = dict(h.sql("SELECT id, v FROM items"))
    assert {k: v for k, v in final.items() if v is not None} == table
    # the captured table was not snapshotted again; what changed while stopped streamed
    assert [(e.op, e.key["id"]) for e in other] == [
        ("r", 1),
        ("r", 2),
        ("r", 3),
        ("c", 4),
        ("c", 5),
        ("c", 6),
    ]

    # A narrower list takes the table out of the publication again.
    cfg["table.include.list"] = "public.items"
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
    assert published(h, cfg) == [("public", "items")]


def test_modes_that_do_not_manage_tables_fail_naming_them(h: PgHarness) -> None:
    h.sql(
        "CREATE TABLE pa (id int PRIMARY KEY)",
        "CREATE TABLE pb (id int PRIMARY KEY)",
    )
    cfg = h.config(
        table_include_list="public.pa,public.pb",
        publication_autocreate_mode="disabled",
        snapshot_mode="never",
    )
    h.sql(f"CREATE PUBLICATION {cfg['publication.name']} FOR TABLE pa")
    run = h.start(cfg)
    stopped(run)
    assert run.errors and isinstance(run.errors[0], FatalError), run.errors
    message = str(run.errors[0])
    assert "public.pb" in message and "public.pa" not in message
    assert "ADD TABLE public.pb" in message

    cfg["publication.autocreate.mode"] = "all_tables"
    run = h.start(cfg)
    stopped(run)
    assert run.errors and "not FOR ALL TABLES" in str(run.errors[0]), run.errors


def test_include_list_matching_nothing_fails_unless_allowed(h: PgHarness) -> None:
    h.sql("CREATE TABLE orders (id int PRIMARY KEY)")
    cfg = h.config(table_include_list="public.ordres,public.nothing_like_it")
    run = h.start(cfg)
    stopped(run)
    assert run.errors and isinstance(run.errors[0], FatalError), run.errors
    message = str(run.errors[0])
    assert "table.include.list" in message and "'public.ordres'" in message
    assert "(nearest: public.orders" in message
    assert "table.include.list.allow.empty=true" in message

    cfg = h.config(
        table_include_list="public.ordres",
        table_include_list_allow_empty="true",
        publication_autocreate_mode="filtered",
    )
    with h.running(cfg) as run:
        h.wait_streaming(run)
        # said in the task's status (its trace) too, once although both phases checked it
        [notice] = run.engine.metrics.problems()
        assert "'public.ordres'" in notice and "allow.empty=true" in notice, notice
    assert published(h, cfg) == []
