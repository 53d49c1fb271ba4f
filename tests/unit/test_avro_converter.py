"""Avro converter: Connect → Avro schema as Confluent's AvroData writes it, Confluent wire
format, and the registry client against the in-process stand-in over real HTTP."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
from collections.abc import Iterator
from typing import Any

import fastavro
import httpx
import pytest

from cdc.converters import ConversionError, Converter, converter_from_config
from cdc.converters.avro import (
    AvroConverter,
    connect_to_avro,
    sanitize_field_name,
    scrub_name,
)
from cdc.converters.registry_server import RegistryServer
from cdc.converters.schema_registry import SchemaRegistryClient, SchemaRegistryError
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
GEOMETRY = "io.debezium.data.geometry.Geometry"


def pairs(obj: Any) -> Any:
    if isinstance(obj, dict):
        return [(k, pairs(v)) for k, v in obj.items()]
    if isinstance(obj, list):
        return [pairs(v) for v in obj]
    return obj


def meta(avro_type: str, name: str, **params: str) -> dict[str, Any]:
    node: dict[str, Any] = {"type": avro_type, "connect.version": 1}
    if params:
        node["connect.parameters"] = params
    node["connect.name"] = name
    return node


def decimal_avro(scale: int, precision: int, params: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "bytes",
        "scale": scale,
        "precision": precision,
        "connect.version": 1,
        "connect.parameters": params,
        "connect.name": "org.apache.kafka.connect.data.Decimal",
        "logicalType": "decimal",
    }


def geo_record(name: str, doc: str) -> dict[str, Any]:
    return {
        "type": "record",
        "name": name,
        "namespace": "io.debezium.data.geometry",
        "fields": [
            {"name": "wkb", "type": "bytes"},
            {"name": "srid", "type": ["null", "int"], "default": None},
        ],
        "connect.doc": doc,
        "connect.version": 1,
        "connect.name": f"io.debezium.data.geometry.{name}",
    }


# (connect field name, schema, value, expected Avro field, value as fastavro reads it back)
COLUMNS: list[tuple[str, Schema, Any, dict[str, Any], Any]] = [
    ("c_int8", INT8, -5, {"type": {"type": "int", "connect.type": "int8"}}, -5),
    ("c_int16", INT16, 300, {"type": {"type": "int", "connect.type": "int16"}}, 300),
    ("c_int32", INT32, 1001, {"type": "int"}, 1001),
    ("c_int64", INT64, 2**40, {"type": "long"}, 2**40),
    ("c_float32", FLOAT32, 1.5, {"type": "float"}, 1.5),
    ("c_float64", FLOAT64, 0.25, {"type": "double"}, 0.25),
    ("c_bool", BOOLEAN, True, {"type": "boolean"}, True),
    ("c_string", STRING, "Sally", {"type": "string"}, "Sally"),
    ("c_opt", OPTIONAL_STRING, None, {"type": ["null", "string"], "default": None}, None),
    ("c_bytes", BYTES, b"\x00\x01", {"type": "bytes"}, b"\x00\x01"),
    (
        "price",
        L.connect_decimal(2, 10),
        D("12.34"),
        {"type": decimal_avro(2, 10, {"scale": "2", "connect.decimal.precision": "10"})},
        D("12.34"),
    ),
    (
        "debt",
        L.connect_decimal(2),
        D("-1.5"),
        {"type": decimal_avro(2, 64, {"scale": "2"})},
        D("-1.50"),
    ),
    (
        "vsd",
        L.variable_scale_decimal(),
        L.variable_scale_value(D("3.141")),
        {
            "type": {
                "type": "record",
                "name": "VariableScaleDecimal",
                "namespace": "io.debezium.data",
                "fields": [{"name": "scale", "type": "int"}, {"name": "value", "type": "bytes"}],
                "connect.doc": "Variable scaled decimal",
                "connect.version": 1,
                "connect.name": "io.debezium.data.VariableScaleDecimal",
            }
        },
        {"scale": 3, "value": b"\x0c\x45"},
    ),
    (
        "c_cdate",
        L.connect_date(),
        19000,
        {"type": {**meta("int", L.CONNECT_DATE), "logicalType": "date"}},
        dt.date(2022, 1, 8),
    ),
    (
        "c_ctime",
        L.connect_time(),
        3_600_000,
        {"type": {**meta("int", L.CONNECT_TIME), "logicalType": "time-millis"}},
        dt.time(1, 0),
    ),
    (
        "c_cts",
        L.connect_timestamp(),
        1_700_000_000_123,
        {"type": {**meta("long", L.CONNECT_TIMESTAMP), "logicalType": "timestamp-millis"}},
        dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC),
    ),
    ("c_date", L.date(), 19000, {"type": meta("int", L.DBZ_DATE)}, 19000),
    ("c_time", L.time_millis(), 1234, {"type": meta("int", L.DBZ_TIME)}, 1234),
    ("c_microtime", L.micro_time(), 5, {"type": meta("long", L.DBZ_MICRO_TIME)}, 5),
    ("c_nanotime", L.nano_time(), 6, {"type": meta("long", L.DBZ_NANO_TIME)}, 6),
    ("c_ts", L.timestamp_millis(), 7, {"type": meta("long", L.DBZ_TIMESTAMP)}, 7),
    ("c_microts", L.micro_timestamp(), 8, {"type": meta("long", L.DBZ_MICRO_TIMESTAMP)}, 8),
    ("c_nanots", L.nano_timestamp(), 9, {"type": meta("long", L.DBZ_NANO_TIMESTAMP)}, 9),
    (
        "c_zts",
        L.zoned_timestamp(),
        "2024-01-01T10:00:00Z",
        {"type": meta("string", L.DBZ_ZONED_TIMESTAMP)},
        "2024-01-01T10:00:00Z",
    ),
    (
        "c_ztime",
        L.zoned_time(),
        "10:00:00Z",
        {"type": meta("string", L.DBZ_ZONED_TIME)},
        "10:00:00Z",
    ),
    ("c_year", L.year(), 2024, {"type": meta("int", L.DBZ_YEAR)}, 2024),
    ("c_duration", L.micro_duration(), 10, {"type": meta("long", L.DBZ_MICRO_DURATION)}, 10),
    ("c_interval", L.interval(), "P1D", {"type": meta("string", L.DBZ_INTERVAL)}, "P1D"),
    ("c_bits", L.bits(3), b"\x05", {"type": meta("bytes", L.DBZ_BITS, length="3")}, b"\x05"),
    ("c_json", L.json(), '{"k": 1}', {"type": meta("string", L.DBZ_JSON)}, '{"k": 1}'),
    ("c_xml", L.xml(), "<a/>", {"type": meta("string", L.DBZ_XML)}, "<a/>"),
    ("c_uuid", L.uuid(), "a0ee-11", {"type": meta("string", L.DBZ_UUID)}, "a0ee-11"),
    ("c_ltree", L.ltree(), "a.b", {"type": meta("string", L.DBZ_LTREE)}, "a.b"),
    (
        "c_enum",
        L.enum(["small", "large"]),
        "large",
        {"type": meta("string", L.DBZ_ENUM, allowed="small,large")},
        "large",
    ),
    (
        "c_set",
        L.enum_set(["a", "b"]),
        "a,b",
        {"type": meta("string", L.DBZ_ENUM_SET, allowed="a,b")},
        "a,b",
    ),
    (
        "c_geom",
        L.geometry(),
        {"wkb": b"\x01", "srid": 4326},
        {"type": geo_record("Geometry", "Geometry")},
        {"wkb": b"\x01", "srid": 4326},
    ),
    # the same named type again: a reference, fully qualified (other namespace)
    (
        "c_geom2",
        L.geometry(),
        {"wkb": b"\x02", "srid": None},
        {"type": GEOMETRY},
        {"wkb": b"\x02", "srid": None},
    ),
    (
        "c_geog",
        L.geography().as_optional(),
        None,
        {"type": ["null", geo_record("Geography", "Geography")], "default": None},
        None,
    ),
    (
        "c_point",
        L.point(),
        {"x": 1.0, "y": 2.0, "wkb": None, "srid": None},
        {
            "type": {
                "type": "record",
                "name": "Point",
                "namespace": "io.debezium.data.geometry",
                "fields": [
                    {"name": "x", "type": "double"},
                    {"name": "y", "type": "double"},
                    {"name": "wkb", "type": ["null", "bytes"], "default": None},
                    {"name": "srid", "type": ["null", "int"], "default": None},
                ],
                "connect.doc": "Geometry (POINT)",
                "connect.version": 1,
                "connect.name": "io.debezium.data.geometry.Point",
            }
        },
        {"x": 1.0, "y": 2.0, "wkb": None, "srid": None},
    ),
    (
        "c_tags",
        array(STRING.as_optional()),
        ["a", None],
        {"type": {"type": "array", "items": ["null", "string"]}},
        ["a", None],
    ),
    (
        "c_prices",
        array(L.connect_decimal(1)),
        [D("1.5"), D("-0.1")],
        {"type": {"type": "array", "items": decimal_avro(1, 64, {"scale": "1"})}},
        [D("1.5"), D("-0.1")],
    ),
    (
        "c_hstore",
        map_of(STRING, OPTIONAL_STRING),
        {"key": "val"},
        {"type": {"type": "map", "values": ["null", "string"]}},
        {"key": "val"},
    ),
    (
        "c_intmap",
        map_of(INT32, BYTES),
        {1: b"\x01"},
        {
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "MapEntry",
                    "namespace": "io.confluent.connect.avro",
                    "fields": [{"name": "key", "type": "int"}, {"name": "value", "type": "bytes"}],
                },
            }
        },
        [{"key": 1, "value": b"\x01"}],
    ),
    ("first-name", STRING, "Ann", {"type": "string"}, "Ann"),
    ("1st", INT32, 1, {"type": "int"}, 1),
]
AVRO_NAMES = {"first-name": "first_name", "1st": "_1st"}

TABLE = struct([(n, s) for n, s, *_ in COLUMNS], name="dbserver1.inventory.all_types.Value")
ROW = {n: v for n, _, v, *_ in COLUMNS}


def table_avro() -> dict[str, Any]:
    return {
        "type": "record",
        "name": "Value",
        "namespace": "dbserver1.inventory.all_types",
        "fields": [{"name": AVRO_NAMES.get(n, n), **f} for n, _, _, f, _ in COLUMNS],
        "connect.name": "dbserver1.inventory.all_types.Value",
    }


SMALL = struct(
    [("id", INT32), ("email", OPTIONAL_STRING)], name="dbserver1.inventory.customers.Value"
)
SOURCE = struct(
    [
        ("version", STRING),
        ("name", STRING),
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
    ],
    name="io.debezium.connector.postgresql.Source",
)
ENVELOPE = struct(
    [
        ("before", SMALL.as_optional()),
        ("after", SMALL.as_optional()),
        ("source", SOURCE),
        ("op", STRING),
        ("ts_ms", OPTIONAL_INT64),
    ],
    name="dbserver1.inventory.customers.Envelope",
    version=1,
)
EVENT: dict[str, Any] = {
    "before": None,
    "after": {"id": 1001, "email": "annek@noanswer.org"},
    "source": {"version": "2.5.0", "name": "dbserver1", "snapshot": "true"},
    "op": "r",
    "ts_ms": 1_700_000_000_100,
}
KEY = struct([("id", INT32)], name="dbserver1.inventory.customers.Key")


@pytest.fixture
def registry() -> Iterator[RegistryServer]:
    with RegistryServer() as server:
        yield server


@pytest.fixture
def client(registry: RegistryServer) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient(registry.url) as c:
        yield c


# -- Connect schema -> Avro schema -------------------------------------------------------------
def test_envelope_schema_has_the_confluent_shape() -> None:
    expected = {
        "type": "record",
        "name": "Envelope",
        "namespace": "dbserver1.inventory.customers",
        "fields": [
            {
                "name": "before",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": "Value",
                        "fields": [
                            {"name": "id", "type": "int"},
                            {"name": "email", "type": ["null", "string"], "default": None},
                        ],
                        "connect.name": "dbserver1.inventory.customers.Value",
                    },
                ],
                "default": None,
            },
            {"name": "after", "type": ["null", "Value"], "default": None},
            {
                "name": "source",
                "type": {
                    "type": "record",
                    "name": "Source",
                    "namespace": "io.debezium.connector.postgresql",
                    "fields": [
                        {"name": "version", "type": "string"},
                        {"name": "name", "type": "string"},
                        {
                            "name": "snapshot",
                            "type": [
                                {
                                    "type": "string",
                                    "connect.version": 1,
                                    "connect.parameters": {
                                        "allowed": "true,last,false,incremental"
                                    },
                                    "connect.default": "false",
                                    "connect.name": "io.debezium.data.Enum",
                                },
                                "null",
                            ],
                            "default": "false",
                        },
                    ],
                    "connect.name": "io.debezium.connector.postgresql.Source",
                },
            },
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"], "default": None},
        ],
        "connect.version": 1,
        "connect.name": "dbserver1.inventory.customers.Envelope",
    }
    assert pairs(connect_to_avro(ENVELOPE)) == pairs(expected)


def test_every_logical_type_maps_like_avrodata() -> None:
    avro = connect_to_avro(TABLE, sanitize_field_names=True)
    expected = table_avro()
    for got, want in zip(avro["fields"], expected["fields"], strict=True):
        assert pairs(got) == pairs(want), want["name"]
    assert pairs(avro) == pairs(expected)
    fastavro.parse_schema(avro)  # a valid Avro schema as written


def test_optional_struct_and_map_entry_names() -> None:
    unnamed = struct([("a", struct([("b", INT32)]))])
    avro = connect_to_avro(unnamed)
    assert avro["name"] == "ConnectDefault" and avro["namespace"] == "io.confluent.connect.avro"
    assert avro["fields"][0]["type"]["name"] == "ConnectDefault2"
    assert "namespace" not in avro["fields"][0]["type"]  # same namespace as the parent
    nested = struct([("m", map_of(STRING.as_optional(), INT32))], name="a.B")
    entry = connect_to_avro(nested)["fields"][0]["type"]["items"]
    assert entry["name"] == "MapEntry" and entry["namespace"] == "io.confluent.connect.avro"
    assert entry["fields"][0] == {"name": "key", "type": ["null", "string"], "default": None}


def test_conflicting_definitions_of_one_name_are_refused() -> None:
    one = struct([("x", INT32)], name="a.Dup")
    two = struct([("y", INT32)], name="a.Dup")
    with pytest.raises(ConversionError, match="redefine"):
        connect_to_avro(struct([("one", one), ("two", two)], name="a.Top"))


def test_invalid_avro_names() -> None:
    schema = struct([("ok", INT32)], name="my-server.db.t.Value")
    with pytest.raises(ConversionError, match="not a valid Avro name"):
        connect_to_avro(schema)
    assert connect_to_avro(schema, scrub_invalid_names=True)["namespace"] == "my_server.db.t"
    with pytest.raises(ConversionError, match="Field name"):
        connect_to_avro(struct([("bad-name", INT32)], name="t.V"))


def test_name_sanitisers() -> None:
    assert sanitize_field_name("first-name") == "first_name"
    assert sanitize_field_name("1st") == "_1st"
    assert sanitize_field_name("né") == "n_"
    assert sanitize_field_name("ok_1") == "ok_1"
    assert scrub_name("my-server") == "my_server"
    assert scrub_name("1a b") == "x1a_b"
    assert scrub_name("ok") == "ok"


# -- serialisation -----------------------------------------------------------------------------
def test_wire_format_and_fastavro_reads_the_values(
    registry: RegistryServer, client: SchemaRegistryClient
) -> None:
    conv = AvroConverter(client)
    data = conv.from_connect("dbserver1.inventory.all_types", TABLE, ROW, is_key=False)
    assert data is not None and data[0] == 0
    schema_id = int.from_bytes(data[1:5], "big")
    assert client.subjects() == ["dbserver1.inventory.all_types-value"]
    registered = json.loads(client.get_schema(schema_id))
    assert pairs(registered) == pairs(table_avro())
    # An independent reader with the registered schema, logical types and all.
    read = fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(registered), None)
    assert read == {AVRO_NAMES.get(n, n): v for n, *_, v in COLUMNS}


def test_round_trip_through_to_connect(client: SchemaRegistryClient) -> None:
    conv = AvroConverter(client)
    data = conv.from_connect("t", ENVELOPE, EVENT, is_key=False)
    assert conv.to_connect("t", data, is_key=False) == (ENVELOPE, EVENT)
    key = conv.from_connect("t", KEY, {"id": 1001}, is_key=True)
    assert conv.to_connect("t", key, is_key=True) == (KEY, {"id": 1001})
    assert set(client.subjects()) == {"t-key", "t-value"}


def test_all_types_round_trip(client: SchemaRegistryClient) -> None:
    conv = AvroConverter(client, sanitize_field_names=False)
    plain = struct([(n, s) for n, s, *_ in COLUMNS if n not in AVRO_NAMES], name=TABLE.name)
    row = {k: v for k, v in ROW.items() if k not in AVRO_NAMES}
    schema, value = conv.to_connect(
        "t", conv.from_connect("t", plain, row, is_key=False), is_key=False
    )
    assert schema == plain
    assert value == {**row, "debt": D("-1.50")}


def test_defaults_fill_nulls_and_optional_top_level() -> None:
    event = {**EVENT, "source": {**EVENT["source"], "snapshot": None}}
    with RegistryServer() as server, SchemaRegistryClient(server.url) as client:
        conv = AvroConverter(client)
        _, value = conv.to_connect(
            "t", conv.from_connect("t", ENVELOPE, event, is_key=False), is_key=False
        )
        assert value["source"]["snapshot"] == "false"
        keep = AvroConverter(client, ignore_default_for_nullables=True)
        _, value = keep.to_connect(
            "t", keep.from_connect("t", ENVELOPE, event, is_key=False), is_key=False
        )
        assert value["source"]["snapshot"] is None
        optional = SMALL.as_optional()
        data = conv.from_connect("o", optional, {"id": 1, "email": None}, is_key=False)
        assert conv.to_connect("o", data, is_key=False) == (optional, {"id": 1, "email": None})


def test_tombstones(client: SchemaRegistryClient) -> None:
    conv: Converter = AvroConverter(client)
    assert conv.from_connect("t", None, None, is_key=False) is None
    assert conv.from_connect("t", SMALL.as_optional(), None, is_key=False) is None
    with pytest.raises(ConversionError, match="non-optional"):
        conv.from_connect("t", KEY, None, is_key=True)
    assert conv.to_connect("t", None, is_key=False) == (None, None)
    assert client.subjects() == []
    with pytest.raises(ConversionError, match="magic"):
        conv.to_connect("t", b"\x01\x00\x00\x00\x01", is_key=False)


def test_each_schema_registers_once(registry: RegistryServer, client: SchemaRegistryClient) -> None:
    conv = AvroConverter(client)
    first = conv.from_connect("t", ENVELOPE, EVENT, is_key=False)
    calls = len(registry.state.schemas)
    twin = struct([(f.name, f.schema) for f in ENVELOPE.fields], name=ENVELOPE.name, version=1)
    for schema in (ENVELOPE, twin, ENVELOPE):
        assert conv.from_connect("t", schema, EVENT, is_key=False) == first
    assert len(registry.state.schemas) == calls == 1
    assert len(conv._by_schema) == 1


def test_auto_register_off_needs_a_registered_schema(client: SchemaRegistryClient) -> None:
    conv = AvroConverter(client, auto_register=False)
    with pytest.raises(SchemaRegistryError) as err:
        conv.from_connect("t", KEY, {"id": 1}, is_key=True)
    assert err.value.error_code == 40401
    AvroConverter(client).from_connect("t", KEY, {"id": 1}, is_key=True)
    data = conv.from_connect("t", KEY, {"id": 2}, is_key=True)
    assert conv.to_connect("t", data, is_key=True)[1] == {"id": 2}


def test_record_name_strategy(client: SchemaRegistryClient) -> None:
    conv = AvroConverter(
        client, subject_name_strategy="io.confluent.kafka.serializers.subject.RecordNameStrategy"
    )
    conv.from_connect("t", KEY, {"id": 1}, is_key=True)
    assert client.subjects() == ["dbserver1.inventory.customers.Key"]


def test_factory_builds_avro(registry: RegistryServer) -> None:
    cfg = {
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": registry.url,
        "key.converter": "avro",
        "key.converter.schema.registry.url": registry.url,
    }
    value_conv = converter_from_config(cfg, is_key=False)
    key_conv = converter_from_config(cfg, is_key=True)
    assert isinstance(value_conv, AvroConverter) and isinstance(key_conv, AvroConverter)
    try:
        key_conv.from_connect("t", KEY, {"id": 1}, is_key=True)
        assert value_conv.registry.subjects() == ["t-key"]
    finally:
        value_conv.close()
        key_conv.close()
    with pytest.raises(ValueError, match=r"schema\.registry\.url"):
        converter_from_config({"value.converter": "avro"}, is_key=False)


# -- the registry over HTTP --------------------------------------------------------------------
def test_registry_end_to_end(registry: RegistryServer, client: SchemaRegistryClient) -> None:
    text = json.dumps(connect_to_avro(KEY))
    spaced = json.dumps(connect_to_avro(KEY), indent=2)
    first = client.register("a-key", text)
    assert client.register("a-key", spaced) == first  # same schema, same id
    assert client.register("b-key", text) == first  # ids are global
    with SchemaRegistryClient(registry.url) as fresh:  # not from the cache: the server's copy
        assert fresh.get_schema(first) == json.dumps(json.loads(text), separators=(",", ":"))
    assert client.subjects() == ["a-key", "b-key"]
    assert client.versions("a-key") == [1]
    latest = client.latest("a-key")
    assert latest == {
        "subject": "a-key",
        "version": 1,
        "id": first,
        "schema": client.get_schema(first),
    }
    assert client.lookup("b-key", text)["version"] == 1
    # a new optional field is BACKWARD compatible; a new required one is not
    grown = json.dumps(
        connect_to_avro(struct([("id", INT32), ("tag", OPTIONAL_STRING)], name=KEY.name))
    )
    assert client.is_compatible("a-key", grown)
    assert client.register("a-key", grown) == first + 1
    assert client.versions("a-key") == [1, 2]
    broken = json.dumps(connect_to_avro(struct([("id", INT32), ("req", STRING)], name=KEY.name)))
    assert not client.is_compatible("a-key", broken)
    with pytest.raises(SchemaRegistryError) as err:
        client.register("a-key", broken)
    assert err.value.status == 409
    assert client.get_compatibility() == "BACKWARD"
    assert client.set_compatibility("NONE", "a-key") == "NONE"
    assert client.get_compatibility("a-key") == "NONE"
    assert client.get_compatibility("b-key") == "BACKWARD"
    assert client.register("a-key", broken) == first + 2
    assert client.delete_subject("b-key") == [1]
    assert client.subjects() == ["a-key"]


def test_registry_error_bodies(registry: RegistryServer) -> None:
    with httpx.Client(base_url=registry.url) as http:
        missing = http.get("/subjects/nope/versions/latest")
        assert missing.status_code == 404
        assert missing.headers["content-type"] == "application/vnd.schemaregistry.v1+json"
        assert missing.json() == {"error_code": 40401, "message": "Subject 'nope' not found."}
        unknown_id = http.get("/schemas/ids/99")
        assert unknown_id.status_code == 404 and unknown_id.json()["error_code"] == 40403
        bad = http.post("/subjects/x/versions", json={"schema": '{"type": "nonsense"}'})
        assert bad.status_code == 422 and bad.json()["error_code"] == 42201
        http.post("/subjects/x/versions", json={"schema": '"int"'})
        version = http.get("/subjects/x/versions/7")
        assert version.status_code == 404 and version.json()["error_code"] == 40402
        level = http.put("/config", json={"compatibility": "SIDEWAYS"})
        assert level.status_code == 422 and level.json()["error_code"] == 42203
        no_level = http.get("/config/x")
        assert no_level.status_code == 404 and no_level.json()["error_code"] == 40408
        assert http.get("/nowhere").json() == {"error_code": 404, "message": "HTTP 404 Not Found"}


def test_client_raises_typed_errors(client: SchemaRegistryClient) -> None:
    with pytest.raises(SchemaRegistryError) as err:
        client.latest("nope")
    assert (err.value.status, err.value.error_code) == (404, 40401)
    with pytest.raises(SchemaRegistryError) as err:
        client.get_schema(123)
    assert err.value.error_code == 40403
