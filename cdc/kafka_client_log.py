"""librdkafka's own log lines, through Python's logging.

Left alone, librdkafka writes ``%3|1795820483.624|FAIL|...: Connection refused`` straight to
the process's stderr. That line is in neither of the worker's log formats (so it breaks a JSON
log pipeline) and is not scrubbed. While a broker is down it comes once per reconnect attempt,
every 50 ms for a client waiting on metadata: ~900 lines in 15 s, measured with one
connector. Every Kafka client the worker and the engines create therefore gets
``logger=CLIENT_LOG`` (:func:`logged`): the lines become ordinary records of the
``tidemark.kafka.client`` logger, with the worker's format and scrubbing, and a line that
repeats within :data:`REPEAT_WINDOW_S` is held back and counted in the next one shown.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka.admin import AdminClient

CLIENT_LOG = logging.getLogger("tidemark.kafka.client")
REPEAT_WINDOW_S = 30.0
_DIGITS = re.compile(r"\d+")


class RepeatFilter(logging.Filter):
    """Lets a message through at most once per window, whatever its numbers (times, client
    and attempt counters); the next one shown says how many were held back."""

    def __init__(self, window_s: float = REPEAT_WINDOW_S) -> None:
        super().__init__()
        self.window_s = window_s
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[float, int]] = {}

    def reset(self) -> None:
        """Forget what was shown: the next line of each kind comes through."""
        with self._lock:
            self._seen.clear()

    def filter(self, record: logging.LogRecord) -> bool:
        key = _DIGITS.sub("#", record.getMessage())
        now = time.monotonic()
        with self._lock:
            shown, held = self._seen.get(key, (-self.window_s, 0))
            if now - shown < self.window_s:
                self._seen[key] = (shown, held + 1)
                return False
            if len(self._seen) > 1000:  # distinct messages are few; never grow without bound
                self._seen.clear()
            self._seen[key] = (now, 0)
        if held:
            record.msg = f"{record.getMessage()} ({held} more like it in the last "
            record.msg += f"{self.window_s:.0f} s not shown)"
            record.args = None
        return True


REPEATS = RepeatFilter()
CLIENT_LOG.addFilter(REPEATS)


def logged(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` for a librdkafka client whose log lines go to :data:`CLIENT_LOG`."""
    return {**conf, "logger": CLIENT_LOG}


_ADMIN_CALLS = (
    "list_topics",
    "create_topics",
    "delete_topics",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "create_partitions",
    "list_offsets",
    "describe_topics",
    "describe_cluster",
)


class LoggedAdminClient(AdminClient):
    """An ``AdminClient`` whose librdkafka lines reach :data:`CLIENT_LOG`. A client's log
    lines wait in its queue until ``poll()`` serves them, and nothing else polls an admin
    client: each call below serves the queue when it returns, so the lines of a broker that
    is down arrive (held back by :class:`RepeatFilter`) instead of piling up in memory."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        super().__init__(logged(conf))


def _serving(name: str) -> Any:
    call = getattr(AdminClient, name)

    def method(self: LoggedAdminClient, *args: Any, **kwargs: Any) -> Any:
        try:
            return call(self, *args, **kwargs)
        finally:
            self.poll(0)

    method.__name__ = name
    return method


for _name in _ADMIN_CALLS:
    if hasattr(AdminClient, _name):
        setattr(LoggedAdminClient, _name, _serving(_name))
