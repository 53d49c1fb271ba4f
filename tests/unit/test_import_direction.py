"""The layering of docs/architecture.md, enforced: who may import whom."""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STDLIB = set(sys.stdlib_module_names)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules(package: str) -> list[tuple[str, Path]]:
    base = ROOT / package.replace(".", "/")
    out = []
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        out.append((".".join(rel.parts), path))
    return out


def _violations(package: str, allowed: Callable[[str, str], bool]) -> list[str]:
    bad = []
    for mod, path in _modules(package):
        for imp in _imports(path):
            if not allowed(mod, imp):
                bad.append(f"{mod} imports {imp}")
    return bad


def _top(name: str) -> str:
    return name.split(".")[0]


def test_spi_depends_only_on_stdlib_and_pydantic() -> None:
    def ok(mod: str, imp: str) -> bool:
        return _top(imp) in STDLIB or _top(imp) == "pydantic" or imp.startswith("cdc.spi")

    assert _violations("cdc.spi", ok) == []


def test_core_never_imports_connectors_or_worker() -> None:
    def ok(mod: str, imp: str) -> bool:
        return _top(imp) not in {"connectors", "worker"}

    assert _violations("cdc", ok) == []


def test_apply_job_never_imports_connector_code() -> None:
    def ok(mod: str, imp: str) -> bool:
        return _top(imp) not in {"connectors", "worker"}

    if (ROOT / "cdc" / "apply").exists():
        assert _violations("cdc.apply", ok) == []


def test_connectors_import_core_only_and_never_each_other() -> None:
    def ok(mod: str, imp: str) -> bool:
        if _top(imp) == "worker":
            return False
        if _top(imp) == "connectors":
            own = ".".join(mod.split(".")[:2])
            return imp == "connectors" or imp == own or imp.startswith(own + ".")
        return True

    assert _violations("connectors", ok) == []


def test_checker_sees_a_violation() -> None:
    """Guard against a checker that silently finds nothing to check."""
    assert any(mod == "worker.cli" for mod, _ in _modules("worker"))
    assert "worker.dev" in _imports(ROOT / "worker" / "cli.py")
