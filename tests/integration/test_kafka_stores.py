"""Kafka offset store and Kafka schema history against the real local broker."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import orjson
import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from cdc.errors import OffsetError, SchemaError
from cdc.history import HistoryRecord, TableChange, TableChangeType, history_from_config
from cdc.history.kafka import KafkaSchemaHistory
from cdc.offsets.kafka import KafkaOffsetStore
from cdc.spi import Column, Table, TableId

pytestmark = pytest.mark.kafka

SOURCE = {"server": "dbserver1"}


@pytest.fixture
def admin(kafka: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka})


@pytest.fixture
def new_topic(admin: AdminClient) -> Iterator[Callable[[str], str]]:
    """Unique topic names, deleted after the test so the shared broker stays tidy."""
    names: list[str] = []

    def make(prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        names.append(name)
        return name

    yield make
    if names:
        for future in admin.delete_topics(names, operation_timeout=30).values():
            try:
                future.result(30)
            except Exception as exc:  # the topic may never have been created
                logging.getLogger(__name__).debug("delete: %s", exc)


def _create(admin: AdminClient, topic: str, partitions: int, **config: str) -> None:
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config)])
    futures[topic].result(30)


def _topic_config(admin: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(30)
    return {k: v.value for k, v in entries.items()}


def _records(kafka: str, topic: str) -> list[Message]:
    """Every record of every partition, read_uncommitted (so aborted ones show too)."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka,
            "group.id": "test-reader",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        pending, out = set(partitions), []
        while pending:
            msg = consumer.poll(10)
            assert msg is not None, f"timed out reading {topic}"
            err = msg.error()
            if err is not None and err.code() == KafkaError._PARTITION_EOF:
                pending.discard(msg.partition())
            elif err is None:
                out.append(msg)
        return out
    finally:
        consumer.close()


def _offset_store(kafka: str, topic: str, **kw: object) -> KafkaOffsetStore:
    store = KafkaOffsetStore(kafka, topic, **kw)  # type: ignore[arg-type]
    store.start()
    return store


# -- offsets ---------------------------------------------------------------------------------


def test_offsets_survive_restart_and_delete(
    kafka: str, admin: AdminClient, new_topic: Callable[[str], str]
) -> None:
    topic = new_topic("offsets")
    store = _offset_store(kafka, topic)
    try:
        assert store.get("inventory", SOURCE) is None
        store.put("inventory", SOURCE, {"file": "bin.000001", "pos": 4})
        store.put_many(
            [
                ("inventory", SOURCE, {"file": "bin.000001", "pos": 154}),
                ("inventory", {"server": "dbserver2"}, {"lsn": 7}),
                ("other", SOURCE, {"lsn": 1}),
                ("gone", SOURCE, {"lsn": 1}),
            ]
        )
        store.put("gone", SOURCE, None)
    finally:
        store.close()

    config = _topic_config(admin, topic)
    assert config["cleanup.policy"] == "compact"
    assert len(admin.list_topics(timeout=10).topics[topic].partitions) == 25

    again = _offset_store(kafka, topic)
    try:
        assert again.get("inventory", {"server": "dbserver1"}) == {"file": "bin.000001", "pos": 154}
        assert again.get("inventory", {"server": "dbserver2"}) == {"lsn": 7}
        assert again.get("other", SOURCE) == {"lsn": 1}
        assert again.get("gone", SOURCE) is None
        assert len(again.all("inventory")) == 2
    finally:
        again.close()

    # Connect's record layout, in the partition Java's default partitioner picks.
    records = _records(kafka, topic)
    keys = {m.key() for m in records}
    assert b'["inventory",{"server":"dbserver1"}]' in keys
    tombstones = [m for m in records if m.key() == b'["gone",{"server":"dbserver1"}]']
    assert tombstones[-1].value() is None
    check = _offset_store(kafka, topic)
    try:
        for m in records:
            key = m.key()
            assert key is not None
            assert m.partition() == check.partition_for(key)
    finally:
        check.close()


def test_connect_written_keys_are_reused(
    kafka: str, admin: AdminClient, new_topic: Callable[[str], str]
) -> None:
    """Connect does not sort partition keys; an update must reuse its exact key bytes, or
    compaction would keep both records."""
    topic = new_topic("offsets")
    _create(admin, topic, 3, **{"cleanup.policy": "compact"})
    connect_key = b'["c", {"server": "s", "db": "d"}]'
    producer = Producer({"bootstrap.servers": kafka, "partitioner": "murmur2_random"})
    producer.produce(topic, key=connect_key, value=b'{"pos": 1}')
    assert producer.flush(30) == 0

    store = _offset_store(kafka, topic)
    try:
        assert store.get("c", {"db": "d", "server": "s"}) == {"pos": 1}
        store.put("c", {"db": "d", "server": "s"}, {"pos": 2})
        assert store.offset_record("c", {"server": "s", "db": "d"}, None) == (
            topic,
            connect_key,
            None,
        )
    finally:
        store.close()
    assert {m.key() for m in _records(kafka, topic)} == {connect_key}
    again = _offset_store(kafka, topic)
    try:
        assert again.all("c") == [({"db": "d", "server": "s"}, {"pos": 2})]
    finally:
        again.close()


def test_transactional_offset_records_and_aborts(
    kafka: str, new_topic: Callable[[str], str]
) -> None:
    """An exactly-once sink writes the offset record in its own transaction: a restart sees
    committed offsets only, and reading to the end finishes despite transaction markers."""
    topic = new_topic("offsets")
    store = _offset_store(kafka, topic, partitions=4)
    try:
        store.put("c", SOURCE, {"pos": 1})
        producer = Producer(
            {
                "bootstrap.servers": kafka,
                "transactional.id": f"test-{uuid.uuid4().hex}",
                "partitioner": "murmur2_random",
            }
        )
        producer.init_transactions(30)
        producer.begin_transaction()
        t, k, v = store.offset_record("c", SOURCE, {"pos": 2})
        producer.produce(t, key=k, value=v)
        producer.commit_transaction(30)
        producer.begin_transaction()
        t, k, v = store.offset_record("c", SOURCE, {"pos": 3})
        producer.produce(t, key=k, value=v)
        producer.abort_transaction(30)

        assert store.get("c", SOURCE) == {"pos": 1}  # cached until refreshed
        # Commit markers reach the partitions just after commit_transaction returns; until
        # then the last stable offset is before the committed record: a settled read waits.
        store.refresh(settle=True)
        assert store.get("c", SOURCE) == {"pos": 2}

        # A transaction still open: reading stops at the last stable offset instead of
        # waiting for it, and its record shows only once committed.
        producer.begin_transaction()
        t, k, v = store.offset_record("c", SOURCE, {"pos": 4})
        producer.produce(t, key=k, value=v)
        assert producer.flush(30) == 0
        started = time.monotonic()
        again = _offset_store(kafka, topic, partitions=4)
        try:
            assert time.monotonic() - started < 5
            assert again.get("c", SOURCE) == {"pos": 2}
            producer.commit_transaction(30)
            again.refresh(settle=True)
            assert again.get("c", SOURCE) == {"pos": 4}
        finally:
            again.close()
    finally:
        store.close()


def test_settled_read_waits_for_open_transactions(
    kafka: str, new_topic: Callable[[str], str]
) -> None:
    """What an exactly-once task reads after fencing: a transaction open when the read
    starts (a commit decided, its markers not yet written) is waited for, not read past."""
    topic = new_topic("offsets")
    store = _offset_store(kafka, topic, partitions=2)
    producer = Producer(
        {
            "bootstrap.servers": kafka,
            "transactional.id": f"test-{uuid.uuid4().hex}",
            "partitioner": "murmur2_random",
        }
    )
    try:
        store.put("c", SOURCE, {"pos": 1})
        producer.init_transactions(30)
        producer.begin_transaction()
        t, k, v = store.offset_record("c", SOURCE, {"pos": 2})
        producer.produce(t, key=k, value=v)
        assert producer.flush(30) == 0
        committer = threading.Timer(1.0, producer.commit_transaction, args=(30,))
        committer.start()
        reader = KafkaOffsetStore(kafka, topic, partitions=2)
        try:
            reader.start(settle=True)
            assert reader.get("c", SOURCE) == {"pos": 2}
        finally:
            committer.join()
            reader.close()
        store.refresh(settle=True)  # a started store settles the same way
        assert store.get("c", SOURCE) == {"pos": 2}
    finally:
        store.close()


def test_failed_delivery_raises_and_keeps_what_was_acknowledged(
    kafka: str, admin: AdminClient, new_topic: Callable[[str], str]
) -> None:
    topic = new_topic("offsets")
    _create(admin, topic, 2, **{"cleanup.policy": "compact", "max.message.bytes": "300"})
    store = _offset_store(kafka, topic)
    try:
        with pytest.raises(OffsetError, match="1 of 2 writes failed"):
            store.put_many([("c", {"p": 1}, {"pos": 1}), ("c", {"p": 2}, {"blob": "x" * 1000})])
        assert store.get("c", {"p": 1}) == {"pos": 1}
        assert store.get("c", {"p": 2}) is None
    finally:
        store.close()


def test_offsets_topic_must_be_compacted(
    kafka: str, admin: AdminClient, new_topic: Callable[[str], str]
) -> None:
    topic = new_topic("offsets")
    _create(admin, topic, 1, **{"cleanup.policy": "delete"})
    store = KafkaOffsetStore(kafka, topic)
    with pytest.raises(OffsetError, match=r"cleanup\.policy=delete"):
        store.start()
    store.close()


# -- schema history --------------------------------------------------------------------------

TABLE = Table(
    id=TableId("inventory", None, "orders"),
    columns=(
        Column("id", 1, "INT", optional=False, auto_increment=True),
        Column("qty", 2, "SMALLINT"),
    ),
    primary_key=("id",),
)


def _history(kafka: str, topic: str) -> KafkaSchemaHistory:
    history = KafkaSchemaHistory(kafka, topic)
    history.start()
    return history


def test_history_records_and_recovers_across_instances(
    kafka: str, admin: AdminClient, new_topic: Callable[[str], str]
) -> None:
    topic = new_topic("dbhistory")
    history = KafkaSchemaHistory(kafka, topic)
    assert not history.exists()
    history.start()
    try:
        assert not history.exists()
        history.record(SOURCE, {"file": "b.1", "pos": 10}, "inventory", None, "CREATE DATABASE x")
        history.record(
            SOURCE,
            {"file": "b.1", "pos": 20},
            "inventory",
            None,
            "CREATE TABLE orders (...)",
            [TableChange(TableChangeType.CREATE, TABLE)],
        )
        history.record({"server": "other"}, {"file": "b.1", "pos": 15}, None, None, "not mine")
        for i in range(200):
            history.record(SOURCE, {"file": "b.2", "pos": i}, "inventory", None, f"ALTER {i}")
        assert history.exists()
    finally:
        history.stop()

    config = _topic_config(admin, topic)
    assert (config["cleanup.policy"], config["retention.ms"], config["retention.bytes"]) == (
        "delete",
        "-1",
        "-1",
    )
    assert len(admin.list_topics(timeout=10).topics[topic].partitions) == 1

    again = _history(kafka, topic)
    try:
        assert again.exists()
        replayed = list(again.recover(SOURCE, lambda p: p["file"] == "b.2" and p["pos"] >= 100))
        assert [r.ddl for r in replayed[:2]] == ["CREATE DATABASE x", "CREATE TABLE orders (...)"]
        assert [r.ddl for r in replayed[2:]] == [f"ALTER {i}" for i in range(100)]
        (change,) = replayed[1].changes()
        assert change.table == TABLE
    finally:
        again.stop()

    # Debezium's layout: null key, one JSON record per value.
    first = _records(kafka, topic)[0]
    assert first.key() is None
    value = first.value()
    assert value is not None
    assert HistoryRecord.from_dict(orjson.loads(value)).ddl == "CREATE DATABASE x"


def test_history_rejects_a_topic_with_more_than_one_partition(
    kafka: str, admin: AdminClient, new_topic: Callable[[str], str]
) -> None:
    topic = new_topic("dbhistory")
    _create(admin, topic, 3)
    history = KafkaSchemaHistory(kafka, topic)
    with pytest.raises(SchemaError, match="has 3 partitions; it must have exactly 1"):
        history.start()
    history.stop()


def test_history_from_config_with_debezium_keys(
    kafka: str, new_topic: Callable[[str], str], caplog: pytest.LogCaptureFixture
) -> None:
    topic = new_topic("dbhistory")
    history = history_from_config(
        {
            "database.history.kafka.topic": topic,
            "database.history.kafka.bootstrap.servers": kafka,
            "database.history.kafka.recovery.poll.interval.ms": "100",
            "database.history.kafka.recovery.attempts": "4",
        }
    )
    assert isinstance(history, KafkaSchemaHistory)
    history.start()
    try:
        history.record(SOURCE, {"pos": 1}, "db", None, "CREATE TABLE t (a INT)")
    finally:
        history.stop()
    # A tombstone someone wrote by mistake is skipped, as Debezium does.
    producer = Producer({"bootstrap.servers": kafka})
    producer.produce(topic, value=None, partition=0)
    assert producer.flush(30) == 0
    reader = history_from_config(
        {
            "schema.history.internal.kafka.topic": topic,
            "schema.history.internal.kafka.bootstrap.servers": kafka,
        }
    )
    reader.start()
    try:
        with caplog.at_level(logging.WARNING, logger="cdc.history.kafka"):
            assert [r.ddl for r in reader.recover(SOURCE, lambda p: False)] == [
                "CREATE TABLE t (a INT)"
            ]
        assert "null record" in caplog.text
    finally:
        reader.stop()
