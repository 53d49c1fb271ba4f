"""Connect schemas (as the JSON converter writes them) to Spark SQL types, without Spark.

Spark types are handled in their JSON form (what ``DataType.jsonValue()`` returns: ``"long"``,
``"decimal(10,2)"``, ``{"type": "array", ...}``), so everything here is plain data: the worker
processes and the unit tests need no JVM, and the driver turns them into ``StructType`` with
``StructType.fromJson``.

Values are not converted to Python objects of those types. The worker rewrites only what Spark's
``from_json`` cannot read as-is (Connect ``Decimal`` as base64 of the unscaled bytes, days since
the epoch for dates, epoch micros/nanos for timestamps, maps with non-string keys); everything
else is passed through as JSON and parsed on the JVM side, which is much faster than building
typed Python values.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
from collections.abc import Callable, Mapping
from typing import Any

SparkType = Any  # str for atomic types, dict for array/map/struct (Spark's JSON form)
Normalizer = Callable[[Any], Any]

DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
_DATE_NAMES = frozenset({"org.apache.kafka.connect.data.Date", "io.debezium.time.Date"})
_TS_MILLIS = frozenset({"org.apache.kafka.connect.data.Timestamp", "io.debezium.time.Timestamp"})
_TS_MICROS = "io.debezium.time.MicroTimestamp"
_TS_NANOS = "io.debezium.time.NanoTimestamp"
_ZONED_TS = "io.debezium.time.ZonedTimestamp"
MAX_DECIMAL_PRECISION = 38

_PHYSICAL: dict[str, str] = {
    "int8": "byte",
    "int16": "short",
    "int32": "integer",
    "int64": "long",
    "float32": "float",
    "float64": "double",
    # Kafka's JsonConverter (and so tidemark's and Debezium's JSON) names them this way.
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "binary",
}
_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH = _dt.datetime(1970, 1, 1)


class TypeMappingError(ValueError):
    """A value does not fit the type its schema announces."""


class InexactNumber(Exception):
    """A decimal written as a JSON number (``decimal.format=NUMERIC``) reached a normalizer
    as a binary float: the fast JSON parser keeps ~16 digits. The parser reads the record
    again keeping each number's text (:class:`ExactNumber`)."""


class ExactNumber(float):
    """A JSON number with the text it was written as (the exact parse's floats)."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, text: str) -> ExactNumber:
        number = float.__new__(cls, text)
        number.text = text
        return number


def plain_floats(value: Any, *, as_text: bool = False) -> Any:
    """``value`` with every :class:`ExactNumber` a plain float again (the JSON writer knows
    no subclass of float), or its text with ``as_text``."""
    if isinstance(value, ExactNumber):
        return value.text if as_text else float(value)
    if isinstance(value, dict):
        return {k: plain_floats(v, as_text=as_text) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_floats(v, as_text=as_text) for v in value]
    return value


# -- Connect schema -> Spark type ---------------------------------------------------------------
def spark_type(schema: Mapping[str, Any]) -> SparkType:
    """The Spark type a Connect schema (JSON converter form) is stored as."""
    name = schema.get("name")
    ctype = schema.get("type")
    if name == DECIMAL:
        params = schema.get("parameters") or {}
        scale = int(params.get("scale", "0"))
        precision = int(params.get("connect.decimal.precision", MAX_DECIMAL_PRECISION))
        precision = max(precision, scale, 1)
        if precision > MAX_DECIMAL_PRECISION:
            return "string"  # exact text beats a silently rounded number
        return f"decimal({precision},{scale})"
    if name == VARIABLE_SCALE_DECIMAL:
        return "string"
    if name in _DATE_NAMES:
        return "date"
    if name in _TS_MILLIS or name in (_TS_MICROS, _TS_NANOS):
        return "timestamp_ntz"
    if name == _ZONED_TS:
        return "timestamp"
    if ctype in _PHYSICAL:
        return _PHYSICAL[str(ctype)]
    if ctype == "array":
        return array_of(spark_type(_child(schema, "items")))
    if ctype == "map":
        key, value = _child(schema, "keys"), _child(schema, "values")
        if key.get("type") == "string":
            return map_of("string", spark_type(value))
        return array_of(struct_of([("key", spark_type(key)), ("value", spark_type(value))]))
    if ctype == "struct":
        return struct_of([(f["field"], spark_type(f)) for f in schema.get("fields", [])])
    raise TypeMappingError(f"unknown Connect schema type {ctype!r}")


def _child(schema: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    child = schema.get(key)
    if not isinstance(child, Mapping):
        raise TypeMappingError(f"Connect {schema.get('type')} schema without {key!r}")
    return child


def array_of(element: SparkType) -> dict[str, Any]:
    return {"type": "array", "elementType": element, "containsNull": True}


def map_of(key: SparkType, value: SparkType) -> dict[str, Any]:
    return {"type": "map", "keyType": key, "valueType": value, "valueContainsNull": True}


def struct_of(fields: list[tuple[str, SparkType]]) -> dict[str, Any]:
    return {
        "type": "struct",
        "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields],
    }


def struct_fields(struct: Mapping[str, Any]) -> dict[str, SparkType]:
    return {f["name"]: f["type"] for f in struct.get("fields", [])}


# -- value normalisation (Connect JSON value -> what from_json reads) ----------------------------
def normalizer(schema: Mapping[str, Any]) -> Normalizer | None:
    """A function rewriting one value of ``schema`` for ``from_json``, or None when the JSON
    value is already in the form Spark reads (the common case: no per-value work)."""
    name = schema.get("name")
    ctype = schema.get("type")
    if name == DECIMAL:
        scale = int((schema.get("parameters") or {}).get("scale", "0"))
        return lambda v: _decimal_text(v, scale)
    if name == VARIABLE_SCALE_DECIMAL:
        return _variable_decimal_text
    if name in _DATE_NAMES:
        return _date_text
    if name in _TS_MILLIS:
        return lambda v: _timestamp_text(v, 1000)
    if name == _TS_MICROS:
        return lambda v: _timestamp_text(v, 1)
    if name == _TS_NANOS:
        return lambda v: _timestamp_text(v, 0)
    if ctype == "array":
        inner = normalizer(_child(schema, "items"))
        if inner is None:
            return None
        return lambda v: None if v is None else [inner(x) for x in v]
    if ctype == "map":
        key_schema, value_schema = _child(schema, "keys"), _child(schema, "values")
        kn, vn = normalizer(key_schema), normalizer(value_schema)
        if key_schema.get("type") == "string":
            if vn is None:
                return None
            return lambda v: None if v is None else {k: vn(x) for k, x in v.items()}
        kf: Normalizer = kn or _identity
        vf: Normalizer = vn or _identity
        return lambda v: None if v is None else [{"key": kf(k), "value": vf(x)} for k, x in v]
    if ctype == "struct":
        parts = [(f["field"], normalizer(f)) for f in schema.get("fields", [])]
        active = [(n, fn) for n, fn in parts if fn is not None]
        if not active:
            return None

        def struct_fn(v: Any) -> Any:
            if v is None:
                return None
            out = dict(v)
            for n, fn in active:
                if n in out:
                    out[n] = fn(out[n])
            return out

        return struct_fn
    return None


def _identity(v: Any) -> Any:
    return v


def _decimal_text(value: Any, scale: int) -> Any:
    if value is None:
        return None
    if isinstance(value, ExactNumber):  # decimal.format=NUMERIC, read exactly
        return value.text
    if isinstance(value, float):  # decimal.format=NUMERIC, read by the fast parser
        raise InexactNumber(value)
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        raise TypeMappingError(f"decimal value {value!r} is not base64 text")
    try:
        raw = binascii.a2b_base64(value, strict_mode=True)
    except (binascii.Error, ValueError):
        raise TypeMappingError(f"decimal value {value!r} is not valid base64") from None
    unscaled = int.from_bytes(raw, "big", signed=True) if raw else 0
    return _scaled_text(unscaled, scale)


def _scaled_text(unscaled: int, scale: int) -> str:
    """``unscaled * 10**-scale`` as exact plain decimal text. Not ``Decimal.scaleb``: that
    rounds to the context's 28 digits (a NUMERIC(38) value lost its last ten)."""
    if scale <= 0:
        return str(unscaled * 10**-scale)
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    sign = "-" if unscaled < 0 else ""
    return f"{sign}{digits[:-scale]}.{digits[-scale:]}"


def _variable_decimal_text(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, Mapping) or "value" not in value:
        raise TypeMappingError(f"VariableScaleDecimal value {value!r} has no 'value'")
    return _decimal_text(value["value"], int(value.get("scale") or 0))


def _date_text(value: Any) -> Any:
    if value is None:
        return None
    try:
        return (_EPOCH_DATE + _dt.timedelta(days=int(value))).isoformat()
    except (OverflowError, ValueError, TypeError):
        raise TypeMappingError(f"date value {value!r} (days since epoch) is out of range") from None


def _timestamp_text(value: Any, micros_per_unit: int) -> Any:
    """``micros_per_unit`` 1000 for millis, 1 for micros, 0 for nanos (integer division)."""
    if value is None:
        return None
    try:
        n = int(value)
        micros = n // 1000 if micros_per_unit == 0 else n * micros_per_unit
        return (_EPOCH + _dt.timedelta(microseconds=micros)).isoformat(timespec="microseconds")
    except (OverflowError, ValueError, TypeError):
        raise TypeMappingError(f"timestamp value {value!r} is out of range") from None


# -- TOAST / unavailable placeholders ---------------------------------------------------------
def placeholder_forms(schema: Mapping[str, Any], placeholders: tuple[str, ...]) -> tuple[Any, ...]:
    """The JSON values by which a column of ``schema`` says "unchanged, not sent": the
    placeholder text for strings, its base64 for bytes, a one-element list for arrays of those
    (what Debezium and tidemark emit). Empty for types that cannot carry one."""
    ctype = schema.get("type")
    if schema.get("name") in (DECIMAL, VARIABLE_SCALE_DECIMAL):
        return ()
    if ctype == "string":
        return placeholders
    if ctype == "bytes":
        return tuple(base64.b64encode(p.encode()).decode() for p in placeholders)
    if ctype == "array":
        items = schema.get("items")
        if isinstance(items, Mapping):
            return tuple([form] for form in placeholder_forms(items, placeholders))
    return ()


# -- schemaless JSON ----------------------------------------------------------------------------
def infer_type(value: Any) -> SparkType | None:
    """The Spark type of a value from schemaless JSON; None for null (unknown yet)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "long"
    if isinstance(value, float):
        return "double"
    return "string"  # strings, and objects/arrays kept as their JSON text


def merge_inferred(a: SparkType | None, b: SparkType | None) -> SparkType | None:
    if a is None:
        return b
    if b is None or a == b:
        return a
    if {a, b} == {"long", "double"}:
        return "double"
    return "string"


# -- comparing table and incoming types ---------------------------------------------------------
_INTEGRAL_RANK = {"byte": 1, "short": 2, "integer": 3, "long": 4}
_INTEGRAL_DIGITS = {"byte": 3, "short": 5, "integer": 10, "long": 20}


def parse_decimal(t: SparkType) -> tuple[int, int] | None:
    if isinstance(t, str) and t.startswith("decimal(") and t.endswith(")"):
        p, s = t[8:-1].split(",")
        return int(p), int(s)
    return None


def fits(table: SparkType, incoming: SparkType) -> bool:
    """True when every value of ``incoming`` is stored exactly by a column of ``table``."""
    if table == incoming:
        return True
    if isinstance(table, str) and isinstance(incoming, str):
        if table == "string":
            return incoming != "binary"  # from_json keeps the JSON text of any other value
        if table in _INTEGRAL_RANK and incoming in _INTEGRAL_RANK:
            return _INTEGRAL_RANK[incoming] <= _INTEGRAL_RANK[table]
        if table == "double" and incoming in ("float", "byte", "short", "integer"):
            return True
        tdec, idec = parse_decimal(table), parse_decimal(incoming)
        if tdec is not None and idec is not None:
            return tdec[1] >= idec[1] and tdec[0] - tdec[1] >= idec[0] - idec[1]
        if tdec is not None and incoming in _INTEGRAL_DIGITS:
            return tdec[0] - tdec[1] >= _INTEGRAL_DIGITS[incoming]
        return False
    if isinstance(table, dict) and isinstance(incoming, dict):
        kind = table.get("type")
        if kind != incoming.get("type"):
            return False
        if kind == "array":
            return fits(table["elementType"], incoming["elementType"])
        if kind == "map":
            return table["keyType"] == incoming["keyType"] and fits(
                table["valueType"], incoming["valueType"]
            )
        if kind == "struct":
            tf = struct_fields(table)
            return all(n in tf and fits(tf[n], t) for n, t in struct_fields(incoming).items())
    return False


def widened(table: SparkType, incoming: SparkType) -> SparkType | None:
    """The type Delta's type widening can change an atomic ``table`` column to so that it
    holds ``incoming`` too, or None when no such widening exists."""
    if not (isinstance(table, str) and isinstance(incoming, str)):
        return None
    if table in _INTEGRAL_RANK and incoming in _INTEGRAL_RANK:
        return incoming if _INTEGRAL_RANK[incoming] > _INTEGRAL_RANK[table] else None
    if table in ("byte", "short", "integer") and incoming == "double":
        return "double"
    if table == "float" and incoming == "double":
        return "double"
    if table == "date" and incoming == "timestamp_ntz":
        return "timestamp_ntz"
    tdec, idec = parse_decimal(table), parse_decimal(incoming)
    if tdec is None and table in _INTEGRAL_DIGITS:
        tdec = (_INTEGRAL_DIGITS[table], 0)  # an integral column is decimal(digits, 0)
    if tdec is not None and idec is None and incoming in _INTEGRAL_DIGITS:
        idec = (_INTEGRAL_DIGITS[incoming], 0)
    if tdec is not None and idec is not None:
        # Delta widens decimal(p, s) to decimal(p + k1, s + k2) with k1 >= k2 >= 0: neither
        # the integer digits nor the scale may shrink.
        scale = max(tdec[1], idec[1])
        precision = scale + max(tdec[0] - tdec[1], idec[0] - idec[1])
        if precision > MAX_DECIMAL_PRECISION:
            return None
        return f"decimal({precision},{scale})"
    return None


def added_nested_fields(
    table: SparkType, incoming: SparkType, prefix: str
) -> list[tuple[str, Any]]:
    """Struct fields present in ``incoming`` but not in ``table``, as (dotted path, type)."""
    out: list[tuple[str, Any]] = []
    if not (isinstance(table, dict) and isinstance(incoming, dict)):
        return out
    if table.get("type") == "struct" and incoming.get("type") == "struct":
        tf = struct_fields(table)
        for name, itype in struct_fields(incoming).items():
            path = f"{prefix}.{quote(name)}"
            if name not in tf:
                out.append((path, itype))
            else:
                out.extend(added_nested_fields(tf[name], itype, path))
    return out


def with_added_fields(table: SparkType, incoming: SparkType) -> SparkType:
    """``table`` with the struct fields only ``incoming`` has appended (recursively)."""
    if not (isinstance(table, dict) and isinstance(incoming, dict)):
        return table
    if table.get("type") != "struct" or incoming.get("type") != "struct":
        return table
    tf = struct_fields(table)
    fields = [(n, with_added_fields(t, struct_fields(incoming).get(n, t))) for n, t in tf.items()]
    fields += [(n, t) for n, t in struct_fields(incoming).items() if n not in tf]
    return struct_of(fields)


# -- DDL ----------------------------------------------------------------------------------------
_DDL = {
    "byte": "TINYINT",
    "short": "SMALLINT",
    "integer": "INT",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "string": "STRING",
    "binary": "BINARY",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP_NTZ",
}


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def ddl(t: SparkType) -> str:
    """Spark SQL DDL for a type in JSON form (for ALTER TABLE ... ADD COLUMNS / TYPE)."""
    if isinstance(t, str):
        if t in _DDL:
            return _DDL[t]
        dec = parse_decimal(t)
        if dec is not None:
            return f"DECIMAL({dec[0]},{dec[1]})"
        raise TypeMappingError(f"no DDL for Spark type {t!r}")
    kind = t.get("type")
    if kind == "array":
        return f"ARRAY<{ddl(t['elementType'])}>"
    if kind == "map":
        return f"MAP<{ddl(t['keyType'])}, {ddl(t['valueType'])}>"
    if kind == "struct":
        inner = ", ".join(f"{quote(f['name'])}: {ddl(f['type'])}" for f in t["fields"])
        return f"STRUCT<{inner}>"
    raise TypeMappingError(f"no DDL for Spark type {t!r}")


def can_hold_placeholder(t: SparkType) -> bool:
    """Column types whose incoming value may be a TOAST placeholder (so MERGE must be able to
    keep the stored value): strings, binaries and arrays of those."""
    if t in ("string", "binary"):
        return True
    return (
        isinstance(t, dict) and t.get("type") == "array" and can_hold_placeholder(t["elementType"])
    )
