"""Run-wide hooks shared by every test directory.

**Two lanes.** ``scripts/test.sh`` runs the suite in two pytest-xdist workers (``-n 2``):
most integration tests wait on services (a round trip to Kafka, a poll interval, a server's
restart) while the Spark apply tests keep the CPU busy, so running one beside the other
takes the wall time of the longer lane, not of both. Each test module belongs to a lane
(:func:`lane`), and the scheduler (:func:`pytest_xdist_make_scheduler`) gives each lane to
one worker, which runs its modules in collection order:

- ``jvm``: the Spark apply tests (one SparkSession per worker, so they share one), the
  Cassandra failure tests (they stop the shared node the Cassandra apply test reads), the
  fault scenarios (private services, restarts and kills) and the tests that run Debezium
  Server, to even out the lanes;
- ``main``: everything else.

Services still start once per run: the first worker that needs one starts it under a lock
and records it, and the controller stops what the run started once both lanes are done
(``tests/integration/conftest.py:_run``). Without ``-n`` (a plain ``pytest``) nothing changes.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

#: set by the controller of a parallel run: the file listing the services the run started
STARTED_SERVICES = "TIDEMARK_TEST_STARTED_SERVICES"

#: modules of the ``jvm`` lane besides ``test_apply_*`` and tests/faults
_JVM_MODULES = frozenset(
    {
        "test_verify_delta.py",
        "test_cassandra_failures.py",
        "test_bench_compare_smoke.py",
        "test_bench_compare_mariadb_smoke.py",
        "test_kafka_smt_parity.py",
    }
)


def lane(path: str) -> str:
    """The lane of a test module, from its path (all the scheduler knows of a test)."""
    parent, _, name = path.rpartition("/")
    if name.startswith("test_apply_") or name in _JVM_MODULES or parent.endswith("faults"):
        return "jvm"
    return "main"


def _parallel(config: pytest.Config) -> bool:
    """A run split over xdist workers (a worker's own ``dist`` option reads ``no``)."""
    return hasattr(config, "workerinput") or str(getattr(config.option, "dist", "no")) != "no"


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Each lane to one worker (see the module docstring)."""
    from xdist.scheduler import LoadScopeScheduling

    class Lanes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return lane(nodeid.split("::", 1)[0])

    return Lanes(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses Spark outside the ``jvm`` lane would start a second SparkSession
    beside the first: named here, so the lane rule is kept up to date."""
    if not _parallel(config):
        return
    strays = sorted(
        {
            item.nodeid.split("::", 1)[0]
            for item in items
            if "spark" in getattr(item, "fixturenames", ())
            and lane(item.nodeid.split("::", 1)[0]) != "jvm"
        }
    )
    if strays:
        raise pytest.UsageError(
            f"{', '.join(strays)} use Spark: add them to the jvm lane (tests/conftest.py)"
        )


def pytest_configure(config: pytest.Config) -> None:
    """The controller of a parallel run names the file its workers record started services
    in (the workers inherit the environment)."""
    if _parallel(config) and not hasattr(config, "workerinput"):
        fd, path = tempfile.mkstemp(prefix="tidemark-services-")
        os.close(fd)
        os.environ[STARTED_SERVICES] = path


def pytest_unconfigure(config: pytest.Config) -> None:
    """The controller stops the services the run started, once every worker is done."""
    path = os.environ.get(STARTED_SERVICES)
    if not path or hasattr(config, "workerinput") or not _parallel(config):
        return
    names = [n for n in Path(path).read_text().split() if n] if Path(path).exists() else []
    if names and not os.environ.get("TIDEMARK_KEEP_STACK"):
        from worker.dev import Stack

        stack = Stack()
        for name in reversed(names):
            stack[name].stop()
    Path(path).unlink(missing_ok=True)
    Path(path + ".lock").unlink(missing_ok=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the run's one SparkSession and its Py4J gateway: left to interpreter exit, the
    gateway's sockets were reported as unclosed (ResourceWarning) after every run."""
    if "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        context.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    gateway.shutdown()
    proc = getattr(gateway, "proc", None)
    if proc is not None:  # the JVM exits when its stdin closes
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=30)
    SparkContext._gateway = None
    SparkContext._jvm = None
