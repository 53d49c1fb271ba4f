"""The MySQL connector against the real local MariaDB and Kafka: events, types, DDL, filters."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition

from cdc.errors import ConfigError
from cdc.history import FileSchemaHistory
from cdc.offsets.memory import MemoryOffsetStore
from connectors.mysql.errors import InconsistentSchema
from connectors.mysql.offsets import is_at_or_before
from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import MySqlHarness, read_topic

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    harness = MySqlHarness(
        mariadb, kafka, f"tm_{uuid.uuid4().hex[:8]}", tmp_path_factory.mktemp("mysql")
    )
    yield harness
    harness.drop()


def customers(h: MySqlHarness, name: str, rows: int = 2) -> None:
    h.sql(
        f"CREATE TABLE {name} (id int PRIMARY KEY, first_name varchar(255) NOT NULL, "
        "email varchar(255))"
    )
    if rows:
        values = ", ".join(f"({i}, 'name{i}', 'e{i}@x.org')" for i in range(1, rows + 1))
        h.sql(f"INSERT INTO {name} VALUES {values}")


def test_snapshot_then_stream_create_update_delete(h: MySqlHarness) -> None:
    """AC-01, AC-02, AC-04, AC-27 (snapshot rows, then the stream from the snapshot point)."""
    customers(h, "c1")
    cfg = h.config(table_include_list=f"{h.dbname}.c1")
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO c1 VALUES (3, 'Anne', 'annek@noanswer.org')")
        h.sql("UPDATE c1 SET email = 'new@x.org' WHERE id = 3")
        h.sql("DELETE FROM c1 WHERE id = 3")
        events = h.read(cfg, "c1", min_count=6)
    assert [e.op for e in events] == ["r", "r", "c", "u", "d", None]
    snap = events[0]
    assert snap.key == {"id": 1}
    assert snap.after == {"id": 1, "first_name": "name1", "email": "e1@x.org"}
    assert snap.value["source"]["snapshot"] is True and snap.value["source"]["query"] is None
    assert snap.value["source"]["server_id"] == 0  # as Debezium: no binlog event read yet
    create = events[2]
    assert create.before is None
    assert create.after == {"id": 3, "first_name": "Anne", "email": "annek@noanswer.org"}
    src = create.value["source"]
    assert src["connector"] == "mysql" and src["name"] == cfg["database.server.name"]
    assert src["db"] == h.dbname and src["table"] == "c1" and src["snapshot"] is False
    assert src["server_id"] == h.db.server_id and src["gtid"].startswith("0-1-")
    assert src["file"].startswith("mariadb-bin.") and src["pos"] > 0 and src["row"] == 0
    assert create.value["ts_ms"] >= src["ts_ms"]
    update = events[3]
    assert update.key == {"id": 3}
    assert update.before == {"id": 3, "first_name": "Anne", "email": "annek@noanswer.org"}
    assert update.after["email"] == "new@x.org"
    delete, tomb = events[4], events[5]
    assert delete.before["id"] == 3 and delete.after is None
    assert tomb.key == {"id": 3} and tomb.value is None


def test_no_tombstone_when_disabled_and_skipped_operations(h: MySqlHarness) -> None:
    """AC-04 (tombstones.on.delete=false), AC-69 (skipped.operations=u)."""
    customers(h, "c4", rows=1)
    cfg = h.config(
        table_include_list=f"{h.dbname}.c4",
        tombstones_on_delete="false",
        skipped_operations="u",
        snapshot_mode="schema_only",
    )
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO c4 VALUES (2, 'b', NULL)", "UPDATE c4 SET email = 'x' WHERE id = 2")
        h.sql("DELETE FROM c4 WHERE id = 2")
        events = h.read(cfg, "c4", min_count=2, settle=1.0)
    assert [(e.op, e.key) for e in events] == [("c", {"id": 2}), ("d", {"id": 2})]


def test_record_schemas_and_source_field_order(h: MySqlHarness) -> None:
    """The Connect JSON shapes and the seed's 1.2 order of io.debezium.connector.mysql.Source."""
    customers(h, "c14", rows=1)
    cfg = h.config(table_include_list=f"{h.dbname}.c14", snapshot_mode="initial_only")
    with h.running(cfg):
        h.read(cfg, "c14", min_count=1, settle=0.5)
    consumer = Consumer({"bootstrap.servers": h.kafka, "group.id": uuid.uuid4().hex})
    consumer.assign([TopicPartition(h.topic(cfg, "c14"), 0, 0)])
    msg = consumer.poll(10)
    consumer.close()
    assert msg is not None
    key, value = orjson.loads(msg.key()), orjson.loads(msg.value())
    server = cfg["database.server.name"]
    assert key["schema"]["name"] == f"{server}.{h.dbname}.c14.Key"
    assert key["schema"]["fields"] == [{"type": "int32", "optional": False, "field": "id"}]
    assert value["schema"]["name"] == f"{server}.{h.dbname}.c14.Envelope"
    source = value["schema"]["fields"][2]
    assert source["name"] == "io.debezium.connector.mysql.Source"
    assert [(f["field"], f["type"], f["optional"]) for f in source["fields"]] == [
        ("version", "string", False),
        ("connector", "string", False),
        ("name", "string", False),
        ("ts_ms", "int64", False),
        ("snapshot", "boolean", True),
        ("db", "string", False),
        ("table", "string", True),
        ("server_id", "int64", False),
        ("gtid", "string", True),
        ("file", "string", False),
        ("pos", "int64", False),
        ("row", "int32", False),
        ("thread", "int64", True),
        ("query", "string", True),
    ]


def test_primary_key_update_becomes_delete_tombstone_create(h: MySqlHarness) -> None:
    """AC-03."""
    customers(h, "c3", rows=1)
    cfg = h.config(table_include_list=f"{h.dbname}.c3", snapshot_mode="schema_only")
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql("UPDATE c3 SET id = 10 WHERE id = 1")
        events = h.read(cfg, "c3", min_count=3, settle=0.5)
    assert [e.op for e in events] == ["d", None, "c"]
    assert events[0].key == {"id": 1} and events[1].key == {"id": 1}
    assert events[2].key == {"id": 10} and events[2].after["id"] == 10
    assert events[0].headers["__debezium.newkey"] == b'{"id":10}'
    assert events[2].headers["__debezium.oldkey"] == b'{"id":1}'


def test_schema_names_are_sanitised(h: MySqlHarness) -> None:
    """AC-08: `my-server` / `order-items` → my_server... / order_items in schema names."""
    h.sql("CREATE TABLE `order-items` (id int PRIMARY KEY)", "INSERT INTO `order-items` VALUES (1)")
    cfg = h.config(table_include_list=rf"{h.dbname}\.order-items", snapshot_mode="initial_only")
    server = "my-server-" + uuid.uuid4().hex[:6]
    cfg["database.server.name"] = cfg["name"] = server
    with h.running(cfg):
        read_topic(h.kafka, f"{server}.{h.dbname}.order-items", min_count=1, settle=0.5)
    consumer = Consumer({"bootstrap.servers": h.kafka, "group.id": uuid.uuid4().hex})
    consumer.assign([TopicPartition(f"{server}.{h.dbname}.order-items", 0, 0)])
    msg = consumer.poll(10)
    consumer.close()
    assert msg is not None
    value = orjson.loads(msg.value())
    assert value["schema"]["name"] == f"{server.replace('-', '_')}.{h.dbname}.order_items.Envelope"


def test_key_columns_and_column_controls(h: MySqlHarness) -> None:
    """AC-09 (excluded key column stays in the key), AC-10 (message.key.columns),
    AC-67 (truncate, mask, hash)."""
    h.sql(
        "CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, name varchar(20), "
        "m3 varchar(20), m0 varchar(20), hashed varchar(10))",
        "INSERT INTO orders VALUES (1, 42, 'Kretchmar', 'secret', 'x', 'Kretchmar')",
        "INSERT INTO orders VALUES (2, 43, 'Kretchmar', 'secret', 'x', 'Kretchmar')",
    )
    db = h.dbname
    cfg = h.config(
        table_include_list=f"{db}.orders",
        snapshot_mode="initial_only",
        column_exclude_list=rf"{db}\.orders\.id",
    )
    cfg["message.key.columns"] = f"{db}.orders:customer_id"
    cfg["column.truncate.to.5.chars"] = f"{db}.orders.name"
    cfg["column.mask.with.3.chars"] = f"{db}.orders.m3"
    cfg["column.mask.with.0.chars"] = f"{db}.orders.m0"
    cfg["column.mask.hash.SHA-256.with.salt.CzQMA0cB5K"] = f"{db}.orders.hashed"
    with h.running(cfg):
        events = h.read(cfg, "orders", min_count=2, settle=0.5)
    first, second = events
    assert first.key == {"customer_id": 42}
    assert "id" not in first.after
    assert first.after["name"] == "Kretc" and first.after["m3"] == "***" and first.after["m0"] == ""
    assert len(first.after["hashed"]) == 10 and first.after["hashed"] != "Kretchmar"
    assert first.after["hashed"] == second.after["hashed"]
    cfg2 = h.config(table_include_list=f"{db}.orders", snapshot_mode="initial_only")
    cfg2["column.exclude.list"] = rf"{db}\.orders\.id"
    with h.running(cfg2):
        [e, _] = h.read(cfg2, "orders", min_count=2, settle=0.5)
    assert e.key == {"id": 1} and "id" not in e.after


TYPES_DDL = """
CREATE TABLE types (id int primary key, b bool, ti tinyint(1), bit1 bit(1), bit10 bit(10),
 tu tinyint unsigned, su smallint unsigned, mi mediumint, iu int unsigned, bu bigint unsigned,
 r real, f float, d double, dec1 decimal(10,2), c char(3), vc varchar(10), bn binary(4),
 vb varbinary(10), tt tinytext, bl blob, j json, e enum('a','b'), s set('x','y','z'), y year,
 ts timestamp(3) null, dt datetime(6), dt0 datetime, dte date, tm time(3), g geometry, p point,
 nd date not null default '2000-01-01', ndt datetime not null default '2000-01-01 00:00:00',
 nts timestamp not null default current_timestamp)"""
TYPES_ROW = """(%d, true, 1, b'1', b'1010000001', 255, 65535, -5, 4294967295,
 18446744073709551615, 1.1, 3.14159274, 2.25, 12.34, 'ab', 'héllo', 'ab', x'01ff', 'tiny',
 x'01ff', '{"k": [1, 2]}', 'b', 'x,z', 2024, '2018-06-20 06:37:03.123',
 '2018-06-20 06:37:03.123456', '2018-06-20 06:37:03', '2018-06-20', '04:05:06.789',
 ST_GeomFromText('POINT(1 2)', 4326), POINT(3,4), '2001-01-01', '2001-01-01 01:02:03',
 '2018-06-20 06:37:03')"""
ZERO_ROW = (
    "INSERT INTO types (id, dte, dt, ts, s, nd, e, ndt, nts) VALUES (%d, '0000-00-00', "
    "'0000-00-00 00:00:00', '0000-00-00 00:00:00', '', '0000-00-00', 'zz', "
    "'0000-00-00 00:00:00', '0000-00-00 00:00:00')"
)


def _types_rows(h: MySqlHarness, **overrides: str) -> list[dict[str, Any]]:
    """Rows 1 and 3 read by the snapshot, 2 and 4 (the same data) by streaming."""
    cfg = h.config(table_include_list=f"{h.dbname}.types", **overrides)
    with h.running(cfg) as run:
        h.wait_streaming(run)
        n = int(h.sql("SELECT MAX(id) FROM types")[0][0])
        h.sql("SET time_zone = '-07:00'", "INSERT INTO types VALUES " + TYPES_ROW % (n + 1))
        h.sql("SET sql_mode = ''", ZERO_ROW % (n + 2))
        events = h.read(cfg, "types", min_count=n + 2, settle=0.5)
    return [dict(e.after) for e in events]


@pytest.fixture(scope="module")
def types_table(h: MySqlHarness) -> None:
    # written with the session in UTC-7: TIMESTAMPs are stored as UTC epochs
    h.sql(TYPES_DDL)
    h.sql("SET time_zone = '-07:00'", "INSERT INTO types VALUES " + TYPES_ROW % 1)
    h.sql("SET sql_mode = ''", ZERO_ROW % 2)


def _same_except_id(a: dict[str, Any], b: dict[str, Any]) -> None:
    a, b = dict(a), dict(b)
    a.pop("id")
    b.pop("id")
    assert a == b, [(k, a[k], b.get(k)) for k in a if a[k] != b.get(k)]


def test_type_mapping_defaults(h: MySqlHarness, types_table: None) -> None:
    """AC-15, AC-17, AC-18, AC-21, AC-24, AC-25 (bytes), spatial, JSON; snapshot == stream."""
    rows = _types_rows(h)
    snap, snap_zero, stream, stream_zero = rows[0], rows[1], rows[-2], rows[-1]
    _same_except_id(snap, stream)
    _same_except_id(snap_zero, stream_zero)
    row = snap
    assert row["b"] == 1 and row["ti"] == 1  # BOOLEAN read back as TINYINT(1) (AC-26)
    assert row["bit1"] is True
    assert base64.b64decode(row["bit10"]) == (0b1010000001).to_bytes(2, "little")
    assert (row["tu"], row["su"], row["mi"], row["iu"]) == (255, 65535, -5, 4294967295)
    assert row["bu"] == -1  # long mode: Java's long, like Debezium
    assert row["r"] == 1.1 and row["f"] == 3.1415927 and row["d"] == 2.25
    assert base64.b64decode(row["dec1"]) == (1234).to_bytes(2, "big")
    assert row["c"] == "ab" and row["vc"] == "héllo"
    assert base64.b64decode(row["bn"]) == b"ab\x00\x00"
    assert base64.b64decode(row["vb"]) == b"\x01\xff" == base64.b64decode(row["bl"])
    assert row["j"] == '{"k": [1, 2]}'
    assert (row["e"], row["s"], row["y"]) == ("b", "x,z", 2024)
    assert row["ts"] == "2018-06-20T13:37:03.123Z"  # written at UTC-7 (AC-15)
    assert row["nts"] == "2018-06-20T13:37:03Z"
    assert row["dt0"] == 1529476623000  # DATETIME as UTC millis (AC-15)
    assert row["dt"] == 1529476623123456
    assert row["dte"] == 17702 and row["tm"] == 14706789000
    assert row["g"] == {
        "wkb": base64.b64encode(
            bytes.fromhex("0101000000" + "000000000000f03f" + "0000000000000040")
        ).decode(),
        "srid": 4326,
    }
    # POINT as io.debezium.data.geometry.Point; SRID 0 (none given) is null, as Debezium
    assert (row["p"]["x"], row["p"]["y"], row["p"]["srid"]) == (3.0, 4.0, None)
    zero = snap_zero
    assert zero["dte"] is None and zero["dt"] is None and zero["ts"] is None  # nullable (AC-17)
    # NOT NULL: the column's default (2000-01-01), as Debezium; the epoch without one
    assert zero["nd"] == 10957 and zero["ndt"] == 946684800000
    assert zero["nts"] == "1970-01-01T00:00:00Z"
    assert zero["s"] == "" and zero["e"] == ""


def test_type_mapping_modes(h: MySqlHarness, types_table: None) -> None:
    """AC-18 (double, string), AC-25 (base64, hex), bigint precise, time connect."""
    rows = _types_rows(
        h,
        decimal_handling_mode="double",
        binary_handling_mode="base64",
        bigint_unsigned_handling_mode="precise",
        time_precision_mode="connect",
    )
    _same_except_id(rows[0], rows[-2])
    row = rows[0]
    assert row["dec1"] == 12.34 and row["bn"] == "YWIAAA==" and row["bl"] == "Af8="
    assert base64.b64decode(row["bu"]) == (18446744073709551615).to_bytes(9, "big", signed=True)
    assert row["dt"] == 1529476623123 and row["dte"] == 17702 and row["tm"] == 14706789
    rows = _types_rows(h, decimal_handling_mode="string", binary_handling_mode="hex")
    _same_except_id(rows[0], rows[-2])
    assert rows[0]["dec1"] == "12.34" and rows[0]["bl"] == "01ff" and rows[0]["bn"] == "61620000"


def test_boolean_streamed_vs_snapshotted(h: MySqlHarness) -> None:
    """AC-26: BOOLEAN from streamed DDL → boolean; after a snapshot (SHOW CREATE TABLE says
    tinyint(1)) → int16, unless the TinyIntOneToBooleanConverter is configured."""
    cfg = h.config(
        table_include_list=rf"{h.dbname}\.flags",
        snapshot_mode="schema_only",
        table_include_list_allow_empty="true",  # created below
    )
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql(
            "CREATE TABLE flags (id int PRIMARY KEY, ok BOOLEAN)", "INSERT INTO flags VALUES (1, 1)"
        )
        [streamed] = h.read(cfg, "flags", min_count=1, settle=0.5)
    assert streamed.after["ok"] is True
    cfg = h.config(table_include_list=rf"{h.dbname}\.flags", snapshot_mode="initial_only")
    with h.running(cfg):
        [snap] = h.read(cfg, "flags", min_count=1, settle=0.5)
    assert snap.after["ok"] == 1
    cfg = h.config(table_include_list=rf"{h.dbname}\.flags", snapshot_mode="initial_only")
    cfg.update(
        {
            "converters": "boolean",
            "boolean.type": "io.debezium.connector.mysql.converters.TinyIntOneToBooleanConverter",
            "boolean.selector": rf"{h.dbname}\.flags\..*",
        }
    )
    with h.running(cfg):
        [conv] = h.read(cfg, "flags", min_count=1, settle=0.5)
    assert conv.after["ok"] is True


def test_negative_fractional_time_is_the_same_streamed_and_snapshotted(h: MySqlHarness) -> None:
    """The binlog's TIME2 packs a negative value with a fraction as (floor, 1 - fraction);
    the streamed value must equal the snapshotted one (read as text) and Debezium's."""
    values = ["-13:45:59.123", "-00:00:00.5", "-838:59:58.999999", "-01:00:00", "12:00:00.25"]
    h.sql("CREATE TABLE tneg (id int PRIMARY KEY, t3 TIME(3), t6 TIME(6), t1 TIME(1))")
    cfg = h.config(table_include_list=rf"{h.dbname}\.tneg", snapshot_mode="schema_only")
    with h.running(cfg) as run:
        h.wait_streaming(run)
        for i, v in enumerate(values):
            h.sql(f"INSERT INTO tneg VALUES ({i}, '{v}', '{v}', '{v}')")
        streamed = h.read(cfg, "tneg", min_count=len(values), settle=0.5)
    cfg = h.config(table_include_list=rf"{h.dbname}\.tneg", snapshot_mode="initial_only")
    with h.running(cfg):
        snapped = h.read(cfg, "tneg", min_count=len(values), settle=0.5)
    by_id = {e.after["id"]: e.after for e in snapped}
    assert [e.after for e in streamed] == [by_id[i] for i in range(len(values))]
    first = by_id[0]
    assert first["t3"] == -(13 * 3600 + 45 * 60 + 59) * 1_000_000 - 123_000
    assert first["t6"] == first["t3"]
    assert first["t1"] == -(13 * 3600 + 45 * 60 + 59) * 1_000_000 - 100_000  # rounded to .1
    assert by_id[1]["t6"] == -500_000 and by_id[3]["t3"] == -3_600_000_000


def test_schema_change_topic_and_ddl_decoding(h: MySqlHarness) -> None:
    """AC-44 (events before/after a DDL use the schema of their position, also when replayed
    from an older offset) and AC-45 (schema change events, one per database)."""
    h.sql(f"CREATE DATABASE IF NOT EXISTS `{h.dbname}_b`", db="")
    other = f"{h.dbname}_b"
    customers(h, "c44", rows=0)
    h.sql("CREATE TABLE dropme (id int PRIMARY KEY)")
    h.sql(f"CREATE TABLE `{other}`.dropme2 (id int PRIMARY KEY)")
    cfg = h.config(
        table_include_list=rf"{h.dbname}\.c44",
        database_include_list=f"{h.dbname},{other}",
        snapshot_mode="schema_only",
    )
    store = MemoryOffsetStore()
    with h.running(cfg, store) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO c44 VALUES (1, 'a', NULL)")
        h.wait_for(lambda: len(h.read(cfg, "c44", min_count=1, settle=0.2)) == 1, run=run)
        time.sleep(0.5)  # let the offset be committed
        before_ddl = dict(store.get(cfg["name"], {"server": cfg["database.server.name"]}) or {})
        h.sql("ALTER TABLE c44 ADD COLUMN extra int AFTER first_name")
        h.sql("INSERT INTO c44 VALUES (2, 'b', 7, NULL)")
        h.sql("CREATE TABLE made (id int PRIMARY KEY, label varchar(20) NOT NULL)")
        h.sql(f"DROP TABLE dropme, `{other}`.dropme2")
        events = h.read(cfg, "c44", min_count=2, settle=0.5)
    assert events[0].after == {"id": 1, "first_name": "a", "email": None}
    assert events[1].after == {"id": 2, "first_name": "b", "extra": 7, "email": None}
    changes = read_topic(h.kafka, cfg["database.server.name"], min_count=5, settle=0.5)
    alter = [c for c in changes if "ALTER TABLE c44" in c.value["ddl"]]
    assert len(alter) == 1
    assert alter[0].key == {"databaseName": h.dbname}
    src = alter[0].value["source"]
    assert src["file"].startswith("mariadb-bin.") and src["pos"] > 0 and src["snapshot"] is False
    # tableChanges: the table after the ALTER, the new column in its place
    [altered] = alter[0].value["tableChanges"]
    assert altered["type"] == "ALTER" and altered["id"] == f'"{h.dbname}"."c44"'
    assert [c["name"] for c in altered["table"]["columns"]] == [
        "id",
        "first_name",
        "extra",
        "email",
    ]
    [create] = [c for c in changes if "CREATE TABLE made" in c.value["ddl"]]
    [created] = create.value["tableChanges"]
    assert created["type"] == "CREATE" and created["id"] == f'"{h.dbname}"."made"'
    assert created["table"]["primaryKeyColumnNames"] == ["id"]
    assert [
        (c["name"], c["typeName"], c["length"], c["optional"]) for c in created["table"]["columns"]
    ] == [("id", "INT", None, False), ("label", "VARCHAR", 20, False)]
    drops = [c for c in changes if c.value["ddl"].startswith("DROP TABLE `")]
    assert sorted(c.key["databaseName"] for c in drops) == sorted([h.dbname, other])
    dropped = {(t["type"], t["id"]) for c in drops for t in c.value["tableChanges"]}
    assert dropped == {("DROP", f'"{h.dbname}"."dropme"'), ("DROP", f'"{other}"."dropme2"')}
    assert any(c.value["source"]["snapshot"] for c in changes)  # the snapshot's CREATE TABLEs

    # Restart from the offset taken before the DDL: the history holds the DDL at a later
    # position, so the replayed first insert... must be decoded with the old schema.
    replay = MemoryOffsetStore()
    replay.put(cfg["name"], {"server": cfg["database.server.name"]}, before_ddl)
    h.sql("INSERT INTO c44 VALUES (3, 'c', 8, NULL)")
    with h.running(cfg, replay) as run:
        h.wait_streaming(run)
        again = h.read(cfg, "c44", min_count=4, settle=0.5)
    assert [e.after for e in again[2:]] == [
        {"id": 2, "first_name": "b", "extra": 7, "email": None},
        {"id": 3, "first_name": "c", "extra": 8, "email": None},
    ]
    # AC-71: Status RECOVERING → RUNNING; ChangesRecovered = the records up to the offset
    m = run.connector.metrics
    assert m.history_statuses[-2:] == ["RECOVERING", "RUNNING"]
    history = FileSchemaHistory(cfg["database.history.file.filename"])
    records = list(history.all_records())
    expected = sum(1 for r in records if is_at_or_before(r.position, before_ddl))
    assert 0 < m.changes_recovered == expected < len(records)
    h.sql(f"DROP DATABASE `{other}`", db="")


def test_include_query_and_filters(h: MySqlHarness) -> None:
    """AC-47 (source.query only for streamed rows), AC-65 (excluded table: no events, counted
    as filtered; include+exclude together is a config error)."""
    customers(h, "q1", rows=1)
    customers(h, "q2", rows=1)
    cfg = h.config(table_exclude_list=rf"{h.dbname}\.q2", include_query="true")
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql("INSERT INTO q1 VALUES (2, 'b', NULL)", "INSERT INTO q2 VALUES (2, 'b', NULL)")
        events = h.read(cfg, "q1", min_count=2, settle=0.5)
        h.wait_for(lambda: run.engine.metrics.streaming.events_filtered >= 1, run=run)
    assert events[0].value["source"]["query"] is None
    assert events[1].value["source"]["query"] == "INSERT INTO q1 VALUES (2, 'b', NULL)"
    assert read_topic(h.kafka, h.topic(cfg, "q2"), timeout=2, settle=0.3) == []
    with pytest.raises(ConfigError):
        h.start(h.config(table_include_list="a", table_exclude_list="b"))


def test_binlog_buffer_drops_rolled_back_changes(h: MySqlHarness) -> None:
    """AC-46: with binlog.buffer.size, changes undone by ROLLBACK TO SAVEPOINT (a MyISAM write
    after the savepoint makes MariaDB log them) are not emitted; a transaction larger than the
    buffer still streams completely. (A full ROLLBACK never reaches a ROW-format MariaDB
    binlog; tests/unit/test_mysql_binlog.py covers it.)"""
    h.sql(
        "CREATE TABLE inno (id int PRIMARY KEY) ENGINE=InnoDB",
        "CREATE TABLE isam (id int PRIMARY KEY) ENGINE=MyISAM",
    )
    cfg = h.config(
        table_include_list=rf"{h.dbname}\.inno", binlog_buffer_size="3", snapshot_mode="schema_only"
    )
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql(
            "BEGIN",
            "INSERT INTO inno VALUES (2)",
            "SAVEPOINT s1",
            "INSERT INTO inno VALUES (3)",
            "INSERT INTO isam VALUES (3)",
            "ROLLBACK TO SAVEPOINT s1",
            "COMMIT",
        )
        h.sql("BEGIN", *[f"INSERT INTO inno VALUES ({i})" for i in range(10, 16)], "COMMIT")
        events = h.read(cfg, "inno", min_count=7, settle=1.0)
    assert [e.key["id"] for e in events] == [2, 10, 11, 12, 13, 14, 15]
    m = run.connector.metrics
    assert m.rolled_back_transactions == 1 and m.large_transactions == 1


def test_unknown_table_handling(h: MySqlHarness) -> None:
    """AC-48: rows of a captured table the schema does not know: fail / warn / skip."""
    customers(h, "known", rows=0)
    customers(h, "unknown", rows=0)
    base = dict(
        snapshot_mode="schema_only",
        database_history_store_only_monitored_tables_ddl="true",
    )
    for mode in ("skip", "warn", "fail"):
        cfg = h.config(table_include_list=rf"{h.dbname}\.known", **base)
        store = MemoryOffsetStore()
        with h.running(cfg, store) as run:
            h.wait_streaming(run)
        # same history and offsets, now also capturing a table the history never recorded
        cfg["table.include.list"] = rf"{h.dbname}\.known,{h.dbname}\.unknown"
        cfg["inconsistent.schema.handling.mode"] = mode
        run = h.start(cfg, store)
        h.wait_streaming(run)
        h.sql(
            "INSERT INTO unknown VALUES (1, 'u', NULL)", "INSERT INTO known VALUES (1, 'k', NULL)"
        )
        if mode == "fail":
            run.thread.join(30)
            assert run.errors and isinstance(run.errors[0], InconsistentSchema)
            assert "mariadb-bin." in str(run.errors[0]) and "unknown" in str(run.errors[0])
        else:
            assert [e.key for e in h.read(cfg, "known", min_count=1, settle=0.3)] == [{"id": 1}]
            assert run.connector.metrics.skipped_events == 1
            run.stop()
            assert not run.errors
        h.sql("DELETE FROM known", "DELETE FROM unknown")


def test_heartbeats(h: MySqlHarness) -> None:
    """AC-64: about one heartbeat a second with no captured changes; none with 0."""
    customers(h, "hb", rows=0)
    cfg = h.config(
        table_include_list=rf"{h.dbname}\.hb",
        heartbeat_interval_ms="1000",
        snapshot_mode="schema_only",
    )
    with h.running(cfg) as run:
        h.wait_streaming(run)
        started = time.monotonic()
        time.sleep(3.5)
        elapsed = time.monotonic() - started
    beats = read_topic(h.kafka, f"__debezium-heartbeat.{cfg['database.server.name']}", settle=0.5)
    extra = run.engine.metrics.extra  # the MySQL gauges reach the core's registry
    assert extra["IsGtidModeEnabled"]() == 1.0 and extra["NumberOfDisconnects"]() == 0.0
    assert 0.5 * elapsed <= len(beats) <= 1.5 * elapsed + 1
    assert beats[0].key == {"serverName": cfg["database.server.name"]}
