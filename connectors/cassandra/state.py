"""What the snapshot and the streaming source of one task share: the driver session, the
schema cache, the cdc_raw directory and the seed's kebab-case commit log metrics."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdc.config import Config
from cdc.spi import Table
from connectors.cassandra.config import cdc_raw_dir
from connectors.cassandra.schema import SchemaCache, connect, core_table
from connectors.cassandra.tabledef import TableDef


@dataclass
class CommitLogMetrics:
    filename: str = ""
    position: int = 0
    processed_mutations: int = 0
    unrecoverable_errors: int = 0
    #: range tombstones and static rows: decoded, not emitted (the seed's unsupported list)
    unsupported: int = 0


@dataclass
class SnapshotProgress:
    """The seed's snapshot metrics (kebab-case names), kept by the snapshot steps."""

    total_tables: int = 0
    remaining_tables: int = 0
    running: bool = False
    aborted: bool = False
    completed: bool = False
    started: float = 0.0
    ended: float = 0.0
    rows_scanned: int = 0

    def seconds(self) -> float:
        if not self.started:
            return 0.0
        return (self.ended or time.monotonic()) - self.started

    def gauges(self) -> dict[str, Callable[[], float]]:
        return {
            "total-table-count": lambda: float(self.total_tables),
            "remaining-table-count": lambda: float(self.remaining_tables),
            "snapshot-running": lambda: float(self.running),
            "snapshot-aborted": lambda: float(self.aborted),
            "snapshot-completed": lambda: float(self.completed),
            "snapshot-during-in-seconds": lambda: float(int(self.seconds())),
            "rows-scanned": lambda: float(self.rows_scanned),
        }


@dataclass
class TaskState:
    cfg: Config
    metrics: CommitLogMetrics = field(default_factory=CommitLogMetrics)
    snapshot: SnapshotProgress = field(default_factory=SnapshotProgress)
    _session: Any = None
    _schema: SchemaCache | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def cdc_raw(self) -> Path:
        return cdc_raw_dir(self.cfg)

    @property
    def server(self) -> str:
        return str(self.cfg["database.server.name"])

    @property
    def emits_ranges(self) -> bool:
        """``range.delete.handling.mode=emit``: range deletes are events, and every event's
        ``after`` has the range bound fields."""
        return bool(self.cfg["range.delete.handling.mode"] == "emit")

    def core_table(self, t: TableDef) -> Table:
        return core_table(t, ranges=self.emits_ranges)

    def session(self) -> Any:
        with self._lock:
            if self._session is None:
                self._session = connect(self.cfg)
            return self._session

    def schema(self) -> SchemaCache:
        if self._schema is None:
            self._schema = SchemaCache(
                self.session(), self.cfg["schema.refresh.interval.ms"] / 1000
            )
        return self._schema

    def cdc_raw_free_bytes(self) -> float:
        try:
            return float(shutil.disk_usage(self.cdc_raw).free)
        except OSError:
            return -1.0

    def close(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.cluster.shutdown()
                self._session = None
                self._schema = None
