"""What PostgreSQL's errors mean for a retry, as a table (SQLSTATE and psycopg classes).

A server error carries a SQLSTATE: looked up exactly, then by its two-character class
(``08`` connection exception, ``57`` operator intervention, ...). Errors without one — psycopg
reports every failed *connection attempt* (refused, timed out, even a wrong password) as an
``OperationalError`` with no SQLSTATE — go by their class. psycopg maps the transient SQLSTATE
classes to ``OperationalError`` too, so the table's RETRIABLE rows document what the type row
already says; its other rows are the exceptions: lost credentials or grants (CONFIG) and a
dropped database (FATAL) are not retried.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from cdc.errors import ErrorKind, ErrorTable, RetriableError

RETRIABLE, FATAL, CONFIG = ErrorKind.RETRIABLE, ErrorKind.FATAL, ErrorKind.CONFIG

#: SQLSTATEs and SQLSTATE classes (https://www.postgresql.org/docs/current/errcodes-appendix.html)
SQLSTATES: dict[str | int, ErrorKind] = {
    "08": RETRIABLE,  # connection exception
    "40": RETRIABLE,  # transaction rollback: serialization failure, deadlock
    "53": RETRIABLE,  # insufficient resources: too many connections, out of memory, disk full
    "57": RETRIABLE,  # operator intervention: admin/crash shutdown, starting up, query canceled
    "55006": RETRIABLE,  # object_in_use: the replication slot is active for another PID
    "55P03": RETRIABLE,  # lock_not_available
    "57P04": FATAL,  # database_dropped
    "28": CONFIG,  # invalid authorization specification
    "3D000": CONFIG,  # invalid_catalog_name: the database does not exist
    "42501": CONFIG,  # insufficient_privilege
}

#: Errors without a SQLSTATE, first match wins; anything else is FATAL.
TYPES: Sequence[tuple[type[BaseException], ErrorKind]] = (
    (psycopg.OperationalError, RETRIABLE),  # a connection attempt failed, or the socket broke
    (OSError, RETRIABLE),
)

#: For each CONFIG row: the setting to fix, and what the error means.
CONFIG_KEYS: dict[str | int, tuple[str, str]] = {
    "28": ("database.user", "PostgreSQL refused the user or its password"),
    "3D000": ("database.dbname", "the database does not exist"),
    "42501": ("database.user", "the user lacks a privilege the connector needs"),
}


def sqlstate_keys(error: BaseException) -> Sequence[str]:
    """The exact SQLSTATE, then its class; nothing for errors the server did not send."""
    state = getattr(error, "sqlstate", None) if isinstance(error, psycopg.Error) else None
    return (state, state[:2]) if state else ()


ERRORS = ErrorTable(SQLSTATES, TYPES, sqlstate_keys, CONFIG_KEYS)


class SlotInUse(RetriableError):
    """START_REPLICATION found the slot active for another process. Retried on the
    ``slot.retry.delay.ms`` schedule (Debezium's wait for a busy slot), not the ~1 s one of a
    lost connection."""
