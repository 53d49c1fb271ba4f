"""Waiting for a replication slot another connection holds (connectors/postgres/setup.py):
``slot.max.retries`` checks, ``slot.retry.delay.ms`` apart, then a retriable error naming
the holder. The server is replaced by a scripted ``slot_info`` and the delay is 0."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.errors import RetriableError
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
    wait_for_inactive_slot(None, CFG)  # type: ignore[arg-type]
    assert calls == ["s", "s", "s"]


def test_a_slot_held_beyond_the_retries_fails_naming_the_holder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = script(monkeypatch, True)
    with pytest.raises(RetriableError, match=r"still in use .*pid 4242\) after 3 retries"):
        wait_for_inactive_slot(None, CFG)  # type: ignore[arg-type]
    assert len(calls) == 4  # the first check and three retries


def test_zero_retries_checks_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = script(monkeypatch, True)
    with pytest.raises(RetriableError, match="after 0 retries"):
        wait_for_inactive_slot(None, {**CFG, "slot.max.retries": 0})  # type: ignore[arg-type]
    assert len(calls) == 1
