"""SQL Server connector errors: what the driver reports, read as retriable, fatal or
configuration, and the conditions the connector itself detects (CDC not enabled, LSN gone).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cdc.errors import ConfigError, ErrorKind, ErrorTable, FatalError


class CdcNotEnabled(ConfigError):
    """CDC is off for the database or a captured table; the message names the call to run."""


class LsnNoLongerAvailable(FatalError):
    """The stored LSN is older than a change table's minimum LSN: the cleanup job removed
    changes the connector has not read."""


def _codes(error: BaseException) -> Sequence[str | int]:
    """pyodbc errors carry the SQLSTATE first: ``('28000', '[28000] Login failed ...')``."""
    args: tuple[Any, ...] = tuple(getattr(error, "args", ()))
    state = args[0] if args and isinstance(args[0], str) else ""
    text = str(args[1]) if len(args) > 1 else ""
    codes: list[str | int] = [state, state[:2]] if state else []
    if "password authentication failed" in text:  # the stand-in's driver says 08001
        codes.insert(0, "28000")
    if "connection has been lost" in text.lower():  # the stand-in's backend was terminated
        codes.insert(0, "08S01")
    # SQL Server's own error numbers, as FreeTDS prints them: "(18456)", "(229)"
    for number in (18456, 229, 916, 4060, 1205, 1222, 3952):
        if f"({number})" in text:
            codes.insert(0, number)
    return codes


def _types() -> list[tuple[type[BaseException], ErrorKind]]:
    try:
        import pyodbc  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return []
    return [(pyodbc.OperationalError, ErrorKind.RETRIABLE)]


ERRORS = ErrorTable(
    codes={
        "08": ErrorKind.RETRIABLE,  # connection failure / lost
        "HYT": ErrorKind.RETRIABLE,
        "HYT00": ErrorKind.RETRIABLE,  # timeout
        "HYT01": ErrorKind.RETRIABLE,
        "40001": ErrorKind.RETRIABLE,  # deadlock victim
        "57P01": ErrorKind.RETRIABLE,  # (the stand-in's) server shutting down the session
        1205: ErrorKind.RETRIABLE,
        1222: ErrorKind.RETRIABLE,  # lock request time out
        "28000": ErrorKind.CONFIG,  # login failed
        "28": ErrorKind.CONFIG,
        18456: ErrorKind.CONFIG,
        4060: ErrorKind.CONFIG,  # cannot open database
        229: ErrorKind.CONFIG,  # permission denied
        916: ErrorKind.CONFIG,
        "42501": ErrorKind.CONFIG,  # (the stand-in's) insufficient privilege
        3952: ErrorKind.CONFIG,  # snapshot isolation not allowed in the database
    },
    types=_types(),
    code_of=_codes,
    config_keys={
        "28000": ("database.user", "login failed: check database.user and database.password"),
        "28": ("database.user", "login failed: check database.user and database.password"),
        18456: ("database.user", "login failed: check database.user and database.password"),
        4060: ("database.names", "the database cannot be opened by this login"),
        229: (
            "database.user",
            "permission denied: the login needs db_owner, or membership of the role named in "
            "sys.sp_cdc_enable_table @role_name and SELECT on the captured tables",
        ),
        916: ("database.user", "the login has no user in the database"),
        3952: (
            "snapshot.isolation.mode",
            "snapshot isolation is off in the database: run ALTER DATABASE <db> SET "
            "ALLOW_SNAPSHOT_ISOLATION ON, or choose repeatable_read or exclusive",
        ),
        "42501": (
            "database.user",
            "permission denied: the login needs db_owner, or membership of the capture "
            "instance's role and SELECT on the captured tables",
        ),
    },
)
