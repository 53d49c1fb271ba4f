"""Notifications of incremental snapshot progress (Debezium's ``notification.*``).

Each notification is Debezium's shape: ``id``, ``aggregate_type`` (``Incremental
Snapshot``), ``type`` (STARTED, IN_PROGRESS, TABLE_SCAN_COMPLETED, PAUSED, RESUMED,
ABORTED, COMPLETED), ``additional_data`` (a string map: the connector, the tables, keys,
row counts) and ``timestamp`` (ms). Channels (``notification.enabled.channels``): ``log``
writes it to the connector's log, ``sink`` sends it as a record to
``notification.sink.topic.name``. Progress also goes to the snapshot metrics, so
``GET /connectors/{name}/status`` and ``tidemark status`` show it.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any

from cdc.pipeline.dispatcher import EventDispatcher
from cdc.record import SourceRecord
from cdc.schema.model import INT64, STRING, map_of, struct

log = logging.getLogger("tidemark.notifications")

AGGREGATE = "Incremental Snapshot"
KEY_SCHEMA = STRING
VALUE_SCHEMA = struct(
    [
        ("id", STRING),
        ("aggregate_type", STRING),
        ("type", STRING),
        ("additional_data", map_of(STRING, STRING)),
        ("timestamp", INT64),
    ],
    name="io.debezium.notification.Notification",
)


class Notifier:
    """Sends notifications to the enabled channels; ``sink`` records carry the offset of the
    event being processed, after everything emitted before it (so storing it loses
    nothing)."""

    def __init__(
        self,
        dispatcher: EventDispatcher,
        *,
        connector: str,
        channels: set[str],
        topic: str | None,
    ) -> None:
        self.d = dispatcher
        self.connector = connector
        self.channels = channels
        self.topic = topic
        #: every notification sent (for tests and the status)
        self.sent: list[dict[str, Any]] = []

    def notify(self, kind: str, offset: dict[str, Any] | None, **data: Any) -> dict[str, Any]:
        note = {
            "id": uuid.uuid4().hex,
            "aggregate_type": AGGREGATE,
            "type": kind,
            "additional_data": {
                "connector_name": self.connector,
                **{k: v if isinstance(v, str) else json.dumps(v) for k, v in data.items()},
            },
            "timestamp": time.time_ns() // 1_000_000,
        }
        self.sent.append(note)
        if "log" in self.channels:
            log.info("%s: %s %s %s", self.connector, AGGREGATE, kind, note["additional_data"])
        if "sink" in self.channels and self.topic and offset is not None:
            self.d.flush()
            self.d.queue.put(
                SourceRecord(
                    self.topic,
                    KEY_SCHEMA,
                    note["id"],
                    VALUE_SCHEMA,
                    note,
                    self.d.partition,
                    offset,
                )
            )
        return note
