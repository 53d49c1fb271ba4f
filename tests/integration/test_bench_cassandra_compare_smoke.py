"""Smoke runs of the Cassandra side by side (bench/cassandra_compare.py): a private node, 2,000
INSERTs, then tidemark's connector and Debezium's own Cassandra agent (the real JVM, from Maven
Central) each drain them from the commit log into Kafka, or snapshot the table. It proves the
harness, the agent's launch on its mirror of ``cdc_raw`` and that both deliver exactly the
rows (the bench fails on any other count); the figures mean nothing at this size. Never
skipped: if the agent or Java cannot be had, the test fails and says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import cassandra_compare
from tests.faults.private import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra]


@pytest.mark.parametrize("workload", ["drain", "snapshot"])
def test_cassandra_side_by_side_runs(
    kafka: str, tmp_path: Path, workload: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the bench's private node on free ports, not its fixed ones: a benchmark (or another
    # test run) on this machine may hold those
    monkeypatch.setenv("BENCH_CASSANDRA_PORT", str(free_port()))
    monkeypatch.setenv("BENCH_CASSANDRA_STORAGE_PORT", str(free_port()))
    report = cassandra_compare.main(
        ["--rows", "2000", "--runs", "1", "--workload", workload, "--results", str(tmp_path)]
    )
    assert report["rows"] == 2000 and report["workload"] == workload
    for name in ("tidemark", "debezium"):
        (run,) = report["results"][name]
        assert 0 < run["drain_s"] <= run["wall_s"] < 300, name
        assert run["cpu_s"] > 0 and run["peak_rss_mb"] > 0, name
        # both write JSON with schemas: a record is its schema text and the row
        assert 1000 < run["record_bytes"] < 20000, name
    assert report["ratios"]["cpu_per_event"] > 0
