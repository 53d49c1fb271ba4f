"""docs/architecture.md and docs/connector-guide.md name only files and types that exist.

The architecture page drifted once (it named files and types nobody wrote); this keeps every
path it names and every type in backquotes tied to the code.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("docs/architecture.md", "docs/connector-guide.md")
CONNECTORS = ("postgres", "mysql")

#: names of Debezium / Kafka Connect / library classes the pages compare with, not ours
EXTERNAL = {
    "ChangeEventSourceCoordinator",
    "RelationalSnapshotChangeEventSource",
    "ErrorHandler",
    "MongoDB",
    "SQL",
    "Decimal",
    "MySQLResult",  # PyMySQL's, the reference of the compiled MySQL row walk
}

PATH = re.compile(r"\b((?:cdc|connectors|worker|tests|bench|docs)/[A-Za-z0-9_./<>-]*)")
CODE = re.compile(r"`([^`\n]+)`")
TYPE = re.compile(r"^([A-Z][A-Za-z0-9]+)(?:\.([a-z_][A-Za-z0-9_]*))?(?:\(.*\))?$")


@cache
def _definitions() -> dict[str, set[str]]:
    """Every class (and module-level name) in the packages, with the names in its body."""
    out: dict[str, set[str]] = {}
    for package in ("cdc", "connectors", "worker"):
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    members = out.setdefault(node.name, set())
                    for item in ast.walk(node):
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                            members.add(item.name)
                        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                            members.add(item.target.id)
                        elif isinstance(item, ast.Assign):
                            members.update(t.id for t in item.targets if isinstance(t, ast.Name))
                elif isinstance(node, ast.Assign):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            out.setdefault(t.id, set())
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    out.setdefault(node.target.id, set())
    return out


def _paths(text: str) -> set[str]:
    found = set()
    for m in PATH.finditer(text):
        path = m.group(1).rstrip(".,:;)")
        for db in CONNECTORS if "<db>" in path else ("",):
            found.add(path.replace("<db>", db))
    return found


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_named_exists(doc: str) -> None:
    text = (ROOT / doc).read_text()
    missing = sorted(p for p in _paths(text) if not (ROOT / p).exists())
    assert missing == [], f"{doc} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS)
def test_every_type_named_exists(doc: str) -> None:
    defs = _definitions()
    missing = []
    for span in CODE.findall((ROOT / doc).read_text()):
        m = TYPE.match(span.strip())
        if m is None or m.group(1) in EXTERNAL:
            continue
        name, member = m.group(1), m.group(2)
        if name not in defs or (member and member not in defs[name]):
            missing.append(span)
    assert missing == [], f"{doc} names types or members that do not exist: {missing}"


def test_the_checks_catch_a_made_up_name() -> None:
    assert "connectors/postgres/decoding.py" in _paths("`connectors/<db>/decoding.py`")
    assert not (ROOT / "connectors/postgres/decoding.py").exists()
    assert "OffsetContext" not in _definitions()
    assert "SourceCoordinator" in _definitions()
