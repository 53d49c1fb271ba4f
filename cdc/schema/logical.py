"""The semantic (logical) types of Kafka Connect and Debezium, as schema constructors.

The names and encodings are the seed's (catalogue §1.4). Connectors pick one of these for each
column and convert the driver's value into the literal representation named here; converters
then only need to know the literal type (plus the one ``Decimal`` special case).
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from typing import Any

from cdc.schema.model import BYTES, FLOAT64, INT32, Schema, Type, primitive, struct

# -- names -------------------------------------------------------------------------------------
CONNECT_DECIMAL = "org.apache.kafka.connect.data.Decimal"
CONNECT_DATE = "org.apache.kafka.connect.data.Date"
CONNECT_TIME = "org.apache.kafka.connect.data.Time"
CONNECT_TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
DBZ_DATE = "io.debezium.time.Date"
DBZ_TIME = "io.debezium.time.Time"
DBZ_MICRO_TIME = "io.debezium.time.MicroTime"
DBZ_NANO_TIME = "io.debezium.time.NanoTime"
DBZ_TIMESTAMP = "io.debezium.time.Timestamp"
DBZ_MICRO_TIMESTAMP = "io.debezium.time.MicroTimestamp"
DBZ_NANO_TIMESTAMP = "io.debezium.time.NanoTimestamp"
DBZ_ZONED_TIMESTAMP = "io.debezium.time.ZonedTimestamp"
DBZ_ZONED_TIME = "io.debezium.time.ZonedTime"
DBZ_YEAR = "io.debezium.time.Year"
DBZ_MICRO_DURATION = "io.debezium.time.MicroDuration"
DBZ_INTERVAL = "io.debezium.time.Interval"
DBZ_BITS = "io.debezium.data.Bits"
DBZ_JSON = "io.debezium.data.Json"
DBZ_XML = "io.debezium.data.Xml"
DBZ_UUID = "io.debezium.data.Uuid"
DBZ_LTREE = "io.debezium.data.Ltree"
DBZ_ENUM = "io.debezium.data.Enum"
DBZ_ENUM_SET = "io.debezium.data.EnumSet"
DBZ_VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
DBZ_GEOMETRY = "io.debezium.data.geometry.Geometry"
DBZ_GEOGRAPHY = "io.debezium.data.geometry.Geography"
DBZ_POINT = "io.debezium.data.geometry.Point"

DECIMAL_SCALE = "scale"
DECIMAL_PRECISION = "connect.decimal.precision"


def _named(type_: Type, name: str, **params: str) -> Schema:
    return primitive(type_, name=name, version=1, parameters=params or None)


# -- Kafka Connect built-ins -------------------------------------------------------------------
def connect_decimal(scale: int, precision: int | None = None) -> Schema:
    params = {DECIMAL_SCALE: str(scale)}
    if precision is not None:
        params[DECIMAL_PRECISION] = str(precision)
    return primitive(Type.BYTES, name=CONNECT_DECIMAL, version=1, parameters=params)


def connect_date() -> Schema:
    return _named(Type.INT32, CONNECT_DATE)


def connect_time() -> Schema:
    return _named(Type.INT32, CONNECT_TIME)


def connect_timestamp() -> Schema:
    return _named(Type.INT64, CONNECT_TIMESTAMP)


# -- Debezium time types -----------------------------------------------------------------------
def date() -> Schema:
    return _named(Type.INT32, DBZ_DATE)


def time_millis() -> Schema:
    return _named(Type.INT32, DBZ_TIME)


def micro_time() -> Schema:
    return _named(Type.INT64, DBZ_MICRO_TIME)


def nano_time() -> Schema:
    return _named(Type.INT64, DBZ_NANO_TIME)


def timestamp_millis() -> Schema:
    return _named(Type.INT64, DBZ_TIMESTAMP)


def micro_timestamp() -> Schema:
    return _named(Type.INT64, DBZ_MICRO_TIMESTAMP)


def nano_timestamp() -> Schema:
    return _named(Type.INT64, DBZ_NANO_TIMESTAMP)


def zoned_timestamp() -> Schema:
    return _named(Type.STRING, DBZ_ZONED_TIMESTAMP)


def zoned_time() -> Schema:
    return _named(Type.STRING, DBZ_ZONED_TIME)


def year() -> Schema:
    return _named(Type.INT32, DBZ_YEAR)


def micro_duration() -> Schema:
    return _named(Type.INT64, DBZ_MICRO_DURATION)


def interval() -> Schema:
    return _named(Type.STRING, DBZ_INTERVAL)


# -- Debezium data types -----------------------------------------------------------------------
def bits(length: int) -> Schema:
    return _named(Type.BYTES, DBZ_BITS, length=str(length))


def json() -> Schema:
    return _named(Type.STRING, DBZ_JSON)


def xml() -> Schema:
    return _named(Type.STRING, DBZ_XML)


def uuid() -> Schema:
    return _named(Type.STRING, DBZ_UUID)


def ltree() -> Schema:
    return _named(Type.STRING, DBZ_LTREE)


def enum(allowed: list[str]) -> Schema:
    return _named(Type.STRING, DBZ_ENUM, allowed=",".join(allowed))


def enum_set(allowed: list[str]) -> Schema:
    return _named(Type.STRING, DBZ_ENUM_SET, allowed=",".join(allowed))


def variable_scale_decimal() -> Schema:
    return struct(
        [("scale", INT32), ("value", BYTES)],
        name=DBZ_VARIABLE_SCALE_DECIMAL,
        version=1,
        doc="Variable scaled decimal",
    )


def geometry() -> Schema:
    return struct(
        [("wkb", BYTES), ("srid", INT32.as_optional())],
        name=DBZ_GEOMETRY,
        version=1,
        doc="Geometry",
    )


def geography() -> Schema:
    return struct(
        [("wkb", BYTES), ("srid", INT32.as_optional())],
        name=DBZ_GEOGRAPHY,
        version=1,
        doc="Geography",
    )


def point() -> Schema:
    return struct(
        [
            ("x", FLOAT64),
            ("y", FLOAT64),
            ("wkb", BYTES.as_optional()),
            ("srid", INT32.as_optional()),
        ],
        name=DBZ_POINT,
        version=1,
        doc="Geometry (POINT)",
    )


# -- value helpers -----------------------------------------------------------------------------
EPOCH_DATE = dt.date(1970, 1, 1)
EPOCH = dt.datetime(1970, 1, 1)
EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def days_since_epoch(value: dt.date) -> int:
    return (value - EPOCH_DATE).days


def micros_since_epoch(value: dt.datetime) -> int:
    """Naive datetimes are wall-clock values (no zone), as Debezium treats TIMESTAMP."""
    delta = value - (EPOCH_UTC if value.tzinfo is not None else EPOCH)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def micros_of_day(value: dt.time | dt.timedelta) -> int:
    if isinstance(value, dt.timedelta):
        return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


def zoned_timestamp_str(value: dt.datetime) -> str:
    """ISO-8601 in UTC with a ``Z``, fraction only as long as needed, the year in four
    digits (Debezium's format, Java's ISO formatter)."""
    if value.tzinfo:
        value = value.astimezone(dt.UTC)
    iso = value.isoformat()  # a UTC value's ends with "+00:00"
    if value.tzinfo:
        iso = iso[:-6]
    return (iso.rstrip("0") if value.microsecond else iso) + "Z"


def fixed_fraction(convert: Callable[[Any], Any], digits: int | None) -> Callable[[Any], Any]:
    """``convert`` (giving ZonedTimestamp text) with the fraction padded to ``digits``, as
    Debezium 2.2+ writes it (DBZ-5996: ``…00:00:01.000000Z`` for a 6-digit column); values
    that are not ``…Z`` timestamps (``infinity``, nulls) pass as they are. No digits (or 0):
    ``convert`` itself, the ISO form without trailing zeros."""
    if not digits or digits <= 0:
        return convert
    width = min(digits, 9)
    zeros = "0" * width

    def padded(value: Any) -> Any:
        text = convert(value)
        if not isinstance(text, str) or not text.endswith("Z"):
            return text
        whole, _, fraction = text[:-1].partition(".")
        return f"{whole}.{(fraction + zeros)[:width]}Z"

    return padded


def signed_bytes(unscaled: int) -> bytes:
    """The shortest big-endian two's complement of ``unscaled`` (Java's
    ``BigInteger.toByteArray``), as a Connect Decimal carries its unscaled value."""
    return unscaled.to_bytes((unscaled + (unscaled < 0)).bit_length() // 8 + 1, "big", signed=True)


def unscaled_bytes(value: decimal.Decimal, scale: int | None = None) -> bytes:
    """Big-endian two's complement of the unscaled value, as Connect's Decimal carries it."""
    if scale is not None:
        with decimal.localcontext() as ctx:  # exact: no 28-digit default precision
            ctx.prec = max(len(value.as_tuple().digits) + abs(scale) + 2, 28)
            value = value.scaleb(scale).to_integral_value(rounding=decimal.ROUND_HALF_UP)
        unscaled = int(value)
    else:
        sign, digits, _exp = value.as_tuple()
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    return signed_bytes(unscaled)


def decimal_scale(value: decimal.Decimal) -> int:
    exp = value.as_tuple().exponent
    return -exp if isinstance(exp, int) else 0


def variable_scale_value(value: decimal.Decimal) -> dict[str, Any]:
    scale = max(decimal_scale(value), 0)
    return {"scale": scale, "value": unscaled_bytes(value, scale)}
