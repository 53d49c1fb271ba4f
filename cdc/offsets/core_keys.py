"""The offset keys the core adds to every connector's own position, and their checks.

A connector's offset is its log position plus what the shared machinery needs to resume: the
snapshot flags, where an interrupted snapshot got to (``cdc.snapshot.driver.ResumePoint``),
the position streaming must start from after it (``cdc.pipeline.coordinator``) and the state
of an incremental snapshot (``cdc.snapshot.incremental_state``). ``GET /offsets`` shows them
all, so ``PATCH /offsets`` must take them back: each connector's ``validate_offset`` checks its
own keys and leaves these to :func:`core_key_problems`, so the rules live once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdc.snapshot.incremental_state import OFFSET_KEYS as INCREMENTAL
from cdc.snapshot.incremental_state import SnapshotContext, signal_offset

SNAPSHOT_FLAGS = ("snapshot", "snapshot_completed", "last_snapshot_record")
RESUME_KEYS = ("snapshot_done", "snapshot_table", "snapshot_after")
ORIGIN = "snapshot_origin"
CORE_KEYS = frozenset({*SNAPSHOT_FLAGS, *RESUME_KEYS, ORIGIN, *INCREMENTAL})


def core_key_problems(offset: Mapping[str, Any]) -> list[str]:
    """What is wrong with the core's keys of ``offset`` (the connector checks what
    ``snapshot_origin`` holds: it is one of its own positions)."""
    problems = [
        f"offset.{key} must be true or false, got {offset[key]!r}"
        for key in SNAPSHOT_FLAGS
        if key in offset and not isinstance(offset[key], bool)
    ]
    done = offset.get("snapshot_done")
    if "snapshot_done" in offset and not (
        isinstance(done, list) and all(isinstance(t, str) for t in done)
    ):
        problems.append(f"offset.snapshot_done must be a list of table names, got {done!r}")
    table = offset.get("snapshot_table")
    if "snapshot_table" in offset and not isinstance(table, str):
        problems.append(f"offset.snapshot_table must be a table name, got {table!r}")
    after = offset.get("snapshot_after")
    if after is not None and not isinstance(after, list):
        problems.append(f"offset.snapshot_after must be a key (a list) or null, got {after!r}")
    if any(k in offset for k in RESUME_KEYS) and offset.get("snapshot") is not True:
        problems.append(
            "offset.snapshot_done, snapshot_table and snapshot_after belong to a snapshot row's "
            "offset: they need offset.snapshot true"
        )
    if ORIGIN in offset and not isinstance(offset[ORIGIN], Mapping):
        problems.append(f"offset.{ORIGIN} must be an object (a position), got {offset[ORIGIN]!r}")
    try:
        SnapshotContext.from_offset(offset)
        signal_offset(offset)
    except ValueError as exc:
        problems.append(str(exc))
    return problems
