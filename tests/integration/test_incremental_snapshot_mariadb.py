"""Incremental snapshots by signal on the real MariaDB through Kafka (AC-72…AC-77)."""

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
    yield from scenarios.mariadb_db(mariadb, kafka, tmp_path_factory.mktemp("inc"))


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> list[Spy]:
    return scenarios.spy_on(monkeypatch, MySqlConnector)


class TestMariaDb(scenarios.Scenarios):
    """AC-72 new table by signal while streaming, AC-73 chunks, AC-74 the K1…K6 figure,
    AC-75 resume, AC-76 no primary key, AC-77 concurrent writers."""
