"""Legal values that stopped capture or arrived wrong (issue 25, PostgreSQL): wide numerics,
geometric columns, intervals beyond int64, unchanged TOASTed arrays and hstore, money as a
decimal string, empty bit varying, 2-D arrays and tsvector, through a real snapshot and real
streaming."""

from __future__ import annotations

import base64
import decimal
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import Event, PgHarness, read_topic

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

INT64_MAX = 2**63 - 1


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    harness = PgHarness(postgres, kafka, f"tm_edge_{uuid.uuid4().hex[:8]}")
    yield harness
    harness.dispose()


def capture(
    h: PgHarness, cfg: dict[str, Any], table: str, stream: list[str], count: int
) -> list[Event]:
    """Snapshot what is there, then run ``stream`` while streaming."""
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql(*stream)
        events = read_topic(h.kafka, h.topic(cfg, table), min_count=count)
    assert run.errors == []
    return events


def unscaled(value: dict[str, Any] | str, scale: int) -> decimal.Decimal:
    """A Connect Decimal as the JSON converter writes it (base64 of the unscaled bytes)."""
    raw = base64.b64decode(value) if isinstance(value, str) else value
    exact = decimal.Context(prec=100)
    return decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale, exact)


def test_wide_numerics_geometric_columns_and_huge_intervals(h: PgHarness) -> None:
    h.sql(
        "CREATE TABLE wide (id int PRIMARY KEY, n38 numeric(38,0), n30 numeric(30,2), "
        "n40 numeric(40,10), b box, l lseg, iv interval)",
        f"INSERT INTO wide VALUES (1, {'9' * 38}, {'9' * 28}.99, -{'9' * 30}.{'9' * 10}, "
        "'((1,2),(3,4))', '[(0,0),(1,1)]', '178000000 years')",
    )
    cfg = h.config(table_include_list="public.wide")
    events = capture(
        h,
        cfg,
        "wide",
        [
            f"INSERT INTO wide VALUES (2, -{'9' * 38}, 0.01, 1.5, '((0,0),(1,1))', "
            "'[(1,1),(2,2)]', '-178000000 years')",
            "UPDATE wide SET b = '((5,5),(6,6))', n38 = 1 WHERE id = 1",
        ],
        3,
    )
    assert [(e.op, e.key["id"]) for e in events] == [("r", 1), ("c", 2), ("u", 1)]
    read, created, updated = (e.after for e in events)
    for row in (read, created, updated):
        assert "b" not in row and "l" not in row  # as Debezium: an unknown type is omitted
    assert unscaled(read["n38"], 0) == decimal.Decimal("9" * 38)
    assert unscaled(read["n30"], 2) == decimal.Decimal("9" * 28 + ".99")
    assert unscaled(read["n40"], 10) == decimal.Decimal("-" + "9" * 30 + "." + "9" * 10)
    assert unscaled(created["n38"], 0) == decimal.Decimal("-" + "9" * 38)
    assert read["iv"] == INT64_MAX and created["iv"] == -(2**63)
    assert unscaled(updated["n38"], 0) == 1
