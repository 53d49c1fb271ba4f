"""Where signals from outside the database find a running task (REST, tests).

A task that accepts signals (``signal.data.collection`` set or ``read.only=true``, ``rest``
among ``signal.enabled.channels``) registers a receiver under its connector name while it streams;
``POST /connectors/{name}/signals`` hands the signal to it. Process-wide: the worker and its
engines share one process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from cdc.signals.model import Signal

Receiver = Callable[[Signal], None]

_lock = threading.Lock()
_receivers: dict[str, Receiver] = {}


def register(connector: str, receiver: Receiver) -> None:
    with _lock:
        _receivers[connector] = receiver


def unregister(connector: str, receiver: Receiver) -> None:
    with _lock:
        if _receivers.get(connector) == receiver:
            del _receivers[connector]


def deliver(connector: str, signal: Signal) -> bool:
    """Hand ``signal`` to the connector's running task; False when none accepts signals."""
    with _lock:
        receiver = _receivers.get(connector)
    if receiver is None:
        return False
    receiver(signal)
    return True
