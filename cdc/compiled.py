"""Which compiled twins of hot per-event functions are in use.

A few per-event steps exist twice: a pure-Python reference and a C extension that must give
the same result (issue 18; docs/architecture.md, "Compiled parts"). The extension is used when
it was built at install time, unless ``TIDEMARK_PURE_PYTHON=1`` asks for the reference, e.g.
to rule the compiled code out while chasing a bug, or to measure what it saves.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

#: every compiled module of the project, for the check that CI built them all
MODULES = ("connectors.postgres._pgoutput_c",)

#: True when the pure-Python reference was asked for (``TIDEMARK_PURE_PYTHON``)
PURE = os.environ.get("TIDEMARK_PURE_PYTHON", "").strip().lower() not in ("", "0", "false", "no")


def load(name: str) -> ModuleType | None:
    """The compiled module ``name``, or None when it was not built or the pure-Python
    reference was asked for; the caller then keeps its Python function."""
    if PURE:
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
