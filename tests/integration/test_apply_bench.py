"""A 1k-event smoke run of bench/apply_bench.py (the 1M-event run is done by hand)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_apply_bench_smoke(
    spark: Any, kafka: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also the large-batch path: two partitions, no repeated keys, so the distinct-key count
    skips the per-key reduction before the MERGE, and the table still ends as expected."""
    import cdc.apply.job as job_module
    from bench.apply_bench import main

    monkeypatch.setattr(job_module, "REDUCE_CHECK_ROWS", 0)

    result = main(
        ["--events", "1000", "--batch", "500", "--bootstrap", kafka, "--workdir", str(tmp_path)],
        spark=spark,
    )
    assert result["final_rows"] == result["expected_rows"]
    assert result["micro_batches"] >= 2
    assert result["apply_rows_per_s"] > 0 and result["append_rows_per_s"] > 0
    assert result["ratio_apply_to_append"] > 0


def test_apply_bench_smoke_merge_on_read(spark: Any, kafka: str, tmp_path: Path) -> None:
    """The merge-on-read run: batches go to the change log, the real-time view already has
    every row before the compaction, and the table has them all after it."""
    from bench.apply_bench import main

    args = ["--events", "1000", "--batch", "500", "--bootstrap", kafka]
    result = main([*args, "--workdir", str(tmp_path), "--table-type", "merge-on-read"], spark=spark)
    assert result["viewed_rows"] == result["expected_rows"] == result["final_rows"]
    assert result["micro_batches"] >= 2
    assert "logged=" in result["batch_lines"][0] and result["ratio_with_compaction"] > 0
