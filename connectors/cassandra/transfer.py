"""What happens to a segment once every event in it is in Kafka (the seed's
``CommitLogTransfer``). Cassandra cannot purge ``cdc_raw`` itself: with ``cdc_block_writes``
writes to CDC tables are refused once it is full, so the default deletes."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path
from typing import Protocol

from cdc.errors import ConfigError
from connectors.cassandra.commitlog import index_path


class CommitLogTransfer(Protocol):
    def on_success(self, segment: Path) -> None:
        """``segment`` (and its ``_cdc.idx``) is fully delivered."""


def _files(segment: Path) -> list[Path]:
    return [p for p in (segment, index_path(segment)) if p.exists()]


class DeleteTransfer:
    def on_success(self, segment: Path) -> None:
        for p in _files(segment):
            p.unlink(missing_ok=True)


class RelocateTransfer:
    def __init__(self, target: Path) -> None:
        self.target = target

    def on_success(self, segment: Path) -> None:
        self.target.mkdir(parents=True, exist_ok=True)
        for p in _files(segment):
            shutil.move(str(p), str(self.target / p.name))


class KeepTransfer:
    def on_success(self, segment: Path) -> None:
        return None


def load_transfer(name: str, relocation_dir: str | None) -> CommitLogTransfer:
    if name == "delete":
        return DeleteTransfer()
    if name == "keep":
        return KeepTransfer()
    if name == "relocate":
        assert relocation_dir
        return RelocateTransfer(Path(relocation_dir))
    module, _, cls = name.partition(":")
    try:
        factory = getattr(importlib.import_module(module), cls)
        obj: CommitLogTransfer = factory()
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise ConfigError(
            [("commit.log.transfer.class", f"cannot load {name!r} as 'module:Class' ({exc})")]
        ) from exc
    return obj
