"""MySQL connector errors, as subclasses of the core's hierarchy.

The worker acts on the class (retry a ``RetriableError``, fail the task on a ``FatalError``), so
each condition the seed names gets a class whose message says what happened *and* what to do,
and carries the binlog position where it happened.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdc.errors import FatalError, RetriableError, SchemaError


def describe_position(position: Mapping[str, Any] | None) -> str:
    """``mariadb-bin.000003:154 (gtids 0-1-10, event 2, row 1)``: how errors name a position."""
    if not position:
        return "an unknown position"
    text = f"{position.get('file')}:{position.get('pos')}"
    extras = []
    if position.get("gtids"):
        extras.append(f"gtids {position['gtids']}")
    if position.get("event"):
        extras.append(f"event {position['event']}")
    if position.get("row"):
        extras.append(f"row {position['row']}")
    return f"{text} ({', '.join(extras)})" if extras else text


class BinlogPositionLost(FatalError):
    """The stored offset points into binlog files (or GTIDs) the server has purged."""


class UnparseableDdl(SchemaError):
    """A table DDL statement the parser cannot read (``*.skip.unparseable.ddl=false``)."""

    def __init__(self, statement: str, position: Mapping[str, Any] | None, reason: str) -> None:
        self.statement = statement
        self.position = dict(position) if position else None
        shown = statement if len(statement) <= 500 else statement[:500] + "..."
        super().__init__(
            f"cannot parse DDL at {describe_position(position)}: {reason}\n  statement: {shown}\n"
            "Fix: if the statement does not change captured tables, set "
            "schema.history.internal.skip.unparseable.ddl=true (database.history.skip."
            "unparseable.ddl) to skip it; otherwise report the statement."
        )


class InconsistentSchema(FatalError):
    """A row event for a table the in-memory schema does not know, or knows with other
    columns (``inconsistent.schema.handling.mode=fail``)."""


class EventDeserializationFailed(FatalError):
    """A binlog event could not be decoded (``event.deserialization.failure.handling.mode``)."""


class ConnectionLost(RetriableError):
    """The binlog connection dropped and could not be re-established in time."""


class HistoryMissing(FatalError):
    """Offsets exist but the schema history is empty: the schema at the offset is unknown."""
