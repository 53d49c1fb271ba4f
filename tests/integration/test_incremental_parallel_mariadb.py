"""Incremental snapshot chunks read by three readers at once on the real MariaDB through
Kafka (``snapshot.max.threads=3``): AC-74, AC-75, AC-77."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connectors.mysql import MySqlConnector
from tests.integration import incremental_parallel_scenarios as parallel
from tests.integration import incremental_scenarios as scenarios
from tests.integration.conftest import MySqlInfo
from tests.integration.incremental_scenarios import Db, Spy

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]


@pytest.fixture(scope="module")
def db(mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Db]:
    for base in scenarios.mariadb_db(mariadb, kafka, tmp_path_factory.mktemp("par")):
        yield parallel.ParallelDb.of(base)


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> list[Spy]:
    return parallel.spy_on(monkeypatch, MySqlConnector)


class TestParallelMariaDb:
    def test_k1_to_k6_figure(self, db: Db, spies: list[Spy]) -> None:
        scenarios.k1_to_k6(db, spies)

    def test_overlapping_reads_under_writers(self, db: Db, spies: list[Spy]) -> None:
        parallel.overlapping_reads_under_writers(db, spies)

    def test_resume_after_the_last_chunk_emitted(self, db: Db, spies: list[Spy]) -> None:
        parallel.resume_after_the_last_chunk_emitted(db, spies)
