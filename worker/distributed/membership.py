"""Group membership and task assignment through a Kafka consumer group.

Each worker subscribes one consumer, in the group ``group.id``, to the *assignment topic*. The
topic holds no records: its partitions are task slots, and connector task ``(name, n)`` lives
in slot ``murmur2("<name>-<n>") % partitions`` (the same on every worker, no state needed).
The broker's group coordinator and librdkafka's ``cooperative-sticky`` assignor spread the
slots over the living workers and move only what must move when one joins or leaves
(incremental cooperative rebalancing). A worker that stops heartbeating is dropped after
``session.timeout.ms`` and its slots go to the others; a graceful stop leaves the group, which
hands its slots over at once.

A worker frozen longer than the session timeout (SIGSTOP, a VM pause, a swap storm) may find
its slots already given to another worker when it wakes up, before librdkafka has told it so.
The poll loop notices the gap in its own clock and fences itself: it stops every task of its
slots, leaves the group and joins again as a new member. Transactional fencing (exactly-once)
rejects whatever its tasks try to commit in between.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from cdc.kafka_security import librdkafka_config
from cdc.offsets.kafka import ensure_compacted, murmur2_partition
from worker.distributed.kafka_log import DistributedError

log = logging.getLogger("tidemark.worker.distributed")


def slot(connector: str, task: int, partitions: int) -> int:
    return murmur2_partition(f"{connector}-{task}".encode(), partitions)


class Membership:
    def __init__(
        self,
        client: Mapping[str, Any],
        *,
        group_id: str,
        topic: str,
        partitions: int,
        replication_factor: int,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        rebalance_timeout_ms: int,
        on_assigned: Callable[[set[int]], None],
        on_revoked: Callable[[set[int], bool], None],
        tick: Callable[[], None],
    ) -> None:
        self.group_id = group_id
        self.topic = topic
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.session_timeout_s = session_timeout_ms / 1000
        self._conf = {
            **librdkafka_config(dict(client)),
            "group.id": group_id,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": session_timeout_ms,
            "heartbeat.interval.ms": heartbeat_interval_ms,
            "max.poll.interval.ms": max(rebalance_timeout_ms, session_timeout_ms),
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
        }
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._tick = tick
        self._owned: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._in_callbacks = 0.0  # seconds spent in this poll's callbacks (stopping tasks)
        self.rejoins = 0

    def start(self) -> None:
        admin = AdminClient(librdkafka_config({k: v for k, v in self._client_items()}))
        self.partitions, _ = ensure_compacted(
            admin, self.topic, self.partitions, self.replication_factor, 30, DistributedError
        )
        self._thread = threading.Thread(target=self._main, name="tidemark-membership", daemon=True)
        self._thread.start()

    def _client_items(self) -> list[tuple[str, Any]]:
        group_keys = {
            "group.id",
            "partition.assignment.strategy",
            "session.timeout.ms",
            "heartbeat.interval.ms",
            "max.poll.interval.ms",
            "enable.auto.commit",
            "auto.offset.reset",
        }
        return [(k, v) for k, v in self._conf.items() if k not in group_keys]

    def owned(self) -> set[int]:
        with self._lock:
            return set(self._owned)

    def close(self, timeout_s: float) -> None:
        """Leave the group (the revoke callback stops this worker's tasks first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    # -- the poll thread ----------------------------------------------------------------------
    def _assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        t0 = time.monotonic()
        got = {p.partition for p in parts}
        with self._lock:
            self._owned |= got
        if got:
            log.info("group %s: assigned slot(s) %s", self.group_id, sorted(got))
            self._on_assigned(got)
        self._in_callbacks += time.monotonic() - t0

    def _revoke(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self._take_back(parts, lost=False)

    def _lost(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self._take_back(parts, lost=True)

    def _take_back(self, parts: list[TopicPartition], *, lost: bool) -> None:
        """``lost``: the slots may already be someone else's (session expired), so this
        worker must not write anything about their tasks any more."""
        t0 = time.monotonic()
        gone = {p.partition for p in parts}
        with self._lock:
            gone &= self._owned
            self._owned -= gone
        if gone:
            how = "lost" if lost else "revoked"
            log.info("group %s: slot(s) %s %s", self.group_id, sorted(gone), how)
            self._on_revoked(gone, lost)
        self._in_callbacks += time.monotonic() - t0

    def _consumer(self) -> Consumer:
        consumer = Consumer(self._conf)
        consumer.subscribe(
            [self.topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._lost
        )
        return consumer

    def _fence_self(self, consumer: Consumer, gap: float) -> Consumer:
        log.warning(
            "group %s: this worker was unresponsive for %.1f s, longer than "
            "session.timeout.ms=%.0f: its tasks may run elsewhere already; stopping them and "
            "joining the group again",
            self.group_id,
            gap,
            self.session_timeout_s * 1000,
        )
        with self._lock:
            lost, self._owned = set(self._owned), set()
        if lost:
            self._on_revoked(lost, True)
        try:
            consumer.close()
        except Exception as exc:  # a broken membership must not stop the rejoin
            log.warning("group %s: leaving failed: %s", self.group_id, exc)
        self.rejoins += 1
        return self._consumer()

    def _main(self) -> None:
        consumer = self._consumer()
        try:
            while not self._stop.is_set():
                # A poll returns within 0.2 s plus the time its callbacks took; anything
                # beyond that is time this process did not run.
                t0, self._in_callbacks = time.monotonic(), 0.0
                consumer.poll(0.2)
                gap = time.monotonic() - t0 - self._in_callbacks
                if gap > self.session_timeout_s:
                    consumer = self._fence_self(consumer, gap)
                    continue
                try:
                    self._tick()
                except Exception:
                    log.exception("group %s: reconciling the tasks failed", self.group_id)
        finally:
            consumer.close()  # cooperative leave: on_revoke stops the tasks
            with self._lock:
                left, self._owned = set(self._owned), set()
            if left:
                self._on_revoked(left, False)
