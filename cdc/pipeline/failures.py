"""``event.processing.failure.handling.mode``: what happens to an event that cannot be
converted. ``fail`` stops the task at the event (its offset is never stored); ``warn`` logs
the event and its position and moves on; ``skip`` moves on; ``dead-letter`` writes the event,
the error and its position to a topic, and the offset moves on only once Kafka has that."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from typing import Any

import orjson

from cdc.errors import ConversionError
from cdc.metrics import TaskMetrics
from cdc.record import SourceRecord, offset_marker

log = logging.getLogger("tidemark.failures")


def _describe(event: Any) -> Any:
    if is_dataclass(event) and not isinstance(event, type):
        return asdict(event)
    if isinstance(event, dict):  # already a summary (a record too large to include)
        return event
    if isinstance(event, SourceRecord):
        return {"topic": event.topic, "key": event.key, "value": event.value}
    return repr(event)


def _default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return repr(value)


class FailureHandler:
    def __init__(self, mode: str, metrics: TaskMetrics, dead_letter_topic: str | None = None):
        self.mode = mode
        self.metrics = metrics
        self.topic = dead_letter_topic

    def handle(
        self,
        error: ConversionError,
        event: Any,
        partition: dict[str, Any],
        put: Callable[[SourceRecord], None],
        continued: bool = False,
    ) -> None:
        """Handle ``event`` by the mode; what replaces it goes to ``put``. ``continued``: more
        records of the same source event follow it (``SourceRecord.continued``), so the marker
        or dead-letter record put in its place must not have its offset stored either."""
        position = error.position or {}
        if self.mode == "fail":
            raise error
        if self.mode == "warn":
            log.warning(
                "skipping event that failed conversion at %s: %s; event: %r",
                position,
                error,
                _describe(event),
            )
            put(offset_marker(partition, position, continued))
        elif self.mode == "skip":
            log.debug("skipping event at %s: %s", position, error)
            put(offset_marker(partition, position, continued))
        else:
            assert self.topic, "dead-letter mode requires errors.deadletterqueue.topic.name"
            body = {
                "error": str(error),
                "error_class": type(error.__cause__ or error).__name__,
                "stack": "".join(traceback.format_exception(error)),
                "position": position,
                "partition": partition,
                "event": _describe(event),
            }
            value = orjson.dumps(body, default=_default, option=orjson.OPT_NON_STR_KEYS)
            headers = [
                ("__tidemark.error", str(error).encode()),
                ("__tidemark.position", orjson.dumps(position, default=_default)),
            ]
            self.metrics.dead_lettered += 1
            put(
                SourceRecord(
                    self.topic,
                    None,
                    None,
                    None,
                    value,
                    partition,
                    position,
                    headers,
                    raw=True,
                    continued=continued,
                )
            )
