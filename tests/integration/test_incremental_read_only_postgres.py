"""Read-only incremental snapshots (``read.only=true``) on the real PostgreSQL through Kafka:
the seed's K1…K6 figure, resume and concurrent writers with windows placed by
``pg_current_snapshot()`` instead of watermark rows; nothing is written to the signal table."""

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
    # heartbeats (WAL messages, no table writes) run signals and close windows promptly on
    # an idle database
    yield from scenarios.postgres_db(postgres, kafka, read_only={"heartbeat_interval_ms": 100})


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> list[Spy]:
    return scenarios.spy_on(monkeypatch, PostgresConnector)


class TestPostgresReadOnly(scenarios.ReadOnlyScenarios):
    """AC-74 the K1…K6 figure, AC-75 resume, AC-77 concurrent writers, read.only=true."""
