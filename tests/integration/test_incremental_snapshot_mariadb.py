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


def test_a_float_key_reads_its_largest_row(db: Db, spies: list[Spy]) -> None:
    """The largest key came back as the text protocol's 6 digits (0.1), below the stored
    float32 (0.100000001...): ``key <= 0.1`` left out the row with the largest key."""
    db.sql(
        "CREATE TABLE fk (k FLOAT PRIMARY KEY, v int)",
        "INSERT INTO fk VALUES (-2.5, 1), (0.05, 2), (0.1, 3)",
    )
    cfg = db.config("fk", snapshot_mode=db.no_data, incremental_snapshot_chunk_size=2)
    with db.h.running(cfg) as run:
        db.h.wait_streaming(run)
        db.signal(["fk"])
        events = scenarios.read(db, db.topic(cfg, "fk"), 3)
    assert sorted(e.after["v"] for e in events if e.op == "r") == [1, 2, 3]
