"""File schema history, Debezium's record and table-change JSON, and history_from_config."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdc.errors import ConfigError, SchemaError
from cdc.history import (
    FileSchemaHistory,
    HistoryRecord,
    MemorySchemaHistory,
    TableChange,
    TableChangeType,
    history_from_config,
    parse_table_id,
    table_from_dict,
    table_id_to_string,
    table_to_dict,
)
from cdc.spi import Column, Table, TableId

SOURCE = {"server": "dbserver1"}

CUSTOMERS = Table(
    id=TableId("inventory", None, "customers"),
    columns=(
        Column("id", 0, "INT", length=11, optional=False, auto_increment=True),
        Column(
            "name", 1, "VARCHAR", length=255, charset="utf8mb4", default="anon", has_default=True
        ),
        Column("balance", 2, "DECIMAL", length=10, scale=2),
        Column("kind", 3, "ENUM", enum_values=("a", "b'c")),
        Column("tags", 4, "_text", native_type=1009, dimensions=1),
    ),
    primary_key=("id",),
    comment="people",
    extra={"default_charset": "utf8mb4"},
)

# A record as Debezium's MySQL connector writes it (fields it has and we do not, like
# `generated` and `typeExpression`, must be accepted).
DEBEZIUM_LINE = (
    b'{"source":{"server":"dbserver1"},"position":{"ts_sec":1633072800,"file":"mysql-bin.000003",'
    b'"pos":154,"snapshot":true},"databaseName":"inventory","ddl":"CREATE TABLE `customers` '
    b"(`id` int(11) NOT NULL AUTO_INCREMENT, `first_name` varchar(255) NOT NULL, PRIMARY KEY "
    b'(`id`))","tableChanges":[{"type":"CREATE","id":"\\"inventory\\".\\"customers\\"","table":'
    b'{"defaultCharsetName":"latin1","primaryKeyColumnNames":["id"],"columns":[{"name":"id",'
    b'"jdbcType":4,"typeName":"INT","typeExpression":"INT","charsetName":null,"length":11,'
    b'"position":1,"optional":false,"autoIncremented":true,"generated":true},{"name":"first_name",'
    b'"jdbcType":12,"typeName":"VARCHAR","typeExpression":"VARCHAR","charsetName":"latin1",'
    b'"length":255,"position":2,"optional":false,"autoIncremented":false,"generated":false}]},'
    b'"comment":null}]}\n'
)


_OPEN: list[FileSchemaHistory] = []


@pytest.fixture(autouse=True)
def _stop_histories() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().stop()


def _history(path: Path) -> FileSchemaHistory:
    h = FileSchemaHistory(path)
    h.start()
    _OPEN.append(h)
    return h


def _pos(n: int) -> dict[str, Any]:
    return {"file": "bin.000001", "pos": n}


def _after(limit: int) -> Any:
    return lambda position: position["pos"] > limit


# -- records and recovery --------------------------------------------------------------------


def test_record_and_recover_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    h = _history(path)
    assert not h.exists()
    h.record(SOURCE, _pos(10), "inventory", None, "CREATE DATABASE inventory")
    h.record(
        SOURCE,
        _pos(20),
        "inventory",
        None,
        "CREATE TABLE customers (...)",
        [TableChange(TableChangeType.CREATE, CUSTOMERS)],
    )
    h.record(SOURCE, _pos(30), "inventory", None, "DROP TABLE customers")
    h.stop()

    h = _history(path)
    assert h.exists()
    replayed = list(h.recover(SOURCE, _after(25)))
    assert [r.ddl for r in replayed] == [
        "CREATE DATABASE inventory",
        "CREATE TABLE customers (...)",
    ]
    (change,) = replayed[1].changes()
    assert change.type is TableChangeType.CREATE
    assert change.table == CUSTOMERS
    assert list(h.recover(SOURCE, _after(5))) == []
    assert len(list(h.recover(SOURCE, _after(10**9)))) == 3


def test_record_layout_is_debeziums(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    h = _history(path)
    h.record(
        SOURCE, _pos(1), "db", "sch", "ALTER ...", [TableChange(TableChangeType.ALTER, CUSTOMERS)]
    )
    doc = orjson.loads(path.read_bytes().splitlines()[0])
    assert list(doc) == [
        "source",
        "position",
        "ts_ms",
        "databaseName",
        "schemaName",
        "ddl",
        "tableChanges",
    ]
    assert doc["source"] == SOURCE and doc["position"] == _pos(1)
    change = doc["tableChanges"][0]
    assert change["type"] == "ALTER"
    assert change["id"] == '"inventory"."customers"'
    table = change["table"]
    assert table["defaultCharsetName"] == "utf8mb4"
    assert table["primaryKeyColumnNames"] == ["id"]
    first = table["columns"][0]
    assert first == {
        "name": "id",
        "jdbcType": 4,
        "typeName": "INT",
        "typeExpression": "INT",
        "charsetName": None,
        "length": 11,
        "position": 1,
        "optional": False,
        "autoIncremented": True,
        "generated": False,
        "comment": None,
        "hasDefaultValue": False,
    }
    assert table["columns"][1]["defaultValueExpression"] == "anon"
    assert table["columns"][2]["scale"] == 2
    # the DDL's literals, quotes included, as Debezium 3.6's MariaDB connector writes them
    # (seen in tests/integration/test_mariadb_schema_change_parity.py)
    assert table["columns"][3]["enumValues"] == ["'a'", "'b''c'"]
    assert table["columns"][4]["jdbcType"] == 2003 and table["columns"][4]["nativeType"] == 1009
    # and read back as the values themselves
    (back,) = HistoryRecord.from_dict(doc).changes()
    assert back.table.columns[3].enum_values == ("a", "b'c")


def test_reads_a_debezium_written_history(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(DEBEZIUM_LINE)
    (record,) = list(_history(path).recover(SOURCE, lambda p: False))
    assert record.database_name == "inventory" and record.schema_name is None
    (change,) = record.changes()
    assert change.table.id == TableId("inventory", None, "customers")
    assert change.table.primary_key == ("id",)
    assert change.table.extra == {"default_charset": "latin1"}
    assert [c.name for c in change.table.columns] == ["id", "first_name"]
    assert change.table.columns[0].auto_increment and not change.table.columns[0].optional
    assert change.table.columns[1].charset == "latin1"
    # Debezium numbers columns from 1, the connectors index rows from 0
    assert [c.position for c in change.table.columns] == [0, 1]


def test_positions_written_by_earlier_tidemark_versions_read_as_they_were(tmp_path: Path) -> None:
    """Earlier versions wrote 0-based positions: a table whose first column is at 0 is read
    as is, so a history they wrote still decodes rows into the right columns."""
    path = tmp_path / "h.jsonl"
    legacy = DEBEZIUM_LINE.replace(b'"position":1,', b'"position":0,').replace(
        b'"position":2,', b'"position":1,'
    )
    path.write_bytes(legacy)
    (record,) = list(_history(path).recover(SOURCE, lambda p: False))
    (change,) = record.changes()
    assert [c.position for c in change.table.columns] == [0, 1]
    assert change.to_dict()["table"]["columns"][0]["position"] == 1


def test_recover_ignores_other_sources_and_skips_later_positions(tmp_path: Path) -> None:
    h = _history(tmp_path / "h.jsonl")
    h.record({"server": "other"}, _pos(1), None, None, "other 1")
    h.record({"server": "dbserver1"}, _pos(5), None, None, "mine 5")
    h.record({"server": "dbserver1"}, _pos(50), None, None, "mine 50")
    # Offsets were reset and the connector recorded an earlier position after a later one.
    h.record({"server": "dbserver1"}, _pos(6), None, None, "mine 6 again")
    assert [r.ddl for r in h.recover(SOURCE, _after(10))] == ["mine 5", "mine 6 again"]


def test_torn_last_line_is_cut_on_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "h.jsonl"
    h = _history(path)
    h.record(SOURCE, _pos(1), None, None, "one")
    h.stop()
    with path.open("ab") as fh:
        fh.write(b'{"source":{"server":"dbserver1"},"position":{"fi')
    h = FileSchemaHistory(path)
    assert [r.ddl for r in h.all_records()] == ["one"]  # readable even before repair
    with caplog.at_level(logging.WARNING, logger="cdc.history.file"):
        h.start()
    _OPEN.append(h)
    assert "partial record" in caplog.text
    h.record(SOURCE, _pos(2), None, None, "two")
    assert [r.ddl for r in h.all_records()] == ["one", "two"]


def test_complete_last_record_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(DEBEZIUM_LINE.rstrip(b"\n"))
    h = _history(path)
    h.record(SOURCE, _pos(2), None, None, "two")
    assert [r.ddl.split(" ")[0] for r in h.all_records()] == ["CREATE", "two"]


def test_damage_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(DEBEZIUM_LINE + b"{garbage\n" + DEBEZIUM_LINE)
    with pytest.raises(SchemaError, match="line 2"):
        list(_history(path).recover(SOURCE, lambda p: False))
    path.write_bytes(b'{"ddl": "x"}\n')
    with pytest.raises(SchemaError, match="source and position"):
        list(FileSchemaHistory(path).all_records())


def test_record_before_start_and_bad_values(tmp_path: Path) -> None:
    h = FileSchemaHistory(tmp_path / "h.jsonl")
    with pytest.raises(SchemaError, match="not started"):
        h.record(SOURCE, _pos(1), None, None, "x")
    with pytest.raises(SchemaError, match="JSON"):
        MemorySchemaHistory().record(SOURCE, {"pos": object()}, None, None, "x")


def test_caller_mutation_does_not_change_recorded_history() -> None:
    h = MemorySchemaHistory()
    position = _pos(1)
    h.record(SOURCE, position, None, None, "x")
    position["pos"] = 99
    (record,) = h.recover(SOURCE, _after(10))
    assert record.position == _pos(1)


# -- tables and ids --------------------------------------------------------------------------


def test_table_round_trip_both_call_forms() -> None:
    doc = table_to_dict(CUSTOMERS)
    assert table_from_dict(doc, CUSTOMERS.id) == CUSTOMERS
    entry = TableChange(TableChangeType.CREATE, CUSTOMERS).to_dict()
    assert table_from_dict(entry) == CUSTOMERS
    with pytest.raises(SchemaError, match="needs a table id"):
        table_from_dict(doc)


def test_drop_change_keeps_only_the_id() -> None:
    entry = TableChange(TableChangeType.DROP, CUSTOMERS).to_dict()
    dropped = TableChange.from_dict(entry)
    assert dropped.type is TableChangeType.DROP and dropped.table.id == CUSTOMERS.id
    with pytest.raises(SchemaError, match="type"):
        TableChange.from_dict({**entry, "type": "RENAME"})


@pytest.mark.parametrize(
    ("table_id", "text"),
    [
        (TableId("db", None, "t"), '"db"."t"'),
        (TableId("postgres", "public", "t"), '"postgres"."public"."t"'),
        (TableId(None, None, "t"), '"t"'),
        (TableId("d.b", None, 'we"ird'), '"d.b"."we""ird"'),
    ],
)
def test_table_id_quoting_round_trips(table_id: TableId, text: str) -> None:
    assert table_id_to_string(table_id) == text
    assert parse_table_id(text) == table_id


def test_two_part_ids_follow_the_catalog_convention() -> None:
    assert parse_table_id("public.t", use_catalog_before_schema=False) == TableId(
        None, "public", "t"
    )
    assert parse_table_id("db.t") == TableId("db", None, "t")
    with pytest.raises(SchemaError):
        parse_table_id("a.b.c.d")
    with pytest.raises(SchemaError):
        parse_table_id('"open')


def test_history_record_from_dict_validates() -> None:
    with pytest.raises(SchemaError):
        HistoryRecord.from_json(b"[]")
    with pytest.raises(SchemaError, match="not JSON"):
        HistoryRecord.from_json(b"{")


# -- configuration ---------------------------------------------------------------------------


def test_config_file_with_old_and_new_names(tmp_path: Path) -> None:
    old = history_from_config(
        {
            "database.history": "io.debezium.relational.history.FileDatabaseHistory",
            "database.history.file.filename": str(tmp_path / "a.jsonl"),
            "database.history.store.only.monitored.tables.ddl": "true",
        }
    )
    assert isinstance(old, FileSchemaHistory) and old.path == tmp_path / "a.jsonl"
    assert old.store_only_captured_tables_ddl and not old.skip_unparseable_ddl
    new = history_from_config(
        {
            "schema.history.internal.file.filename": str(tmp_path / "b.jsonl"),
            "schema.history.internal.store.only.captured.tables.ddl": "false",
            "schema.history.internal.skip.unparseable.ddl": True,
        }
    )
    assert isinstance(new, FileSchemaHistory) and new.path == tmp_path / "b.jsonl"
    assert not new.store_only_captured_tables_ddl and new.skip_unparseable_ddl


def test_config_kafka() -> None:
    from cdc.history.kafka import KafkaSchemaHistory

    h = history_from_config(
        {
            "database.history.kafka.topic": "dbhistory.inventory",
            "database.history.kafka.bootstrap.servers": "127.0.0.1:9092",
            "database.history.kafka.recovery.attempts": "7",
            "schema.history.internal.kafka.recovery.poll.interval.ms": 250,
            "database.history.producer.security.protocol": "PLAINTEXT",
            "schema.history.internal.consumer.fetch.min.bytes": "1",
        }
    )
    assert isinstance(h, KafkaSchemaHistory)
    assert h.topic == "dbhistory.inventory"
    assert (h.recovery_attempts, h.recovery_poll_interval_ms) == (7, 250)
    assert h._producer_config == {"security.protocol": "PLAINTEXT"}
    assert h._consumer_config == {"fetch.min.bytes": "1"}


def test_config_problems_are_reported_together() -> None:
    with pytest.raises(ConfigError) as info:
        history_from_config({"database.history.kafka.recovery.attempts": "0"})
    keys = {key for key, _ in info.value.problems}
    assert keys == {
        "database.history.kafka.recovery.attempts",
        "schema.history.internal.kafka.topic",
        "schema.history.internal.kafka.bootstrap.servers",
    }
    with pytest.raises(ConfigError, match="different values"):
        history_from_config(
            {
                "database.history.file.filename": "a",
                "schema.history.internal.file.filename": "b",
            }
        )
    with pytest.raises(ConfigError, match="unknown schema history class"):
        history_from_config({"schema.history.internal": "com.example.Nope"})
    with pytest.raises(ConfigError, match=r"file\.filename"):
        history_from_config({"schema.history.internal": "file"})
    assert isinstance(history_from_config({"database.history": "memory"}), MemorySchemaHistory)
