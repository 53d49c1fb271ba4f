"""Group membership against a real broker: a slot revoked while another connector's
assignment topic appears must not leave the worker out of later rebalances.

librdkafka (2.16) rejoins the group when a subscribed topic appears, even while the
application is still handling a revocation. The revocation that completes afterwards is then
applied in the wrong state and leaves librdkafka believing an assignment is pending, so it
skips every later rebalance ("skipping COOPERATIVE rebalance ... (incremental assignment
pending)") until the broker drops the member at ``rebalance.timeout.ms``. Seen in the
distributed test: a killed worker's task moved only after that timeout, because a surviving
worker had revoked a slot (stopping its task takes a while) just as a new connector's topic
appeared. The membership releases the slots before it stops their tasks, so the revocation is
applied before such a rejoin can interleave.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from cdc.offsets.kafka import create_topic
from worker.distributed.kafka_log import DistributedError
from worker.distributed.membership import Membership, Slot, assignment_topic

pytestmark = pytest.mark.kafka

REBALANCE_TIMEOUT_MS = 30_000


class Member:
    def __init__(self, kafka: str, group: str, prefix: str, name: str, stop_s: float) -> None:
        self.name = name
        self.owned: set[Slot] = set()
        self.revoking = threading.Event()
        self._stop_s = stop_s
        self.membership = Membership(
            {"bootstrap.servers": kafka},
            group_id=group,
            prefix=prefix,
            replication_factor=1,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
            scheduled_rebalance_max_delay_ms=0,
            instance_id=name,
            on_assigned=self._assigned,
            on_revoked=self._revoked,
            tick=lambda: None,
        )

    def _assigned(self, slots: set[Slot]) -> None:
        self.owned |= slots

    def _revoked(self, slots: set[Slot], lost: bool) -> None:
        # Stopping a task takes a while (its source stops, the producer flushes).
        self.revoking.set()
        time.sleep(self._stop_s)
        self.owned -= slots
        self.revoking.clear()


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if check():
            return time.monotonic() - t0
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_a_topic_appearing_during_a_revocation_does_not_stall_later_rebalances(
    kafka: str,
) -> None:
    tag = f"tm{uuid.uuid4().hex[:8]}"
    group, prefix = f"{tag}-g", f"{tag}-g-assignments"
    admin = AdminClient({"bootstrap.servers": kafka})

    def add_connector(name: str) -> Slot:
        topic = assignment_topic(prefix, name)
        create_topic(admin, topic, 1, 1, {}, 10, DistributedError)
        return (topic, 0)

    slots = [add_connector(f"c{i}") for i in range(2)]
    a = Member(kafka, group, prefix, "a", stop_s=2.0)
    b = Member(kafka, group, prefix, "b", stop_s=0.0)
    members = [a, b]
    try:
        a.membership.start()
        wait_for(lambda: a.owned == set(slots), 30, "a to own both slots")
        # b joins: a gives up one slot, slowly; a new connector's topic appears meanwhile.
        b.membership.start()
        wait_for(a.revoking.is_set, 30, "a to start revoking a slot")
        slots.append(add_connector("c2"))
        wait_for(
            lambda: a.owned | b.owned == set(slots) and not a.owned & b.owned,
            30,
            "the three slots spread over a and b",
        )
        time.sleep(2)  # a's metadata refresh and any follow-up rebalance settle
        # b leaves: a must take its slots in the next rebalance, not after a's eviction at
        # rebalance.timeout.ms.
        b.membership.close(30)
        members.remove(b)
        took = wait_for(lambda: a.owned == set(slots), 25, "a to take b's slots")
        assert took < 15, f"a took b's slots only after {took:.1f} s"
    finally:
        for m in members:
            m.membership.close(30)
