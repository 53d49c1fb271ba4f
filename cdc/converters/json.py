"""Kafka's ``JsonConverter``, byte-compatible: ``{"schema": ..., "payload": ...}`` or the bare
payload when ``schemas.enable=false``.

The schema half never changes for a given ``Schema`` object, so it is serialised once and the
record is assembled by byte concatenation around a single ``orjson.dumps`` of the payload. The
payload goes to orjson as it is unless the schema has a position orjson would render differently
from Jackson (see ``_JsonRewriter``); BYTES need no walk at all because orjson hands ``bytes`` to
the ``default`` hook, which base64-encodes them as Jackson's binary node does.

That is the reference. When the C writer ``cdc.converters._json_c`` was built (and
``TIDEMARK_PURE_PYTHON`` is not set), the payload is written by it instead, straight from the
value, following a plan built from the same rewriter (``_plan``); see "the compiled payload
writer" below and docs/architecture.md, "Compiled parts".
"""

from __future__ import annotations

import base64
import binascii
import decimal
import functools
import itertools
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

import orjson

from cdc import compiled
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
from cdc.schema.logical import signed_bytes
from cdc.schema.model import Field, Schema, Type

_dumps = orjson.dumps
_join = b"".join
_b64 = binascii.b2a_base64


def _default(obj: Any) -> Any:
    """orjson's fallback: BYTES (and schemaless decimals) the way Jackson writes them."""
    if isinstance(obj, bytes | bytearray | memoryview):
        return _b64(obj, newline=False).decode("ascii")
    if isinstance(obj, decimal.Decimal):
        return orjson.Fragment(str(obj))
    raise TypeError(f"{type(obj).__name__} is not a Connect value")


def _float_fix(value: Any) -> Any:
    # Jackson quotes non-finite doubles ("NaN", "Infinity", "-Infinity"); orjson writes null.
    if value is None or value - value == 0:
        return value
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


class _JsonRewriter(SchemaRewriter):
    """Rewrites exactly what orjson would render differently from Jackson: Connect decimals
    (base64 of the unscaled bytes, or a JSON number with ``decimal.format=NUMERIC``),
    non-finite floats, maps with non-string keys (a list of ``[key, value]`` pairs) and nulls
    that Kafka replaces with the schema default."""

    def __init__(self, *, numeric_decimals: bool, replace_null_with_default: bool) -> None:
        super().__init__(replace_null_with_default=replace_null_with_default)
        self.numeric_decimals = numeric_decimals

    def leaf(self, schema: Schema) -> Fix | None:
        if is_connect_decimal(schema):
            scale = decimal_scale(schema)
            if self.numeric_decimals:

                def numeric(value: Any) -> Any:
                    if value is None:
                        return None
                    unscaled = decimal_to_unscaled(value, scale)
                    return orjson.Fragment(str(unscaled_to_decimal(unscaled, scale)))

                return numeric

            factor = 10**scale
            exact = decimal.Decimal

            def b64(value: Any) -> Any:
                if value is None:
                    return None
                # Fast path for the usual value, a finite Decimal already representable at the
                # schema's scale (connectors quantize): the exact ratio gives the unscaled int
                # without decimal arithmetic. Anything else takes the rounding path.
                if type(value) is exact:
                    try:
                        num, den = value.as_integer_ratio()
                    except (ValueError, OverflowError):  # NaN, infinities: as before
                        den = 0
                    if den and not factor % den:
                        u = num * (factor // den)
                        return _b64(signed_bytes(u), newline=False).decode("ascii")
                return _b64(decimal_to_unscaled(value, scale), newline=False).decode("ascii")

            return b64
        if schema.type is Type.FLOAT32 or schema.type is Type.FLOAT64:
            return _float_fix
        return temporal_fix(schema)

    def compile(self, schema: Schema) -> Fix | None:
        fix = super().compile(schema)
        if (
            fix is not None
            and schema.type not in _CONTAINERS
            and schema.default is not None
            and self.replace_null_with_default
            and self.leaf(schema) is None
        ):
            # Only the null-to-default fill: a marked fix the struct code inlines.
            return _Fill(fix, schema.default)
        return fix

    def _struct(self, schema: Schema) -> Fix | None:
        """The base class's struct walk, as generated straight-line code: one ``get`` and one
        call per field that needs rewriting, no loop, and a copy only when something changed
        (the envelope's struct is rewritten for every event, so the loop overhead showed)."""
        fixes = [(f.name, self.compile(f.schema)) for f in schema.fields]
        active = [(name, fx) for name, fx in fixes if fx is not None]
        if not active:
            return None
        return _generated_struct_fix(active)


_CONTAINERS = (Type.STRUCT, Type.ARRAY, Type.MAP)


class _Fill:
    """A fix that only replaces null with a default (``source.snapshot``, say): still
    callable, but recognised by the generated struct code, which inlines it."""

    __slots__ = ("default", "fix")

    def __init__(self, fix: Fix, default: Any) -> None:
        self.fix = fix
        self.default = default

    def __call__(self, value: Any) -> Any:
        return self.fix(value)


def _keeps_null(fx: Fix) -> bool:
    """Whether a (pure) fix maps a null to a null, asked once at compile time."""
    try:
        return fx(None) is None
    except Exception:
        return False


def _generated_struct_fix(active: list[tuple[str, Fix]]) -> Fix:
    """``fix(value)`` rewriting the named fields, with the base class's semantics: missing
    fields are fixed from ``None``; the input comes back as is when no field changed,
    otherwise a copy with the changed fields replaced (in place, so the key order stays).

    A field whose fix is itself a generated struct fix (the envelope's ``before``, ``after``
    and ``source``) is inlined rather than called: one function per envelope, not four, saves
    three Python calls per event."""
    ns: dict[str, Any] = {}
    lines = ["def fix_struct(value):", "    if value is None:", "        return None"]
    _struct_lines(active, "value", "out", ns, lines, 4, itertools.count())
    lines.append("    return out")
    exec(compile("\n".join(lines) + "\n", "<tidemark:json-struct-fix>", "exec"), ns)
    fn: Any = ns["fix_struct"]
    fn.struct_fields = active  # what a struct around this one inlines
    return cast(Fix, fn)


def _struct_lines(
    active: list[tuple[str, Fix]],
    value: str,
    result: str,
    ns: dict[str, Any],
    lines: list[str],
    indent: int,
    ids: Iterator[int],
) -> None:
    """Code that sets ``result`` to the fixed copy of the (non-null) dict ``value``, or to
    ``value`` itself when no field changed; names are numbered per struct, so nested structs
    inline without clashes."""
    k = next(ids)
    pad = " " * indent
    lines.append(f"{pad}g{k} = {value}.get")
    names = []
    for i, (name, fx) in enumerate(active):
        o, n, f = f"o{k}_{i}", f"n{k}_{i}", f"f{k}_{i}"
        nested = getattr(fx, "struct_fields", None)
        if isinstance(fx, _Fill):
            ns[f] = fx.default
            lines.append(f"{pad}{n} = {f} if ({o} := g{k}({name!r})) is None else {o}")
        elif nested is not None:  # a generated struct fix: null stays null, else inline it
            lines.append(f"{pad}if ({o} := g{k}({name!r})) is None:")
            lines.append(f"{pad}    {n} = None")
            lines.append(f"{pad}else:")
            _struct_lines(nested, o, n, ns, lines, indent + 4, ids)
        elif _keeps_null(fx):  # a null that stays null needs no call
            ns[f] = fx
            lines.append(f"{pad}{n} = None if ({o} := g{k}({name!r})) is None else {f}({o})")
        else:
            ns[f] = fx
            lines.append(f"{pad}{n} = {f}({o} := g{k}({name!r}))")
        names.append((name, o, n))
    same = " and ".join(f"{n} is {o}" for _, o, n in names)
    lines += [f"{pad}if {same}:", f"{pad}    {result} = {value}", f"{pad}else:"]
    lines.append(f"{pad}    {result} = dict({value})")
    for name, o, n in names:
        lines.append(f"{pad}    if {n} is not {o}:")
        lines.append(f"{pad}        {result}[{name!r}] = {n}")


# -- the compiled payload writer ---------------------------------------------------------------
# cdc/converters/_json_c.c writes the payload straight from the Connect value, doing the
# rewrites above as it goes, instead of building the rewritten copy for orjson. It follows a
# per-schema plan built here from the same rewriter, so the two cannot drift apart: a plan
# node is (kind, JSON written for None, the reference's leaf fix, decimal scale, a, b), where
# a/b are the struct's fields ((name, b'"name":', filled when missing, node), ...),
# an array's item node or a map's value node, or a pair map's key and value nodes.
_K_RAW, _K_DEC, _K_FLOAT, _K_INTPASS, _K_FIX, _K_STRUCT, _K_ARRAY, _K_MAP_OBJ, _K_MAP_PAIRS = range(
    9
)
_RAW_NODE: tuple[Any, ...] = (_K_RAW, b"null", None, 0, None, None)

_c = compiled.load("cdc.converters._json_c")
if _c is not None:
    _c.configure(functools.partial(_dumps, default=_default), _dumps, decimal.Decimal)


def _plan(rw: _JsonRewriter, schema: Schema) -> tuple[tuple[Any, ...], bool] | None:
    """The plan node for values at ``schema``'s position and whether a missing struct field
    there is filled in (its fix turns None into a value); None where the reference leaves
    the value as it is. Raises where the reference's fix cannot take None (the converter then
    keeps the reference for that schema)."""
    fx = rw.compile(schema)
    if fx is None:
        return None
    filled = fx(None)
    null_json = _dumps(filled, default=_default)
    t = schema.type
    node: tuple[Any, ...] = (_K_RAW, null_json, None, 0, None, None)
    if t is Type.STRUCT:
        # every field, rewritten or not: the writer finds a key's field by identity first
        plans = [(f, _plan(rw, f.schema)) for f in schema.fields]
        if any(p is not None for _, p in plans):
            fields = tuple(
                (f.name, _dumps(f.name) + b":", p[1] if p else False, p[0] if p else _RAW_NODE)
                for f, p in plans
            )
            node = (_K_STRUCT, null_json, None, 0, fields, None)
    elif t is Type.ARRAY or t is Type.MAP:
        assert schema.value_schema is not None
        item = _plan(rw, schema.value_schema)
        if t is Type.MAP and not rw.map_as_object(schema):
            assert schema.key_schema is not None
            key = _plan(rw, schema.key_schema)
            node = (
                _K_MAP_PAIRS,
                null_json,
                None,
                0,
                key[0] if key else _RAW_NODE,
                item[0] if item else _RAW_NODE,
            )
        elif item is not None:
            node = (_K_ARRAY if t is Type.ARRAY else _K_MAP_OBJ, null_json, None, 0, item[0], None)
    elif (leaf := rw.leaf(schema)) is not None:
        if is_connect_decimal(schema) and not rw.numeric_decimals:
            node = (_K_DEC, null_json, leaf, decimal_scale(schema), None, None)
        elif t is Type.FLOAT32 or t is Type.FLOAT64:
            node = (_K_FLOAT, null_json, leaf, 0, None, None)
        elif leaf is temporal_fix(schema):
            node = (_K_INTPASS, null_json, leaf, 0, None, None)
        else:
            node = (_K_FIX, null_json, leaf, 0, None, None)
    return node, filled is not None


def _compiled_plan(rw: _JsonRewriter, schema: Schema) -> object | None:
    """The compiled writer's plan for ``schema``, or None to keep the reference for it."""
    if _c is None:
        return None
    try:
        root = _plan(rw, schema)
        plan: object = _c.compile_plan(root[0] if root else _RAW_NODE)
        return plan
    except Exception:  # a fix that cannot take None, say: the reference handles the schema
        return None


# -- schema <-> JSON ---------------------------------------------------------------------------
# Kafka's JsonSchema spells the two floating types the Java way.
_JSON_TYPE_NAMES = {Type.FLOAT32: "float", Type.FLOAT64: "double"}


def schema_to_json(schema: Schema, rewriter: SchemaRewriter | None = None) -> dict[str, Any]:
    """``JsonConverter.asJsonSchema``: key order type, fields/items/keys+values, optional, name,
    version, doc, parameters, default; a struct field is its schema followed by ``"field"``."""
    node: dict[str, Any] = {"type": _JSON_TYPE_NAMES.get(schema.type, schema.type.value)}
    if schema.type is Type.STRUCT:
        node["fields"] = [
            {**schema_to_json(f.schema, rewriter), "field": f.name} for f in schema.fields
        ]
    elif schema.type is Type.ARRAY:
        assert schema.value_schema is not None
        node["items"] = schema_to_json(schema.value_schema, rewriter)
    elif schema.type is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        node["keys"] = schema_to_json(schema.key_schema, rewriter)
        node["values"] = schema_to_json(schema.value_schema, rewriter)
    node["optional"] = schema.optional
    if schema.name is not None:
        node["name"] = schema.name
    if schema.version is not None:
        node["version"] = schema.version
    if schema.doc is not None:
        node["doc"] = schema.doc
    if schema.params is not None:
        node["parameters"] = dict(schema.params)
    if schema.default is not None:
        fix = (rewriter or _PLAIN).compile(schema.with_(default=None))
        node["default"] = fix(schema.default) if fix else schema.default
    return node


_TYPES = {t.value: t for t in Type} | {"float": Type.FLOAT32, "double": Type.FLOAT64}


def schema_from_json(node: Any) -> Schema | None:
    """``JsonConverter.asConnectSchema``: the inverse of ``schema_to_json``."""
    if node is None:
        return None
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        raise ConversionError("Schema must contain 'type' field")
    type_ = _TYPES.get(node["type"])
    if type_ is None:
        raise ConversionError(f"Unknown schema type: {node['type']}")
    fields: tuple[Field, ...] = ()
    key = value = None
    if type_ is Type.STRUCT:
        raw = node.get("fields")
        if not isinstance(raw, list):
            raise ConversionError('Struct schema\'s "fields" argument is not an array.')
        built = []
        for i, f in enumerate(raw):
            name = f.get("field") if isinstance(f, dict) else None
            if not isinstance(name, str):
                raise ConversionError("Struct schema's field name not specified properly")
            child = schema_from_json(f)
            assert child is not None
            built.append(Field(name, i, child))
        fields = tuple(built)
    elif type_ is Type.ARRAY:
        if node.get("items") is None:
            raise ConversionError("Array schema did not specify the element type")
        value = schema_from_json(node["items"])
    elif type_ is Type.MAP:
        if "keys" not in node or "values" not in node:
            raise ConversionError("Map schema did not specify the key or value type")
        key, value = schema_from_json(node["keys"]), schema_from_json(node["values"])
    params = node.get("parameters")
    if params is not None and (
        not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values())
    ):
        raise ConversionError("Schema parameters must have string values.")
    version = node.get("version")
    schema = Schema(
        type_,
        optional=node.get("optional") is True,
        name=node["name"] if isinstance(node.get("name"), str) else None,
        version=version if isinstance(version, int) and not isinstance(version, bool) else None,
        doc=node["doc"] if isinstance(node.get("doc"), str) else None,
        params=tuple(params.items()) if params is not None else None,
        fields=fields,
        key_schema=key,
        value_schema=value,
    )
    if node.get("default") is not None:
        schema = schema.with_(default=value_from_json(schema, node["default"]))
    return schema


# -- JSON -> Connect values --------------------------------------------------------------------
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_INTS = (Type.INT8, Type.INT16, Type.INT32, Type.INT64)


def value_from_json(schema: Schema | None, node: Any) -> Any:
    """``JsonConverter.convertToConnect``. Numbers arrive as ``Decimal`` (the parser keeps full
    precision, like Kafka's USE_BIG_DECIMAL_FOR_FLOATS) and are narrowed by the schema."""
    if schema is None:
        return _schemaless_from_json(node)
    if node is None:
        if schema.default is not None:
            return schema.default
        if schema.optional:
            return None
        raise ConversionError(f"Invalid null value for required {schema.type.value} field")
    t = schema.type
    if is_connect_decimal(schema):
        if isinstance(node, decimal.Decimal | int):
            return decimal.Decimal(node)
        try:
            return unscaled_to_decimal(base64.b64decode(node, validate=True), decimal_scale(schema))
        except (binascii.Error, TypeError, ValueError):
            raise ConversionError("Invalid bytes for Decimal field") from None
    if t in _INTS:
        return int(node)
    if t is Type.FLOAT32 or t is Type.FLOAT64:
        if isinstance(node, str) and node in _NON_FINITE:
            return _NON_FINITE[node]
        return float(node)
    if t is Type.BOOLEAN or t is Type.STRING:
        return node
    if t is Type.BYTES:
        try:
            return base64.b64decode(node, validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise ConversionError("Invalid bytes field") from None
    if t is Type.ARRAY:
        return [value_from_json(schema.value_schema, v) for v in node]
    if t is Type.MAP:
        return _map_from_json(schema, node)
    if not isinstance(node, dict):
        raise ConversionError("Structs should be encoded as JSON objects")
    return {f.name: value_from_json(f.schema, node.get(f.name)) for f in schema.fields}


def _map_from_json(schema: Schema, node: Any) -> dict[Any, Any]:
    assert schema.key_schema is not None
    if schema.key_schema.type is Type.STRING:
        if not isinstance(node, dict):
            raise ConversionError("Maps with string fields should be encoded as JSON objects")
        return {k: value_from_json(schema.value_schema, v) for k, v in node.items()}
    if not isinstance(node, list):
        raise ConversionError("Maps with non-string fields should be encoded as arrays of tuples")
    out = {}
    for entry in node:
        if not isinstance(entry, list) or len(entry) != 2:
            raise ConversionError(f"Found invalid map entry: {entry!r}")
        out[value_from_json(schema.key_schema, entry[0])] = value_from_json(
            schema.value_schema, entry[1]
        )
    return out


def _schemaless_from_json(node: Any) -> Any:
    if isinstance(node, decimal.Decimal):
        return float(node)
    if isinstance(node, list):
        return [_schemaless_from_json(v) for v in node]
    if isinstance(node, dict):
        return {k: _schemaless_from_json(v) for k, v in node.items()}
    return node


def _schemaless_to_json(value: Any) -> Any:
    """Without a schema Kafka infers the encoding: maps with non-string keys become pairs."""
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: _schemaless_to_json(v) for k, v in value.items()}
        return [[_schemaless_to_json(k), _schemaless_to_json(v)] for k, v in value.items()]
    if isinstance(value, list | tuple):
        return [_schemaless_to_json(v) for v in value]
    if isinstance(value, float):
        return _float_fix(value)
    return value


_PLAIN = _JsonRewriter(numeric_decimals=False, replace_null_with_default=True)
_NO_SCHEMA = object()


def _no_writer(*args: Any) -> bytes:
    raise RuntimeError("the compiled JSON writer was not built")  # plans exist only with it


_encode: Callable[..., bytes] = _c.encode if _c is not None else _no_writer
#: per schema: the schema head, the reference's fix, the payload of a null value, the plan
_Compiled = tuple[bytes, Fix | None, bytes | None, object | None]
_Entry = tuple[Schema, bytes, Fix | None, bytes | None, object | None]


# -- the converter -----------------------------------------------------------------------------
class JsonConverter:
    """``org.apache.kafka.connect.json.JsonConverter``.

    Config: ``schemas.enable`` (default true), ``schemas.cache.size`` (1000),
    ``decimal.format`` (``BASE64`` or ``NUMERIC``), ``replace.null.with.default`` (true).
    """

    def __init__(self, config: Mapping[str, Any] | None = None, *, is_key: bool = False) -> None:
        cfg = config or {}
        self.is_key = is_key
        self.schemas_enable = config_bool(cfg, "schemas.enable", True)
        self.cache_size = max(1, config_int(cfg, "schemas.cache.size", 1000))
        fmt = str(cfg.get("decimal.format", "BASE64")).upper()
        if fmt not in ("BASE64", "NUMERIC"):
            raise SettingError("decimal.format", f"must be BASE64 or NUMERIC, got {fmt!r}")
        self.decimal_format = fmt
        self._rewriter = _JsonRewriter(
            numeric_decimals=fmt == "NUMERIC",
            replace_null_with_default=config_bool(cfg, "replace.null.with.default", True),
        )
        if self.schemas_enable:
            self._null_head, self._tail = b'{"schema":null,"payload":', b"}"
        else:
            self._null_head, self._tail = b"", b""
        # Hot path: identity lookup (Schema.__hash__ walks the whole schema, too slow per
        # event); the entry pins the schema so its id cannot be reused while cached.
        self._by_id: dict[int, _Entry] = {}
        # Equal-but-distinct schema objects (rebuilt per batch, say) share one compilation.
        self._by_schema: OrderedDict[Schema, _Compiled] = OrderedDict()
        self._lock = threading.Lock()  # taken on cache misses only

    def from_connect(
        self, topic: str, schema: Schema | None, value: Any, *, is_key: bool | None = None
    ) -> bytes | None:
        if schema is None:
            if value is None:
                return None  # Kafka's tombstone: no schema and no value.
            return (
                self._null_head + _dumps(_schemaless_to_json(value), default=_default) + self._tail
            )
        entry = self._by_id.get(id(schema))
        if entry is None or entry[0] is not schema:
            entry = self._compile(schema)
        _, head, fix, null_payload, plan = entry
        if value is None:
            if null_payload is None:
                raise ConversionError(
                    "Conversion error: null value for field that is required and has no "
                    "default value"
                )
            return head + null_payload + self._tail
        if plan is not None:
            try:
                return _encode(plan, value, head, self._tail)
            except Exception:
                pass  # the reference decides: the same bytes, or its own error
        if fix is not None:
            value = fix(value)
        # one join, one copy of the (kilobytes of) schema head; "+ +" would copy it twice
        return _join((head, _dumps(value, default=_default), self._tail))

    def to_connect(
        self, topic: str, data: bytes | None, *, is_key: bool | None = None
    ) -> tuple[Schema | None, Any]:
        if data is None:
            return None, None
        try:
            doc = json.loads(data, parse_float=decimal.Decimal)
        except ValueError as exc:
            raise ConversionError(
                f"Converting byte[] to Kafka Connect data failed: {exc}"
            ) from None
        if not self.schemas_enable:
            return None, _schemaless_from_json(doc)
        if not isinstance(doc, dict) or set(doc) != {"schema", "payload"}:
            raise ConversionError(
                'JsonConverter with schemas.enable requires "schema" and "payload" fields and '
                "may not contain additional fields. If you are trying to deserialize plain JSON "
                "data, set schemas.enable=false in your converter configuration."
            )
        schema = schema_from_json(doc["schema"])
        return schema, value_from_json(schema, doc["payload"])

    def schema_json(self, schema: Schema) -> bytes:
        """The serialised ``schema`` half, as cached (useful for tests and the REST API)."""
        return orjson.dumps(schema_to_json(schema, self._rewriter), default=_default)

    def _compile(self, schema: Schema) -> _Entry:
        with self._lock:
            return self._compile_locked(schema)

    def _compile_locked(self, schema: Schema) -> _Entry:
        hit = self._by_schema.get(schema)
        if hit is None:
            fix = self._rewriter.compile(schema)
            head = b""
            if self.schemas_enable:
                head = b'{"schema":' + self.schema_json(schema) + b',"payload":'
            null_payload: bytes | None = None
            if schema.default is not None and self._rewriter.replace_null_with_default:
                null_payload = _dumps(fix(None) if fix else schema.default, default=_default)
            elif schema.optional:
                null_payload = b"null"
            hit = (head, fix, null_payload, _compiled_plan(self._rewriter, schema))
            self._by_schema[schema] = hit
            if len(self._by_schema) > self.cache_size:
                self._by_schema.popitem(last=False)
        else:
            self._by_schema.move_to_end(schema)
        entry = (schema, *hit)
        if len(self._by_id) >= self.cache_size:
            del self._by_id[next(iter(self._by_id))]
        self._by_id[id(schema)] = entry
        return entry


#: the compiled send loop and the key and value converters' plan caches it reads
CompiledSend = tuple[
    Callable[..., tuple[int, int]], tuple[dict[int, _Entry], bytes], tuple[dict[int, _Entry], bytes]
]


def compiled_send(key_converter: object, value_converter: object) -> CompiledSend | None:
    """What the send loop needs to produce records in C (``send_json``) when both
    converters are this module's ``JsonConverter`` and the writer is built; None otherwise.
    The loop reads the converters' own caches (a plan found there is what ``from_connect``
    would use) and leaves every record it is not sure of to ``from_connect``."""
    if _c is None or type(key_converter) is not JsonConverter:
        return None
    if type(value_converter) is not JsonConverter:
        return None
    return (
        _c.send_json,
        (key_converter._by_id, key_converter._tail),
        (value_converter._by_id, value_converter._tail),
    )
