"""``KafkaSink.release``: the producer's client is freed at the end of a task's stop, also when
Kafka is down and records are still outstanding. A real librdkafka producer pointed at a port
nobody listens on: nothing is mocked, and no broker is needed to see the client go away."""

from __future__ import annotations

import time

import pytest

from cdc.sinks.kafka import KafkaSink


def test_release_with_records_kafka_never_acknowledged_returns_at_once() -> None:
    sink = KafkaSink({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    sink.send("t", b"k", b"v", None)
    assert sink.close(0.2) == 1  # what the engine reports as "will be re-sent"
    t0 = time.monotonic()
    sink.release()
    # Producer.close() alone waits for the record up to message.timeout.ms (300 s)
    assert time.monotonic() - t0 < 10
    assert sink.delivery_lag()[0] == 0  # a status request after the stop still works
    sink.release()  # a second stop path is harmless
    with pytest.raises(RuntimeError, match="closed"):
        sink.send("t", b"k", b"v", None)
