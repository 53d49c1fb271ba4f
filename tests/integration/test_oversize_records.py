"""A record larger than Kafka accepts follows event.processing.failure.handling.mode, in order:
``fail`` stops at it (no offset past it), ``warn``/``skip`` go on without it, ``dead-letter``
writes its key, position and size (not the value) to the dead-letter topic. Against the real
broker, with a topic created with a small ``max.message.bytes`` and with a small producer
limit."""

from __future__ import annotations

import contextlib
import logging
import secrets
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from cdc.engine import Engine, EngineSettings
from cdc.errors import ConversionError
from cdc.offsets.memory import MemoryOffsetStore
from cdc.testing.kafka_reader import read_topic
from cdc.testing.memory import MemoryConnector, MemoryDatabase
from tests.integration.engine_runner import running, start_engine

pytestmark = pytest.mark.kafka

BIG = 60_000  # bytes of the one oversize value
TOPIC_LIMIT = 20_000


@pytest.fixture
def topics(kafka: str) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    admin = AdminClient({"bootstrap.servers": kafka})
    for future in admin.delete_topics(names, operation_timeout=30).values():
        with contextlib.suppress(Exception):  # a topic that was never created
            future.result(30)


def prepare(
    kafka: str,
    topics: list[str],
    mode: str,
    *,
    topic_limit: int | None = TOPIC_LIMIT,
    producer: dict[str, Any] | None = None,
    big: str | None = None,
) -> tuple[Engine, Callable[[], dict[str, Any] | None], int, str]:
    """Rows 1, 2 (oversize) and 3, each in its own transaction; returns the engine, the stored
    offset, the position of row 2 and the data topic."""
    server, db_name = "big" + uuid.uuid4().hex[:8], "db" + uuid.uuid4().hex[:6]
    db = MemoryDatabase(db_name)
    db.create_table("items", [("id", "int"), ("v", "text")], ["id"])
    # Random text does not compress: over the limit before and after compression.
    for row in ((1, "a"), (2, big or secrets.token_hex(BIG // 2)), (3, "c")):
        db.transaction([("c", "items", row)])
    big_pos = next(e.pos for e in db.log if e.kind == "row" and e.after and e.after[0] == 2)
    topic = f"{server}.{db_name}.items"
    topics += [topic, f"{server}-dlq"]
    if topic_limit is not None:
        admin = AdminClient({"bootstrap.servers": kafka})
        new = NewTopic(topic, 1, 1, config={"max.message.bytes": str(topic_limit)})
        admin.create_topics([new])[topic].result(30)
    config = {
        "name": server,
        "database.server.name": server,
        "memory.database": db_name,
        "snapshot.mode": "never",
        "poll.interval.ms": "50",
        "event.processing.failure.handling.mode": mode,
        "errors.deadletterqueue.topic.name": f"{server}-dlq",
    }
    connector = MemoryConnector(config)
    store = MemoryOffsetStore()
    engine = Engine(
        connector,
        connector.config,
        store,
        EngineSettings(producer={"bootstrap.servers": kafka, **(producer or {})}),
    )
    return engine, lambda: store.get(server, connector.source_partition()), big_pos, topic


def ids(kafka: str, topic: str, count: int) -> list[int]:
    return [e.after["id"] for e in read_topic(kafka, topic, min_count=count, settle=1.0)]


def test_fail_stops_at_the_record_and_names_the_settings(kafka: str, topics: list[str]) -> None:
    engine, stored, big_pos, topic = prepare(kafka, topics, "fail")
    with pytest.raises(ConversionError) as raised:
        engine.run()
    message = str(raised.value)
    assert "MSG_SIZE_TOO_LARGE" in message
    for setting in ("max.request.size", "message.max.bytes", "max.message.bytes"):
        assert setting in message
    assert raised.value.position == {"pos": big_pos}
    assert ids(kafka, topic, 1) == [1]
    offset = stored()  # never past the record that was neither delivered nor handled
    assert offset is None or offset["pos"] < big_pos


@pytest.mark.parametrize("mode", ["skip", "warn"])
def test_skip_and_warn_go_on_without_it(
    kafka: str, topics: list[str], mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="tidemark.failures"):
        engine, stored, big_pos, topic = prepare(kafka, topics, mode)
        with running(lambda: start_engine(engine)):
            assert ids(kafka, topic, 2) == [1, 3]
    offset = stored()
    assert offset is not None and offset["pos"] > big_pos
    warned = [r for r in caplog.records if "MSG_SIZE_TOO_LARGE" in r.getMessage()]
    assert bool(warned) == (mode == "warn")
    if warned:
        assert f"'pos': {big_pos}" in warned[0].getMessage()


@pytest.mark.parametrize(
    ("limit", "producer"),
    [(TOPIC_LIMIT, None), (None, {"max.request.size": TOPIC_LIMIT})],
    ids=["topic-limit", "producer-limit"],
)
def test_dead_letter_gets_key_position_and_size(
    kafka: str, topics: list[str], limit: int | None, producer: dict[str, Any] | None
) -> None:
    engine, stored, big_pos, topic = prepare(
        kafka, topics, "dead-letter", topic_limit=limit, producer=producer
    )
    with running(lambda: start_engine(engine)):
        assert ids(kafka, topic, 2) == [1, 3]
        [dead] = read_topic(kafka, topics[1], min_count=1, settle=1.0)
    offset = stored()
    assert offset is not None and offset["pos"] > big_pos
    assert dead.value is not None
    raw = orjson.dumps(dead.value)
    assert len(raw) < 10_000, "the oversize value went to the dead-letter topic"
    assert dead.value["position"]["pos"] == big_pos
    assert dead.value["event"]["size"] > BIG
    assert '"id":2' in dead.value["event"]["key"].replace(" ", "")
    assert "MSG_SIZE_TOO_LARGE" in dead.value["error"]
    assert engine.metrics.dead_lettered == 1


def test_a_record_that_fits_once_compressed_is_delivered_in_order(
    kafka: str, topics: list[str]
) -> None:
    """Over the topic's limit before compression, under it after (the broker checks the
    compressed batch): sent on its own, and delivered."""
    engine, stored, big_pos, topic = prepare(kafka, topics, "fail", big="x" * BIG)
    with running(lambda: start_engine(engine)):
        events = read_topic(kafka, topic, min_count=3, settle=1.0)
    assert [e.after["id"] for e in events] == [1, 2, 3]
    assert events[1].after["v"] == "x" * BIG
    offset = stored()
    assert offset is not None and offset["pos"] > big_pos
