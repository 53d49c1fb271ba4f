"""Table and column selection from the include/exclude lists.

Patterns are anchored regular expressions matched against fully-qualified names, as in
Debezium: ``schema.table`` (PostgreSQL), ``db.table`` (MySQL), ``...table.column`` for columns;
where a table id has both (SQL Server), ``db.schema.table`` matches too.
Results are cached per table because the same tables are asked about on every event.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from cdc.spi import TableId


def _compile(patterns: Iterable[str]) -> list[re.Pattern[str]]:
    return [re.compile(p, re.IGNORECASE) for p in patterns]


def _any_full(patterns: Sequence[re.Pattern[str]], text: str) -> bool:
    return any(p.fullmatch(text) for p in patterns)


class TableFilter:
    """Include/exclude per level; a level with no lists accepts everything that is not a
    system object. ``system`` is the connector's predicate for built-in schemas/tables."""

    def __init__(
        self,
        *,
        database_include: Iterable[str] = (),
        database_exclude: Iterable[str] = (),
        schema_include: Iterable[str] = (),
        schema_exclude: Iterable[str] = (),
        table_include: Iterable[str] = (),
        table_exclude: Iterable[str] = (),
        system: frozenset[str] = frozenset(),
    ) -> None:
        self.db_inc = _compile(database_include)
        self.db_exc = _compile(database_exclude)
        self.schema_inc = _compile(schema_include)
        self.schema_exc = _compile(schema_exclude)
        self.table_inc = _compile(table_include)
        self.table_exc = _compile(table_exclude)
        self.system = system
        self.is_included = lru_cache(maxsize=4096)(self._is_included)

    def _level(self, inc: list[re.Pattern[str]], exc: list[re.Pattern[str]], name: str) -> bool:
        if inc:
            return _any_full(inc, name)
        return not _any_full(exc, name)

    def _is_included(self, table_id: TableId) -> bool:
        container = table_id.schema if table_id.schema is not None else table_id.catalog
        if container is not None and container.lower() in self.system:
            return False
        if table_id.catalog is not None and not self._level(
            self.db_inc, self.db_exc, table_id.catalog
        ):
            return False
        if table_id.schema is not None and not self._level(
            self.schema_inc, self.schema_exc, table_id.schema
        ):
            return False
        names = [_short_identifier(table_id)]
        if table_id.catalog is not None and table_id.schema is not None:
            # db.schema.table too (SQL Server capturing several databases)
            names.append(f"{table_id.catalog}.{table_id.schema}.{table_id.table}")
        if self.table_inc:
            return any(_any_full(self.table_inc, n) for n in names)
        return not any(_any_full(self.table_exc, n) for n in names)


def _short_identifier(table_id: TableId) -> str:
    """The name table filters match: schema.table where there is a schema, else db.table."""
    container = table_id.schema if table_id.schema is not None else table_id.catalog
    return f"{container}.{table_id.table}" if container is not None else table_id.table


class ColumnFilter:
    def __init__(self, include: Iterable[str] = (), exclude: Iterable[str] = ()) -> None:
        self.inc = _compile(include)
        self.exc = _compile(exclude)

    @property
    def active(self) -> bool:
        return bool(self.inc or self.exc)

    def is_included(self, table_id: TableId, column: str) -> bool:
        if not self.active:
            return True
        names = [f"{_short_identifier(table_id)}.{column}"]
        if table_id.catalog is not None and table_id.schema is not None:
            names.append(f"{table_id.catalog}.{table_id.schema}.{table_id.table}.{column}")
        if self.inc:
            return any(_any_full(self.inc, n) for n in names)
        return not any(_any_full(self.exc, n) for n in names)


def column_matches(patterns: Sequence[re.Pattern[str]], table_id: TableId, column: str) -> bool:
    """Column selectors (masks, truncation, propagate.source.type) use the same names."""
    names = [f"{_short_identifier(table_id)}.{column}"]
    if table_id.catalog is not None and table_id.schema is not None:
        names.append(f"{table_id.catalog}.{table_id.schema}.{table_id.table}.{column}")
    return any(_any_full(patterns, n) for n in names)


def compile_patterns(patterns: Iterable[str]) -> list[re.Pattern[str]]:
    return _compile(patterns)


def describe_unmatched(patterns: Iterable[str], existing: Iterable[str]) -> str:
    """Why an include list captures nothing, for the start-up error: each pattern with the
    existing names closest to it (a typo shows at once), or the few names there are."""
    import difflib

    names = sorted(set(existing))
    if not names:
        return f"no pattern of {', '.join(patterns)} can match: there are no tables"
    parts = []
    for pattern in patterns:
        plain = pattern.replace("\\.", ".").strip("^$")
        near = difflib.get_close_matches(plain, names, n=3, cutoff=0.4)
        parts.append(f"{pattern!r} (nearest: {', '.join(near) if near else 'none close'})")
    return (
        f"no table matches {'; '.join(parts)}; {len(names)} table(s) exist, e.g. "
        f"{', '.join(names[:5])}"
    )


def warn_running_empty(reason: str, notices: list[str]) -> None:
    """``table.include.list.allow.empty=true``: the connector runs although its include list
    captures nothing. Said in the log and kept in the task's status, where an operator who
    mistyped a pattern looks (a log line alone scrolls away)."""
    notice = f"{reason} (running anyway: table.include.list.allow.empty=true)"
    logging.getLogger("tidemark.filters").warning("%s", notice)
    if notice not in notices:
        notices.append(notice)
