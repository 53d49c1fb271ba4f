"""The compiled twins were built by the install (scripts/setup.sh → pip install -e .).

Their build is optional so that an install without a C compiler still works (on the slower
pure-Python path); this test is what makes a missing build visible instead of silent.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from cdc import compiled


@pytest.mark.parametrize("name", compiled.MODULES)
def test_every_compiled_module_was_built(name: str) -> None:
    try:
        importlib.import_module(name)
    except ImportError as exc:
        pytest.fail(
            f"{name} was not built ({exc}): install gcc and python3-dev, then "
            "`.venv/bin/pip install -e .` (scripts/setup.sh does both)"
        )


def test_pure_python_is_chosen_by_the_environment() -> None:
    probe = "from connectors.postgres import pgoutput as p; print(p._tuple is p._tuple_py)"
    out = {}
    for value in ("1", "0"):
        env = {"TIDEMARK_PURE_PYTHON": value, "PATH": "/usr/bin:/bin"}
        run = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
        )
        out[value] = run.stdout.strip()
    assert out == {"1": "True", "0": "False"}
