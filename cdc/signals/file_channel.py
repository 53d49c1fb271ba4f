"""The file signal channel (``signal.enabled.channels=file``), as Debezium's: every
``signal.poll.interval.ms`` the file ``signal.file`` is read, one JSON signal per line
(``{"id": ..., "type": ..., "data": {...}}``), and emptied, so a signal runs once. A line
that is not a signal is logged with the reason and skipped."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from cdc.signals.model import Signal, SignalError, parse

log = logging.getLogger("tidemark.signals.file")


class FileSignalChannel:
    def __init__(self, path: str, submit: Callable[[Signal], None], interval_s: float) -> None:
        self.path = Path(path)
        self.submit = submit
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tidemark-signals-file", daemon=True)

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

    def poll(self) -> int:
        """Read and empty the file; returns how many signals were handed on."""
        if not self.path.exists():
            return 0
        with self.path.open("r+", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
            fh.seek(0)
            fh.truncate()
        sent = 0
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
                if not isinstance(doc, dict):
                    raise SignalError("a signal line must be a JSON object")
                signal = parse(
                    doc.get("id") or f"file-{n}", doc.get("type"), doc.get("data"), "file"
                )
            except (SignalError, ValueError) as exc:
                log.warning("signal.file %s line %d skipped: %s (%r)", self.path, n, exc, line)
                continue
            self.submit(signal)
            sent += 1
        return sent
