"""The distributed worker's config and status topics on the real Kafka: Kafka Connect's record
formats, a second reader rebuilding the same state, deletes, and stale statuses ignored."""

from __future__ import annotations

import re
import secrets
import uuid
from collections.abc import Iterator

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from worker.distributed.config_store import SEALED, UNREADABLE, ConfigStore, Restart
from worker.distributed.membership import assignment_topic, subscription
from worker.distributed.status_store import StatusStore, task_key
from worker.sealing import Sealer

pytestmark = [pytest.mark.kafka]


def raw_records(bootstrap: str, topic: str) -> list[tuple[str, object]]:
    """Every record of the topic, keys decoded, values parsed: what Kafka Connect would read."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"t-{uuid.uuid4().hex}",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    parts = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic).topics[topic]
    c.assign([TopicPartition(topic, p, 0) for p in parts.partitions])
    out, eof = [], set()
    while len(eof) < len(parts.partitions):
        m = c.poll(5)
        assert m is not None, "topic not read to its end"
        if m.error():
            eof.add(m.partition())
            continue
        value = m.value()
        out.append((m.key().decode(), None if value is None else orjson.loads(value)))
    c.close()
    return out


@pytest.fixture
def topics(kafka: str) -> Iterator[tuple[str, str]]:
    suffix = uuid.uuid4().hex[:8]
    names = (f"t-dist-configs-{suffix}", f"t-dist-status-{suffix}")
    yield names
    AdminClient({"bootstrap.servers": kafka}).delete_topics(list(names))


def test_config_topic_in_kafka_connect_format_and_rebuilt_by_a_second_worker(
    kafka: str, topics: tuple[str, str]
) -> None:
    client = {"bootstrap.servers": kafka}
    restarts: list[Restart] = []
    a = ConfigStore(client, topics[0], on_restart=restarts.append)
    a.start()
    a.put_connector("inv", {"connector.class": "memory", "name": "inv"}, "STARTED")
    a.put_connector("gone", {"connector.class": "memory", "name": "gone"}, "STARTED")
    a.put_target("inv", "STOPPED")
    a.delete_connector("gone")
    a.request_restart("inv", True, False)
    assert a.connectors() == {"inv": {"connector.class": "memory", "name": "inv"}}
    assert a.target("inv") == "STOPPED"
    assert restarts == [Restart("inv", True, False)]  # read live: acted on

    records = dict(raw_records(kafka, topics[0]))
    assert records["connector-inv"] == {"properties": {"connector.class": "memory", "name": "inv"}}
    assert records["task-inv-0"] == records["connector-inv"]
    assert records["commit-inv"] == {"tasks": 1}
    # Kafka Connect 3.5+ writes STOPPED so that older workers read PAUSED.
    assert records["target-state-inv"] == {"state": "PAUSED", "state.v2": "STOPPED"}
    assert records["connector-gone"] is None and records["target-state-gone"] is None
    assert records["restart-connector-inv"] == {"include-tasks": True, "only-failed": False}

    later: list[Restart] = []
    b = ConfigStore(client, topics[0], on_restart=later.append)
    b.start()
    assert b.connectors() == a.connectors()
    assert b.target("inv") == "STOPPED" and b.task_count("inv") == 1
    assert later == []  # an old restart request found at start is not acted on again
    # ... but kept: a worker that gets the task later checks it against its start (a start
    # after the request was read serves it; a request read after the start does not).
    found = b.restart_request("inv")
    assert found is not None and found[1] == Restart("inv", True, False)
    started = b.read_count()
    assert found[0] <= started
    a.put_target("inv", "PAUSED")
    b.log.sync()
    assert b.target("inv") == "PAUSED"  # followed live
    a.request_restart("inv", False, True)
    b.log.sync()
    newer = b.restart_request("inv")
    assert newer is not None and newer[0] > started and later == [Restart("inv", False, True)]
    a.delete_connector("inv")
    b.log.sync()
    assert b.restart_request("inv") is None
    a.close()
    b.close()


def raw_bytes(bootstrap: str, topic: str) -> bytes:
    """Every key and value of the topic as bytes, for a search for a secret."""
    return b"".join(
        k.encode() + (orjson.dumps(v) if v is not None else b"")
        for k, v in raw_records(bootstrap, topic)
    )


def test_secrets_are_sealed_in_the_config_topic_and_opened_by_a_worker_with_the_key(
    kafka: str, topics: tuple[str, str]
) -> None:
    client = {"bootstrap.servers": kafka}
    key, other = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    password = f"pw-{uuid.uuid4().hex}"

    def rule(config: object, k: str, v: str) -> bool:
        return k == "database.password"

    config = {"connector.class": "memory", "name": "inv", "database.password": password}
    a = ConfigStore(client, topics[0], sealer=Sealer(key), is_secret=rule)
    a.start()
    a.put_connector("inv", config, "STARTED")
    assert password.encode() not in raw_bytes(kafka, topics[0])
    records = dict(raw_records(kafka, topics[0]))
    assert set(records["connector-inv"][SEALED]) == {"database.password"}  # type: ignore[index]
    # a second worker, started later, reads it back opened; one with another key cannot
    b = ConfigStore(client, topics[0], sealer=Sealer(key), is_secret=rule)
    c = ConfigStore(client, topics[0], sealer=Sealer(other), is_secret=rule)
    b.start()
    c.start()
    assert b.config("inv") == config and b.unreadable("inv") == {}
    assert c.config("inv") == {**config, "database.password": UNREADABLE}
    assert "does not hold" in c.unreadable("inv")["database.password"]
    for s in (a, b, c):
        s.close()


def test_status_topic_format_and_stale_generation_ignored(
    kafka: str, topics: tuple[str, str]
) -> None:
    client = {"bootstrap.servers": kafka}
    a = StatusStore(client, topics[1], partitions=3)
    a.start()
    key = task_key("inv", 0)
    new = {"state": "RUNNING", "trace": None, "worker_id": "w2:8083", "generation": 200}
    a.put([(key, new)], sync=True)
    # A worker that lost the task without knowing it writes with its older generation.
    zombie = {"state": "FAILED", "trace": "fenced", "worker_id": "w1:8083", "generation": 100}
    a.put([(key, zombie)], sync=True)
    assert a.get(key) == new
    b = StatusStore(client, topics[1], partitions=3)
    b.start()
    assert b.get(key) == new
    assert (key, new) in raw_records(kafka, topics[1])
    a.put([(key, None)], sync=True)
    b.log.sync()
    assert a.get(key) is None and b.get(key) is None
    a.close()
    b.close()


def test_assignment_topics_one_per_connector_matched_by_the_subscription() -> None:
    names = ["inventory", "inv/entory", "inv_entory", "Ünïcode name", "a" * 300]
    topics = [assignment_topic("tm-assignments", n) for n in names]
    assert len(set(topics)) == len(names)  # distinct even where characters were replaced
    assert all(re.fullmatch(r"[A-Za-z0-9._-]{1,249}", t) for t in topics), topics
    assert topics == [assignment_topic("tm-assignments", n) for n in names]  # same everywhere
    pattern = re.compile(subscription("tm-assignments"))
    assert all(pattern.match(t) for t in topics)
    assert not pattern.match("tm-assignments")  # the bare prefix: no connector
    assert not pattern.match("tm-assignmentsX.inventory")
    assert not pattern.match(assignment_topic("other", "inventory"))
