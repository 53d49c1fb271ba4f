"""Schema history in a JSON-lines file (Debezium's ``FileSchemaHistory``), for standalone mode.

Each record is fsynced before ``record`` returns: the connector stores its offset only after
the DDL is in the history, so a DDL lost in a crash would leave the restarted connector
decoding rows with the wrong columns. A crash during an append can leave a partial last line;
``start`` cuts it off (the offset that went with it was never stored). Damage anywhere else is
an error, never skipped.

``start`` changes nothing in a file that is not a schema history (its first line is not a
history record, or its last line is not the start of one): the task fails naming the file, and
no message quotes the file's content. The path may come from a connector config, and the file
could be anything the worker can write (docs/security.md).
"""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from cdc.errors import SchemaError
from cdc.history.store import HistoryRecord, SchemaHistory

log = logging.getLogger(__name__)

#: how every record starts (Debezium's writer and ours put ``source`` first)
_RECORD_START = b'{"source":'
_RECORD_HEAD = re.compile(rb'\s*\{\s*"source"\s*:')
#: the most of a first line ``start`` reads to tell a history from another file
_FIRST_LINE_LIMIT = 16 << 20


def _starts_like_a_record(data: bytes) -> bool:
    """``data`` is the beginning of a history record (possibly torn inside its first bytes)."""
    head = data.lstrip()
    return bool(_RECORD_HEAD.match(head)) or (
        len(head) < len(_RECORD_START) and _RECORD_START.startswith(head)
    )


def _not_history(path: Path, what: str) -> SchemaError:
    return SchemaError(
        f"{path} is not a schema history file ({what}); tidemark changes nothing in it. Point "
        f"schema.history.internal.file.filename at a new file, or move this one away if it is "
        f"a damaged history"
    )


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileSchemaHistory(SchemaHistory):
    def __init__(self, path: str | os.PathLike[str], **flags: bool) -> None:
        super().__init__(**flags)
        self.path = Path(path)
        self._lock = threading.Lock()
        self._out: IO[bytes] | None = None

    def start(self) -> None:
        with self._lock:
            if self._out is not None:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            created = not self.path.exists()
            try:
                self._check_is_history()
                self._repair_tail()
                self._out = open(self.path, "ab")  # noqa: SIM115 - held until stop()
                if created:
                    os.fsync(self._out.fileno())
                    _fsync_dir(self.path.parent)
            except OSError as exc:
                raise SchemaError(f"cannot open schema history file {self.path}: {exc}") from exc

    def stop(self) -> None:
        with self._lock:
            if self._out is not None:
                self._out.close()
                self._out = None

    def exists(self) -> bool:
        try:
            return self.path.stat().st_size > 0
        except FileNotFoundError:
            return False

    def store_record(self, record: HistoryRecord) -> None:
        line = record.to_json() + b"\n"
        with self._lock:
            if self._out is None:
                raise SchemaError(f"schema history {self.path} is not started; call start()")
            try:
                self._out.write(line)
                self._out.flush()
                os.fsync(self._out.fileno())
            except OSError as exc:
                raise SchemaError(f"cannot append to schema history {self.path}: {exc}") from exc

    def all_records(self) -> Iterator[HistoryRecord]:
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - closed by the with below
        except FileNotFoundError:
            return
        with fh:
            lineno = 0
            for raw in fh:
                lineno += 1
                if not raw.strip():
                    continue
                if not raw.endswith(b"\n"):
                    # Not yet repaired by start(): a torn append, whose offset was never stored.
                    log.warning("ignoring a partial last line in schema history %s", self.path)
                    return
                try:
                    yield HistoryRecord.from_json(raw)
                except SchemaError as exc:
                    raise SchemaError(f"{self.path} line {lineno}: {exc}") from exc

    def _check_is_history(self) -> None:
        """Raise unless the file is missing, empty, or starts with a history record."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(st.st_mode):
            raise _not_history(self.path, "not a regular file")
        with open(self.path, "rb") as fh:
            lineno = 0
            while True:
                raw = fh.readline(_FIRST_LINE_LIMIT)
                lineno += 1
                if not raw:
                    return  # empty, or blank lines only
                if raw.strip():
                    break
        if raw.endswith(b"\n") or len(raw) < _FIRST_LINE_LIMIT:
            # a whole line (the last one may lack its newline): it must be a record, or the
            # start of one torn by a crash during the very first append
            try:
                HistoryRecord.from_json(raw)
                return
            except SchemaError:
                if not raw.endswith(b"\n") and _starts_like_a_record(raw):
                    return
        elif _starts_like_a_record(raw):
            return  # a record longer than the limit
        raise _not_history(self.path, f"line {lineno} is not a history record")

    def _repair_tail(self) -> None:
        """Cut a torn last line, so the next append does not glue onto it. Only a line that
        starts like a record is cut: anything else means the file is not (only) a history."""
        if not self.path.exists():
            return
        with open(self.path, "r+b") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size == 0:
                return
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return
            # Find the start of the last line.
            block, pos = 4096, size
            start = 0
            while pos > 0:
                step = min(block, pos)
                pos -= step
                fh.seek(pos)
                chunk = fh.read(step)
                nl = chunk.rfind(b"\n")
                if nl >= 0:
                    start = pos + nl + 1
                    break
            fh.seek(start)
            tail = fh.read()
            try:
                HistoryRecord.from_json(tail)
            except SchemaError:
                if not _starts_like_a_record(tail):
                    raise _not_history(
                        self.path, f"its last line ({len(tail)} bytes) is not a history record"
                    ) from None
                log.warning(
                    "schema history %s ends with a partial record (%d bytes), left by a crash "
                    "during a write; removing it",
                    self.path,
                    len(tail),
                )
                fh.truncate(start)
            else:
                fh.seek(0, os.SEEK_END)
                fh.write(b"\n")  # complete record, only the newline was lost
            fh.flush()
            os.fsync(fh.fileno())
