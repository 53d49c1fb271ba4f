"""Offset storage: where each connector's source position is kept between runs.

Memory for tests, a file for standalone mode, a compacted Kafka topic (Connect's format) for
distributed mode. ``kafka`` is imported on use, so the core does not load the Kafka client
just to keep offsets in a file.
"""

from cdc.offsets.file import FileOffsetStore
from cdc.offsets.memory import MemoryOffsetStore
from cdc.offsets.store import (
    Offset,
    OffsetItem,
    OffsetStore,
    Partition,
    offset_key,
    offset_value,
    parse_offset_key,
    parse_offset_value,
)

__all__ = [
    "FileOffsetStore",
    "MemoryOffsetStore",
    "Offset",
    "OffsetItem",
    "OffsetStore",
    "Partition",
    "offset_key",
    "offset_value",
    "parse_offset_key",
    "parse_offset_value",
]
