"""The Kafka signal channel (``signal.enabled.channels=kafka``): Debezium's signal topic.

A consumer thread reads ``signal.kafka.topic``; a message keyed by the connector's
``topic.prefix`` (``database.server.name``) or its name, with a JSON value
``{"type": ..., "data": {...}}`` (``id`` optional: the message's offset by default), is a
signal for this connector; messages with other keys are for other connectors and skipped.
``signal.consumer.*`` keys configure the consumer (security).

The channel assigns itself partition 0 of the topic, as Debezium's does: it is no member of
its consumer group (``signal.kafka.groupId``), which only keeps its committed offset. So a
task restarted after a crash reads the topic at once; a consumer that joined the group
instead would wait for the killed task's membership to expire (``session.timeout.ms``, 45 s
by default) before it got the partition. Like Debezium's, the topic must have a single
partition (positions of different partitions cannot be compared): only partition 0 is read,
and a warning names the others.

A signal accepted is never lost to a crash. The channel commits a message's offset only once
its effect is durable: the task ran the signal, and an offset it stored afterwards holds the
signal's position (``incremental_snapshot_signal_offset``, with the snapshot's state). At
start, the channel reads from after the position the stored offset holds (or from the
group's committed offset when it holds none, from the topic's start when there is neither),
so a signal whose effect was not stored yet is read and run again; running it again is
harmless (an ``execute-snapshot`` already under way is recognised by its id). A message that
is not a signal is logged with the reason and skipped.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from cdc.kafka_client_log import logged
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
        start_after: int | None = None,
        committed: Callable[[int], None] | None = None,
    ) -> None:
        self.topic = topic
        self.consumer_config = dict(consumer_config)
        self.keys = keys
        self.submit = submit
        self.poll_timeout_s = poll_timeout_s
        #: the position of the last signal the connector's stored offsets hold (read after it)
        self.start_after = start_after
        #: told the position once the group committed the offset after it
        self.committed = committed
        #: the latest durable signal position to commit (set by the task thread)
        self._durable: int | None = None
        self._committed_at: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"tidemark-signals-{topic}", daemon=True
        )
        #: the partition is assigned (for tests and the log)
        self.ready = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def durable(self, position: int) -> None:
        """A stored offset holds the effect of the signal at ``position`` (any thread)."""
        if self._durable is None or position > self._durable:
            self._durable = position

    def _assign(self, consumer: Any) -> None:
        """Take partition 0 at the position to resume from: after the stored offset's signal,
        else the group's committed offset (librdkafka fetches it), else the topic's start."""
        from confluent_kafka import OFFSET_STORED, TopicPartition

        self._check_partitions(consumer)
        offset = OFFSET_STORED if self.start_after is None else self.start_after + 1
        consumer.assign([TopicPartition(self.topic, 0, offset)])
        if self.start_after is not None:
            log.info(
                "signal topic %s: reading after offset %d (the last signal the stored offsets "
                "hold)",
                self.topic,
                self.start_after,
            )
        self.ready.set()

    def _check_partitions(self, consumer: Any) -> None:
        try:
            meta = consumer.list_topics(self.topic, timeout=5).topics.get(self.topic)
        except Exception as exc:  # the broker is down: the consumer retries on its own
            log.warning("signal topic %s: no metadata yet (%s)", self.topic, exc)
            return
        if meta is None or meta.error is not None:
            log.info("signal topic %s does not exist yet: read once it is created", self.topic)
        elif len(meta.partitions) > 1:
            log.warning(
                "signal topic %s has %d partitions: only partition 0 is read (a signal topic "
                "must have one: signals of different partitions have no order)",
                self.topic,
                len(meta.partitions),
            )

    def _commit(self, consumer: Any) -> None:
        from confluent_kafka import TopicPartition

        position = self._durable
        if position is None or position == self._committed_at:
            return
        consumer.commit(offsets=[TopicPartition(self.topic, 0, position + 1)], asynchronous=False)
        self._committed_at = position
        if self.committed is not None:
            self.committed(position)

    def _run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            logged(
                {"auto.offset.reset": "earliest", "enable.auto.commit": False}
                | self.consumer_config
            )
        )
        try:
            self._assign(consumer)
            while not self._stop.is_set():
                msg = consumer.poll(self.poll_timeout_s)
                try:
                    self._commit(consumer)
                except Exception:
                    log.warning("signal topic %s: commit failed", self.topic, exc_info=True)
                if msg is None:
                    continue
                if msg.error() is not None:
                    log.warning("signal topic %s: %s", self.topic, msg.error())
                    continue
                self.handle(msg.key(), msg.value(), msg.offset() or 0)
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
        self.submit(replace(signal, position=offset))
