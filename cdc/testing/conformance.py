"""The connector conformance suite: behaviour every relational connector must show.

A connector's tests provide a :class:`Target` (how to change its database, start it, and
read what it wrote to Kafka) and run every check in :data:`CHECKS`, e.g.::

    @pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
    def test_conformance(check, target):
        check(target)

The checks assert what a Debezium user relies on: snapshot reads, c/u/d images, tombstones,
the primary-key-change split, resuming after a restart with nothing lost or repeated, and
truncation where the source reports it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from cdc.testing.kafka_reader import Event


class Target(Protocol):
    """One connector under test against a real database and Kafka."""

    supports_truncate: bool

    def create_table(self, table: str) -> None:
        """``table(id int primary key, name varchar not null, score int)``, empty."""

    def execute(self, table: str, op: str, *args: Any) -> None:
        """``insert(id, name, score)``, ``update(id, name)``, ``update_pk(old, new)``,
        ``delete(id)``, ``truncate()`` — each its own committed transaction."""

    def config(self, table: str, **overrides: str) -> dict[str, Any]:
        """A connector config capturing just ``table``, with a fresh logical server name."""

    def running(self, cfg: dict[str, Any], store: Any) -> AbstractContextManager[Any]:
        """Run the connector until the context exits (graceful stop)."""

    def wait_streaming(self, run: Any) -> None: ...

    def read(self, cfg: dict[str, Any], table: str, min_count: int) -> list[Event]: ...

    def new_offset_store(self) -> Any: ...


def _ops(events: list[Event]) -> list[tuple[str | None, Any]]:
    return [(e.op, e.key["id"] if isinstance(e.key, dict) else e.key) for e in events]


def snapshot_reads_every_row(t: Target) -> None:
    t.create_table("conf_snap")
    for i in range(1, 6):
        t.execute("conf_snap", "insert", i, f"n{i}", i * 10)
    cfg = t.config("conf_snap", **{"snapshot.mode": "initial"})
    with t.running(cfg, t.new_offset_store()) as run:
        t.wait_streaming(run)
        events = t.read(cfg, "conf_snap", 5)
    assert sorted(_ops(events)) == [("r", i) for i in range(1, 6)]
    for e in events:
        assert e.value["source"]["snapshot"] in (True, "true", "last")
        assert e.before is None and e.after["score"] == e.after["id"] * 10


def create_update_delete_images(t: Target) -> None:
    t.create_table("conf_cud")
    cfg = t.config("conf_cud", **{"snapshot.mode": "initial"})
    with t.running(cfg, t.new_offset_store()) as run:
        t.wait_streaming(run)
        t.execute("conf_cud", "insert", 1, "one", 1)
        t.execute("conf_cud", "update", 1, "uno")
        t.execute("conf_cud", "delete", 1)
        events = t.read(cfg, "conf_cud", 4)
    assert _ops(events) == [("c", 1), ("u", 1), ("d", 1), (None, 1)]
    c, u, d, _ = events
    assert c.before is None and c.after == {"id": 1, "name": "one", "score": 1}
    assert u.after == {"id": 1, "name": "uno", "score": 1}
    assert u.before is None or u.before["id"] == 1
    assert d.after is None and d.before is not None and d.before["id"] == 1
    for e in (c, u, d):
        assert e.value["source"]["snapshot"] in (False, "false", None)
        assert e.value["ts_ms"] >= e.value["source"]["ts_ms"]


def primary_key_change_is_split(t: Target) -> None:
    t.create_table("conf_pk")
    t.execute("conf_pk", "insert", 1, "one", 1)
    cfg = t.config("conf_pk", **{"snapshot.mode": "initial"})
    with t.running(cfg, t.new_offset_store()) as run:
        t.wait_streaming(run)
        t.execute("conf_pk", "update_pk", 1, 2)
        events = t.read(cfg, "conf_pk", 4)
    assert _ops(events) == [("r", 1), ("d", 1), (None, 1), ("c", 2)]
    assert "__debezium.newkey" in events[1].headers
    assert "__debezium.oldkey" in events[3].headers


def restart_resumes_without_loss_or_repeats(t: Target) -> None:
    t.create_table("conf_restart")
    cfg = t.config("conf_restart", **{"snapshot.mode": "initial"})
    store = t.new_offset_store()
    with t.running(cfg, store) as run:
        t.wait_streaming(run)
        t.execute("conf_restart", "insert", 1, "a", 1)
        t.read(cfg, "conf_restart", 1)
    t.execute("conf_restart", "insert", 2, "b", 2)  # while stopped
    with t.running(cfg, store) as run:
        t.wait_streaming(run)
        t.execute("conf_restart", "insert", 3, "c", 3)
        events = t.read(cfg, "conf_restart", 3)
    assert _ops(events) == [("c", 1), ("c", 2), ("c", 3)]


def truncate_is_reported(t: Target) -> None:
    if not t.supports_truncate:
        return
    t.create_table("conf_trunc")
    cfg = t.config("conf_trunc", **{"snapshot.mode": "initial", "skipped.operations": "none"})
    with t.running(cfg, t.new_offset_store()) as run:
        t.wait_streaming(run)
        t.execute("conf_trunc", "insert", 1, "a", 1)
        t.execute("conf_trunc", "truncate")
        deadline = time.monotonic() + 10
        events = t.read(cfg, "conf_trunc", 2)
        while len(events) < 2 and time.monotonic() < deadline:
            events = t.read(cfg, "conf_trunc", 2)
    assert [e.op for e in events] == ["c", "t"]
    assert events[1].before is None and events[1].after is None


CHECKS: list[Callable[[Target], None]] = [
    snapshot_reads_every_row,
    create_update_delete_images,
    primary_key_change_is_split,
    restart_resumes_without_loss_or_repeats,
    truncate_is_reported,
]
