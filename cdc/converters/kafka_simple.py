"""The plain converters Kafka Connect ships: ``StringConverter``, ``ByteArrayConverter`` and the
number and boolean converters (``org.apache.kafka.connect.converters.*``).

Debezium deployments use them mostly for keys: ``key.converter=...StringConverter`` after an
``ExtractField$Key`` gives plain-text keys, ``LongConverter`` an 8-byte key a Kafka Streams
application reads with ``Serdes.Long()``. A config that names one must work unchanged and write
the same bytes, or consumers built against Debezium's topics break on the switch; so each
converter here writes what Kafka's class writes, checked against a real Kafka Connect worker
(``tests/integration/test_converter_parity.py``):

* ``StringConverter`` writes the value's Java ``toString()`` (:func:`java_string`) in
  ``converter.encoding`` (default UTF-8). For a struct that is Connect's ``Struct{a=1,b=x}``
  (null fields left out), which is what a Debezium key without ``ExtractField`` becomes.
* ``ByteArrayConverter`` passes bytes through and refuses anything else, as Kafka does.
* ``Short``/``Integer``/``Long``/``Float``/``Double``/``BooleanConverter`` write the big-endian
  bytes of Kafka's serializers, and refuse a value whose Connect type is another (Java's cast
  fails: an ``int32`` column through ``LongConverter`` is an error there too).

Reading back (``to_connect``) gives the optional schema Kafka gives: the apply job and the
tests use it.
"""

from __future__ import annotations

import codecs
import datetime as dt
import decimal
import struct
from collections.abc import Callable, Mapping
from typing import Any

from cdc.converters.base import (
    KAFKA_CONVERTERS,
    STRING_CONVERTER_CLASS,
    ConversionError,
    SettingError,
    decimal_scale,
    quantize,
)
from cdc.schema import logical
from cdc.schema.model import Schema, Type, primitive
from cdc.transforms.java_text import java_float_text

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MS_PER_DAY = 86_400_000


def _date_text(millis: int) -> str:
    """``java.util.Date.toString`` in a JVM whose zone is UTC: ``Thu Jan 01 00:00:00 UTC 1970``."""
    t = _EPOCH + dt.timedelta(milliseconds=millis)
    return (
        f"{_DAYS[t.weekday()]} {_MONTHS[t.month - 1]} {t.day:02d} "
        f"{t.hour:02d}:{t.minute:02d}:{t.second:02d} UTC {t.year}"
    )


def _decimal_text(schema: Schema, value: Any) -> str:
    """``BigDecimal.toString`` at the schema's scale. Python's ``Decimal.__str__`` follows the
    same to-scientific-string rule (plain unless the exponent is positive or the adjusted
    exponent is below -6), so the digits and exponent are all that must agree."""
    return str(quantize(decimal.Decimal(value), decimal_scale(schema)))


def java_string(schema: Schema | None, value: Any) -> str:
    """``value.toString()`` for the Java object Connect holds for ``value`` under ``schema``.

    Bytes are the ``ByteBuffer`` Debezium's converters deliver, so they print as Java prints a
    heap buffer (``java.nio.HeapByteBuffer[pos=0 lim=3 cap=3]``: not their content, as in
    Kafka). Connect's ``Date``/``Time``/``Timestamp`` print as ``java.util.Date`` does in a
    JVM running in UTC. A map prints in its insertion order (a Java ``HashMap`` prints in hash
    order, which Connect does not fix)."""
    if value is None:
        return "null"
    if schema is None:
        return _schemaless_string(value)
    name = schema.name
    if name == logical.CONNECT_DECIMAL:
        return _decimal_text(schema, value)
    if name == logical.CONNECT_TIMESTAMP or name == logical.CONNECT_TIME:
        return _date_text(_millis(value))
    if name == logical.CONNECT_DATE:
        return _date_text(_days(value) * _MS_PER_DAY)
    kind = schema.type
    if kind is Type.STRING:
        return str(value)
    if kind is Type.BOOLEAN:
        return "true" if value else "false"
    if kind in (Type.INT8, Type.INT16, Type.INT32, Type.INT64):
        return str(int(value))
    if kind is Type.FLOAT64:
        return java_float_text(float(value))
    if kind is Type.FLOAT32:
        return java_float_text(float(value), float32=True)
    if kind is Type.BYTES:
        n = len(value)
        return f"java.nio.HeapByteBuffer[pos=0 lim={n} cap={n}]"
    if kind is Type.STRUCT:
        parts = []
        for field in schema.fields:
            v = value.get(field.name)
            if v is not None:
                parts.append(f"{field.name}={java_string(field.schema, v)}")
        return "Struct{" + ",".join(parts) + "}"
    if kind is Type.ARRAY:
        items = schema.value_schema
        return "[" + ", ".join(java_string(items, v) for v in value) + "]"
    if kind is Type.MAP:
        ks, vs = schema.key_schema, schema.value_schema
        pairs = (f"{java_string(ks, k)}={java_string(vs, v)}" for k, v in value.items())
        return "{" + ", ".join(pairs) + "}"
    return str(value)


def _millis(value: Any) -> int:
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return (aware - _EPOCH) // dt.timedelta(milliseconds=1)
    if isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + (
            value.microsecond // 1000
        )
    return int(value)


def _days(value: Any) -> int:
    if isinstance(value, dt.datetime):
        value = value.date()
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    return int(value)


def _schemaless_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_float_text(value)
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(
                f"{_schemaless_string(k)}={_schemaless_string(v)}" for k, v in value.items()
            )
            + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(_schemaless_string(v) for v in value) + "]"
    if value is None:
        return "null"
    return str(value)


class StringConverter:
    """``org.apache.kafka.connect.storage.StringConverter``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        encoding = str(config.get("converter.encoding") or "UTF8").strip()
        try:
            self.encoding = codecs.lookup(encoding).name
        except LookupError:
            raise SettingError(
                "converter.encoding", f"names no character set: {encoding!r}"
            ) from None

    def from_connect(
        self, topic: str, schema: Schema | None, value: Any, *, is_key: bool
    ) -> bytes | None:
        if value is None:
            return None
        # Java's String.getBytes writes '?' for what the charset cannot hold
        return java_string(schema, value).encode(self.encoding, errors="replace")

    def to_connect(
        self, topic: str, data: bytes | None, *, is_key: bool
    ) -> tuple[Schema | None, Any]:
        text = None if data is None else data.decode(self.encoding, errors="replace")
        return primitive(Type.STRING, optional=True), text


class ByteArrayConverter:
    """``org.apache.kafka.connect.converters.ByteArrayConverter``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        del config

    def from_connect(
        self, topic: str, schema: Schema | None, value: Any, *, is_key: bool
    ) -> bytes | None:
        if schema is not None and schema.type is not Type.BYTES:
            raise ConversionError(
                f"Invalid schema type for ByteArrayConverter: {schema.type.value.upper()}"
            )
        if value is not None and not isinstance(value, bytes | bytearray | memoryview):
            raise ConversionError(
                f"ByteArrayConverter is not compatible with objects of type {type(value).__name__}"
            )
        return None if value is None else bytes(value)

    def to_connect(
        self, topic: str, data: bytes | None, *, is_key: bool
    ) -> tuple[Schema | None, Any]:
        return primitive(Type.BYTES, optional=True), data


_Encode = Callable[[Any], bytes]
_Decode = Callable[[bytes], Any]


def _packer(fmt: str) -> tuple[_Encode, _Decode]:
    s = struct.Struct(fmt)

    def decode(data: bytes) -> Any:
        if len(data) != s.size:
            raise ConversionError(f"Size of data received by {fmt!r} deserializer is not {s.size}")
        return s.unpack(data)[0]

    return s.pack, decode


#: converter class -> (Kafka's type name, the Connect type it takes, encode, decode)
_NUMBERS: dict[str, tuple[str, Type, _Encode, _Decode]] = {
    "ShortConverter": ("short", Type.INT16, *_packer(">h")),
    "IntegerConverter": ("integer", Type.INT32, *_packer(">i")),
    "LongConverter": ("long", Type.INT64, *_packer(">q")),
    "FloatConverter": ("float", Type.FLOAT32, *_packer(">f")),
    "DoubleConverter": ("double", Type.FLOAT64, *_packer(">d")),
}


class NumberConverter:
    """``org.apache.kafka.connect.converters.<Short|Integer|Long|Float|Double>Converter``.

    Kafka casts the value to the serializer's Java type, so only the Connect type it holds
    passes (a Connect ``Timestamp``, a ``java.util.Date``, does not pass ``LongConverter``)."""

    def __init__(self, name: str) -> None:
        self.type_name, self.type, self._encode, self._decode = _NUMBERS[name]

    def from_connect(
        self, topic: str, schema: Schema | None, value: Any, *, is_key: bool
    ) -> bytes | None:
        if value is None:
            return None
        held = _java_type(schema, value)
        if held is not self.type:
            java = _JAVA_CLASS.get(held, held.value) if isinstance(held, Type) else held
            raise ConversionError(
                f"Failed to serialize to {self.type_name} (was {java}): "
                f"a {self.type_name} converter takes Connect {self.type.value} values"
            )
        return self._encode(value)

    def to_connect(
        self, topic: str, data: bytes | None, *, is_key: bool
    ) -> tuple[Schema | None, Any]:
        return primitive(self.type, optional=True), None if data is None else self._decode(data)


class BooleanConverter:
    """``org.apache.kafka.connect.converters.BooleanConverter``: one byte, 1 or 0."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        del config

    def from_connect(
        self, topic: str, schema: Schema | None, value: Any, *, is_key: bool
    ) -> bytes | None:
        if schema is not None and schema.type is not Type.BOOLEAN:
            raise ConversionError(
                f"Invalid schema type for BooleanConverter: {schema.type.value.upper()}"
            )
        if value is None:
            return None
        if not isinstance(value, bool):
            raise ConversionError(
                f"BooleanConverter is not compatible with objects of type {type(value).__name__}"
            )
        return b"\x01" if value else b"\x00"

    def to_connect(
        self, topic: str, data: bytes | None, *, is_key: bool
    ) -> tuple[Schema | None, Any]:
        if data is None:
            return primitive(Type.BOOLEAN, optional=True), None
        if len(data) != 1:
            raise ConversionError("Size of data received by BooleanDeserializer is not 1")
        return primitive(Type.BOOLEAN, optional=True), data != b"\x00"


_JAVA_CLASS = {
    Type.INT8: "class java.lang.Byte",
    Type.INT16: "class java.lang.Short",
    Type.INT32: "class java.lang.Integer",
    Type.INT64: "class java.lang.Long",
    Type.FLOAT32: "class java.lang.Float",
    Type.FLOAT64: "class java.lang.Double",
    Type.BOOLEAN: "class java.lang.Boolean",
    Type.STRING: "class java.lang.String",
    Type.BYTES: "class java.nio.HeapByteBuffer",
    Type.STRUCT: "class org.apache.kafka.connect.data.Struct",
    Type.ARRAY: "class java.util.ArrayList",
    Type.MAP: "class java.util.HashMap",
}


def _java_type(schema: Schema | None, value: Any) -> Type | str:
    """The Connect type whose Java class the value has: its schema's, except for the logical
    types held as other classes (``java.util.Date``, ``BigDecimal``)."""
    if schema is None:
        if isinstance(value, bool):
            return Type.BOOLEAN
        if isinstance(value, int):
            return Type.INT64
        if isinstance(value, float):
            return Type.FLOAT64
        return type(value).__name__
    if schema.name in (logical.CONNECT_DATE, logical.CONNECT_TIME, logical.CONNECT_TIMESTAMP):
        return "class java.util.Date"
    if schema.name == logical.CONNECT_DECIMAL:
        return "class java.math.BigDecimal"
    return schema.type


def simple_converter(name: str, config: Mapping[str, Any]) -> Any | None:
    """The converter a Kafka class name names, or None when it is none of these."""
    if name == STRING_CONVERTER_CLASS:
        return StringConverter(config)
    if not name.startswith(KAFKA_CONVERTERS):
        return None
    short = name[len(KAFKA_CONVERTERS) :]
    if short == "ByteArrayConverter":
        return ByteArrayConverter(config)
    if short == "BooleanConverter":
        return BooleanConverter(config)
    if short in _NUMBERS:
        return NumberConverter(short)
    return None
