"""The reselect post-processor's configuration, as Debezium spells it (issue 22 part 2)."""

from __future__ import annotations

import pytest

from cdc.errors import ConfigError
from cdc.pipeline.reselect import RESELECT_CLASS, parse_settings
from cdc.spi import TableId
from connectors.postgres import PostgresConnector

BASE = {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "database.server.name": "s",
    "database.hostname": "h",
    "database.user": "u",
    "database.dbname": "d",
}


def test_debezium_keys_under_any_alias() -> None:
    settings, problems = parse_settings(
        {
            "post.processors": "rs",
            "rs.type": RESELECT_CLASS,
            "rs.reselect.columns.include.list": r"public\.docs:(big|doc)",
            "rs.reselect.null.values": "false",
            "rs.reselect.use.event.key": "true",
        }
    )
    assert problems == [] and settings is not None
    assert (settings.unavailable, settings.null, settings.use_event_key) == (True, False, True)
    docs = TableId("db", "public", "docs")
    assert settings.selects(docs, "BIG") and settings.selects(docs, "doc")
    assert not settings.selects(docs, "big2")  # matched whole
    assert not settings.selects(TableId("db", "other", "docs"), "big")
    mysql = parse_settings(
        {
            "post.processors": "r",
            "r.type": RESELECT_CLASS,
            "r.reselect.columns.exclude.list": "inv\\.t:b",
        }
    )[0]
    assert mysql is not None
    assert not mysql.selects(TableId("inv", None, "t"), "b") and mysql.selects(
        TableId("inv", None, "t"), "c"
    )


def test_no_post_processor_means_none() -> None:
    assert parse_settings({}) == (None, [])


@pytest.mark.parametrize(
    ("extra", "key", "reason"),
    [
        ({"reselector.type": "com.acme.Other"}, "reselector.type", "unknown post processor"),
        ({}, "reselector.type", "is required"),
        (
            {
                "reselector.type": RESELECT_CLASS,
                "reselector.reselect.columns.include.list": "a",
                "reselector.reselect.columns.exclude.list": "b",
            },
            "reselector.reselect.columns.exclude.list",
            "cannot be combined",
        ),
        (
            {"reselector.type": RESELECT_CLASS, "reselector.reselect.null.values": "maybe"},
            "reselector.reselect.null.values",
            "must be true or false",
        ),
    ],
)
def test_bad_settings_fail_the_config_naming_the_key(
    extra: dict[str, str], key: str, reason: str
) -> None:
    with pytest.raises(ConfigError) as err:
        PostgresConnector({**BASE, "post.processors": "reselector", **extra})
    assert any(k == key and reason in why for k, why in err.value.problems), err.value.problems


def test_keys_of_another_alias_are_not_reported_as_unknown() -> None:
    cdef = PostgresConnector.config_def
    raw = {**BASE, "post.processors": "rs", "rs.type": RESELECT_CLASS}
    assert cdef.suggest("rs.reselect.null.values", raw) is None
    assert cdef.lookup("reselector.reselect.unavailable.values") is not None
