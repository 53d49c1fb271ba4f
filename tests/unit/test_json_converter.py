"""JsonConverter output checked against the exact shape Kafka's JsonConverter writes.

Expected JSON is spelled out literally (key order included, compared as ordered pairs), so a
change in field order, a missing ``optional`` or a different base64 is caught.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from typing import Any

import pytest

from cdc.converters import ConversionError, Converter, JsonConverter, converter_from_config
from cdc.schema import logical as L
from cdc.schema.model import (
    BOOLEAN,
    BYTES,
    FLOAT32,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    OPTIONAL_INT64,
    OPTIONAL_STRING,
    STRING,
    Schema,
    Type,
    array,
    map_of,
    primitive,
    struct,
)

D = decimal.Decimal


def pairs(obj: Any) -> Any:
    """A JSON value with every object turned into its ordered list of pairs."""
    if isinstance(obj, dict):
        return [(k, pairs(v)) for k, v in obj.items()]
    if isinstance(obj, list):
        return [pairs(v) for v in obj]
    return obj


def parsed(data: bytes) -> Any:
    return json.loads(data, object_pairs_hook=lambda kv: [(k, v) for k, v in kv])


def field(schema_json: dict[str, Any], name: str) -> dict[str, Any]:
    return {**schema_json, "field": name}


# One column per logical type, with (schema, value, expected schema JSON, expected payload).
COLUMNS: list[tuple[str, Schema, Any, dict[str, Any], Any]] = [
    ("c_int8", INT8, -5, {"type": "int8", "optional": False}, -5),
    ("c_int16", INT16, 300, {"type": "int16", "optional": False}, 300),
    ("c_int32", INT32, 1001, {"type": "int32", "optional": False}, 1001),
    ("c_int64", INT64, 2**40, {"type": "int64", "optional": False}, 2**40),
    ("c_float32", FLOAT32, 1.5, {"type": "float", "optional": False}, 1.5),
    ("c_float64", FLOAT64, 0.25, {"type": "double", "optional": False}, 0.25),
    ("c_bool", BOOLEAN, True, {"type": "boolean", "optional": False}, True),
    ("c_string", STRING, "Sally", {"type": "string", "optional": False}, "Sally"),
    ("c_opt", OPTIONAL_STRING, None, {"type": "string", "optional": True}, None),
    ("c_bytes", BYTES, b"\x00\x01\xff", {"type": "bytes", "optional": False}, "AAH/"),
    (
        "price",
        L.connect_decimal(2, 10),
        D("12.34"),
        {
            "type": "bytes",
            "optional": False,
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": "2", "connect.decimal.precision": "10"},
        },
        "BNI=",
    ),
    (
        "debt",
        L.connect_decimal(2),
        D("-1.00"),
        {
            "type": "bytes",
            "optional": False,
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": "2"},
        },
        "nA==",
    ),
    (
        "vsd",
        L.variable_scale_decimal(),
        L.variable_scale_value(D("3.141")),
        {
            "type": "struct",
            "fields": [
                {"type": "int32", "optional": False, "field": "scale"},
                {"type": "bytes", "optional": False, "field": "value"},
            ],
            "optional": False,
            "name": "io.debezium.data.VariableScaleDecimal",
            "version": 1,
            "doc": "Variable scaled decimal",
        },
        {"scale": 3, "value": "DEU="},
    ),
    (
        "c_cdate",
        L.connect_date(),
        19000,
        {
            "type": "int32",
            "optional": False,
            "name": "org.apache.kafka.connect.data.Date",
            "version": 1,
        },
        19000,
    ),
    (
        "c_ctime",
        L.connect_time(),
        3_600_000,
        {
            "type": "int32",
            "optional": False,
            "name": "org.apache.kafka.connect.data.Time",
            "version": 1,
        },
        3_600_000,
    ),
    (
        "c_cts",
        L.connect_timestamp(),
        1_700_000_000_123,
        {
            "type": "int64",
            "optional": False,
            "name": "org.apache.kafka.connect.data.Timestamp",
            "version": 1,
        },
        1_700_000_000_123,
    ),
    (
        "c_date",
        L.date(),
        19000,
        {"type": "int32", "optional": False, "name": "io.debezium.time.Date", "version": 1},
        19000,
    ),
    (
        "c_time",
        L.time_millis(),
        1234,
        {"type": "int32", "optional": False, "name": "io.debezium.time.Time", "version": 1},
        1234,
    ),
    (
        "c_microtime",
        L.micro_time(),
        3_600_000_001,
        {"type": "int64", "optional": False, "name": "io.debezium.time.MicroTime", "version": 1},
        3_600_000_001,
    ),
    (
        "c_nanotime",
        L.nano_time(),
        5,
        {"type": "int64", "optional": False, "name": "io.debezium.time.NanoTime", "version": 1},
        5,
    ),
    (
        "c_ts",
        L.timestamp_millis(),
        1_700_000_000_123,
        {"type": "int64", "optional": False, "name": "io.debezium.time.Timestamp", "version": 1},
        1_700_000_000_123,
    ),
    (
        "c_microts",
        L.micro_timestamp(),
        1_700_000_000_123_456,
        {
            "type": "int64",
            "optional": False,
            "name": "io.debezium.time.MicroTimestamp",
            "version": 1,
        },
        1_700_000_000_123_456,
    ),
    (
        "c_nanots",
        L.nano_timestamp(),
        7,
        {
            "type": "int64",
            "optional": False,
            "name": "io.debezium.time.NanoTimestamp",
            "version": 1,
        },
        7,
    ),
    (
        "c_zts",
        L.zoned_timestamp(),
        "2024-01-01T10:00:00.5Z",
        {
            "type": "string",
            "optional": False,
            "name": "io.debezium.time.ZonedTimestamp",
            "version": 1,
        },
        "2024-01-01T10:00:00.5Z",
    ),
    (
        "c_ztime",
        L.zoned_time(),
        "10:00:00Z",
        {"type": "string", "optional": False, "name": "io.debezium.time.ZonedTime", "version": 1},
        "10:00:00Z",
    ),
    (
        "c_year",
        L.year(),
        2024,
        {"type": "int32", "optional": False, "name": "io.debezium.time.Year", "version": 1},
        2024,
    ),
    (
        "c_duration",
        L.micro_duration(),
        86_400_000_000,
        {
            "type": "int64",
            "optional": False,
            "name": "io.debezium.time.MicroDuration",
            "version": 1,
        },
        86_400_000_000,
    ),
    (
        "c_interval",
        L.interval(),
        "P1Y2M3DT4H5M6.78S",
        {"type": "string", "optional": False, "name": "io.debezium.time.Interval", "version": 1},
        "P1Y2M3DT4H5M6.78S",
    ),
    (
        "c_bits",
        L.bits(3),
        b"\x05",
        {
            "type": "bytes",
            "optional": False,
            "name": "io.debezium.data.Bits",
            "version": 1,
            "parameters": {"length": "3"},
        },
        "BQ==",
    ),
    (
        "c_json",
        L.json(),
        '{"k": [1, 2]}',
        {"type": "string", "optional": False, "name": "io.debezium.data.Json", "version": 1},
        '{"k": [1, 2]}',
    ),
    (
        "c_xml",
        L.xml(),
        "<a/>",
        {"type": "string", "optional": False, "name": "io.debezium.data.Xml", "version": 1},
        "<a/>",
    ),
    (
        "c_uuid",
        L.uuid(),
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        {"type": "string", "optional": False, "name": "io.debezium.data.Uuid", "version": 1},
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    ),
    (
        "c_ltree",
        L.ltree(),
        "a.b",
        {"type": "string", "optional": False, "name": "io.debezium.data.Ltree", "version": 1},
        "a.b",
    ),
    (
        "c_enum",
        L.enum(["small", "large"]),
        "large",
        {
            "type": "string",
            "optional": False,
            "name": "io.debezium.data.Enum",
            "version": 1,
            "parameters": {"allowed": "small,large"},
        },
        "large",
    ),
    (
        "c_set",
        L.enum_set(["a", "b"]),
        "a,b",
        {
            "type": "string",
            "optional": False,
            "name": "io.debezium.data.EnumSet",
            "version": 1,
            "parameters": {"allowed": "a,b"},
        },
        "a,b",
    ),
    (
        "c_geom",
        L.geometry(),
        {"wkb": b"\x01\x01", "srid": 4326},
        {
            "type": "struct",
            "fields": [
                {"type": "bytes", "optional": False, "field": "wkb"},
                {"type": "int32", "optional": True, "field": "srid"},
            ],
            "optional": False,
            "name": "io.debezium.data.geometry.Geometry",
            "version": 1,
            "doc": "Geometry",
        },
        {"wkb": "AQE=", "srid": 4326},
    ),
    (
        "c_geog",
        L.geography(),
        {"wkb": b"\x02", "srid": None},
        {
            "type": "struct",
            "fields": [
                {"type": "bytes", "optional": False, "field": "wkb"},
                {"type": "int32", "optional": True, "field": "srid"},
            ],
            "optional": False,
            "name": "io.debezium.data.geometry.Geography",
            "version": 1,
            "doc": "Geography",
        },
        {"wkb": "Ag==", "srid": None},
    ),
    (
        "c_point",
        L.point(),
        {"x": 1.0, "y": -2.5, "wkb": None, "srid": None},
        {
            "type": "struct",
            "fields": [
                {"type": "double", "optional": False, "field": "x"},
                {"type": "double", "optional": False, "field": "y"},
                {"type": "bytes", "optional": True, "field": "wkb"},
                {"type": "int32", "optional": True, "field": "srid"},
            ],
            "optional": False,
            "name": "io.debezium.data.geometry.Point",
            "version": 1,
            "doc": "Geometry (POINT)",
        },
        {"x": 1.0, "y": -2.5, "wkb": None, "srid": None},
    ),
    (
        "c_tags",
        array(STRING.as_optional()),
        ["a", None],
        {"type": "array", "items": {"type": "string", "optional": True}, "optional": False},
        ["a", None],
    ),
    (
        "c_prices",
        array(L.connect_decimal(1)),
        [D("1.5"), D("-0.1")],
        {
            "type": "array",
            "items": {
                "type": "bytes",
                "optional": False,
                "name": "org.apache.kafka.connect.data.Decimal",
                "version": 1,
                "parameters": {"scale": "1"},
            },
            "optional": False,
        },
        ["Dw==", "/w=="],
    ),
    (
        "c_hstore",
        map_of(STRING, OPTIONAL_STRING),
        {"key": "val", "none": None},
        {
            "type": "map",
            "keys": {"type": "string", "optional": False},
            "values": {"type": "string", "optional": True},
            "optional": False,
        },
        {"key": "val", "none": None},
    ),
    (
        "c_intmap",
        map_of(INT32, BYTES),
        {1: b"\x01", 2: b"\x02"},
        {
            "type": "map",
            "keys": {"type": "int32", "optional": False},
            "values": {"type": "bytes", "optional": False},
            "optional": False,
        },
        [[1, "AQ=="], [2, "Ag=="]],
    ),
]

TABLE = struct([(n, s) for n, s, *_ in COLUMNS], name="dbserver1.inventory.all_types.Value")
ROW = {n: v for n, _, v, *_ in COLUMNS}
ROW_JSON = {n: p for n, *_, p in COLUMNS}
VALUE_OPT = TABLE.as_optional()

SOURCE = struct(
    [
        ("version", STRING),
        ("connector", STRING),
        ("name", STRING),
        ("ts_ms", INT64),
        (
            "snapshot",
            primitive(
                Type.STRING,
                optional=True,
                name=L.DBZ_ENUM,
                version=1,
                parameters={"allowed": "true,last,false,incremental"},
                default="false",
            ),
        ),
        ("db", STRING),
        ("table", STRING),
    ],
    name="io.debezium.connector.postgresql.Source",
)
ENVELOPE = struct(
    [
        ("before", VALUE_OPT),
        ("after", VALUE_OPT),
        ("source", SOURCE),
        ("op", STRING),
        ("ts_ms", OPTIONAL_INT64),
    ],
    name="dbserver1.inventory.all_types.Envelope",
    version=1,
)
SOURCE_VALUE: dict[str, Any] = {
    "version": "2.5.0.Final",
    "connector": "postgresql",
    "name": "dbserver1",
    "ts_ms": 1_700_000_000_000,
    "snapshot": "false",
    "db": "inventory",
    "table": "all_types",
}
EVENT: dict[str, Any] = {
    "before": None,
    "after": ROW,
    "source": SOURCE_VALUE,
    "op": "c",
    "ts_ms": 1_700_000_000_100,
}
KEY = struct([("c_int32", INT32)], name="dbserver1.inventory.all_types.Key")

SOURCE_JSON = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "version"},
        {"type": "string", "optional": False, "field": "connector"},
        {"type": "string", "optional": False, "field": "name"},
        {"type": "int64", "optional": False, "field": "ts_ms"},
        {
            "type": "string",
            "optional": True,
            "name": "io.debezium.data.Enum",
            "version": 1,
            "parameters": {"allowed": "true,last,false,incremental"},
            "default": "false",
            "field": "snapshot",
        },
        {"type": "string", "optional": False, "field": "db"},
        {"type": "string", "optional": False, "field": "table"},
    ],
    "optional": False,
    "name": "io.debezium.connector.postgresql.Source",
    "field": "source",
}


def value_schema_json() -> dict[str, Any]:
    table = {
        "type": "struct",
        "fields": [field(js, n) for n, _, _, js, _ in COLUMNS],
        "optional": True,
        "name": "dbserver1.inventory.all_types.Value",
    }
    return {
        "type": "struct",
        "fields": [
            field(table, "before"),
            field(table, "after"),
            SOURCE_JSON,
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
        "optional": False,
        "name": "dbserver1.inventory.all_types.Envelope",
        "version": 1,
    }


@pytest.fixture
def conv() -> JsonConverter:
    return JsonConverter()


# -- golden output -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", [c[0] for c in COLUMNS])
def test_each_logical_type_matches_kafka_field_json(conv: JsonConverter, name: str) -> None:
    column = next(c for c in COLUMNS if c[0] == name)
    table = struct([(name, column[1])])
    out = parsed(conv.from_connect("t", table, {name: column[2]}, is_key=False) or b"")
    assert out == pairs(
        {
            "schema": {
                "type": "struct",
                "fields": [field(column[3], name)],
                "optional": False,
            },
            "payload": {name: column[4]},
        }
    )


def test_full_envelope_is_byte_shaped_like_kafka(conv: JsonConverter) -> None:
    data = conv.from_connect("dbserver1.inventory.all_types", ENVELOPE, EVENT, is_key=False)
    assert data is not None
    assert data.startswith(b'{"schema":{"type":"struct","fields":[{"type":"struct","fields":[')
    expected = {
        "schema": value_schema_json(),
        "payload": {
            "before": None,
            "after": ROW_JSON,
            "source": SOURCE_VALUE,
            "op": "c",
            "ts_ms": 1_700_000_000_100,
        },
    }
    assert parsed(data) == pairs(expected)
    # byte for byte: compact like Jackson, keys in the expected order
    assert data == json.dumps(expected, separators=(",", ":")).encode()


def test_decimal_field_exactly_as_in_the_brief(conv: JsonConverter) -> None:
    schema = struct([("price", L.connect_decimal(2, 10))])
    data = conv.from_connect("t", schema, {"price": D("12.34")}, is_key=False)
    assert data == (
        b'{"schema":{"type":"struct","fields":[{"type":"bytes","optional":false,'
        b'"name":"org.apache.kafka.connect.data.Decimal","version":1,'
        b'"parameters":{"scale":"2","connect.decimal.precision":"10"},"field":"price"}],'
        b'"optional":false},"payload":{"price":"BNI="}}'
    )


def test_key_record(conv: JsonConverter) -> None:
    data = conv.from_connect("t", KEY, {"c_int32": 1001}, is_key=True)
    assert data == (
        b'{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,'
        b'"field":"c_int32"}],"optional":false,"name":"dbserver1.inventory.all_types.Key"},'
        b'"payload":{"c_int32":1001}}'
    )


def test_schemas_disabled_gives_bare_payload() -> None:
    conv = JsonConverter({"schemas.enable": "false"})
    data = conv.from_connect("t", KEY, {"c_int32": 1001}, is_key=True)
    assert data == b'{"c_int32":1001}'
    envelope = conv.from_connect("t", ENVELOPE, EVENT, is_key=False)
    assert envelope is not None
    assert parsed(envelope) == pairs(
        {
            "before": None,
            "after": ROW_JSON,
            "source": SOURCE_VALUE,
            "op": "c",
            "ts_ms": 1_700_000_000_100,
        }
    )


# -- nulls, tombstones, defaults ---------------------------------------------------------------
def test_tombstone_is_none(conv: JsonConverter) -> None:
    assert conv.from_connect("t", None, None, is_key=False) is None
    assert (
        JsonConverter({"schemas.enable": False}).from_connect("t", None, None, is_key=False) is None
    )


def test_null_value_with_optional_schema_keeps_the_envelope(conv: JsonConverter) -> None:
    data = conv.from_connect("t", OPTIONAL_STRING, None, is_key=False)
    assert data == b'{"schema":{"type":"string","optional":true},"payload":null}'


def test_null_value_for_required_schema_is_an_error(conv: JsonConverter) -> None:
    with pytest.raises(ConversionError, match="required"):
        conv.from_connect("t", KEY, None, is_key=False)


def test_null_with_default_becomes_default_like_kafka(conv: JsonConverter) -> None:
    event = {**EVENT, "source": {**SOURCE_VALUE, "snapshot": None}}
    data = conv.from_connect("t", ENVELOPE, event, is_key=False)
    assert data is not None and b'"snapshot":"false"' in data
    kept = JsonConverter({"replace.null.with.default": "false"})
    data = kept.from_connect("t", ENVELOPE, event, is_key=False)
    assert data is not None and b'"snapshot":null' in data
    assert event["source"]["snapshot"] is None  # the caller's value is never mutated


def test_schemaless_value(conv: JsonConverter) -> None:
    data = conv.from_connect("t", None, {"a": b"\x01", "n": [1, 2.5]}, is_key=False)
    assert data == b'{"schema":null,"payload":{"a":"AQ==","n":[1,2.5]}}'
    bare = JsonConverter({"schemas.enable": False})
    assert bare.from_connect("t", None, {1: "x"}, is_key=False) == b'[[1,"x"]]'


# -- numbers -----------------------------------------------------------------------------------
def test_non_finite_floats_are_quoted_like_jackson(conv: JsonConverter) -> None:
    schema = struct([("a", FLOAT64), ("b", FLOAT32.as_optional()), ("c", FLOAT64), ("d", FLOAT64)])
    value = {"a": math.nan, "b": None, "c": math.inf, "d": -math.inf}
    data = JsonConverter({"schemas.enable": False}).from_connect("t", schema, value, is_key=False)
    assert data == b'{"a":"NaN","b":null,"c":"Infinity","d":"-Infinity"}'
    _, back = conv.to_connect(
        "t", conv.from_connect("t", schema, value, is_key=False), is_key=False
    )
    assert math.isnan(back["a"]) and back["c"] == math.inf and back["d"] == -math.inf


def test_decimal_is_rescaled_to_the_schema_scale(conv: JsonConverter) -> None:
    schema = struct([("p", L.connect_decimal(2))])
    short = conv.from_connect("t", schema, {"p": D("12.3")}, is_key=False)
    long = conv.from_connect("t", schema, {"p": D("12.300")}, is_key=False)
    assert short == long and short is not None and b'"p":"BM4="' in short


def test_decimal_beyond_28_digits_is_exact(conv: JsonConverter) -> None:
    schema = struct([("p", L.connect_decimal(10, 38))])
    value = D("1234567890123456789012345678.0123456789")
    data = conv.from_connect("t", schema, {"p": value}, is_key=False)
    assert data is not None
    encoded = json.loads(data)["payload"]["p"]
    unscaled = int.from_bytes(base64.b64decode(encoded), "big", signed=True)
    assert unscaled == 12345678901234567890123456780123456789
    assert conv.to_connect("t", data, is_key=False)[1] == {"p": value}


def test_decimal_fast_path_matches_the_rounding_path() -> None:
    """The exact-ratio shortcut for Decimals already at the schema scale gives the same bytes
    as the general rescaling path, and values it cannot take fall back to that path."""
    from cdc.converters.base import decimal_to_unscaled

    conv = JsonConverter({"schemas.enable": False})
    values = [
        "0",
        "-0.00",
        "0.01",
        "-0.01",
        "12.3",
        "12.345",
        "-12.355",
        "1E+3",
        "-128",
        "127.99",
        "32767.99",
        "-32768",
        "99999999.99",
        "1234567890123456789012345678901234.5678",
        "5E-7",
    ]
    for scale in (0, 2, 4):
        schema = struct([("p", L.connect_decimal(scale).as_optional())])
        for text in values:
            data = conv.from_connect("t", schema, {"p": D(text)}, is_key=False)
            expected = base64.b64encode(decimal_to_unscaled(D(text), scale)).decode()
            assert data == b'{"p":"' + expected.encode() + b'"}', (scale, text)
        for raw in (5, "1.5"):  # not a Decimal: the general path converts it
            data = conv.from_connect("t", schema, {"p": raw}, is_key=False)
            expected = base64.b64encode(decimal_to_unscaled(D(raw), scale)).decode()
            assert data == b'{"p":"' + expected.encode() + b'"}'
        with pytest.raises(ConversionError):
            conv.from_connect("t", schema, {"p": D("NaN")}, is_key=False)


def test_struct_rewrite_keeps_field_order_and_adds_missing_defaults() -> None:
    conv = JsonConverter({"schemas.enable": False})
    schema = struct(
        [
            ("a", L.connect_decimal(1)),
            ("b", STRING),
            ("c", INT32.with_(default=7)),
            ("d", FLOAT64.as_optional()),
        ]
    )
    value = {"b": "x", "a": D("1.5"), "d": math.inf}
    assert conv.from_connect("t", schema, value, is_key=False) == (
        b'{"b":"x","a":"Dw==","d":"Infinity","c":7}'
    )
    untouched = {"a": None, "b": "y", "c": 3, "d": 1.0}
    data = conv.from_connect("t", struct([("b", STRING), ("d", FLOAT64)]), untouched)
    assert data == b'{"a":null,"b":"y","c":3,"d":1.0}'


def test_inlined_nested_struct_fix_matches_the_reference_walk() -> None:
    """The generated envelope fix inlines its struct fields; on values with nulls, missing
    fields, defaults, unicode and extreme decimals it gives exactly what the base class's
    plain struct walk gives, and hands back unchanged structs as they are."""
    from cdc.converters.base import SchemaRewriter
    from cdc.converters.json import _JsonRewriter

    class _Reference(_JsonRewriter):
        _struct = SchemaRewriter._struct  # the loop the generated code replaces

    row = struct(
        [
            ("id", INT64),
            ("price", L.connect_decimal(2).as_optional()),
            ("name", STRING.as_optional()),
            ("ratio", FLOAT64.as_optional()),
        ]
    ).as_optional()
    source = struct([("lsn", INT64), ("snapshot", STRING.with_(default="false").as_optional())])
    plain = struct([("a", STRING)]).as_optional()
    envelope = struct(
        [("before", row), ("after", row), ("source", source), ("other", plain), ("op", STRING)]
    )
    fast = _JsonRewriter(numeric_decimals=False, replace_null_with_default=True).compile(envelope)
    ref = _Reference(numeric_decimals=False, replace_null_with_default=True).compile(envelope)
    assert fast is not None and ref is not None
    rows = [
        None,
        {"id": 1, "price": D("12.34"), "name": "x", "ratio": 0.5},
        {"id": -(2**63), "price": D("-99999999.99"), "name": "naïve ☃ \u0000", "ratio": None},
        {"id": 2**63 - 1, "price": None, "name": None, "ratio": math.nan},
        {"id": 3, "price": D("0.1"), "ratio": -math.inf},  # name missing
    ]
    for before in rows:
        for after in rows:
            for snapshot in (None, "true", "false"):
                value = {
                    "before": before,
                    "after": after,
                    "source": {"lsn": 7, "snapshot": snapshot},
                    "other": {"a": "é"},
                    "op": "u",
                }
                assert json.dumps(fast(value), default=str) == json.dumps(ref(value), default=str)
    unchanged = {
        "before": None,
        "after": {"id": 1, "name": "x"},
        "source": {"lsn": 1, "snapshot": "t"},
    }
    assert fast(unchanged) is unchanged
    assert fast(None) is None


def test_numeric_decimal_format() -> None:
    conv = JsonConverter({"decimal.format": "numeric"})
    schema = struct([("p", L.connect_decimal(2)), ("q", L.connect_decimal(2).as_optional())])
    data = conv.from_connect("t", schema, {"p": D("12.3"), "q": None}, is_key=False)
    assert data is not None and data.endswith(b'"payload":{"p":12.30,"q":null}}')
    schema_back, value = conv.to_connect("t", data, is_key=False)
    assert schema_back == schema and value == {"p": D("12.30"), "q": None}


def test_connect_temporal_types_accept_python_temporals(conv: JsonConverter) -> None:
    schema = struct(
        [("d", L.connect_date()), ("t", L.connect_time()), ("ts", L.connect_timestamp())]
    )
    value = {
        "d": dt.date(2022, 1, 8),
        "t": dt.time(1, 0, 0, 5000),
        "ts": dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC),
    }
    data = JsonConverter({"schemas.enable": False}).from_connect("t", schema, value, is_key=False)
    assert data == b'{"d":19000,"t":3600005,"ts":1700000000123}'


# -- round trips -------------------------------------------------------------------------------
def test_envelope_round_trip(conv: JsonConverter) -> None:
    data = conv.from_connect("t", ENVELOPE, EVENT, is_key=False)
    schema, value = conv.to_connect("t", data, is_key=False)
    assert schema == ENVELOPE
    assert value == EVENT


def test_key_round_trip_and_tombstone(conv: JsonConverter) -> None:
    data = conv.from_connect("t", KEY, {"c_int32": 7}, is_key=True)
    assert conv.to_connect("t", data, is_key=True) == (KEY, {"c_int32": 7})
    assert conv.to_connect("t", None, is_key=False) == (None, None)


def test_schemaless_round_trip() -> None:
    conv = JsonConverter({"schemas.enable": False})
    data = conv.from_connect("t", ENVELOPE, EVENT, is_key=False)
    schema, value = conv.to_connect("t", data, is_key=False)
    assert schema is None
    assert value["after"]["price"] == "BNI=" and value["after"]["c_float64"] == 0.25


def test_envelope_required_when_schemas_enabled(conv: JsonConverter) -> None:
    with pytest.raises(ConversionError, match='requires "schema" and "payload"'):
        conv.to_connect("t", b'{"id": 1}', is_key=False)


# -- caching and config ------------------------------------------------------------------------
def test_schema_json_is_computed_once_per_schema(conv: JsonConverter) -> None:
    conv.from_connect("t", ENVELOPE, EVENT, is_key=False)
    conv.from_connect("t", ENVELOPE, EVENT, is_key=False)
    assert len(conv._by_id) == 1 and len(conv._by_schema) == 1
    twin = struct([(f.name, f.schema) for f in ENVELOPE.fields], name=ENVELOPE.name, version=1)
    assert twin == ENVELOPE and twin is not ENVELOPE
    assert conv.from_connect("t", twin, EVENT, is_key=False) == conv.from_connect(
        "t", ENVELOPE, EVENT, is_key=False
    )
    assert len(conv._by_schema) == 1


def test_cache_is_bounded() -> None:
    conv = JsonConverter({"schemas.cache.size": 2})
    schemas = [struct([(f"f{i}", INT32)]) for i in range(5)]
    for i, s in enumerate(schemas):
        assert conv.from_connect("t", s, {f"f{i}": i}, is_key=False)
    assert len(conv._by_id) <= 2 and len(conv._by_schema) <= 2


def test_input_is_not_mutated(conv: JsonConverter) -> None:
    before = json.dumps(EVENT, default=repr, sort_keys=True)
    conv.from_connect("t", ENVELOPE, EVENT, is_key=False)
    assert json.dumps(EVENT, default=repr, sort_keys=True) == before


def test_factory_reads_connect_style_keys() -> None:
    conv = converter_from_config(
        {
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "key.converter": "json",
        },
        is_key=False,
    )
    assert isinstance(conv, JsonConverter) and not conv.schemas_enable
    assert isinstance(conv, Converter)
    typed: Converter = JsonConverter()  # static conformance, checked by mypy
    assert typed.from_connect("t", None, None, is_key=False) is None
    key = converter_from_config({"key.converter": "json"}, is_key=True)
    assert isinstance(key, JsonConverter) and key.schemas_enable and key.is_key
    assert isinstance(converter_from_config({}, is_key=False), JsonConverter)


def test_factory_rejects_unknown_converter() -> None:
    with pytest.raises(ValueError, match=r"'value\.converter'"):
        converter_from_config({"value.converter": "com.example.Nope"}, is_key=False)
    with pytest.raises(ValueError, match=r"schemas\.enable"):
        converter_from_config({"key.converter.schemas.enable": "maybe"}, is_key=True)
    with pytest.raises(ValueError, match=r"decimal\.format"):
        JsonConverter({"decimal.format": "hex"})
