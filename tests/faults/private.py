"""Private instances of the local services, for scenarios that stop or crash the server.

A scenario that takes a database or the broker down must not take the shared instance the
other tests use with it: it gets its own, with its own data folder and port, started once for
its module. The data sits beside the dev stack's, not under pytest's temporary folder, which
is private to the user running the tests (the servers run as their own users under root).
"""

from __future__ import annotations

import shutil
import socket
import uuid
from collections.abc import Iterator
from typing import TypeVar

from worker.dev.service import Service
from worker.dev.stack import default_home

S = TypeVar("S", bound=Service)


def free_port(span: int = 1) -> int:
    """A port free on loopback with the ``span - 1`` ports after it (Kafka listens on four)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1])
        if base + span > 65535:
            continue
        try:
            for port in range(base + 1, base + span):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError(f"no {span} consecutive free ports on 127.0.0.1")


def private_service(cls: type[S], ports: int = 1) -> Iterator[S]:
    """The body of a module fixture: a fresh instance of ``cls``, stopped and removed after.
    A service that cannot start raises: the scenario fails, it is not skipped."""
    home = default_home() / "private" / f"{cls.name}-{uuid.uuid4().hex[:8]}"
    svc = cls(home, free_port(ports))
    try:
        svc.start()
        yield svc
    finally:
        svc.stop()
        shutil.rmtree(home, ignore_errors=True)
