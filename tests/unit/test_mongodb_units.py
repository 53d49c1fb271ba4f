"""MongoDB connector pieces without a server: keys per the seed's Table 4.3, extended JSON,
field exclusion/renames, configuration names and the connector's registration."""

from __future__ import annotations

import uuid
from importlib.metadata import entry_points

import pytest
from bson import Binary, Decimal128, Int64, ObjectId, Timestamp

from cdc.config import ConfigError
from cdc.filters import TableFilter
from cdc.spi import TableId
from connectors.mongodb import MongoDbConnector
from connectors.mongodb.connector import watch_namespace
from connectors.mongodb.extjson import dumps, key_id
from connectors.mongodb.fields import FieldSelector

BASE = {"name": "m", "mongodb.name": "fulfillment", "mongodb.hosts": "rs0/localhost:27017"}


@pytest.mark.parametrize(
    ("value", "key"),
    [
        (1234, "1234"),
        (12.34, "12.34"),
        ("1234", '"1234"'),
        (
            {"hi": "kafka", "nums": [10.0, 100.0, 1000.0]},
            '{"hi" : "kafka", "nums" : [10.0, 100.0, 1000.0]}',
        ),
        (ObjectId("596e275826f08b2730779e1f"), '{"$oid" : "596e275826f08b2730779e1f"}'),
        (Binary(b"kafka", 0), '{"$binary" : "a2Fma2E=", "$type" : "00"}'),
        (b"kafka", '{"$binary" : "a2Fma2E=", "$type" : "00"}'),
        (Int64(1004), '{"$numberLong" : "1004"}'),
        (2**40, '{"$numberLong" : "1099511627776"}'),
        (
            uuid.UUID("00112233-4455-6677-8899-aabbccddeeff"),
            '{"$binary" : "ABEiM0RVZneImaq7zN3u/w==", "$type" : "04"}',
        ),
    ],
)
def test_key_per_seed_table_4_3(value: object, key: str) -> None:
    """AC-11."""
    assert key_id(value) == key


def test_extended_json_of_other_bson_types() -> None:
    assert (
        dumps(1e20) == "1.0E20" and dumps(-1.5e-5) == "-1.5E-5" and dumps(1234567.0) == "1234567.0"
    )
    assert dumps(Timestamp(5, 2)) == '{"$timestamp" : {"t" : 5, "i" : 2}}'
    assert dumps(Decimal128("1.10")) == '{"$numberDecimal" : "1.10"}'
    assert dumps({"a": None, "b": True, "c": []}) == '{"a" : null, "b" : true, "c" : []}'


def test_field_exclusion_and_renames_reach_nested_documents_and_patches() -> None:
    """AC-68."""
    rules = FieldSelector(["db.c.a.secret", "*.*.pw"], ["db.c.a.old:new", "db.c.top:renamed"])
    coll = rules.for_collection("db", "c")
    assert coll is not None
    assert coll.document({"_id": 1, "pw": 1, "top": 2, "a": {"secret": 3, "old": 4, "k": 5}}) == {
        "_id": 1,
        "renamed": 2,
        "a": {"new": 4, "k": 5},
    }
    assert coll.patch({"$set": {"a.secret": 1, "a.old.x": 2, "a": {"old": 3}}}) == {
        "$set": {"a.new.x": 2, "a": {"new": 3}}
    }
    other = rules.for_collection("db", "other")
    assert other is not None and other.document({"pw": 1, "top": 2}) == {"top": 2}
    assert FieldSelector([], []).for_collection("db", "c") is None


def test_debezium_names_and_1_2_aliases() -> None:
    conn = MongoDbConnector(
        {
            "name": "m",
            "mongodb.name": "fulfillment",
            "mongodb.hosts": "rs0/localhost:27017",
            "collection.whitelist": "inventory.customers",
            "field.blacklist": "inventory.customers.email",
            "initial.sync.max.threads": "4",
        }
    )
    c = conn.config
    assert c["table.include.list"] == ["inventory.customers"]
    assert c["field.exclude.list"] == ["inventory.customers.email"]
    assert c["snapshot.max.threads"] == 4
    assert conn.source_partition() == {"server_id": "fulfillment", "rs": "rs0"}
    assert watch_namespace(c) == ("inventory", "customers")
    conn.close()


def test_bad_configuration_names_the_key() -> None:
    with pytest.raises(ConfigError) as err:
        MongoDbConnector({"name": "m", "mongodb.name": "x", "field.renames": "a.b:c"})
    text = str(err.value)
    assert "mongodb.hosts: is required" in text and "field.renames" in text
    with pytest.raises(ConfigError, match=r"capture\.mode"):
        MongoDbConnector({**BASE, "capture.mode": "tail"})


def test_system_databases_are_never_captured() -> None:
    """AC-66."""
    conn = MongoDbConnector({**BASE, "database.include.list": "admin,local,config,shop"})
    flt = TableFilter(
        database_include=["admin", "local", "config", "shop"], system=conn.system_schemas
    )
    assert [
        flt.is_included(TableId(db, None, "c")) for db in ("admin", "local", "config", "shop")
    ] == [
        False,
        False,
        False,
        True,
    ]
    conn.close()


def test_registered_under_its_name_and_debeziums_class() -> None:
    names = {ep.name: ep.value for ep in entry_points(group="tidemark.connectors")}
    assert names["mongodb"] == "connectors.mongodb:MongoDbConnector"
    assert MongoDbConnector.class_names == ("io.debezium.connector.mongodb.MongoDbConnector",)


def test_offsets_are_checked_before_they_are_stored() -> None:
    part = {"server_id": "fulfillment", "rs": "rs0"}
    _, ok = MongoDbConnector.validate_offset(part, {"sec": 1, "ord": 2, "resume_token": "82"})
    assert ok == []
    _, bad = MongoDbConnector.validate_offset({"server": "x"}, {"sec": -1, "ord": 2})
    assert len(bad) == 2 and "offset.sec" in bad[1]
    # a cluster read shard by shard: each shard's position is checked by its name
    shards = {"positions": {"shA": {"sec": 1, "ord": 0}, "shB": {"sec": 2, "ord": "x"}}}
    _, bad = MongoDbConnector.validate_offset(part, shards)
    assert bad == ["offset.positions.shB.ord must be a non-negative integer, got 'x'"]
    _, bad = MongoDbConnector.validate_offset(part, {"positions": {"shA": 3}})
    assert bad == ["offset position of 'shA' is not an object: 3"]


def test_driver_errors_are_classified_and_name_the_user() -> None:
    from pymongo.errors import AutoReconnect, OperationFailure

    from cdc.errors import ErrorKind
    from connectors.mongodb.errors import ERRORS, with_user

    assert ERRORS.classify(AutoReconnect("primary stepped down")) == ErrorKind.RETRIABLE
    assert ERRORS.classify(OperationFailure("not primary", 10107)) == ErrorKind.RETRIABLE
    assert ERRORS.classify(OperationFailure("history lost", 286)) == ErrorKind.FATAL
    denied = with_user(OperationFailure("not authorized on local", 13), "cdc")
    assert isinstance(denied, ConfigError)
    assert "mongodb.user ('cdc')" in str(denied) and "'read' role" in str(denied)
    auth = with_user(OperationFailure("Authentication failed.", 18), "cdc")
    assert "authentication failed" in str(auth) and "mongodb.password" in str(auth)


def test_default_reconnect_schedule_is_the_seeds() -> None:
    """1, 2, 4, ... 64 s, then 120 s for attempts 8-16; after the 16th failed reconnection
    attempt the task fails, 20:07 after the loss (seed §4.6.2; AC-55)."""
    conn = MongoDbConnector(BASE)
    backoff = conn.backoff()
    delays = [backoff.delay(n) for n in range(1, 17)]
    assert delays == [1, 2, 4, 8, 16, 32, 64, *([120] * 9)]
    assert backoff.allows(16) and not backoff.allows(17)
    assert sum(delays) == 20 * 60 + 7
    conn.close()


class _Admin:
    def __init__(self, hello: dict[str, object]) -> None:
        self.hello = hello

    def command(self, name: str) -> dict[str, object]:
        if name == "hello":  # as the stand-in answers it
            from pymongo.errors import OperationFailure

            raise OperationFailure("no such command: 'hello'", 59)
        return self.hello


class _Client:
    def __init__(self, hello: dict[str, object]) -> None:
        self.admin = _Admin(hello)


def test_replica_set_name_from_the_server_the_hosts_or_a_mongos() -> None:
    from cdc.config import Config
    from connectors.mongodb.config import CONFIG_DEF
    from connectors.mongodb.connection import replica_set_name

    def cfg(**raw: str) -> Config:
        return CONFIG_DEF.parse({"name": "m", "mongodb.name": "x", **raw})

    plain = cfg(**{"mongodb.hosts": "db1:27017"})
    assert replica_set_name(_Client({"setName": "rs7"}), plain) == "rs7"  # type: ignore[arg-type]
    named = cfg(**{"mongodb.hosts": "rs0/db1:27017"})
    assert replica_set_name(_Client({}), named) == "rs0"  # type: ignore[arg-type]
    assert replica_set_name(_Client({"msg": "isdbgrid"}), plain) == "mongos"  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="no replica set name"):
        replica_set_name(_Client({}), plain)  # type: ignore[arg-type]
    # oplog mode through a mongos reads the shards one by one (connectors.mongodb.shards)
    oplog = cfg(**{"mongodb.hosts": "db1:27017", "capture.mode": "oplog"})
    assert replica_set_name(_Client({"msg": "isdbgrid"}), oplog) == "mongos"  # type: ignore[arg-type]


def test_snapshot_filter_overrides_need_a_query_per_collection() -> None:
    with pytest.raises(ConfigError) as err:
        MongoDbConnector({**BASE, "snapshot.collection.filter.overrides": "shop.orders"})
    assert "snapshot.collection.filter.overrides.shop.orders: is required" in str(err.value)
    with pytest.raises(ConfigError, match="not a JSON document"):
        MongoDbConnector(
            {
                **BASE,
                "snapshot.collection.filter.overrides": "shop.orders",
                "snapshot.collection.filter.overrides.shop.orders": "{open",
            }
        )


def test_skipped_operations_accepts_the_seeds_i_for_inserts() -> None:
    from connectors.mongodb.config import CONFIG_DEF

    base = {"name": "m", "mongodb.name": "x", "mongodb.hosts": "rs0/h:1"}
    cfg = CONFIG_DEF.parse({**base, "skipped.operations": "i,d"})
    assert cfg["skipped.operations"] == ["i", "d"]
    with pytest.raises(ConfigError, match=r"skipped\.operations.*c \(or i"):
        CONFIG_DEF.parse({**base, "skipped.operations": "x"})
