"""Debezium's ``TimezoneConverter``: time values of change events shown in one chosen zone.

Connectors write time values in UTC (``io.debezium.time.*Timestamp`` epoch numbers read as UTC
wall clocks, ``ZonedTimestamp``/``ZonedTime`` text with a ``Z``). Users who want the events to
carry local time (a team in one zone reading topics directly, a sink without time zone support)
set ``converted.timezone`` to a zone (``Europe/Paris``) or an offset (``+05:30``), optionally
limited by ``include.list`` / ``exclude.list`` rules (``source:<table>[:<field>]``,
``topic:<topic>[:<field>]``, ``<table or topic>:<field>``; a field may be ``before.x``,
``after.x`` or ``source.x``, a bare ``x`` meaning both ``before`` and ``after``).

Debezium's behaviour is reproduced as it is, including where it is surprising, because
consumers moving between Debezium and tidemark must see the same values:

* the epoch-number types are not moved to another instant's representation but *shifted*: the
  UTC wall clock is read as a wall clock of the target zone (``2018-06-20T15:00Z`` becomes the
  instant of ``2018-06-20T15:00`` in the zone). The offset is looked up for that wall clock
  (``ZoneRules.getOffset(LocalDateTime)``: inside a DST gap or overlap, the offset in force
  before the transition);
* a ``ZonedTimestamp`` keeps its instant and gets the zone's offset, but the offset is the one
  in force at the text's own wall clock (``10:15Z`` converted to Paris asks for the offset of
  10:15 Paris time, not of the instant), which differs from the instant's offset near a DST
  change; the result is written as Java's ``ISO_OFFSET_DATE_TIME`` (seconds always, the
  fraction without trailing zeros, ``Z`` for a zero offset);
* a ``ZonedTime`` has no date, so it gets the zone's offset *now*, at conversion time;
* the ``source`` block's ``ts_ms``/``ts_us``/``ts_ns`` (only when a rule names them, as
  ``source.ts_ms``) get the offset *added* (the opposite direction of the other types);
* ``Date`` and ``Time`` types are left alone (logged once per schema, where Debezium warns on
  every record);
* a null field whose schema has a default becomes the converted default (Connect's
  ``Struct.get`` reads the default);
* rule lists follow Debezium's parser: a rule without a ``source:``/``topic:`` prefix inherits
  the prefix of the rule before it (``source:a,b`` names the tables ``a`` and ``b``), the prefix
  is recognised in any case but a non-lowercase one then makes the rule unprefixed, and the
  whole list must match Debezium's pattern (names of letters, digits, ``_``, ``.``, ``"``
  and spaces; only the first rule may have three parts);
* values beyond Python's ``datetime`` range (PostgreSQL ``infinity`` arrives as year 294247)
  are converted with integer arithmetic (the zone offset is looked up in a year shifted by a
  multiple of 400, the period of the Gregorian calendar), wrapping at 64 bits where Java's
  ``long`` arithmetic wraps; text Java cannot parse (``infinity`` in a ``ZonedTimestamp``)
  fails the record as it fails Debezium's task.

Where Debezium accepts a setting at start-up and then fails every record (an offset such as
``+19:00`` or ``+05:60``, or a legacy ``java.util.TimeZone`` id such as ``PST`` or ``EST``
that ``ZoneId`` does not know), tidemark rejects the setting. Everything derived from a schema
(which fields of which block are converted, and how) is computed once per envelope schema and
matching rule, so a record costs one dict copy per converted block.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import re
import time
import zoneinfo
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cdc.record import SourceRecord
from cdc.schema import logical
from cdc.schema.model import Schema, Type
from cdc.transforms.base import (
    PluginConfig,
    SchemaCache,
    Transformation,
    TransformError,
    is_envelope,
)

LOG = logging.getLogger("tidemark.transforms.timezone")

CONVERTED_TIMEZONE = "converted.timezone"
INCLUDE_LIST = "include.list"
EXCLUDE_LIST = "exclude.list"

_BEFORE, _AFTER, _SOURCE = "before", "after", "source"
_TOPIC = "topic"

# Debezium's TIMEZONE_OFFSET_PATTERN and LIST_PATTERN (the list is matched in the form Java's
# List.toString gives it: "[a, b]"). Java's \d, \w and \s are ASCII-only.
_OFFSET_PATTERN = re.compile(r"[+-](\d{2}):(\d{2})(?::(\d{2}))?", re.ASCII)
_LIST_PATTERN = re.compile(
    r'\[(source|topic|[".\w\s_]+):([".\w\s_]+(?::[".\w\s_]+)?(?:,|\]$))+', re.ASCII
)
_LIST_PROBLEM = (
    "Invalid {} list format. Please specify a list of rules in the format of "
    '"source:<tablename>:<fieldnames>", "topic:<topicname>:<fieldnames>", '
    '"<matchname>:<fieldnames>"'
)
_TIMEZONE_PROBLEM = (
    "Invalid timezone format. Please specify either a geographic timezone "
    "(e.g. America/Los_Angeles) or a UTC offset in the format of +/-hh:mm, (e.g. +08:00)."
)
# Names Python's zone database knows and java.time's does not: Debezium rejects them, or (the
# java.util.TimeZone ids EST, MST, HST) accepts them and then fails on every record.
_NOT_JAVA_ZONES = frozenset(
    {"EST", "MST", "HST", "ROC", "Factory", "GMT+0", "GMT-0", "localtime", "posixrules"}
)
# java.util.TimeZone's legacy ids: Debezium's validation accepts them, ZoneId.of rejects them.
_LEGACY_IDS = frozenset({
    "ACT", "AET", "AGT", "ART", "AST", "BET", "BST", "CAT", "CNT", "CST", "CTT", "EAT", "ECT",
    "EST", "HST", "IET", "IST", "JST", "MIT", "MST", "NET", "NST", "PLT", "PNT", "PRT", "PST",
    "SST", "VST",
})  # fmt: skip

_MAX_OFFSET = 18 * 3600

# -- how each logical type is converted ------------------------------------------------------

_MICRO, _NANO, _MILLI, _CONNECT = "micro", "nano", "milli", "connect"
_ZONED_TIMESTAMP, _ZONED_TIME = "zoned_timestamp", "zoned_time"
_KINDS = {
    logical.DBZ_MICRO_TIMESTAMP: _MICRO,
    logical.DBZ_NANO_TIMESTAMP: _NANO,
    logical.DBZ_TIMESTAMP: _MILLI,
    logical.DBZ_ZONED_TIMESTAMP: _ZONED_TIMESTAMP,
    logical.DBZ_ZONED_TIME: _ZONED_TIME,
    logical.CONNECT_TIMESTAMP: _CONNECT,
}
_UNSUPPORTED = frozenset(
    {
        logical.DBZ_DATE,
        logical.DBZ_MICRO_TIME,
        logical.DBZ_NANO_TIME,
        logical.DBZ_TIME,
        logical.CONNECT_DATE,
        logical.CONNECT_TIME,
    }
)
_EPOCH_FIELDS = {"ts_ms": "epoch_ms", "ts_us": "epoch_us", "ts_ns": "epoch_ns"}
_NOT_LONG = "epoch_not_long"
_UNITS = {_MICRO: 1_000_000, _NANO: 1_000_000_000, _MILLI: 1000, _CONNECT: 1000}
_EPOCH_UNITS = {"epoch_ms": 1000, "epoch_us": 1_000_000, "epoch_ns": 1_000_000_000}

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def _wrap(value: int) -> int:
    """``value`` as Java's ``long`` arithmetic leaves it (two's complement overflow)."""
    return (value - _LONG_MIN) % 2**64 + _LONG_MIN


def _exact(value: int, where: str) -> int:
    """``Math.*Exact``: an overflow fails the record."""
    if _LONG_MIN <= value <= _LONG_MAX:
        return value
    raise TransformError(f"TimezoneConverter: long overflow converting {where}")


# -- calendar arithmetic (proleptic Gregorian, any year java.time allows) ---------------------

_DAY = 86_400
_CYCLE = 146_097 * _DAY  # 400 Gregorian years: a whole number of days (and of weeks)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# datetime's range, kept a few days clear of its ends so that adding an offset cannot leave it
_LOW = (dt.datetime(1, 1, 3) - _EPOCH_NAIVE) // dt.timedelta(seconds=1)
_HIGH = (dt.datetime(9999, 12, 29) - _EPOCH_NAIVE) // dt.timedelta(seconds=1)
_MAX_YEAR = 999_999_999  # java.time's Year.MAX_VALUE


def _into_range(seconds: int) -> int:
    """``seconds`` moved by whole 400-year cycles into ``datetime``'s range. Both the calendar
    and the zone's recurring rules repeat with that period, so the offset is the same."""
    if seconds > _HIGH:
        return seconds - -((_HIGH - seconds) // _CYCLE) * _CYCLE
    if seconds < _LOW:
        return seconds + -((seconds - _LOW) // _CYCLE) * _CYCLE
    return seconds


def _days_from_civil(year: int, month: int, day: int) -> int:
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


# -- the target zone ---------------------------------------------------------------------------


def _seconds(delta: dt.timedelta | None) -> int:
    return 0 if delta is None else delta.days * _DAY + delta.seconds


class _Zone:
    """``converted.timezone``: a fixed offset, or a region's rules."""

    __slots__ = ("fixed", "info")

    def __init__(self, fixed: int | None, info: zoneinfo.ZoneInfo | None) -> None:
        self.fixed = fixed
        self.info = info

    def at_local(self, local_seconds: int) -> int:
        """The offset for a wall clock (``ZoneRules.getOffset(LocalDateTime)``); ``fold=0``
        gives the offset before the transition in a gap and in an overlap, as Java does."""
        if self.fixed is not None:
            return self.fixed
        wall = _EPOCH_NAIVE + dt.timedelta(seconds=_into_range(local_seconds))
        return _seconds(wall.replace(tzinfo=self.info).utcoffset())

    def at_instant(self, epoch_seconds: int) -> int:
        """The offset in force at an instant (``ZoneRules.getOffset(Instant)``)."""
        if self.fixed is not None:
            return self.fixed
        utc = _EPOCH_UTC + dt.timedelta(seconds=_into_range(epoch_seconds))
        return _seconds(utc.astimezone(self.info).utcoffset())


@functools.cache
def _region_ids() -> frozenset[str]:
    return frozenset(
        zone
        for zone in zoneinfo.available_timezones()
        if zone not in _NOT_JAVA_ZONES and not zone.startswith(("posix/", "right/"))
    )


def _parse_zone(cfg: PluginConfig, text: str) -> _Zone | None:
    m = _OFFSET_PATTERN.fullmatch(text)
    if m is not None:
        hours, minutes, seconds = (int(g or 0) for g in m.groups())
        total = hours * 3600 + minutes * 60 + seconds
        if hours > 18 or minutes > 59 or seconds > 59 or total > _MAX_OFFSET:
            cfg.error(
                CONVERTED_TIMEZONE,
                f"the offset {text!r} is outside -18:00..+18:00 or not a valid hh:mm[:ss] "
                "(Debezium accepts it and then fails on every record)",
            )
            return None
        return _Zone(-total if text[0] == "-" else total, None)
    if text in _LEGACY_IDS:
        cfg.error(
            CONVERTED_TIMEZONE,
            f"{text!r} is a legacy java.util.TimeZone id that java.time does not know "
            "(Debezium accepts it and then fails on every record); use a region such as "
            "America/Los_Angeles or an offset",
        )
        return None
    if text not in _region_ids():
        cfg.error(CONVERTED_TIMEZONE, _TIMEZONE_PROBLEM)
        return None
    return _Zone(None, zoneinfo.ZoneInfo(text))


# -- Java's ISO_OFFSET_DATE_TIME / ISO_OFFSET_TIME ---------------------------------------------

_TIME = r"(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{0,9}))?)?"
# ISO_OFFSET_DATE_TIME reads the offset leniently ("+05" is accepted), ISO_OFFSET_TIME does not
_DATE_TIME_TEXT = re.compile(
    r"([+-]?\d{4,10})-(\d{2})-(\d{2})[Tt]" + _TIME + r"([Zz]|[+-]\d{2}(?::\d{2}(?::\d{2})?)?)",
    re.ASCII,
)
_TIME_TEXT = re.compile(_TIME + r"([Zz]|[+-]\d{2}:\d{2}(?::\d{2})?)", re.ASCII)


def _offset_of(text: str) -> int | None:
    if text in ("Z", "z"):
        return 0
    hours, minutes, seconds = int(text[1:3]), int(text[4:6] or 0), int(text[7:9] or 0)
    total = hours * 3600 + minutes * 60 + seconds
    if minutes > 59 or seconds > 59 or total > _MAX_OFFSET:
        return None
    return -total if text[0] == "-" else total


def _time_of(groups: tuple[str | None, ...]) -> tuple[int, int] | None:
    """(second of day, nanos) of ``HH:mm[:ss[.f]]``, or None when out of range."""
    hour, minute, second = int(groups[0] or 0), int(groups[1] or 0), int(groups[2] or 0)
    if hour > 23 or minute > 59 or second > 59:
        return None
    fraction = groups[3] or ""
    return hour * 3600 + minute * 60 + second, int((fraction + "000000000")[:9])


def _parse_date_time(text: str) -> tuple[int, int, int] | None:
    """``OffsetDateTime.parse(text, ISO_OFFSET_DATE_TIME)`` as (local epoch seconds, nanos,
    offset seconds), or None where Java throws ``DateTimeParseException``."""
    m = _DATE_TIME_TEXT.fullmatch(text)
    if m is None:
        return None
    year_text = m.group(1)
    digits = year_text.lstrip("+-")
    # SignStyle.EXCEEDS_PAD, strict: a sign exactly when more than four digits ('-' always
    # allowed, but not for zero)
    if year_text[0] == "+" and len(digits) <= 4:
        return None
    if year_text[0] not in "+-" and len(digits) > 4:
        return None
    year = int(year_text)
    if year_text[0] == "-" and year == 0:
        return None
    month, day = int(m.group(2)), int(m.group(3))
    if abs(year) > _MAX_YEAR or not 1 <= month <= 12:
        return None
    if not 1 <= day <= (29 if month == 2 and _is_leap(year) else _MONTH_DAYS[month - 1]):
        return None
    time_of_day = _time_of(m.groups()[3:7])
    offset = _offset_of(m.group(8))
    if time_of_day is None or offset is None:
        return None
    return _days_from_civil(year, month, day) * _DAY + time_of_day[0], time_of_day[1], offset


def _parse_time(text: str) -> tuple[int, int, int] | None:
    """``OffsetTime.parse(text, ISO_OFFSET_TIME)`` as (second of day, nanos, offset)."""
    m = _TIME_TEXT.fullmatch(text)
    if m is None:
        return None
    time_of_day = _time_of(m.groups()[:4])
    offset = _offset_of(m.group(5))
    if time_of_day is None or offset is None:
        return None
    return time_of_day[0], time_of_day[1], offset


def _offset_text(offset: int) -> str:
    if offset == 0:
        return "Z"
    magnitude = abs(offset)
    text = f"{'-' if offset < 0 else '+'}{magnitude // 3600:02d}:{magnitude // 60 % 60:02d}"
    return text + f":{magnitude % 60:02d}" if magnitude % 60 else text


def _time_text(second_of_day: int, nanos: int) -> str:
    text = f"{second_of_day // 3600:02d}:{second_of_day // 60 % 60:02d}:{second_of_day % 60:02d}"
    return text + "." + f"{nanos:09d}".rstrip("0") if nanos else text


def _date_time_text(local_seconds: int, nanos: int, offset: int) -> str | None:
    """``ISO_OFFSET_DATE_TIME`` of a wall clock; None beyond java.time's years."""
    days, second_of_day = divmod(local_seconds, _DAY)
    year, month, day = _civil_from_days(days)
    if abs(year) > _MAX_YEAR:
        return None
    year_text = f"+{year}" if year > 9999 else f"-{-year:04d}" if year < 0 else f"{year:04d}"
    return (
        f"{year_text}-{month:02d}-{day:02d}T{_time_text(second_of_day, nanos)}"
        f"{_offset_text(offset)}"
    )


# -- configuration: the rules ------------------------------------------------------------------

_ALL, _INCLUDE, _EXCLUDE = "all", "include", "exclude"


@dataclass(frozen=True, slots=True)
class _Selection:
    """What one matching rule converts: every time field (``all``) or the listed
    (``include``) / unlisted (``exclude``) ones of each block. ``key`` tells the selections
    apart in the schema cache."""

    key: int
    mode: str
    before: frozenset[str] = frozenset()
    after: frozenset[str] = frozenset()
    source: frozenset[str] = frozenset()


_JAVA_BLANKS = "".join(map(chr, range(33)))  # what Java's String.trim removes


def _java_split(text: str, separator: str) -> list[str]:
    """Java's ``String.split`` with a literal separator: trailing empty strings are dropped
    (so ``","`` gives no items), but a text without the separator is returned whole."""
    if separator not in text:
        return [text]
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _java_list(value: str | None) -> list[str]:
    """Debezium's ``Configuration.getList``: split at commas, each item trimmed."""
    if value is None:
        return []
    return [item.strip(_JAVA_BLANKS) for item in _java_split(value, ",")]


def _parse_item(item: str) -> tuple[str | None, str | None, str | None]:
    """Debezium's ``parseItem``: (prefix, match name, field name)."""
    parts = _java_split(item, ":")
    if len(parts) == 1:
        return None, parts[0], None
    if len(parts) in (2, 3):
        if parts[0].lower() in (_SOURCE, _TOPIC):
            return parts[0], parts[1], parts[2] if len(parts) == 3 else None
        return None, parts[0], parts[1]
    return None, None, None


def _collect(items: list[str]) -> tuple[dict[str, set[str]], ...]:
    """Debezium's ``collectTablesAndTopics``: the topic, table and unprefixed rule maps. A
    rule without a prefix takes the prefix of the rule before it."""
    topics: dict[str, set[str]] = {}
    tables: dict[str, set[str]] = {}
    unprefixed: dict[str, set[str]] = {}
    common: str | None = None
    for item in items:
        prefix, match_name, field_name = _parse_item(item)
        if prefix is not None:
            common = prefix
        if match_name is None:
            continue  # no or too many ':' (unreachable: the list pattern rejects such rules)
        target = topics if common == _TOPIC else tables if common == _SOURCE else unprefixed
        fields = target.setdefault(match_name, set())
        if field_name is not None:
            fields.add(field_name)
    return topics, tables, unprefixed


# -- per schema --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Conversion:
    name: str
    kind: str
    default: Any
    where: str  # ``block.field``, for error messages


_Plan = tuple[tuple[str, tuple[_Conversion, ...]], ...]


class TimezoneConverter(Transformation):
    def __init__(self) -> None:
        self._zone = _Zone(0, None)
        self._mode = _ALL
        self._all = _Selection(0, _ALL)
        self._topics: dict[str, _Selection | None] = {}
        self._tables: dict[str, _Selection | None] = {}
        self._unprefixed: dict[str, _Selection | None] = {}
        self._plans: SchemaCache[_Plan] = SchemaCache()
        #: seconds since the epoch, for ZonedTime values (Debezium's ``Instant.now()``)
        self.clock: Callable[[], float] = time.time

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        timezone = cfg.required(CONVERTED_TIMEZONE)
        zone = _parse_zone(cfg, timezone) if timezone else None
        lists: dict[str, list[str]] = {}
        for key, label in ((INCLUDE_LIST, "include"), (EXCLUDE_LIST, "exclude")):
            # A blank value counts as unset (Debezium would read it as one empty rule and
            # reject it).
            items = _java_list(cfg.raw(key) or None)
            if items and not _LIST_PATTERN.fullmatch("[" + ", ".join(items) + "]"):
                cfg.error(key, _LIST_PROBLEM.format(label))
            lists[key] = items
        include, exclude = lists[INCLUDE_LIST], lists[EXCLUDE_LIST]
        if include and exclude:
            cfg.error(
                EXCLUDE_LIST,
                "Both include and exclude lists are specified. Please specify only one.",
            )
        cfg.check()
        assert zone is not None
        self._zone = zone
        self._mode = _EXCLUDE if exclude else _INCLUDE if include else _ALL
        self._plans = SchemaCache()
        keys = iter(range(1, 1 << 62))
        maps = _collect(exclude or include)
        self._topics, self._tables, self._unprefixed = (
            {name: self._selection(fields, keys) for name, fields in rules.items()}
            for rules in maps
        )

    def _selection(self, fields: set[str], keys: Iterator[int]) -> _Selection | None:
        """What a matched rule with ``fields`` does: Debezium's handleInclude/handleExclude.
        None: nothing is converted."""
        if not fields:
            return self._all if self._mode == _INCLUDE else None
        before: set[str] = set()
        after: set[str] = set()
        source: set[str] = set()
        for field in fields:
            block, dot, name = field.partition(".")
            if dot and block == _SOURCE:
                source.add(name)
            elif dot and block == _BEFORE:
                before.add(name)
            elif dot and block == _AFTER:
                after.add(name)
            else:
                before.add(field)
                after.add(field)
        return _Selection(
            next(keys), self._mode, frozenset(before), frozenset(after), frozenset(source)
        )

    # -- per record ----------------------------------------------------------------------------

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        value, schema = record.value, record.value_schema
        if value is None or schema is None or not is_envelope(schema):
            return record
        if not isinstance(value, Mapping):
            return record
        selection = self._select(_table(schema, value), record.topic)
        if selection is None:
            return record
        plan = self._plans.get(schema, selection.key)
        if plan is None:
            plan = self._plans.put(schema, self._plan(schema, selection), selection.key)
        out: dict[str, Any] | None = None
        for block, conversions in plan:
            row = value.get(block)
            if not isinstance(row, Mapping):
                continue
            new_row: dict[str, Any] | None = None
            for conversion in conversions:
                v = row.get(conversion.name)
                if v is None:
                    v = conversion.default  # Struct.get reads a null as the default
                    if v is None:
                        continue
                if new_row is None:
                    new_row = dict(row)
                new_row[conversion.name] = self._convert(conversion, v)
            if new_row is not None:
                if out is None:
                    out = dict(value)
                out[block] = new_row
        return record if out is None else record.with_(value=out)

    def _select(self, table: str | None, topic: str | None) -> _Selection | None:
        """Debezium's handleMatchNameAndFields and handleInclude / handleExclude /
        handleAllRecords."""
        if self._mode == _ALL:
            return self._all if table is not None or topic is not None else None
        if topic is not None and topic in self._topics:
            return self._topics[topic]
        if table is not None and table in self._tables:
            return self._tables[table]
        if topic is not None and topic in self._unprefixed:
            return self._unprefixed[topic]
        if table is not None and table in self._unprefixed:
            return self._unprefixed[table]
        if self._mode == _INCLUDE:
            return None
        return self._all if table is not None or topic is not None else None

    def _plan(self, envelope: Schema, selection: _Selection) -> _Plan:
        plan = []
        skipped: dict[tuple[str, str], list[str]] = {}  # (field, logical type) -> blocks
        for block, fields in (
            (_BEFORE, selection.before),
            (_AFTER, selection.after),
            (_SOURCE, selection.source),
        ):
            if block == _SOURCE and not fields:
                continue  # the source block only when a rule names its fields
            field = envelope.field(block)
            if field is None or field.schema.type is not Type.STRUCT:
                continue
            conversions = self._block_plan(block, field.schema, selection.mode, fields, skipped)
            if conversions:
                plan.append((block, conversions))
        for (name, logical_name), blocks in skipped.items():
            LOG.warning(
                "Skipping conversion for unsupported logical type: %s for field: %s (in %s of %s)",
                logical_name,
                name,
                " and ".join(blocks),
                envelope.name,
            )
        return tuple(plan)

    @staticmethod
    def _block_plan(
        block: str,
        schema: Schema,
        mode: str,
        fields: frozenset[str],
        skipped: dict[tuple[str, str], list[str]],
    ) -> tuple[_Conversion, ...]:
        """Debezium's handleValueForFields, decided once for the block's schema. Included
        fields of the unsupported date/time types are added to ``skipped``."""
        conversions = []
        for field in schema.fields:
            name = field.schema.name
            epoch = block == _SOURCE and field.name in _EPOCH_FIELDS
            if name is None and not epoch:
                continue
            if not (
                mode == _ALL
                or (mode == _INCLUDE and field.name in fields)
                or (mode == _EXCLUDE and field.name not in fields)
            ):
                continue
            if name in _UNSUPPORTED:
                skipped.setdefault((field.name, name), []).append(block)
                continue
            if name is not None:
                kind = _KINDS.get(name)
                if kind is None:
                    continue  # another logical type: Debezium writes the value back unchanged
            else:
                kind = _EPOCH_FIELDS[field.name] if field.schema.type is Type.INT64 else _NOT_LONG
            conversions.append(
                _Conversion(field.name, kind, field.schema.default, f"{block}.{field.name}")
            )
        return tuple(conversions)

    # -- values --------------------------------------------------------------------------------

    def _convert(self, conversion: _Conversion, value: Any) -> Any:
        kind, where = conversion.kind, conversion.where
        if kind == _ZONED_TIMESTAMP:
            return self._zoned_timestamp(value, where)
        if kind == _ZONED_TIME:
            return self._zoned_time(value, where)
        if kind == _CONNECT and isinstance(value, dt.datetime):
            return self._connect_datetime(value, where)
        if kind == _NOT_LONG or not isinstance(value, int) or isinstance(value, bool):
            if kind in _EPOCH_UNITS or kind == _NOT_LONG:
                raise TransformError(
                    f"TimezoneConverter: epoch field value should be a java.lang.Long ({where})"
                )
            raise TransformError(
                f"TimezoneConverter: {where} holds a {type(value).__name__}, expected an "
                "epoch number"
            )
        unit = _EPOCH_UNITS.get(kind)
        if unit is not None:
            return self._epoch(value, unit, where)
        unit = _UNITS[kind]
        # the UTC wall clock of the value, read as a wall clock of the zone
        shifted = value - self._zone.at_local(value // unit) * unit
        if kind in (_MILLI, _CONNECT):
            return _exact(shifted, where)  # Instant.toEpochMilli
        return _wrap(shifted)  # long multiplication and addition

    def _epoch(self, value: int, unit: int, where: str) -> int:
        """A source timestamp with the offset in force at it added (Debezium's
        getEpochWithTimezone)."""
        seconds, fraction = divmod(value, unit)
        seconds += self._zone.at_instant(seconds)
        if unit == 1000:
            return _exact(seconds * 1000 + fraction, where)
        # TimeUnit conversions saturate, the addition after them wraps
        whole = min(max(seconds * unit, _LONG_MIN), _LONG_MAX)
        return _wrap(whole + fraction)

    def _connect_datetime(self, value: dt.datetime, where: str) -> dt.datetime:
        """A Connect Timestamp handed over as a ``datetime`` (naive means UTC) instead of
        epoch milliseconds; the result keeps the input's form."""
        utc = value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value
        local = (utc - _EPOCH_NAIVE) // dt.timedelta(seconds=1)
        try:
            shifted = utc - dt.timedelta(seconds=self._zone.at_local(local))
        except OverflowError as exc:
            raise TransformError(f"TimezoneConverter: {where} out of range: {exc}") from exc
        return shifted.replace(tzinfo=dt.UTC) if value.tzinfo else shifted

    def _zoned_timestamp(self, value: Any, where: str) -> str:
        parsed = _parse_date_time(value) if isinstance(value, str) else None
        if parsed is None:
            raise TransformError(
                f"TimezoneConverter: text {value!r} in {where} could not be parsed as an ISO "
                "offset date-time (io.debezium.time.ZonedTimestamp)"
            )
        local, nanos, offset = parsed
        # the offset in force at the text's own wall clock (Debezium's choice)
        target = self._zone.at_local(local)
        text = _date_time_text(local - offset + target, nanos, target)
        if text is None:
            raise TransformError(f"TimezoneConverter: {where} {value!r} is out of range")
        return text

    def _zoned_time(self, value: Any, where: str) -> str:
        parsed = _parse_time(value) if isinstance(value, str) else None
        if parsed is None:
            raise TransformError(
                f"TimezoneConverter: text {value!r} in {where} could not be parsed as an ISO "
                "offset time (io.debezium.time.ZonedTime)"
            )
        second_of_day, nanos, offset = parsed
        target = self._zone.at_instant(int(self.clock() // 1))
        return _time_text((second_of_day - offset + target) % _DAY, nanos) + _offset_text(target)


def _table(envelope: Schema, value: Mapping[str, Any]) -> str | None:
    """``source.table`` when the envelope has one (Debezium's getTableFromSource)."""
    source_field = envelope.field(_SOURCE)
    if source_field is None or source_field.schema.type is not Type.STRUCT:
        return None
    table_field = source_field.schema.field("table")
    if table_field is None or table_field.schema.type is not Type.STRING:
        return None
    source = value.get(_SOURCE)
    if not isinstance(source, Mapping):
        return None
    table = source.get("table")
    if table is None:
        table = table_field.schema.default
    return table if isinstance(table, str) else None


__all__ = ["TimezoneConverter"]
