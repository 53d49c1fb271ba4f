"""One backoff policy for everything in tidemark that tries again.

Three places retry, each with the settings users know from Debezium and Kafka Connect:

- the PostgreSQL streaming source reconnects to its slot (``slot.max.retries``,
  ``slot.retry.delay.ms``),
- the MySQL/MariaDB streaming source reconnects to the binlog (``connect.backoff.initial.delay.ms``,
  ``connect.backoff.max.delay.ms``, ``connect.max.attempts``, ``connect.keep.alive``),
- the worker restarts a task after a :class:`cdc.errors.RetriableError`
  (``errors.retry.delay.initial.ms``, ``errors.retry.delay.max.ms``, ``errors.max.retries``).

They differ only in their numbers, so the schedule is one value type, :class:`Backoff`, and the
loop that runs an operation, waits and gives up is one function, :func:`run_with_retries`. A wait
is always a ``stop.wait(delay)``, so stopping a connector never waits out a backoff; and the
random source is a parameter, so tests check schedules without sleeping or guessing.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Backoff:
    """Exponential backoff: retry ``n`` (1-based) waits ``initial_delay_s * multiplier**(n-1)``,
    capped at ``max_delay_s``; at most ``max_retries`` retries in a row (-1: no limit).

    ``jitter`` (0..1) takes up to that fraction off each delay at random, so many tasks that
    lost the same server do not all come back at the same instant. It is 0 where the settings
    promise exact delays (all of tidemark's today)."""

    initial_delay_s: float
    max_delay_s: float
    multiplier: float = 2.0
    max_retries: int = -1
    jitter: float = 0.0

    def __post_init__(self) -> None:
        problems = []
        if self.initial_delay_s < 0 or self.max_delay_s < 0:
            problems.append("delays must be >= 0")
        if self.multiplier < 1:
            problems.append("multiplier must be >= 1")
        if self.max_retries < -1:
            problems.append("max_retries must be >= -1 (-1: no limit)")
        if not 0 <= self.jitter <= 1:
            problems.append("jitter must be between 0 and 1")
        if problems:
            raise ValueError(f"invalid backoff {self!r}: {'; '.join(problems)}")

    def allows(self, retry: int) -> bool:
        """Whether retry number ``retry`` (1-based) may happen."""
        return self.max_retries < 0 or retry <= self.max_retries

    def delay(self, retry: int, *, rand: Callable[[], float] = random.random) -> float:
        """The wait before retry number ``retry`` (1-based)."""
        exponent = max(retry - 1, 0)
        try:
            grown = self.initial_delay_s * self.multiplier**exponent
        except OverflowError:  # a task retried for days: long past the cap
            grown = self.max_delay_s
        delay = min(grown, self.max_delay_s)
        if self.jitter:
            delay *= 1 - self.jitter * rand()
        return float(delay)

    def delays(self, *, rand: Callable[[], float] = random.random) -> Iterator[float]:
        """The whole schedule, one delay per allowed retry (endless without a limit)."""
        retry = 1
        while self.allows(retry):
            yield self.delay(retry, rand=rand)
            retry += 1


class Stop(Protocol):
    """What interrupts a wait: a :class:`threading.Event` (``wait`` returns True once set)."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class NeverStop:
    """A :class:`Stop` for callers without a stop event: waits are plain sleeps."""

    def is_set(self) -> bool:
        return False

    def wait(self, timeout: float | None = None) -> bool:
        time.sleep(timeout or 0)
        return False


@dataclass(frozen=True)
class Failure:
    """One failed attempt, as the hooks of :func:`run_with_retries` see it."""

    error: BaseException
    #: consecutive failures so far, this one included (1-based)
    attempt: int
    #: the wait before the next attempt; None when the policy allows no more
    delay: float | None
    backoff: Backoff


def _ignore(failure: Failure) -> None:
    return None


def _no_progress() -> bool:
    return False


def run_with_retries(
    operation: Callable[[int], T],
    *,
    schedule: Callable[[BaseException], Backoff | None],
    stop: Stop,
    on_failure: Callable[[Failure], None] = _ignore,
    give_up: Callable[[Failure], BaseException] | None = None,
    progressed: Callable[[], bool] = _no_progress,
    translate: Callable[[BaseException], BaseException] | None = None,
) -> T | None:
    """Run ``operation(tries_before)`` until it returns, waiting between attempts.

    ``schedule(error)`` says how to retry an error: the :class:`Backoff` to follow, or None
    for an error no retry can fix, which is raised at once (as ``translate(error)`` when
    given, e.g. :meth:`cdc.errors.ErrorTable.translate`). Consecutive failures share one
    count even when their schedules differ (a busy slot and a lost connection), and
    ``progressed()`` (asked after a failure) resets the count when the failed attempt got
    work done first, so a connection that works for hours is not failed by its 17th drop.
    ``on_failure`` sees every retriable failure (metrics, logging); when the count is
    exhausted ``give_up(failure)`` is raised from the error (the error itself without it).
    Returns the operation's result, or None once ``stop`` is set (a wait ends at once).
    """
    failures = 0
    tries = 0
    while not stop.is_set():
        try:
            return operation(tries)
        except Exception as exc:
            backoff = schedule(exc)
            if backoff is None:
                raised = exc if translate is None else translate(exc)
                if raised is exc:
                    raise
                raise raised from exc
            failures = 1 if progressed() else failures + 1
            delay = backoff.delay(failures) if backoff.allows(failures) else None
            failure = Failure(exc, failures, delay, backoff)
            on_failure(failure)
            if delay is None:
                if give_up is None:
                    raise
                raise give_up(failure) from exc
            if stop.wait(delay):
                return None
            tries += 1
    return None
