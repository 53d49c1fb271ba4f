"""A connector's engine running on a thread, for in-process integration tests of any
connector: start it, wait until it streams, stop it, and surface its failure to the test."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from cdc.engine import Engine


@dataclass
class RunningConnector:
    engine: Engine
    thread: threading.Thread
    connector: Any = None
    errors: list[BaseException] = field(default_factory=list)

    def stop(self, timeout: float = 30.0) -> None:
        self.engine.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "engine did not stop"


def start_engine(engine: Engine, connector: Any = None) -> RunningConnector:
    run = RunningConnector(engine, threading.Thread(target=lambda: None), connector)

    def main() -> None:
        try:
            engine.run()
        except BaseException as exc:  # surfaced to the test by running()/wait_streaming()
            run.errors.append(exc)

    run.thread = threading.Thread(target=main, daemon=True)
    run.thread.start()
    return run


@contextmanager
def running(start: Callable[[], RunningConnector]) -> Iterator[RunningConnector]:
    run = start()
    try:
        yield run
    finally:
        run.stop()
        if run.errors:
            raise run.errors[0]


def wait_streaming(run: RunningConnector, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if run.errors:
            raise run.errors[0]
        if run.engine.metrics.streaming.connected:
            return
        time.sleep(0.05)
    raise AssertionError("connector did not start streaming")
