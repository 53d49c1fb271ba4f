"""The Cassandra connector's configuration and offsets: errors name the key and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.errors import ConfigError
from connectors.cassandra.config import CONFIG_DEF, cdc_raw_dir, parse_config
from connectors.cassandra.offsets import CommitLogPosition, validate_offset
from connectors.cassandra.transfer import DeleteTransfer, RelocateTransfer, load_transfer


def _yaml(tmp_path: Path, body: str) -> str:
    p = tmp_path / "cassandra.yaml"
    p.write_text(body)
    return str(p)


def test_cdc_raw_from_the_node_yaml(tmp_path: Path) -> None:
    cfg = parse_config(
        {
            "topic.prefix": "c1",
            "cassandra.config": _yaml(tmp_path, "cdc_enabled: true\ncdc_raw_directory: /x/cdc\n"),
        }
    )
    assert cdc_raw_dir(cfg) == Path("/x/cdc")
    assert cfg["snapshot.mode"] == "initial" and cfg["snapshot.consistency"] == "ALL"


def test_kafka_topic_prefix_is_accepted() -> None:
    cfg = parse_config({"kafka.topic.prefix": "legacy", "cassandra.cdc.raw.dir": "/r"})
    assert cfg["database.server.name"] == "legacy"
    # also by the validation tooling uses (tidemark validate, REST config/validate), which
    # reported it as "database.server.name is required"
    values, problems = CONFIG_DEF.validate({"kafka.topic.prefix": "legacy"})
    assert problems == [] and values["database.server.name"] == "legacy"


def test_the_seeds_upper_case_enum_values_mean_what_they_say() -> None:
    """The Cassandra doc's own example is snapshot.mode=ALWAYS; read as written it behaved as
    initial, and snapshot.consistency=one failed at snapshot time."""
    cfg = parse_config(
        {
            "kafka.topic.prefix": "p",
            "cassandra.cdc.raw.dir": "/r",
            "snapshot.mode": "ALWAYS",
            "snapshot.consistency": " one",
        }
    )
    assert (cfg["snapshot.mode"], cfg["snapshot.consistency"]) == ("always", "ONE")


def test_the_standalone_agents_settings_are_named_as_ignored() -> None:
    warnings = dict(
        CONFIG_DEF.unknown_keys(
            {
                "kafka.topic.prefix": "p",
                "kafka.producer.security.protocol": "SSL",
                "http.port": "8000",
                "offset.flush.interval.ms": "1000",
            }
        )
    )
    assert "producer.override." in warnings["kafka.producer.security.protocol"]
    assert "does not implement" in warnings["http.port"]
    assert "worker config" in warnings["offset.flush.interval.ms"]


def test_shared_keys_the_connector_does_not_read_are_named_as_without_effect() -> None:
    """binary.handling.mode and time.precision.mode are common keys every connector accepts;
    Cassandra (like Debezium's) reads neither, which the user hears instead of nothing."""
    from connectors.mongodb.config import CONFIG_DEF as MONGODB
    from connectors.postgres.config import CONFIG_DEF as POSTGRES

    raw = {"binary.handling.mode": "hex", "time.precision.mode": "connect"}
    warnings = dict(CONFIG_DEF.unknown_keys(raw))
    assert "blob is BYTES" in warnings["binary.handling.mode"]
    assert warnings["time.precision.mode"].startswith("has no effect on this connector")
    mongo = dict(MONGODB.unknown_keys({**raw, "decimal.handling.mode": "string"}))
    assert "$numberDecimal" in mongo["decimal.handling.mode"] and len(mongo) == 3
    assert POSTGRES.unknown_keys(raw) == []  # read there


def test_debezium_2x_agent_settings_say_what_replaces_them() -> None:
    """A Debezium 2.x+ Cassandra agent's properties, copied over: the driver config file
    carried the contact points and credentials, so its warning names tidemark's keys;
    field.exclude.list is the column filter."""
    raw = {
        "topic.prefix": "p",
        "cassandra.cdc.raw.dir": "/r",
        "cassandra.driver.config.file": "/etc/dbz/application.conf",
        "commit.log.real.time.processing.enabled": "true",
        "commit.log.marked.complete.poll.interval.ms": "1000",
        "commit.log.post.processing.enabled": "false",
        "num.of.change.event.queues": "2",
        "field.exclude.list": "ks.t.secret",
        "decimal.handling.mode": "DOUBLE",
        "varint.handling.mode": "LONG",
    }
    warnings = dict(CONFIG_DEF.unknown_keys(raw))
    assert "cassandra.hosts" in warnings["cassandra.driver.config.file"]
    assert "cassandra.username" in warnings["cassandra.driver.config.file"]
    assert "cdc.dir.poll.interval.ms" in warnings["commit.log.real.time.processing.enabled"]
    assert "cdc.dir.poll.interval.ms" in warnings["commit.log.marked.complete.poll.interval.ms"]
    assert "commit.log.transfer.class" in warnings["commit.log.post.processing.enabled"]
    assert "does not implement" in warnings["num.of.change.event.queues"]
    assert not {"field.exclude.list", "decimal.handling.mode"} & set(warnings)
    cfg = parse_config(raw)
    assert cfg["column.exclude.list"] == ["ks.t.secret"]
    assert (cfg["decimal.handling.mode"], cfg["varint.handling.mode"]) == ("double", "long")


@pytest.mark.parametrize(
    ("extra", "key", "text"),
    [
        ({}, "cassandra.config", "is required"),
        ({"cassandra.config": "/nope/cassandra.yaml"}, "cassandra.config", "cannot read"),
        ({"cassandra.cdc.raw.dir": "/r", "snapshot.mode": "sometimes"}, "snapshot.mode", ""),
        (
            {"cassandra.cdc.raw.dir": "/r", "commit.log.transfer.class": "relocate"},
            "commit.log.relocation.dir",
            "required",
        ),
        (
            {"cassandra.cdc.raw.dir": "/r", "commit.log.transfer.class": "DELETE"},
            "commit.log.transfer.class",
            "must be delete, relocate, keep, or a 'module:Class'",
        ),
        ({"cassandra.cdc.raw.dir": "/r", "cassandra.port": "70000"}, "cassandra.port", "65535"),
    ],
)
def test_config_errors_name_the_key(extra: dict[str, str], key: str, text: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"topic.prefix": "c1", **extra})
    assert any(k == key and text in reason for k, reason in err.value.problems), err.value.problems


def test_transfer_mistakes_are_found_by_validation_not_at_start() -> None:
    def found(extra: dict[str, str]) -> dict[str, str]:
        return dict(CONFIG_DEF.validate({"topic.prefix": "c1", **extra})[1])

    assert "commit.log.relocation.dir" in found({"commit.log.transfer.class": "relocate"})
    assert "commit.log.transfer.class" in found({"commit.log.transfer.class": "bogus"})
    assert found({"commit.log.transfer.class": "my_pkg.transfers:Archive"}) == {}


def test_yaml_without_cdc_raw_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sets no cdc_raw_directory"):
        parse_config({"topic.prefix": "c1", "cassandra.config": _yaml(tmp_path, "x: 1\n")})


def test_transfers(tmp_path: Path) -> None:
    seg = tmp_path / "CommitLog-8-5.log"
    idx = tmp_path / "CommitLog-8-5_cdc.idx"
    seg.write_bytes(b"x")
    idx.write_text("1\nCOMPLETED")
    assert isinstance(load_transfer("delete", None), DeleteTransfer)
    moved = load_transfer("relocate", str(tmp_path / "done"))
    assert isinstance(moved, RelocateTransfer)
    moved.on_success(seg)
    assert not seg.exists() and (tmp_path / "done" / seg.name).exists()
    assert (tmp_path / "done" / idx.name).exists()
    with pytest.raises(ConfigError, match=r"commit\.log\.transfer\.class"):
        load_transfer("no.such.module:Hook", None)


def test_offsets_round_trip_and_validation() -> None:
    pos = CommitLogPosition.from_offset({"file": "CommitLog-8-17.log", "pos": 4096})
    assert (pos.segment, pos.pos) == (17, 4096)
    assert pos.to_offset() == {"file": "CommitLog-8-17.log", "pos": 4096}
    assert CommitLogPosition.from_offset(None) < pos
    assert validate_offset({"server": "c1"}, {"file": "CommitLog-8-17.log", "pos": 1})[1] == []
    problems = validate_offset({"server": "c1"}, {"file": "x.log", "pos": -1, "lsn": 3})[1]
    assert len(problems) == 3 and "offset.file" in problems[0]


def test_debezium_2_and_3_class_names_resolve_to_the_connector() -> None:
    """Configs written for Debezium 2.x/3.x name the connector per Cassandra major version."""
    from worker.registry import PluginError, Registry

    registry = Registry()
    ours = registry.resolve("cassandra")
    for name in ("CassandraConnector", "Cassandra4Connector", "Cassandra5Connector"):
        assert registry.resolve(f"io.debezium.connector.cassandra.{name}") is ours
    with pytest.raises(PluginError):  # 3.x's commit log is not read here
        registry.resolve("io.debezium.connector.cassandra.Cassandra3Connector")
