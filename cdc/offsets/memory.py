"""Offsets held in memory: for tests and for throwaway runs that must start fresh each time."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from cdc.offsets.store import (
    Offset,
    OffsetItem,
    OffsetStore,
    OffsetTable,
    Partition,
    normalise,
)


class MemoryOffsetStore(OffsetStore):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._table = OffsetTable()

    def get(self, connector: str, partition: Mapping[str, Any]) -> Offset | None:
        with self._lock:
            return self._table.get(connector, partition)

    def put_many(self, items: Iterable[OffsetItem]) -> None:
        batch = normalise(items)
        with self._lock:
            for key, connector, partition, offset in batch:
                self._table.apply(key, connector, partition, offset)

    def all(self, connector: str) -> list[tuple[Partition, Offset]]:
        with self._lock:
            return self._table.all(connector)
