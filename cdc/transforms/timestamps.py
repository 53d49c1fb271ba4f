"""Kafka Connect's ``TimestampConverter``: a field (or the whole key/value) between epoch
numbers, formatted strings and Connect's ``Timestamp`` / ``Date`` / ``Time`` types.

Debezium users apply it after ``ExtractNewRecordState`` to turn ``io.debezium.time.*`` epoch
numbers into text or into Connect timestamps a sink understands. As in Kafka:

* the input kind comes from the field's schema: Connect's ``Timestamp``/``Date``/``Time`` by
  name, else any ``string`` is parsed with ``format`` and any ``int64`` is an epoch number in
  ``unix.precision`` (so ``io.debezium.time.MicroTimestamp`` needs
  ``unix.precision=microseconds``);
* everything passes through a millisecond instant in UTC, so sub-millisecond digits are
  truncated on the way, as ``java.util.Date`` does;
* ``format`` is a ``java.text.SimpleDateFormat`` pattern, written and read in UTC. The pattern
  letters Debezium users put there are supported (``y M d H h k K m s S E a D u z Z X`` and
  quoted text); any other letter is a config error rather than a silent difference.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from cdc.record import SourceRecord
from cdc.schema import logical
from cdc.schema.model import INT64, STRING, Schema, Type
from cdc.transforms.base import PluginConfig, SchemaCache, TransformError, copy_basics
from cdc.transforms.fields import KeyOrValue, field_value, require_struct

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MS_PER_DAY = 86_400_000
_PRECISION = {"seconds": 1000, "milliseconds": 1, "microseconds": 1000, "nanoseconds": 1_000_000}
_TARGETS = {"string", "unix", "date", "time", "timestamp"}

# -- SimpleDateFormat --------------------------------------------------------------------------

_TOKENS = re.compile(r"'(?:[^']|'')*'|([A-Za-z])\1*|[^A-Za-z']+")
_MONTHS = [
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
]  # fmt: skip
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


class _Instant(NamedTuple):
    """A millisecond instant's calendar fields in UTC, for any ``long`` Java can hold.
    ``datetime`` stops at year 9999, and PostgreSQL's ``infinity`` arrives as year 294247
    (Debezium's sentinel), a legal value that must not stop the task. As Java's default
    ``GregorianCalendar``: Julian dates before 1582-10-15, and the year of the era (1 BC is
    year 1) where a year is written."""

    year: int
    month: int
    day: int
    hour: int
    minute: int
    second: int
    millis: int
    weekday: int  # 0 = Monday
    yday: int


_GREGORIAN_CUTOVER_DAY = -141427  # 1582-10-15, in days since 1970-01-01
_EPOCH_JDN = 2440588  # the Julian day number of 1970-01-01


def _civil(days: int) -> tuple[int, int, int]:
    """Year, month and day of ``days`` since the epoch (astronomical years: 0 is 1 BC)."""
    jdn = days + _EPOCH_JDN
    if days >= _GREGORIAN_CUTOVER_DAY:
        a = jdn + 32044
        b = (4 * a + 3) // 146097
        c = a - 146097 * b // 4
    else:  # Julian calendar
        b, c = 0, jdn + 32082
    d = (4 * c + 3) // 1461
    e = c - 1461 * d // 4
    m = (5 * e + 2) // 153
    return 100 * b + d - 4800 + m // 10, m + 3 - 12 * (m // 10), e - (153 * m + 2) // 5 + 1


def _instant(millis: int) -> _Instant:
    days, ms = divmod(millis, _MS_PER_DAY)
    year, month, day = _civil(days)
    jan1 = days - (day - 1)
    for _ in range(month - 1):  # back to January 1st, month by month
        jan1 -= _civil(jan1 - 1)[2]
    seconds, millis_part = divmod(ms, 1000)
    return _Instant(
        year, month, day, seconds // 3600, seconds // 60 % 60, seconds % 60, millis_part,
        (days + 3) % 7, days - jan1 + 1,
    )  # fmt: skip


def _era_year(t: _Instant) -> int:
    return t.year if t.year > 0 else 1 - t.year


def _number(get: Callable[[_Instant], int]) -> Callable[[_Instant, int], str]:
    return lambda t, n: str(get(t)).zfill(n)


_WRITERS: dict[str, Callable[[_Instant, int], str]] = {
    "y": lambda t, n: (
        str(_era_year(t) % 100).zfill(2) if n == 2 else str(_era_year(t)).zfill(n)
    ),
    "M": lambda t, n: (
        _MONTHS[t.month - 1][:3] if n == 3 else _MONTHS[t.month - 1] if n > 3
        else str(t.month).zfill(n)
    ),
    "d": _number(lambda t: t.day),
    "H": _number(lambda t: t.hour),
    "k": _number(lambda t: t.hour or 24),
    "K": _number(lambda t: t.hour % 12),
    "h": _number(lambda t: t.hour % 12 or 12),
    "m": _number(lambda t: t.minute),
    "s": _number(lambda t: t.second),
    "S": _number(lambda t: t.millis),  # milliseconds, zero-padded to the count
    "D": _number(lambda t: t.yday),
    "u": _number(lambda t: t.weekday + 1),
    "E": lambda t, n: _DAYS[t.weekday] if n > 3 else _DAYS[t.weekday][:3],
    "a": lambda t, n: "AM" if t.hour < 12 else "PM",
    "z": lambda t, n: "UTC" if n < 4 else "Coordinated Universal Time",
    "Z": lambda t, n: "+0000",
    "X": lambda t, n: "Z",
}  # fmt: skip


class DateFormat:
    """One ``SimpleDateFormat`` pattern: ``format`` writes an instant, ``parse`` reads one."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._parts: list[tuple[str, int] | str] = []
        for m in _TOKENS.finditer(pattern):
            text = m.group(0)
            if text.startswith("'"):
                self._parts.append(text[1:-1].replace("''", "'") if text != "''" else "'")
            elif m.group(1):
                letter = m.group(1)
                if letter not in _WRITERS:
                    raise ValueError(f"pattern letter {letter!r} is not supported")
                self._parts.append((letter, len(text)))
            else:
                self._parts.append(text)
        if sum(isinstance(p, str) for p in self._parts) == len(self._parts) and pattern:
            raise ValueError("the pattern has no date or time field")
        self._regex = self._reader()

    def format(self, millis: int) -> str:
        t = _instant(millis)
        return "".join(p if isinstance(p, str) else _WRITERS[p[0]](t, p[1]) for p in self._parts)

    def _reader(self) -> re.Pattern[str]:
        out = []
        for p in self._parts:
            if isinstance(p, str):
                out.append(re.escape(p))
            else:
                letter, n = p
                digits = rf"\d{{{n}}}" if n > 1 else r"\d+"
                kinds = {"y": r"\d{2}" if n == 2 else r"\d{4}", "M": r"\w+" if n >= 3 else digits,
                         "E": r"\w+", "a": "AM|PM|am|pm", "z": r"[\w ]+",
                         "Z": r"[+-]\d{4}|Z", "X": r"[+-]\d{2}(?::?\d{2})?|Z"}  # fmt: skip
                out.append(f"(?P<{letter}{len(out)}>{kinds.get(letter, digits)})")
        return re.compile("".join(out))

    def parse(self, text: str) -> int:
        m = self._regex.fullmatch(text)
        if m is None:
            raise ValueError(f"{text!r} does not match the format {self.pattern!r}")
        fields = {"year": 1970, "month": 1, "day": 1, "hour": 0, "minute": 0, "second": 0}
        millis, pm, offset = 0, None, dt.timedelta(0)
        for name, value in m.groupdict().items():
            letter = name[0]
            if letter == "y":
                year = int(value)
                fields["year"] = 2000 + year if len(value) == 2 else year
            elif letter == "M":
                fields["month"] = _month(value)
            elif letter == "d":
                fields["day"] = int(value)
            elif letter in "Hk":
                fields["hour"] = int(value) % 24
            elif letter in "hK":
                fields["hour"] = int(value) % 12
            elif letter == "m":
                fields["minute"] = int(value)
            elif letter == "s":
                fields["second"] = int(value)
            elif letter == "S":
                millis = int(value)
            elif letter == "a":
                pm = value.upper() == "PM"
            elif letter in "ZX" and value != "Z":
                sign = -1 if value[0] == "-" else 1
                digits = value[1:].replace(":", "")
                minutes = int(digits[:2]) * 60 + (int(digits[2:4]) if len(digits) > 2 else 0)
                offset = dt.timedelta(minutes=sign * minutes)
        if pm:
            fields["hour"] += 12
        try:
            t = dt.datetime(**fields, tzinfo=dt.UTC) - offset
        except ValueError as exc:
            raise ValueError(f"{text!r} is not a valid date for {self.pattern!r}: {exc}") from exc
        return (t - EPOCH) // dt.timedelta(milliseconds=1) + millis


def _month(value: str) -> int:
    if value.isdigit():
        return int(value)
    for i, name in enumerate(_MONTHS):
        if name.lower().startswith(value.lower()[:3]):
            return i + 1
    raise ValueError(f"unknown month {value!r}")


# -- the transform -----------------------------------------------------------------------------


def _kind(schema: Schema) -> str:
    if schema.name == logical.CONNECT_TIMESTAMP:
        return "timestamp"
    if schema.name == logical.CONNECT_DATE:
        return "date"
    if schema.name == logical.CONNECT_TIME:
        return "time"
    if schema.type is Type.STRING:
        return "string"
    if schema.type is Type.INT64:
        return "unix"
    raise TransformError(
        f"Schema {schema.name or schema.type.value} does not correspond to a known timestamp "
        "type format"
    )


def _kind_of_value(value: Any) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, dt.datetime):
        return "timestamp"
    if isinstance(value, int):
        return "unix"
    raise TransformError(f"TimestampConverter does not support {type(value).__name__} values")


class TimestampConverter(KeyOrValue):
    PURPOSE = "converting timestamp formats"

    def __init__(self) -> None:
        self._cache: SchemaCache[Schema] = SchemaCache()

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._field = cfg.string("field", "") or ""
        target = (cfg.required("target.type") or "").lower()
        if target and target not in _TARGETS:
            cfg.error("target.type", "must be one of string, unix, Date, Time, Timestamp")
        self._target = target
        self._format: DateFormat | None = None
        pattern = cfg.string("format")
        if pattern:
            try:
                self._format = DateFormat(pattern)
            except ValueError as exc:
                cfg.error("format", f"invalid SimpleDateFormat pattern {pattern!r}: {exc}")
        elif target == "string":
            cfg.error("format", "TimestampConverter requires format option to be specified "
                                "when using string timestamps")  # fmt: skip
        self._precision = cfg.choice("unix.precision", tuple(_PRECISION), "milliseconds")
        self._scale = _PRECISION[self._precision]
        self._use_default = cfg.boolean("replace.null.with.default", True)
        if cfg.choice("field.syntax.version", ("v1", "v2"), "v1") == "v2":
            cfg.error("field.syntax.version", "V2 (nested field paths) is not supported; use V1")
        cfg.check()

    # instant in milliseconds <-> each kind
    def _to_millis(self, value: Any, kind: str) -> int:
        if isinstance(value, dt.datetime):
            aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
            return (aware - EPOCH) // dt.timedelta(milliseconds=1)
        if isinstance(value, dt.date):
            return (value - EPOCH.date()).days * _MS_PER_DAY
        if isinstance(value, dt.time):
            return (value.hour * 3600 + value.minute * 60 + value.second) * 1000 + (
                value.microsecond // 1000
            )
        if kind == "string":
            if self._format is None:
                raise TransformError("TimestampConverter requires format option to be specified "
                                     "when using string timestamps")  # fmt: skip
            try:
                return self._format.parse(value)
            except ValueError as exc:
                raise TransformError(f"Could not parse timestamp: {exc}") from exc
        if kind == "date":
            return int(value) * _MS_PER_DAY
        if kind == "unix" and self._precision in ("microseconds", "nanoseconds"):
            n = int(value)  # Java's TimeUnit truncates toward zero
            return -(-n // self._scale) if n < 0 else n // self._scale
        if kind == "unix" and self._precision == "seconds":
            return int(value) * 1000
        return int(value)

    def _from_millis(self, millis: int) -> Any:
        target = self._target
        if target == "string":
            assert self._format is not None
            return self._format.format(millis)
        if target == "unix":
            if self._precision == "seconds":
                return millis // 1000 if millis >= 0 else -((-millis) // 1000)
            return millis * self._scale if self._precision != "milliseconds" else millis
        if target == "date":
            return millis // _MS_PER_DAY
        if target == "time":
            return millis % _MS_PER_DAY
        return millis

    def _target_schema(self, optional: bool) -> Schema:
        schema = {
            "string": STRING,
            "unix": INT64,
            "date": logical.connect_date(),
            "time": logical.connect_time(),
            "timestamp": logical.connect_timestamp(),
        }[self._target]
        return schema.with_(optional=optional)

    def _convert(self, value: Any, kind: str) -> Any:
        if value is None:
            return None
        return self._from_millis(self._to_millis(value, kind))

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        value, schema = self.value_of(record), self.schema_of(record)
        if not self._field:
            if schema is None:
                kind = _kind_of_value(value) if value is not None else "unix"
                return self.replaced(record, None, self._convert(value, kind))
            updated = self._cache.get(schema)
            if updated is None:
                _kind(schema)
                updated = self._cache.put(schema, self._target_schema(schema.optional))
            return self.replaced(record, updated, self._convert(value, _kind(schema)))
        if value is None:
            return record
        value = require_struct(value, schema, self.PURPOSE)
        name = self._field
        if schema is None:
            v = value.get(name)
            out = dict(value)
            out[name] = None if v is None else self._convert(v, _kind_of_value(v))
            return self.replaced(record, None, out)
        f = schema.field(name)
        if f is None:
            raise TransformError(f"Unknown field: {name} (on {record.topic})")
        updated = self._cache.get(schema)
        if updated is None:
            fields = [
                (g.name, self._target_schema(g.schema.optional) if g.name == name else g.schema)
                for g in schema.fields
            ]
            updated = self._cache.put(schema, copy_basics(schema, fields))
        kind = _kind(f.schema)
        out = {
            g.name: field_value(value, g.name, g.schema, self._use_default) for g in schema.fields
        }
        out[name] = self._convert(out[name], kind)
        return self.replaced(record, updated, out)


class TimestampConverterKey(TimestampConverter):
    side = "key"
