"""Group membership and task assignment through a Kafka consumer group.

Each worker subscribes one consumer, in the group ``group.id``, to the *assignment topics*:
every connector has one, ``<assignment.storage.topic>.<connector>``, with one partition per
task (one today). The topics hold no records: a partition is a task *slot*, named by the
connector alone, so every worker maps a task to the same slot without shared state. The
consumer subscribes by pattern, so a new connector's topic joins the assignment within
``topic.metadata.refresh.interval.ms`` (1 s) and a deleted one's leaves it.

The broker's group coordinator and librdkafka's ``cooperative-sticky`` assignor balance the
*number* of partitions over the living workers (they differ by at most one) and move only what
must move when one joins or leaves (incremental cooperative rebalancing). Since every slot
holds exactly one task, tasks are spread evenly: three connectors on three workers run one per
worker. A worker that stops heartbeating is dropped after ``session.timeout.ms`` and its slots
go to the others; a graceful stop leaves the group, which hands its slots over at once.

``scheduled.rebalance.max.delay.ms`` (Kafka Connect's delay before a departed worker's tasks
are reassigned) is implemented with static group membership (KIP-345): with a delay, the
worker joins with ``group.instance.id`` = its worker id and a broker-side session of
``session.timeout.ms`` + the delay. A departed worker (crashed, or stopped for a restart) keeps
its slots, unassigned to anyone else, for that long; coming back with the same id it gets them
back without a rebalance. Without a delay (the default) the slots move when the session
expires.

A worker frozen longer than its session (SIGSTOP, a VM pause, a swap storm) may find its
slots already given to another worker when it wakes up, before librdkafka has told it so.
The poll loop notices the gap in its own clock and fences itself: it stops every task of its
slots, leaves the group and joins again as a new member. Transactional fencing (exactly-once)
rejects whatever its tasks try to commit in between.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from cdc.kafka_client_log import LoggedAdminClient, logged
from cdc.kafka_security import librdkafka_config
from cdc.offsets.kafka import create_topic
from worker.distributed.kafka_log import DistributedError

log = logging.getLogger("tidemark.worker.distributed")

Slot = tuple[str, int]  # (assignment topic, task number)

METADATA_REFRESH_MS = 1000  # how soon a new connector's assignment topic is noticed


def assignment_topic(prefix: str, connector: str) -> str:
    """``<prefix>.<connector>``: characters a topic name cannot hold become ``_``, and a hash
    of the exact name keeps two names that differ only there apart."""
    readable = re.sub(r"[^A-Za-z0-9_-]", "_", connector)[:120]
    digest = hashlib.sha1(connector.encode()).hexdigest()[:8]
    return f"{prefix}.{readable}-{digest}"


def slot(prefix: str, connector: str, task: int) -> Slot:
    return (assignment_topic(prefix, connector), task)


def subscription(prefix: str) -> str:
    """The pattern matching every assignment topic of ``prefix`` (librdkafka regex)."""
    return "^" + prefix.replace(".", "\\.") + "\\..+"


def _names(slots: set[Slot]) -> str:
    return ", ".join(f"{topic}[{task}]" for topic, task in sorted(slots))


class Membership:
    def __init__(
        self,
        client: Mapping[str, Any],
        *,
        group_id: str,
        prefix: str,
        replication_factor: int,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        rebalance_timeout_ms: int,
        scheduled_rebalance_max_delay_ms: int,
        instance_id: str,
        on_assigned: Callable[[set[Slot]], None],
        on_revoked: Callable[[set[Slot], bool], None],
        tick: Callable[[], None],
    ) -> None:
        self.group_id = group_id
        self.prefix = prefix
        self.replication_factor = replication_factor
        # The broker keeps a silent member's slots this long: its session, plus the delay a
        # departed worker gets to come back (static membership).
        session = session_timeout_ms + scheduled_rebalance_max_delay_ms
        self.session_timeout_s = session / 1000
        self._client = logged(librdkafka_config(dict(client)))
        self._conf: dict[str, Any] = {
            **self._client,
            "group.id": group_id,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": session,
            "heartbeat.interval.ms": heartbeat_interval_ms,
            "max.poll.interval.ms": max(rebalance_timeout_ms, session),
            "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
        }
        if scheduled_rebalance_max_delay_ms > 0:
            # Kafka checks it as it checks topic names.
            static = re.sub(r"[^A-Za-z0-9._-]", "_", f"{group_id}-{instance_id}")[:249]
            self._conf["group.instance.id"] = static
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._tick = tick
        self._owned: set[Slot] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._in_callbacks = 0.0  # seconds spent in this poll's callbacks (stopping tasks)
        self._admin: AdminClient | None = None
        self._topics: set[str] = set()  # assignment topics known to exist
        self._next_ensure = 0.0
        self.rejoins = 0

    def slot(self, connector: str, task: int = 0) -> Slot:
        return slot(self.prefix, connector, task)

    def start(self) -> None:
        self._admin = LoggedAdminClient(self._client)
        self._thread = threading.Thread(target=self._main, name="tidemark-membership", daemon=True)
        self._thread.start()

    def owned(self) -> set[Slot]:
        with self._lock:
            return set(self._owned)

    # -- assignment topics: one per connector -------------------------------------------------
    def ensure(self, connectors: Iterable[str]) -> None:
        """Create the assignment topic of each connector that lacks one (any worker may: a
        lost creation race is fine). Checked at most once a second while one is missing, every
        5 s after a failed creation (a connector re-created right after its deletion waits for
        the old topic to go)."""
        wanted = {assignment_topic(self.prefix, c) for c in connectors}
        missing = wanted - self._topics
        if not missing or time.monotonic() < self._next_ensure or self._admin is None:
            return
        self._next_ensure = time.monotonic() + 1.0
        try:
            existing = set(self._admin.list_topics(timeout=10).topics)
        except KafkaException as exc:
            log.warning("group %s: cannot list topics: %s", self.group_id, exc)
            return
        self._topics |= missing & existing
        for topic in sorted(missing - existing):
            try:
                create_topic(
                    self._admin, topic, 1, self.replication_factor, {}, 10, DistributedError
                )
                self._topics.add(topic)
            except DistributedError as exc:
                log.warning("group %s: %s (retrying in 5 s)", self.group_id, exc)
                self._next_ensure = time.monotonic() + 5.0

    def retire(self, connector: str) -> None:
        """Delete a deleted connector's assignment topic: its slot leaves the assignment."""
        topic = assignment_topic(self.prefix, connector)
        self._topics.discard(topic)
        if self._admin is None:
            return
        future = self._admin.delete_topics([topic], operation_timeout=10)[topic]
        try:
            future.result(timeout=10)
        except KafkaException as exc:  # already deleted by another worker: fine
            log.debug("group %s: deleting %s: %s", self.group_id, topic, exc)

    def close(self, timeout_s: float) -> None:
        """Leave the group (the revoke callback stops this worker's tasks first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    # -- the poll thread ----------------------------------------------------------------------
    def _assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        t0 = time.monotonic()
        got = {(p.topic, p.partition) for p in parts}
        with self._lock:
            self._owned |= got
        if got:
            log.info("group %s: assigned slot(s) %s", self.group_id, _names(got))
            self._on_assigned(got)
        self._in_callbacks += time.monotonic() - t0

    def _revoke(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self._take_back(consumer, parts, lost=False)

    def _lost(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self._take_back(consumer, parts, lost=True)

    def _take_back(self, consumer: Consumer, parts: list[TopicPartition], *, lost: bool) -> None:
        """``lost``: the slots may already be someone else's (session expired), so this
        worker must not write anything about their tasks any more.

        The slots are released to librdkafka *before* their tasks are stopped. librdkafka
        (2.16) rejoins the group when a subscribed topic appears even while a revocation is
        still with the application; a revocation completed after such a rejoin leaves it
        believing an assignment is pending, and it then skips every rebalance until the
        broker drops this worker at ``rebalance.timeout.ms`` (a dead worker's tasks waited
        that long to move). Releasing first closes that window to the poll that delivered
        the revocation. Otherwise the slots go to no one else before this callback returns
        (the follow-up assignment waits for the next poll, and the group waits for it). Only
        that same topic-driven rejoin, with or without the early release, can hand a slot to
        another worker while its task here is still stopping; the new task then waits for
        what the old one holds (a replication slot), and exactly-once fences the old one."""
        t0 = time.monotonic()
        if parts:
            try:
                consumer.incremental_unassign(parts)
            except KafkaException as exc:  # librdkafka's own unassign then follows
                log.warning("group %s: releasing slots failed: %s", self.group_id, exc)
        gone = {(p.topic, p.partition) for p in parts}
        with self._lock:
            gone &= self._owned
            self._owned -= gone
        if gone:
            how = "lost" if lost else "revoked"
            log.info("group %s: slot(s) %s %s", self.group_id, _names(gone), how)
            self._on_revoked(gone, lost)
        self._in_callbacks += time.monotonic() - t0

    def _consumer(self) -> Consumer:
        consumer = Consumer(self._conf)
        consumer.subscribe(
            [subscription(self.prefix)],
            on_assign=self._assign,
            on_revoke=self._revoke,
            on_lost=self._lost,
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
