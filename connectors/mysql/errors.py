"""MySQL connector errors, as subclasses of the core's hierarchy.

The worker acts on the class (retry a ``RetriableError``, fail the task on a ``FatalError``), so
each condition the seed names gets a class whose message says what happened *and* what to do,
and carries the binlog position where it happened.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pymysql.err  # type: ignore[import-untyped]

from cdc.errors import ErrorKind, ErrorTable, FatalError, RetriableError, SchemaError
from connectors.mysql import connection as myconn


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


# -- what the server's and the client library's error numbers mean for a retry ----------------

RETRIABLE, FATAL, CONFIG = ErrorKind.RETRIABLE, ErrorKind.FATAL, ErrorKind.CONFIG

#: Server (ER_*) and client (CR_*) error numbers; anything not listed is FATAL.
ERROR_CODES: dict[str | int, ErrorKind] = {
    **dict.fromkeys(myconn.CONNECTION_LOST, RETRIABLE),  # CR_SERVER_LOST, CR_CONN_HOST_ERROR...
    1040: RETRIABLE,  # ER_CON_COUNT_ERROR: too many connections
    1053: RETRIABLE,  # ER_SERVER_SHUTDOWN: the server is restarting
    1152: RETRIABLE,  # ER_ABORTING_CONNECTION
    1158: RETRIABLE,  # ER_NET_READ_ERROR
    1159: RETRIABLE,  # ER_NET_READ_INTERRUPTED
    1160: RETRIABLE,  # ER_NET_ERROR_ON_WRITE
    1161: RETRIABLE,  # ER_NET_WRITE_INTERRUPTED
    myconn.ER_LOCK_WAIT_TIMEOUT: RETRIABLE,
    1213: RETRIABLE,  # ER_LOCK_DEADLOCK
    1927: RETRIABLE,  # ER_CONNECTION_KILLED (MariaDB)
    myconn.ER_MASTER_FATAL_READING_BINLOG: FATAL,  # see BinlogPositionLost
    **dict.fromkeys(myconn.ACCESS_DENIED, CONFIG),
}

#: Errors without a number, first match wins.
ERROR_TYPES: Sequence[tuple[type[BaseException], ErrorKind]] = (
    (pymysql.err.InterfaceError, RETRIABLE),  # PyMySQL's "connection is closed"
    (OSError, RETRIABLE),  # sockets; also ReconnectRefused (the library's silent reconnect)
)

#: For each CONFIG number: the setting to fix, and what the error means.
CONFIG_KEYS: dict[str | int, tuple[str, str]] = {
    myconn.ER_ACCESS_DENIED: ("database.password", "the server refused the user or its password"),
    **dict.fromkeys(
        myconn.ACCESS_DENIED - {myconn.ER_ACCESS_DENIED},
        (
            "database.user",
            "the user lacks a privilege the connector needs (REPLICATION SLAVE, "
            "REPLICATION CLIENT, SELECT, RELOAD)",
        ),
    ),
}


def error_number(error: BaseException) -> Sequence[int]:
    code = myconn.error_code(error)
    return () if code is None else (code,)


ERRORS = ErrorTable(ERROR_CODES, ERROR_TYPES, error_number, CONFIG_KEYS)
