"""Which compiled twins of hot per-event functions are in use.

A few per-event steps exist twice: a pure-Python reference and a C extension that must give
the same result (issue 18; docs/architecture.md, "Compiled parts"). The extension is used when
it was built at install time, unless ``TIDEMARK_PURE_PYTHON=1`` asks for the reference, e.g.
to rule the compiled code out while chasing a bug, or to measure what it saves.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])

#: every compiled module of the project, for the check that CI built them all
MODULES = (
    "connectors.postgres._pgoutput_c",
    "cdc.schema._rowfn_c",
    "cdc.converters._json_c",
    "connectors.mysql._textrow_c",
)

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


#: the converters a compiled row function knows (``cdc/schema/_rowfn_c.c``), by name
NATIVE_KINDS = {
    "int": 2,
    "bool_t": 3,
    "timestamptz_utc": 4,
    "decimal_fixed": 5,
    "timestamptz_utc_padded": 6,
    "float": 7,
    "date_days": 8,
    "decimal_variable": 9,
    "timestamp_micros": 10,
    "time_micros": 11,
    "naive_zoned": 12,
    "str_pass": 13,
    "bool_int": 14,
}


def native(kind: str, arg: Any = None) -> Callable[[_F], _F]:
    """Marks a value converter whose common case the compiled row function does itself
    (``kind`` in NATIVE_KINDS); every other value still goes through the converter, so the
    mark may only be put on the converter that kind describes."""
    code = NATIVE_KINDS[kind]

    def mark(fn: _F) -> _F:
        fn.__tidemark_native__ = (code, arg)  # type: ignore[attr-defined]
        return fn

    return mark


def native_kind(fn: Any) -> tuple[int, Any] | None:
    """(kind code, argument) of a marked converter; ``int`` itself is the "int" kind."""
    if fn is int:
        return NATIVE_KINDS["int"], None
    mark: tuple[int, Any] | None = getattr(fn, "__tidemark_native__", None)
    return mark
