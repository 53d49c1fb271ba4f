"""A record over both its topic's ``max.message.bytes`` and the producer's own limit: the
producer refuses it at ``produce()``, which escaped the failure mode and failed the task
whatever ``event.processing.failure.handling.mode`` said. A real librdkafka producer (it
refuses before contacting any broker; none runs here)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from cdc.converters import converter_from_config
from cdc.metrics import TaskMetrics
from cdc.offsets.memory import MemoryOffsetStore
from cdc.offsets.writer import OffsetWriter
from cdc.pipeline.delivery import AtLeastOnceDelivery
from cdc.pipeline.failures import FailureHandler
from cdc.record import SourceRecord
from cdc.schema.model import Type, primitive, struct
from cdc.sinks.kafka import KafkaSink
from cdc.transforms import build_chain

P = {"server": "srv"}
V = struct([("s", primitive(Type.STRING))], name="v")


@pytest.fixture
def sink() -> Iterator[KafkaSink]:
    s = KafkaSink(
        {"bootstrap.servers": "127.0.0.1:1", "message.max.bytes": 1000, "log_level": 0},
        create_topics=False,
    )
    s.known_topics.add("t")
    s.topic_limits["t"] = 600  # the topic's max.message.bytes, below the producer's
    yield s
    s.release()


def delivery(sink: KafkaSink, mode: str) -> AtLeastOnceDelivery:
    metrics = TaskMetrics("memory", "srv", "t")
    store = MemoryOffsetStore()
    return AtLeastOnceDelivery(
        sink=sink,
        store=store,
        writer=OffsetWriter(store, "t", P),
        transforms=build_chain({}),
        key_converter=converter_from_config({}, is_key=True),
        value_converter=converter_from_config({"schemas.enable": "false"}, is_key=False),
        failures=FailureHandler(mode, metrics),
        metrics=metrics,
        partition=P,
        stopping=lambda: False,
        flush_timeout_s=1.0,
    )


def test_a_record_the_producer_refuses_follows_the_failure_mode(
    sink: KafkaSink, caplog: pytest.LogCaptureFixture
) -> None:
    d = delivery(sink, "warn")
    big = SourceRecord("t", None, None, V, {"s": "y" * 5000}, P, {"pos": 2})
    with caplog.at_level(logging.WARNING):
        d.process([big])
    assert d.writer.pending == {"pos": 2}  # passed over as the mode says, in order
    assert any("t" in r.getMessage() for r in caplog.records)


def test_under_fail_the_refusal_stops_the_task_before_the_offset_moves(sink: KafkaSink) -> None:
    d = delivery(sink, "fail")
    big = SourceRecord("t", None, None, V, {"s": "y" * 5000}, P, {"pos": 2})
    with pytest.raises(Exception, match=r"(?i)too large|size"):
        d.process([big])
    assert d.writer.pending != {"pos": 2}
