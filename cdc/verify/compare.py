"""Chunked comparison of a source table with a target, drill-down, and re-checks.

1. The source names every ``chunk_rows``-th key; the chunks are the key ranges between them.
2. The target's keys are sorted into the same ranges (in the database's key order) and each
   range's checksum is summed in Python; the source computes its own in SQL.
3. A chunk whose checksums differ is drilled into: both sides list ``key -> row hash`` for
   that range only, and each differing key is named **missing** (at the source, not
   downstream), **extra** (alive downstream, gone at the source) or **stale** (downstream
   holds another version).
4. Capture may be running: a difference can be an event not yet written or read. So the
   differing chunks are compared again after ``recheck_wait`` seconds, with the target caught
   up, until they agree or ``recheck_rounds`` rounds are spent; only then are keys reported.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdc.verify.canonical import ORDERABLE_KEY_KINDS, KeyTexts, TableSpec, key_order
from cdc.verify.contract import Boundary, Checksum, SourceSide, TargetSide

Range = tuple[Boundary | None, Boundary | None]
Progress = Callable[[str, int, int], None]


@dataclass
class TableResult:
    table: str
    topic: str
    target: str
    source_rows: int = 0
    target_rows: int = 0
    chunks: int = 0
    chunks_differing: int = 0
    rechecks: int = 0
    missing: list[KeyTexts] = field(default_factory=list)
    extra: list[KeyTexts] = field(default_factory=list)
    stale: list[KeyTexts] = field(default_factory=list)
    skipped_columns: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None

    @property
    def equal(self) -> bool:
        return self.error is None and not (self.missing or self.extra or self.stale)


@dataclass(frozen=True)
class Options:
    chunk_rows: int = 50_000
    recheck_rounds: int = 5
    recheck_wait: float = 2.0


class _Chunks:
    """The target's keys of one table sorted into the source's ranges."""

    def __init__(self, spec: TableSpec, bounds: list[Boundary]) -> None:
        self.kinds = [c.kind for c in spec.key_columns]
        self.orderable = all(k in ORDERABLE_KEY_KINDS for k in self.kinds)
        if not self.orderable:
            bounds = []
        self.ranges: list[Range] = []
        prev: Boundary | None = None
        for b in bounds:
            self.ranges.append((prev, b))
            prev = b
        self.ranges.append((prev, None))
        self._edges = [key_order(self.kinds, b.texts) for b in bounds]

    def index(self, key: KeyTexts) -> int:
        if not self._edges:
            return 0
        return bisect.bisect_left(self._edges, key_order(self.kinds, key))

    def split(self, rows: Mapping[KeyTexts, int]) -> list[dict[KeyTexts, int]]:
        out: list[dict[KeyTexts, int]] = [{} for _ in self.ranges]
        for key, h in rows.items():
            out[self.index(key)][key] = h
        return out


def _checksum(rows: Mapping[KeyTexts, int]) -> Checksum:
    return Checksum(len(rows), sum(rows.values()))


def compare_table(
    source: SourceSide,
    target: TargetSide,
    spec: TableSpec,
    options: Options,
    progress: Progress | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> TableResult:
    t0 = time.monotonic()
    result = TableResult(spec.identifier, spec.topic, target.name)
    result.skipped_columns = list(spec.skipped)
    chunks = _Chunks(spec, source.boundaries(spec, options.chunk_rows))
    result.chunks = len(chunks.ranges)
    target.refresh([spec])
    parts = chunks.split(target.rows(spec))
    differing: list[int] = []
    for i, rng in enumerate(chunks.ranges):
        src = source.checksum(spec, *rng)
        result.source_rows += src.rows
        if src != _checksum(parts[i]):
            differing.append(i)
        if progress is not None:
            progress(spec.identifier, i + 1, len(chunks.ranges))
    result.target_rows = sum(len(p) for p in parts)
    result.chunks_differing = len(differing)
    keys: dict[str, set[KeyTexts]] = {"missing": set(), "extra": set(), "stale": set()}
    rounds = 0
    while differing:
        keys = {"missing": set(), "extra": set(), "stale": set()}
        still: list[int] = []
        for i in differing:
            found = _drill(source.row_hashes(spec, *chunks.ranges[i]), parts[i])
            if any(found.values()):
                still.append(i)
                for kind, ks in found.items():
                    keys[kind] |= ks
        differing = still
        if not differing or rounds >= options.recheck_rounds:
            break
        rounds += 1
        sleep(options.recheck_wait)
        target.refresh([spec])
        parts = chunks.split(target.rows(spec))
    result.rechecks = rounds
    result.target_rows = sum(len(p) for p in parts)
    result.missing = sorted(keys["missing"], key=lambda k: key_sort(chunks.kinds, k))
    result.extra = sorted(keys["extra"], key=lambda k: key_sort(chunks.kinds, k))
    result.stale = sorted(keys["stale"], key=lambda k: key_sort(chunks.kinds, k))
    result.seconds = time.monotonic() - t0
    return result


def key_sort(kinds: Sequence[str], key: KeyTexts) -> tuple[Any, ...]:
    try:
        return key_order(kinds, key)
    except ValueError:
        return key


def _drill(src: Mapping[KeyTexts, int], dst: Mapping[KeyTexts, int]) -> dict[str, set[KeyTexts]]:
    return {
        "missing": {k for k in src if k not in dst},
        "extra": {k for k in dst if k not in src},
        "stale": {k for k, h in src.items() if k in dst and dst[k] != h},
    }
