"""The commit log position ``{file, pos}``: the segment's file name and the logical position
right after the last delivered mutation (Cassandra's own ``CommitLogPosition``). Segment ids
grow, so positions order by (segment id, pos)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdc.offsets.core_keys import CORE_KEYS, core_key_problems
from connectors.cassandra.commitlog import segment_id


@dataclass(frozen=True, order=True)
class CommitLogPosition:
    segment: int
    pos: int
    file: str = ""

    def to_offset(self) -> dict[str, Any]:
        return {"file": self.file, "pos": self.pos}

    @classmethod
    def from_offset(cls, offset: Mapping[str, Any] | None) -> CommitLogPosition:
        if not offset or not offset.get("file"):
            return START
        file = str(offset["file"])
        seg = segment_id(file)
        if seg is None:
            raise ValueError(f"offset file {file!r} is not a commit log segment name")
        return cls(seg, int(offset.get("pos", 0)), file)

    @classmethod
    def at(cls, file: str, pos: int) -> CommitLogPosition:
        seg = segment_id(file)
        assert seg is not None, file
        return cls(seg, pos, file)


START = CommitLogPosition(0, 0, "")


def validate_offset(
    partition: dict[str, Any], offset: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, list[str]]:
    problems = [] if set(partition) == {"server"} else ['partition must be {"server": ...}']
    if offset is None:
        return None, problems
    file = offset.get("file")
    if not isinstance(file, str) or (file and segment_id(file) is None):
        problems.append(f"offset.file must be a CommitLog-<version>-<id>.log name, got {file!r}")
    pos = offset.get("pos")
    if not isinstance(pos, int) or isinstance(pos, bool) or pos < 0:
        problems.append(f"offset.pos must be a non-negative integer, got {pos!r}")
    problems += core_key_problems(offset)
    unknown = sorted(set(offset) - {"file", "pos", *CORE_KEYS})
    if unknown:
        problems.append(f"unknown offset key(s) {', '.join(unknown)}")
    return offset, problems
