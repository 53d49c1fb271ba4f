"""Read-only incremental snapshots (``read.only=true``) on the real MariaDB through Kafka: the
seed's K1…K6 figure, resume and concurrent writers with windows placed by GTID positions
instead of watermark rows, signals through the Kafka signal topic; nothing is written to the
signal table."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connectors.mysql import MySqlConnector
from tests.integration import incremental_scenarios as scenarios
from tests.integration.conftest import MySqlInfo
from tests.integration.incremental_scenarios import Db, Spy

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]


@pytest.fixture(scope="module")
def db(mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Db]:
    tmp = tmp_path_factory.mktemp("inc_ro")
    # signals through the Kafka signal topic; the binlog heartbeat (no write) runs them
    # promptly on an idle database
    settings = {"binlog_heartbeat_interval_ms": 200, "signal_enabled_channels": "kafka"}
    yield from scenarios.mariadb_db(mariadb, kafka, tmp, read_only=settings)


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> list[Spy]:
    return scenarios.spy_on(monkeypatch, MySqlConnector)


class TestMariaDbReadOnly(scenarios.ReadOnlyScenarios):
    """AC-74 the K1…K6 figure, AC-75 resume, AC-77 concurrent writers, read.only=true."""
