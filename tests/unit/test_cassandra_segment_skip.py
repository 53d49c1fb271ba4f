"""The streaming loop skips a segment without an index when a later one has an index (it was
closed without CDC data and Cassandra deletes it). The two indexes were read one after the
other; a sync writing the first segment's index between the two reads (both, in order) made
the loop skip a segment that does hold CDC data, and a restart then deleted it unread. The
segments here are empty files and the decoder is stubbed: only the loop's choice is tested
(the node's integration tests cover reading real segments)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from connectors.cassandra import streaming
from connectors.cassandra.commitlog import CdcIndex
from connectors.cassandra.offsets import CommitLogPosition


class _Ctx:
    def __init__(self) -> None:
        self.stop_event = threading.Event()
        self.emitted: list[Any] = []

    def emit(self, event: Any) -> None:
        self.emitted.append(event)


def _loop() -> tuple[streaming.CassandraStreaming, list[tuple[str, int]]]:
    loop = object.__new__(streaming.CassandraStreaming)
    loop.done, loop.cursors, loop.finished = set(), {}, {}
    loop._finished_lock = threading.Lock()
    read: list[tuple[str, int]] = []

    def mutations(path: Path, limit: int, after: int, cursor: Any) -> Any:
        yield (after, limit, None, [], None)

    loop._mutations = mutations  # type: ignore[method-assign]
    loop._mutation = lambda ctx, file, entry, skip: read.append((file, entry[1]))  # type: ignore[method-assign]
    return loop, read


def _segments(directory: Path) -> tuple[Path, Path]:
    """Two consecutive (empty) segments in ``cdc_raw``."""
    paths = (directory / "CommitLog-7-100.log", directory / "CommitLog-7-101.log")
    for path in paths:
        path.touch()
    return paths


def test_a_segment_whose_index_appears_between_the_two_reads_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _segments(tmp_path)
    reads = {first: [None, CdcIndex(50, True)], second: [CdcIndex(30, False)]}

    def read_index(path: Path) -> CdcIndex | None:
        seen = reads[path]
        return seen.pop(0) if len(seen) > 1 else seen[0]

    monkeypatch.setattr(streaming, "read_cdc_index", read_index)
    loop, read = _loop()
    pos, _, moved = loop._poll(_Ctx(), tmp_path, CommitLogPosition(100, 0, first.name), 0)  # type: ignore[arg-type]
    assert ("CommitLog-7-100.log", 50) in read, read
    assert moved and pos.segment == 101


def test_a_segment_closed_without_cdc_data_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _segments(tmp_path)
    indexes = {first: None, second: CdcIndex(30, False)}
    monkeypatch.setattr(streaming, "read_cdc_index", lambda path: indexes[path])
    loop, read = _loop()
    pos, _, _ = loop._poll(_Ctx(), tmp_path, CommitLogPosition(100, 0, first.name), 0)  # type: ignore[arg-type]
    assert read == [("CommitLog-7-101.log", 30)]
    assert pos.segment == 101
