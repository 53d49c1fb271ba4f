"""MongoDB driver errors as retriable, fatal or configuration errors (pymongo's exception
classes and the server's error codes), and the messages the task fails with."""

from __future__ import annotations

from collections.abc import Sequence

from pymongo.errors import ConnectionFailure, OperationFailure

from cdc.errors import ErrorKind, ErrorTable, FatalError

#: the server's codes: AuthenticationFailed 18, Unauthorized 13; the position is gone:
#: ChangeStreamHistoryLost 286, ChangeStreamFatalError 280, CappedPositionLost 136; an
#: election or restart, so retry: NotWritablePrimary 10107, NotPrimaryNoSecondaryOk 13435,
#: InterruptedDueToReplStateChange 11602, PrimarySteppedDown 189, ShutdownInProgress 91,
#: HostUnreachable 6, NetworkTimeout 89
AUTH_FAILED, UNAUTHORIZED = 18, 13


def _codes(error: BaseException) -> Sequence[int]:
    code = getattr(error, "code", None)
    return [code] if isinstance(code, int) else []


ERRORS = ErrorTable(
    codes={
        AUTH_FAILED: ErrorKind.CONFIG,
        UNAUTHORIZED: ErrorKind.CONFIG,
        286: ErrorKind.FATAL,
        280: ErrorKind.FATAL,
        136: ErrorKind.FATAL,
        10107: ErrorKind.RETRIABLE,
        13435: ErrorKind.RETRIABLE,
        11602: ErrorKind.RETRIABLE,
        189: ErrorKind.RETRIABLE,
        91: ErrorKind.RETRIABLE,
        6: ErrorKind.RETRIABLE,
        89: ErrorKind.RETRIABLE,
    },
    types=[(ConnectionFailure, ErrorKind.RETRIABLE), (OperationFailure, ErrorKind.FATAL)],
    code_of=_codes,
    config_keys={
        AUTH_FAILED: (
            "mongodb.user",
            "authentication failed: check mongodb.user, mongodb.password and mongodb.authsource",
        ),
        UNAUTHORIZED: (
            "mongodb.user",
            "the user lacks a privilege: it needs the 'read' role on the captured "
            "databases and on 'local' (oplog), plus 'listDatabases' (the seed's roles: read "
            "the admin database, read config on a sharded cluster)",
        ),
    },
)


def with_user(error: BaseException, user: str | None) -> BaseException:
    """``ERRORS.translate`` with the configured user named in the message."""
    translated = ERRORS.translate(error)
    if translated is not error and user:
        text = str(translated).replace("mongodb.user:", f"mongodb.user ({user!r}):", 1)
        translated.args = (text,)
    return translated


class PrimaryUnreachable(FatalError):
    """``connect.max.attempts`` attempts in a row failed to reach the replica set."""


#: the primary stepped down or changed: the codes a reconnect follows as an election
ELECTION_CODES = frozenset({10107, 13435, 11602, 189})


def is_election(error: BaseException) -> bool:
    return getattr(error, "code", None) in ELECTION_CODES
