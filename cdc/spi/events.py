"""What a connector reports to the core: row changes and the other things a log carries.

Connectors report *facts* (a row changed, a transaction began, the schema changed, the log
moved on); the core decides what becomes a Kafka record. Every event carries the offset to
store once it and everything before it are acknowledged, and the connector-specific fields of
the envelope's ``source`` block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple, Protocol


class _Unavailable:
    """A value the log did not carry (PostgreSQL's unchanged TOASTed columns)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNAVAILABLE"


UNAVAILABLE: Any = _Unavailable()


class Operation(StrEnum):
    CREATE = "c"
    UPDATE = "u"
    DELETE = "d"
    READ = "r"
    TRUNCATE = "t"
    MESSAGE = "m"


class TableId(NamedTuple):
    """``catalog`` is the database, ``schema`` the schema; either may be None (MySQL has no
    schema level, PostgreSQL events name the schema, not the database). A named tuple: table
    ids are dictionary keys on every event, and tuple hashing is done in C."""

    catalog: str | None
    schema: str | None
    table: str

    @property
    def identifier(self) -> str:
        """`schema.table` or `db.table`: the form used by filters and data collection names."""
        parts = [p for p in (self.catalog, self.schema) if p is not None]
        return ".".join([*parts, self.table])

    def __str__(self) -> str:
        return self.identifier


@dataclass(slots=True)
class RowChange:
    """One changed row. ``before``/``after`` hold the driver's values in the table's column
    order (``None`` where the event has no such image); the core converts them with the
    table's value converters. ``source`` holds the connector-specific ``source`` fields."""

    op: Operation
    table_id: TableId
    before: Sequence[Any] | None
    after: Sequence[Any] | None
    source: dict[str, Any]
    offset: dict[str, Any]
    transaction_id: str | None = None
    #: True when some values are UNAVAILABLE; the core then substitutes the placeholder
    partial: bool = False


@dataclass(slots=True)
class TransactionBegin:
    transaction_id: str
    source: dict[str, Any]
    offset: dict[str, Any]


@dataclass(slots=True)
class TransactionEnd:
    transaction_id: str
    source: dict[str, Any]
    offset: dict[str, Any]


@dataclass(slots=True)
class TableTruncated:
    table_ids: Sequence[TableId]
    source: dict[str, Any]
    offset: dict[str, Any]
    transaction_id: str | None = None


class TableChangeEntry(Protocol):
    """One ``tableChanges`` entry (type CREATE/ALTER/DROP, the quoted id, the table after the
    change), given as Debezium's JSON document. The schema history's
    ``cdc.history.store.TableChange`` is one: connectors hand the entries they record in the
    history, so the topic and the history describe a change alike."""

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(slots=True)
class SchemaChange:
    """A DDL statement (or a schema observed to change); ``table_ids`` are the affected tables
    after the change. Goes to the schema change topic and the schema history.

    ``ddl`` is None when the source has no statement (SQL Server learns of a change from its
    capture instances: Debezium writes ``ddl: null``). ``changes`` gives the record's
    ``tableChanges`` (each table after the change, as the source knows it); when None, each
    id of ``table_ids`` is an ALTER of the table as the core has it registered (connectors
    written before ``changes`` existed keep working).

    ``continued``: one log event reported as several schema changes sharing one offset (a
    MySQL ``DROP TABLE`` of tables in several databases), set on all but the last: the
    offset means "this event was delivered whole", so it is stored only with the last."""

    database: str | None
    schema: str | None
    ddl: str | None
    table_ids: Sequence[TableId]
    source: dict[str, Any]
    offset: dict[str, Any]
    changes: Sequence[TableChangeEntry] | None = None
    continued: bool = False


@dataclass(slots=True)
class LogicalMessage:
    """A message written into the log by the application (PostgreSQL `pg_logical_emit_message`)."""

    prefix: str
    content: bytes
    transactional: bool
    source: dict[str, Any]
    offset: dict[str, Any]
    transaction_id: str | None = None


@dataclass(slots=True)
class PositionReached:
    """The log moved on without anything to emit (filtered tables, keepalives). Lets the core
    send heartbeats and commit offsets so the source can release its log."""

    offset: dict[str, Any]
    source: dict[str, Any] = field(default_factory=dict)


SourceEvent = (
    RowChange
    | TransactionBegin
    | TransactionEnd
    | TableTruncated
    | SchemaChange
    | LogicalMessage
    | PositionReached
)
