"""Debezium's SchemaChangeEventFilter on the schema change records tidemark's connectors write.

The records come from the real builder (``cdc.pipeline.special_records.SpecialRecords``) with
the MySQL, MariaDB and SQL Server source schemas, for both envelope generations, so the value
schema names are the ones the connectors produce (``io.debezium.connector.mysql.
SchemaChangeValue``, ...). The cases follow Debezium's ``SchemaChangeEventFilterTest`` plus
each event type, a null ``tableChanges`` and the config errors.
"""

from __future__ import annotations

from typing import Any

import pytest

from cdc.envelope import V1_2, V3, source_shaper
from cdc.history.store import TableChange, TableChangeType
from cdc.pipeline.special_records import HEARTBEAT_VALUE, SpecialRecords
from cdc.record import SourceRecord
from cdc.schema.model import INT32, STRING, Schema, array, struct
from cdc.spi import Column, SchemaChange, Table, TableId
from cdc.topics import TopicNamer
from cdc.transforms import TransformConfigError, TransformError, build_chain
from cdc.transforms.schema_change_filter import (
    SchemaChangeEventFilter,
    SchemaChangeEventType,
    is_schema_change,
)
from connectors.mysql.connector import MARIADB_SOURCE_SCHEMA_V3
from connectors.mysql.connector import SOURCE_SCHEMA as MYSQL_SOURCE
from connectors.mysql.connector import SOURCE_SCHEMA_V3 as MYSQL_SOURCE_V3
from connectors.sqlserver.connector import SOURCE_SCHEMA as SQLSERVER_SOURCE
from connectors.sqlserver.connector import SOURCE_SCHEMA_V3 as SQLSERVER_SOURCE_V3

KEY = "schema.change.event.exclude.list"
CUSTOMERS = Table(
    TableId("inventory", None, "customers"),
    (
        Column("id", 0, "INT", optional=False),
        Column("email", 1, "VARCHAR", length=255),
    ),
    primary_key=("id",),
)
SOURCE = {"ts_ms": 1, "db": "inventory", "table": "customers", "file": "bin.1", "pos": 7}

#: (source schema, envelope version): what each connector's dispatcher builds with
BUILDERS = {
    "mysql-1.2": (MYSQL_SOURCE, V1_2),
    "mysql-3": (MYSQL_SOURCE_V3, V3),
    "mariadb-3": (MARIADB_SOURCE_SCHEMA_V3, V3),
    "sqlserver-1.2": (SQLSERVER_SOURCE, V1_2),
    "sqlserver-3": (SQLSERVER_SOURCE_V3, V3),
}


def builder(kind: str = "mysql-1.2") -> SpecialRecords:
    source_schema, version = BUILDERS[kind]
    prefix = {"version": "test", "connector": "mysql", "name": "server1"}
    shape = source_shaper(source_schema, prefix) if version == V3 else None
    return SpecialRecords(TopicNamer("server1"), source_schema, prefix, shape, version)


def schema_change(
    changes: list[TableChange], ddl: str = "DDL", kind: str = "mysql-1.2"
) -> SourceRecord:
    ev = SchemaChange(
        "inventory",
        None,
        ddl,
        [c.table.id for c in changes],
        dict(SOURCE),
        {"file": "bin.1", "pos": 7},
        changes=changes,
    )
    return builder(kind).schema_change(ev, {"server": "server1"})


def create() -> SourceRecord:
    return schema_change([TableChange(TableChangeType.CREATE, CUSTOMERS)], "CREATE TABLE c")


def alter() -> SourceRecord:
    return schema_change([TableChange(TableChangeType.ALTER, CUSTOMERS)], "ALTER TABLE c")


def drop() -> SourceRecord:
    return schema_change([TableChange(TableChangeType.DROP, Table(CUSTOMERS.id, ()))], "DROP")


def database() -> SourceRecord:
    return schema_change([], "CREATE DATABASE inventory")


def with_first_type(record: SourceRecord, type_name: Any) -> SourceRecord:
    """``record`` with its first table change's ``type`` replaced: tidemark's connectors never
    write TRUNCATE (or anything else) there, Debezium's Oracle connector does."""
    first, *rest = record.value["tableChanges"]
    changes = [{**first, "type": type_name}, *rest]
    return record.with_(value={**record.value, "tableChanges": changes})


def transform(excluded: str) -> SchemaChangeEventFilter:
    smt = SchemaChangeEventFilter()
    smt.configure({KEY: excluded})
    return smt


# -- which records are schema changes ----------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_the_connectors_schema_change_records_are_recognised(kind: str) -> None:
    record = schema_change([TableChange(TableChangeType.DROP, CUSTOMERS)], kind=kind)
    assert record.value_schema is not None
    assert record.value_schema.name is not None
    assert record.value_schema.name.endswith(".SchemaChangeValue")
    assert is_schema_change(record.value_schema)
    assert transform("DROP").apply(record) is None
    assert transform("CREATE").apply(record) is record


def test_the_schema_change_key_schema_name_counts_too() -> None:
    """SmtManager.isValidSchemaChange also accepts a value schema named ``*.SchemaChangeKey``
    (it checks the name only)."""
    named = struct(
        [("tableChanges", array(struct([("type", STRING), ("id", STRING)])))],
        name="io.debezium.connector.mysql.SchemaChangeKey",
    )
    record = SourceRecord("server1", None, None, named, {"tableChanges": []}, {}, {})
    assert is_schema_change(named)
    assert transform("DATABASE").apply(record) is None


# -- each type ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (create, SchemaChangeEventType.CREATE),
        (alter, SchemaChangeEventType.ALTER),
        (drop, SchemaChangeEventType.DROP),
        (database, SchemaChangeEventType.DATABASE),
        (lambda: with_first_type(drop(), "TRUNCATE"), SchemaChangeEventType.TRUNCATE),
    ],
    ids=["CREATE", "ALTER", "DROP", "DATABASE", "TRUNCATE"],
)
def test_each_type_is_dropped_only_when_excluded(make: Any, kind: SchemaChangeEventType) -> None:
    record = make()
    assert transform(kind.value).apply(record) is None
    others = ",".join(t.value for t in SchemaChangeEventType if t is not kind)
    assert transform(others).apply(record) is record


def test_debeziums_cases() -> None:
    """Debezium's SchemaChangeEventFilterTest: ALTER excluded by "ALTER, CREATE" (a space
    after the comma), empty table changes (DATABASE) and DROP kept by "ALTER,CREATE"."""
    assert transform("ALTER, CREATE").apply(alter()) is None
    kept = database()
    assert transform("ALTER,CREATE").apply(kept) is kept
    dropped = drop()
    assert transform("ALTER,CREATE").apply(dropped) is dropped


def test_the_first_table_change_decides() -> None:
    """MySQL's ``DROP TABLE a, b`` carries two DROPs; a mixed list goes by its first entry,
    as in Debezium."""
    other = Table(TableId("inventory", None, "orders"), (Column("id", 0, "INT"),))
    mixed = schema_change(
        [
            TableChange(TableChangeType.CREATE, other),
            TableChange(TableChangeType.DROP, Table(CUSTOMERS.id, ())),
        ]
    )
    assert transform("DROP").apply(mixed) is mixed
    assert transform("CREATE").apply(mixed) is None


def test_null_table_changes_is_always_dropped() -> None:
    record = create()
    nulled = record.with_(value={**record.value, "tableChanges": None})
    assert transform("TRUNCATE").apply(nulled) is None


def test_the_record_is_not_modified() -> None:
    record = create()
    before = {**record.value}
    smt = transform("DROP")
    assert smt.apply(record) is record
    assert record.value == before


# -- everything else passes unchanged ----------------------------------------------------------


ROW_SCHEMA = struct([("id", INT32)], name="server1.inventory.customers.Value", optional=True)
ENVELOPE = struct(
    [("before", ROW_SCHEMA), ("after", ROW_SCHEMA), ("op", STRING)],
    name="server1.inventory.customers.Envelope",
)


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        (ENVELOPE, {"before": None, "after": {"id": 1}, "op": "c"}),
        (HEARTBEAT_VALUE, {"ts_ms": 1}),
        # schemaless: no schema name to test (Debezium: valueSchema() == null)
        (None, {"tableChanges": [{"type": "DROP"}]}),
        # a tombstone on the schema change topic
        (None, None),
    ],
    ids=["row", "heartbeat", "schemaless", "tombstone"],
)
def test_other_records_pass_unchanged(schema: Schema | None, value: Any) -> None:
    record = SourceRecord("server1.inventory.customers", None, None, schema, value, {}, {})
    smt = transform("CREATE,ALTER,DROP,TRUNCATE,DATABASE")
    assert smt.apply(record) is record


def test_a_schema_change_with_a_null_value_passes() -> None:
    record = create().with_(value=None)
    assert transform("CREATE").apply(record) is record


# -- records it cannot read fail the task, as Debezium's DataException does ---------------------


def test_an_unknown_table_change_type_fails_the_task() -> None:
    with pytest.raises(TransformError, match=r"'RENAME' is not one of CREATE, ALTER"):
        transform("DROP").apply(with_first_type(create(), "RENAME"))


def test_a_schema_change_schema_without_table_changes_fails_the_task() -> None:
    named = struct([("databaseName", STRING)], name="io.debezium.connector.mysql.SchemaChangeKey")
    record = SourceRecord("server1", None, None, named, {"databaseName": "db"}, {}, {})
    with pytest.raises(TransformError, match="tableChanges is not a valid field name"):
        transform("DROP").apply(record)


def test_a_schema_change_value_that_is_not_a_struct_fails_the_task() -> None:
    record = create().with_(value="DROP TABLE x")
    with pytest.raises(TransformError, match=r"Only Struct objects supported"):
        transform("DROP").apply(record)


# -- configuration -----------------------------------------------------------------------------


def test_configure_parses_the_list() -> None:
    assert transform(" DROP , TRUNCATE ").excluded == {
        SchemaChangeEventType.DROP,
        SchemaChangeEventType.TRUNCATE,
    }
    assert transform("DROP,,ALTER,").excluded == {
        SchemaChangeEventType.DROP,
        SchemaChangeEventType.ALTER,
    }


@pytest.mark.parametrize("config", [{}, {KEY: ""}, {KEY: "  "}])
def test_the_list_is_required(config: dict[str, str]) -> None:
    with pytest.raises(TransformConfigError) as info:
        SchemaChangeEventFilter().configure(config)
    assert info.value.errors == ((KEY, "missing required configuration"),)


def test_a_list_naming_no_type_is_an_error() -> None:
    with pytest.raises(TransformConfigError, match=f"{KEY}: must name at least one of CREATE"):
        SchemaChangeEventFilter().configure({KEY: " , "})


def test_unknown_names_are_one_error_listing_the_valid_ones() -> None:
    with pytest.raises(TransformConfigError) as info:
        SchemaChangeEventFilter().configure({KEY: "DROP,RENAME,drop"})
    [(key, problem)] = info.value.errors
    assert key == KEY
    assert "'RENAME', 'drop'" in problem
    assert "CREATE, ALTER, DROP, TRUNCATE, DATABASE" in problem


def test_built_by_its_debezium_class_name_with_errors_under_the_full_key() -> None:
    base = {"transforms": "dropDdl"}
    chain = build_chain(
        {
            **base,
            "transforms.dropDdl.type": "io.debezium.transforms.SchemaChangeEventFilter",
            f"transforms.dropDdl.{KEY}": "DROP,TRUNCATE",
        }
    )
    out = chain.apply_all([create(), drop(), database(), alter()])
    assert [r.value["ddl"] for r in out] == [
        "CREATE TABLE c",
        "CREATE DATABASE inventory",
        "ALTER TABLE c",
    ]
    with pytest.raises(TransformConfigError) as info:
        build_chain({**base, "transforms.dropDdl.type": "schema_change_event_filter"})
    assert info.value.errors == ((f"transforms.dropDdl.{KEY}", "missing required configuration"),)
