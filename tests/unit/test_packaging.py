"""Packaging metadata a new user's ``pip install`` reads: no deprecation warnings."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_license_is_an_spdx_expression_with_a_setuptools_that_reads_it() -> None:
    """setuptools 77+ deprecates ``project.license`` as a table (a warning on every install)
    and reads an SPDX string; older setuptools rejects the string, so the build requires 77."""
    doc = tomllib.loads(PYPROJECT.read_text())
    assert doc["project"]["license"] == "Apache-2.0"
    assert not any(c.startswith("License ::") for c in doc["project"].get("classifiers", []))
    [setuptools] = [r for r in doc["build-system"]["requires"] if r.startswith("setuptools")]
    match = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", setuptools)
    assert match is not None and int(match.group(1)) >= 77
