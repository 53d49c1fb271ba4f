"""The Cassandra connector on the real node through Kafka: commit log events (AC-60),
snapshot, restarts (AC-61), the per-table snapshot record (AC-62)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.cassandra_harness import CassandraHarness, module_harness
from tests.integration.conftest import CassandraInfo

pytestmark = [pytest.mark.cassandra, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(
    cassandra: CassandraInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CassandraHarness]:
    yield from module_harness(cassandra, kafka, tmp_path_factory, "csconn")


def _cells(after: dict[str, Any]) -> dict[str, Any]:
    return {k: v["value"] for k, v in after.items() if isinstance(v, dict)}


def test_segment_events_c_u_d_with_cell_structs(h: CassandraHarness) -> None:
    h.cql(
        f"CREATE TABLE {h.keyspace}.orders (id int, line int, item text, qty int, "
        "PRIMARY KEY (id, line)) WITH cdc = true"
    )
    cfg = h.config(**{"snapshot.mode": "never"})
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.cql(f"INSERT INTO {h.keyspace}.orders (id, line, item, qty) VALUES (1, 1, 'pen', 2)")
        h.cql(f"UPDATE {h.keyspace}.orders SET qty = 3 WHERE id = 1 AND line = 1")
        h.cql(f"DELETE FROM {h.keyspace}.orders WHERE id = 1 AND line = 1")
        events = h.read(cfg, "orders", min_count=4)
    assert [(e.op, e.key) for e in events] == [
        ("c", {"id": 1, "line": 1}),
        ("u", {"id": 1, "line": 1}),
        ("d", {"id": 1, "line": 1}),
        (None, {"id": 1, "line": 1}),  # the tombstone
    ]
    c, u, d, _ = events
    assert c.before is None
    assert c.after["id"] == 1 and c.after["line"] == 1
    assert c.after["item"] == {"value": "pen", "deletion_ts": None, "set": True}
    assert c.after["qty"] == {"value": 2, "deletion_ts": None, "set": True}
    assert u.after["qty"] == {"value": 3, "deletion_ts": None, "set": True}
    assert u.after["item"] is None  # not written by the UPDATE
    assert d.after == {"id": 1, "line": 1, "item": None, "qty": None}
    src = c.value["source"]
    assert src["connector"] == "cassandra" and src["cluster"] == "tidemark-dev"
    assert (src["keyspace"], src["table"], src["snapshot"]) == (h.keyspace, "orders", False)
    assert src["file"].startswith("CommitLog-") and src["pos"] > 0
    assert src["ts_micro"] // 1000 == src["ts_ms"]
    assert [e.value["source"]["pos"] for e in (c, u, d)] == sorted(
        e.value["source"]["pos"] for e in (c, u, d)
    )
