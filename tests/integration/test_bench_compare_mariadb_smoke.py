"""Smoke run of the side-by-side benchmark on MariaDB against the real Debezium Server.

1,000 single-row transactions (W1) through tidemark's MySQL/MariaDB connector, Debezium
Server 3.x with Debezium's own MariaDB connector, and ``mariadb-binlog``, with the parity
check on. It proves the priming procedure (both capture contenders stop at the same marker
and resume there for the backlog), the Debezium launch and the event contract; the figures
mean nothing at this size. Never skipped: if Debezium Server, its Java 21 runtime or the
MariaDB client tools are missing, the test fails and says why.
"""

from __future__ import annotations

import time
from pathlib import Path

import pymysql  # type: ignore[import-untyped]
import pytest

from bench.compare import cli, common, mariadb
from bench.compare.common import BenchError
from tests.integration.debezium_server import debezium_server

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]


def test_side_by_side_benchmark_on_mariadb_runs_with_parity(
    mariadb: object, kafka: str, tmp_path: Path
) -> None:
    debezium_server()
    try:
        _mariadb_tools()
    except BenchError as exc:
        pytest.fail(str(exc))

    t0 = time.monotonic()
    report = cli.main(
        [
            "--db",
            "mariadb",
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
    assert set(rows) == {"tidemark", "debezium", "mysqlbinlog"}, rows
    assert {r["workload"] for r in report["results"]} == {"W1-mariadb"}
    for name in ("tidemark", "debezium"):
        r = rows[name]
        assert r["events"] == 1000
        assert r["events_per_s"] > 0 and r["peak_rss_mb"] > 0 and r["cpu_total_s"] > 0
        # Resumed from the primed offset: streaming starts within seconds of the process.
        assert 0 < r["first_event_s"] < 120, r

    # Parity ran before any figure and found nothing outside the documented list.
    parity = report["parity"]["W1-mariadb"]
    assert parity["ok"], parity
    assert parity["compared"] >= 200 + 6  # bench_rows sample + every parity_types event
    assert all(d["known"] for d in parity["differences"]), parity
    assert (tmp_path / "results.csv").exists() and (tmp_path / "summary.json").exists()
    # Both contenders were primed at the same marker and stored an offset there.
    primed = tmp_path / "W1-mariadb-prime"
    assert (primed / "tidemark" / "offsets.json").exists()
    assert (primed / "debezium" / "offsets.dat").exists()
    print(f"bench.compare MariaDB smoke: {elapsed:.1f} s")

    # Nothing left behind: the database is dropped and no contender process survives.
    (db,) = report["mariadb_databases"]
    conn = pymysql.connect(
        host=mariadb.host,  # type: ignore[attr-defined]
        port=mariadb.port,  # type: ignore[attr-defined]
        user=mariadb.user,  # type: ignore[attr-defined]
        password=mariadb.password,  # type: ignore[attr-defined]
    )
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES LIKE %s", (db,))
            assert cur.fetchall() == ()
    finally:
        conn.close()
    assert not common._LIVE, f"contender processes left running: {list(common._LIVE)}"


def _mariadb_tools() -> None:
    mariadb.require_tools()
