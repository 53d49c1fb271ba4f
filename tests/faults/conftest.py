"""The fault suite: the services of the integration tests, ``--runs N`` and the results table.

The CI version runs each scenario once (a few minutes in all). ``--runs N`` (or the environment
variable ``TIDEMARK_FAULT_RUNS``) repeats each scenario N times with other random kill points;
``--faults-report FILE`` writes the results table (the one in docs/reliability.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.faults.scenario import RESULTS, results_table
from tests.integration.conftest import kafka, mariadb, postgres, stack

__all__ = ["kafka", "mariadb", "postgres", "stack"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("faults", "tidemark fault suite")
    group.addoption(
        "--runs",
        type=int,
        default=int(os.environ.get("TIDEMARK_FAULT_RUNS", "1")),
        help="runs per fault scenario (default 1, or TIDEMARK_FAULT_RUNS)",
    )
    group.addoption("--faults-report", default=None, help="write the results table here")


@pytest.fixture(scope="session")
def runs(request: pytest.FixtureRequest) -> int:
    return max(1, int(request.config.getoption("--runs")))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not RESULTS:
        return
    table = results_table()
    terminalreporter.write_sep("-", "fault suite results")
    terminalreporter.write_line(table)
    path = terminalreporter.config.getoption("--faults-report")
    if path:
        Path(path).write_text(table + "\n")
