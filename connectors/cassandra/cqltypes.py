"""CQL types as the commit log needs them: how long a value is on disk, and what it means.

The commit log stores cells in Cassandra's internal encoding: a fixed-length type (int,
bigint, uuid, ...) is written as raw bytes, every other type with a vint length. Decoding a
value needs the type from ``system_schema.columns`` (its CQL text, e.g. ``map<text, int>`` or
``frozen<list<int>>``), parsed here once per column.
"""

from __future__ import annotations

import dataclasses
import decimal
import ipaddress
import json
import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from connectors.cassandra.vint import read_signed_vint

_FIXED = {
    "int": 4,
    "bigint": 8,
    "boolean": 1,
    "double": 8,
    "float": 4,
    "uuid": 16,
    "timeuuid": 16,
    "timestamp": 8,
}
_COLLECTIONS = ("list", "set", "map")


class CqlTypeError(ValueError):
    """A column type this reader cannot parse or decode; the message names the type."""


@dataclass(frozen=True)
class CqlType:
    """``name`` is the lower-case CQL name (``int``, ``list``, ``frozen`` is folded into
    ``frozen``); ``params`` the element types of collections and tuples, and the field types
    of a user-defined type (``name`` ``udt``, ``fields`` its field names, ``udt`` its
    qualified name ``keyspace.type``)."""

    name: str
    params: tuple[CqlType, ...] = ()
    frozen: bool = False
    fields: tuple[str, ...] = ()
    udt: str = ""

    @property
    def fixed_length(self) -> int:
        """Bytes of a value on disk, or -1 for a vint-length-prefixed value."""
        return _FIXED.get(self.name, -1)

    @property
    def multi_cell(self) -> bool:
        """A non-frozen collection: stored as one cell per element (a complex column)."""
        return self.name in _COLLECTIONS and not self.frozen

    def __str__(self) -> str:
        if self.name == "udt":
            fields = "".join(
                f", {_field_name(n)}:{p}" for n, p in zip(self.fields, self.params, strict=True)
            )
            text = f"udt<{self.udt}{fields}>"
            return f"frozen<{text}>" if self.frozen else text
        inner = f"<{', '.join(str(p) for p in self.params)}>" if self.params else ""
        text = f"{self.name}{inner}"
        return f"frozen<{text}>" if self.frozen and self.name in (*_COLLECTIONS, "tuple") else text


#: a user-defined type's definition as ``system_schema.types`` holds it: its field names and
#: their CQL types, by (keyspace, type name)
UserTypes = Mapping[tuple[str, str], tuple[Sequence[str], Sequence[str]]]


def _field_name(name: str) -> str:
    """A UDT field name in the inline type text: as it is when it is a plain identifier, else
    double-quoted as CQL quotes it."""
    if name and all(ch.isalnum() or ch == "_" for ch in name):
        return name
    return '"' + name.replace('"', '""') + '"'


def parse_type(text: str, keyspace: str = "", user_types: UserTypes | None = None) -> CqlType:
    """Parse a CQL type as ``system_schema.columns.type`` spells it. A user-defined type's
    name is looked up in ``user_types`` (of ``keyspace``) and becomes a ``udt`` with its
    fields; ``str()`` of the result spells it inline (``udt<ks.address, street:text>``), which
    parses back without the definitions."""
    parsed, rest = _parse(text.strip(), text, resolve=_Resolver(keyspace, user_types or {}))
    if rest.strip():
        raise CqlTypeError(f"unexpected {rest!r} after the type in {text!r}")
    return parsed


@dataclass(frozen=True)
class _Resolver:
    keyspace: str
    user_types: UserTypes

    def __call__(self, name: str, frozen: bool, whole: str, depth: int) -> CqlType | None:
        ks, _, type_name = name.rpartition(".")
        found = self.user_types.get((ks or self.keyspace, type_name))
        if found is None:
            return None
        if depth > 32:
            raise CqlTypeError(f"user-defined types nested too deep in {whole!r}")
        names, types = found
        params = tuple(
            _parse(str(t).strip(), whole, frozen=True, resolve=self, depth=depth + 1)[0]
            for t in types
        )
        return CqlType("udt", params, frozen, tuple(names), f"{ks or self.keyspace}.{type_name}")


def _parse(
    s: str,
    whole: str,
    frozen: bool = False,
    resolve: _Resolver | None = None,
    depth: int = 0,
) -> tuple[CqlType, str]:
    i = 0
    while i < len(s) and (s[i].isalnum() or s[i] in "_."):
        i += 1
    name = s[:i].lower()
    if not name:
        raise CqlTypeError(f"cannot parse the column type {whole!r}")
    rest = s[i:].lstrip()
    if name == "udt" and rest.startswith("<"):
        return _parse_inline_udt(rest[1:], whole, frozen)
    params: list[CqlType] = []
    if rest.startswith("<"):
        rest = rest[1:]
        while True:
            if name == "frozen":
                inner, rest = _parse(rest.lstrip(), whole, True, resolve, depth)
                params.append(inner)
            else:
                inner, rest = _parse(rest.lstrip(), whole, frozen, resolve, depth)
                params.append(inner)
            rest = rest.lstrip()
            if rest.startswith(","):
                rest = rest[1:]
                continue
            if rest.startswith(">"):
                rest = rest[1:]
                break
            raise CqlTypeError(f"cannot parse the column type {whole!r}")
    if name == "frozen":
        if len(params) != 1:
            raise CqlTypeError(f"frozen<> takes one type in {whole!r}")
        return dataclasses.replace(params[0], frozen=True), rest
    if name == "vector":
        raise CqlTypeError(f"vector columns are not supported by the commit log reader: {whole!r}")
    if name not in _SIMPLE_NAMES and resolve is not None and not params:
        # a user-defined type's name keeps its case in system_schema: look it up as written
        udt = resolve(s[:i], frozen, whole, depth)
        if udt is not None:
            if not udt.frozen:
                raise CqlTypeError(
                    f"non-frozen user-defined type columns are not supported by the commit log "
                    f"reader (a field-by-field write cannot be told from a whole one): {whole!r}; "
                    "frozen<...> columns are"
                )
            return udt, rest
    if name not in _SIMPLE_NAMES:
        raise CqlTypeError(
            f"{name} columns (user-defined or counter types) are not supported by the commit "
            f"log reader: {whole!r}"
        )
    return CqlType(name, tuple(params), frozen=frozen or name == "tuple"), rest


def _parse_inline_udt(s: str, whole: str, frozen: bool) -> tuple[CqlType, str]:
    """``udt<ks.name, field:type, ...>`` as ``str(CqlType)`` writes it (after the ``<``)."""
    i = 0
    while i < len(s) and s[i] not in ",>":
        i += 1
    qualified = s[:i].strip()
    rest = s[i:]
    names: list[str] = []
    params: list[CqlType] = []
    while rest.startswith(","):
        rest = rest[1:].lstrip()
        if rest.startswith('"'):
            j, chars = 1, []
            while True:
                if j >= len(rest):
                    raise CqlTypeError(f"unterminated field name in {whole!r}")
                if rest[j] == '"':
                    if rest[j + 1 : j + 2] == '"':
                        chars.append('"')
                        j += 2
                        continue
                    break
                chars.append(rest[j])
                j += 1
            field, rest = "".join(chars), rest[j + 1 :]
        else:
            j = rest.index(":") if ":" in rest else -1
            if j < 0:
                raise CqlTypeError(f"cannot parse the column type {whole!r}")
            field, rest = rest[:j].strip(), rest[j:]
        if not rest.startswith(":"):
            raise CqlTypeError(f"cannot parse the column type {whole!r}")
        inner, rest = _parse(rest[1:].lstrip(), whole, frozen=True)
        names.append(field)
        params.append(inner)
        rest = rest.lstrip()
    if not rest.startswith(">"):
        raise CqlTypeError(f"cannot parse the column type {whole!r}")
    return CqlType("udt", tuple(params), frozen, tuple(names), qualified), rest[1:]


# -- values -------------------------------------------------------------------------------

_EPOCH_DAYS_SHIFT = 1 << 31


def _duration(b: bytes) -> str:
    months, p = read_signed_vint(b, 0)
    days, p = read_signed_vint(b, p)
    nanos, _ = read_signed_vint(b, p)
    return f"{months}mo{days}d{nanos}ns"


def _decimal(b: bytes) -> str:
    scale = struct.unpack_from(">i", b)[0]
    unscaled = int.from_bytes(b[4:], "big", signed=True)
    return str(decimal.Decimal(unscaled).scaleb(-scale))


def _date(b: bytes) -> int:
    """Days since 1970-01-01 (Cassandra stores them unsigned, shifted by 2^31)."""
    return int(struct.unpack(">I", b)[0]) - _EPOCH_DAYS_SHIFT


_SIMPLE: dict[str, Callable[[bytes], Any]] = {
    "ascii": lambda b: b.decode("ascii"),
    "text": lambda b: b.decode("utf-8"),
    "varchar": lambda b: b.decode("utf-8"),
    "int": lambda b: struct.unpack(">i", b)[0],
    "bigint": lambda b: struct.unpack(">q", b)[0],
    "smallint": lambda b: struct.unpack(">h", b)[0],
    "tinyint": lambda b: struct.unpack(">b", b)[0],
    "boolean": lambda b: b != b"\x00",
    "float": lambda b: struct.unpack(">f", b)[0],
    "double": lambda b: struct.unpack(">d", b)[0],
    "timestamp": lambda b: struct.unpack(">q", b)[0],
    "date": _date,
    "time": lambda b: struct.unpack(">q", b)[0],
    "uuid": lambda b: str(uuid.UUID(bytes=b)),
    "timeuuid": lambda b: str(uuid.UUID(bytes=b)),
    "inet": lambda b: str(ipaddress.ip_address(b)),
    "blob": bytes,
    "varint": lambda b: str(int.from_bytes(b, "big", signed=True)),
    "decimal": _decimal,
    "duration": _duration,
}


_SIMPLE_NAMES = frozenset(_SIMPLE) | {"list", "set", "map", "tuple", "frozen"}


def decode_value(t: CqlType, b: bytes) -> Any:
    """A value's bytes (never empty for fixed-length types) as a Python value: the forms the
    connector's Connect schemas declare (timestamps in ms, dates in days, uuids as text,
    varint/decimal as text, collections as lists and maps)."""
    fn = _SIMPLE.get(t.name)
    if fn is not None:
        return fn(b)
    if t.name in ("list", "set"):
        return [decode_value(t.params[0], e) for e in _elements(b, t)]
    if t.name == "map":
        items = _elements(b, t)
        return {
            map_key(decode_value(t.params[0], k)): decode_value(t.params[1], v)
            for k, v in zip(items[::2], items[1::2], strict=True)
        }
    if t.name == "tuple":
        return _tuple(t, b)
    if t.name == "udt":
        return dict(zip(t.fields, _tuple(t, b), strict=True))
    raise CqlTypeError(f"values of type {t} are not supported by the commit log reader")


_STRINGY = frozenset({"text", "varchar", "ascii", "blob"})


def value_decoder(t: CqlType) -> Callable[[bytes], Any]:
    """``decode_value`` for one type, resolved once; an empty value of a non-string type
    reads as null (CQL's empty values)."""
    simple = _SIMPLE.get(t.name)
    if t.name in _STRINGY:
        assert simple is not None
        return simple
    fn: Callable[[bytes], Any] = simple if simple is not None else (lambda b: decode_value(t, b))

    def decode(b: bytes) -> Any:
        return fn(b) if b else None

    return decode


def map_key(k: Any) -> Any:
    """A map key as the event's map holds it: primitives as they are, a user-defined type's
    fields as JSON text (a dict cannot be a key), anything else as its text."""
    if isinstance(k, str | int | float | bool):
        return k
    if isinstance(k, dict):
        return json.dumps(k, default=str, ensure_ascii=False)
    return str(k)


def _elements(b: bytes, t: CqlType) -> list[bytes]:
    """A frozen collection: int32 count, then int32-length-prefixed elements (a map has
    two per entry)."""
    (n,) = struct.unpack_from(">i", b)
    pos = 4
    out: list[bytes] = []
    for _ in range(n * (2 if t.name == "map" else 1)):
        (size,) = struct.unpack_from(">i", b, pos)
        pos += 4
        out.append(b[pos : pos + size])
        pos += size
    return out


def _tuple(t: CqlType, b: bytes) -> list[Any]:
    out: list[Any] = []
    pos = 0
    for p in t.params:
        if pos >= len(b):
            out.append(None)
            continue
        (size,) = struct.unpack_from(">i", b, pos)
        pos += 4
        if size < 0:
            out.append(None)
            continue
        out.append(decode_value(p, b[pos : pos + size]))
        pos += size
    return out
