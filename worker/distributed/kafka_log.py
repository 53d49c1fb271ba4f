"""A compacted topic read continuously by a background thread: Kafka Connect's ``KafkaBasedLog``.

Every worker reads the whole topic at start and then follows it, handing each record to a
callback, so every worker's view converges on the same state. :meth:`KafkaLog.send` writes a
record and waits for Kafka's acknowledgement; :meth:`KafkaLog.sync` waits until the reader has
consumed everything written before the call (read-your-writes for a REST answer).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from cdc.errors import CDCError
from cdc.kafka_client_log import LoggedAdminClient, logged
from cdc.kafka_security import librdkafka_config
from cdc.offsets.kafka import end_offsets, ensure_compacted, produce_all

log = logging.getLogger("tidemark.worker.distributed")

Handler = Callable[[str, bytes | None], None]


class DistributedError(CDCError):
    """The cluster's internal topics cannot be created, read or written."""


class KafkaLog:
    def __init__(
        self,
        client: Mapping[str, Any],
        topic: str,
        handler: Handler,
        *,
        partitions: int = 1,
        replication_factor: int = 1,
        timeout_s: float = 30.0,
    ) -> None:
        self.topic = topic
        self.handler = handler
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.timeout_s = timeout_s
        self._common = logged(librdkafka_config(dict(client)))
        self._admin: AdminClient | None = None
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._positions: dict[int, int] = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: str | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Create the topic if needed (compacted), read it to its end, then follow it."""
        admin = self._admin = LoggedAdminClient(self._common)
        count, policy = ensure_compacted(
            admin,
            self.topic,
            self.partitions,
            self.replication_factor,
            self.timeout_s,
            DistributedError,
        )
        if policy != "compact":
            raise DistributedError(
                f"topic {self.topic!r} has cleanup.policy={policy}; the cluster's state topics "
                "must be compacted, or retention deletes connector configs and statuses"
            )
        self._producer = Producer(
            {**self._common, "acks": "all", "enable.idempotence": True, "linger.ms": 0}
        )
        ends = end_offsets(admin, self.topic, range(count), self.timeout_s, DistributedError)
        self._positions = {p: low for p, (low, _) in ends.items()}
        self._consumer = Consumer(
            {
                **self._common,
                "group.id": f"tidemark-log-{self.topic}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 50,
            }
        )
        self._consumer.assign(
            [TopicPartition(self.topic, p, o) for p, o in self._positions.items()]
        )
        self._thread = threading.Thread(
            target=self._follow, name=f"tidemark-log-{self.topic}", daemon=True
        )
        self._thread.start()
        self._wait_for(ends, self.timeout_s * 4)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        producer, consumer = self._producer, self._consumer
        self._producer = self._consumer = None
        if producer is not None:
            producer.flush(self.timeout_s)
        if consumer is not None:
            consumer.close()

    # -- reads and writes ---------------------------------------------------------------------
    def send(self, records: list[tuple[str, bytes | None]]) -> None:
        """Write ``(key, value)`` records (a None value deletes the key on compaction) and wait
        for Kafka to acknowledge all of them."""
        if self._producer is None:
            raise DistributedError(f"{self.topic}: not started")
        _, failure = produce_all(
            self._producer,
            [(self.topic, k.encode(), v, None) for k, v in records],
            timeout_s=self.timeout_s,
        )
        if failure is not None:
            raise DistributedError(f"writing to {self.topic} failed: {failure}")

    def sync(self, timeout_s: float | None = None) -> None:
        """Return once everything written to the topic before this call has been handled."""
        assert self._admin is not None
        ends = end_offsets(
            self._admin, self.topic, list(self._positions), self.timeout_s, DistributedError
        )
        self._wait_for(ends, self.timeout_s if timeout_s is None else timeout_s)

    def _wait_for(self, ends: Mapping[int, tuple[int, int]], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while any(self._positions.get(p, 0) < end for p, (_, end) in ends.items()):
                if self._error is not None:
                    raise DistributedError(f"reading {self.topic} failed: {self._error}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DistributedError(f"reading {self.topic} did not catch up in time")
                self._cond.wait(min(left, 0.2))

    # -- the reader thread --------------------------------------------------------------------
    def _follow(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while not self._stop.is_set():
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            self._handle(msg)

    def _handle(self, msg: Message) -> None:
        part, off, kerr = msg.partition(), msg.offset(), msg.error()
        if part is None or off is None:
            return
        if kerr is not None and kerr.code() != KafkaError._PARTITION_EOF:
            if not kerr.retriable():
                log.warning("error while following %s: %s", self.topic, kerr)
            return
        if kerr is None:
            key = msg.key()
            if key is not None:
                try:
                    self.handler(key.decode("utf-8", "replace"), msg.value())
                except Exception:
                    log.exception("cannot apply record %s[%d]@%d", self.topic, part, off)
            off += 1
        with self._cond:
            self._positions[part] = max(self._positions.get(part, 0), off)
            self._cond.notify_all()
