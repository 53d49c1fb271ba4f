"""Relational table structure, as a connector reads it from its database's catalog or log.

The core turns a ``Table`` into key/value schemas and row converters once per table version,
so per-row work is a tuple walk with precomputed functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cdc.spi.events import TableId


@dataclass(frozen=True)
class Column:
    """``type_name`` is the database's own type name (``int4``, ``varchar``, ``DECIMAL``);
    ``native_type`` a connector-specific code (PostgreSQL type OID, MySQL column type)."""

    name: str
    #: 0-based index in the table's row (Debezium's ``tableChanges`` show it plus one)
    position: int
    type_name: str
    native_type: int | None = None
    length: int | None = None
    scale: int | None = None
    optional: bool = True
    default: Any = None
    has_default: bool = False
    auto_increment: bool = False
    enum_values: tuple[str, ...] | None = None
    charset: str | None = None
    dimensions: int = 0
    #: the database's raw type modifier (PostgreSQL atttypmod), -1 when none
    type_modifier: int = -1
    #: ``java.sql.Types`` code where the connector's differs from the one the type name
    #: gives (Debezium's MySQL parser: TINYINT is SMALLINT, TIMESTAMP is
    #: TIMESTAMP_WITH_TIMEZONE); None: derived from ``type_name``
    jdbc_type: int | None = None
    #: Debezium's ``generated``: the database fills it (AUTO_INCREMENT, SERIAL)
    generated: bool = False
    comment: str | None = None


@dataclass(frozen=True)
class Table:
    id: TableId
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    comment: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def column(self, name: str) -> Column | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None

    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


ValueConverter = Callable[[Any], Any]
"""Turns a driver value (never None: the core handles NULL) into its Connect representation."""


class ValueConverterProvider(Protocol):
    """The connector's type mapping: a Connect schema and a converter per column.

    Returning None for a column means the connector cannot represent it (e.g. an unknown type
    with ``include.unknown.datatypes=false``): the column is left out of the value schema."""

    def schema_for(self, table: Table, column: Column) -> Any: ...

    def converter_for(self, table: Table, column: Column) -> ValueConverter | None: ...


def key_columns(table: Table, override: Sequence[str] | None = None) -> list[Column]:
    names = list(override) if override else list(table.primary_key)
    cols = []
    for n in names:
        col = table.column(n)
        if col is None:
            raise KeyError(f"key column {n!r} is not a column of {table.id}")
        cols.append(col)
    return cols
