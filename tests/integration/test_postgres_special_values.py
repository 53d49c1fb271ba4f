"""Values PostgreSQL stores that stopped capture or broke their own schema (issues 12.6,
20.3): numeric NaN/±Infinity, date/timestamp ±infinity, years beyond 9999 and BC, -0, and
1000-digit numerics, through a real snapshot and real streaming."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from connectors.postgres.types import civil_days
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness, read_topic

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

DIGITS = "7" * 1000
DAY_US = 86_400_000_000


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    with PgHarness(postgres, kafka, f"tm_special_{uuid.uuid4().hex[:8]}") as harness:
        harness.sql(
            "CREATE TABLE specials (id int PRIMARY KEY, n numeric, nn numeric NOT NULL, d date, "
            "ts timestamp, tstz timestamptz, f float8, big numeric)",
            "INSERT INTO specials VALUES "
            f"(1, 'NaN', 'Infinity', 'infinity', '-infinity', 'infinity', '-0', '{DIGITS}'), "
            "(2, '-Infinity', 'NaN', '10000-01-01', '0044-03-15 12:00:00 BC', "
            f"'12345-06-07 08:09:10+00', 'NaN', '-{DIGITS}.{DIGITS[:300]}')",
        )
        yield harness


def capture(h: PgHarness, cfg: dict[str, Any], count: int) -> list[Any]:
    """Snapshot rows 1 and 2, then stream an insert of row 3 and an update of row 1."""
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql(
            "INSERT INTO specials VALUES (3, 1.5, 0, '0001-01-01 BC', "
            "'294276-12-31 23:59:59', '4713-01-01 00:00:00+00 BC', 'Infinity', 0)",
            "UPDATE specials SET n = 'Infinity', nn = '-Infinity', f = '-Infinity' WHERE id = 1",
        )
        events = read_topic(h.kafka, h.topic(cfg, "specials"), min_count=count)
    h.sql("DELETE FROM specials WHERE id = 3")
    return events


def test_string_mode_carries_every_special_value(h: PgHarness) -> None:
    cfg = h.config(decimal_handling_mode="string", table_include_list="public.specials")
    events = capture(h, cfg, 4)
    assert [(e.op, e.key["id"]) for e in events] == [("r", 1), ("r", 2), ("c", 3), ("u", 1)]
    rows = [e.after for e in events]
    assert rows[0] == {
        "id": 1,
        "n": "NAN",
        "nn": "POSITIVE_INFINITY",
        "d": -2147472692,  # Debezium's value for infinity
        "ts": -9223372036832400000,  # and for -infinity
        "tstz": "infinity",
        "f": -0.0,
        "big": DIGITS,
    }
    assert rows[1] == {
        "id": 2,
        "n": "NEGATIVE_INFINITY",
        "nn": "NAN",
        "d": civil_days(10000, 1, 1),
        "ts": civil_days(-43, 3, 15) * DAY_US + 12 * 3_600_000_000,
        "tstz": "+12345-06-07T08:09:10Z",
        "f": "NaN",
        "big": f"-{DIGITS}.{DIGITS[:300]}",
    }
    assert rows[2] == {
        "id": 3,
        "n": "1.5",
        "nn": "0",
        "d": civil_days(0, 1, 1),
        "ts": civil_days(294276, 12, 31) * DAY_US + 86_399_000_000,
        "tstz": "-4712-01-01T00:00:00Z",
        "f": "Infinity",
        "big": "0",
    }
    assert math.copysign(1.0, rows[0]["f"]) == -1.0  # -0 stays negative
    assert (rows[3]["n"], rows[3]["nn"], rows[3]["f"]) == (
        "POSITIVE_INFINITY",
        "NEGATIVE_INFINITY",
        "-Infinity",
    )


def test_precise_mode_never_breaks_the_schema_and_never_stops(h: PgHarness) -> None:
    """A Connect Decimal has no NaN/Infinity: null where the column is nullable; in the NOT
    NULL column the event follows event.processing.failure.handling.mode (warn: skipped
    with the reason), and capture goes on."""
    cfg = h.config(
        table_include_list="public.specials", event_processing_failure_handling_mode="warn"
    )
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql(
            "INSERT INTO specials VALUES (4, 'NaN', 2.5, '10000-01-01', NULL, NULL, '-0', 1)",
            "UPDATE specials SET nn = 'NaN' WHERE id = 4",
            "UPDATE specials SET nn = 3, n = '-Infinity' WHERE id = 4",
        )
        events = read_topic(h.kafka, h.topic(cfg, "specials"), min_count=2)
    h.sql("DELETE FROM specials WHERE id = 4")
    # rows 1 and 2 (a special value in the NOT NULL column) and the NaN update are skipped
    assert [(e.op, e.key["id"]) for e in events] == [("c", 4), ("u", 4)]
    assert [(e.after["n"], e.after["nn"]) for e in events] == [
        (None, {"scale": 1, "value": "GQ=="}),
        (None, {"scale": 0, "value": "Aw=="}),
    ]
    assert events[0].after["d"] == civil_days(10000, 1, 1)
    assert math.copysign(1.0, events[0].after["f"]) == -1.0
