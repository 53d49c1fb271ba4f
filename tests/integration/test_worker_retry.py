"""A retriable failure end to end: the worker restarts the real engine with backoff until the
cause goes away, and the other connectors never notice.

The cause is one PostgreSQL really produces: the connector's replication slot is held by
another connection (`slot.max.retries=0`, so the connector gives up at once with a
`RetriableError` and the worker's backoff takes over).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.integration import pg_cleanup
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import read_topic
from worker.config import parse_config
from worker.daemon import Daemon

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


@pytest.fixture
def db(postgres: PgInfo) -> Iterator[str]:
    name = f"tmr_{uuid.uuid4().hex[:8]}"
    pg_cleanup.create_database(postgres.dsn(), name)
    try:
        with psycopg.connect(postgres.dsn(name), autocommit=True) as c:
            c.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
            c.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
        yield name
    finally:
        pg_cleanup.drop_database(postgres.dsn(), name)


def hold_slot(pg: PgInfo, dbname: str, slot: str, publication: str) -> psycopg.Connection[Any]:
    """A replication connection streaming from ``slot``: the slot is active while it is open."""
    with psycopg.connect(pg.dsn(dbname), autocommit=True) as c:
        c.execute(f"CREATE PUBLICATION {publication} FOR TABLE t")
        c.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
    conn = psycopg.connect(pg.dsn(dbname, replication="database"), autocommit=True)
    pgc = conn.pgconn
    pgc.send_query(
        f"START_REPLICATION SLOT {slot} LOGICAL 0/0 "
        f"(proto_version '1', publication_names '{publication}')".encode()
    )
    res = pgc.get_result()
    assert res is not None and res.status == psycopg.pq.ExecStatus.COPY_BOTH
    return conn


def test_a_retriable_error_is_retried_with_backoff_until_it_clears(
    postgres: PgInfo, kafka: str, db: str, tmp_path: Path
) -> None:
    prefix = f"tr{uuid.uuid4().hex[:8]}"
    slot, publication = f"slot_{prefix}", f"pub_{prefix}"
    blocker = hold_slot(postgres, db, slot, publication)
    cfg = parse_config(
        f"""
worker:
  bootstrap.servers: {kafka}
  rest.port: 0
  state.dir: {tmp_path}
  offset.storage: memory
  offset.flush.interval.ms: 200
connectors:
  - name: blocked
    config:
      connector.class: postgres
      database.hostname: {postgres.host}
      database.port: {postgres.port}
      database.user: {postgres.user}
      database.password: {postgres.password}
      database.dbname: {db}
      topic.prefix: {prefix}
      slot.name: {slot}
      publication.name: {publication}
      publication.autocreate.mode: filtered
      table.include.list: public.t
      slot.max.retries: 0
      errors.retry.delay.initial.ms: 100
      errors.retry.delay.max.ms: 400
      poll.interval.ms: 100
"""
    )
    daemon = Daemon(cfg)
    try:
        daemon.start()
        assert daemon.herder is not None
        h = daemon.herder

        def task() -> dict[str, Any]:
            return dict(h.connector_status("blocked")["tasks"][0])

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and h.runners()[0].restarts["retriable"] < 2:
            time.sleep(0.05)
        runner = h.runners()[0]
        assert runner.restarts["retriable"] >= 2, task()
        status = task()
        assert status["state"] in ("RESTARTING", "RUNNING")
        if status["state"] == "RESTARTING":
            assert "RetriableError" in status["trace"] and "still in use" in status["trace"]
        assert status["state"] != "FAILED"  # errors.max.retries=-1: never gives up

        blocker.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = runner.metrics
            if task()["state"] == "RUNNING" and m is not None and m.streaming.connected:
                break
            time.sleep(0.1)
        assert task()["state"] == "RUNNING" and "trace" not in task()
        events = read_topic(kafka, f"{prefix}.public.t", min_count=2, settle=0.5)
        assert sorted((e.op, e.key["id"]) for e in events) == [("r", 1), ("r", 2)]
    finally:
        blocker.close()
        assert daemon.stop()


def test_a_lost_replication_connection_is_retried_after_about_a_second(
    postgres: PgInfo, kafka: str
) -> None:
    """The first reconnect after a lost connection comes after ~1 s (backoff from 1 s up to
    slot.retry.delay.ms), not after slot.retry.delay.ms (10 s)."""
    from tests.integration.pg_harness import PgHarness

    h = PgHarness(postgres, kafka, f"tmr_{uuid.uuid4().hex[:8]}")
    try:
        h.sql("CREATE TABLE t (id int PRIMARY KEY)")
        cfg = h.config(snapshot_mode="never")
        slot = cfg["slot.name"]
        active = f"SELECT active_pid FROM pg_replication_slots WHERE slot_name = '{slot}'"
        with h.running(cfg) as run:
            h.wait_streaming(run)
            [(pid,)] = h.sql(active)
            assert pid is not None
            h.sql(f"SELECT pg_terminate_backend({pid})")
            lost = time.monotonic()
            while True:
                rows = h.sql(active)
                if rows and rows[0][0] not in (None, pid):
                    break
                assert time.monotonic() - lost < 6, "not reconnected within 6 s"
                time.sleep(0.1)
            h.sql("INSERT INTO t VALUES (1)")
            [event] = read_topic(kafka, h.topic(cfg, "t"), min_count=1)
            assert event.after == {"id": 1}
    finally:
        h.dispose()
