"""Per-column value rewriting configured by property *names*: truncation, masking, hashing.

Debezium encodes the parameter in the key (``column.truncate.to.20.chars``,
``column.mask.hash.SHA-256.with.salt.CzQMA0cB5K``); the value is the list of column
selectors. Mappers are resolved once per table column, never per row.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cdc.config import split_list
from cdc.filters import column_matches, compile_patterns
from cdc.spi import Column, TableId

_TRUNCATE = re.compile(r"^column\.truncate\.to\.(\d+)\.chars$")
_MASK = re.compile(r"^column\.mask\.with\.(\d+)\.chars$")
# v1 (the default, Debezium 1.2's only form) hashes the Java-serialized string; v2 its bytes
_HASH = re.compile(r"^column\.mask\.hash\.(?:(v[12])\.)?([^.]+)\.with\.salt\.(.+)$")
#: key prefixes whose every key must be one of the three forms: a misspelt masking key
#: (``column.mask.with.12.char``) would otherwise leave the column unmasked without a word
_MAPPER_PREFIXES = ("column.mask.", "column.truncate.")
_FORMS = (
    "column.truncate.to.<n>.chars, column.mask.with.<n>.chars or "
    "column.mask.hash[.v2].<algorithm>.with.salt.<salt>"
)

_JAVA_DIGESTS = {
    "MD2": None,
    "MD5": "md5",
    "SHA-1": "sha1",
    "SHA-224": "sha224",
    "SHA-256": "sha256",
    "SHA-384": "sha384",
    "SHA-512": "sha512",
    "SHA-512/224": "sha512_224",
    "SHA-512/256": "sha512_256",
    "SHA3-256": "sha3_256",
    "SHA3-512": "sha3_512",
}

ValueFn = Callable[[Any], Any]


@dataclass(frozen=True)
class _Rule:
    patterns: tuple[re.Pattern[str], ...]
    make: Callable[[Column], ValueFn]
    to_string: bool = False
    #: the schema parameters Debezium 2.x+ adds to a mapped field (``masked``,
    #: ``truncateLength``)
    parameters: tuple[tuple[str, str], ...] = ()


def _truncate(n: int) -> Callable[[Column], ValueFn]:
    def make(col: Column) -> ValueFn:
        return lambda v: v[:n] if isinstance(v, str) else v

    return make


def _mask(n: int) -> Callable[[Column], ValueFn]:
    masked = "*" * n
    return lambda col: lambda v: masked


def java_serialized_string(value: str) -> bytes:
    """``ObjectOutputStream.writeObject(String)``: the stream header, then TC_STRING with a
    2-byte length (TC_LONGSTRING with 8 bytes past 65535) and Java's modified UTF-8 (NUL as
    C0 80, characters beyond the BMP as two 3-byte surrogates). Debezium's default (v1)
    hash digests these bytes, so the same pseudonyms come out only if we do too."""
    out = bytearray()
    for ch in value:
        code = ord(ch)
        if code == 0:
            out += b"\xc0\x80"
        elif code > 0xFFFF:
            code -= 0x10000
            for unit in (0xD800 | (code >> 10), 0xDC00 | (code & 0x3FF)):
                out += chr(unit).encode("utf-8", "surrogatepass")
        else:
            out += ch.encode("utf-8", "surrogatepass")
    if len(out) <= 0xFFFF:
        head = b"\x74" + len(out).to_bytes(2, "big")
    else:
        head = b"\x7c" + len(out).to_bytes(8, "big")
    return b"\xac\xed\x00\x05" + head + bytes(out)


def _hash(algorithm: str, salt: str, version: str) -> Callable[[Column], ValueFn]:
    name = _JAVA_DIGESTS.get(algorithm.upper(), algorithm.lower().replace("-", ""))
    if name is None or name not in hashlib.algorithms_available:
        raise ValueError(f"unknown hash algorithm {algorithm!r}")
    salt_bytes = salt.encode()
    serialized = version == "v1"

    def make(col: Column) -> ValueFn:
        limit = col.length if col.length and col.length > 0 else None

        def fn(v: Any) -> Any:
            # Debezium hashes string columns only; tidemark also hashes other columns' text
            # rather than let a value that was meant to be hidden through
            data = java_serialized_string(v) if serialized and isinstance(v, str) else None
            digest = hashlib.new(name, salt_bytes + (data or str(v).encode())).hexdigest()
            return digest[:limit] if limit else digest

        return fn

    return make


class ColumnMappers:
    """All mapping rules of a connector config; ``for_column`` composes the matching ones."""

    def __init__(self, raw_config: Mapping[str, Any]) -> None:
        self.rules: list[_Rule] = []
        self.problems: list[tuple[str, str]] = []
        for key, value in raw_config.items():
            if not key.startswith(_MAPPER_PREFIXES):
                continue  # other keys' values need not be regular expressions ("*.*.field")
            if not (_TRUNCATE.match(key) or _MASK.match(key) or _HASH.match(key)):
                self.problems.append((key, f"is not a column mapping key: use {_FORMS}"))
                continue
            try:
                patterns = tuple(compile_patterns(split_list(value)))
            except re.error as exc:
                self.problems.append((key, f"invalid regular expression: {exc}"))
                continue
            try:
                if m := _TRUNCATE.match(key):
                    n = int(m.group(1))
                    if n <= 0:
                        raise ValueError("the length must be a positive integer")
                    self.rules.append(
                        _Rule(patterns, _truncate(n), parameters=(("truncateLength", str(n)),))
                    )
                elif m := _MASK.match(key):
                    self.rules.append(
                        _Rule(
                            patterns,
                            _mask(int(m.group(1))),
                            to_string=True,
                            parameters=(("masked", "true"),),
                        )
                    )
                elif m := _HASH.match(key):
                    self.rules.append(
                        _Rule(
                            patterns,
                            _hash(m.group(2), m.group(3), m.group(1) or "v1"),
                            to_string=True,
                            parameters=(("masked", "true"),),
                        )
                    )
            except ValueError as exc:
                self.problems.append((key, str(exc)))

    def for_column(self, table_id: TableId, column: Column) -> ValueFn | None:
        fns = [
            r.make(column) for r in self.rules if column_matches(r.patterns, table_id, column.name)
        ]
        if not fns:
            return None
        if len(fns) == 1:
            return fns[0]

        def chain(v: Any) -> Any:
            for f in fns:
                v = f(v)
            return v

        return chain

    def parameters(self, table_id: TableId, column: Column) -> dict[str, str]:
        """The schema parameters the matching rules add (Debezium 2.x+)."""
        out: dict[str, str] = {}
        for r in self.rules:
            if r.parameters and column_matches(r.patterns, table_id, column.name):
                out.update(r.parameters)
        return out

    def changes_to_string(self, table_id: TableId, column: Column) -> bool:
        """Masks and hashes turn any column into a string column (its schema changes)."""
        return any(
            r.to_string and column_matches(r.patterns, table_id, column.name) for r in self.rules
        )


def regex_values(key: str, value: str) -> list[str] | None:
    """The regular expressions a column mapping or ``message.key.columns`` value holds (for
    the worker's check of patterns sent over REST), or None for any other key."""
    if _TRUNCATE.match(key) or _MASK.match(key) or _HASH.match(key):
        return split_list(value)
    if key != "message.key.columns":
        return None
    out: list[str] = []
    for part in value.split(";"):
        table, _, cols = part.strip().rpartition(":")
        out += [table, *split_list(cols)] if table else []
    return out


class KeyColumns:
    """``message.key.columns``: ``<table>:<col-regex>,<col-regex>;<table>:...``."""

    def __init__(self, spec: str | None) -> None:
        self.entries: list[tuple[re.Pattern[str], list[re.Pattern[str]]]] = []
        for part in (spec or "").split(";"):
            part = part.strip()
            if not part:
                continue
            table, _, cols = part.rpartition(":")
            if not table or not cols:
                raise ValueError(f"entry {part!r} must look like <table>:<column>[,<column>...]")
            try:
                self.entries.append(
                    (re.compile(table, re.IGNORECASE), compile_patterns(split_list(cols)))
                )
            except re.error as exc:
                raise ValueError(f"entry {part!r}: invalid regular expression: {exc}") from None

    def for_table(self, table_id: TableId, columns: list[str]) -> list[str] | None:
        names = {table_id.identifier}
        container = table_id.schema if table_id.schema is not None else table_id.catalog
        if container is not None:
            names.add(f"{container}.{table_id.table}")
        for table_re, col_res in self.entries:
            if any(table_re.fullmatch(n) for n in names):
                return [c for c in columns if any(r.fullmatch(c) for r in col_res)]
        return None


def mapping_problems(values: Mapping[str, Any], raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The column mapping keys and ``message.key.columns``, checked with the rest of the
    config (``tidemark validate``, REST ``config/validate``) instead of at task start."""
    problems = list(ColumnMappers(raw).problems)
    try:
        KeyColumns(values.get("message.key.columns"))
    except ValueError as exc:
        problems.append(("message.key.columns", str(exc)))
    return problems
