"""Acknowledgement tracking: which source offset is safe to store.

Records are registered in send order. Kafka acknowledges them per partition, possibly out of
order across partitions and topics; an offset becomes committable only when its record *and
every record sent before it* are acknowledged. So a crash can re-send events, never skip one.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from cdc.errors import OffsetError
from cdc.offsets.store import OffsetStore


class Pending:
    """One in-flight record: the delivery callback flips ``done`` (or sets ``error``)."""

    __slots__ = ("done", "error", "offset")

    def __init__(self, offset: dict[str, Any], done: bool = False) -> None:
        self.offset = offset
        self.done = done
        self.error: str | None = None


class OffsetWriter:
    def __init__(
        self,
        store: OffsetStore,
        connector: str,
        partition: Mapping[str, Any],
        *,
        on_committed: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.store = store
        self.connector = connector
        self.partition = dict(partition)
        self.on_committed = on_committed
        self._pending: deque[Pending] = deque()
        self._committable: dict[str, Any] | None = None
        self._last_stored: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self.commits = 0
        self.commit_seconds = 0.0

    def track(self, offset: dict[str, Any], *, done: bool = False) -> Pending:
        entry = Pending(offset, done)
        self._pending.append(entry)
        return entry

    def _advance(self) -> None:
        pending = self._pending
        while pending and pending[0].done:
            entry = pending.popleft()
            if entry.error is not None:
                raise OffsetError(f"record at {entry.offset} was not delivered: {entry.error}")
            self._committable = entry.offset

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def first_error(self) -> str | None:
        for entry in self._pending:
            if entry.error is not None:
                return entry.error
            if not entry.done:
                return None
        return None

    def committable(self) -> dict[str, Any] | None:
        with self._lock:
            self._advance()
            return self._committable

    def commit(self) -> dict[str, Any] | None:
        """Store the newest fully acknowledged offset (if it changed); returns it."""
        with self._lock:
            self._advance()
            offset = self._committable
            if offset is None or offset == self._last_stored:
                return None
            t0 = time.monotonic()
            self.store.put(self.connector, self.partition, offset)
            self.commit_seconds += time.monotonic() - t0
            self.commits += 1
            self._last_stored = offset
        if self.on_committed is not None:
            self.on_committed(offset)
        return offset

    def mark_stored(self, offset: dict[str, Any]) -> None:
        """The offset was written by other means (inside a Kafka transaction)."""
        with self._lock:
            self._advance()
            self._last_stored = offset
        if self.on_committed is not None:
            self.on_committed(offset)
