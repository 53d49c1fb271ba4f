"""Canonical text of a column value, the unit both sides of a comparison hash.

Each side computes, for each column, one text from its own representation of the value: the
database in SQL with casts (``connectors/<db>/verify.py``), the topic side from the event JSON
(:func:`from_event`), the lake side from the values Spark returns (:func:`from_python`). Two
texts are equal exactly when the values are, as the connector converts them:

========== ==================================================== =========================
kind       canonical text                                       event value it comes from
========== ==================================================== =========================
int        decimal digits                                       JSON number
text       the string                                           JSON string
decimal    plain decimal notation with the value's scale        base64 unscaled + scale,
           (``12.50``, never ``1.25E+1``)                       {scale, value}, or string
bool       ``true`` / ``false``                                 JSON boolean
timestamp  integer in the column's event unit (ms or us) since  JSON number
           the epoch, the zone-less value read as UTC
timestamptz integer microseconds since the epoch                ISO-8601 string (UTC)
date       integer days since the epoch                         JSON number
time       integer in the column's event unit since midnight    JSON number
bytes      lowercase hex                                        base64 / hex string
float32    ``repr`` of the float32 value (computed in Python)   JSON number
float64    ``repr`` of the double (computed in Python)          JSON number
json       the JSON with sorted keys (computed in Python)       JSON text
========== ==================================================== =========================

A row's text is the concatenation, in column order, of ``<length>:<text>`` per value and ``~``
for NULL (length-prefixed, so no separator can be forged by data); its hash is the first 60
bits of the MD5 of the row text in UTF-8, which fits a signed 64-bit integer in every SQL
dialect. A chunk's checksum is the row count and the exact sum of its rows' hashes: order
independent, so each side may scan in its own order.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import json
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal[
    "int",
    "text",
    "decimal",
    "bool",
    "timestamp",
    "timestamptz",
    "date",
    "time",
    "bytes",
    "float32",
    "float64",
    "json",
]

#: kinds whose canonical text has no portable SQL form: the rows of a chunk holding such a
#: column are pulled through Python (documented in docs/verify.md)
PYTHON_KINDS: frozenset[str] = frozenset({"float32", "float64", "json"})

NULL_PART = "~"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DATE = dt.date(1970, 1, 1)


@dataclass(frozen=True)
class ColumnSpec:
    """One compared column, as the connector converts it.

    ``unit`` is ``"ms"`` or ``"us"`` for timestamp/time columns (the event's unit, which
    follows ``time.precision.mode`` and the column's precision). ``scale`` is the decimal's
    fixed scale (None: the event carries it). ``form`` is how the event encodes the value
    where a handling mode decides it: ``decimal.handling.mode`` (``precise``/``string``) for
    decimals, ``binary.handling.mode`` (``bytes``/``base64``/``base64-url-safe``/``hex``) for
    bytes."""

    name: str
    kind: Kind
    source_type: str
    unit: str | None = None
    scale: int | None = None
    form: str | None = None


@dataclass(frozen=True)
class TableSpec:
    """A table to compare: its columns in event order, its key, and where its events go."""

    identifier: str
    topic: str
    columns: tuple[ColumnSpec, ...]
    key: tuple[str, ...]
    #: columns left out because their type has no canonical form yet: (name, type)
    skipped: tuple[tuple[str, str], ...] = ()
    #: the connector's own details (quoted names, ...), opaque to the core
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key_columns(self) -> tuple[ColumnSpec, ...]:
        by_name = {c.name: c for c in self.columns}
        return tuple(by_name[k] for k in self.key)

    @property
    def needs_python(self) -> bool:
        return any(c.kind in PYTHON_KINDS for c in self.columns)


def part(text: str | None) -> str:
    return NULL_PART if text is None else f"{len(text)}:{text}"


def row_hash(texts: Iterable[str | None]) -> int:
    """The 60-bit hash of a row given the canonical texts of its columns."""
    return hash_row_text("".join(part(t) for t in texts))


def hash_row_text(row_text: str) -> int:
    return int(hashlib.md5(row_text.encode("utf-8"), usedforsecurity=False).hexdigest()[:15], 16)


def md5_hex_to_hash(md5_hex: str) -> int:
    """What the SQL side returns per row (the MD5 in hex) as the 60-bit hash."""
    return int(md5_hex[:15], 16)


# -- values from the event JSON ----------------------------------------------------------


class CanonicalError(ValueError):
    """An event value that does not fit the column's kind (named by the caller)."""


def from_event(col: ColumnSpec, value: Any) -> str | None:
    """Canonical text of one value of an event's ``after`` (JSON converter payload)."""
    if value is None:
        return None
    kind = col.kind
    try:
        if kind in ("int", "date", "timestamp", "time"):
            return str(int(value))
        if kind == "text":
            return value if isinstance(value, str) else str(value)
        if kind == "bool":
            return "true" if value else "false"
        if kind == "decimal":
            d = _event_decimal(col, value)
            if col.scale is None and col.form == "precise" and d.is_finite():
                d = _stripped(d)  # topics written before the connector stripped them too
            return decimal_text(d)
        if kind == "timestamptz":
            return str(iso_micros(str(value)))
        if kind == "bytes":
            return _event_bytes(col, value).hex()
        if kind in PYTHON_KINDS:
            return from_python(col, json.loads(value) if kind == "json" else value)
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise CanonicalError(f"column {col.name}: {value!r} is not a {kind} value: {exc}") from exc
    raise CanonicalError(f"column {col.name}: unknown kind {kind}")


def _event_decimal(col: ColumnSpec, value: Any) -> decimal.Decimal:
    if isinstance(value, dict):  # io.debezium.data.VariableScaleDecimal
        unscaled = int.from_bytes(base64.b64decode(value["value"]), "big", signed=True)
        return decimal.Decimal(unscaled).scaleb(-int(value["scale"]))
    if col.form == "string" or isinstance(value, int | float):
        return decimal.Decimal(str(value))
    unscaled = int.from_bytes(base64.b64decode(value), "big", signed=True)
    return decimal.Decimal(unscaled).scaleb(-(col.scale or 0))


def _event_bytes(col: ColumnSpec, value: Any) -> bytes:
    if col.form == "hex":
        return bytes.fromhex(value)
    if col.form == "base64-url-safe":
        return base64.urlsafe_b64decode(value)
    return base64.b64decode(value)


def _stripped(d: decimal.Decimal) -> decimal.Decimal:
    """Trailing zeros dropped, the exponent at most 0 (Java's stripTrailingZeros, then a scale
    of at least 0): 1.50 -> 1.5, 100 -> 100, 0.00 -> 0."""
    exact = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
    n = d.normalize(exact)
    exponent = n.as_tuple().exponent
    return (
        n.quantize(decimal.Decimal(1), context=exact)
        if isinstance(exponent, int) and exponent > 0
        else n
    )


def decimal_text(d: decimal.Decimal) -> str:
    """Plain notation keeping the value's scale: ``Decimal('1.50')`` -> ``1.50``."""
    return format(d, "f")


def iso_micros(text: str) -> int:
    """Microseconds since the epoch of an ISO-8601 timestamp with an offset (``...Z``)."""
    ts = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=dt.UTC)
    delta = ts - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


# -- values as Python objects (database fallback, Delta) -----------------------------------


def float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def from_python(col: ColumnSpec, value: Any) -> str | None:
    """Canonical text of a typed Python value (a driver's, Spark's, or a parsed JSON value)."""
    if value is None:
        return None
    kind = col.kind
    if kind == "float64":
        return repr(float(value))
    if kind == "float32":
        return repr(float32(float(value)))
    if kind == "json":
        doc = json.loads(value) if isinstance(value, str | bytes) else value
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if kind == "int":
        return str(int(value))
    if kind == "text":
        return str(value)
    if kind == "bool":
        return "true" if value else "false"
    if kind == "decimal":
        d = value if isinstance(value, decimal.Decimal) else decimal.Decimal(value)
        if col.scale is None and col.form == "precise" and d.is_finite():
            d = _stripped(d)  # a variable-scale numeric's event has no trailing zeros
        return decimal_text(d)
    if kind == "bytes":
        return bytes(value).hex()
    if kind == "date":
        return str((value - _EPOCH_DATE).days)
    if kind in ("timestamp", "timestamptz"):
        ts = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        delta = ts - _EPOCH
        micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
        return str(micros // 1000 if kind == "timestamp" and col.unit == "ms" else micros)
    if kind == "time":
        if isinstance(value, dt.timedelta):
            micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
        else:
            micros = (
                value.hour * 3600 + value.minute * 60 + value.second
            ) * 1_000_000 + value.microsecond
        return str(micros // 1000 if col.unit == "ms" else micros)
    raise CanonicalError(f"column {col.name}: unknown kind {kind}")


# -- keys ----------------------------------------------------------------------------------

KeyTexts = tuple[str, ...]


def order_value(kind: str, text: str) -> Any:
    """A value that sorts like the database sorts the key column (text keys are compared in
    code-point order on both sides: ``COLLATE "C"`` / ``utf8mb4_bin``)."""
    if kind in ("int", "date", "timestamp", "timestamptz", "time"):
        return int(text)
    if kind == "decimal":
        return decimal.Decimal(text)
    if kind == "bytes":
        return bytes.fromhex(text)
    return text


def key_order(kinds: Sequence[str], key: KeyTexts) -> tuple[Any, ...]:
    return tuple(order_value(k, t) for k, t in zip(kinds, key, strict=True))


#: key kinds a chunk boundary can be placed on; other keys make the whole table one chunk
ORDERABLE_KEY_KINDS: frozenset[str] = frozenset(
    {"int", "text", "decimal", "date", "timestamp", "timestamptz", "time", "bytes"}
)
