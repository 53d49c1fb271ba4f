"""Smoke run of W8 (bench/compare/incremental.py): an incremental snapshot while streaming.

5,000 rows snapshotted by an ``execute-snapshot`` signal while 2,000 events/s are streamed
into another table, tidemark only: Debezium Server's start-up would make this test take
about 30 s instead of about 8 (the side-by-side W1 smoke test already proves its launch, and
W8's Debezium keys are the connector's documented ones). The harness itself checks that the
snapshot topic holds every key once as ``op=r``; the figures mean nothing at this size.
"""

from __future__ import annotations

import math
from pathlib import Path

import psycopg
import pytest

from bench.compare import cli

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


def test_w8_incremental_snapshot_while_streaming(
    postgres: object, kafka: str, tmp_path: Path
) -> None:
    report = cli.main(
        [
            "--db",
            "postgres",
            "--workloads",
            "W8",
            "--contenders",
            "tidemark",
            "--w8-rows",
            "5000",
            "--w8-warmup-seconds",
            "1",
            "--runs",
            "1",
            "--no-warmup",
            "--results",
            str(tmp_path),
        ]
    )

    (row,) = report["results"]
    assert row["workload"] == "W8" and row["contender"] == "tidemark"
    assert row["snapshot_rows"] == 5000 and row["chunk_size"] == 1024
    assert row["snapshot_rows_per_s"] > 0 and row["first_read_s"] >= 0
    # Streamed events were committed while the snapshot ran, and all of them were measured.
    assert row["streamed_in_window"] > 0
    assert math.isfinite(row["p99_ms"]) and row["p99_ms"] >= row["p50_ms"] > 0
    assert row["peak_rss_mb"] > 0 and row["snapshot_cpu_s"] > 0
    assert "W8" in (tmp_path / "summary.md").read_text()

    # Nothing left behind: the run's database and its slots are gone.
    (db,) = report["databases"]
    with psycopg.connect(postgres.dsn("postgres"), autocommit=True) as c:  # type: ignore[attr-defined]
        left = c.execute(
            "SELECT (SELECT count(*) FROM pg_database WHERE datname = %(db)s)"
            " + (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE %(db)s || '%%')",
            {"db": db},
        ).fetchone()
    assert left == (0,)
