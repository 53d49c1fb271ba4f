"""PostgreSQL → Connect type mapping (seed §3.4, catalogue §2.2.5), from the text form.

Both the snapshot (COPY ... TO STDOUT, text) and the stream (pgoutput, text) deliver values
as the server's output functions print them, so one converter per column serves both, and a
snapshot row and a streamed row of the same data are identical by construction. The sessions
run with ``TimeZone=UTC``, ``DateStyle=ISO`` and ``IntervalStyle=iso_8601`` so the text is
unambiguous whatever the server's defaults.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from cdc.compiled import native
from cdc.schema import logical
from cdc.schema.binary_modes import binary_text
from cdc.schema.model import (
    BOOLEAN,
    BYTES,
    FLOAT32,
    FLOAT64,
    INT16,
    INT32,
    INT64,
    STRING,
    Schema,
    Type,
    array,
    map_of,
    primitive,
)
from cdc.spi import Column, Table
from connectors.postgres.oids import (  # re-exported: the type OIDs
    BIT as BIT,
)
from connectors.postgres.oids import (
    BOOL as BOOL,
)
from connectors.postgres.oids import (
    BPCHAR as BPCHAR,
)
from connectors.postgres.oids import (
    BYTEA as BYTEA,
)
from connectors.postgres.oids import (
    CHAR as CHAR,
)
from connectors.postgres.oids import (
    CIDR as CIDR,
)
from connectors.postgres.oids import (
    DATE as DATE,
)
from connectors.postgres.oids import (
    DATERANGE as DATERANGE,
)
from connectors.postgres.oids import (
    FLOAT4 as FLOAT4,
)
from connectors.postgres.oids import (
    FLOAT8 as FLOAT8,
)
from connectors.postgres.oids import (
    INET as INET,
)
from connectors.postgres.oids import (
    INT2 as INT2,
)
from connectors.postgres.oids import (
    INT4 as INT4,
)
from connectors.postgres.oids import (
    INT4RANGE as INT4RANGE,
)
from connectors.postgres.oids import (
    INT8 as INT8,
)
from connectors.postgres.oids import (
    INT8RANGE as INT8RANGE,
)
from connectors.postgres.oids import (
    INTERVAL as INTERVAL,
)
from connectors.postgres.oids import (
    JSON as JSON,
)
from connectors.postgres.oids import (
    JSONB as JSONB,
)
from connectors.postgres.oids import (
    MACADDR as MACADDR,
)
from connectors.postgres.oids import (
    MACADDR8 as MACADDR8,
)
from connectors.postgres.oids import (
    MONEY as MONEY,
)
from connectors.postgres.oids import (
    NAME as NAME,
)
from connectors.postgres.oids import (
    NUMERIC as NUMERIC,
)
from connectors.postgres.oids import (
    NUMRANGE as NUMRANGE,
)
from connectors.postgres.oids import (
    OID as OID,
)
from connectors.postgres.oids import (
    POINT as POINT,
)
from connectors.postgres.oids import (
    TEXT as TEXT,
)
from connectors.postgres.oids import (
    TIME as TIME,
)
from connectors.postgres.oids import (
    TIMESTAMP as TIMESTAMP,
)
from connectors.postgres.oids import (
    TIMESTAMPTZ as TIMESTAMPTZ,
)
from connectors.postgres.oids import (
    TIMETZ as TIMETZ,
)
from connectors.postgres.oids import (
    TSRANGE as TSRANGE,
)
from connectors.postgres.oids import (
    TSTZRANGE as TSTZRANGE,
)
from connectors.postgres.oids import (
    TSVECTOR as TSVECTOR,
)
from connectors.postgres.oids import (
    UUID as UUID,
)
from connectors.postgres.oids import (
    VARBIT as VARBIT,
)
from connectors.postgres.oids import (
    VARCHAR as VARCHAR,
)
from connectors.postgres.oids import (
    XID as XID,
)
from connectors.postgres.oids import (
    XML as XML,
)
from connectors.postgres.source_types import source_type

Conv = Callable[[Any], Any]
log = logging.getLogger("tidemark.postgres.types")


#: Debezium 3.x's semantic type for tsvector (the server's text); Debezium 1.2 omits the
#: column (an unknown type), and so does ``envelope.version=1.2``
DBZ_TSVECTOR = "io.debezium.data.Tsvector"
TSVECTOR_SCHEMA = primitive(Type.STRING, name=DBZ_TSVECTOR, version=1)


@dataclass(frozen=True)
class TypeInfo:
    """What the catalog says about a type the built-in table does not cover."""

    oid: int
    name: str
    category: str  # pg_type.typcategory: E enum, A array, U user, ...
    element_oid: int = 0  # arrays
    base_oid: int = 0  # domains
    base_typmod: int = -1
    enum_labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Modes:
    decimal: str = "precise"
    time_precision: str = "adaptive"
    binary: str = "bytes"
    hstore: str = "json"
    interval: str = "numeric"
    include_unknown: bool = False
    #: ``envelope.version``: under "3" ZonedTimestamp fractions have the column's digits
    envelope: str = "1.2"


# -- text parsers --------------------------------------------------------------------------
@native("bool_t")
def _bool(v: str) -> bool:
    return v == "t"


@native("float")
def _float(v: str) -> float:
    return float(v)  # Python accepts NaN, Infinity, -Infinity as PostgreSQL prints them


_MONEY_STRIP = re.compile(r"[^0-9.\-]")


_CENT = decimal.Decimal("0.01")


def _money(v: str) -> decimal.Decimal:
    neg = v.startswith("-") or v.startswith("(")
    d = decimal.Decimal(_MONEY_STRIP.sub("", v).lstrip("-") or "0")
    return -d if neg else d


def civil_days(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date, for any astronomical year (year 0
    is 1 BC): Python's ``date`` stops at 1..9999, PostgreSQL goes from 4713 BC to 5874897."""
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def civil_date(days: int) -> tuple[int, int, int]:
    """The inverse of :func:`civil_days`."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, doy - (153 * mp + 2) // 5 + 1


def _date_parts(v: str) -> int:
    """'YYYY-MM-DD' with any number of year digits and an optional ' BC' → epoch days."""
    bc = v.endswith(" BC")
    y, m, d = (int(x) for x in (v[:-3] if bc else v).split("-"))
    return civil_days(1 - y if bc else y, m, d)


#: What Debezium (3.x, pgoutput) emits for ``infinity`` / ``-infinity``: pgjdbc's sentinel
#: instants (``PGStatement.DATE_POSITIVE_INFINITY`` / ``..._NEGATIVE_...``, milliseconds taken
#: as microseconds) and, for dates, the epoch days of the LocalDates Debezium maps them to.
#: Odd values, but the ones existing consumers of Debezium topics know (found by the
#: side-by-side parity run of bench.compare).
INFINITY_DAYS = {"infinity": -2147472692, "-infinity": -2147472691}
INFINITY_MICROS = {"infinity": 9223372036825200000, "-infinity": -9223372036832400000}


@native("date_days")
def _date_days(v: str) -> int:
    special = INFINITY_DAYS.get(v)
    if special is not None:
        return special
    if len(v) == 10:
        return (dt.date.fromisoformat(v) - logical.EPOCH_DATE).days
    return _date_parts(v)


@native("time_micros", 1)
def _time_micros(v: str) -> int:
    hh, mm, rest = v.split(":", 2)
    sec, _, frac = rest.partition(".")
    return ((int(hh) * 60 + int(mm)) * 60 + int(sec)) * 1_000_000 + int((frac + "000000")[:6])


@native("time_micros", 1000)
def _time_millis(v: str) -> int:
    return _time_micros(v) // 1000


_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_fromisoformat = dt.datetime.fromisoformat


@native("timestamp_micros", 1)
def _timestamp_micros(v: str) -> int:
    special = INFINITY_MICROS.get(v)
    if special is not None:
        return special
    try:
        d = _fromisoformat(v)  # C fast path for the usual 'YYYY-MM-DD HH:MM:SS[.ffffff]'
    except ValueError:
        bc = v.endswith(" BC")
        date_part, _, time_part = (v[:-3] if bc else v).partition(" ")
        days = _date_parts(date_part + " BC" if bc else date_part)
        return days * 86_400_000_000 + (_time_micros(time_part) if time_part else 0)
    seconds = (d.toordinal() - _EPOCH_ORDINAL) * 86400 + d.hour * 3600 + d.minute * 60 + d.second
    return seconds * 1_000_000 + d.microsecond


@native("timestamp_micros", 1000)
def _timestamp_millis(v: str) -> int:
    return _timestamp_micros(v) // 1000


def _tz_offset_seconds(tz: str) -> int:
    sign = -1 if tz[0] == "-" else 1
    parts = tz[1:].split(":")
    secs = int(parts[0]) * 3600
    if len(parts) > 1:
        secs += int(parts[1]) * 60
    if len(parts) > 2:
        secs += int(parts[2])
    return sign * secs


_TZ_SPLIT = re.compile(r"([+-]\d{2}(?::\d{2}){0,2})$")


@native("timestamptz_utc")
def _timestamptz(v: str) -> str:
    """'2018-06-20 15:13:16.945104+00' → '2018-06-20T15:13:16.945104Z' (UTC, as Debezium)."""
    if v in ("infinity", "-infinity"):
        return v
    if v.endswith("+00") and len(v) >= 22 and v[4] == "-" and v[10] == " ":
        # Sessions run in UTC, so this is the common case; PostgreSQL already prints the
        # fraction without trailing zeros, as Debezium's ISO format does.
        return v[:10] + "T" + v[11:-3] + "Z"
    bc = v.endswith(" BC")  # PostgreSQL prints it after the offset
    core = v[:-3] if bc else v
    m = _TZ_SPLIT.search(core)
    base = core[: m.start()] if m else core
    micros = _timestamp_micros(base + " BC" if bc else base)
    if m:
        micros -= _tz_offset_seconds(m.group(1)) * 1_000_000
    return _iso_utc(micros)


def _iso_utc(micros: int) -> str:
    """ISO-8601 UTC text of any instant, as Java's ISO formatter prints it: years outside
    0000..9999 get a sign and at least four digits, the fraction only as long as needed."""
    days, rest = divmod(micros, 86_400_000_000)
    year, month, day = civil_date(days)
    secs, us = divmod(rest, 1_000_000)
    y = f"{year:04d}" if 0 <= year <= 9999 else f"{'+' if year > 0 else '-'}{abs(year):04d}"
    text = f"{y}-{month:02d}-{day:02d}T{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
    if us:
        text += ("." + f"{us:06d}").rstrip("0")
    return text + "Z"


def _timetz(v: str) -> str:
    m = _TZ_SPLIT.search(v)
    base = v[: m.start()] if m else v
    micros = _time_micros(base) - (_tz_offset_seconds(m.group(1)) * 1_000_000 if m else 0)
    micros %= 86_400_000_000
    secs, us = divmod(micros, 1_000_000)
    text = f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
    if us:
        text += ("." + f"{us:06d}").rstrip("0")
    return text + "Z"


_ISO_INTERVAL = re.compile(
    r"^P(?:(?P<y>-?\d+)Y)?(?:(?P<mo>-?\d+)M)?(?:(?P<w>-?\d+)W)?(?:(?P<d>-?\d+)D)?"
    r"(?:T(?:(?P<h>-?\d+)H)?(?:(?P<mi>-?\d+)M)?(?:(?P<s>-?[\d.]+)S)?)?$"
)
DAYS_PER_MONTH = 365.25 / 12.0


def _interval_parts(v: str) -> tuple[int, int, int, int, int, float]:
    m = _ISO_INTERVAL.match(v)
    if m is None:
        raise ValueError(f"interval {v!r} is not ISO 8601 (IntervalStyle must be iso_8601)")
    g = {k: (val or "0") for k, val in m.groupdict().items()}
    days = int(g["d"]) + 7 * int(g["w"])
    return int(g["y"]), int(g["mo"]), days, int(g["h"]), int(g["mi"]), float(g["s"])


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _interval_micros(v: str) -> int:
    """Debezium's MicroDuration: a month is 365.25 / 12 days, the sum in doubles, then
    Java's ``(long)``: truncated toward zero (0.000249 s is 248 µs there, as 0.000249 * 1e6
    is 248.99999999999997), and an interval beyond the int64 microsecond range (over about
    292,000 years; PostgreSQL stores up to 178 million) clamped to it."""
    y, mo, d, h, mi, s = _interval_parts(v)
    # pgjdbc's PGInterval keeps whole seconds and rounded microseconds, and getSeconds()
    # gives them back as whole + micros / 1e6: the double Debezium sums
    whole = int(s)
    s = whole + math.floor((s - whole) * 1e6 + 0.5) / 1e6
    days = (y * 12 + mo) * DAYS_PER_MONTH + d
    micros = int((((days * 24 + h) * 60 + mi) * 60 + s) * 1e6)
    return min(max(micros, _INT64_MIN), _INT64_MAX)


def _interval_string(v: str) -> str:
    """Debezium's ``P<y>Y<m>M<d>DT<h>H<m>M<s>S`` with every field present."""
    y, mo, d, h, mi, s = _interval_parts(v)
    sec = f"{s:f}".rstrip("0").rstrip(".") if s != int(s) else str(int(s))
    return f"P{y}Y{mo}M{d}DT{h}H{mi}M{sec}S"


def _bytea(v: str) -> bytes:
    if v.startswith("\\x"):
        return bytes.fromhex(v[2:])
    # escape format (bytea_output=escape): octal escapes
    return v.encode("latin-1").decode("unicode_escape").encode("latin-1")


def _bits(v: str) -> bytes:
    """Bits as Debezium emits them: little-endian bytes of the bit string's value, ``ceil(n /
    8)`` of them (an empty ``bit varying`` is no bytes, as Java's empty ``BitSet``)."""
    n = len(v)
    if n == 0:
        return b""
    value = int(v, 2) if v else 0
    return value.to_bytes((n + 7) // 8, "little")


_POINT = re.compile(r"^\(\s*([^,]+)\s*,\s*([^)]+)\s*\)$")


def _point(v: str) -> dict[str, Any]:
    m = _POINT.match(v)
    if m is None:
        raise ValueError(f"not a point: {v!r}")
    x, y = float(m.group(1)), float(m.group(2))
    wkb = struct.pack("<BIdd", 1, 1, x, y)
    return {"x": x, "y": y, "wkb": wkb, "srid": None}


def _ewkb_hex(v: str) -> dict[str, Any]:
    """PostGIS prints geometry as hex EWKB; Debezium emits WKB plus the SRID."""
    raw = bytes.fromhex(v)
    little = raw[0] == 1
    fmt = "<I" if little else ">I"
    (gtype,) = struct.unpack_from(fmt, raw, 1)
    srid = None
    if gtype & 0x20000000:
        (srid,) = struct.unpack_from(fmt, raw, 5)
        gtype &= ~0x20000000
        raw = raw[:1] + struct.pack(fmt, gtype) + raw[9:]
    return {"wkb": raw, "srid": srid}


def _hstore_pairs(v: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    i, n = 0, len(v)

    def token(i: int) -> tuple[str | None, int]:
        while i < n and v[i] in " ,":
            i += 1
        if v.startswith("NULL", i):
            return None, i + 4
        if v[i] != '"':
            raise ValueError(f"bad hstore near {v[i : i + 20]!r}")
        i += 1
        buf = []
        while v[i] != '"':
            if v[i] == "\\":
                i += 1
            buf.append(v[i])
            i += 1
        return "".join(buf), i + 1

    while i < n:
        while i < n and v[i] in " ,":
            i += 1
        if i >= n:
            break
        key, i = token(i)
        i = v.index("=>", i) + 2
        val, i = token(i)
        out[key or ""] = val
    return out


def _java_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), spread as ``HashMap`` does."""
    h = 0
    for unit in struct.unpack(f"<{len(s.encode('utf-16-le')) // 2}H", s.encode("utf-16-le")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h ^ (h >> 16)


def hstore_map(v: str) -> dict[str, str | None]:
    """An hstore's pairs in the order Debezium writes them: pgjdbc fills a ``java.util.
    HashMap`` in the server's order and Debezium serialises its iteration order (by hash
    bucket, then insertion). Same content either way; the same order makes the JSON text
    (``hstore.handling.mode=json``) identical to Debezium's, byte for byte."""
    pairs = _hstore_pairs(v)
    if len(pairs) < 2:
        return pairs
    capacity = 16
    while len(pairs) > capacity * 3 // 4:  # HashMap's 0.75 load factor
        capacity *= 2
    mask = capacity - 1
    order = sorted(enumerate(pairs), key=lambda item: (_java_hash(item[1]) & mask, item[0]))
    return {key: pairs[key] for _, key in order}


def parse_array(v: str, element: Conv, delimiter: str = ",") -> list[Any]:
    """PostgreSQL's array literal ``{1,2,"a b",NULL,{3,4}}`` → nested lists."""
    pos = v.find("{")  # skip a dimension decoration like [1:2]={...}
    return _array_at(v, pos, element, delimiter)[0]


def _array_at(v: str, pos: int, element: Conv, delim: str) -> tuple[list[Any], int]:
    assert v[pos] == "{"
    pos += 1
    out: list[Any] = []
    if v[pos] == "}":
        return out, pos + 1
    while True:
        ch = v[pos]
        if ch == "{":
            sub, pos = _array_at(v, pos, element, delim)
            out.append(sub)
        elif ch == '"':
            pos += 1
            buf = []
            while v[pos] != '"':
                if v[pos] == "\\":
                    pos += 1
                buf.append(v[pos])
                pos += 1
            pos += 1
            out.append(element("".join(buf)))
        else:
            end = pos
            while v[end] not in (delim, "}"):
                end += 1
            token = v[pos:end].strip()
            out.append(None if token == "NULL" else element(token))
            pos = end
        if v[pos] == delim:
            pos += 1
            continue
        if v[pos] == "}":
            return out, pos + 1
        raise ValueError(f"bad array literal near {v[pos : pos + 20]!r}")


# -- the mapping ---------------------------------------------------------------------------
def _precision(typmod: int, default: int = 6) -> int:
    return default if typmod < 0 else typmod


def _numeric_scale(typmod: int) -> tuple[int | None, int | None]:
    if typmod < 4:
        return None, None
    t = typmod - 4
    return (t >> 16) & 0xFFFF, t & 0xFFFF


def _binary(mode: str) -> tuple[Schema, Conv]:
    text = binary_text(mode)
    if text is not None:
        return STRING, lambda v: text(_bytea(v))
    return BYTES, _bytea


#: numeric's special values and their names in ``decimal.handling.mode=string`` (Debezium's
#: SpecialValueDecimal names); ``double`` gives the IEEE values (``float`` parses the text).
SPECIAL_NUMERIC = {"NaN": "NAN", "Infinity": "POSITIVE_INFINITY", "-Infinity": "NEGATIVE_INFINITY"}
#: numeric has at most 131072 digits before and 16383 after the point
_EXACT = decimal.Context(prec=150_000, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
#: numeric text shorter than this is parsed by int() (whose default limit is 4,300 digits)
_FAST_NUMERIC_CHARS = 4_000


class NotRepresentable(ValueError):
    """A value the configured mode has no encoding for (numeric NaN/Infinity as a Connect
    Decimal): the column gets null if it may, else the event goes to
    ``event.processing.failure.handling.mode`` with this reason."""


def _not_representable(v: str) -> NotRepresentable:
    return NotRepresentable(
        f"numeric {v} has no representation with decimal.handling.mode=precise (a Connect "
        f"Decimal has no NaN or Infinity); set decimal.handling.mode=string or double to "
        f"capture it"
    )


def _decimal(modes: Modes, typmod: int) -> tuple[Schema, Conv]:
    precision, scale = _numeric_scale(typmod)
    if modes.decimal == "double":
        return FLOAT64, float
    if modes.decimal == "string":
        return STRING, lambda v: SPECIAL_NUMERIC.get(v, v)
    if scale is None:

        def variable(v: str) -> Any:
            if v in SPECIAL_NUMERIC:
                raise _not_representable(v)
            # PostgreSQL writes numeric as ``-?digits[.digits]``: the unscaled value is the
            # digits without the point, the scale the digits after it, with no Decimal (a
            # tenth of the cost). An exponent, or more digits than int() parses from text,
            # takes the Decimal path.
            if len(v) < _FAST_NUMERIC_CHARS and "e" not in v and "E" not in v:
                point = v.find(".")
                if point < 0:
                    scale, unscaled = 0, int(v)
                else:
                    scale, unscaled = len(v) - point - 1, int(v[:point] + v[point + 1 :])
                # Debezium strips trailing zeros (stripTrailingZeros, then a scale of at
                # least 0): 1.50 has scale 1, 0.00 scale 0, 100 stays 100 with scale 0
                while scale and not unscaled % 10:
                    unscaled, scale = unscaled // 10, scale - 1
                return {"scale": scale, "value": logical.signed_bytes(unscaled)}
            stripped = decimal.Decimal(v).normalize(_EXACT)
            exponent = stripped.as_tuple().exponent
            if isinstance(exponent, int) and exponent > 0:
                stripped = stripped.quantize(_ONE, context=_EXACT)
            return logical.variable_scale_value(stripped)

        return logical.variable_scale_decimal(), native("decimal_variable")(variable)
    return logical.connect_decimal(scale, precision), _fixed_decimal(scale, None)


_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
_ONE = decimal.Decimal(1)


def _fixed_decimal(scale: int, on_special: Callable[[str], Any] | None) -> Conv:
    """numeric(p,s) text to its Decimal. NaN and infinities raise, or with ``on_special``
    become what it returns (the lenient variant of an optional column, built here so the
    check costs no extra call per value; see ``_null_if_not_representable``)."""
    q = decimal.Decimal(1).scaleb(-scale)
    # PostgreSQL writes a numeric(p,s) value with exactly s digits after the point (never an
    # exponent): such text parses to the quantized value already, half the cost per value.
    point = -scale - 1 if scale > 0 else None
    parse = decimal.Decimal

    def fixed(v: str) -> Any:
        if v in SPECIAL_NUMERIC:
            if on_special is None:
                raise _not_representable(v)
            return on_special(v)
        if point is None:
            if "." not in v and "e" not in v and "E" not in v:
                return parse(v)
        elif len(v) > scale and v[point] == "." and "e" not in v and "E" not in v:
            return parse(v)
        return parse(v).quantize(q, context=_EXACT)

    fixed.lenient = lambda on: _fixed_decimal(scale, on)  # type: ignore[attr-defined]
    return native("decimal_fixed", (scale, parse))(fixed)


def _temporal(oid: int, typmod: int, modes: Modes) -> tuple[Schema, Conv] | None:
    mode = modes.time_precision
    if oid == DATE:
        return (logical.connect_date() if mode == "connect" else logical.date()), _date_days
    if oid == TIME:
        p = _precision(typmod)
        if mode == "connect":
            return logical.connect_time(), _time_millis
        if mode == "adaptive" and p <= 3:
            return logical.time_millis(), _time_millis
        return logical.micro_time(), _time_micros
    if oid == TIMESTAMP:
        p = _precision(typmod)
        if mode == "connect":
            return logical.connect_timestamp(), _timestamp_millis
        if p <= 3:
            return logical.timestamp_millis(), _timestamp_millis
        return logical.micro_timestamp(), _timestamp_micros
    if oid == TIMESTAMPTZ:
        if modes.envelope == "3":
            # Debezium 2.2+: the fraction has the column's precision (6 when unstated)
            digits = _precision(typmod)
            padded = logical.fixed_fraction(_timestamptz, digits)
            if padded is not _timestamptz:
                padded = native("timestamptz_utc_padded", min(digits, 9))(padded)
            return logical.zoned_timestamp(), padded
        return logical.zoned_timestamp(), _timestamptz
    if oid == TIMETZ:
        return logical.zoned_time(), _timetz
    if oid == INTERVAL:
        if modes.interval == "string":
            return logical.interval(), _interval_string
        return logical.micro_duration(), _interval_micros
    return None


_SIMPLE: dict[int, tuple[Schema, Conv | None]] = {
    BOOL: (BOOLEAN, _bool),
    INT2: (INT16, int),
    INT4: (INT32, int),
    INT8: (INT64, int),
    OID: (INT64, int),
    XID: (INT64, int),
    FLOAT4: (FLOAT32, _float),
    FLOAT8: (FLOAT64, _float),
    TEXT: (STRING, None),
    VARCHAR: (STRING, None),
    BPCHAR: (STRING, None),
    NAME: (STRING, None),
    CHAR: (STRING, None),
    JSON: (logical.json(), None),
    JSONB: (logical.json(), None),
    XML: (logical.xml(), None),
    UUID: (logical.uuid(), None),
    INET: (STRING, None),
    CIDR: (STRING, None),
    MACADDR: (STRING, None),
    MACADDR8: (STRING, None),
    INT4RANGE: (STRING, None),
    INT8RANGE: (STRING, None),
    NUMRANGE: (STRING, None),
    TSRANGE: (STRING, None),
    TSTZRANGE: (STRING, None),
    DATERANGE: (STRING, None),
    POINT: (logical.point(), _point),
}


class TypeRegistry:
    """Resolves a column (type OID + modifier) to a schema and a text converter, consulting
    catalog information for user-defined types."""

    def __init__(self, modes: Modes, catalog: dict[int, TypeInfo] | None = None) -> None:
        self.modes = modes
        self.catalog: dict[int, TypeInfo] = catalog or {}

    def resolve(self, oid: int, typmod: int) -> tuple[Schema, Conv | None] | None:
        simple = _SIMPLE.get(oid)
        if simple is not None:
            return simple
        modes = self.modes
        if oid == NUMERIC:
            return _decimal(modes, typmod)
        if oid == MONEY:
            if modes.decimal == "double":
                return FLOAT64, lambda v: float(_money(v))
            if modes.decimal == "string":
                # the decimal, not the server's locale text ("$92,233,720,368,547,758.07")
                return STRING, lambda v: format(_money(v).quantize(_CENT), "f")
            return logical.connect_decimal(2), lambda v: _money(v).quantize(decimal.Decimal("0.01"))
        if oid == BYTEA:
            return _binary(modes.binary)
        if oid == BIT:
            n = typmod if typmod > 0 else 1
            if n == 1:
                return BOOLEAN, lambda v: v == "1"
            return logical.bits(n), _bits
        if oid == VARBIT:
            if typmod == 1:  # Debezium: a length of 1 is a boolean for bit varying too
                return BOOLEAN, lambda v: "1" in v
            return logical.bits(typmod if typmod > 0 else 2**31 - 1), _bits
        if oid == TSVECTOR and modes.envelope == "3":
            return TSVECTOR_SCHEMA, None
        temporal = _temporal(oid, typmod, modes)
        if temporal is not None:
            return temporal
        info = self.catalog.get(oid)
        if info is None:
            return self._unknown()
        if info.category == "E" and not info.base_oid:  # a domain over an enum has "E" too
            return logical.enum(list(info.enum_labels)), None
        if info.base_oid:
            return self.resolve(info.base_oid, typmod if typmod >= 0 else info.base_typmod)
        if info.element_oid and info.category == "A":
            # box, lseg and line also have a typelem (point, float8) but are no arrays
            inner = self.resolve(info.element_oid, typmod)
            if inner is None:
                return None
            el_schema, el_conv = inner
            conv = el_conv or _identity
            element = self.catalog.get(info.element_oid)
            # Debezium declares an enum array's items required, every other array's optional
            if element is None or element.category != "E" or element.base_oid:
                el_schema = el_schema.as_optional()
            return array(el_schema, optional=True), lambda v: parse_array(v, conv)
        if info.name == "hstore":
            if modes.hstore == "json":
                return logical.json(), lambda v: orjson.dumps(hstore_map(v)).decode()
            return map_of(STRING, STRING.as_optional()), hstore_map
        if info.name in ("citext", "ltree"):
            return (logical.ltree() if info.name == "ltree" else STRING), None
        if info.name == "geometry":
            return logical.geometry(), _ewkb_hex
        if info.name == "geography":
            return logical.geography(), _ewkb_hex
        return self._unknown()

    def type_name(self, oid: int) -> str | None:
        """The catalog name of a user type, through domains (None for built-in types)."""
        for _ in range(10):
            info = self.catalog.get(oid)
            if info is None:
                return None
            if not info.base_oid:
                return info.name
            oid = info.base_oid
        return None

    def is_numeric(self, column: Column) -> bool:
        """Is the column numeric, or a domain over numeric?"""
        oid = column.native_type or 0
        for _ in range(10):
            if oid == NUMERIC:
                return True
            info = self.catalog.get(oid)
            if info is None or not info.base_oid:
                return False
            oid = info.base_oid
        return False

    def _unknown(self) -> tuple[Schema, Conv | None] | None:
        if not self.modes.include_unknown:
            return None
        return _binary(self.modes.binary)[0], lambda v: v.encode() if isinstance(v, str) else v


def _identity(v: Any) -> Any:
    return v


class PostgresValueConverters:
    """The connector's ``ValueConverterProvider``: per column, schema and converter."""

    def __init__(self, registry: TypeRegistry) -> None:
        self.registry = registry

    def source_type(self, table: Table, column: Column) -> tuple[str, int | None, int | None]:
        """The type name, length and scale ``column.propagate.source.type`` reports."""
        return source_type(self.registry, column.native_type or 0, column.type_modifier)

    def schema_for(self, table: Table, column: Column) -> Schema | None:
        res = self.registry.resolve(column.native_type or 0, column.type_modifier)
        if res is None:
            return None
        schema = res[0]
        if schema.type is Type.ARRAY:
            # int[][]: one array level per declared dimension, so the values match it
            for _ in range(column.dimensions - 1):
                schema = array(schema, optional=True)
        return schema

    def converter_for(self, table: Table, column: Column) -> Conv | None:
        res = self.registry.resolve(column.native_type or 0, column.type_modifier)
        conv = None if res is None else res[1]
        if res is not None and conv is not None and res[0].type is Type.ARRAY:
            return _with_depth(conv, max(column.dimensions, 1))
        if conv is None or not column.optional or not self.registry.is_numeric(column):
            return conv
        return _null_if_not_representable(conv, f"{table.id}.{column.name}")

    def unavailable_placeholder(
        self, table: Table, column: Column, schema: Schema, text: str, default: Any
    ) -> Any:
        """What an unchanged TOASTed value becomes (docs/postgres.md, "Unchanged TOASTed
        values"): Debezium's placeholders — the text for strings, its UTF-8 bytes for bytes,
        ``[text]`` for text arrays, the bytes as numbers for integer arrays, ``{text: text}``
        for hstore (its JSON text in ``hstore.handling.mode=json``) — and the same byte
        numbers for every array of integers or floats (date[], float8[]...): never null
        where a form fits the schema, so a consumer can tell the value apart from NULL."""
        if self.registry.type_name(column.native_type or 0) == "hstore":
            if schema.type is Type.MAP:
                return {text: text}
            if schema.name == logical.DBZ_JSON:
                return orjson.dumps({text: text}).decode()
        if schema.type is Type.ARRAY:
            return _array_placeholder(schema, text)
        return default


def _array_placeholder(schema: Schema, text: str) -> Any:
    items = schema.value_schema
    if items is None:
        return None
    if items.type is Type.ARRAY:
        inner = _array_placeholder(items, text)
        return None if inner is None else [inner]
    if items.type in (Type.INT8, Type.INT16, Type.INT32, Type.INT64):
        return list(text.encode())
    if items.type in (Type.FLOAT32, Type.FLOAT64):
        return [float(b) for b in text.encode()]
    if items.type is Type.STRING:
        return [text]
    if items.type is Type.BYTES:
        return [text.encode()]
    return None  # boolean[], and arrays of structs (point[], variable-scale numeric[])


def _with_depth(conv: Conv, depth: int) -> Conv:
    """PostgreSQL does not enforce an array column's declared dimensions: a value of another
    depth is reshaped to the schema's (deeper levels flattened in order, a shallower value
    wrapped), so the values always match the schema."""

    def shaped(v: Any) -> Any:
        out = conv(v)
        if isinstance(v, str) and "{" not in v[v.find("{") + 1 :] and depth == 1:
            return out  # one-dimensional already (the usual case)
        return _reshape(out, depth)

    return shaped


def _depth(value: Any) -> int:
    d = 0
    while isinstance(value, list):
        d += 1
        value = next((x for x in value if x is not None), None)
    return d


def flatten_array(values: list[Any]) -> list[Any]:
    """A nested array's elements in order (row-major), any depth."""
    out: list[Any] = []
    for x in values:
        if isinstance(x, list):
            out.extend(flatten_array(x))
        else:
            out.append(x)
    return out


def _reshape(value: Any, depth: int) -> Any:
    if not isinstance(value, list) or not value:
        return value
    if depth <= 1:
        return flatten_array(value)
    actual = _depth(value)
    if 0 < actual < depth:
        for _ in range(depth - actual):
            value = [value]
        return value
    return [_reshape(x, depth - 1) for x in value]


def _null_if_not_representable(conv: Conv, name: str) -> Conv:
    """An optional numeric column gets null for a value its mode cannot carry (logged once
    per column); a required one raises, so the event follows the failure handling mode."""
    warned = False

    def null_for(exc: NotRepresentable) -> None:
        nonlocal warned
        if not warned:
            warned = True
            log.warning("%s: %s; emitting null (logged once per column)", name, exc)

    variant = getattr(conv, "lenient", None)
    if variant is not None:  # numeric(p,s): the check inside the converter, no wrapper call
        made: Conv = variant(lambda v: null_for(_not_representable(v)))
        return made

    def lenient(v: Any) -> Any:
        try:
            return conv(v)
        except NotRepresentable as exc:
            null_for(exc)
            return None

    return lenient
