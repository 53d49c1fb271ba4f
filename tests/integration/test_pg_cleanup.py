"""The teardown helpers of tests/integration/pg_cleanup.py against the real PostgreSQL: a
database whose slot a walsender still streams from is dropped with it (the old teardowns
skipped an active slot, and the DROP DATABASE after it then failed, leaving both behind), and
the end-of-run check names what this run left and nothing it did not create."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from tests.integration import pg_cleanup
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness, read_topic
from tests.integration.test_worker_retry import hold_slot

pytestmark = pytest.mark.postgres


@pytest.fixture
def db(postgres: PgInfo) -> Iterator[str]:
    """A database of this run's with table ``t`` and an inactive slot named like it."""
    with PgHarness(postgres, "", f"tm_cleanup_{uuid.uuid4().hex[:8]}") as h:
        h.sql(
            "CREATE TABLE t (id int PRIMARY KEY)",
            f"SELECT pg_create_logical_replication_slot('{h.dbname}', 'pgoutput')",
        )
        yield h.dbname


def slots(pg: PgInfo, db: str) -> list[tuple[str, bool]]:
    with psycopg.connect(pg.dsn(), autocommit=True) as c:
        return c.execute(
            "SELECT slot_name, active FROM pg_replication_slots WHERE database = %s ORDER BY 1",
            (db,),
        ).fetchall()


def databases(pg: PgInfo, name: str) -> int:
    with psycopg.connect(pg.dsn(), autocommit=True) as c:
        row = c.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (name,)).fetchone()
    assert row is not None
    return int(row[0])


def mine(pg: PgInfo, name: str) -> list[str]:
    """What :func:`pg_cleanup.leftovers` says about ``name`` (other modules may hold theirs)."""
    return [x for x in pg_cleanup.leftovers(pg.dsn()) if name in x]


def test_a_database_whose_slot_is_still_streaming_is_dropped_with_it(
    postgres: PgInfo, db: str
) -> None:
    conn = hold_slot(postgres, db, f"{db}_held", "p")
    try:
        assert slots(postgres, db) == [(db, False), (f"{db}_held", True)]
        with (
            psycopg.connect(postgres.dsn(), autocommit=True) as c,
            pytest.raises(psycopg.errors.ObjectInUse, match="active logical replication"),
        ):  # what the old teardowns met
            c.execute(f'DROP DATABASE "{db}" WITH (FORCE)')  # type: ignore[arg-type]
        pg_cleanup.drop_database(postgres.dsn(), db)
        assert slots(postgres, db) == [] and databases(postgres, db) == 0
        assert mine(postgres, db) == []
    finally:
        conn.close()


def test_leftovers_names_this_runs_database_and_slot_only(postgres: PgInfo, db: str) -> None:
    other = f"tm_cleanup_other_{uuid.uuid4().hex[:8]}"  # as another user's, not recorded
    with psycopg.connect(postgres.dsn(), autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{other}"')  # type: ignore[arg-type]
    try:
        left = pg_cleanup.leftovers(postgres.dsn())
        assert f"database {db}" in left
        assert f"replication slot {db} (database {db}, active=False)" in left
        assert not [x for x in left if other in x]
    finally:
        pg_cleanup.drop_database(postgres.dsn(), other)
    slot = pg_cleanup.own_slot(f"tm_cleanup_{uuid.uuid4().hex[:8]}")
    with psycopg.connect(postgres.dsn(), autocommit=True) as c:
        c.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
    try:
        assert f"replication slot {slot} (database postgres, active=False)" in (
            pg_cleanup.leftovers(postgres.dsn())
        )
    finally:
        pg_cleanup.drop_slot(postgres.dsn(), slot)
    pg_cleanup.drop_database(postgres.dsn(), db)
    assert mine(postgres, db) == [] and mine(postgres, slot) == []


@pytest.mark.kafka
def test_a_connector_with_slot_drop_on_stop_leaves_no_slot(postgres: PgInfo, kafka: str) -> None:
    """``slot.drop.on.stop=true`` drops the slot at stop, right after its walsender streamed
    (the slot is released asynchronously when the replication connection closes)."""
    with PgHarness(postgres, kafka, f"tm_cleanup_{uuid.uuid4().hex[:8]}") as h:
        h.sql("CREATE TABLE t (id int PRIMARY KEY)")
        for i in range(3):
            cfg = h.config(snapshot_mode="never", slot_drop_on_stop="true")
            with h.running(cfg) as run:
                h.wait_streaming(run)
                h.sql(f"INSERT INTO t VALUES ({i})")
                read_topic(kafka, h.topic(cfg, "t"), min_count=1)
            assert run.errors == []
            assert slots(postgres, h.dbname) == []
