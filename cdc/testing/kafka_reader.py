"""Reading back what a connector wrote to Kafka, for tests of any connector."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from confluent_kafka import Consumer, TopicPartition


@dataclass
class Event:
    """One record, with the converter's ``{"schema", "payload"}`` wrapper removed."""

    topic: str
    key: Any
    value: Any
    headers: dict[str, bytes]
    offset: int

    @property
    def op(self) -> str | None:
        return None if self.value is None else self.value.get("op")

    @property
    def after(self) -> Any:
        return None if self.value is None else self.value.get("after")

    @property
    def before(self) -> Any:
        return None if self.value is None else self.value.get("before")


def _headers(raw: Any) -> dict[str, bytes]:
    items = raw.items() if isinstance(raw, dict) else (raw or [])
    return {str(k): (v.encode() if isinstance(v, str) else v or b"") for k, v in items}


def payload(raw: bytes | None) -> Any:
    if raw is None:
        return None
    doc = orjson.loads(raw)
    return doc["payload"] if isinstance(doc, dict) and "payload" in doc else doc


def read_topic(
    bootstrap: str,
    topic: str,
    *,
    min_count: int = 0,
    timeout: float = 30.0,
    settle: float = 1.5,
    isolation: str = "read_uncommitted",
) -> list[Event]:
    """Everything on partition 0 of ``topic`` from the beginning: waits for ``min_count``
    records, then for ``settle`` seconds of quiet so unexpected extra records show up too."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": uuid.uuid4().hex,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[Event] = []
        deadline = time.monotonic() + timeout
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            msgs = consumer.consume(500, 0.2)
            good = [m for m in msgs if m.error() is None]
            if not good:
                if len(out) >= min_count and time.monotonic() - quiet_since > settle:
                    break
                continue
            quiet_since = time.monotonic()
            for msg in good:
                out.append(
                    Event(
                        msg.topic() or topic,
                        payload(msg.key()),
                        payload(msg.value()),
                        _headers(msg.headers()),
                        msg.offset() or 0,
                    )
                )
        return out
    finally:
        consumer.close()
