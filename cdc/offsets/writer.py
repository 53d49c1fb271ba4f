"""Which source offset is safe to store, and storing it.

Kafka Connect's rule, kept: an offset is stored only once Kafka acknowledged the record it
belongs to *and every record sent before it*. Instead of a Python callback per record (a
measurable cost at tens of thousands of events per second), the writer remembers the offset
of the last record handed to the producer and, at commit time, flushes the producer: when
the flush returns with nothing outstanding, everything sent so far is acknowledged, so that
offset is safe. A delivery failure is reported by the producer's error callback and fails
the task before any later offset can be stored. A crash can re-send events, never skip one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from cdc.offsets.store import OffsetStore

log = logging.getLogger("tidemark.offsets")

Flush = Callable[[float], int]
"""Wait up to the given seconds for outstanding records; returns how many are still out."""


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
        self._sent: dict[str, Any] | None = None
        self._last_stored: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self.commits = 0
        self.commit_seconds = 0.0
        self.last_committed: dict[str, Any] | None = None
        #: while a snapshot runs: where streaming must start if it is interrupted; stored
        #: with every snapshot row offset (see ``stored_form``)
        self.snapshot_origin: dict[str, Any] | None = None
        #: while a snapshot that resumes an interrupted one runs: how far that one got
        #: (``cdc.snapshot.driver.ResumePoint.fields``), until this one's rows say more
        self.snapshot_resume: dict[str, Any] | None = None
        #: offsets are written inside the task's Kafka transactions with their records
        #: (exactly-once): nothing else may store one beside them, unfenced
        self.transactional = False

    def stored_form(self, offset: dict[str, Any]) -> dict[str, Any]:
        """The offset as stored: a snapshot row's offset carries the snapshot's resume
        position, so a restart after any commit during the snapshot still knows it (once per
        commit, not per record). An offset of the snapshot that is not a row's (a schema
        change recorded before the rows) keeps the interrupted attempt's progress, so a crash
        then does not lose it."""
        origin = self.snapshot_origin
        if origin is None or not offset.get("snapshot"):
            return offset
        stored = {**offset, "snapshot_origin": origin}
        if self.snapshot_resume is not None and "snapshot_table" not in offset:
            stored.update(self.snapshot_resume)
        return stored

    def track(self, offset: dict[str, Any]) -> None:
        """The offset of the newest record handed to the producer (or skipped)."""
        self._sent = offset

    @property
    def pending(self) -> dict[str, Any] | None:
        """The newest offset not yet stored, if any."""
        sent = self._sent
        return None if sent is None or sent == self._last_stored else sent

    def commit(self, flush: Flush, timeout: float) -> dict[str, Any] | None:
        """Flush the producer, then store the newest offset if everything before it was
        acknowledged; returns the stored offset. A flush that times out (Kafka slow or down)
        stores nothing: the next commit tries again."""
        with self._lock:
            candidate = self.pending
            if candidate is None:
                return None
            t0 = time.monotonic()
            remaining = flush(timeout)
            if remaining:
                log.warning(
                    "%s: %d records not yet acknowledged by Kafka after %.1f s; offset %s not "
                    "stored yet",
                    self.connector,
                    remaining,
                    timeout,
                    candidate,
                )
                return None
            self.store.put(self.connector, self.partition, self.stored_form(candidate))
            self.commit_seconds += time.monotonic() - t0
            self.commits += 1
            self._last_stored = self.last_committed = candidate
        if self.on_committed is not None:
            self.on_committed(candidate)
        return candidate

    def mark_stored(self, offset: dict[str, Any]) -> None:
        """The offset was written by other means (inside a Kafka transaction)."""
        with self._lock:
            self._sent = self._last_stored = self.last_committed = offset
        if self.on_committed is not None:
            self.on_committed(offset)
