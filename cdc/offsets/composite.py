"""The positions of several logs read by one task, kept in the task's one offset.

Some connectors read more than one independent log in a single task: the shards of a MongoDB
cluster (one change stream or oplog per shard replica set), the databases of a SQL Server
connector with several ``database.names`` (one set of CDC tables each). The core stores one
offset per task and stores it only once Kafka acknowledged the record it belongs to and every
record before it (:mod:`cdc.offsets.writer`). So each record carries the position of *every*
log as of the moment it was emitted: its own log's position is its own, the others' are those
of the last record emitted from them. Storing any record's offset is then safe for all logs at
once: everything up to each of its positions was emitted before it, hence acknowledged.

Offsets handed out are never mutated afterwards (each advance builds a new mapping), so a
record still in the queue keeps the positions it was emitted with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cdc.errors import OffsetError

#: the key of the stored offset that holds the positions, by log name
POSITIONS = "positions"


class CompositePosition:
    """The current position of each log; :meth:`advance` gives the offset of a record."""

    def __init__(self, stored: Mapping[str, Any] | None = None) -> None:
        self._positions: dict[str, dict[str, Any]] = dict(positions_of(stored))

    @property
    def logs(self) -> list[str]:
        """The logs that have a position, sorted."""
        return sorted(self._positions)

    def get(self, log: str) -> dict[str, Any] | None:
        """Where ``log`` resumes (None: it has no position yet, e.g. a shard added since)."""
        return self._positions.get(log)

    def advance(self, log: str, position: Mapping[str, Any]) -> dict[str, Any]:
        """Record that ``log`` reached ``position`` and return the offset for the record that
        took it there."""
        self._positions = {**self._positions, log: dict(position)}
        return self.offset()

    def forget(self, log: str) -> dict[str, Any]:
        """Drop a log that is gone (a removed shard); returns the offset without it."""
        self._positions = {k: v for k, v in self._positions.items() if k != log}
        return self.offset()

    def offset(self) -> dict[str, Any]:
        return {POSITIONS: self._positions}


def positions_of(stored: Mapping[str, Any] | None) -> Iterable[tuple[str, dict[str, Any]]]:
    """The ``(log, position)`` pairs of a stored composite offset, checked: an operator can
    edit offsets over REST, so a malformed one is named rather than half-read."""
    if not stored:
        return []
    positions = stored.get(POSITIONS)
    if not isinstance(positions, Mapping):
        raise OffsetError(
            f"offset {dict(stored)!r} has no {POSITIONS!r} object: a connector reading several "
            "logs stores the position of each under it"
        )
    out = []
    for log, position in positions.items():
        if not isinstance(position, Mapping):
            raise OffsetError(f"offset position of {log!r} is not an object: {position!r}")
        out.append((str(log), dict(position)))
    return out
