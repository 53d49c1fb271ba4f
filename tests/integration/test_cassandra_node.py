"""The `tidemark dev` Cassandra node is what the connector expects: CDC on, commit log
segments of CDC tables linked into cdc_raw with a `_cdc.idx` durable offset."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from cassandra.cluster import Cluster

from tests.integration.conftest import CassandraInfo

pytestmark = pytest.mark.cassandra


def test_cdc_table_writes_reach_cdc_raw(cassandra: CassandraInfo) -> None:
    ks = f"node_{uuid.uuid4().hex[:8]}"
    cluster = Cluster([cassandra.host], port=cassandra.port)
    session = cluster.connect()
    try:
        session.execute(
            f"CREATE KEYSPACE {ks} WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        session.execute(f"CREATE TABLE {ks}.t (id int PRIMARY KEY, v text) WITH cdc = true")
        row = session.execute(
            "SELECT cdc FROM system_schema.tables WHERE keyspace_name = %s AND table_name = 't'",
            (ks,),
        ).one()
        assert row.cdc is True
        before = time.time()
        session.execute(f"INSERT INTO {ks}.t (id, v) VALUES (1, 'x')")
    finally:
        cluster.shutdown()
    raw = Path(cassandra.cdc_raw)
    deadline = time.monotonic() + 15
    fresh: list[Path] = []
    while time.monotonic() < deadline and not fresh:
        # commitlog_sync_period is 1 s: the index is rewritten on the next sync.
        fresh = [p for p in raw.glob("CommitLog-*_cdc.idx") if p.stat().st_mtime >= before - 1]
        time.sleep(0.3)
    assert fresh, f"no _cdc.idx written in {raw} after a write to a cdc table"
    offset = int(fresh[0].read_text().splitlines()[0])
    segment = fresh[0].with_name(fresh[0].name.replace("_cdc.idx", ".log"))
    assert segment.exists()
    assert 0 < offset <= segment.stat().st_size
