"""``KafkaSink.release``: the producer's client is freed at the end of a task's stop, also when
Kafka is down and records are still outstanding; and librdkafka's log lines go through Python's
logging. A real librdkafka producer pointed at a port nobody listens on: nothing is mocked,
and no broker is needed to see the client go away or its lines arrive."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import KafkaException

from cdc.kafka_client_log import CLIENT_LOG, REPEATS, LoggedAdminClient, RepeatFilter
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


def test_librdkafka_lines_reach_python_logging_and_repeats_are_held_back(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A broker that is down makes librdkafka log each reconnect attempt. Those lines used to
    go straight to stderr, outside the worker's format and scrubbing."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    REPEATS.reset()  # an earlier test's lines must not hold these back
    CLIENT_LOG.addHandler(handler)
    try:
        sink = KafkaSink({"bootstrap.servers": "127.0.0.1:1"})
        sink.send("t", b"k", b"v", None)
        sink.close(2.0)  # serves the log queue while librdkafka retries, ~every 100 ms
        sink.release()
    finally:
        CLIENT_LOG.removeHandler(handler)
    failures = [r for r in records if "Connection refused" in r.getMessage()]
    assert failures and failures[0].levelno == logging.ERROR
    assert len(failures) == 1  # the others of the 2 s are held back for the window
    assert "%3|" not in capfd.readouterr().err


def test_a_held_back_line_is_counted_in_the_next_one_shown() -> None:
    repeat = RepeatFilter(window_s=0.0)
    first = logging.LogRecord("x", logging.ERROR, "", 0, "FAIL after %dms", (3,), None)
    assert repeat.filter(first) and first.getMessage() == "FAIL after 3ms"
    held = RepeatFilter(window_s=3600)
    assert held.filter(logging.LogRecord("x", 40, "", 0, "FAIL after 1ms", None, None))
    assert not held.filter(logging.LogRecord("x", 40, "", 0, "FAIL after 2ms", None, None))
    assert held.filter(logging.LogRecord("x", 40, "", 0, "other", None, None))
    held.window_s = 0.0
    shown = logging.LogRecord("x", 40, "", 0, "FAIL after 9ms", None, None)
    assert held.filter(shown)
    assert shown.getMessage() == "FAIL after 9ms (1 more like it in the last 0 s not shown)"


def test_an_admin_clients_lines_are_served_after_each_call() -> None:
    """Nothing polls an admin client, so its lines waited in librdkafka's queue (in memory,
    for as long as a broker stayed down); each call now serves them."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    REPEATS.reset()
    CLIENT_LOG.addHandler(handler)
    try:
        admin = LoggedAdminClient({"bootstrap.servers": "127.0.0.1:1"})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=1)
    finally:
        CLIENT_LOG.removeHandler(handler)
    assert any("Connection refused" in r.getMessage() for r in records)
