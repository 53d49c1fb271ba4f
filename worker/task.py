"""One connector task: an Engine run in its own thread, supervised.

The supervisor owns the task's lifecycle (Kafka Connect's task states):

- ``UNASSIGNED``: created, not started yet.
- ``RUNNING``: an engine is running (snapshot or streaming).
- ``PAUSED``: no engine. Pause *stops* the engine (it drains its queue, flushes the producer
  and commits offsets) and resume starts a new one from those offsets. Kafka Connect keeps a
  paused task's resources; an engine cannot be frozen mid-flight without the database
  connection timing out or the source buffering unboundedly, and a stop/start is what
  guarantees that a paused connector produces nothing.
- ``RESTARTING``: a restart was requested, or a retriable error is being retried (the failure is
  shown as ``trace`` meanwhile, so operators see why).
- ``FAILED``: a non-retriable error, or retries exhausted; ``trace`` holds the traceback. The
  task waits for ``restart``.

Retriable errors (:class:`cdc.errors.RetriableError`) restart the engine with exponential
backoff (:class:`cdc.retry.Backoff`, shared with the connectors' reconnects),
``errors.retry.delay.initial.ms`` doubling up to ``errors.retry.delay.max.ms``, at most
``errors.max.retries`` times in a row (-1: no limit, Debezium's default). A run that lasted
``reset_after_s`` counts as healthy and resets the count. Everything else, ``FatalError`` and
``ConfigError`` included, goes to FAILED, as Kafka Connect does with any exception that is not
its ``RetriableException``.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from cdc.errors import RetriableError
from cdc.metrics import TaskMetrics
from cdc.retry import Backoff
from worker import redaction

log = logging.getLogger("tidemark.worker.task")


class TaskState(StrEnum):
    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"


class EngineLike(Protocol):
    """What the supervisor needs of :class:`cdc.engine.Engine` (tests pass fakes)."""

    metrics: TaskMetrics
    state: str

    def run(self) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True, kw_only=True)
class RetryPolicy(Backoff):
    """The shared :class:`cdc.retry.Backoff` with the worker's defaults (``errors.*``), plus
    how long a run must last to count as healthy and reset the retry count."""

    max_retries: int = -1
    initial_delay_s: float = 0.3
    max_delay_s: float = 10.0
    reset_after_s: float = 60.0


def task_thread_name(connector: str, task: int) -> str:
    return f"tidemark-task-{connector}-{task}"


class TaskRunner:
    """Runs and supervises one task. All public methods are thread-safe and non-blocking
    except :meth:`join`."""

    def __init__(
        self,
        connector: str,
        task_id: int,
        factory: Callable[[], EngineLike],
        policy: RetryPolicy,
        *,
        worker_id: str,
        paused: bool = False,
        redact: Callable[[str], str] = lambda s: s,
    ) -> None:
        self.connector = connector
        self.task_id = task_id
        self.worker_id = worker_id
        self._factory = factory
        self.policy = policy
        self._redact = redact
        self._cond = threading.Condition()
        self._paused = paused
        self._restart = False
        self._shutdown = False
        self._parked: str | None = None  # "failed" | "done": wait for restart/resume
        self._engine: EngineLike | None = None
        self.state = TaskState.UNASSIGNED
        self.trace: str | None = None
        self.metrics: TaskMetrics | None = None
        self.restarts: dict[str, int] = {"retriable": 0, "requested": 0}
        self.runs = 0
        self.thread = threading.Thread(
            target=self._main, name=task_thread_name(connector, task_id), daemon=True
        )

    # -- control ------------------------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def pause(self) -> None:
        with self._cond:
            self._paused = True
            self._stop_engine()
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            if self._parked == "done":
                self._parked = None
            self._cond.notify_all()

    def restart(self) -> None:
        """Kafka Connect's task restart: a new engine, from the committed offsets. A paused
        task is restarted into PAUSED (it only loses its failure)."""
        with self._cond:
            self._restart = True
            self.restarts["requested"] += 1
            self.state = TaskState.RESTARTING
            self._stop_engine()
            self._cond.notify_all()

    def shutdown(self) -> None:
        """Ask the task to stop for good; :meth:`join` waits for it."""
        with self._cond:
            self._shutdown = True
            self._stop_engine()
            self._cond.notify_all()

    def join(self, timeout: float | None = None) -> bool:
        """True when the task thread ended (its offsets are committed)."""
        if self.thread.ident is None:
            return True
        self.thread.join(timeout)
        return not self.thread.is_alive()

    @property
    def phase(self) -> str | None:
        """The running engine's phase (SNAPSHOT, STREAMING), None without an engine."""
        engine = self._engine
        return engine.state if engine is not None else None

    @property
    def failed(self) -> bool:
        return self.state is TaskState.FAILED

    def status(self) -> dict[str, Any]:
        """Kafka Connect's ``TaskState`` entity."""
        out: dict[str, Any] = {
            "id": self.task_id,
            "state": str(self.state),
            "worker_id": self.worker_id,
        }
        if self.trace and self.state in (TaskState.FAILED, TaskState.RESTARTING):
            out["trace"] = self.trace
        elif self.state is TaskState.RUNNING and self._engine is not None:
            # Degraded but running (Kafka not acknowledging, a full re-snapshot): the state
            # stays RUNNING, as Kafka Connect's would, and the reason goes in ``trace``.
            problems = self._engine.metrics.problems()
            if problems:
                out["trace"] = "\n".join(problems)
        return out

    def _stop_engine(self) -> None:
        if self._engine is not None:
            try:
                self._engine.stop()
            except Exception:
                log.warning(
                    "%s-%d: stopping the engine failed", self.connector, self.task_id, exc_info=True
                )

    # -- the supervisor thread ----------------------------------------------------------------
    def _wait_for_work(self) -> bool:
        """Block until the task should run an engine; False when it should end."""
        with self._cond:
            while True:
                if self._shutdown:
                    return False
                if self._restart:
                    self._restart = False
                    self._parked = None
                    self.trace = None
                    if self._paused:
                        self.state = TaskState.PAUSED
                        continue
                    return True
                if self._parked == "failed":
                    self.state = TaskState.FAILED
                elif self._paused:
                    self.state = TaskState.PAUSED
                elif self._parked is None:
                    return True
                self._cond.wait()

    def _main(self) -> None:
        attempt = 0
        while self._wait_for_work():
            with self._cond:
                self.state = TaskState.RUNNING
                self.trace = None if attempt == 0 else self.trace
            started = time.monotonic()
            error = self._run_once()
            with self._cond:
                interrupted = self._shutdown or self._paused or self._restart
            if interrupted:
                if error is not None:
                    log.info(
                        "%s-%d: engine ended while stopping: %s",
                        self.connector,
                        self.task_id,
                        error,
                    )
                attempt = 0
                continue
            if error is None:
                log.info(
                    "%s-%d: the source finished (nothing more to capture)",
                    self.connector,
                    self.task_id,
                )
                with self._cond:
                    self._parked = "done"
                attempt = 0
                continue
            if time.monotonic() - started >= self.policy.reset_after_s:
                attempt = 0
            attempt += 1
            trace = redaction.scrub(
                self._redact, "".join(traceback.format_exception(error)).rstrip()
            )
            if isinstance(error, RetriableError) and self.policy.allows(attempt):
                delay = self.policy.delay(attempt)
                log.warning(
                    "%s-%d: retriable error (retry %d%s in %.1f s): %s",
                    self.connector,
                    self.task_id,
                    attempt,
                    f"/{self.policy.max_retries}" if self.policy.max_retries >= 0 else "",
                    delay,
                    self._redact(str(error)),
                )
                with self._cond:
                    self.state = TaskState.RESTARTING
                    self.trace = trace
                    self.restarts["retriable"] += 1
                    self._cond.wait_for(
                        lambda: self._shutdown or self._paused or self._restart, timeout=delay
                    )
                continue
            if isinstance(error, RetriableError):
                trace = f"retries exhausted (errors.max.retries={self.policy.max_retries})\n{trace}"
            log.error(
                "%s-%d: task failed: %s", self.connector, self.task_id, self._redact(str(error))
            )
            with self._cond:
                self.state = TaskState.FAILED
                self.trace = trace
                self._parked = "failed"
            attempt = 0

    def _run_once(self) -> BaseException | None:
        try:
            engine = self._factory()
        except BaseException as exc:
            return exc
        with self._cond:
            self._engine = engine
            self.metrics = engine.metrics
            self.runs += 1
            if self._shutdown or self._paused or self._restart:
                # Asked to stop while it was being built: never started, nothing to commit.
                self._engine = None
                return None
        try:
            engine.run()
            return None
        except BaseException as exc:
            return exc
        finally:
            with self._cond:
                self._engine = None
