"""The file signal channel (``signal.enabled.channels=file``), as Debezium's: every
``signal.poll.interval.ms`` the file ``signal.file`` is read, one JSON signal per line
(``{"id": ..., "type": ..., "data": {...}}``), and emptied, so a signal runs once.

Unlike Debezium's, the channel empties only a file that holds nothing but signals: every
non-blank line must be a JSON object with a ``type``. A file with any other line (a typo, or a
file that was never a signal file: the path may come from a connector config) is left as it
is and none of its signals run; a warning names the line by number and length, once per
change of the file, and never quotes it (the file could hold anything the worker can read).
A signal whose data is wrong is still a signal: it is consumed, and the reason is logged.
Neither is a file that is not a regular one, or one larger than :data:`MAX_BYTES`, read."""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from cdc.signals.model import Signal, SignalError, parse

log = logging.getLogger("tidemark.signals.file")

#: a signal file larger than this is not read (a signal line is a few hundred bytes)
MAX_BYTES = 1 << 20


class FileSignalChannel:
    def __init__(self, path: str, submit: Callable[[Signal], None], interval_s: float) -> None:
        self.path = Path(path)
        self.submit = submit
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tidemark-signals-file", daemon=True)
        #: the (inode, size, mtime) of the file last refused, so its warning is logged once
        self._refused: tuple[int, int, int] | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.poll()
            except OSError as exc:
                log.warning("signal.file %s: %s", self.path, exc)

    def _refuse(self, st: os.stat_result, reason: str) -> int:
        state = (st.st_ino, st.st_size, st.st_mtime_ns)
        if state != self._refused:
            self._refused = state
            log.warning(
                "signal.file %s: %s; the file is left as it is and none of its signals run "
                'until it holds only signals, one JSON object with a "type" per line',
                self.path,
                reason,
            )
        return 0

    def poll(self) -> int:
        """Read and empty the file; returns how many signals were handed on."""
        try:
            # non-blocking: a FIFO or a device must not hold up the channel (refused below)
            fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK)
        except FileNotFoundError:
            return 0
        except IsADirectoryError:
            return 0  # Debezium ignores a directory too
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return self._refuse(st, "is not a regular file")
        with os.fdopen(fd, "r+b") as fh:
            if st.st_size == 0:
                return 0
            if st.st_size > MAX_BYTES:
                return self._refuse(st, f"holds {st.st_size} bytes, more than a signal file")
            data = fh.read(MAX_BYTES + 1)
            lines, refusal = _signal_lines(data)
            if refusal is not None:
                return self._refuse(st, refusal)
            if os.fstat(fh.fileno()).st_size != len(data):
                return 0  # written to meanwhile: read again at the next poll
            fh.seek(0)
            fh.truncate()
        self._refused = None
        sent = 0
        for n, doc in lines:
            try:
                signal = parse(
                    doc.get("id") or f"file-{n}", doc.get("type"), doc.get("data"), "file"
                )
            except SignalError as exc:
                log.warning("signal.file %s line %d skipped: %s", self.path, n, exc)
                continue
            self.submit(signal)
            sent += 1
        return sent


def _signal_lines(data: bytes) -> tuple[list[tuple[int, dict[str, object]]], str | None]:
    """The signal objects of ``data`` with their line numbers, or why it is not a signal
    file (naming the line, never quoting it)."""
    out: list[tuple[int, dict[str, object]]] = []
    for n, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            doc = None
        if not isinstance(doc, dict) or not isinstance(doc.get("type"), str):
            return [], f"line {n} ({len(raw)} bytes) is not a JSON signal"
        out.append((n, doc))
    return out, None
