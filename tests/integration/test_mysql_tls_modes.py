"""``database.ssl.mode`` against the dev MariaDB, which offers TLS: ``disabled`` (the default)
must connect in plain text although PyMySQL >= 2.2 negotiates TLS on its own whenever the
server offers it; ``required`` encrypts."""

from __future__ import annotations

import pytest

from tests.integration.conftest import MySqlInfo
from tests.integration.test_tls_databases import session_tls_version
from worker.registry import Registry

pytestmark = [pytest.mark.mariadb]


def tls_version(my: MySqlInfo, **extra: str) -> str:
    cfg = (
        Registry()
        .resolve("mysql")
        .config_def.parse(
            {
                "name": "tlsmode",
                "connector.class": "mysql",
                "database.hostname": my.host,
                "database.port": str(my.port),
                "database.user": my.user,
                "database.password": my.password,
                "database.server.id": "4243",
                "topic.prefix": "tlsmode",
                **extra,
            }
        )
    )
    return session_tls_version(cfg)


def test_disabled_connects_in_plain_text_and_required_encrypts(mariadb: MySqlInfo) -> None:
    assert tls_version(mariadb) == ""  # the default, disabled
    assert tls_version(mariadb, **{"database.ssl.mode": "disabled"}) == ""
    assert tls_version(mariadb, **{"database.ssl.mode": "required"}).startswith("TLS")
