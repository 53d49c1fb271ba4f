"""Kafka Connect's schema model: the shape every tidemark event is described with.

Values travel as plain Python objects so that the hot path allocates nothing extra: a struct
is a ``dict`` keyed by field name in field order, an array a ``list``, a map a ``dict``,
``bytes`` for BYTES and ``decimal.Decimal`` for the Connect ``Decimal`` logical type.
Schemas are immutable and hashable, so converters can cache per-schema work (the JSON form of
a schema is computed once, not per event).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Type(StrEnum):
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    @property
    def is_primitive(self) -> bool:
        return self not in (Type.ARRAY, Type.MAP, Type.STRUCT)


@dataclass(frozen=True, eq=True)
class Field:
    name: str
    index: int
    schema: Schema


def _freeze(params: Mapping[str, str] | None) -> tuple[tuple[str, str], ...] | None:
    return None if params is None else tuple(params.items())


@dataclass(frozen=True, eq=True)
class Schema:
    """A Connect schema. Use the helper constructors below rather than calling this directly."""

    type: Type
    optional: bool = False
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    params: tuple[tuple[str, str], ...] | None = None
    default: Any = None
    fields: tuple[Field, ...] = ()
    key_schema: Schema | None = None
    value_schema: Schema | None = None
    _field_map: dict[str, Field] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.fields:
            self._field_map.update({f.name: f for f in self.fields})

    def __hash__(self) -> int:
        return hash(
            (
                self.type,
                self.optional,
                self.name,
                self.version,
                self.params,
                self.fields,
                self.key_schema,
                self.value_schema,
                repr(self.default),
            )
        )

    @property
    def parameters(self) -> dict[str, str] | None:
        return None if self.params is None else dict(self.params)

    def field(self, name: str) -> Field | None:
        return self._field_map.get(name)

    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def as_optional(self) -> Schema:
        return self.with_(optional=True)

    def with_(self, **changes: Any) -> Schema:
        base = {
            "type": self.type,
            "optional": self.optional,
            "name": self.name,
            "version": self.version,
            "doc": self.doc,
            "params": self.params,
            "default": self.default,
            "fields": self.fields,
            "key_schema": self.key_schema,
            "value_schema": self.value_schema,
        }
        if "parameters" in changes:
            changes["params"] = _freeze(changes.pop("parameters"))
        base.update(changes)
        return Schema(**base)


def primitive(
    type_: Type,
    *,
    optional: bool = False,
    name: str | None = None,
    version: int | None = None,
    parameters: Mapping[str, str] | None = None,
    default: Any = None,
    doc: str | None = None,
) -> Schema:
    return Schema(type_, optional, name, version, doc, _freeze(parameters), default)


def struct(
    fields: Iterable[tuple[str, Schema]],
    *,
    name: str | None = None,
    optional: bool = False,
    version: int | None = None,
    doc: str | None = None,
    parameters: Mapping[str, str] | None = None,
) -> Schema:
    built = tuple(Field(n, i, s) for i, (n, s) in enumerate(fields))
    names = [f.name for f in built]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate field names in struct {name or ''}: {names}")
    return Schema(Type.STRUCT, optional, name, version, doc, _freeze(parameters), None, built)


def array(items: Schema, *, optional: bool = False, name: str | None = None) -> Schema:
    return Schema(Type.ARRAY, optional, name, value_schema=items)


def map_of(key: Schema, value: Schema, *, optional: bool = False) -> Schema:
    return Schema(Type.MAP, optional, key_schema=key, value_schema=value)


#: Each type's zero value: what Debezium puts in a required field that has no value, and what
#: Kafka's MaskField masks with. The list and map are shared: copy before changing them.
ZERO_VALUES: dict[Type, Any] = {
    Type.INT8: 0,
    Type.INT16: 0,
    Type.INT32: 0,
    Type.INT64: 0,
    Type.FLOAT32: 0.0,
    Type.FLOAT64: 0.0,
    Type.BOOLEAN: False,
    Type.STRING: "",
    Type.BYTES: b"",
    Type.ARRAY: [],
    Type.MAP: {},
}

# Plain schemas used everywhere.
INT8 = primitive(Type.INT8)
INT16 = primitive(Type.INT16)
INT32 = primitive(Type.INT32)
INT64 = primitive(Type.INT64)
FLOAT32 = primitive(Type.FLOAT32)
FLOAT64 = primitive(Type.FLOAT64)
BOOLEAN = primitive(Type.BOOLEAN)
STRING = primitive(Type.STRING)
BYTES = primitive(Type.BYTES)
OPTIONAL_INT8 = INT8.as_optional()
OPTIONAL_INT16 = INT16.as_optional()
OPTIONAL_INT32 = INT32.as_optional()
OPTIONAL_INT64 = INT64.as_optional()
OPTIONAL_FLOAT32 = FLOAT32.as_optional()
OPTIONAL_FLOAT64 = FLOAT64.as_optional()
OPTIONAL_BOOLEAN = BOOLEAN.as_optional()
OPTIONAL_STRING = STRING.as_optional()
OPTIONAL_BYTES = BYTES.as_optional()
