"""Where source offsets live: Kafka Connect's ``OffsetBackingStore``, keyed the same way.

Connect stores one offset per (connector name, source partition). The partition is a dict, so
two dicts that differ only in key order must name the same entry: every store keys its entries
by :func:`offset_key`, the canonical JSON of ``[connector, partition]`` with sorted keys. That is
also the byte layout of Connect's Kafka offsets topic, so the Kafka store can share it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from cdc.errors import OffsetError

Partition = dict[str, Any]
Offset = dict[str, Any]


def offset_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    """Canonical key bytes: ``["<connector>",{partition with sorted keys}]``."""
    try:
        return orjson.dumps([connector, dict(partition)], option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:
        raise OffsetError(
            f"source partition {partition!r} is not JSON-serialisable: {exc}"
        ) from exc


def parse_offset_key(key: bytes) -> tuple[str, Partition]:
    """Inverse of :func:`offset_key`; rejects anything that is not Connect's key shape."""
    try:
        data = orjson.loads(key)
    except orjson.JSONDecodeError as exc:
        raise OffsetError(f"offset key is not JSON: {key[:200]!r}") from exc
    if (
        not isinstance(data, list)
        or len(data) != 2
        or not isinstance(data[0], str)
        or not isinstance(data[1], dict)
    ):
        raise OffsetError(f'offset key is not ["<connector>", {{partition}}]: {key[:200]!r}')
    return data[0], data[1]


def offset_value(offset: Mapping[str, Any] | None) -> bytes | None:
    """Value bytes: the offset as JSON, ``None`` (a tombstone) for a deleted offset."""
    if offset is None:
        return None
    try:
        return orjson.dumps(dict(offset), option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:
        raise OffsetError(f"source offset {offset!r} is not JSON-serialisable: {exc}") from exc


def parse_offset_value(value: bytes | None) -> Offset | None:
    if value is None:
        return None
    try:
        data = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise OffsetError(f"offset value is not JSON: {value[:200]!r}") from exc
    if data is None:
        return None
    if not isinstance(data, dict):
        raise OffsetError(f"offset value is not a JSON object: {value[:200]!r}")
    return data


def copy_json(value: Mapping[str, Any]) -> dict[str, Any]:
    """A deep, JSON-only copy: callers can mutate what they passed in or got back without
    changing the store, and a non-serialisable offset fails at ``put``, not at flush."""
    try:
        data: dict[str, Any] = orjson.loads(orjson.dumps(dict(value)))
    except TypeError as exc:
        raise OffsetError(f"{value!r} is not JSON-serialisable: {exc}") from exc
    return data


OffsetItem = tuple[str, Mapping[str, Any], Mapping[str, Any] | None]
"""``(connector, partition, offset)``; offset None deletes."""


class OffsetStore(ABC):
    """Offsets per (connector, source partition). ``start`` before use, ``close`` after."""

    def start(self) -> None:  # noqa: B027 - stores without resources need nothing
        """Load what is stored. Idempotent."""

    def close(self) -> None:  # noqa: B027
        """Release resources. Idempotent."""

    @abstractmethod
    def get(self, connector: str, partition: Mapping[str, Any]) -> Offset | None:
        """The stored offset, or None when this partition has none."""

    def put(
        self, connector: str, partition: Mapping[str, Any], offset: Mapping[str, Any] | None
    ) -> None:
        """Store (or with None, delete) one offset; durable when this returns."""
        self.put_many([(connector, partition, offset)])

    @abstractmethod
    def put_many(self, items: Iterable[OffsetItem]) -> None:
        """Store several offsets; all or none where the backend allows it (memory, file)."""

    @abstractmethod
    def all(self, connector: str) -> list[tuple[Partition, Offset]]:
        """Every stored (partition, offset) of a connector (Connect's ``GET /offsets``)."""

    def __enter__(self) -> OffsetStore:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class OffsetTable:
    """The in-memory map every store keeps: canonical key -> (connector, partition, offset)."""

    def __init__(self) -> None:
        self.entries: dict[bytes, tuple[str, Partition, Offset]] = {}

    def get(self, connector: str, partition: Mapping[str, Any]) -> Offset | None:
        entry = self.entries.get(offset_key(connector, partition))
        return copy_json(entry[2]) if entry is not None else None

    def all(self, connector: str) -> list[tuple[Partition, Offset]]:
        return [
            (copy_json(p), copy_json(o))
            for key, (c, p, o) in sorted(self.entries.items())
            if c == connector
        ]

    def apply(
        self, key: bytes, connector: str, partition: Partition, offset: Offset | None
    ) -> None:
        if offset is None:
            self.entries.pop(key, None)
        else:
            self.entries[key] = (connector, partition, offset)


def normalise(items: Iterable[OffsetItem]) -> list[tuple[bytes, str, Partition, Offset | None]]:
    """Validate and copy a batch before touching a store, so a bad item rejects the whole call."""
    out = []
    for connector, partition, offset in items:
        if not isinstance(connector, str) or not connector:
            raise OffsetError(f"connector name must be a non-empty string, got {connector!r}")
        key = offset_key(connector, partition)
        out.append(
            (key, connector, copy_json(partition), None if offset is None else copy_json(offset))
        )
    return out
