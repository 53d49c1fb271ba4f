"""Connector plugins: name resolution, missing drivers, config checks and offset shapes."""

from __future__ import annotations

import pytest

from worker.registry import (
    BUILTINS,
    MASK,
    PluginError,
    PluginSpec,
    Registry,
    mask_config,
)


@pytest.fixture(scope="module")
def reg() -> Registry:
    return Registry()


@pytest.mark.parametrize(
    "name",
    [
        "postgres",
        "Postgres",
        "postgresql",
        "io.debezium.connector.postgresql.PostgresConnector",
        "PostgresConnector",
    ],
)
def test_postgres_is_found_by_every_name(reg: Registry, name: str) -> None:
    plugin = reg.resolve(name)
    assert plugin.class_name == "io.debezium.connector.postgresql.PostgresConnector"
    assert plugin.type_name == "postgresql"
    assert plugin.info() == {
        "class": "io.debezium.connector.postgresql.PostgresConnector",
        "type": "source",
        "version": plugin.version,
    }


def test_memory_connector_and_unknown_names(reg: Registry) -> None:
    assert reg.resolve("memory").class_name == "io.tidemark.connector.memory.MemoryConnector"
    assert reg.resolve("io.debezium.connector.mariadb.MariaDbConnector").spec.name == "mysql"
    with pytest.raises(PluginError, match=r"unknown connector class 'oracle'.*postgres"):
        reg.resolve("oracle")
    with pytest.raises(PluginError, match="empty"):
        reg.resolve(" ")


def test_a_missing_driver_names_the_pip_install() -> None:
    reg = Registry(
        (*BUILTINS, PluginSpec("oracle", "tidemark_no_such_driver_xyz:Conn", extra="oracle")),
        entry_points=False,
    )
    with pytest.raises(PluginError) as info:
        reg.resolve("oracle")
    assert "pip install 'tidemark[oracle]'" in str(info.value)
    # the other plugins are still listed; the broken one is left out
    assert {p.spec.name for p in reg.plugins()} == {"postgres", "mysql", "memory"}
    checked = reg.check({"connector.class": "oracle", "name": "x"})
    assert checked.plugin is None
    assert "pip install 'tidemark[oracle]'" in dict(checked.problems)["connector.class"]


def test_a_target_that_is_not_a_connector_is_refused() -> None:
    reg = Registry((PluginSpec("odd", "cdc.errors:CDCError"),), entry_points=False)
    with pytest.raises(PluginError, match="is not a Connector"):
        reg.resolve("odd")


def test_check_keeps_placeholders_in_what_is_stored(reg: Registry) -> None:
    checked = reg.check(
        {
            "name": "c",
            "connector.class": "postgres",
            "database.hostname": "h",
            "database.user": "u",
            "database.dbname": "d",
            "database.port": 5432,
            "topic.prefix": "p",
            "database.password": "${env:PW}",
        },
        env={"PW": "secret-value"},
    )
    assert checked.ok, checked.problems
    assert checked.stored["database.password"] == "${env:PW}"
    assert checked.stored["database.port"] == "5432"
    assert checked.resolved["database.password"] == "secret-value"


def test_an_unresolvable_placeholder_is_reported_once(reg: Registry) -> None:
    checked = reg.check(
        {
            "connector.class": "memory",
            "memory.database": "x",
            "topic.prefix": "p",
            "max.batch.size": "${env:NOPE}",
        },
        env={},
    )
    assert checked.problems == [("max.batch.size", "environment variable NOPE is not set")]


def test_masking_hides_secrets_but_not_references(reg: Registry) -> None:
    cdef = reg.resolve("postgres").config_def
    masked = mask_config(
        {
            "database.password": "hunter2",
            "database.sslpassword": "${env:SSLPW}",
            "producer.override.sasl.jaas.config": "x required password=y",
            "database.user": "u",
        },
        cdef,
    )
    assert masked == {
        "database.password": MASK,
        "database.sslpassword": "${env:SSLPW}",
        "producer.override.sasl.jaas.config": MASK,
        "database.user": "u",
    }
    assert mask_config({"database.password": "a${env:X}"}, cdef)["database.password"] == MASK


# -- offset shapes ------------------------------------------------------------------------------


def pg(offset: dict[str, object] | None, partition: dict[str, object] | None = None) -> tuple:
    return Registry().resolve("postgres").offset_validator(partition or {"server": "s"}, offset)


def test_pg_offsets_need_a_non_negative_integer_lsn() -> None:
    for bad in (-1, "12", 1.5, True, None):
        _, probs = pg({"lsn": bad})
        assert probs and "offset.lsn must be a non-negative integer" in probs[0], bad
    _, probs = pg({"txId": 5})
    assert probs == ["offset.lsn is required (the LSN of the last delivered event)"]
    _, probs = pg({"lsn": 10, "colour": "red"})
    assert probs == ["unknown offset key(s) colour"]
    _, probs = pg({"lsn": 10, "complete": "yes"})
    assert probs == ["offset.complete must be true or false, got 'yes'"]


def test_pg_partition_is_the_server() -> None:
    _, probs = pg({"lsn": 1}, {"db": "x"})
    assert probs == ['partition must be {"server": "<topic.prefix>"}']
    _, probs = pg(None, {"server": "s"})  # null offset: reset this partition
    assert probs == []


def test_a_bare_lsn_is_completed_into_a_resume_position() -> None:
    stored, probs = pg({"lsn": 1000})
    assert probs == []
    assert stored == {
        "lsn": 1000,
        "lsn_commit": 1000,
        "seq": 0,
        "complete": True,
        "flush_lsn": 1000,
    }
    full = {
        "lsn": 5,
        "txId": 7,
        "ts_usec": 1,
        "lsn_commit": 5,
        "seq": 2,
        "complete": False,
        "flush_lsn": 3,
    }
    assert pg(full) == (full, [])
    debezium = {"lsn": 9, "txId": None, "ts_usec": 1, "lsn_proc": 9, "messageType": "INSERT"}
    assert pg(debezium)[1] == []


def test_memory_offsets() -> None:
    check = Registry().resolve("memory").offset_validator
    assert check({"server": "s"}, {"pos": 3}) == ({"pos": 3}, [])
    assert check({"server": "s"}, {"pos": -3})[1] == [
        "offset.pos must be a non-negative integer, got -3"
    ]
