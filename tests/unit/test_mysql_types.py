"""MySQL type mapping: every type and mode, and the binlog and snapshot forms of each value
converting to the same Connect value (connectors/mysql/types.py, json_values.py)."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import random
import re
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cdc.schema.model import Type
from cdc.spi import Column, Table, TableId
from connectors.mysql.json_values import apply_json_diff, mysql_json_text, normalize, parse_path
from connectors.mysql.types import (
    ZERO_DATE,
    Modes,
    MySqlValueConverters,
    SnapshotTimestamp,
    connect_table,
    driver_default,
    snapshot_timestamp_decoder,
)

TABLE = Table(TableId("db", None, "t"), ())
POINT_WKB = b"\x01" + struct.pack("<Idd", 1, 1.5, -2.0)


def col(
    type_name: str,
    length: int | None = None,
    scale: int | None = None,
    *,
    optional: bool = True,
    enum: tuple[str, ...] | None = None,
    default: Any = None,
    has_default: bool = False,
    name: str = "c",
) -> Column:
    return Column(
        name,
        0,
        type_name,
        length=length,
        scale=scale,
        optional=optional,
        enum_values=enum,
        default=default,
        has_default=has_default,
    )


def convert(column: Column, value: Any, modes: Modes | None = None) -> Any:
    _schema, fn = MySqlValueConverters(modes or Modes()).resolve(TABLE, column)
    return value if fn is None else fn(value)


def schema_of(column: Column, modes: Modes | None = None) -> Any:
    return MySqlValueConverters(modes or Modes()).resolve(TABLE, column)[0]


# (column, value as the binlog decoder delivers it, value as PyMySQL delivers it, Connect value)
SAME_VALUE_CASES = [
    (col("BOOLEAN", 1), 1, 1, True),
    (col("BIT", 1), "1", b"\x01", True),
    (col("BIT", 10), "1010000001", b"\x02\x81", (0b1010000001).to_bytes(2, "little")),
    (col("BIT", 16), "1000000000000001", b"\x80\x01", (0x8001).to_bytes(2, "little")),
    (col("TINYINT"), -5, -5, -5),
    (col("TINYINT UNSIGNED"), 255, 255, 255),
    (col("SMALLINT UNSIGNED"), 65535, 65535, 65535),
    (col("MEDIUMINT"), -8388608, -8388608, -8388608),
    (col("INT UNSIGNED"), 4294967295, 4294967295, 4294967295),
    (col("BIGINT"), -(2**63), -(2**63), -(2**63)),
    (col("BIGINT UNSIGNED"), 2**64 - 1, 2**64 - 1, -1),
    (col("FLOAT"), 3.1415927410125732, 3.1415927410125732, 3.1415927),
    (col("FLOAT"), 1.100000023841858, 1.100000023841858, 1.1),
    (col("REAL"), 1.1, 1.1, 1.1),
    (col("DOUBLE"), 0.30000000000000004, 0.30000000000000004, 0.30000000000000004),
    (
        col("DECIMAL", 10, 2),
        decimal.Decimal("12.34"),
        decimal.Decimal("12.34"),
        decimal.Decimal("12.34"),
    ),
    (col("CHAR", 3), "ab", "ab", "ab"),
    (col("VARCHAR", 10), "héllo", "héllo", "héllo"),
    (col("TEXT"), "t", "t", "t"),
    (col("BINARY", 4), b"ab", b"ab\x00\x00", b"ab\x00\x00"),
    (col("VARBINARY", 10), b"\x01\xff", b"\x01\xff", b"\x01\xff"),
    (col("BLOB"), b"\x01\xff", b"\x01\xff", b"\x01\xff"),
    (col("JSON"), '{"k": [1, 2]}', '{"k": [1, 2]}', '{"k": [1, 2]}'),
    (
        col("JSON"),
        {b"a": 1, b"b": [True, None, b"x", 1.5]},
        '{"a": 1, "b": [true, null, "x", 1.5]}',
        '{"a": 1, "b": [true, null, "x", 1.5]}',
    ),
    (col("ENUM", enum=("a", "b")), "b", "b", "b"),
    (col("ENUM", enum=("a", "b")), "", "", ""),
    (col("SET", enum=("x", "y", "z")), {"z", "x"}, "x,z", "x,z"),
    (col("SET", enum=("x", "y", "z")), "", "", ""),
    (col("YEAR"), 2024, 2024, 2024),
    (col("YEAR"), 1900, 0, 0),
    (col("DATE"), dt.date(2018, 6, 20), dt.date(2018, 6, 20), 17702),
    (col("DATE"), ZERO_DATE, "0000-00-00", None),
    (col("DATE", optional=False), ZERO_DATE, "0000-00-00", 0),
    (
        col("TIME", 3),
        dt.timedelta(seconds=14706, microseconds=789000),
        dt.timedelta(seconds=14706, microseconds=789000),
        14706789000,
    ),
    (col("TIME"), -dt.timedelta(hours=1), -dt.timedelta(hours=1), -3600000000),
    (
        col("DATETIME"),
        dt.datetime(2018, 6, 20, 6, 37, 3),
        dt.datetime(2018, 6, 20, 6, 37, 3),
        1529476623000,
    ),
    (
        col("DATETIME", 3),
        dt.datetime(2018, 6, 20, 6, 37, 3, 123000),
        dt.datetime(2018, 6, 20, 6, 37, 3, 123000),
        1529476623123,
    ),
    (
        col("DATETIME", 6),
        dt.datetime(2018, 6, 20, 6, 37, 3, 123456),
        dt.datetime(2018, 6, 20, 6, 37, 3, 123456),
        1529476623123456,
    ),
    (col("DATETIME", 6), ZERO_DATE, "0000-00-00 00:00:00.000000", None),
    (col("DATETIME", optional=False), ZERO_DATE, "0000-00-00 00:00:00", 0),
    (
        col("TIMESTAMP", 3),
        dt.datetime(2018, 6, 20, 13, 37, 3, 123000),
        dt.datetime(2018, 6, 20, 13, 37, 3, 123000),
        "2018-06-20T13:37:03.123Z",
    ),
    (col("TIMESTAMP"), dt.datetime(1970, 1, 1), "0000-00-00 00:00:00", None),
    (
        col("TIMESTAMP", optional=False),
        dt.datetime(1970, 1, 1),
        "0000-00-00 00:00:00",
        "1970-01-01T00:00:00Z",
    ),
    # MariaDB UUID/INET4/INET6: raw bytes, trailing zero bytes stripped by the decoder
    (
        col("UUID"),
        bytes.fromhex("123e4567e89b42d3a456426614174000").rstrip(b"\0"),
        "123e4567-e89b-42d3-a456-426614174000",
        "123e4567-e89b-42d3-a456-426614174000",
    ),
    (
        col("UUID"),
        "",
        "00000000-0000-0000-0000-000000000000",
        "00000000-0000-0000-0000-000000000000",
    ),
    (col("INET4"), b"\x0a", "10.0.0.0", "10.0.0.0"),
    (col("INET4"), "", "0.0.0.0", "0.0.0.0"),
    (col("INET6"), b"\x20\x01\x0d\xb8", "2001:db8::", "2001:db8::"),
    (
        col("INET6"),
        bytes(10) + b"\xff\xff\xc0\x00\x02\x80",
        "::ffff:192.0.2.128",
        "::ffff:192.0.2.128",
    ),
    (col("INET6"), bytes(12) + b"\xc0\x00\x02\x80", "::192.0.2.128", "::192.0.2.128"),
    (col("INET6"), bytes(14) + b"\x01", "::100", "::100"),
    (col("INET6"), bytes.fromhex("00010000000000010000000000000001"), "1:0:0:1::1", "1:0:0:1::1"),
    (
        col("INET6"),
        bytes.fromhex("20010db8000000010001000100010001"),
        "2001:db8::1:1:1:1:1",
        "2001:db8::1:1:1:1:1",
    ),
    (
        col("POINT"),
        bytes.fromhex("e6100000") + POINT_WKB,
        bytes.fromhex("e6100000") + POINT_WKB,
        {"x": 1.5, "y": -2.0, "wkb": POINT_WKB, "srid": 4326},
    ),
    (
        col("LINESTRING"),
        bytes.fromhex("00000000") + b"WKB",
        bytes.fromhex("00000000") + b"WKB",
        {"wkb": b"WKB", "srid": None},  # SRID 0 is null, as in Debezium
    ),
]


@pytest.mark.parametrize(
    ("column", "binlog", "snapshot", "expected"),
    SAME_VALUE_CASES,
    # sorted: a set's text follows hash randomization, and xdist workers must agree on ids
    ids=lambda v: (
        v.type_name
        if isinstance(v, Column)
        else str(sorted(v, key=repr) if isinstance(v, set | frozenset) else v)[:30]
    ),
)
def test_both_paths_give_the_same_connect_value(
    column: Column, binlog: Any, snapshot: Any, expected: Any
) -> None:
    assert convert(column, binlog) == expected
    assert convert(column, snapshot) == expected


def test_v3_timestamp_pads_binlog_values_not_the_snapshots() -> None:
    """Under envelope.version=3, as Debezium 3.6: a binlog TIMESTAMP(6) value carries six
    fraction digits, the same instant read by the snapshot the unpadded ISO form; the
    snapshot session's decoder marks its datetimes and leaves zero dates as text."""
    v3 = Modes(envelope="3")
    column = col("TIMESTAMP", 6)
    binlog = dt.datetime(2024, 1, 1, 0, 0, 8)
    decode = snapshot_timestamp_decoder(lambda text: dt.datetime.fromisoformat(text))
    snapshot = decode("2024-01-01 00:00:08")
    assert type(snapshot) is SnapshotTimestamp and snapshot == binlog
    assert convert(column, binlog, v3) == "2024-01-01T00:00:08.000000Z"
    assert convert(column, snapshot, v3) == "2024-01-01T00:00:08Z"
    assert convert(column, binlog) == convert(column, snapshot) == "2024-01-01T00:00:08Z"
    assert snapshot_timestamp_decoder(lambda text: text)("0000-00-00 00:00:00") == (
        "0000-00-00 00:00:00"
    )


def test_snapshot_timestamp_decoder_equals_pymysqls_decoder_marked() -> None:
    """The snapshot's TIMESTAMP decoder reads the server's text itself where it can; it must
    give what PyMySQL's decoder gives, marked as a snapshot value, for every fraction
    length, and leave zero, invalid and odd text to PyMySQL's decoder. So must the compiled
    packet walk, which makes the value of canonical text itself."""
    import pymysql.converters

    from cdc.compiled import load

    pymysqls = pymysql.converters.decoders[pymysql.constants.FIELD_TYPE.TIMESTAMP]
    decode = snapshot_timestamp_decoder(pymysqls)
    compiled = load("connectors.mysql._textrow_c")
    walk = compiled.read_row if compiled is not None else None
    rng = random.Random(7)
    texts = ["0000-00-00 00:00:00", "2024-02-30 00:00:00", "2024-01-01 24:00:00",
             "2024-01-01T00:00:00", "2024-01-01", "0999-01-01 00:00:00.5",
             "2038-01-19 03:14:07.999999", "1970-01-01 00:00:01", "garbage text here!!",
             "2024-01-01 00:00:00+01:00", "0001-01-01 00:00:00", "9999-12-31 23:59:59.999999",
             "2024-02-29 12:00:00.1", "2023-02-29 12:00:00", "2024-13-01 00:00:00",
             "2024-1-01 00:00:00", "abcd-ef-gh ij:kl:mn", "2024-01-01 00:00:00.",
             "2024-01-01 00:00:00.1234567", "2024-01-01 00:00:00.12a", "2024-01-01 00:00:60",
             "2024-01-01 00:60:00", "-024-01-01 00:00:00", "2024-01-01 00:00:00 "]  # fmt: skip
    for _ in range(5000):
        at = dt.datetime(1970, 1, 1) + dt.timedelta(
            seconds=rng.randrange(2**31), microseconds=rng.randrange(10**6)
        )
        fsp = rng.randrange(0, 7)
        text = at.isoformat(" ", "seconds")
        texts.append(text + ("." + f"{at.microsecond:06d}"[:fsp] if fsp else ""))
    for text in texts:
        want = pymysqls(text)
        if type(want) is dt.datetime:
            want = SnapshotTimestamp.combine(want.date(), want.time())
        got = decode(text)
        assert (type(got), got) == (type(want), want), text
        if walk is not None:  # the compiled packet walk makes canonical text itself
            data = text.encode()
            [made] = walk(bytes([len(data)]) + data, 0, (("utf8", decode, SnapshotTimestamp),))
            assert (type(made), made) == (type(want), want), text
    if walk is not None:  # and really without the converter for canonical text

        def refuse(text: str) -> Any:
            raise AssertionError(text)

        for text in texts[-5000:]:
            data = text.encode()
            walk(bytes([len(data)]) + data, 0, (("utf8", refuse, SnapshotTimestamp),))


def test_widest_decimal_is_scaled_without_overflow() -> None:
    """A DECIMAL(65,30) value or DDL default with fewer decimals has 65 digits once scaled;
    Python's default context (28 digits) refused it, which stopped the connector."""
    column = col("DECIMAL", 65, 30)
    for text in ("1.5", "-99999999999999999999999999999999999.9"):
        value = convert(column, decimal.Decimal(text))
        assert value == decimal.Decimal(text) and value.as_tuple().exponent == -30


def test_schemas_by_type() -> None:
    names = {
        ("BOOLEAN", 1): (Type.BOOLEAN, None),
        ("BIT", 1): (Type.BOOLEAN, None),
        ("BIT", 10): (Type.BYTES, "io.debezium.data.Bits"),
        ("TINYINT", None): (Type.INT16, None),
        ("SMALLINT", None): (Type.INT16, None),
        ("MEDIUMINT", None): (Type.INT32, None),
        ("INT", None): (Type.INT32, None),
        ("BIGINT", None): (Type.INT64, None),
        ("REAL", None): (Type.FLOAT32, None),
        ("FLOAT", None): (Type.FLOAT64, None),
        ("DOUBLE", None): (Type.FLOAT64, None),
        ("VARCHAR", 5): (Type.STRING, None),
        ("BLOB", None): (Type.BYTES, None),
        ("JSON", None): (Type.STRING, "io.debezium.data.Json"),
        ("YEAR", None): (Type.INT32, "io.debezium.time.Year"),
        ("TIMESTAMP", None): (Type.STRING, "io.debezium.time.ZonedTimestamp"),
        ("DATE", None): (Type.INT32, "io.debezium.time.Date"),
        ("TIME", None): (Type.INT64, "io.debezium.time.MicroTime"),
        ("DATETIME", 3): (Type.INT64, "io.debezium.time.Timestamp"),
        ("DATETIME", 4): (Type.INT64, "io.debezium.time.MicroTimestamp"),
        ("GEOMETRY", None): (Type.STRUCT, "io.debezium.data.geometry.Geometry"),
        ("POINT", None): (Type.STRUCT, "io.debezium.data.geometry.Point"),
        ("GEOMETRYCOLLECTION", None): (Type.STRUCT, "io.debezium.data.geometry.Geometry"),
        ("UUID", None): (Type.STRING, "io.debezium.data.Uuid"),
        ("INET4", None): (Type.STRING, None),
        ("INET6", None): (Type.STRING, None),
        ("DECIMAL", 10): (Type.BYTES, "org.apache.kafka.connect.data.Decimal"),
    }
    for (type_name, length), (literal, name) in names.items():
        s = schema_of(col(type_name, length, 2 if type_name == "DECIMAL" else None))
        assert (s.type, s.name) == (literal, name), type_name
    bits = schema_of(col("BIT", 10))
    assert bits.parameters == {"length": "10"}
    dec = schema_of(col("DECIMAL", 10, 2))
    assert dec.parameters is not None and dec.parameters["scale"] == "2"
    assert schema_of(col("ENUM", enum=("a", "b"))).parameters == {"allowed": "a,b"}
    assert schema_of(col("SET", enum=("x", "y"))).name == "io.debezium.data.EnumSet"
    # unsigned types widen so every value fits
    assert schema_of(col("SMALLINT UNSIGNED")).type is Type.INT32
    assert schema_of(col("INT UNSIGNED")).type is Type.INT64


def test_handling_modes() -> None:
    connect = Modes(time_precision="connect")
    assert schema_of(col("DATE"), connect).name == "org.apache.kafka.connect.data.Date"
    assert schema_of(col("TIME"), connect).name == "org.apache.kafka.connect.data.Time"
    assert schema_of(col("DATETIME", 6), connect).name == "org.apache.kafka.connect.data.Timestamp"
    assert convert(col("DATETIME", 6), dt.datetime(2018, 6, 20, 6, 37, 3, 123456), connect) == (
        1529476623123
    )
    assert convert(col("TIME", 3), dt.timedelta(seconds=1, microseconds=5000), connect) == 1005
    double = Modes(decimal="double")
    assert schema_of(col("DECIMAL", 10, 2), double).type is Type.FLOAT64
    assert convert(col("DECIMAL", 10, 2), decimal.Decimal("12.34"), double) == 12.34
    string = Modes(decimal="string")
    assert convert(col("DECIMAL", 10, 2), decimal.Decimal("12.30"), string) == "12.30"
    precise = Modes(bigint_unsigned="precise")
    assert schema_of(col("BIGINT UNSIGNED"), precise).name == (
        "org.apache.kafka.connect.data.Decimal"
    )
    assert convert(col("BIGINT UNSIGNED"), 2**64 - 1, precise) == decimal.Decimal(2**64 - 1)
    assert convert(col("BLOB"), b"\x01\xff", Modes(binary="base64")) == "Af8="
    assert convert(col("BLOB"), b"\x01\xff", Modes(binary="hex")) == "01ff"
    assert convert(col("BINARY", 3), b"\x01", Modes(binary="hex")) == "010000"


def test_time_adjuster() -> None:
    d = dt.date(10, 5, 1)
    assert convert(col("DATE"), d) == convert(col("DATE"), dt.date(2010, 5, 1))
    assert convert(col("DATE"), dt.date(85, 5, 1)) == convert(col("DATE"), dt.date(1985, 5, 1))
    assert convert(col("DATE"), d, Modes(time_adjuster=False)) == (d - dt.date(1970, 1, 1)).days


def test_tinyint_one_to_boolean_converter() -> None:
    every = Modes(tinyint1_boolean=())
    assert schema_of(col("TINYINT", 1), every).type is Type.BOOLEAN
    assert convert(col("TINYINT", 1), 1, every) is True
    assert schema_of(col("TINYINT", 4), every).type is Type.INT16
    picky = Modes(tinyint1_boolean=(re.compile(r"db\.t\.flag"),))
    assert schema_of(col("TINYINT", 1, name="flag"), picky).type is Type.BOOLEAN
    assert schema_of(col("TINYINT", 1, name="other"), picky).type is Type.INT16
    assert schema_of(col("TINYINT", 1)).type is Type.INT16  # not configured


@pytest.fixture
def other_timezone() -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "America/Los_Angeles"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


def test_process_time_zone_does_not_matter(other_timezone: None) -> None:
    """AC-15: UTC in, UTC out, whatever the process's zone."""
    assert convert(col("TIMESTAMP"), dt.datetime(2018, 6, 20, 13, 37, 3)) == "2018-06-20T13:37:03Z"
    assert convert(col("DATETIME"), dt.datetime(2018, 6, 20, 6, 37, 3)) == 1529476623000


def test_defaults_become_schema_defaults() -> None:
    table = Table(
        TableId("db", None, "t"),
        (
            col("INT", default="5", has_default=True, name="i"),
            col("TIMESTAMP", default="CURRENT_TIMESTAMP", has_default=True, name="ts"),
            col("VARCHAR", 5, default="x", has_default=True, name="v"),
            col("VARCHAR", 36, default="(uuid())", has_default=True, name="u"),
            col("BIT", 4, default="b'101'", has_default=True, name="b"),
            col("DECIMAL", 5, 2, default="1.5", has_default=True, name="d"),
            col("DATE", default="2000-01-01", has_default=True, name="dd"),
        ),
    )
    connect = connect_table(table)
    conv = MySqlValueConverters(Modes())
    defaults = {}
    for c in connect.columns:
        fn = conv.converter_for(connect, c)
        defaults[c.name] = (
            c.has_default,
            c.default
            if fn is None
            else (fn(c.default) if c.has_default and c.default is not None else None),
        )
    assert defaults["i"] == (True, 5)
    assert defaults["ts"] == (True, "1970-01-01T00:00:00Z")  # the seed's CURRENT_TIMESTAMP rule
    assert defaults["v"] == (True, "x")
    assert defaults["u"] == (False, None)  # expression defaults are not carried
    assert defaults["b"] == (True, (5).to_bytes(1, "little"))
    assert defaults["d"] == (True, decimal.Decimal("1.50"))
    assert defaults["dd"] == (True, 10957)
    assert driver_default(col("INT", default="oops", has_default=True)) == (False, None)


def test_mysql_json_text_and_partial_updates() -> None:
    doc = {
        b"a": 1,
        b"b": {b"c": [1, 2.5, b"\xc3\xa9"]},
        b"d": None,
        b"e": False,
        b"f": decimal.Decimal("1.10"),
        b"g": 1e300,
    }
    assert mysql_json_text(doc) == (
        '{"a": 1, "b": {"c": [1, 2.5, "é"]}, "d": null, "e": false, "f": 1.10, "g": 1e300}'
    )
    assert parse_path('$.a."b c"[2]') == ["a", "b c", 2]
    base = normalize({b"a": 1, b"arr": [1, 2]})
    assert apply_json_diff(base, "Replace", "$.a", 2) == {"a": 2, "arr": [1, 2]}
    assert apply_json_diff(base, "Insert", "$.arr[1]", 9) == {"a": 2, "arr": [1, 9, 2]}
    assert apply_json_diff(base, "Insert", "$.n", "x") == {"a": 2, "arr": [1, 9, 2], "n": "x"}
    assert apply_json_diff(base, "Remove", "$.arr[0]") == {"a": 2, "arr": [9, 2], "n": "x"}


def test_propagated_source_types() -> None:
    """column.propagate.source.type: the MySQL type, length and scale as schema parameters."""
    from cdc.schema.table_schema import TableSchemaBuilder
    from cdc.topics import TopicNamer

    table = Table(
        TableId("db", None, "t"),
        (col("DECIMAL", 10, 2, name="price"), col("VARCHAR", 20, name="name")),
    )
    builder = TableSchemaBuilder(
        MySqlValueConverters(Modes()), TopicNamer("s"), propagate_source_type=[r"db\.t\..*"]
    )
    value = builder.build(table).value_schema
    price, name = (f.schema.parameters or {} for f in value.fields)
    assert price["__debezium.source.column.type"] == "DECIMAL"
    assert (price["__debezium.source.column.length"], price["__debezium.source.column.scale"]) == (
        "10",
        "2",
    )
    assert name["__debezium.source.column.type"] == "VARCHAR"
    assert name["__debezium.source.column.length"] == "20"


def test_binlog_timestamp_text_equals_the_strftime_form() -> None:
    """TIMESTAMP → ZonedTimestamp text: the binlog's naive datetimes take an isoformat fast
    path; it must give exactly the text of logical.zoned_timestamp_str (+ the fsp padding of
    envelope.version=3) on boundary values, every fraction precision and the zero epoch."""
    from cdc.schema import logical
    from connectors.mysql import types

    values: list[Any] = []
    for base in (
        dt.datetime(1970, 1, 1, 0, 0, 1),
        dt.datetime(1999, 12, 31, 23, 59, 59),
        dt.datetime(2038, 1, 19, 3, 14, 7),
        dt.datetime(1000, 1, 1, 0, 0, 1),
        dt.datetime(999, 12, 31, 23, 59, 59),  # below the fast path (strftime's %Y)
        dt.datetime(9999, 12, 31, 23, 59, 59),
    ):
        for micro in (0, 1, 10, 100_000, 120_000, 500, 999_999, 123_456, 100):
            values.append(base.replace(microsecond=micro))
    values += [
        dt.datetime(1970, 1, 1),  # the zero TIMESTAMP
        dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
        dt.datetime(2024, 2, 29, 13, 45, 59, 100_000, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        types.SnapshotTimestamp(2024, 2, 29, 13, 45, 59, 100_000),
        types.SnapshotTimestamp(2024, 2, 29, 13, 45, 59),
        "2024-02-29 13:45:59.5",
        "0000-00-00 00:00:00",
    ]

    def reference(zero: str | None) -> Any:
        def convert(value: Any) -> Any:
            if isinstance(value, dt.datetime):
                if value.tzinfo is None and value == dt.datetime(1970, 1, 1):
                    return zero
            else:
                parsed = types._parse_datetime(str(value))
                if parsed is None:
                    return zero
                value = parsed
            return logical.zoned_timestamp_str(value)

        return convert

    for zero in ("1970-01-01T00:00:00Z", None):
        plain = types._timestamp_conv(zero)
        ref = reference(zero)
        assert [plain(v) for v in values] == [ref(v) for v in values]
        for fsp in (None, 0, 1, 2, 3, 4, 5, 6):
            padded = logical.fixed_fraction(ref, fsp)
            fast = types._timestamp_v3(plain, fsp)
            expected = [ref(v) if type(v) is types.SnapshotTimestamp else padded(v) for v in values]
            assert [fast(v) for v in values] == expected, fsp


def test_datatype_propagate_source_type_matches_the_type_name() -> None:
    """datatype.propagate.source.type picks columns by <table id>.<type name> (Debezium's
    fullyQualifiedColumnDatatype), ignoring case, not by column name."""
    from cdc.schema.table_schema import TableSchemaBuilder
    from cdc.topics import TopicNamer

    table = Table(
        TableId("db", None, "t"),
        (col("DECIMAL", 10, 2, name="price"), col("VARCHAR", 20, name="name")),
    )
    builder = TableSchemaBuilder(
        MySqlValueConverters(Modes()), TopicNamer("s"), propagate_source_datatype=[r".+\.varchar"]
    )
    price, name = (f.schema.parameters or {} for f in builder.build(table).value_schema.fields)
    assert "__debezium.source.column.type" not in price
    assert name["__debezium.source.column.type"] == "VARCHAR"
    by_name = TableSchemaBuilder(
        MySqlValueConverters(Modes()), TopicNamer("s"), propagate_source_datatype=[r"db\.t\.name"]
    )
    assert not any(
        (f.schema.parameters or {}).get("__debezium.source.column.type")
        for f in by_name.build(table).value_schema.fields
    )


def _opaque_json(field_type: int, data: bytes) -> str:
    """A binary JSON document holding one opaque value, printed as the server prints it."""
    from pymysqlreplication.json_binary import parse_json

    import connectors.mysql.rows_decoder  # noqa: F401  (installs the opaque reader)
    from connectors.mysql.json_values import mysql_json_text, normalize

    return mysql_json_text(normalize(parse_json(0x0F, bytes([field_type, len(data)]) + data)))


def _packed(value: int) -> bytes:
    return value.to_bytes(8, "little", signed=True)


def test_opaque_values_in_binary_json_print_as_the_server_prints_them() -> None:
    """python-mysql-replication's reader made a DATE a datetime, dropped a negative TIME's
    sign, failed the event on a TIME of 24 hours or more, and decoded bytes as text."""
    decimal_bytes = bytes([10, 8]) + bytes.fromhex("800000000a")  # DECIMAL(10,8) 0.00000010
    assert _opaque_json(246, decimal_bytes) == "0.00000010"
    ymd = ((2020 * 13 + 1) << 5) | 2
    assert _opaque_json(10, _packed((ymd << 17) << 24)) == '"2020-01-02"'
    hms = (30 << 12) | (0 << 6) | 5
    assert _opaque_json(11, _packed(hms << 24)) == '"30:00:05.000000"'
    assert _opaque_json(11, _packed(-((1 << 12) << 24))) == '"-01:00:00.000000"'
    assert _opaque_json(253, b"\x01\x02") == '"base64:type253:AQI="'


def test_a_partial_json_insert_keeps_mysqls_key_order() -> None:
    """MySQL keeps an object's keys by length, then bytes: inserting $.a into {"bb": 1}
    gives {"a": 2, "bb": 1}, as SELECT prints it."""
    from connectors.mysql.json_values import apply_json_diff, mysql_json_text

    assert mysql_json_text(apply_json_diff({"bb": 1}, "Insert", "$.a", 2)) == '{"a": 2, "bb": 1}'
