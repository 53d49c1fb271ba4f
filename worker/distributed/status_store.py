"""Connector and task status in the status topic, as Kafka Connect's ``KafkaStatusBackingStore``
writes it: key ``status-connector-<name>`` or ``status-task-<name>-<n>``, value
``{"state", "trace", "worker_id", "generation"}`` (JSON without schemas), null when the
connector or task is gone.

Only the worker that holds a task's assignment writes its status. ``generation`` is the time
(ms) that worker was assigned the task: a record with an older generation than the one already
read for the key, from another worker, comes from a worker that lost the assignment without
knowing it yet (a frozen process) and is ignored, as Kafka Connect ignores stale generations.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

import orjson

from worker.distributed.kafka_log import KafkaLog

log = logging.getLogger("tidemark.worker.distributed")


def connector_key(name: str) -> str:
    return f"status-connector-{name}"


def task_key(name: str, task: int) -> str:
    return f"status-task-{name}-{task}"


class StatusStore:
    def __init__(
        self,
        client: Mapping[str, Any],
        topic: str,
        *,
        partitions: int = 5,
        replication_factor: int = 1,
    ) -> None:
        self._lock = threading.Lock()
        self._status: dict[str, dict[str, Any]] = {}
        self.log = KafkaLog(
            client,
            topic,
            self._apply,
            partitions=partitions,
            replication_factor=replication_factor,
        )

    def start(self) -> None:
        self.log.start()

    def close(self) -> None:
        self.log.close()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            s = self._status.get(key)
            return dict(s) if s is not None else None

    def put(self, entries: list[tuple[str, dict[str, Any] | None]], *, sync: bool = False) -> None:
        self.log.send([(k, None if v is None else orjson.dumps(v)) for k, v in entries])
        if sync:
            self.log.sync()

    def _apply(self, key: str, raw: bytes | None) -> None:
        with self._lock:
            if raw is None:
                self._status.pop(key, None)
                return
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                log.warning("ignoring status record %s: not JSON", key)
                return
            if not isinstance(value, dict):
                return
            old = self._status.get(key)
            if (
                old is not None
                and old.get("worker_id") != value.get("worker_id")
                and int(value.get("generation") or 0) < int(old.get("generation") or 0)
            ):
                log.info(
                    "ignoring stale status %s from %s (generation %s < %s)",
                    key,
                    value.get("worker_id"),
                    value.get("generation"),
                    old.get("generation"),
                )
                return
            self._status[key] = value
