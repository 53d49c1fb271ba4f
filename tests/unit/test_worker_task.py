"""Task lifecycle: retries with backoff, FAILED with a trace, pause/resume, restarts.

Engines are fakes here (``FakeEngine``): the supervisor's job is to react to how an engine ends,
which does not need a database or Kafka. The herder and REST tests import these fakes too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from cdc.errors import FatalError, RetriableError
from cdc.metrics import TaskMetrics
from worker.task import RetryPolicy, TaskRunner, TaskState


def wait_for(pred: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


class FakeEngine:
    """Runs until stopped, or fails at once with ``error``."""

    def __init__(self, name: str = "c", error: BaseException | None = None) -> None:
        self.metrics = TaskMetrics(plugin="memory", server="srv", connector=name)
        self.state = "CREATED"
        self.error = error
        self.stopped = threading.Event()
        self.started = threading.Event()

    def run(self) -> None:
        self.state = "STREAMING"
        self.started.set()
        if self.error is not None:
            raise self.error
        self.stopped.wait(30)
        self.state = "STOPPED"

    def stop(self) -> None:
        self.stopped.set()


class Script:
    """An engine factory: engines failing with ``errors`` in turn, then healthy ones."""

    def __init__(self, *errors: BaseException | None, name: str = "c") -> None:
        self.errors = list(errors)
        self.engines: list[FakeEngine] = []
        self.name = name

    def __call__(self, *args: Any) -> FakeEngine:
        engine = FakeEngine(self.name, self.errors.pop(0) if self.errors else None)
        self.engines.append(engine)
        return engine

    def running(self) -> FakeEngine | None:
        last = self.engines[-1] if self.engines else None
        if last is None or last.error or last.stopped.is_set() or not last.started.is_set():
            return None
        return last


FAST = RetryPolicy(max_retries=-1, initial_delay_s=0.01, max_delay_s=0.05)


def runner(script: Script, policy: RetryPolicy = FAST, **kw: Any) -> TaskRunner:
    return TaskRunner("c", 0, script, policy, worker_id="w:1", **kw)


@pytest.fixture
def cleanup() -> Any:
    runners: list[TaskRunner] = []
    yield runners.append
    for r in runners:
        r.shutdown()
        assert r.join(5)


def test_backoff_doubles_up_to_the_maximum() -> None:
    p = RetryPolicy(max_retries=3, initial_delay_s=0.3, max_delay_s=1.0)
    assert [p.delay(n) for n in (1, 2, 3, 4)] == [0.3, 0.6, 1.0, 1.0]
    assert p.allows(3) and not p.allows(4)
    assert RetryPolicy(max_retries=-1).allows(10_000)
    assert not RetryPolicy(max_retries=0).allows(1)


def test_retriable_errors_restart_the_engine_until_it_runs(cleanup: Any) -> None:
    script = Script(RetriableError("connection lost"), RetriableError("again"))
    r = runner(script)
    cleanup(r)
    assert r.state is TaskState.UNASSIGNED
    r.start()
    wait_for(lambda: script.running() is not None, what="a healthy engine")
    assert len(script.engines) == 3
    assert r.state is TaskState.RUNNING
    assert r.restarts["retriable"] == 2
    assert "trace" not in r.status()


def test_retries_exhausted_fail_the_task_with_the_trace(cleanup: Any) -> None:
    policy = RetryPolicy(max_retries=2, initial_delay_s=0.01, max_delay_s=0.01)
    script = Script(*(RetriableError(f"lost {i}") for i in range(5)))
    r = runner(script, policy)
    cleanup(r)
    r.start()
    wait_for(lambda: r.state is TaskState.FAILED, what="FAILED")
    assert len(script.engines) == 3  # the first run and two retries
    status = r.status()
    assert status["state"] == "FAILED" and status["worker_id"] == "w:1"
    assert "retries exhausted (errors.max.retries=2)" in status["trace"]
    assert "RetriableError: lost 2" in status["trace"]


def test_a_fatal_error_fails_at_once_and_restart_recovers(cleanup: Any) -> None:
    script = Script(FatalError("slot was invalidated"))
    r = runner(script)
    cleanup(r)
    r.start()
    wait_for(lambda: r.failed, what="FAILED")
    assert len(script.engines) == 1
    assert "FatalError: slot was invalidated" in r.status()["trace"]
    assert "Traceback" in r.status()["trace"]
    r.restart()
    wait_for(lambda: script.running() is not None, what="restarted engine")
    assert r.state is TaskState.RUNNING and "trace" not in r.status()
    assert r.restarts["requested"] == 1


def test_an_engine_that_cannot_be_built_fails_the_task(cleanup: Any) -> None:
    def broken() -> FakeEngine:
        raise ValueError("bad config")

    r = TaskRunner("c", 0, broken, FAST, worker_id="w:1")
    cleanup(r)
    r.start()
    wait_for(lambda: r.failed, what="FAILED")
    assert "ValueError: bad config" in r.status()["trace"]


def test_pause_stops_the_engine_and_resume_starts_a_new_one(cleanup: Any) -> None:
    script = Script()
    r = runner(script)
    cleanup(r)
    r.start()
    wait_for(lambda: script.running() is not None, what="engine")
    first = script.engines[0]
    r.pause()
    wait_for(lambda: r.state is TaskState.PAUSED, what="PAUSED")
    assert first.stopped.is_set(), "pause must stop the engine (offsets committed, no output)"
    assert r.phase is None
    r.resume()
    wait_for(lambda: len(script.engines) == 2 and script.running() is not None, what="resume")
    assert r.state is TaskState.RUNNING and r.phase == "STREAMING"


def test_a_task_created_paused_runs_nothing_until_resumed(cleanup: Any) -> None:
    script = Script()
    r = runner(script, paused=True)
    cleanup(r)
    r.start()
    wait_for(lambda: r.state is TaskState.PAUSED, what="PAUSED")
    time.sleep(0.05)
    assert script.engines == []
    r.restart()  # a paused task restarts into PAUSED
    wait_for(lambda: r.state is TaskState.PAUSED, what="PAUSED after restart")
    assert script.engines == []
    r.resume()
    wait_for(lambda: script.running() is not None, what="engine")


def test_a_retry_wait_is_cut_short_by_pause(cleanup: Any) -> None:
    slow = RetryPolicy(max_retries=-1, initial_delay_s=30, max_delay_s=30)
    script = Script(RetriableError("down"))
    r = runner(script, slow)
    cleanup(r)
    r.start()
    wait_for(lambda: r.state is TaskState.RESTARTING, what="RESTARTING")
    assert "RetriableError: down" in r.status()["trace"]
    r.pause()
    wait_for(lambda: r.state is TaskState.PAUSED, timeout=2, what="PAUSED")


def test_shutdown_joins_promptly_and_stops_the_engine() -> None:
    script = Script()
    r = runner(script)
    r.start()
    wait_for(lambda: script.running() is not None, what="engine")
    t0 = time.monotonic()
    r.shutdown()
    assert r.join(5)
    assert time.monotonic() - t0 < 2
    assert script.engines[0].stopped.is_set()


def test_a_source_that_finishes_by_itself_leaves_the_task_idle(cleanup: Any) -> None:
    """initial_only: the engine returns on its own; the task stays RUNNING, not restarted."""

    class Finishing(FakeEngine):
        def run(self) -> None:
            self.started.set()

    built: list[Finishing] = []

    def factory() -> Finishing:
        built.append(Finishing())
        return built[-1]

    r = TaskRunner("c", 0, factory, FAST, worker_id="w:1")
    cleanup(r)
    r.start()
    wait_for(lambda: bool(built) and built[0].started.is_set(), what="run")
    time.sleep(0.1)
    assert len(built) == 1 and r.state is TaskState.RUNNING
