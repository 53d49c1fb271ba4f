"""bench.sqlserver_drain runs end to end on a small backlog: both contenders read every
change row (the figures themselves are in docs/benchmarks.md, not asserted)."""

from __future__ import annotations

import pytest

from bench import sqlserver_drain
from tests.integration.conftest import SqlServerInfo

pytestmark = [pytest.mark.sqlserver, pytest.mark.kafka]


def test_drain_reads_every_change(sqlserver: SqlServerInfo, kafka: str) -> None:
    report = sqlserver_drain.main(["--rows", "300", "--rows-per-tx", "7"])
    assert report["pyodbc select"]["events"] == 300
    assert report["tidemark"]["events"] == 300
