"""Kafka Connect's field transforms (``org.apache.kafka.connect.transforms.*``), in Python.

Debezium users chain these after ``ExtractNewRecordState``: ``InsertField`` (static, topic and
partition fields), ``ReplaceField`` (drop, keep and rename columns), ``MaskField``,
``ValueToKey`` + ``ExtractField`` (re-keying) and ``HoistField``. Each works on the key or the
value (``$Key`` / ``$Value``, as in Java), with or without a schema, and follows Kafka 4.x so
that a copied config yields the same records, schemas included:

* a rebuilt struct schema keeps the original's name, version, doc and parameters but not its
  optionality (Connect's ``SchemaUtil.copySchemaBasics``), which shows in the JSON converter's
  ``"optional"``;
* a record whose key or value is null (a tombstone) passes unchanged;
* ``replace.null.with.default`` (default true) reads a null field as its schema's default.

Checked against Kafka's own classes running in Debezium Server:
``tests/integration/test_kafka_smt_parity.py``. Rebuilt schemas are cached per input schema.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from operator import attrgetter
from typing import Any, ClassVar

from cdc.record import SourceRecord
from cdc.schema import logical
from cdc.schema.model import (
    INT32,
    STRING,
    ZERO_VALUES,
    Schema,
    Type,
    struct,
)
from cdc.transforms.base import (
    PluginConfig,
    SchemaCache,
    Transformation,
    TransformError,
    copy_basics,
)


def field_value(value: Mapping[str, Any], name: str, schema: Schema, use_default: bool) -> Any:
    """``Struct.get`` (null read as the field's default) or ``getWithoutDefault``."""
    v = value.get(name)
    if v is None and use_default:
        return schema.default
    return v


def require_struct(value: Any, schema: Schema | None, purpose: str) -> dict[str, Any]:
    if not isinstance(value, dict) or (schema is not None and schema.type is not Type.STRUCT):
        kind = "Struct" if schema is not None else "Map"
        found = type(value).__name__ if value is not None else "null"
        raise TransformError(f"Only {kind} objects supported for [{purpose}], found: {found}")
    return value


class KeyOrValue(Transformation):
    """The ``$Key`` / ``$Value`` split: subclasses say which part they rewrite."""

    side: ClassVar[str] = "value"

    def schema_of(self, record: SourceRecord) -> Schema | None:
        return record.key_schema if self.side == "key" else record.value_schema

    def value_of(self, record: SourceRecord) -> Any:
        return record.key if self.side == "key" else record.value

    def replaced(self, record: SourceRecord, schema: Schema | None, value: Any) -> SourceRecord:
        if self.side == "key":
            return record.with_(key_schema=schema, key=value)
        return record.with_(value_schema=schema, value=value)


def _field_spec(raw: str | None) -> tuple[str, bool] | None:
    """InsertField's ``name!`` (required) / ``name?`` / ``name`` (optional)."""
    if not raw:
        return None
    if raw.endswith("!"):
        return raw[:-1], False
    if raw.endswith("?"):
        return raw[:-1], True
    return raw, True


class InsertField(KeyOrValue):
    """Adds the record's topic, Kafka partition and timestamp, or a static string, as fields."""

    PURPOSE = "field insertion"

    def __init__(self) -> None:
        self._cache: SchemaCache[Schema] = SchemaCache()

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        static_value = cfg.string("static.value")
        self._use_default = cfg.boolean("replace.null.with.default", True)
        if cfg.string("offset.field"):
            cfg.error(
                "offset.field",
                "the Kafka offset is only known to sink connectors; a source record has none",
            )
        cfg.check()
        #: (name, optional, schema, value of a record): built once, read per record
        self._additions: list[tuple[str, bool, Schema, Callable[[SourceRecord], Any]]] = []
        for key, schema, read in (
            ("topic.field", STRING, attrgetter("topic")),
            ("partition.field", INT32, attrgetter("kafka_partition")),
            ("timestamp.field", logical.connect_timestamp(), attrgetter("timestamp_ms")),
            ("static.field", STRING, lambda _record: static_value),
        ):
            spec = _field_spec(cfg.string(key))
            if spec is not None:
                name, optional = spec
                self._additions.append((name, optional, schema.with_(optional=optional), read))

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        value = self.value_of(record)
        if value is None:
            return record
        schema = self.schema_of(record)
        added = [(name, read(record)) for name, _, _, read in self._additions]
        for (name, v), (_, optional, _, _) in zip(added, self._additions, strict=True):
            if v is None and not optional:
                raise TransformError(
                    f"{self.PURPOSE}: required field {name!r} has no value on {record.topic}"
                )
        value = require_struct(value, schema, self.PURPOSE)
        if schema is None:
            return self.replaced(record, None, {**value, **dict(added)})
        updated = self._cache.get(schema)
        if updated is None:
            fields = [(f.name, f.schema) for f in schema.fields]
            fields += [(name, s) for name, _, s, _ in self._additions]
            updated = self._cache.put(schema, copy_basics(schema, fields))
        out = {
            f.name: field_value(value, f.name, f.schema, self._use_default) for f in schema.fields
        }
        out.update(added)
        return self.replaced(record, updated, out)


class InsertFieldKey(InsertField):
    side = "key"


class ReplaceField(KeyOrValue):
    """Keeps (``include``) or drops (``exclude``) fields and renames others (``old:new``)."""

    PURPOSE = "field replacement"

    def __init__(self) -> None:
        self._cache: SchemaCache[tuple[Schema, tuple[tuple[str, str, Schema], ...]]] = SchemaCache()

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._exclude = set(cfg.items("exclude") or cfg.items("blacklist"))
        self._include = set(cfg.items("include") or cfg.items("whitelist"))
        self._renames: dict[str, str] = {}
        self._reverse: dict[str, str] = {}
        for entry in cfg.items("renames"):
            parts = entry.split(":")
            if len(parts) != 2 or not parts[0] or not parts[1]:
                cfg.error("renames", f"Invalid rename mapping: {entry} (expected old:new)")
                continue
            self._renames[parts[0]] = parts[1]
            self._reverse[parts[1]] = parts[0]
        self._use_default = cfg.boolean("replace.null.with.default", True)
        cfg.check()

    def _kept(self, name: str) -> bool:
        return name not in self._exclude and (not self._include or name in self._include)

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        value = self.value_of(record)
        if value is None:
            return record
        schema = self.schema_of(record)
        value = require_struct(value, schema, self.PURPOSE)
        renames = self._renames
        if schema is None:
            kept = {renames.get(k, k): v for k, v in value.items() if self._kept(k)}
            return self.replaced(record, None, kept)
        cached = self._cache.get(schema)
        if cached is None:
            moves = tuple(
                (f.name, renames.get(f.name, f.name), f.schema)
                for f in schema.fields
                if self._kept(f.name)
            )
            updated = copy_basics(schema, [(new, s) for _, new, s in moves])
            cached = self._cache.put(schema, (updated, moves))
        updated, moves = cached
        use_default = self._use_default
        out = {new: field_value(value, old, s, use_default) for old, new, s in moves}
        return self.replaced(record, updated, out)


class ReplaceFieldKey(ReplaceField):
    side = "key"


class MaskField(KeyOrValue):
    """Replaces fields' values with their type's zero (``""``, ``0``, ``false``, empty list)
    or with ``replacement`` parsed as the field's type. A null stays null."""

    PURPOSE = "mask fields"

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._fields = set(cfg.items("fields"))
        if not self._fields:
            cfg.error("fields", "must name at least one field")
        self._replacement = cfg.string("replacement")
        if self._replacement == "":
            cfg.error("replacement", "must not be empty; leave it unset to mask with zeros")
        self._use_default = cfg.boolean("replace.null.with.default", True)
        cfg.check()

    def _masked(self, value: Any, schema: Schema | None, name: str) -> Any:
        if value is None:
            return None
        repl = self._replacement
        if isinstance(value, Decimal):
            # zero at the column's scale, so the converter writes it as the schema says
            scale = int((schema.parameters or {}).get("scale", 0)) if schema is not None else 0
            return Decimal(repl) if repl is not None else Decimal(0).scaleb(-scale)
        if isinstance(value, bool):
            return repl.strip().lower() == "true" if repl is not None else False
        try:
            # Java reads the replacement as a number first: "0.00" masks an int as 0, "1.5"
            # as 1 (truncated toward zero), "1e2" as 100
            if isinstance(value, int):
                return int(Decimal(repl)) if repl is not None else 0
            if isinstance(value, float):
                return float(Decimal(repl)) if repl is not None else 0.0
        except (ArithmeticError, ValueError) as exc:
            raise TransformError(
                f"Unable to convert {repl!r} ({type(value).__name__}) for field {name!r}"
            ) from exc
        if isinstance(value, str):
            return repl if repl is not None else ""
        if repl is not None:
            raise TransformError(
                f"Cannot mask value of type {type(value).__name__} with custom replacement "
                f"(field {name!r})"
            )
        if schema is not None and schema.type in ZERO_VALUES:
            zero = ZERO_VALUES[schema.type]
            return type(zero)() if isinstance(zero, list | dict) else zero
        if isinstance(value, list | dict | bytes):
            return type(value)()
        raise TransformError(f"Cannot mask value of type {type(value).__name__} ({name!r})")

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        value = self.value_of(record)
        if value is None:
            return record
        schema = self.schema_of(record)
        value = require_struct(value, schema, self.PURPOSE)
        if schema is None:
            masked = {
                k: self._masked(v, None, k) if k in self._fields else v for k, v in value.items()
            }
            return self.replaced(record, None, masked)
        out = {}
        for f in schema.fields:
            v = field_value(value, f.name, f.schema, self._use_default)
            out[f.name] = self._masked(v, f.schema, f.name) if f.name in self._fields else v
        return self.replaced(record, schema, out)


class MaskFieldKey(MaskField):
    side = "key"


class ValueToKey(Transformation):
    """The key becomes a struct of value fields (``fields``): a schema without a name."""

    PURPOSE = "copying fields from value to key"

    def __init__(self) -> None:
        self._cache: SchemaCache[Schema] = SchemaCache()

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._fields = cfg.items("fields")
        if not self._fields:
            cfg.error("fields", "must name at least one field")
        self._use_default = cfg.boolean("replace.null.with.default", True)
        cfg.check()

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        value, schema = record.value, record.value_schema
        if value is None:
            return record
        value = require_struct(value, schema, self.PURPOSE)
        if schema is None:
            return record.with_(key_schema=None, key={f: value.get(f) for f in self._fields})
        key_schema = self._cache.get(schema)
        if key_schema is None:
            fields = []
            for name in self._fields:
                f = schema.field(name)
                if f is None:
                    raise TransformError(f"Field does not exist: {name} (on {record.topic})")
                fields.append((name, f.schema))
            key_schema = self._cache.put(schema, struct(fields))
        key = {
            f.name: field_value(value, f.name, f.schema, self._use_default)
            for f in key_schema.fields
        }
        return record.with_(key_schema=key_schema, key=key)


class ExtractField(KeyOrValue):
    """The key (or value) becomes one of its fields, with that field's schema."""

    PURPOSE = "field extraction"

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._field = cfg.required("field")
        self._use_default = cfg.boolean("replace.null.with.default", True)
        version = cfg.choice("field.syntax.version", ("v1", "v2"), "v1")
        if version == "v2":
            cfg.error("field.syntax.version", "V2 (nested field paths) is not supported; use V1")
        cfg.check()

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        value, schema = self.value_of(record), self.schema_of(record)
        if schema is None:
            if value is not None and not isinstance(value, dict):
                raise TransformError(
                    f"Only Map objects supported for [{self.PURPOSE}], found: "
                    f"{type(value).__name__}"
                )
            return self.replaced(record, None, None if value is None else value.get(self._field))
        f = schema.field(self._field) if schema.type is Type.STRUCT else None
        if f is None:
            raise TransformError(f"Unknown field: {self._field} (on {record.topic})")
        if value is None:
            return self.replaced(record, f.schema, None)
        value = require_struct(value, schema, self.PURPOSE)
        return self.replaced(
            record, f.schema, field_value(value, f.name, f.schema, self._use_default)
        )


class ExtractFieldKey(ExtractField):
    side = "key"


class HoistField(KeyOrValue):
    """Wraps the key (or value) in a struct of one field, ``field``."""

    def __init__(self) -> None:
        self._cache: SchemaCache[Schema] = SchemaCache()

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._field = cfg.required("field")
        cfg.check()

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        value, schema = self.value_of(record), self.schema_of(record)
        if schema is None:
            return self.replaced(record, None, {self._field: value})
        updated = self._cache.get(schema)
        if updated is None:
            updated = self._cache.put(schema, struct([(self._field, schema)]))
        return self.replaced(record, updated, {self._field: value})


class HoistFieldKey(HoistField):
    side = "key"


__all__ = [
    "ExtractField",
    "ExtractFieldKey",
    "HoistField",
    "HoistFieldKey",
    "InsertField",
    "InsertFieldKey",
    "KeyOrValue",
    "MaskField",
    "MaskFieldKey",
    "ReplaceField",
    "ReplaceFieldKey",
    "ValueToKey",
    "field_value",
    "require_struct",
]
