"""Against the real server: a PostgreSQL connector without ambient credentials (every one
configured over REST) cannot log in with the worker's ``PGPASSWORD`` or ``~/.pgpass``,
while one from the YAML file still can, as libpq users expect."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from cdc.common_config import AMBIENT_CREDENTIALS
from connectors.postgres.connection import connect
from connectors.postgres.connector import PostgresConnector
from tests.integration.conftest import PgInfo

pytestmark = pytest.mark.postgres


def settings(pg: PgInfo, **extra: str) -> dict[str, str]:
    return {
        "connector.class": "postgres",
        "database.hostname": pg.host,
        "database.port": str(pg.port),
        "database.user": pg.user,
        "database.dbname": pg.dbname,
        "topic.prefix": "ambient",
        **extra,
    }


def logs_in(config: dict[str, str]) -> bool:
    try:
        with connect(PostgresConnector.config_def.parse(config)) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError as exc:
        assert "password" in str(exc)  # refused for want of a password, nothing else
        return False


@pytest.mark.parametrize("source", ["PGPASSWORD", "PGPASSFILE"])
def test_the_worker_s_password_is_not_lent_to_a_rest_config(
    postgres: PgInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "absent"))
    if source == "PGPASSWORD":
        monkeypatch.setenv("PGPASSWORD", postgres.password)
    else:
        passfile = tmp_path / "pgpass"
        passfile.write_text(f"*:*:*:{postgres.user}:{postgres.password}\n")
        passfile.chmod(0o600)
        monkeypatch.setenv("PGPASSFILE", str(passfile))

    assert logs_in(settings(postgres))  # the YAML file's connector: libpq's own rules
    assert not logs_in(settings(postgres, **{AMBIENT_CREDENTIALS: "false"}))
    # the password in the config itself always works
    given = settings(postgres, **{AMBIENT_CREDENTIALS: "false"})
    assert logs_in({**given, "database.password": postgres.password})
