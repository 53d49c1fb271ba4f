"""Retry waits are computed in one place, ``cdc/retry.py``: no module of the core, the
connectors or the worker grows a delay by hand (issue 24: the three loops became one policy).

Two shapes are looked for in the source: a function that waits (``sleep``, ``wait``,
``wait_for``) and grows a number exponentially (``**``, ``<<``, ``*=``), which is a backoff
loop; and any statement raising something to a power next to a delay or backoff name, which is
a backoff schedule (the worker's old ``RetryPolicy.delay``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "cdc" / "retry.py"
WAITS = {"sleep", "wait", "wait_for"}
SCHEDULE_WORDS = ("delay", "backoff")
SIMPLE = ast.Return | ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Expr


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _grows(node: ast.AST) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow | ast.LShift):
        return True
    return isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Mult)


def backoff_code(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each hand-written backoff in a module."""
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        nodes = list(ast.walk(fn))
        waits = any(isinstance(n, ast.Call) and _name(n.func) in WAITS for n in nodes)
        if waits and any(_grows(n) for n in nodes):
            found.append((fn.lineno, f"{fn.name}() waits and grows a delay"))
    for stmt in ast.walk(tree):
        if not isinstance(stmt, SIMPLE):
            continue
        inner = [n for child in ast.iter_child_nodes(stmt) for n in ast.walk(child)]
        names = {(_name(n) or "").lower() for n in inner}
        powered = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) for n in inner)
        if powered and any(word in name for name in names for word in SCHEDULE_WORDS):
            found.append((stmt.lineno, "an exponential delay"))
    return found


def test_no_backoff_is_written_outside_the_shared_policy() -> None:
    offenders = []
    for package in ("cdc", "connectors", "worker"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == POLICY:
                continue
            for line, what in backoff_code(ast.parse(path.read_text(), str(path))):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert offenders == [], "use cdc.retry.Backoff / run_with_retries:\n" + "\n".join(offenders)


OLD_LOOP = """
def execute(self, ctx):
    attempt = 0
    while not ctx.stop_event.is_set():
        try:
            return self._stream(ctx)
        except OSError:
            attempt += 1
            wait = min(first * (2 ** (attempt - 1)), limit)
            ctx.stop_event.wait(wait)
"""

OLD_SCHEDULE = """
class RetryPolicy:
    def delay(self, attempt):
        return float(min(self.initial_delay_s * (2 ** max(attempt - 1, 0)), self.max_delay_s))
"""

DOUBLING = """
def reconnect():
    delay = 1.0
    while True:
        time.sleep(delay)
        delay *= 2
"""


def test_the_check_finds_the_loops_it_replaced() -> None:
    """The shapes of the three retired loops are found (the check can fail)."""
    assert backoff_code(ast.parse(OLD_LOOP))
    assert backoff_code(ast.parse(OLD_SCHEDULE))
    assert backoff_code(ast.parse(DOUBLING))
    assert not backoff_code(ast.parse("def f(n):\n    return 2 ** n\n"))
    assert not backoff_code(ast.parse("def g(ev, delay):\n    ev.wait(delay)\n"))
