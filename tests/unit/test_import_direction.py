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


# -- no import circles ---------------------------------------------------------------------------
CYCLE_PACKAGES = ("cdc", "connectors", "worker")


def _import_targets(path: Path, mod: str, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``path`` imports, wherever the import statement stands
    (module level, inside a function, under ``TYPE_CHECKING``): a lazy import only hides a
    circle. ``from a import b`` names the module ``a.b`` when it is one, else ``a``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bases = [a.name for a in node.names]
            for name in bases:
                while name and name not in known:
                    name = name.rpartition(".")[0]
                if name:
                    found.add(name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, node.module] if node.module else parts)
            else:
                base = node.module or ""
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in known:
                    found.add(full)
                elif base in known:
                    found.add(base)
    found.discard(mod)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = [m for package in CYCLE_PACKAGES for m in _modules(package)]
    known = {
        mod.removesuffix(".__init__") if mod.endswith(".__init__") else mod for mod, _ in modules
    }
    graph: dict[str, set[str]] = {}
    for mod, path in modules:
        name = mod.removesuffix(".__init__")
        graph[name] = _import_targets(path, name, known)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_no_import_cycles_in_core_connectors_or_worker() -> None:
    assert import_cycles(import_graph()) == []


def test_cycle_check_sees_a_circle_and_lazy_imports() -> None:
    """Guard against a check that cannot fail: a made-up circle is found, and the graph has
    the edges of imports made inside functions (``worker.cli`` imports ``worker.dev``)."""
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = import_graph()
    assert "cdc.converters.factory" in graph["cdc.converters"]
    assert "cdc.converters.avro" in graph["cdc.converters.factory"]  # imported when chosen
