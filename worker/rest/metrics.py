"""Worker metrics next to the connectors' Debezium metrics on ``/metrics``.

Computed at scrape time from the herders' state (like ``cdc.metrics``), so nothing on the task
path pays for them. Every family carries a ``worker`` label (the ``host:port`` worker id).

- ``tidemark_worker_connectors{state}``, ``tidemark_worker_tasks{state}``: counts by state.
- ``tidemark_worker_task_state{connector,task,state}``: 1 for the task's current state, for
  alerts such as ``tidemark_worker_task_state{state="FAILED"} == 1``.
- ``tidemark_worker_task_restarts_total{connector,task,reason}``: ``retriable`` (automatic,
  after a retriable error) or ``requested`` (REST restart).
- ``tidemark_worker_offset_commit_latency_seconds{connector,task}``: mean time of one offset
  commit of the running engine (``tidemark_offset_commit_seconds_total`` over
  ``tidemark_offset_commits_total``).
- ``tidemark_worker_start_time_seconds``.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import REGISTRY, Collector

from worker.task import TaskState

if TYPE_CHECKING:
    from worker.herder import Herder

CONNECTOR_STATES = ("RUNNING", "PAUSED", "STOPPED", "FAILED")


class WorkerCollector(Collector):
    def __init__(self) -> None:
        self._herders: weakref.WeakSet[Herder] = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, herder: Herder) -> None:
        with self._lock:
            self._herders.add(herder)

    def remove(self, herder: Herder) -> None:
        with self._lock:
            self._herders.discard(herder)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            herders = list(self._herders)
        connectors = GaugeMetricFamily(
            "tidemark_worker_connectors", "Connectors by state", labels=["worker", "state"]
        )
        tasks = GaugeMetricFamily(
            "tidemark_worker_tasks", "Tasks by state", labels=["worker", "state"]
        )
        task_state = GaugeMetricFamily(
            "tidemark_worker_task_state",
            "1 for the current state of each task",
            labels=["worker", "connector", "task", "state"],
        )
        restarts = CounterMetricFamily(
            "tidemark_worker_task_restarts",
            "Task restarts: automatic after a retriable error, or requested through REST",
            labels=["worker", "connector", "task", "reason"],
        )
        latency = GaugeMetricFamily(
            "tidemark_worker_offset_commit_latency_seconds",
            "Mean duration of an offset commit of the running engine",
            labels=["worker", "connector", "task"],
        )
        started = GaugeMetricFamily(
            "tidemark_worker_start_time_seconds", "Worker start time", labels=["worker"]
        )
        for h in herders:
            w = h.worker_id
            started.add_metric([w], h.started_at)
            states = h.connector_states()
            for state in CONNECTOR_STATES:
                connectors.add_metric([w, state], states.count(state))
            counts = dict.fromkeys((str(s) for s in TaskState), 0)
            for r in h.runners():
                state = str(r.state)
                counts[state] += 1
                labels = [w, r.connector, str(r.task_id)]
                task_state.add_metric([*labels, state], 1)
                for reason, n in r.restarts.items():
                    restarts.add_metric([*labels, reason], n)
                m = r.metrics
                if m is not None and m.offset_commits:
                    latency.add_metric(labels, m.offset_commit_seconds / m.offset_commits)
            for state, n in counts.items():
                tasks.add_metric([w, state], n)
        yield from (connectors, tasks, task_state, restarts, latency, started)


COLLECTOR = WorkerCollector()
_registered = False
_reg_lock = threading.Lock()


def track(herder: Herder) -> None:
    """Export a herder's metrics on the process-wide registry (registered once)."""
    global _registered
    with _reg_lock:
        if not _registered:
            REGISTRY.register(COLLECTOR)
            _registered = True
    COLLECTOR.add(herder)


def untrack(herder: Herder) -> None:
    COLLECTOR.remove(herder)
