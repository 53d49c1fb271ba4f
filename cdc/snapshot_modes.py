"""``snapshot.mode`` policies shared by the connectors.

A snapshot that was interrupted (the stored offset still says ``"snapshot": true``) is
redone from scratch, as the seed requires; "completed" is recorded by the offset the engine
stores after the snapshot, which no longer carries the flag.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cdc.spi import Snapshotter


def snapshot_incomplete(offset: Mapping[str, Any] | None) -> bool:
    if offset is None:
        return True
    return bool(offset.get("snapshot")) and not offset.get("snapshot_completed", False)


class Initial(Snapshotter):
    mode = "initial"

    def should_snapshot(self, offset: Mapping[str, Any] | None) -> bool:
        return snapshot_incomplete(offset)


class InitialOnly(Initial):
    mode = "initial_only"

    def should_stream(self) -> bool:
        return False


class Always(Snapshotter):
    mode = "always"

    def should_snapshot(self, offset: Mapping[str, Any] | None) -> bool:
        return True


class Never(Snapshotter):
    mode = "never"

    def should_snapshot(self, offset: Mapping[str, Any] | None) -> bool:
        return False


class NoData(Initial):
    """Structure only, then stream (``schema_only`` / ``no_data``)."""

    mode = "no_data"

    def include_data(self) -> bool:
        return False


class WhenNeeded(Snapshotter):
    """Snapshot when there is no usable offset: none stored, an unfinished snapshot, or a
    position the log no longer holds (the connector says which with ``position_available``)."""

    mode = "when_needed"

    def __init__(self, position_available: Callable[[Mapping[str, Any]], bool]) -> None:
        self.position_available = position_available

    def should_snapshot(self, offset: Mapping[str, Any] | None) -> bool:
        if snapshot_incomplete(offset):
            return True
        assert offset is not None
        return not self.position_available(offset)


MODES: dict[str, type[Snapshotter]] = {
    "initial": Initial,
    "initial_only": InitialOnly,
    "always": Always,
    "never": Never,
    "no_data": NoData,
    "schema_only": NoData,
    "when_needed": WhenNeeded,
}
