"""Tables without a usable replica identity (issue 12.7): a filtered publication does not
take them (PostgreSQL would reject the application's UPDATE/DELETE on them), the start says
why and how to fix it, and ``replica.identity.autoset.values`` sets identities at start."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from cdc.errors import FatalError
from connectors.postgres.config import CONFIG_DEF
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness, RunningConnector, read_topic

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    with PgHarness(postgres, kafka, f"tm_ident_{uuid.uuid4().hex[:8]}") as harness:
        yield harness


def failed(run: RunningConnector) -> BaseException:
    run.thread.join(30)
    if run.thread.is_alive():
        run.stop()
    assert run.errors, "the start did not fail"
    return run.errors[0]


def test_filtered_publication_refuses_a_table_without_identity(h: PgHarness) -> None:
    h.sql(
        "CREATE TABLE logs (at int, msg text)",
        "CREATE TABLE keyed (id int PRIMARY KEY)",
        "CREATE TABLE nothing (id int PRIMARY KEY)",
        "ALTER TABLE nothing REPLICA IDENTITY NOTHING",
        "INSERT INTO logs VALUES (1, 'a')",
    )
    cfg = h.config(
        table_include_list="public.logs,public.keyed,public.nothing",
        publication_autocreate_mode="filtered",
    )
    error = failed(h.start(cfg))
    assert isinstance(error, FatalError)
    message = str(error)
    assert "public.logs" in message and "public.nothing" in message
    assert "public.keyed" not in message
    assert "REPLICA IDENTITY FULL" in message and "replica.identity.autoset.values" in message
    # the application's writes still work: the table was not published
    h.sql("UPDATE logs SET msg = 'b'", "DELETE FROM nothing")
    assert h.sql(
        "SELECT count(*) FROM pg_publication_tables WHERE pubname = %s AND tablename = 'logs'",
        params=(cfg["publication.name"],),
    ) == [(0,)]

    cfg["replica.identity.autoset.values"] = r"public\.logs:FULL,public.nothing:DEFAULT"
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql("UPDATE logs SET msg = 'c'")
        events = read_topic(h.kafka, h.topic(cfg, "logs"), min_count=2)
    assert h.sql(
        "SELECT relname, relreplident FROM pg_class WHERE relname IN ('logs', 'nothing') "
        "ORDER BY relname"
    ) == [("logs", "f"), ("nothing", "d")]
    assert [(e.op, e.before, e.after) for e in events] == [
        ("r", None, {"at": 1, "msg": "b"}),
        ("u", {"at": 1, "msg": "b"}, {"at": 1, "msg": "c"}),
    ]


def test_autoset_entries_are_validated() -> None:
    base = {
        "connector.class": "postgres",
        "database.hostname": "h",
        "database.user": "u",
        "database.dbname": "d",
        "database.server.name": "s",
    }
    _, problems = CONFIG_DEF.validate(
        {**base, "replica.identity.autoset.values": "public.a:FULL,public.b:SOMETIMES"}
    )
    assert [k for k, _ in problems] == ["replica.identity.autoset.values"]
    assert "public.b:SOMETIMES" in problems[0][1]
    _, problems = CONFIG_DEF.validate(
        {**base, "replica.identity.autoset.values": "public.a:full,public.b:INDEX b_idx"}
    )
    assert problems == []
