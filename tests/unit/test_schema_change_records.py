"""The schema change topic's record: Debezium's ``tableChanges`` array (AC-58's ``CREATE`` with
``ddl=null`` for SQL Server; MySQL's DDL text with the tables it touched), for both envelope
generations, and readable back through the JSON and Avro converters (the value matches the
declared Connect schema)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cdc.converters.avro import AvroConverter
from cdc.converters.json import JsonConverter
from cdc.converters.registry_server import RegistryServer
from cdc.converters.schema_registry import SchemaRegistryClient
from cdc.envelope import V3
from cdc.history.store import TableChange, TableChangeType
from cdc.pipeline.special_records import SpecialRecords
from cdc.record import SourceRecord
from cdc.spi import Column, SchemaChange, Table, TableId
from cdc.testing.memory import SOURCE_SCHEMA
from cdc.topics import TopicNamer

CUSTOMERS = Table(
    TableId("testDB", "dbo", "customers"),
    (
        Column("id", 0, "int", length=10, scale=0, optional=False),
        Column("email", 1, "varchar", length=255, optional=False),
        Column("notes", 2, "LONGTEXT", length=4294967295, charset="utf8mb4"),
    ),
    primary_key=("id",),
)
SOURCE = {"ts_ms": 1, "db": "testDB", "table": "customers", "pos": 7, "txId": None}


def records(version: str = "1.2") -> SpecialRecords:
    prefix = {"version": "test", "connector": "memory", "name": "server1"}
    return SpecialRecords(TopicNamer("server1"), SOURCE_SCHEMA, prefix, version=version)


def enabled_while_running(version: str = "1.2") -> SourceRecord:
    ev = SchemaChange(
        "testDB",
        "dbo",
        None,
        [CUSTOMERS.id],
        dict(SOURCE),
        {"pos": 7},
        changes=[TableChange(TableChangeType.CREATE, CUSTOMERS)],
    )
    return records(version).schema_change(ev, {"server": "server1"})


def test_create_without_ddl_has_debeziums_sql_server_shape() -> None:
    rec = enabled_while_running()
    assert rec.topic == "server1"
    assert rec.key == {"databaseName": "testDB"}
    value = rec.value
    assert value["databaseName"] == "testDB" and value["schemaName"] == "dbo"
    assert value["ddl"] is None
    [change] = value["tableChanges"]
    assert change["type"] == "CREATE"
    assert change["id"] == '"testDB"."dbo"."customers"'
    table = change["table"]
    assert table["primaryKeyColumnNames"] == ["id"]
    assert table["defaultCharsetName"] is None
    first = table["columns"][0]
    assert first == {
        "name": "id",
        "jdbcType": 4,
        "nativeType": None,
        "typeName": "int",
        "typeExpression": "int",
        "charsetName": None,
        "length": 10,
        "scale": 0,
        "position": 1,
        "optional": False,
        "autoIncremented": False,
        "generated": False,
    }
    # a LONGTEXT's 2^32-1 does not fit Debezium's int32 length: left unset
    assert table["columns"][2]["length"] is None
    assert table["columns"][2]["charsetName"] == "utf8mb4"


def test_debezium_3_adds_ts_ms_and_column_details() -> None:
    rec = enabled_while_running(V3)
    assert rec.value_schema is not None
    assert rec.value_schema.field_names() == [
        "source",
        "ts_ms",
        "databaseName",
        "schemaName",
        "ddl",
        "tableChanges",
    ]
    assert isinstance(rec.value["ts_ms"], int)
    [change] = rec.value["tableChanges"]
    assert change["table"]["comment"] is None
    column = change["table"]["columns"][0]
    assert {"comment", "defaultValueExpression", "enumValues"} <= column.keys()


def test_each_table_a_ddl_touched_is_listed_with_its_change_type() -> None:
    """A MySQL ``DROP TABLE a, b`` / ``RENAME``: one entry per table, DROP without columns."""
    gone = Table(TableId("inventory", None, "old"), ())
    renamed = Table(CUSTOMERS.id, CUSTOMERS.columns[:1], ("id",))
    ev = SchemaChange(
        "inventory",
        None,
        "RENAME TABLE old TO customers",
        [gone.id, renamed.id],
        dict(SOURCE),
        {"pos": 8},
        changes=[
            TableChange(TableChangeType.DROP, gone),
            TableChange(TableChangeType.CREATE, renamed),
        ],
    )
    value = records().schema_change(ev, {"server": "server1"}).value
    assert value["ddl"] == "RENAME TABLE old TO customers"
    assert [(c["type"], c["id"]) for c in value["tableChanges"]] == [
        ("DROP", '"inventory"."old"'),
        ("CREATE", '"testDB"."dbo"."customers"'),
    ]
    assert value["tableChanges"][0]["table"]["columns"] == []


def test_statement_without_tables_has_an_empty_array() -> None:
    ev = SchemaChange("inventory", None, "CREATE DATABASE inventory", [], dict(SOURCE), {})
    value = records().schema_change(ev, {"server": "server1"}).value
    assert value["tableChanges"] == []
    assert value["ddl"] == "CREATE DATABASE inventory"


def test_json_converter_round_trips_the_record() -> None:
    rec = enabled_while_running()
    conv = JsonConverter({"schemas.enable": True})
    data = conv.from_connect(rec.topic, rec.value_schema, rec.value)
    assert data is not None
    schema, value = conv.to_connect(rec.topic, data)
    assert schema is not None and schema.name == "io.tidemark.connector.memory.SchemaChangeValue"
    assert value["tableChanges"] == rec.value["tableChanges"]
    assert value["ddl"] is None


@pytest.fixture
def client() -> Iterator[SchemaRegistryClient]:
    with RegistryServer() as server, SchemaRegistryClient(server.url) as c:
        yield c


@pytest.mark.parametrize("version", ["1.2", V3])
def test_avro_converter_accepts_the_declared_schema(
    client: SchemaRegistryClient, version: str
) -> None:
    """Avro checks every value against its schema: the array's structs must match."""
    rec = enabled_while_running(version)
    conv = AvroConverter(client)
    data = conv.from_connect(rec.topic, rec.value_schema, rec.value, is_key=False)
    assert data is not None
    _, back = conv.to_connect(rec.topic, data, is_key=False)
    changes: Any = back["tableChanges"]
    assert changes[0]["type"] == "CREATE"
    assert [c["name"] for c in changes[0]["table"]["columns"]] == ["id", "email", "notes"]
