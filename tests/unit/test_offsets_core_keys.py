"""``PATCH /offsets`` takes back what ``GET /offsets`` showed, also in the middle of a
snapshot: every connector accepts the core's keys (snapshot flags, the resume point of an
interrupted snapshot, its origin, an incremental snapshot's state) with the same checks."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from cdc.snapshot.incremental_state import SnapshotContext
from cdc.testing.memory import MemoryConnector
from connectors.cassandra.connector import CassandraConnector
from connectors.mongodb.connector import MongoDbConnector
from connectors.mysql.connector import MySqlConnector
from connectors.postgres.connector import PostgresConnector
from connectors.sqlserver.connector import SqlServerConnector
from worker.herder import BadRequest, parse_offsets
from worker.registry import Registry

#: each connector's partition and one of its positions
OWN: dict[str, tuple[type[Any], dict[str, Any], dict[str, Any]]] = {
    "postgres": (PostgresConnector, {"server": "s"}, {"lsn": 1234, "txId": 7, "ts_usec": 1}),
    "mysql": (MySqlConnector, {"server": "s"}, {"file": "mysql-bin.000003", "pos": 154}),
    "sqlserver": (SqlServerConnector, {"server": "s"}, {"commit_lsn": "00000027:00000758:0003"}),
    "mongodb": (MongoDbConnector, {"server_id": "s", "rs": "rs0"}, {"sec": 1700000000, "ord": 2}),
    "cassandra": (CassandraConnector, {"server": "s"}, {"file": "CommitLog-7-123.log", "pos": 0}),
    "memory": (MemoryConnector, {"server": "s"}, {"pos": 3}),
}


def mid_snapshot(own: dict[str, Any]) -> dict[str, Any]:
    """A snapshot row's offset as the core writes it: the connector's position, the table
    being read and the key read up to, where streaming will start (the origin)."""
    return {
        **own,
        "snapshot": True,
        "last_snapshot_record": False,
        "snapshot_done": ["inventory.customers"],
        "snapshot_table": "inventory.orders",
        "snapshot_after": [10042],
        "snapshot_origin": dict(own),
    }


def incremental(own: dict[str, Any]) -> dict[str, Any]:
    ctx = SnapshotContext(maximum_key=(500,), last_key=(250,), signal_id="sig-1")
    return {**own, **ctx.to_offset()}


@pytest.mark.parametrize("name", sorted(OWN))
@pytest.mark.parametrize("shape", [mid_snapshot, incremental])
def test_an_offset_read_mid_snapshot_is_accepted_back_unchanged(
    name: str, shape: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    cls, partition, own = OWN[name]
    offset = shape(own)
    checked, problems = cls.validate_offset(partition, json.loads(json.dumps(offset)))
    assert problems == []
    assert {k: checked[k] for k in offset} == offset  # completed maybe, never changed


@pytest.mark.parametrize("name", sorted(OWN))
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"snapshot_done": "inventory.customers"}, "snapshot_done must be a list"),
        ({"snapshot_table": 5}, "snapshot_table must be a table name"),
        ({"snapshot_after": 10042}, "snapshot_after must be a key"),
        ({"snapshot": "yes"}, "snapshot must be true or false"),
        ({"snapshot": False}, "need offset.snapshot true"),
        ({"snapshot_origin": "somewhere"}, "snapshot_origin must be an object"),
        ({"incremental_snapshot_collections": "not json"}, "is not readable"),
        ({"incremental_snapshot_primary_key": "[1"}, "is not readable"),
    ],
)
def test_malformed_core_keys_are_named(name: str, bad: dict[str, Any], message: str) -> None:
    cls, partition, own = OWN[name]
    base = mid_snapshot(own) if "incremental" not in next(iter(bad)) else incremental(own)
    _, problems = cls.validate_offset(partition, {**base, **bad})
    assert any(message in p for p in problems), problems


def test_the_rest_path_stores_a_mid_snapshot_offset_and_refuses_a_bad_one() -> None:
    plugin = Registry().resolve("postgres")
    offset = mid_snapshot(OWN["postgres"][2])
    items = parse_offsets({"offsets": [{"partition": {"server": "s"}, "offset": offset}]}, plugin)
    assert items[0][1]["snapshot_after"] == [10042]
    broken = {**offset, "snapshot_done": None}
    with pytest.raises(BadRequest, match="snapshot_done must be a list"):
        parse_offsets({"offsets": [{"partition": {"server": "s"}, "offset": broken}]}, plugin)
