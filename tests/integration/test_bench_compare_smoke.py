"""Smoke run of the side-by-side benchmark (bench/compare) against the real Debezium Server.

About 1,000 events through every contender — tidemark, Debezium Server 3.x (resolved from
Maven Central on first use and cached under ~/.cache/tidemark), pg_recvlogical — with the
parity check on. It proves the harness, the Debezium launch and the event contract still
work; the figures themselves mean nothing at this size. Never skipped: if Debezium Server or
its Java 21 runtime cannot be resolved, the test fails and says why.
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest

from bench.compare import cli
from tests.integration.debezium_server import debezium_server

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


def test_side_by_side_benchmark_runs_with_parity(
    postgres: object, kafka: str, tmp_path: Path
) -> None:
    debezium_server()

    t0 = time.monotonic()
    report = cli.main(
        [
            "--db",
            "postgres",
            "--workloads",
            "W1",
            "--rows",
            "1000",
            "--runs",
            "1",
            "--no-warmup",
            "--results",
            str(tmp_path),
        ]
    )
    elapsed = time.monotonic() - t0

    rows = {r["contender"]: r for r in report["results"]}
    assert set(rows) == {"tidemark", "debezium", "pg_recvlogical", "kafka_produce"}
    ceiling = rows["kafka_produce"]
    assert ceiling["events"] == 1000 and ceiling["events_per_s"] > 0
    for name in ("tidemark", "debezium"):
        r = rows[name]
        assert r["events"] == 1000
        assert r["events_per_s"] > 0 and r["peak_rss_mb"] > 0 and r["cpu_total_s"] > 0
        assert 0 < r["first_event_s"] < 120

    # Parity ran before any figure and found nothing outside the documented list.
    parity = report["parity"]["W1"]
    assert parity["ok"], parity
    assert parity["compared"] >= 200 + 8  # bench_rows sample + every parity-table event
    assert all(d["known"] for d in parity["differences"])
    assert (tmp_path / "results.csv").exists() and (tmp_path / "summary.json").exists()
    print(f"bench.compare smoke: {elapsed:.1f} s")

    # Nothing left behind: the run's database and slots are gone.
    (db,) = report["databases"]
    with psycopg.connect(postgres.dsn("postgres"), autocommit=True) as c:  # type: ignore[attr-defined]
        dbs = c.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (db,)).fetchone()
        slots = c.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE %s", (f"{db}%",)
        ).fetchone()
    assert dbs == (0,) and slots == (0,)
