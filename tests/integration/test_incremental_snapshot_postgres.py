"""Incremental snapshots by signal on the real PostgreSQL through Kafka (AC-72…AC-77)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from connectors.postgres import PostgresConnector
from tests.integration import incremental_scenarios as scenarios
from tests.integration.conftest import PgInfo
from tests.integration.incremental_scenarios import Db, Spy
from tests.integration.pg_harness import PgHarness

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


@pytest.fixture(scope="module")
def db(postgres: PgInfo, kafka: str) -> Iterator[Db]:
    harness = PgHarness(postgres, kafka, f"tmi_{uuid.uuid4().hex[:8]}")
    harness.sql(scenarios.SIGNAL_DDL)
    yield Db(
        harness,
        schema="public",
        key=str,
        no_data="never",
        upsert="INSERT INTO w77 VALUES ({k}, 1) ON CONFLICT (id) DO UPDATE SET n = w77.n + 1",
    )
    harness.dispose()


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> list[Spy]:
    return scenarios.spy_on(monkeypatch, PostgresConnector)


class TestPostgres(scenarios.Scenarios):
    """AC-72 new table by signal while streaming, AC-73 chunks, AC-74 the K1…K6 figure,
    AC-75 resume, AC-76 no primary key, AC-77 concurrent writers."""

    def test_kafka_and_rest_signals_pause_and_resume(self, db: Db, spies: list[Spy]) -> None:
        scenarios.other_channels(db, spies)
