"""The shared backoff policy and retry loop (cdc/retry.py), with a fake clock: no sleeping."""

from __future__ import annotations

import pytest

from cdc.errors import ConfigError, FatalError, RetriableError
from cdc.retry import Backoff, Failure, run_with_retries


class FakeStop:
    """A stop event whose waits return at once and are recorded; it is set after ``set_after``
    waits (or when ``set`` is called), as if the connector were stopped during that wait."""

    def __init__(self, set_after: int | None = None) -> None:
        self.waits: list[float] = []
        self.set_after = set_after
        self.stopped = False

    def is_set(self) -> bool:
        return self.stopped

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.waits.append(timeout)
        if self.set_after is not None and len(self.waits) >= self.set_after:
            self.stopped = True
        return self.stopped


class Flaky:
    """An operation that raises ``errors`` in turn, then returns "done"; records its tries."""

    def __init__(self, *errors: BaseException) -> None:
        self.pending = list(errors)
        self.tries: list[int] = []

    def __call__(self, tries_before: int) -> str:
        self.tries.append(tries_before)
        if self.pending:
            raise self.pending.pop(0)
        return "done"


def test_the_schedule_doubles_from_the_initial_delay_up_to_the_cap() -> None:
    b = Backoff(initial_delay_s=1.0, max_delay_s=10.0, max_retries=6)
    assert list(b.delays()) == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert b.allows(6) and not b.allows(7)


def test_other_multipliers_and_an_initial_delay_above_the_cap() -> None:
    triple = Backoff(initial_delay_s=0.5, max_delay_s=5, multiplier=3, max_retries=4)
    assert list(triple.delays()) == [0.5, 1.5, 4.5, 5.0]
    assert list(Backoff(initial_delay_s=90, max_delay_s=60, max_retries=2).delays()) == [60, 60]
    fixed = Backoff(initial_delay_s=2, max_delay_s=9, multiplier=1, max_retries=3)
    assert list(fixed.delays()) == [2, 2, 2]


def test_no_limit_allows_any_retry_and_a_very_late_retry_stays_at_the_cap() -> None:
    b = Backoff(initial_delay_s=0.3, max_delay_s=10.0)
    assert b.allows(10_000_000)
    assert b.delay(5_000) == 10.0  # 2.0**4999 overflows a float: the cap, not an error
    assert not Backoff(initial_delay_s=1, max_delay_s=1, max_retries=0).allows(1)
    assert list(Backoff(initial_delay_s=1, max_delay_s=1, max_retries=0).delays()) == []


def test_jitter_takes_up_to_its_fraction_off_each_delay() -> None:
    b = Backoff(initial_delay_s=4.0, max_delay_s=4.0, jitter=0.5)
    assert b.delay(1, rand=lambda: 0.0) == 4.0
    assert b.delay(1, rand=lambda: 1.0) == 2.0
    assert b.delay(3, rand=lambda: 0.25) == 3.5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"initial_delay_s": -1, "max_delay_s": 1}, "delays must be >= 0"),
        ({"initial_delay_s": 1, "max_delay_s": 1, "multiplier": 0.5}, "multiplier must be >= 1"),
        ({"initial_delay_s": 1, "max_delay_s": 1, "max_retries": -2}, "max_retries must be"),
        ({"initial_delay_s": 1, "max_delay_s": 1, "jitter": 2}, "jitter must be between"),
    ],
)
def test_a_nonsensical_backoff_is_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Backoff(**kwargs)  # type: ignore[arg-type]


LOST = Backoff(initial_delay_s=1.0, max_delay_s=8.0, max_retries=5)


def retry_all(exc: BaseException) -> Backoff | None:
    return LOST if isinstance(exc, RetriableError) else None


def test_retriable_failures_are_waited_out_on_the_schedule_until_the_operation_succeeds() -> None:
    op = Flaky(*(RetriableError(f"lost {i}") for i in range(4)))
    stop = FakeStop()
    seen: list[Failure] = []
    result = run_with_retries(
        op,
        schedule=retry_all,
        stop=stop,
        on_failure=seen.append,
    )
    assert result == "done"
    assert op.tries == [0, 1, 2, 3, 4]
    assert stop.waits == [1.0, 2.0, 4.0, 8.0]
    assert [(f.attempt, f.delay, str(f.error)) for f in seen] == [
        (1, 1.0, "lost 0"),
        (2, 2.0, "lost 1"),
        (3, 4.0, "lost 2"),
        (4, 8.0, "lost 3"),
    ]


def test_exhausted_retries_raise_the_give_up_error_from_the_last_failure() -> None:
    op = Flaky(*(RetriableError(f"lost {i}") for i in range(10)))
    stop = FakeStop()
    seen: list[Failure] = []
    with pytest.raises(FatalError, match="gave up after 6") as raised:
        run_with_retries(
            op,
            schedule=retry_all,
            stop=stop,
            on_failure=seen.append,
            give_up=lambda f: FatalError(f"gave up after {f.attempt}"),
        )
    assert str(raised.value.__cause__) == "lost 5"
    assert len(stop.waits) == 5  # max_retries=5: five waits, the sixth failure gives up
    assert seen[-1].attempt == 6 and seen[-1].delay is None


def test_without_give_up_the_last_error_itself_is_raised() -> None:
    op = Flaky(RetriableError("a"), RetriableError("b"))
    with pytest.raises(RetriableError, match=r"^b$"):
        run_with_retries(
            op,
            schedule=lambda exc: Backoff(initial_delay_s=1, max_delay_s=1, max_retries=1),
            stop=FakeStop(),
        )


def test_an_error_without_a_schedule_is_raised_at_once_or_translated() -> None:
    op = Flaky(ValueError("bug"))
    stop = FakeStop()
    with pytest.raises(ValueError, match="bug"):
        run_with_retries(op, schedule=retry_all, stop=stop)
    assert op.tries == [0] and stop.waits == []

    op = Flaky(PermissionError("denied"))
    with pytest.raises(ConfigError, match=r"database\.user") as raised:
        run_with_retries(
            op,
            schedule=retry_all,
            stop=stop,
            translate=lambda exc: ConfigError([("database.user", str(exc))]),
        )
    assert isinstance(raised.value.__cause__, PermissionError)


def test_a_stop_during_a_wait_ends_the_loop_without_another_attempt() -> None:
    op = Flaky(*(RetriableError("down") for _ in range(10)))
    stop = FakeStop(set_after=2)
    assert run_with_retries(op, schedule=retry_all, stop=stop) is None
    assert op.tries == [0, 1]
    assert stop.waits == [1.0, 2.0]


def test_a_stopped_loop_runs_nothing() -> None:
    op = Flaky()
    stop = FakeStop()
    stop.stopped = True
    assert run_with_retries(op, schedule=retry_all, stop=stop) is None
    assert op.tries == []


def test_progress_before_a_failure_resets_the_count() -> None:
    op = Flaky(*(RetriableError(f"lost {i}") for i in range(5)))
    progress = iter([False, False, True, False, False])
    stop = FakeStop()
    run_with_retries(
        op,
        schedule=retry_all,
        stop=stop,
        progressed=lambda: next(progress),
    )
    assert stop.waits == [1.0, 2.0, 1.0, 2.0, 4.0]


def test_errors_with_different_schedules_share_one_count() -> None:
    busy = Backoff(initial_delay_s=10.0, max_delay_s=60.0, max_retries=5)

    class Busy(RetriableError):
        pass

    op = Flaky(RetriableError("lost"), Busy("busy"), Busy("busy"), RetriableError("lost"))
    stop = FakeStop()
    run_with_retries(
        op,
        schedule=lambda exc: busy if isinstance(exc, Busy) else LOST,
        stop=stop,
    )
    assert stop.waits == [1.0, 20.0, 40.0, 8.0]
