"""An interrupted initial snapshot loses no deletes (the model of the PostgreSQL and MySQL
snapshot-restart tests): a restart snapshots again but streams from the *first* attempt's
maximum LSN, so the deletes of rows an earlier attempt already emitted reach the topic. Each
test reconciles the table against the last event per key in the topic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import SqlServerInfo
from tests.integration.sqlserver_harness import ChildConnector, Event, SqlServerHarness

pytestmark = [pytest.mark.sqlserver, pytest.mark.kafka]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def h(sqlserver: SqlServerInfo, kafka: str) -> Iterator[SqlServerHarness]:
    harness = SqlServerHarness(sqlserver, kafka)
    yield harness
    harness.drop()


def numbers(h: SqlServerHarness, table: str, rows: int) -> str:
    t = h.create_table(table, "id int PRIMARY KEY, v varchar(20) NOT NULL, n int NOT NULL")
    h.sql(f"INSERT INTO dbo.\"{t}\" SELECT g, 'v' || g, 0 FROM generate_series(1, {rows}) g")
    return t


def slow(cfg: dict[str, Any], t: str) -> None:
    """Read the table slowly (2 ms a row) so the snapshot can be killed in the middle."""
    name = f"dbo.{t}"
    cfg["snapshot.select.statement.overrides"] = name
    cfg[f"snapshot.select.statement.overrides.{name}"] = (
        f'SELECT id, v, n FROM dbo."{t}" CROSS JOIN LATERAL (SELECT pg_sleep(0.002 + 0 * id)) s'
    )


def reconcile(h: SqlServerHarness, t: str, events: list[Event]) -> None:
    last: dict[int, Any] = {}
    for e in events:
        last[e.key["id"]] = e.after  # a delete's after and a tombstone are None
    topic = {k: v for k, v in last.items() if v is not None}
    rows = {
        r[0]: {"id": r[0], "v": r[1], "n": r[2]} for r in h.sql(f'SELECT id, v, n FROM dbo."{t}"')
    }
    ghosts = sorted(set(topic) - set(rows))
    missing = sorted(set(rows) - set(topic))
    stale = sorted(k for k in rows if k in topic and topic[k] != rows[k])
    assert (ghosts, missing, stale) == ([], [], []), (ghosts[:10], missing[:10], stale[:10])


def snapshot_rows(h: SqlServerHarness, cfg: dict[str, Any], table: str) -> int:
    return sum(1 for e in h.read(cfg, table, timeout=2, settle=0.2) if e.op == "r")


def test_killed_snapshots_then_deletes_leave_no_ghost_rows(
    h: SqlServerHarness, tmp_path: Path
) -> None:
    t = numbers(h, "ghosts", 1500)
    cfg = h.config("ghosts", **{"snapshot.fetch.size": "50"})
    slow(cfg, t)
    child = ChildConnector(h, cfg, tmp_path)
    deleted = 0
    try:
        for attempt in range(2):
            goal = snapshot_rows(h, cfg, "ghosts") + 150
            child.start()
            child.wait(lambda g=goal: snapshot_rows(h, cfg, "ghosts") > g)  # type: ignore[misc]
            child.kill()
            stored = child.stored()
            assert stored is not None and stored.get("snapshot") is True, stored
            # rows the killed attempt emitted go away, others change, new ones appear
            lo = attempt * 50 + 1
            h.sql(
                f'DELETE FROM dbo."{t}" WHERE id BETWEEN {lo} AND {lo + 39}',
                f'UPDATE dbo."{t}" SET n = n + 1 WHERE id BETWEEN 100 AND 130',
                f"INSERT INTO dbo.\"{t}\" VALUES ({5000 + attempt}, 'new', 0)",
            )
            deleted += 40
        cfg.pop(f"snapshot.select.statement.overrides.dbo.{t}")
        cfg["snapshot.select.statement.overrides"] = ""
        child.start()
        child.wait(lambda: "snapshot" not in (child.stored() or {"snapshot": 1}))
        h.sql(
            f'DELETE FROM dbo."{t}" WHERE id = 1000',
            f"UPDATE dbo.\"{t}\" SET v = 'after' WHERE id = 7",
        )
        events = h.read(cfg, "ghosts", min_count=1500 - deleted + 2, settle=1.5, timeout=60)
    finally:
        child.kill()
    reconcile(h, t, events)
    assert any(e.op == "d" and e.key["id"] == 1 for e in events)  # replayed from attempt 1


def test_kill_right_after_a_finished_snapshot_does_not_snapshot_again(
    h: SqlServerHarness, tmp_path: Path
) -> None:
    t = numbers(h, "done", 300)
    cfg = h.config("done")
    child = ChildConnector(h, cfg, tmp_path)
    try:
        child.start()
        child.wait(lambda: "snapshot" not in (child.stored() or {"snapshot": 1}))
        child.kill()  # the snapshot-complete offset is stored before streaming starts
        h.sql(f'DELETE FROM dbo."{t}" WHERE id = 3')
        child.start()
        events = h.read(cfg, "done", min_count=302, settle=2.0, timeout=60)
    finally:
        child.kill()
    assert sum(1 for e in events if e.op == "r") == 300
    reconcile(h, t, events)
