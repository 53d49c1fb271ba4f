"""``engine_child`` with kill points in the PostgreSQL snapshot, for restart tests.

    python -m tests.integration.pg_snapshot_child SPEC.json

SPEC is ``engine_child``'s plus at most one of ``"kill_after_rows": N`` (SIGKILL itself once
N snapshot rows were emitted and had a second to reach Kafka and the offset file) and
``"kill_after_snapshot": true`` (SIGKILL right after the engine stored the snapshot-complete
offset, before any streaming event).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from cdc.pipeline.coordinator import SourceCoordinator
from cdc.snapshot.driver import TableScan
from tests.integration import engine_child


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def install(spec: dict[str, Any]) -> None:
    kill_rows = spec.get("kill_after_rows")
    if kill_rows:
        emit = TableScan.emit
        emitted = [0]

        def counting(self: TableScan, ctx: Any, rows: Sequence[Any]) -> None:
            emit(self, ctx, rows)
            before, emitted[0] = emitted[0], emitted[0] + len(rows)
            if before < kill_rows <= emitted[0]:
                time.sleep(1.0)  # the task thread sends and commits what was emitted
                _die()

        TableScan.emit = counting  # type: ignore[method-assign]
    if spec.get("kill_after_snapshot"):
        store_now = SourceCoordinator.store_now

        def store_then_die(self: SourceCoordinator, offset: dict[str, Any]) -> None:
            store_now(self, offset)
            _die()

        SourceCoordinator.store_now = store_then_die  # type: ignore[method-assign]


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        install(json.load(fh))
    engine_child.main(sys.argv[1])
