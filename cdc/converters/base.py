"""What every converter shares: the ``Converter`` protocol, the config helpers, and the
schema-directed value rewriter both the JSON and the Avro converter are built on.

Connect values are plain Python (see ``cdc.schema.model``), and almost all of them can go to
orjson or fastavro untouched. Only a few schema positions need rewriting (a ``Decimal``, a map
with non-string keys, a null that must become the schema default, ...). ``SchemaRewriter``
therefore compiles, once per schema, a function that visits exactly those positions and copies a
container only when something inside it changed; schemas with nothing to rewrite compile to
``None`` and the converter hands the value over as it is.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from cdc.schema.logical import (
    CONNECT_DATE,
    CONNECT_DECIMAL,
    CONNECT_TIME,
    CONNECT_TIMESTAMP,
    DECIMAL_SCALE,
    signed_bytes,
)
from cdc.schema.model import Schema, Type

Fix = Callable[[Any], Any]

JSON_CONVERTER_CLASS = "org.apache.kafka.connect.json.JsonConverter"
AVRO_CONVERTER_CLASS = "io.confluent.connect.avro.AvroConverter"
STRING_CONVERTER_CLASS = "org.apache.kafka.connect.storage.StringConverter"
KAFKA_CONVERTERS = "org.apache.kafka.connect.converters."
#: Kafka's own converters (``cdc.converters.kafka_simple``)
SIMPLE_CONVERTER_CLASSES = (
    STRING_CONVERTER_CLASS,
    *(
        KAFKA_CONVERTERS + name
        for name in (
            "ByteArrayConverter",
            "BooleanConverter",
            "ShortConverter",
            "IntegerConverter",
            "LongConverter",
            "FloatConverter",
            "DoubleConverter",
        )
    ),
)


class ConversionError(ValueError):
    """A value does not fit its schema, or bytes cannot be read back (Kafka's DataException)."""


@runtime_checkable
class Converter(Protocol):
    """Kafka Connect's ``Converter``: Connect data to record bytes and back.

    ``is_key`` at call time overrides the side the converter was configured for; the Avro
    converter needs it to pick the ``-key`` / ``-value`` subject.
    """

    def from_connect(
        self, topic: str, schema: Schema | None, value: Any, *, is_key: bool
    ) -> bytes | None: ...

    def to_connect(
        self, topic: str, data: bytes | None, *, is_key: bool
    ) -> tuple[Schema | None, Any]: ...


# -- config ------------------------------------------------------------------------------------
class SettingError(ValueError):
    """A converter setting that cannot be used. ``key`` is its name inside the converter's
    namespace; :func:`cdc.converters.factory.converter_from_config` puts the
    ``key.converter.`` / ``value.converter.`` prefix back, so the user reads the key they
    wrote."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"'{key}' {reason}" if key else reason)
        self.key = key
        self.reason = reason


def config_bool(cfg: Mapping[str, Any], key: str, default: bool) -> bool:
    """Connect configs arrive as YAML/JSON/properties, so booleans may be real or strings."""
    raw = cfg.get(key, default)
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise SettingError(key, f"must be true or false, got {raw!r}")


def config_int(cfg: Mapping[str, Any], key: str, default: int) -> int:
    raw = cfg.get(key, default)
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise SettingError(key, f"must be an integer, got {raw!r}") from None


# -- decimals ----------------------------------------------------------------------------------
# The default context keeps 28 digits, which would silently round NUMERIC(38, x) values.
_EXACT = decimal.Context(
    prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[]
)
_ROUND = decimal.ROUND_HALF_UP


def decimal_scale(schema: Schema) -> int:
    params = schema.parameters or {}
    try:
        return int(params[DECIMAL_SCALE])
    except (KeyError, ValueError):
        raise ConversionError(
            f"Decimal schema {schema.name!r} needs an integer '{DECIMAL_SCALE}' parameter"
        ) from None


def decimal_to_unscaled(value: decimal.Decimal, scale: int) -> bytes:
    """Big-endian two's complement of the unscaled value: Connect's ``Decimal.fromLogical``.

    Kafka rejects a value whose scale differs from the schema's; a Python ``Decimal`` rarely
    carries the column's exact exponent, so it is rescaled (half-up) instead.
    """
    if not isinstance(value, decimal.Decimal):
        if isinstance(value, int | str):
            value = decimal.Decimal(value)
        else:
            raise ConversionError(f"Decimal field expects decimal.Decimal, got {type(value)}")
    if not value.is_finite():
        raise ConversionError(f"Decimal field cannot carry {value}")
    unscaled = int(value.scaleb(scale, _EXACT).to_integral_value(_ROUND, _EXACT))
    return signed_bytes(unscaled)


def unscaled_to_decimal(data: bytes, scale: int) -> decimal.Decimal:
    unscaled = int.from_bytes(data, "big", signed=True)
    return decimal.Decimal(unscaled).scaleb(-scale, _EXACT)


def quantize(value: decimal.Decimal, scale: int) -> decimal.Decimal:
    """The value at exactly ``scale`` fractional digits (what the unscaled bytes would carry)."""
    return unscaled_to_decimal(decimal_to_unscaled(value, scale), scale)


# -- Connect's own temporal logical types ------------------------------------------------------
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _date_days(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        value = value.date()
    if isinstance(value, dt.date):
        return (value - _EPOCH_DATE).days
    return value


def _time_millis(value: Any) -> Any:
    if isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + (
            value.microsecond // 1000
        )
    return value


def _timestamp_millis(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        delta = aware - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    return value


_TEMPORAL: dict[str, Fix] = {
    CONNECT_DATE: _date_days,
    CONNECT_TIME: _time_millis,
    CONNECT_TIMESTAMP: _timestamp_millis,
}


def temporal_fix(schema: Schema) -> Fix | None:
    """Java hands Connect's Date/Time/Timestamp over as ``java.util.Date``; tidemark connectors
    emit the encoded int already, but a ``date``/``time``/``datetime`` is accepted too."""
    if schema.name is None:
        return None
    return _TEMPORAL.get(schema.name)


def is_connect_decimal(schema: Schema) -> bool:
    return schema.type is Type.BYTES and schema.name == CONNECT_DECIMAL


# -- the rewriter ------------------------------------------------------------------------------
class SchemaRewriter:
    """Compiles a schema into a value-rewriting function, or ``None`` when nothing changes.

    Subclasses say what a leaf becomes (``leaf``), whether a map stays a map
    (``map_as_object``), what one entry of a list-encoded map looks like (``map_entry``) and
    what a struct field is called on the wire (``field_name``).
    """

    def __init__(self, *, replace_null_with_default: bool) -> None:
        self.replace_null_with_default = replace_null_with_default

    def leaf(self, schema: Schema) -> Fix | None:
        return None

    def map_as_object(self, schema: Schema) -> bool:
        assert schema.key_schema is not None
        return schema.key_schema.type is Type.STRING

    def map_entry(self, key: Any, value: Any) -> Any:
        return [key, value]

    def field_name(self, name: str) -> str:
        return name

    def compile(self, schema: Schema) -> Fix | None:
        if schema.type is Type.STRUCT:
            inner = self._struct(schema)
        elif schema.type is Type.ARRAY:
            inner = self._array(schema)
        elif schema.type is Type.MAP:
            inner = self._map(schema)
        else:
            inner = self.leaf(schema)
        if schema.default is None or not self.replace_null_with_default:
            return inner
        return _with_default(inner, inner(schema.default) if inner else schema.default)

    def _struct(self, schema: Schema) -> Fix | None:
        plan = [(f.name, self.field_name(f.name), self.compile(f.schema)) for f in schema.fields]
        if any(name != out for name, out, _ in plan):
            return _renaming_struct([(n, o, fx or _same) for n, o, fx in plan])
        active = tuple((name, fx) for name, _, fx in plan if fx is not None)
        return _struct_fix(active) if active else None

    def _array(self, schema: Schema) -> Fix | None:
        assert schema.value_schema is not None
        item = self.compile(schema.value_schema)
        if item is None:
            return None

        def fix_array(value: Any) -> Any:
            return None if value is None else [item(v) for v in value]

        return fix_array

    def _map(self, schema: Schema) -> Fix | None:
        assert schema.key_schema is not None and schema.value_schema is not None
        compiled = self.compile(schema.value_schema)
        if self.map_as_object(schema):
            if compiled is None:
                return None
            each = compiled

            def fix_object(value: Any) -> Any:
                return None if value is None else {k: each(v) for k, v in value.items()}

            return fix_object
        key = self.compile(schema.key_schema) or _same
        val = compiled or _same
        entry = self.map_entry

        def fix_pairs(value: Any) -> Any:
            if value is None:
                return None
            return [entry(key(k), val(v)) for k, v in value.items()]

        return fix_pairs


def _same(value: Any) -> Any:
    return value


def _with_default(inner: Fix | None, default: Any) -> Fix:
    if inner is None:

        def fill(value: Any) -> Any:
            return default if value is None else value

        return fill

    def fill_then_fix(value: Any) -> Any:
        return default if value is None else inner(value)

    return fill_then_fix


def _struct_fix(active: tuple[tuple[str, Fix], ...]) -> Fix:
    def fix_struct(value: Any) -> Any:
        if value is None:
            return None
        out = None
        for name, fx in active:
            old = value.get(name)
            new = fx(old)
            if new is not old:
                if out is None:
                    out = dict(value)
                out[name] = new
        return value if out is None else out

    return fix_struct


def _renaming_struct(plan: list[tuple[str, str, Fix]]) -> Fix:
    def rename_struct(value: Any) -> Any:
        if value is None:
            return None
        return {out: fx(value.get(name)) for name, out, fx in plan}

    return rename_struct
