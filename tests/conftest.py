"""Run-wide hooks shared by every test directory."""

from __future__ import annotations

import sys

import pytest


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
