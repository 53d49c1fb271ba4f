"""``snapshot_offset.properties``: which tables the connector has snapshotted (the seed's
per-table snapshot offsets). A table's line is ``pending`` while its snapshot's rows may not
all be in Kafka and ``done`` once the core stored the snapshot-complete offset (streaming
starts only after that); removing a line re-bootstraps that table on the next start."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from pathlib import Path

from cdc.errors import ConfigError
from connectors.cassandra.config import is_plain_name
from connectors.cassandra.state import TaskState

PENDING = "pending"


class SnapshotRecord:
    """``snapshot_offset.properties``: ``<keyspace>.<table>=<state> <time>`` lines."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[str, str]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        out = {}
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep and not line.lstrip().startswith("#"):
                out[key.strip()] = value.strip()
        return out

    def done(self) -> set[str]:
        return {k for k, v in self.read().items() if not v.startswith(PENDING)}

    def write(self, entries: Mapping[str, str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(f"{k}={v}\n" for k, v in sorted(entries.items())))
        os.replace(tmp, self.path)

    def mark(self, table: str, state: str) -> None:
        entries = self.read()
        entries[table] = f"{state} {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}"
        self.write(entries)

    def confirm(self) -> None:
        """The snapshot that wrote the pending lines completed: they become done."""
        entries = self.read()
        if any(v.startswith(PENDING) for v in entries.values()):
            self.write({k: v.replace(PENDING, "done", 1) for k, v in entries.items()})

    def drop_pending(self) -> None:
        entries = self.read()
        kept = {k: v for k, v in entries.items() if not v.startswith(PENDING)}
        if kept != entries:
            self.write(kept)


def record_for(state: TaskState) -> SnapshotRecord:
    base = state.cfg["offset.backing.store.dir"]
    if not base and not is_plain_name(state.server):
        # also refused when the config is validated; never join such a name to a path
        raise ConfigError(
            [("database.server.name", "may not contain '/' without offset.backing.store.dir")]
        )
    root = (
        Path(base)
        if base
        else Path.home() / ".local" / "state" / "tidemark" / "cassandra" / state.server
    )
    return SnapshotRecord(root / "snapshot_offset.properties")
