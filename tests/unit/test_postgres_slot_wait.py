"""Waiting for a replication slot another connection holds (connectors/postgres/setup.py):
``slot.max.retries`` checks, ``slot.retry.delay.ms`` apart, then a retriable error naming
the holder. The server is replaced by a scripted ``slot_info`` and the delay is 0."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from cdc.errors import RetriableError
from cdc.retry import NeverStop
from connectors.postgres import connection as pgconn
from connectors.postgres.setup import wait_for_inactive_slot


def slot(active: bool) -> pgconn.SlotInfo:
    return pgconn.SlotInfo(
        "s", "pgoutput", "db", active, 4242 if active else None, None, None, None
    )


def script(monkeypatch: pytest.MonkeyPatch, *states: bool) -> list[str]:
    """``slot_info`` answers ``states`` in turn (then the last one); returns the calls."""
    calls: list[str] = []
    answers = list(states)

    def fake(conn: Any, name: str) -> pgconn.SlotInfo:
        calls.append(name)
        return slot(answers.pop(0) if len(answers) > 1 else answers[0])

    monkeypatch.setattr(pgconn, "slot_info", fake)
    return calls


CFG = {"slot.name": "s", "slot.max.retries": 3, "slot.retry.delay.ms": 0}


def test_a_slot_freed_within_the_retries_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = script(monkeypatch, True, True, False)
    wait_for_inactive_slot(None, CFG, NeverStop())  # type: ignore[arg-type]
    assert calls == ["s", "s", "s"]


def test_a_slot_held_beyond_the_retries_fails_naming_the_holder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = script(monkeypatch, True)
    with pytest.raises(RetriableError, match=r"still in use .*pid 4242\) after 3 retries"):
        wait_for_inactive_slot(None, CFG, NeverStop())  # type: ignore[arg-type]
    assert len(calls) == 4  # the first check and three retries


def test_zero_retries_checks_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = script(monkeypatch, True)
    with pytest.raises(RetriableError, match="after 0 retries"):
        wait_for_inactive_slot(None, {**CFG, "slot.max.retries": 0}, NeverStop())  # type: ignore[arg-type]
    assert len(calls) == 1


def test_a_stop_ends_the_wait_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task stopped while its source waits for a busy slot: the wait ends with the stop
    (the pipeline's clean InterruptedError), not after slot.max.retries x slot.retry.delay.ms,
    so the stopped source cannot take the slot from the task started in its place."""
    calls = script(monkeypatch, True)
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    t0 = time.monotonic()
    with pytest.raises(InterruptedError, match="replication slot 's'"):
        wait_for_inactive_slot(None, {**CFG, "slot.retry.delay.ms": 30_000}, stop)  # type: ignore[arg-type]
    assert time.monotonic() - t0 < 5
    assert len(calls) == 1  # checked once, then waited until the stop
