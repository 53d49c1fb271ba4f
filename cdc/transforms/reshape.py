"""Kafka Connect's reshaping transforms: ``Flatten``, ``Cast`` and ``SetSchemaMetadata``.

As in :mod:`cdc.transforms.fields`, each follows Kafka 4.x's classes so a copied config gives
the same records. The details users see:

* ``Flatten`` joins nested struct field names with ``delimiter`` (default ``.``); a field
  under an optional struct becomes optional. Arrays and maps are kept as they are.
* ``Cast`` converts with Java's rules, because the result is what downstream systems store:
  a double cast to an integer is truncated toward zero and saturates (``(int) 2.9e10`` is
  2147483647), a long narrowed to a smaller integer wraps, and a number cast to a string is
  written as ``Double.toString`` writes it (``1.0E10``, not Python's ``10000000000.0``). A cast
  field keeps its optionality and default but loses its schema name (a ``Decimal`` cast to
  string is a plain string).
* ``SetSchemaMetadata`` renames or re-versions the schema and leaves everything else.
"""

from __future__ import annotations

import base64
import math
import struct as binary
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from cdc.record import SourceRecord
from cdc.schema.model import Schema, Type, primitive
from cdc.transforms.base import PluginConfig, SchemaCache, TransformError, copy_basics
from cdc.transforms.fields import KeyOrValue, field_value, require_struct
from cdc.transforms.java_text import java_float_text

# -- Flatten -----------------------------------------------------------------------------------

_LEAF_TYPES = frozenset(Type) - {Type.STRUCT}


class Flatten(KeyOrValue):
    PURPOSE = "flattening"

    def __init__(self) -> None:
        self._cache: SchemaCache[tuple[Schema, list[tuple[str, tuple[str, ...]]]]] = SchemaCache()

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._delimiter = cfg.string("delimiter", ".") or "."
        cfg.check()

    def _flat_schema(
        self,
        schema: Schema,
        prefix: str,
        path: tuple[str, ...],
        optional: bool,
        out: list[tuple[str, Schema]],
        paths: list[tuple[str, tuple[str, ...]]],
    ) -> None:
        for f in schema.fields:
            name = f"{prefix}{self._delimiter}{f.name}" if prefix else f.name
            is_optional = optional or f.schema.optional
            if f.schema.type is Type.STRUCT:
                self._flat_schema(f.schema, name, (*path, f.name), is_optional, out, paths)
            elif f.schema.type in _LEAF_TYPES:
                out.append((name, f.schema.with_(optional=is_optional)))
                paths.append((name, (*path, f.name)))

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        value, schema = self.value_of(record), self.schema_of(record)
        if value is None:
            return record
        value = require_struct(value, schema, self.PURPOSE)
        if schema is None:
            flat: dict[str, Any] = {}
            self._flat_map(value, "", flat)
            return self.replaced(record, None, flat)
        cached = self._cache.get(schema)
        if cached is None:
            fields: list[tuple[str, Schema]] = []
            paths: list[tuple[str, tuple[str, ...]]] = []
            self._flat_schema(schema, "", (), False, fields, paths)
            cached = self._cache.put(schema, (copy_basics(schema, fields), paths))
        updated, paths = cached
        out = {}
        for name, path in paths:
            v: Any = value
            for step in path:
                v = v.get(step) if v is not None else None
            out[name] = v
        return self.replaced(record, updated, out)

    def _flat_map(self, value: Mapping[str, Any], prefix: str, out: dict[str, Any]) -> None:
        for k, v in value.items():
            name = f"{prefix}{self._delimiter}{k}" if prefix else k
            if isinstance(v, dict):
                self._flat_map(v, name, out)
            else:
                out[name] = v


class FlattenKey(Flatten):
    side = "key"


# -- Cast --------------------------------------------------------------------------------------

_CAST_TARGETS = {
    "int8": Type.INT8,
    "int16": Type.INT16,
    "int32": Type.INT32,
    "int64": Type.INT64,
    "float32": Type.FLOAT32,
    "float64": Type.FLOAT64,
    "boolean": Type.BOOLEAN,
    "string": Type.STRING,
}
_CASTABLE = frozenset(_CAST_TARGETS.values()) | {Type.BYTES}
_INT_BITS = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}


def _wrap(n: int, bits: int) -> int:
    """Java's narrowing of a long: the low ``bits`` bits, two's complement."""
    n &= (1 << bits) - 1
    return n - (1 << bits) if n >> (bits - 1) else n


def _java_int(value: float, bits: int) -> int:
    """Java's ``(int)``/``(long)`` of a double, then ``byteValue``/``shortValue``: truncation
    toward zero, NaN as 0, saturation at the int (or long) range, then wrapping."""
    if math.isnan(value):
        return 0
    wide = 64 if bits == 64 else 32
    lo, hi = -(1 << (wide - 1)), (1 << (wide - 1)) - 1
    n = hi if value >= hi else lo if value <= lo else int(value)
    return _wrap(n, bits)


def _float32(value: float) -> float:
    """Java's ``(float)`` of a double: the nearest float32, infinite beyond its range (a
    legal ``double precision`` value such as 1e300 must not stop the task)."""
    try:
        return float(binary.unpack("<f", binary.pack("<f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def _to_text(value: Any, schema_type: Type) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_float_text(value, schema_type is Type.FLOAT32)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    return str(value)


def _to_number(value: Any, target: Type) -> int | float:
    if isinstance(value, bool):
        number: int | float | Decimal = 1 if value else 0
    elif isinstance(value, str):
        try:
            number = float(value) if target in (Type.FLOAT32, Type.FLOAT64) else int(value)
        except ValueError as exc:
            raise TransformError(f"Cast: {value!r} is not a valid {target.value}") from exc
        if isinstance(number, int) and number != _wrap(number, _INT_BITS[target]):
            raise TransformError(f"Cast: {value!r} is out of range for {target.value}")
    else:
        number = value
    if target in (Type.FLOAT32, Type.FLOAT64):
        f = float(number)
        return _float32(f) if target is Type.FLOAT32 else f
    bits = _INT_BITS[target]
    if isinstance(number, float):
        return _java_int(number, bits)
    return _wrap(int(number), bits)  # int() of a Decimal truncates, as BigDecimal.longValue


def cast_value(value: Any, source: Type, target: Type) -> Any:
    if value is None:
        return None
    if target is Type.STRING:
        return _to_text(value, source)
    if target is Type.BOOLEAN:
        if isinstance(value, str):
            return value.strip().lower() == "true"
        if isinstance(value, bool):
            return value
        try:
            return int(value) != 0 if not isinstance(value, float) else value != 0
        except (TypeError, InvalidOperation) as exc:
            raise TransformError(f"Cast: cannot cast {type(value).__name__} to boolean") from exc
    if isinstance(value, bytes | bytearray | memoryview):
        raise TransformError(f"Cast: bytes can only be cast to string, not {target.value}")
    return _to_number(value, target)


class Cast(KeyOrValue):
    """``spec``: ``field:type,...`` for struct fields, or one ``type`` for the whole value."""

    def __init__(self) -> None:
        self._cache: SchemaCache[Schema] = SchemaCache()

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._casts: dict[str, Type] = {}
        self._whole: Type | None = None
        entries = cfg.items("spec")
        if not entries:
            cfg.error("spec", "must list field:type pairs, or one type for the whole value")
        valid = ", ".join(_CAST_TARGETS)
        for entry in entries:
            name, sep, kind = entry.rpartition(":")
            target = _CAST_TARGETS.get(kind.strip().lower())
            if target is None:
                cfg.error("spec", f"invalid cast type {kind!r} in {entry!r} (valid: {valid})")
            elif not sep:
                if len(entries) > 1:
                    cfg.error("spec", "a cast of the whole value must be the only entry")
                self._whole = target
            else:
                self._casts[name.strip()] = target
        cfg.check()

    def _field_schema(self, original: Schema, target: Type, where: str) -> Schema:
        if original.type not in _CASTABLE:
            raise TransformError(
                "Cast transformation does not support casting to/from "
                f"{original.type.value.upper()} ({where})"
            )
        default = cast_value(original.default, original.type, target)
        return primitive(target, optional=original.optional, default=default)

    def _schema(self, schema: Schema, topic: str) -> Schema:
        if self._whole is not None:
            cast = self._field_schema(schema, self._whole, topic)
            return cast.with_(
                name=schema.name, version=schema.version, doc=schema.doc, params=schema.params
            )
        if schema.type is not Type.STRUCT:
            raise TransformError(f"Cast: field casts need a struct, got {schema.type} ({topic})")
        fields = [
            (f.name, self._field_schema(f.schema, self._casts[f.name], f"field {f.name}"))
            if f.name in self._casts
            else (f.name, f.schema)
            for f in schema.fields
        ]
        built = copy_basics(schema, fields)
        default = schema.default
        return built.with_(optional=schema.optional, default=default)

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        value, schema = self.value_of(record), self.schema_of(record)
        if schema is None:
            return self.replaced(record, None, self._schemaless(value))
        updated = self._cache.get(schema)
        if updated is None:
            updated = self._cache.put(schema, self._schema(schema, record.topic))
        if value is None:
            return self.replaced(record, updated, None)
        if self._whole is not None:
            return self.replaced(record, updated, cast_value(value, schema.type, self._whole))
        value = require_struct(value, schema, "cast types")
        out = {}
        for f in schema.fields:
            v = field_value(value, f.name, f.schema, True)
            target = self._casts.get(f.name)
            out[f.name] = v if target is None else cast_value(v, f.schema.type, target)
        return self.replaced(record, updated, out)

    def _schemaless(self, value: Any) -> Any:
        if value is None:
            return None
        if self._whole is not None:
            return cast_value(value, _inferred(value), self._whole)
        value = require_struct(value, None, "cast types")
        return {
            k: cast_value(v, _inferred(v), self._casts[k]) if k in self._casts else v
            for k, v in value.items()
        }


class CastKey(Cast):
    side = "key"


def _inferred(value: Any) -> Type:
    return Type.FLOAT64 if isinstance(value, float) else Type.STRING


# -- SetSchemaMetadata -------------------------------------------------------------------------


class SetSchemaMetadata(KeyOrValue):
    def __init__(self) -> None:
        self._cache: SchemaCache[Schema] = SchemaCache()

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._name = cfg.string("schema.name") or None
        version = cfg.string("schema.version")
        self._version: int | None = None
        if version:
            try:
                self._version = int(version)
            except ValueError:
                cfg.error("schema.version", f"must be an integer, got {version!r}")
        if self._name is None and self._version is None and not cfg.errors:
            cfg.error("schema.name", "set schema.name or schema.version (or both)")
        cfg.check()

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        schema = self.schema_of(record)
        if schema is None:
            raise TransformError(f"Schema required for [updating schema metadata] ({record.topic})")
        updated = self._cache.get(schema)
        if updated is None:
            changes: dict[str, Any] = {}
            if self._name is not None:
                changes["name"] = self._name
            if self._version is not None:
                changes["version"] = self._version
            updated = self._cache.put(schema, schema.with_(**changes))
        return self.replaced(record, updated, self.value_of(record))


class SetSchemaMetadataKey(SetSchemaMetadata):
    side = "key"
