"""The Kafka signal channel (``signal.enabled.channels=kafka``): Debezium's signal topic.

A consumer thread reads ``signal.kafka.topic``; a message keyed by the connector's
``topic.prefix`` (``database.server.name``) or its name, with a JSON value
``{"type": ..., "data": {...}}`` (``id`` optional: the message's offset by default), is a
signal for this connector; messages with other keys are for other connectors and skipped.
The consumer group (``signal.kafka.groupId``) commits what it has handed on, so a restart
does not run a signal twice. ``signal.consumer.*`` keys configure the consumer (security).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from cdc.signals.model import Signal, SignalError, parse

log = logging.getLogger("tidemark.signals.kafka")


class KafkaSignalChannel:
    def __init__(
        self,
        *,
        topic: str,
        consumer_config: Mapping[str, Any],
        keys: set[str],
        submit: Callable[[Signal], None],
        poll_timeout_s: float = 0.1,
    ) -> None:
        self.topic = topic
        self.consumer_config = dict(consumer_config)
        self.keys = keys
        self.submit = submit
        self.poll_timeout_s = poll_timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"tidemark-signals-{topic}", daemon=True
        )
        #: the consumer is subscribed (for tests and the log)
        self.ready = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {"auto.offset.reset": "earliest", "enable.auto.commit": False, **self.consumer_config}
        )
        try:
            consumer.subscribe([self.topic], on_assign=lambda c, parts: self.ready.set())
            while not self._stop.is_set():
                msg = consumer.poll(self.poll_timeout_s)
                if msg is None:
                    continue
                if msg.error() is not None:
                    log.warning("signal topic %s: %s", self.topic, msg.error())
                    continue
                self.handle(msg.key(), msg.value(), msg.offset() or 0)
                consumer.commit(message=msg, asynchronous=False)
        except Exception:
            log.exception("signal topic %s: the channel stopped", self.topic)
        finally:
            consumer.close()

    def handle(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        name = (key or b"").decode(errors="replace")
        if name not in self.keys:
            return
        try:
            doc = json.loads(value or b"")
            if not isinstance(doc, dict):
                raise SignalError(f"a signal message must be a JSON object, got {value!r}")
            signal = parse(
                doc.get("id") or f"kafka-{offset}", doc.get("type"), doc.get("data"), "kafka"
            )
        except (SignalError, ValueError) as exc:
            log.warning("signal topic %s offset %d skipped: %s", self.topic, offset, exc)
            return
        self.submit(signal)
