"""Unknown connector keys: likely typos are warned about, pass-through namespaces are not, and
nothing unknown ever makes a config invalid (issue 12, part 5).

Checked where a user sees it: the real ``tidemark validate`` command, the REST validate JSON,
and the log line written when the connector starts.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc.offsets.memory import MemoryOffsetStore
from connectors.mysql.config import CONFIG_DEF as MYSQL_DEF
from connectors.postgres.config import CONFIG_DEF as PG_DEF
from tests.unit.test_worker_herder import WORKER, Engines, memory, settings
from tests.unit.test_worker_task import wait_for
from worker.herder import Herder
from worker.registry import Registry
from worker.rest import App, Request

ROOT = Path(__file__).resolve().parents[2]

PG_CONFIG = {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "database.hostname": "127.0.0.1",
    "database.user": "postgres",
    "database.dbname": "inventory",
    "topic.prefix": "dbserver1",
}

PASS_THROUGH = {
    "transforms": "unwrap",
    "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
    "predicates": "p",
    "predicates.p.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "predicates.p.pattern": "x.*",
    "key.converter.schemas.enable": "false",
    "value.converter.schemas.enable": "false",
    "producer.override.linger.ms": "5",
    "driver.applicationName": "cdc",
    "database.initial.statements": "SET search_path=inventory",
    "snapshot.select.statement.overrides": "inventory.customers",
    "snapshot.select.statement.overrides.inventory.customers": "SELECT * FROM customers",
    "column.mask.with.5.chars": "inventory.customers.email",
    "column.truncate.to.10.chars": "inventory.customers.last_name",
    "column.mask.hash.SHA-256.with.salt.pepper": "inventory.customers.first_name",
    "errors.tolerance": "none",
    "errors.log.enable": "true",
    "topic.creation.default.compression.type": "lz4",
    "topic.creation.groups": "big",
    "my.own.tool.setting": "x",
}


def unknown(raw: dict[str, str], cdef: Any = PG_DEF) -> dict[str, str]:
    return dict(cdef.unknown_keys(raw))


def test_a_typo_gets_the_key_it_was_meant_to_be() -> None:
    found = unknown({**PG_CONFIG, "databse.port": "5432", "Slot.Name": "s"})
    assert found == {
        "databse.port": "is not a known key; did you mean `database.port`? (passed through as is)",
        "Slot.Name": "is not a known key; did you mean `slot.name`? (passed through as is)",
    }


def test_a_misspelt_namespace_is_suggested_with_the_rest_of_the_key() -> None:
    found = unknown({**PG_CONFIG, "tranforms.unwrap.type": "x"})
    assert "`transforms.unwrap.type`" in found["tranforms.unwrap.type"]


def test_inside_a_namespace_only_its_own_keys_are_candidates() -> None:
    found = unknown({**PG_CONFIG, "topic.creation.default.partiton": "3"})
    assert "`topic.creation.default.partitions`" in found["topic.creation.default.partiton"]


def test_pass_through_keys_and_foreign_keys_raise_no_warning() -> None:
    assert unknown({**PG_CONFIG, **PASS_THROUGH}) == {}
    history = {
        "database.history.producer.security.protocol": "SSL",
        "schema.history.internal.consumer.ssl.ca.location": "/ca.pem",
    }
    mysql = {k: v for k, v in PG_CONFIG.items() if k != "database.dbname"}
    assert unknown({**mysql, **PASS_THROUGH, **history}, MYSQL_DEF) == {}


def test_mysql_converter_keys_named_by_converters_pass_through() -> None:
    raw = {
        "converters": "boolean",
        "boolean.type": "io.debezium.connector.mysql.converters.TinyIntOneToBooleanConverter",
        "boolean.selector": "db.t.flag",
    }
    assert unknown(raw, MYSQL_DEF) == {}


def test_debezium_properties_tidemark_lacks_are_named_as_such() -> None:
    found = unknown({**PG_CONFIG, "snapshot.query.mode": "select_all"})
    assert found == {
        "snapshot.query.mode": "is a Debezium property tidemark does not implement; ignored"
    }


def test_aliases_are_known_keys() -> None:
    assert unknown({**PG_CONFIG, "table.whitelist": "a.b", "database.server.name": "x"}) == {}


def test_unknown_keys_never_make_a_config_invalid() -> None:
    checked = Registry().check({**PG_CONFIG, "databse.port": "5432", "zzz": "1"})
    assert checked.ok, checked.problems
    assert checked.warnings == [
        ("databse.port", "is not a known key; did you mean `database.port`? (passed through as is)")
    ]


def _write(tmp_path: Path, config: dict[str, str]) -> Path:
    import yaml

    path = tmp_path / "worker.yaml"
    doc = {
        "worker": {"state.dir": str(tmp_path)},
        "connectors": [{"name": "inv", "config": config}],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def _tidemark(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("tidemark")
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, cwd=ROOT, env=dict(os.environ)
    )


def test_cli_validate_prints_the_suggestion_and_still_passes(tmp_path: Path) -> None:
    path = _write(tmp_path, {**PG_CONFIG, **PASS_THROUGH, "databse.port": "5432"})
    result = _tidemark("validate", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "warning: connectors[0].config.databse.port: is not a known key; "
        "did you mean `database.port`? (passed through as is)"
    ]
    assert result.stdout.strip() == f"{path}: valid (1 connector(s): inv, 1 warning(s))"


def test_cli_validate_shows_warnings_next_to_errors(tmp_path: Path) -> None:
    config = {**PG_CONFIG, "databse.port": "5432", "database.port": "many"}
    result = _tidemark("validate", str(_write(tmp_path, config)))
    assert result.returncode == 1
    assert "warning: connectors[0].config.databse.port: is not a known key" in result.stderr
    assert "connectors[0].config.database.port: must be an integer, got 'many'" in result.stderr


@pytest.fixture
def herder(tmp_path: Path) -> Iterator[Herder]:
    h = Herder(
        settings(tmp_path),
        MemoryOffsetStore(),
        worker_id=WORKER,
        engine_factory=Engines(),
        state_file=tmp_path / "connectors.json",
    )
    h.start()
    yield h
    assert h.shutdown(5)


def test_rest_validate_reports_the_typo_without_an_error(herder: Herder) -> None:
    app = App(herder, version="9.9.9", commit="abc", cluster_id=lambda: "c")
    body = {**PG_CONFIG, **PASS_THROUGH, "databse.port": "5432"}
    r = app.handle(
        Request(
            "PUT",
            "/connector-plugins/PostgresConnector/config/validate",
            {},
            orjson.dumps(body),
        )
    )
    assert r.status == 200
    assert r.body["error_count"] == 0
    message = (
        "databse.port is not a known key; did you mean `database.port`? (passed through as is)"
    )
    assert r.body["warnings"] == [message]
    typo = [c for c in r.body["configs"] if c["definition"]["name"] == "databse.port"]
    assert len(typo) == 1
    assert typo[0]["definition"]["group"] == "Unknown keys"
    assert typo[0]["definition"]["documentation"] == message
    assert typo[0]["value"] == {
        "name": "databse.port",
        "value": "5432",
        "recommended_values": [],
        "errors": [],
        "visible": True,
    }
    assert "Unknown keys" in r.body["groups"]


def test_connector_start_logs_the_typo_at_warning(
    herder: Herder, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="tidemark.worker.herder"):
        herder.create("typo", memory(**{"max.batch.sise": "9"}))
        wait_for(lambda: herder.connector_status("typo")["connector"]["state"] == "RUNNING")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert (
        "connector typo: max.batch.sise is not a known key; did you mean `max.batch.size`? "
        "(passed through as is)"
    ) in warnings


@pytest.mark.parametrize(
    ("key", "given", "read"),
    [
        ("snapshot.mode", "INITIAL", "initial"),
        ("snapshot.mode", "Never ", "never"),
        ("decimal.handling.mode", "DOUBLE", "double"),
        ("event.processing.failure.handling.mode", "WARN", "warn"),
    ],
)
def test_enum_values_are_read_in_their_canonical_spelling(key: str, given: str, read: str) -> None:
    """Debezium parses enum values ignoring case and Kafka's ConfigDef trims them; accepting
    DOUBLE but comparing against "double" made the output silently precise, and WARN failed
    the task on the first bad event."""
    mysql = {"database.hostname": "h", "database.user": "u", "database.server.name": "s"}
    values, problems = MYSQL_DEF.validate({**mysql, "database.server.id": "5", key: given})
    assert problems == [] and values[key] == read


PG_CONNECTOR = {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "database.hostname": "h",
    "database.user": "u",
    "database.dbname": "d",
    "topic.prefix": "p",
}


def test_a_misspelt_transform_setting_is_a_warning_naming_the_setting_meant() -> None:
    """Kafka Connect ignores a transform key it does not know; a misspelt
    delete.handling.mode then silently kept the default (tombstones dropped, no rewrite)."""
    from worker.registry import Registry

    config = {
        **PG_CONNECTOR,
        "transforms": "u",
        "transforms.u.type": "io.debezium.transforms.ExtractNewRecordState",
        "transforms.u.delete.handling.mod": "rewrite",
        "transforms.u.drop.tombstones": "false",
    }
    checked = Registry().check(config)
    assert checked.problems == []
    warnings = dict(checked.warnings)
    assert "`transforms.u.delete.handling.mode`" in warnings["transforms.u.delete.handling.mod"]
    assert "transforms.u.drop.tombstones" not in warnings


def test_a_blank_transform_boolean_or_choice_is_refused_not_defaulted() -> None:
    from cdc.transforms import TransformConfigError, build_chain

    for key in ("drop.tombstones", "delete.handling.mode"):
        config = {
            "transforms": "u",
            "transforms.u.type": "io.debezium.transforms.ExtractNewRecordState",
            f"transforms.u.{key}": " ",
        }
        with pytest.raises(TransformConfigError) as err:
            build_chain(config)
        assert f"transforms.u.{key}" in dict(err.value.errors)


@pytest.mark.parametrize(
    ("key", "value", "text"),
    [
        ("producer.override.linger.ms", "abc", "librdkafka's name for linger.ms"),
        ("producer.override.bogus.setting", "1", 'No such configuration property: "bogus.setting"'),
        ("producer.override.compression.type", "zstdx", '"zstdx"'),
    ],
)
def test_producer_overrides_the_kafka_client_refuses_are_found_by_validation(
    key: str, value: str, text: str
) -> None:
    """They used to pass validation and fail the task at its start, under librdkafka's name
    for the setting."""
    from worker.registry import Registry

    config = dict(PG_CONNECTOR)
    checked = Registry().check({**config, key: value})
    assert [k for k, _ in checked.problems] == [key] and text in checked.problems[0][1]
    good = {"producer.override.linger.ms": "20", "producer.override.max.request.size": "2000000"}
    assert Registry().check({**config, **good}).problems == []
