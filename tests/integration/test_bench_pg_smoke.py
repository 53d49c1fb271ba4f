"""Smoke run of bench/pg_drain.py (the full 1M-row run is on demand)."""

from __future__ import annotations

import pytest

from bench import pg_drain

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


def test_pg_drain_benchmark_runs_end_to_end(postgres: object, kafka: str) -> None:
    report = pg_drain.main(["--rows", "500"])
    assert report["rows"] == 500
    for contender in ("pg_recvlogical", "tidemark"):
        r = report[contender]
        assert r["wall_s"] > 0 and r["cpu_s"] > 0 and r["peak_rss_mb"] > 0
    assert report["tidemark"]["events"] >= 500  # every insert reached Kafka
    assert report["ratio_events_per_s"] > 0
