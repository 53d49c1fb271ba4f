"""Config mistakes that used to pass ``tidemark validate`` and REST ``config/validate`` and
surfaced only at task start or mid-snapshot (or never): each is now a problem naming its key."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.mongodb.config import CONFIG_DEF as MONGODB_DEF
from connectors.mysql.config import CONFIG_DEF as MYSQL_DEF
from connectors.postgres.config import CONFIG_DEF as PG_DEF
from connectors.sqlserver.config import CONFIG_DEF as SQLSERVER_DEF

PG = {"database.hostname": "h", "database.user": "u", "database.dbname": "d", "topic.prefix": "p"}
MYSQL = {
    "database.hostname": "h",
    "database.user": "u",
    "database.server.id": "5",
    "database.server.name": "s",
}
SQLSERVER = {"database.hostname": "h", "database.user": "u", "database.server.name": "s"}


def problems(cdef: Any, raw: dict[str, str]) -> dict[str, str]:
    return dict(cdef.validate(raw)[1])


@pytest.mark.parametrize(
    ("extra", "key", "text"),
    [
        ({"column.mask.with.12.char": "db.t.c"}, "column.mask.with.12.char", "mapping key"),
        ({"column.truncate.to.x.chars": "db.t.c"}, "column.truncate.to.x.chars", "mapping key"),
        ({"column.mask.with.3.chars": "db.(t"}, "column.mask.with.3.chars", "regular expr"),
        ({"column.truncate.to.0.chars": "db.t.c"}, "column.truncate.to.0.chars", "positive"),
        ({"column.mask.hash.NOPE.with.salt.s": "db.t.c"}, "column.mask.hash.NOPE.with.salt.s", ""),
        ({"message.key.columns": "inventory.customers"}, "message.key.columns", "<table>:"),
        ({"message.key.columns": "inventory.(c:id"}, "message.key.columns", "regular expr"),
        (
            {"snapshot.select.statement.overrides": "inventory.orders"},
            "snapshot.select.statement.overrides",
            "snapshot.select.statement.overrides.inventory.orders is not set",
        ),
    ],
)
def test_mapping_and_override_mistakes_are_problems(
    extra: dict[str, str], key: str, text: str
) -> None:
    found = problems(PG_DEF, {**PG, **extra})
    assert key in found and text in found[key], found


def test_well_formed_mappings_and_overrides_pass() -> None:
    assert (
        problems(
            PG_DEF,
            {
                **PG,
                "column.mask.with.3.chars": r"inventory\.customers\.email",
                "column.mask.hash.v2.SHA-256.with.salt.x": r".*\.name",
                "message.key.columns": "inventory.customers:id,email",
                "snapshot.select.statement.overrides": "inventory.orders",
                "snapshot.select.statement.overrides.inventory.orders": "SELECT * FROM x",
            },
        )
        == {}
    )


def test_gtid_source_filters_must_be_regular_expressions() -> None:
    assert "gtid.source.includes" in problems(MYSQL_DEF, {**MYSQL, "gtid.source.includes": "(x"})
    assert problems(MYSQL_DEF, {**MYSQL, "gtid.source.excludes": "a1b2.*"}) == {}


def test_sql_server_needs_a_database() -> None:
    assert "is required" in problems(SQLSERVER_DEF, SQLSERVER)["database.names"]
    assert problems(SQLSERVER_DEF, {**SQLSERVER, "database.dbname": "inventory"}) == {}
    assert problems(SQLSERVER_DEF, {**SQLSERVER, "database.names": "a,b"}) == {}


def test_mongodb_logical_name_follows_the_relational_rule() -> None:
    base = {"mongodb.hosts": "rs0/h:27017"}
    assert "Latin letter" in problems(MONGODB_DEF, {**base, "mongodb.name": "1bad"})["mongodb.name"]
    assert problems(MONGODB_DEF, {**base, "mongodb.name": "fulfillment"}) == {}


def test_cross_field_problems_use_the_names_the_user_wrote() -> None:
    both = {"collection.include.list": "a.b", "collection.exclude.list": "a.c"}
    found = MONGODB_DEF.validate({"mongodb.hosts": "rs0/h:1", "mongodb.name": "a", **both})[1]
    assert found == [
        (
            "collection.exclude.list",
            "cannot be used together with collection.include.list; set only one of them",
        )
    ]  # once, under the 1.2-era MongoDB names, not table.* twice
    found = PG_DEF.validate({**PG, "table.whitelist": "a.b", "table.blacklist": "a.c"})[1]
    assert found == [
        ("table.blacklist", "cannot be used together with table.whitelist; set only one of them")
    ]


def test_sql_server_names_its_history_keys_as_ignored() -> None:
    raw = {**SQLSERVER, "database.dbname": "d", "database.history.kafka.topic": "h"}
    assert (
        "keeps no schema history"
        in dict(SQLSERVER_DEF.unknown_keys(raw))["database.history.kafka.topic"]
    )


@pytest.mark.parametrize(
    ("key", "value", "text"),
    [
        ("snapshot.fetch.size", "99999999999999999999", "from -2147483648 to 2147483647"),
        ("snapshot.fetch.size", "2147483648", "Kafka's INT"),
        ("snapshot.fetch.size", "1_000", "must be an integer"),
        ("snapshot.fetch.size", "\u0661\u0662", "must be an integer"),
        ("database.port", "70000", "from 1 to 65535"),
        ("database.port", "0", "from 1 to 65535"),
        ("database.hostname", " ", "is required"),
        ("table.include.list", ",,", "only separators"),
        ("column.propagate.source.type", "(", "not a valid regular expression"),
        ("datatype.propagate.source.type", "x.[", "not a valid regular expression"),
        ("topic.creation.default.partitions", "0", "-1 (the broker's default) or at least 1"),
        ("topic.creation.default.replication.factor", "-7", "or at least 1"),
    ],
)
def test_values_kafka_would_refuse_are_problems(key: str, value: str, text: str) -> None:
    found = problems(PG_DEF, {**PG, key: value})
    assert key in found and text in found[key], found


def test_limits_and_broker_defaults_pass() -> None:
    assert (
        problems(
            PG_DEF,
            {
                **PG,
                "database.port": "65535",
                "snapshot.fetch.size": "2147483647",
                "heartbeat.interval.ms": "+0",
                "topic.creation.default.partitions": "-1",
                "topic.creation.default.replication.factor": "-1",
                "table.include.list": "",
            },
        )
        == {}
    )


@pytest.mark.parametrize(
    ("extra", "key", "text"),
    [
        ({"value.converter.schemas.enable": "maybe"}, "value.converter.schemas.enable", "true or"),
        ({"key.converter.schemas.cache.size": "abc"}, "key.converter.schemas.cache.size", "integ"),
        ({"value.converter.decimal.format": "HEX"}, "value.converter.decimal.format", "NUMERIC"),
        ({"value.converter": "avro"}, "value.converter.schema.registry.url", "is required"),
        (
            {
                "value.converter": "avro",
                "value.converter.schema.registry.url": "http://127.0.0.1:1",
                "value.converter.value.subject.name.strategy": "bogus",
            },
            "value.converter.value.subject.name.strategy",
            "must be one of",
        ),
        (
            {
                "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                "key.converter.converter.encoding": "klingon",
            },
            "key.converter.converter.encoding",
            "no character set",
        ),
    ],
)
def test_converter_settings_are_checked_with_their_full_names(
    extra: dict[str, str], key: str, text: str
) -> None:
    found = problems(PG_DEF, {**PG, **extra})
    assert key in found and text in found[key], found


@pytest.mark.parametrize(
    ("key", "value", "text"),
    [
        ("mongodb.hosts", ",,", "empty host"),
        ("mongodb.hosts", "rs0/h:notaport", "not a number from 1 to 65535"),
        ("mongodb.hosts", "rs0/h1:27017,", "empty host"),
        ("mongodb.connection.string", "not a uri", "must begin with mongodb://"),
        ("mongodb.connection.string", "mongodb://u:p@h:99999/", "'h:99999'"),
    ],
)
def test_mongodb_seed_lists_are_checked(key: str, value: str, text: str) -> None:
    found = problems(MONGODB_DEF, {"mongodb.name": "m", key: value})
    assert key in found and text in found[key], found
    assert "p@" not in found[key]


def test_mongodb_seed_lists_that_pass() -> None:
    for key, value in [
        ("mongodb.hosts", "rs0/h1:27017,h2"),
        ("mongodb.hosts", "[::1]:27017"),
        ("mongodb.connection.string", "mongodb://u:p@h1,h2:27018/db?replicaSet=rs0"),
        ("mongodb.connection.string", "mongodb+srv://cluster.example.com/"),
        ("mongodb.connection.string", "mongodb://u:p@%2Ftmp%2Fmongodb-27017.sock/"),
        ("mongodb.hosts", "rs0/bücher.example:27017,db_1.internal"),
    ]:
        assert problems(MONGODB_DEF, {"mongodb.name": "m", key: value}) == {}, value


def test_an_unknown_schema_history_is_a_problem_that_lists_the_known_ones() -> None:
    found = problems(MYSQL_DEF, {**MYSQL, "schema.history.internal": "Kafka"})
    assert "must be kafka, file or memory" in found["schema.history.internal"]
    assert (
        "io.debezium.storage.kafka.history.KafkaSchemaHistory" in found["schema.history.internal"]
    )
    old = "io.debezium.relational.history.FileDatabaseHistory"
    assert problems(MYSQL_DEF, {**MYSQL, "database.history": old}) == {}


def test_mysql_refuses_the_adaptive_time_precision_mode_as_debezium_does() -> None:
    found = problems(MYSQL_DEF, {**MYSQL, "time.precision.mode": "adaptive"})
    assert "adaptive_time_microseconds" in found["time.precision.mode"]
    assert problems(MYSQL_DEF, {**MYSQL, "time.precision.mode": "connect"}) == {}
