"""Incremental snapshots by signal on the real PostgreSQL through Kafka (AC-72…AC-77)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connectors.postgres import PostgresConnector
from tests.integration import incremental_scenarios as scenarios
from tests.integration.conftest import PgInfo
from tests.integration.incremental_scenarios import Db, Spy

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


@pytest.fixture(scope="module")
def db(postgres: PgInfo, kafka: str) -> Iterator[Db]:
    yield from scenarios.postgres_db(postgres, kafka)


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> list[Spy]:
    return scenarios.spy_on(monkeypatch, PostgresConnector)


class TestPostgres(scenarios.Scenarios):
    """AC-72 new table by signal while streaming, AC-73 chunks, AC-74 the K1…K6 figure,
    AC-75 resume, AC-76 no primary key, AC-77 concurrent writers."""

    def test_kafka_and_rest_signals_pause_and_resume(self, db: Db, spies: list[Spy]) -> None:
        scenarios.other_channels(db, spies)
