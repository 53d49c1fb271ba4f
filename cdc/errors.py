"""The error hierarchy shared by the core, the connectors and the worker.

The worker decides what to do from the class alone: a ``RetriableError`` is retried with
backoff, a ``FatalError`` fails the task, a ``ConfigError`` is reported per key by
``/config/validate``. So connectors translate driver exceptions into these classes instead of
letting driver types leak upward.
"""

from __future__ import annotations

from collections.abc import Iterable
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
