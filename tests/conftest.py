"""Run-wide hooks shared by every test directory.

**Two lanes.** ``scripts/test.sh`` runs the suite in two pytest-xdist workers
(``-n 2 --dist loadgroup``): most integration tests wait on services (a round trip to Kafka,
a poll interval, a server's restart) while the Spark apply tests keep the CPU busy, so
running one beside the other takes the wall time of the longer lane, not of both. Each test
goes to a lane (an ``xdist_group``):

- ``jvm``: every test that uses Spark (one SparkSession per worker, so they share one
  worker), the Cassandra failure tests (they stop the shared node the Cassandra apply test
  reads), the fault scenarios (private services, restarts and kills) and the tests that run
  Debezium Server, to even out the lanes;
- ``main``: everything else, in collection order.

Services still start once per run: the first worker that needs one starts it under a lock
and records it, and the controller stops what the run started once both lanes are done
(``tests/integration/conftest.py:_run``). Without ``-n`` (a plain ``pytest``) nothing changes.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

#: set by the controller of a parallel run: the file listing the services the run started
STARTED_SERVICES = "TIDEMARK_TEST_STARTED_SERVICES"

#: modules of the ``jvm`` lane besides the Spark tests (see the module docstring)
_JVM_MODULES = frozenset(
    {
        "test_cassandra_failures.py",
        "test_bench_compare_smoke.py",
        "test_bench_compare_mariadb_smoke.py",
        "test_kafka_smt_parity.py",
    }
)


def _parallel(config: pytest.Config) -> bool:
    return str(getattr(config.option, "dist", "no")) != "no"


def _lane(item: pytest.Item) -> str:
    uses_spark = "spark" in item.keywords or "spark" in getattr(item, "fixturenames", ())
    if uses_spark or item.path.name in _JVM_MODULES or item.path.parent.name == "faults":
        return "jvm"
    return "main"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test's lane, before xdist reads the groups (its own hook runs after this one)."""
    if not _parallel(config):
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_lane(item)))


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
