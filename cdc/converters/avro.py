"""Confluent's ``AvroConverter``: Connect schemas mapped to Avro the way ``AvroData`` maps them,
records in the Confluent wire format (``0x00``, 4-byte big-endian schema id, Avro binary).

The Avro schema text matters beyond this process: the registry deduplicates by it and consumers
(the Spark apply job, Confluent deserialisers) rebuild Connect schemas from its ``connect.*``
properties, so the mapping follows ``AvroData.fromConnectSchema`` property by property, in
Avro's own key order. fastavro is given a copy without logical types: the rewriter already
produced the physical values (unscaled decimal bytes, epoch ints), which keeps encoding exact
and independent of fastavro's decimal and date handling.
"""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

import fastavro
import orjson

from cdc.converters.base import (
    ConversionError,
    Fix,
    SchemaRewriter,
    SettingError,
    config_bool,
    config_int,
    decimal_scale,
    decimal_to_unscaled,
    is_connect_decimal,
    temporal_fix,
    unscaled_to_decimal,
)
from cdc.converters.schema_registry import SchemaRegistryClient, canonical_schema
from cdc.schema.logical import (
    CONNECT_DATE,
    CONNECT_DECIMAL,
    CONNECT_TIME,
    CONNECT_TIMESTAMP,
    DECIMAL_PRECISION,
    DECIMAL_SCALE,
)
from cdc.schema.model import Field, Schema, Type
from cdc.schema.name_adjust import field_name

NAMESPACE = "io.confluent.connect.avro"
DEFAULT_SCHEMA_NAME = "ConnectDefault"
MAP_ENTRY_TYPE_NAME = "MapEntry"
RECORD_DOC_PROP = NAMESPACE + ".record.doc"
FIELD_DOC_PREFIX_PROP = NAMESPACE + ".field.doc."
FIELD_DEFAULT_FLAG_PROP = NAMESPACE + ".field.default"
DECIMAL_PRECISION_DEFAULT = 64

_PRIMITIVE = {
    Type.INT8: "int",
    Type.INT16: "int",
    Type.INT32: "int",
    Type.INT64: "long",
    Type.FLOAT32: "float",
    Type.FLOAT64: "double",
    Type.BOOLEAN: "boolean",
    Type.STRING: "string",
    Type.BYTES: "bytes",
}
_LOGICAL = {
    CONNECT_TIME.lower(): "time-millis",
    CONNECT_TIMESTAMP.lower(): "timestamp-millis",
    CONNECT_DATE.lower(): "date",
}
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


# -- names -------------------------------------------------------------------------------------
def sanitize_field_name(name: str) -> str:
    """Debezium's ``sanitize.field.names``: each invalid character becomes ``_``; a leading
    digit is kept behind a ``_`` (``1col`` → ``_1col``)."""
    return field_name(name, "avro")


def scrub_name(name: str) -> str:
    """AvroData's ``scrub.invalid.names``: URL-encode, then map what is still invalid to ``_``
    (and prefix ``x`` before a leading digit), so distinct names stay distinct."""
    if not name or _AVRO_NAME.match(name):
        return name
    encoded = []
    for ch in name:
        if ch.isascii() and (ch.isalnum() or ch in ".-*_"):
            encoded.append(ch)
        elif ch == " ":
            encoded.append("+")
        else:
            encoded.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    text = "".join(encoded)
    if text[0].isdigit():
        text = "x" + text
    return "".join(c if c == "_" or (c.isascii() and c.isalnum()) else "_" for c in text)


def split_name(full: str, scrub: bool = False) -> tuple[str | None, str]:
    parts = full.split(".")
    if scrub:
        parts = [scrub_name(p) for p in parts]
    if len(parts) == 1:
        return None, parts[0]
    return ".".join(parts[:-1]), parts[-1]


def _check_name(kind: str, name: str) -> None:
    if not _AVRO_NAME.match(name):
        raise ConversionError(
            f"{kind} {name!r} is not a valid Avro name; sanitise it (Debezium's schema name "
            "adjustment, sanitize.field.names) or set scrub.invalid.names=true"
        )


def _qualified(full: str, space: str | None) -> str:
    ns, name = split_name(full)
    return name if ns is None or ns == space else full


# -- Connect schema -> Avro schema -------------------------------------------------------------
class AvroSchemaBuilder:
    """``AvroData.fromConnectSchema`` for one top-level schema (one instance per schema: named
    types are defined at first use and referenced by name afterwards)."""

    def __init__(
        self,
        *,
        field_name: Callable[[str], str] = lambda n: n,
        scrub_invalid_names: bool = False,
        connect_meta_data: bool = True,
    ) -> None:
        self.field_name = field_name
        self.scrub = scrub_invalid_names
        self.meta = connect_meta_data
        self._named: dict[Schema, str] = {}
        self._defined: dict[str, Schema] = {}
        self._default_index = 0

    def build(self, schema: Schema, space: str | None = None) -> Any:
        if not schema.optional:
            return self._base(schema, space)
        if schema.type is Type.STRUCT:
            return ["null", self._base(schema.with_(optional=False), space)]
        base = self._base(schema, space)
        return [base, "null"] if schema.default is not None else ["null", base]

    def _base(self, schema: Schema, space: str | None) -> Any:
        t = schema.type
        props: dict[str, Any] = {}
        node: dict[str, Any]
        if t is Type.STRUCT:
            return self._record(schema, space)
        if t is Type.ARRAY:
            assert schema.value_schema is not None
            node = {"type": "array", "items": self.build(schema.value_schema, space)}
        elif t is Type.MAP:
            assert schema.key_schema is not None and schema.value_schema is not None
            if schema.key_schema.type is Type.STRING and not schema.key_schema.optional:
                node = {"type": "map", "values": self.build(schema.value_schema, space)}
            else:
                node = {"type": "array", "items": self._map_entry(schema, space)}
        else:
            node = {"type": _PRIMITIVE[t]}
            if t is Type.BYTES and (schema.name or "").lower() == CONNECT_DECIMAL.lower():
                params = schema.parameters or {}
                props["scale"] = decimal_scale(schema)
                props["precision"] = int(params.get(DECIMAL_PRECISION, DECIMAL_PRECISION_DEFAULT))
        props.update(self._meta(schema))
        if schema.name is not None:
            lowered = schema.name.lower()
            if lowered == CONNECT_DECIMAL.lower():
                props["logicalType"] = "decimal"
            elif lowered in _LOGICAL:
                props["logicalType"] = _LOGICAL[lowered]
        for key, value in schema.params or ():
            if key.startswith("avro"):
                props[key] = value
        node.update(props)
        return node["type"] if len(node) == 1 else node

    def _meta(self, schema: Schema) -> dict[str, Any]:
        """The ``connect.*`` properties that let AvroData rebuild the exact Connect schema."""
        props: dict[str, Any] = {}
        if not self.meta:
            return props
        params = schema.parameters or {}
        if schema.doc is not None:
            props["connect.doc"] = schema.doc
        if schema.version is not None:
            props["connect.version"] = schema.version
        kept = {k: v for k, v in params.items() if k != FIELD_DEFAULT_FLAG_PROP}
        if kept:
            props["connect.parameters"] = kept
        if schema.default is not None and FIELD_DEFAULT_FLAG_PROP not in params:
            props["connect.default"] = self.default_json(schema, schema.default)
        if schema.name is not None:
            props["connect.name"] = schema.name
        if schema.type is Type.INT8 or schema.type is Type.INT16:
            props["connect.type"] = schema.type.value
        return props

    def _names_for(self, name: str | None) -> tuple[str | None, str]:
        if name is not None:
            return split_name(name, self.scrub)
        self._default_index += 1
        suffix = str(self._default_index) if self._default_index > 1 else ""
        return NAMESPACE, DEFAULT_SCHEMA_NAME + suffix

    def _define(self, schema: Schema, ns: str | None, name: str, space: str | None) -> Any:
        """Start a named type, or return a reference when this schema was defined before."""
        full = f"{ns}.{name}" if ns else name
        for part in full.split("."):
            _check_name("Schema name", part)
        if full in self._defined:
            raise ConversionError(
                f"Avro cannot redefine {full!r}: two different Connect schemas share that name"
            )
        self._defined[full] = schema
        self._named[schema] = full
        node: dict[str, Any] = {"type": "record", "name": name}
        if ns is not None and ns != space:
            node["namespace"] = ns
        elif ns is None and space is not None:
            node["namespace"] = ""
        return node

    def _record(self, schema: Schema, space: str | None) -> Any:
        if schema in self._named:
            return _qualified(self._named[schema], space)
        ns, name = self._names_for(schema.name)
        node = self._define(schema, ns, name, space)
        params = schema.parameters or {}
        if RECORD_DOC_PROP in params:
            node["doc"] = params[RECORD_DOC_PROP]
        node["fields"] = [
            self._field(
                self.field_name(f.name), f.schema, params.get(FIELD_DOC_PREFIX_PROP + f.name), ns
            )
            for f in schema.fields
        ]
        node.update(self._meta(schema))
        return node

    def _map_entry(self, schema: Schema, space: str | None) -> Any:
        assert schema.key_schema is not None and schema.value_schema is not None
        plain = schema.with_(optional=False, default=None)
        if plain in self._named:
            return _qualified(self._named[plain], space)
        ns: str | None = NAMESPACE
        name = MAP_ENTRY_TYPE_NAME
        if schema.name is not None:
            ns, name = self._names_for(schema.name)
        node = self._define(plain, ns, name, space)
        node["fields"] = [
            self._field("key", schema.key_schema, None, ns),
            self._field("value", schema.value_schema, None, ns),
        ]
        if schema.name is not None:
            node["connect.internal.type"] = MAP_ENTRY_TYPE_NAME
        return node

    def _field(self, name: str, schema: Schema, doc: str | None, space: str | None) -> Any:
        _check_name("Field name", name)
        avro = self.build(schema, space)
        node: dict[str, Any] = {"name": name, "type": avro}
        if doc is not None:
            node["doc"] = doc
        if schema.default is not None:
            # Avro insists a default matches the union's first branch; AvroData drops it
            # (with a warning) when an optional struct puts null first.
            if not (isinstance(avro, list) and avro[0] == "null"):
                node["default"] = self.default_json(schema, schema.default)
        elif schema.optional:
            node["default"] = None
        return node

    def default_json(self, schema: Schema, value: Any) -> Any:
        """``AvroData.defaultValueFromConnect``: bytes as ISO-8859-1 text, as Avro JSON wants."""
        if value is None:
            return None
        if is_connect_decimal(schema):
            value = decimal_to_unscaled(value, decimal_scale(schema))
        else:
            fix = temporal_fix(schema)
            value = fix(value) if fix else value
        t = schema.type
        if t is Type.BYTES:
            return bytes(value).decode("latin-1")
        if t is Type.ARRAY:
            assert schema.value_schema is not None
            return [self.default_json(schema.value_schema, v) for v in value]
        if t is Type.MAP:
            assert schema.key_schema is not None and schema.value_schema is not None
            ks, vs = schema.key_schema, schema.value_schema
            if ks.type is Type.STRING and not ks.optional:
                return {k: self.default_json(vs, v) for k, v in value.items()}
            return [[self.default_json(ks, k), self.default_json(vs, v)] for k, v in value.items()]
        if t is Type.STRUCT:
            return {
                self.field_name(f.name): self.default_json(f.schema, value.get(f.name))
                for f in schema.fields
            }
        return value


def connect_to_avro(
    schema: Schema,
    *,
    sanitize_field_names: bool = False,
    scrub_invalid_names: bool = False,
    connect_meta_data: bool = True,
) -> Any:
    """The Avro schema (JSON-ready dict, list or string) AvroData derives from ``schema``."""
    return AvroSchemaBuilder(
        field_name=_field_namer(sanitize_field_names, scrub_invalid_names),
        scrub_invalid_names=scrub_invalid_names,
        connect_meta_data=connect_meta_data,
    ).build(schema)


def _field_namer(sanitize: bool, scrub: bool) -> Callable[[str], str]:
    if sanitize and scrub:
        return lambda n: scrub_name(sanitize_field_name(n))
    if sanitize:
        return sanitize_field_name
    if scrub:
        return scrub_name
    return lambda n: n


def physical_schema(avro: Any) -> Any:
    """``avro`` without ``logicalType`` annotations: what fastavro reads and writes with."""
    if isinstance(avro, list):
        return [physical_schema(b) for b in avro]
    if not isinstance(avro, dict):
        return avro
    out = {k: v for k, v in avro.items() if k != "logicalType"}
    if "fields" in out:
        out["fields"] = [{**f, "type": physical_schema(f["type"])} for f in out["fields"]]
    for key in ("items", "values"):
        if key in out:
            out[key] = physical_schema(out[key])
    if isinstance(out.get("type"), dict | list):
        out["type"] = physical_schema(out["type"])
    return out


# -- Avro schema -> Connect schema -------------------------------------------------------------
class _ToConnect:
    """``AvroData.toConnectSchema`` for the schemas this module writes (records, maps,
    map-entry arrays, optional unions, decimals and the ``connect.*`` properties)."""

    def __init__(self) -> None:
        self.named: dict[str, Schema] = {}

    def convert(self, node: Any, space: str | None = None) -> Schema:
        if isinstance(node, list):
            branches = [b for b in node if b != "null"]
            if len(node) != 2 or len(branches) != 1:
                raise ConversionError(f"Avro union {node!r} has no Connect equivalent here")
            return self.convert(branches[0], space).with_(optional=True)
        if isinstance(node, str):
            if node in _FROM_AVRO:
                return Schema(_FROM_AVRO[node])
            full = node if "." in node or space is None else f"{space}.{node}"
            found = self.named.get(full) or self.named.get(node)
            if found is None:
                raise ConversionError(f"unknown Avro type {node!r}")
            return found
        kind = node["type"]
        if isinstance(kind, dict | list):
            return self.convert(kind, space)
        if kind == "record":
            return self._record(node, space)
        if kind == "array":
            items = node["items"]
            entry = self._map_entry(items, space)
            if entry is not None:
                schema = Schema(Type.MAP, key_schema=entry[0], value_schema=entry[1])
            else:
                schema = Schema(Type.ARRAY, value_schema=self.convert(items, space))
        elif kind == "map":
            schema = Schema(
                Type.MAP,
                key_schema=Schema(Type.STRING),
                value_schema=self.convert(node["values"], space),
            )
        elif kind == "enum":
            schema = Schema(Type.STRING)
        elif kind == "fixed":
            schema = Schema(Type.BYTES)
        elif kind == "int" and node.get("connect.type") in ("int8", "int16"):
            schema = Schema(Type(node["connect.type"]))
        elif kind in _FROM_AVRO:
            schema = Schema(_FROM_AVRO[kind])
        else:
            raise ConversionError(f"unsupported Avro type {kind!r}")
        return self._annotate(schema, node)

    def _annotate(self, schema: Schema, node: dict[str, Any]) -> Schema:
        name = node.get("connect.name", schema.name)
        params = node.get("connect.parameters")
        logical = node.get("logicalType")
        if logical == "decimal" and name is None:
            name = CONNECT_DECIMAL
        if name == CONNECT_DECIMAL and params is None:
            params = {DECIMAL_SCALE: str(node.get("scale", 0))}
            if node.get("precision", DECIMAL_PRECISION_DEFAULT) != DECIMAL_PRECISION_DEFAULT:
                params[DECIMAL_PRECISION] = str(node["precision"])
        if name is None and logical in _LOGICAL_NAMES:
            name = _LOGICAL_NAMES[logical]
        version = node.get("connect.version")
        if version is None and name in _CONNECT_LOGICAL:
            version = 1
        schema = schema.with_(
            name=name,
            version=version,
            doc=node.get("connect.doc"),
            parameters=dict(params) if params is not None else None,
        )
        if node.get("connect.default") is not None:
            schema = schema.with_(default=_default_from_json(schema, node["connect.default"]))
        return schema

    def _record(self, node: dict[str, Any], space: str | None) -> Schema:
        ns, name = split_name(node["name"])
        ns = ns if ns is not None else node.get("namespace", space) or None
        full = f"{ns}.{name}" if ns else name
        fields = []
        for i, f in enumerate(node["fields"]):
            fields.append(Field(f["name"], i, self.convert(f["type"], ns)))
        conn_name = node.get("connect.name")
        if conn_name is None and not full.startswith(f"{NAMESPACE}.{DEFAULT_SCHEMA_NAME}"):
            conn_name = full
        schema = self._annotate(Schema(Type.STRUCT, name=conn_name, fields=tuple(fields)), node)
        self.named[full] = schema
        return schema

    def _map_entry(self, items: Any, space: str | None) -> tuple[Schema, Schema] | None:
        if not isinstance(items, dict) or items.get("type") != "record":
            return None
        ns, name = split_name(items["name"])
        ns = ns if ns is not None else items.get("namespace", space) or None
        is_entry = (ns == NAMESPACE and name == MAP_ENTRY_TYPE_NAME) or items.get(
            "connect.internal.type"
        ) == MAP_ENTRY_TYPE_NAME
        if not is_entry:
            return None
        by_name = {f["name"]: f["type"] for f in items["fields"]}
        return self.convert(by_name["key"], ns), self.convert(by_name["value"], ns)


_FROM_AVRO = {
    "int": Type.INT32,
    "long": Type.INT64,
    "float": Type.FLOAT32,
    "double": Type.FLOAT64,
    "boolean": Type.BOOLEAN,
    "string": Type.STRING,
    "bytes": Type.BYTES,
}
_LOGICAL_NAMES = {
    "date": CONNECT_DATE,
    "time-millis": CONNECT_TIME,
    "timestamp-millis": CONNECT_TIMESTAMP,
}
_CONNECT_LOGICAL = {CONNECT_DECIMAL, CONNECT_DATE, CONNECT_TIME, CONNECT_TIMESTAMP}


def _default_from_json(schema: Schema, value: Any) -> Any:
    if value is None:
        return None
    t = schema.type
    if t is Type.BYTES:
        raw = value.encode("latin-1")
        return (
            unscaled_to_decimal(raw, decimal_scale(schema)) if is_connect_decimal(schema) else raw
        )
    if t is Type.ARRAY:
        return [_default_from_json(schema.value_schema, v) for v in value]  # type: ignore[arg-type]
    if t is Type.MAP:
        ks, vs = schema.key_schema, schema.value_schema
        assert ks is not None and vs is not None
        if isinstance(value, dict):
            return {k: _default_from_json(vs, v) for k, v in value.items()}
        return {_default_from_json(ks, k): _default_from_json(vs, v) for k, v in value}
    if t is Type.STRUCT:
        return {f.name: _default_from_json(f.schema, value.get(f.name)) for f in schema.fields}
    return value


def avro_to_connect(avro: Any) -> Schema:
    """The Connect schema AvroData rebuilds from an Avro schema (parsed JSON)."""
    return _ToConnect().convert(avro)


def value_from_avro(schema: Schema, value: Any) -> Any:
    """A physical Avro value (as fastavro reads it without logical types) as a Connect value."""
    if value is None:
        return None
    t = schema.type
    if is_connect_decimal(schema):
        return unscaled_to_decimal(value, decimal_scale(schema))
    if t is Type.ARRAY:
        assert schema.value_schema is not None
        return [value_from_avro(schema.value_schema, v) for v in value]
    if t is Type.MAP:
        ks, vs = schema.key_schema, schema.value_schema
        assert ks is not None and vs is not None
        if isinstance(value, dict):
            return {k: value_from_avro(vs, v) for k, v in value.items()}
        return {value_from_avro(ks, e["key"]): value_from_avro(vs, e["value"]) for e in value}
    if t is Type.STRUCT:
        return {f.name: value_from_avro(f.schema, value.get(f.name)) for f in schema.fields}
    return value


# -- Connect values -> Avro values -------------------------------------------------------------
class _AvroRewriter(SchemaRewriter):
    """Decimals to their unscaled bytes, maps Avro cannot key to ``{key, value}`` records,
    renamed (sanitised) fields, and nulls replaced by defaults as ``Struct.get`` does.

    An optional named struct is handed to fastavro as ``(record name, value)``, fastavro's
    tuple notation for a union branch; otherwise fastavro validates the whole record against
    each branch to pick one, which costs more than writing it.
    """

    def __init__(
        self, field_name: Callable[[str], str], *, replace_null_with_default: bool, scrub: bool
    ) -> None:
        super().__init__(replace_null_with_default=replace_null_with_default)
        self._field_name = field_name
        self._scrub = scrub

    def compile(self, schema: Schema) -> Fix | None:
        inner = super().compile(schema)
        if schema.type is not Type.STRUCT or not schema.optional or schema.name is None:
            return inner
        ns, name = split_name(schema.name, self._scrub)
        branch = f"{ns}.{name}" if ns else name
        fix = inner or _identity

        def tag_branch(value: Any) -> Any:
            return None if value is None else (branch, fix(value))

        return tag_branch

    def leaf(self, schema: Schema) -> Fix | None:
        if is_connect_decimal(schema):
            scale = decimal_scale(schema)

            def unscaled(value: Any) -> Any:
                return None if value is None else decimal_to_unscaled(value, scale)

            return unscaled
        return temporal_fix(schema)

    def map_as_object(self, schema: Schema) -> bool:
        assert schema.key_schema is not None
        return schema.key_schema.type is Type.STRING and not schema.key_schema.optional

    def map_entry(self, key: Any, value: Any) -> Any:
        return {"key": key, "value": value}

    def field_name(self, name: str) -> str:
        return self._field_name(name)


def _identity(value: Any) -> Any:
    return value


# -- the converter -----------------------------------------------------------------------------
_STRATEGIES = {
    "io.confluent.kafka.serializers.subject.TopicNameStrategy": "topic",
    "io.confluent.kafka.serializers.subject.RecordNameStrategy": "record",
    "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy": "topic_record",
    "topic": "topic",
    "record": "record",
    "topic_record": "topic_record",
}


class _Writer:
    """Everything derived once from one Connect schema."""

    __slots__ = ("avro", "fix", "headers", "lock", "parsed", "record_name", "schema", "text")

    def __init__(self, schema: Schema, avro: Any, fix: Fix | None) -> None:
        self.schema = schema
        self.avro = avro
        self.text = canonical_schema(avro)
        self.parsed = fastavro.parse_schema(physical_schema(avro))
        self.fix = fix
        record = avro[-1] if isinstance(avro, list) else avro
        self.record_name: str | None = None
        if isinstance(record, dict) and record.get("type") == "record":
            ns = record.get("namespace")
            self.record_name = f"{ns}.{record['name']}" if ns else record["name"]
        self.headers: dict[tuple[str, bool], bytes] = {}
        self.lock = threading.Lock()

    def alias(self, schema: Schema) -> _Writer:
        """The same compiled state under another (equal) schema object."""
        twin = object.__new__(_Writer)
        for slot in _Writer.__slots__:
            setattr(twin, slot, getattr(self, slot))
        twin.schema = schema
        return twin


class AvroConverter:
    """``io.confluent.connect.avro.AvroConverter`` against a Confluent-compatible registry.

    Config (prefix already stripped): ``schema.registry.url``, ``auto.register.schemas``
    (true), ``key.subject.name.strategy`` / ``value.subject.name.strategy`` (TopicNameStrategy),
    ``connect.meta.data`` (true), ``scrub.invalid.names`` (false),
    ``ignore.default.for.nullables`` (false), ``schemas.cache.size`` (1000) and Debezium's
    ``sanitize.field.names`` (true once Avro is chosen).
    """

    def __init__(
        self,
        registry: SchemaRegistryClient,
        *,
        is_key: bool = False,
        auto_register: bool = True,
        subject_name_strategy: str = "topic",
        connect_meta_data: bool = True,
        sanitize_field_names: bool = True,
        scrub_invalid_names: bool = False,
        ignore_default_for_nullables: bool = False,
        cache_size: int = 1000,
    ) -> None:
        if subject_name_strategy not in _STRATEGIES:
            raise ValueError(f"unknown subject name strategy {subject_name_strategy!r}")
        self.registry = registry
        self.is_key = is_key
        self.auto_register = auto_register
        self.strategy = _STRATEGIES[subject_name_strategy]
        self.connect_meta_data = connect_meta_data
        self.scrub = scrub_invalid_names
        self.cache_size = max(1, cache_size)
        self._namer = _field_namer(sanitize_field_names, scrub_invalid_names)
        self._rewriter = _AvroRewriter(
            self._namer,
            replace_null_with_default=not ignore_default_for_nullables,
            scrub=scrub_invalid_names,
        )
        self._writers: dict[int, _Writer] = {}
        self._by_schema: dict[Schema, _Writer] = {}
        self._lock = threading.Lock()  # taken on cache misses only
        self._readers: dict[int, tuple[Schema, Any]] = {}
        self._owns_registry = False

    def field_name(self, name: str) -> str:
        """The Avro name a column or field ``name`` is written under (``sanitize.field.names``,
        ``scrub.invalid.names``): what a reader of the topic finds it as."""
        return self._namer(name)

    def close(self) -> None:
        """Close the registry client if this converter created it (``from_config``)."""
        if self._owns_registry:
            self.registry.close()

    @classmethod
    def from_config(
        cls,
        cfg: Mapping[str, Any],
        *,
        is_key: bool,
        registry: SchemaRegistryClient | None = None,
    ) -> AvroConverter:
        owns = registry is None
        if registry is None:
            url = cfg.get("schema.registry.url")
            if not url:
                raise SettingError(
                    "schema.registry.url", "is required by the Avro converter (the registry's URL)"
                )
            registry = SchemaRegistryClient(str(url))
        side = "key" if is_key else "value"
        strategy = str(cfg.get(f"{side}.subject.name.strategy", "topic"))
        if strategy not in _STRATEGIES:
            raise SettingError(
                f"{side}.subject.name.strategy", f"must be one of {', '.join(_STRATEGIES)}"
            )
        converter = cls(
            registry,
            is_key=is_key,
            auto_register=config_bool(cfg, "auto.register.schemas", True),
            subject_name_strategy=strategy,
            connect_meta_data=config_bool(cfg, "connect.meta.data", True),
            sanitize_field_names=config_bool(cfg, "sanitize.field.names", True),
            scrub_invalid_names=config_bool(cfg, "scrub.invalid.names", False),
            ignore_default_for_nullables=config_bool(cfg, "ignore.default.for.nullables", False),
            cache_size=config_int(cfg, "schemas.cache.size", 1000),
        )
        converter._owns_registry = owns
        return converter

    def avro_schema(self, schema: Schema) -> Any:
        """The Avro schema registered for ``schema`` (parsed JSON)."""
        return self._writer(schema).avro

    def from_connect(
        self, topic: str, schema: Schema | None, value: Any, *, is_key: bool | None = None
    ) -> bytes | None:
        if value is None:
            if schema is not None and not schema.optional:
                raise ConversionError("Found null value for non-optional schema")
            return None  # Confluent's serializer writes null for null: the tombstone.
        if schema is None:
            raise ConversionError(
                "AvroConverter needs a schema; schemaless values are not supported"
            )
        writer = self._writers.get(id(schema))
        if writer is None or writer.schema is not schema:
            writer = self._writer(schema)
        side = self.is_key if is_key is None else is_key
        header = writer.headers.get((topic, side))
        if header is None:
            header = self._header(writer, topic, side)
        if writer.fix is not None:
            value = writer.fix(value)
        out = io.BytesIO()
        out.write(header)
        fastavro.schemaless_writer(out, writer.parsed, value)
        return out.getvalue()

    def to_connect(
        self, topic: str, data: bytes | None, *, is_key: bool | None = None
    ) -> tuple[Schema | None, Any]:
        if data is None:
            return None, None
        if len(data) < 5 or data[0] != 0:
            raise ConversionError("Unknown magic byte!")
        schema_id = int.from_bytes(data[1:5], "big")
        reader = self._readers.get(schema_id)
        if reader is None:
            avro = orjson.loads(self.registry.get_schema(schema_id))
            reader = (avro_to_connect(avro), fastavro.parse_schema(physical_schema(avro)))
            self._readers[schema_id] = reader
        schema, parsed = reader
        raw = fastavro.schemaless_reader(io.BytesIO(data[5:]), parsed, None)
        return schema, value_from_avro(schema, raw)

    def subject(self, topic: str, schema: Schema, *, is_key: bool | None = None) -> str:
        side = self.is_key if is_key is None else is_key
        return self._subject(topic, side, self._writer(schema))

    def _subject(self, topic: str, is_key: bool, writer: _Writer) -> str:
        if self.strategy == "topic":
            return f"{topic}-{'key' if is_key else 'value'}"
        if writer.record_name is None:
            raise ConversionError("RecordNameStrategy needs a record (struct) schema")
        if self.strategy == "record":
            return writer.record_name
        return f"{topic}-{writer.record_name}"

    def _header(self, writer: _Writer, topic: str, is_key: bool) -> bytes:
        subject = self._subject(topic, is_key, writer)
        if self.auto_register:
            schema_id = self.registry.register(subject, writer.text)
        else:
            schema_id = self.registry.id_for(subject, writer.text)
        header = b"\x00" + schema_id.to_bytes(4, "big")
        with writer.lock:
            writer.headers[(topic, is_key)] = header
        return header

    def _writer(self, schema: Schema) -> _Writer:
        found = self._writers.get(id(schema))
        if found is not None and found.schema is schema:
            return found
        with self._lock:
            return self._writer_locked(schema)

    def _writer_locked(self, schema: Schema) -> _Writer:
        # Equal schemas rebuilt as new objects share one Avro schema (and registration).
        shared = self._by_schema.get(schema)
        if shared is None:
            builder = AvroSchemaBuilder(
                field_name=self._namer,
                scrub_invalid_names=self.scrub,
                connect_meta_data=self.connect_meta_data,
            )
            shared = _Writer(schema, builder.build(schema), self._rewriter.compile(schema))
            if len(self._by_schema) >= self.cache_size:
                del self._by_schema[next(iter(self._by_schema))]
            self._by_schema[schema] = shared
        writer = shared if shared.schema is schema else shared.alias(schema)
        if len(self._writers) >= self.cache_size:
            del self._writers[next(iter(self._writers))]
        self._writers[id(schema)] = writer
        return writer
