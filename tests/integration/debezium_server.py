"""The real Debezium Server for the tests that compare against it (bench/compare/debezium.py
resolves it from Maven Central). Never skipped: if it or its Java runtime cannot be resolved,
the test fails and says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.compare import debezium
from bench.compare.common import BenchError


def debezium_server() -> tuple[Path, str]:
    """Debezium Server's home folder and a Java 21+ binary, or a failed test."""
    try:
        return debezium.resolve_distribution(), debezium.resolve_java()
    except BenchError as exc:
        pytest.fail(f"Debezium Server {debezium.DEBEZIUM_VERSION} is not usable here: {exc}")
