"""bench.mongodb_drain at a tiny size: both contenders drain exactly the written changes."""

from __future__ import annotations

import pytest

from bench import mongodb_drain

pytestmark = [pytest.mark.mongodb, pytest.mark.kafka]


def test_drain_bench_counts_every_change(mongodb: str, kafka: str) -> None:
    report = mongodb_drain.main(["--events", "3000"])
    assert report["raw"]["events"] == 3000
    assert report["tidemark"]["events"] == 3000
    assert report["tidemark"]["events_per_s"] > 0 and report["ratio_cpu_per_1m"] > 0
