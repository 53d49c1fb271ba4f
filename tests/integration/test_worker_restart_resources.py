"""A long-running worker restarts tasks: over REST, after a retriable failure, on a config
update. Each restart used to leave the stopped task's Kafka producer behind (librdkafka's three
threads and its sockets and pipes, freed only if Python ever collected it), and the garbage of
the stopped engine was frozen out of the collector's reach when the next one started. This
restarts one PostgreSQL connector of a `tidemark run` process over and over, and checks the
process's threads and descriptors (from /proc) stay where they were after the first restart,
and that it still streams."""

from __future__ import annotations

import collections
import os
from pathlib import Path

import pytest

from tests.integration.pg_harness import read_topic
from tests.integration.test_worker_rest import Setup, WorkerProcess, ops, setup, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]
__all__ = ["setup"]  # the module-scoped fixture: its own database, role, slot and topic

RESTARTS = 6


def resources(pid: int) -> tuple[collections.Counter[str], int]:
    """The process's threads by name (librdkafka's are ``rdk:*``) and its open descriptors."""
    tasks = Path(f"/proc/{pid}/task")
    names = collections.Counter((tasks / t / "comm").read_text().strip() for t in os.listdir(tasks))
    return names, len(os.listdir(f"/proc/{pid}/fd"))


def restart(w: WorkerProcess) -> None:
    code, doc = w.call("POST", "/connectors/inv/restart?includeTasks=true")
    assert code in (200, 202, 204), doc
    wait_for(lambda: w.task_state("inv") == "RUNNING" and w.streaming("inv"), 60, "streaming")


def test_restarting_a_task_leaves_no_kafka_client_or_descriptor_behind(setup: Setup) -> None:
    s = setup
    w = WorkerProcess(s, s.yaml(), 1)
    try:
        w.wait_streaming("inv")
        restart(w)  # the first restart: whatever a restart keeps for good exists after it
        threads, fds = resources(w.proc.pid)
        for n in range(RESTARTS):
            s.sql(f"INSERT INTO customers VALUES ({200 + n}, 'Restart {n}', 'r@x.org')")
            restart(w)
        after, fds_after = resources(w.proc.pid)
        grown = {name: after[name] - threads[name] for name in after if after[name] > threads[name]}
        assert not grown, f"threads grew over {RESTARTS} restarts: {grown} (was {threads})"
        # one slack for a descriptor a request or the status thread holds at that moment
        assert fds_after <= fds + 1, f"descriptors {fds} -> {fds_after}"
        wait_for(
            lambda: all(
                ("c", 200 + n) in ops(read_topic(s.kafka, s.topic, settle=0.3))
                for n in range(RESTARTS)
            ),
            30,
            "the inserts made between restarts",
        )
    finally:
        w.kill()
