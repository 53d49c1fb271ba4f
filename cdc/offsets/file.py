"""Offsets in one JSON file, for standalone mode (Connect's ``offset.storage.file.filename``).

A crash must never lose or tear the file, and a damaged file must never read as "no offsets":
that would re-snapshot, or worse, stream from the log's current end and skip changes. So every
write goes to a temporary file that is fsynced and then renamed over the main file, the
generation it replaces is kept as ``<file>.prev`` for the case the main file is damaged anyway
(bad disk, manual edit), and a start that can read neither raises ``OffsetError``.

File layout (sorted keys, human readable, so an operator can inspect or fix it)::

    {"offsets": [{"connector": "c", "offset": {...}, "partition": {...}}, ...], "version": 1}
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from cdc.errors import OffsetError
from cdc.offsets.store import (
    Offset,
    OffsetItem,
    OffsetStore,
    OffsetTable,
    Partition,
    normalise,
    offset_key,
)

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


class _Unreadable(Exception):
    """Why one generation of the file cannot be used."""


def fsync_dir(directory: Path) -> None:
    """Make renames in ``directory`` durable; a rename is only as durable as its directory."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def encode(table: OffsetTable) -> bytes:
    entries = [
        {"connector": c, "partition": p, "offset": o}
        for _, (c, p, o) in sorted(table.entries.items())
    ]
    return orjson.dumps(
        {"version": FORMAT_VERSION, "offsets": entries},
        option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE,
    )


def decode(data: bytes) -> OffsetTable:
    """Strict: anything but a complete file of the expected shape is unreadable, so a truncated
    write is detected instead of being taken for fewer offsets."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise _Unreadable(f"not valid JSON ({exc})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("offsets"), list):
        raise _Unreadable('not an offsets file (no "offsets" list)')
    if doc.get("version") != FORMAT_VERSION:
        raise _Unreadable(f"unsupported format version {doc.get('version')!r}")
    table = OffsetTable()
    for i, entry in enumerate(doc["offsets"]):
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("connector"), str)
            and isinstance(entry.get("partition"), dict)
            and isinstance(entry.get("offset"), dict)
        ):
            raise _Unreadable(f"entry {i} is not {{connector, partition, offset}}")
        c, p, o = entry["connector"], entry["partition"], entry["offset"]
        table.apply(offset_key(c, p), c, p, o)
    return table


class FileOffsetStore(OffsetStore):
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.prev_path = self.path.with_name(self.path.name + ".prev")
        self._lock = threading.Lock()
        self._table: OffsetTable | None = None
        # False when the main file is missing or damaged: it must not be rotated into .prev,
        # or the next write would replace the only good generation with the damaged one.
        self._main_ok = False

    @property
    def missing_reason(self) -> str | None:
        """Why nothing is stored, when both files are gone (a first start, or deleted): the
        engine logs it with the full snapshot that follows and shows it in the status."""
        if self.path.exists() or self.prev_path.exists():
            return None
        return f"neither offsets file {self.path} nor {self.prev_path} exists"

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._table is not None:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._remove_leftovers()
            self._table = self._load()

    def close(self) -> None:
        with self._lock:
            self._table = None

    # -- reads and writes ----------------------------------------------------------------

    def get(self, connector: str, partition: Mapping[str, Any]) -> Offset | None:
        with self._lock:
            return self._started().get(connector, partition)

    def all(self, connector: str) -> list[tuple[Partition, Offset]]:
        with self._lock:
            return self._started().all(connector)

    def put_many(self, items: Iterable[OffsetItem]) -> None:
        batch = normalise(items)
        with self._lock:
            current = self._started()
            updated = OffsetTable()
            updated.entries = dict(current.entries)
            for key, connector, partition, offset in batch:
                updated.apply(key, connector, partition, offset)
            try:
                self._write(encode(updated))
            except OSError as exc:
                raise OffsetError(f"cannot write offsets file {self.path}: {exc}") from exc
            self._table = updated

    # -- internals -----------------------------------------------------------------------

    def _started(self) -> OffsetTable:
        if self._table is None:
            raise OffsetError(f"offset store {self.path} is not started; call start() first")
        return self._table

    def _tmp_prefix(self) -> str:
        return f".{self.path.name}."

    def _remove_leftovers(self) -> None:
        """A crash between creating and renaming a temporary file leaves it behind. It was never
        the committed state, so it is deleted, never read."""
        for leftover in self.path.parent.glob(f"{self._tmp_prefix()}*.tmp"):
            log.info("removing %s, left by an interrupted offsets write", leftover)
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()

    def _read(self, path: Path) -> OffsetTable:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise _Unreadable(str(exc)) from exc
        return decode(data)

    def _load(self) -> OffsetTable:
        main_exists, prev_exists = self.path.exists(), self.prev_path.exists()
        if not main_exists and not prev_exists:
            log.info("no offsets file at %s: no stored offsets yet", self.path)
            self._main_ok = False
            return OffsetTable()
        main_problem = "missing"
        if main_exists:
            try:
                table = self._read(self.path)
            except _Unreadable as exc:
                main_problem = str(exc)
            else:
                self._main_ok = True
                return table
        self._main_ok = False
        if prev_exists:
            try:
                table = self._read(self.prev_path)
            except _Unreadable as exc:
                prev_problem = str(exc)
            else:
                log.warning(
                    "offsets file %s is unusable (%s); using the previous generation %s. "
                    "Offsets written by the last flush are lost, so some events will be sent "
                    "again.",
                    self.path,
                    main_problem,
                    self.prev_path,
                )
                return table
        else:
            prev_problem = "missing"
        raise OffsetError(
            f"cannot read stored offsets: {self.path}: {main_problem}; "
            f"{self.prev_path}: {prev_problem}. Refusing to start without them, which would "
            f"re-snapshot or skip changes. Restore one of the files, or delete both to start "
            f"from scratch deliberately."
        )

    def _write(self, data: bytes) -> None:
        directory = self.path.parent
        fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=self._tmp_prefix(), suffix=".tmp")
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            if self._main_ok:
                self._keep_previous()
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        fsync_dir(directory)
        self._main_ok = True

    def _keep_previous(self) -> None:
        """Make the current main file the ``.prev`` generation, atomically, without a moment in
        which the main file is missing: a hard link (or a copy where links are not supported)
        under a temporary name, then a rename over ``.prev``."""
        fd, link_name = tempfile.mkstemp(
            dir=self.path.parent, prefix=self._tmp_prefix(), suffix=".tmp"
        )
        os.close(fd)
        link = Path(link_name)
        try:
            link.unlink()
            try:
                os.link(self.path, link)
            except OSError:
                shutil.copyfile(self.path, link)
                with open(link, "rb") as fh:
                    os.fsync(fh.fileno())
            os.replace(link, self.prev_path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                link.unlink()
            raise
