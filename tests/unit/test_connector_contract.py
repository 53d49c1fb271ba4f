"""The connector contract is all declared in ``cdc.spi``: neither side reaches for a member
of the other by name (``getattr(ctx, "metrics", None)``), so what a connector may use and
what the core asks of it can be read in one place, and mypy checks both sides."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from cdc.spi import Connector, SourceContext

ROOT = Path(__file__).resolve().parents[2]
#: where connectors use the context and the core uses connectors (not the Spark apply job)
SCANNED = ("connectors", "cdc", "worker")
NOT_SCANNED = ("cdc/apply/",)
#: names too generic to mean the contract (the engine closes converters and transforms too)
GENERIC = {"close"}
REFLECTION = {"getattr", "hasattr", "setattr"}


def contract_members() -> set[str]:
    """Every member ``SourceContext`` and ``Connector`` declare (attributes and methods)."""
    names: set[str] = set()
    for cls in (SourceContext, Connector):
        for klass in cls.__mro__:
            if klass.__module__.startswith("cdc.spi"):
                names.update(vars(klass).get("__annotations__", {}))
                names.update(n for n in vars(klass) if not n.startswith("_"))
    return names - GENERIC


def reflective_uses(source: str, members: set[str]) -> list[tuple[int, str]]:
    """``getattr(x, "name")`` / ``hasattr`` / ``setattr`` calls naming a contract member."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in REFLECTION
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in members
        ):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_contract_members_are_found() -> None:
    members = contract_members()
    for name in ("metrics", "batched", "emit_row", "tx_metadata", "snapshot_starting"):
        assert name in members  # SourceContext
    for name in ("system_schemas", "heartbeat_action", "config", "config_def", "reselector"):
        assert name in members  # Connector
    assert "stop_event" in members and "validate_offset" in members


def test_scan_sees_a_reflective_use() -> None:
    """Guard against a scan that cannot fail."""
    members = contract_members()
    code = 'core = getattr(ctx, "metrics", None)\nif hasattr(conn, "system_schemas"): pass\n'
    assert [line for line, _ in reflective_uses(code, members)] == [1, 2]
    assert reflective_uses('getattr(ctx, name)\ngetattr(x, "unrelated")\n', members) == []


def test_no_getattr_for_contract_members_in_connectors_core_or_worker() -> None:
    members = contract_members()
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for package in SCANNED
        for path in sorted((ROOT / package).rglob("*.py"))
        if not str(path.relative_to(ROOT)).startswith(NOT_SCANNED)
        for line, text in reflective_uses(path.read_text(), members)
    ]
    assert offenders == []


def test_the_memory_connector_uses_every_context_member() -> None:
    """``cdc.testing.memory`` is the example a new connector starts from: it uses every
    member of the context a real connector uses, so the core's own tests cover them."""
    from cdc.testing import memory

    source = inspect.getsource(memory)
    used = {
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "ctx"
    }
    context = {n for n in vars(SourceContext) if not n.startswith("_")} | set(
        SourceContext.__annotations__
    )
    assert context - used == set()
