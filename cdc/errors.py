"""The error hierarchy shared by the core, the connectors and the worker.

The worker decides what to do from the class alone: a ``RetriableError`` is retried with
backoff, a ``FatalError`` fails the task, a ``ConfigError`` is reported per key by
``/config/validate``. So connectors translate driver exceptions into these classes instead of
letting driver types leak upward.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class CDCError(Exception):
    """Root of everything tidemark raises on purpose."""


class ConfigError(CDCError):
    """Every invalid key at once, so a user fixes a config in one round trip, not one per key."""

    def __init__(self, problems: Iterable[tuple[str, str]]) -> None:
        self.problems: list[tuple[str, str]] = list(problems)
        lines = "\n".join(f"  {key}: {reason}" for key, reason in self.problems)
        count = len(self.problems)
        super().__init__(
            f"invalid configuration ({count} problem{'s' if count != 1 else ''}):\n{lines}"
        )


class ConnectorError(CDCError):
    """A failure while a connector runs (as opposed to before it starts)."""


class RetriableError(ConnectorError):
    """Transient: the worker retries with backoff (``errors.max.retries``)."""


class FatalError(ConnectorError):
    """The task cannot continue; it goes to FAILED with this trace in ``/status``."""


class SchemaError(CDCError):
    """Table structure or schema history is missing, inconsistent or cannot be stored."""


class OffsetError(CDCError):
    """Offsets cannot be read or stored. Never answered by silently starting from scratch."""


class ConversionError(CDCError):
    """An event could not be converted. ``position`` is the source offset of the event, so
    ``warn``/``skip`` handling can log where the bad event is in the log."""

    def __init__(self, message: str, position: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.position = position


class ErrorKind(StrEnum):
    """What trying again can do about an error."""

    #: transient (connection lost, server restarting, lock timeout): retry after a backoff
    RETRIABLE = "retriable"
    #: retrying cannot help (position lost, a bug, corrupt data): the task fails
    FATAL = "fatal"
    #: a setting or the database's setup must change first (credentials, grants)
    CONFIG = "config"


def own_kind(error: BaseException) -> ErrorKind | None:
    """The kind of an error tidemark raised itself; None for anyone else's."""
    if isinstance(error, RetriableError):
        return ErrorKind.RETRIABLE
    if isinstance(error, ConfigError):
        return ErrorKind.CONFIG
    if isinstance(error, CDCError):
        return ErrorKind.FATAL
    return None


@dataclass(frozen=True)
class ErrorTable:
    """A connector's reading of its driver's errors, declared as data (as Debezium's
    ``ErrorHandler`` subclasses list their retriable exceptions): ``codes`` by the driver's
    error code (``code_of`` gives the keys to try, most specific first: a SQLSTATE, then its
    class), then ``types`` by exception class (first match), else ``default``. ``config_keys``
    names, for a CONFIG code, the setting to fix and why, so :meth:`translate` can raise a
    :class:`ConfigError` that says which key."""

    codes: Mapping[str | int, ErrorKind]
    types: Sequence[tuple[type[BaseException], ErrorKind]]
    code_of: Callable[[BaseException], Sequence[str | int]]
    config_keys: Mapping[str | int, tuple[str, str]] = field(default_factory=dict)
    default: ErrorKind = ErrorKind.FATAL

    def classify(self, error: BaseException) -> ErrorKind:
        own = own_kind(error)
        if own is not None:
            return own
        for code in self.code_of(error):
            kind = self.codes.get(code)
            if kind is not None:
                return kind
        for cls, kind in self.types:
            if isinstance(error, cls):
                return kind
        return self.default

    def translate(self, error: BaseException) -> BaseException:
        """A driver error the table says is CONFIG as a :class:`ConfigError` naming its key;
        any other error unchanged (the worker fails the task on it, with its trace)."""
        for code in self.code_of(error):
            if code in self.config_keys:
                key, meaning = self.config_keys[code]
                return ConfigError([(key, f"{meaning} ({error})")])
        return error
