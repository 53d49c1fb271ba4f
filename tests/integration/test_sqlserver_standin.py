"""The SQL Server stand-in's own promises, which the connector's correctness on it rests on:
commit LSNs follow commit order (no transaction at or below a maximum LSN a reader saw
becomes visible later), change LSNs precede their commit LSN, and the change function
refuses a window below the capture instance's minimum LSN as SQL Server does."""

from __future__ import annotations

import time

import psycopg
import pytest

from tests.integration.conftest import SqlServerInfo
from tests.integration.sqlserver_harness import SqlServerHarness, Writers

pytestmark = [pytest.mark.sqlserver]


def test_no_commit_appears_below_a_seen_maximum(sqlserver: SqlServerInfo) -> None:
    h = SqlServerHarness(sqlserver, kafka="")
    try:
        t = h.create_table("lsn", "id int PRIMARY KEY, v int NOT NULL")
        late: list[tuple[bytes, bytes]] = []
        rounds = 0
        with h.connect() as c:
            (floor,) = c.execute("SELECT sys.fn_cdc_get_max_lsn()").fetchone() or (None,)
        floor = floor or b"\0" * 10
        with Writers(h, t, n=4, keys=300), h.connect() as reader:
            seen: set[bytes] = set()
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                (top,) = reader.execute("SELECT sys.fn_cdc_get_max_lsn()").fetchone() or (None,)
                if top is None:
                    continue
                rows = reader.execute(
                    "SELECT start_lsn FROM cdc.lsn_time_mapping "
                    "WHERE start_lsn > %s AND start_lsn <= %s",
                    (floor, top),
                ).fetchall()
                now = {bytes(r[0]) for r in rows}
                # every commit at or below an earlier maximum was already visible then
                late += [(lsn, top) for lsn in now - seen if seen and lsn <= max(seen)]
                seen |= now
                rounds += 1
        assert rounds > 10 and len(seen) > 50
        assert late == []
    finally:
        h.drop()


def test_change_lsns_precede_commit_lsns_and_updates_share_one(
    sqlserver: SqlServerInfo,
) -> None:
    h = SqlServerHarness(sqlserver, kafka="")
    try:
        t = h.create_table("shape", "id int PRIMARY KEY, v int NOT NULL")
        with h.connect() as conn:
            with conn.transaction():
                conn.execute(f'INSERT INTO dbo."{t}" VALUES (1, 1), (2, 2)')
                conn.execute(f'UPDATE dbo."{t}" SET v = 10 WHERE id = 1')
            conn.execute(f'DELETE FROM dbo."{t}" WHERE id = 2')
            rows = conn.execute(
                f'SELECT "__$start_lsn", "__$seqval", "__$operation", "__$update_mask", id, v '
                f'FROM cdc."fn_cdc_get_all_changes_dbo_{t}"(sys.fn_cdc_get_min_lsn(%s), '
                "sys.fn_cdc_get_max_lsn(), N'all update old') ORDER BY 1, 2, 3",
                (f"dbo_{t}",),
            ).fetchall()
            assert [(r[2], r[4], r[5]) for r in rows] == [
                (2, 1, 1),
                (2, 2, 2),
                (3, 1, 1),
                (4, 1, 10),
                (1, 2, 2),
            ]
            assert len({r[0] for r in rows[:4]}) == 1 and rows[4][0] > rows[0][0]
            assert all(seq < commit for commit, seq, *_ in rows)
            assert rows[2][1] == rows[3][1]  # before and after image: one change LSN
            # the update changed column 2 (v): bit 1 of the mask; inserts set every bit
            assert (bytes(rows[3][3]), bytes(rows[0][3])) == (b"\x02", b"\x03")
            # the "all" filter leaves the before images out
            (count,) = conn.execute(
                f'SELECT count(*) FROM cdc."fn_cdc_get_all_changes_dbo_{t}"'
                "(sys.fn_cdc_get_min_lsn(%s), sys.fn_cdc_get_max_lsn(), N'all')",
                (f"dbo_{t}",),
            ).fetchone() or (0,)
            assert count == 4
            with pytest.raises(psycopg.Error, match="insufficient number of arguments"):
                conn.execute(
                    f'SELECT * FROM cdc."fn_cdc_get_all_changes_dbo_{t}"'
                    "(sys.lsn_of(1), sys.fn_cdc_get_max_lsn(), N'all update old')"
                )
    finally:
        h.drop()
