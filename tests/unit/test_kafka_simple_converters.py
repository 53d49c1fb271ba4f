"""Kafka's plain converters (``cdc/converters/kafka_simple.py``): the cases the Kafka Connect
comparison (``tests/integration/test_converter_parity.py``) does not reach: error paths,
Connect's date types, encodings and reading back. Expected texts are Java's documented
``toString`` forms."""

from __future__ import annotations

import decimal
import struct

import pytest

from cdc.converters import ConversionError
from cdc.converters.factory import converter_from_config
from cdc.converters.kafka_simple import java_string
from cdc.schema import logical
from cdc.schema.model import (
    BOOLEAN,
    BYTES,
    FLOAT32,
    FLOAT64,
    INT16,
    INT32,
    INT64,
    STRING,
    Type,
    array,
    map_of,
)
from cdc.schema.model import (
    struct as struct_of,
)

KAFKA = "org.apache.kafka.connect.converters."


def converter(name: str, **config: str):  # type: ignore[no-untyped-def]
    return converter_from_config(
        {"value.converter": name, **{f"value.converter.{k}": v for k, v in config.items()}},
        is_key=False,
    )


@pytest.mark.parametrize(
    ("schema", "value", "text"),
    [
        (logical.connect_decimal(4), decimal.Decimal("12.5"), "12.5000"),
        (logical.connect_decimal(7), decimal.Decimal("0.0000001"), "1E-7"),
        (logical.connect_decimal(0), decimal.Decimal("-42"), "-42"),
        (FLOAT64, 1e10, "1.0E10"),
        (FLOAT64, -0.0, "-0.0"),
        (FLOAT32, 2.5, "2.5"),
        (FLOAT64, float("nan"), "NaN"),
        (BYTES, b"\x00\xff\x10", "java.nio.HeapByteBuffer[pos=0 lim=3 cap=3]"),
        (logical.connect_timestamp(), 0, "Thu Jan 01 00:00:00 UTC 1970"),
        (logical.connect_date(), 19727, "Fri Jan 05 00:00:00 UTC 2024"),
        (array(STRING), ["a", "b c", None], "[a, b c, null]"),
        (map_of(STRING, INT32), {"k": 1, "j": 2}, "{k=1, j=2}"),
        (
            struct_of([("id", INT32), ("name", STRING.as_optional()), ("ok", BOOLEAN)]),
            {"id": 1, "name": None, "ok": True},
            "Struct{id=1,ok=true}",
        ),
    ],
)
def test_java_string_is_java_to_string(schema, value, text) -> None:  # type: ignore[no-untyped-def]
    assert java_string(schema, value) == text


def test_string_converter_encodes_in_the_configured_charset_and_reads_back() -> None:
    latin = converter(
        "org.apache.kafka.connect.storage.StringConverter", **{"converter.encoding": "ISO-8859-1"}
    )
    assert latin.from_connect("t", STRING, "héllo €", is_key=False) == "héllo ?".encode("latin-1")
    assert latin.from_connect("t", STRING, None, is_key=False) is None
    schema, text = latin.to_connect("t", b"h\xe9", is_key=False)
    assert text == "hé" and schema is not None and schema.type is Type.STRING and schema.optional
    with pytest.raises(ValueError, match=r"converter\.encoding"):
        converter(
            "org.apache.kafka.connect.storage.StringConverter", **{"converter.encoding": "nope"}
        )


@pytest.mark.parametrize(
    ("name", "schema", "value", "raw"),
    [
        ("LongConverter", INT64, -5000000000, struct.pack(">q", -5000000000)),
        ("IntegerConverter", INT32, -1, b"\xff\xff\xff\xff"),
        ("ShortConverter", INT16, 7, b"\x00\x07"),
        ("DoubleConverter", FLOAT64, 1.5, struct.pack(">d", 1.5)),
        ("FloatConverter", FLOAT32, 2.5, struct.pack(">f", 2.5)),
    ],
)
def test_number_converters_write_kafka_serializer_bytes_and_read_them_back(  # type: ignore[no-untyped-def]
    name, schema, value, raw
) -> None:
    c = converter(KAFKA + name)
    assert c.from_connect("t", schema, value, is_key=False) == raw
    back_schema, back = c.to_connect("t", raw, is_key=False)
    assert back == value and back_schema is not None and back_schema.optional


def test_a_number_converter_refuses_another_connect_type_as_java_casts() -> None:
    with pytest.raises(
        ConversionError, match=r"Failed to serialize to long \(was class java.lang.Integer\)"
    ):
        converter(KAFKA + "LongConverter").from_connect("t", INT32, 5, is_key=False)
    with pytest.raises(ConversionError, match=r"was class java.util.Date"):
        converter(KAFKA + "LongConverter").from_connect(
            "t", logical.connect_timestamp(), 5, is_key=False
        )
    with pytest.raises(ConversionError, match="deserializer is not 8"):
        converter(KAFKA + "LongConverter").to_connect("t", b"\x00", is_key=False)


def test_byte_array_and_boolean_converters_refuse_other_types() -> None:
    raw = converter(KAFKA + "ByteArrayConverter")
    assert raw.from_connect("t", BYTES, b"\x01", is_key=False) == b"\x01"
    assert raw.from_connect("t", None, None, is_key=False) is None
    with pytest.raises(ConversionError, match="Invalid schema type for ByteArrayConverter: STRING"):
        raw.from_connect("t", STRING, "x", is_key=False)
    flag = converter(KAFKA + "BooleanConverter")
    assert flag.from_connect("t", BOOLEAN, True, is_key=False) == b"\x01"
    assert flag.to_connect("t", b"\x00", is_key=False)[1] is False
    with pytest.raises(ConversionError, match="Invalid schema type for BooleanConverter: INT32"):
        flag.from_connect("t", INT32, 1, is_key=False)


def test_an_unknown_converter_names_the_ones_there_are() -> None:
    with pytest.raises(ValueError, match="StringConverter"):
        converter("com.example.NopeConverter")
