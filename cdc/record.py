"""The record the core produces: Kafka Connect's SourceRecord, in plain Python."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cdc.schema.model import Schema


@dataclass(slots=True)
class SourceRecord:
    """One Kafka record before conversion. ``value`` None with a key is a tombstone.
    ``source_offset`` is what the offset store records once this record is acknowledged."""

    topic: str
    key_schema: Schema | None
    key: Any
    value_schema: Schema | None
    value: Any
    source_partition: dict[str, Any]
    source_offset: dict[str, Any]
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    timestamp_ms: int | None = None
    kafka_partition: int | None = None
    #: key and value are already bytes (dead-letter records): converters leave them alone
    raw: bool = False
    #: more records of the same source event follow this one, with the same
    #: ``source_offset`` (a delete and its tombstone, the delete/tombstone/create of a
    #: primary-key change, one record per table of a truncate, a dead-letter record before
    #: the event's own). Connectors read a stored offset as "this event was delivered whole",
    #: so the offset of a continued record is never stored: only that of an event's last
    #: record (see ``cdc.pipeline.delivery``)
    continued: bool = False

    @property
    def is_tombstone(self) -> bool:
        return self.value is None

    @property
    def is_marker(self) -> bool:
        """Carries a position only; nothing is produced for it."""
        return not self.topic

    def with_(self, **changes: Any) -> SourceRecord:
        values = {name: getattr(self, name) for name in self.__slots__}
        values.update(changes)
        return SourceRecord(**values)


def offset_marker(
    partition: dict[str, Any], offset: dict[str, Any], continued: bool = False
) -> SourceRecord:
    """A queue item that carries only a position: nothing is produced, the offset is stored
    (unless ``continued``: it stands for a record that more records of its event follow)."""
    return SourceRecord("", None, None, None, None, partition, offset, continued=continued)
