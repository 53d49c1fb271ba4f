"""Content-based filtering (Debezium's ``io.debezium.transforms.Filter``), with Python conditions.

Debezium evaluates ``condition`` with a JSR-223 script engine (Groovy, GraalJS) or WebAssembly.
A Python process cannot run those, and silently approximating Groovy would be worse than
refusing, so ``language`` must be ``python`` and ``condition`` a Python *expression*; a
``jsr223.*`` / ``wasm.*`` language is a config error that says what to change.

Differences from Debezium, on purpose:

* The expression sees ``value``, ``key``, ``topic``, ``valueSchema``, ``keySchema`` and
  ``headers`` (also bound as ``header``, Debezium's name). Structs are dicts, so Groovy's
  ``value.after.id`` is written ``value['after']['id']``. ``headers`` maps each header name to
  its value decoded as UTF-8 text (raw ``bytes`` if it is not UTF-8), last one winning, where
  Debezium gives ``{schema, value}`` objects.
* The result must be a ``bool``: ``True`` keeps the record, ``False`` drops it (Debezium's
  behaviour; its property doc says the opposite). Anything else fails the task, as does an
  exception raised by the expression.
* Only a few harmless builtins are available, and names or attributes starting with ``_`` are
  rejected when the condition is compiled. This stops accidents and the obvious escapes from
  the namespace; it is not a sandbox against a hostile config author, who controls the
  connector anyway.

``null.handling.mode`` (keep / drop / evaluate) and ``topic.regex`` behave as in Debezium. The
condition is compiled once; the header dict is built only if the condition mentions headers.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from types import CodeType
from typing import Any

from cdc.record import SourceRecord
from cdc.transforms.base import PluginConfig, Transformation, TransformError

SAFE_BUILTINS: dict[str, Any] = {
    f.__name__: f
    for f in (
        abs, all, any, bool, dict, float, int, isinstance, len, list, max, min, round,
        set, sorted, str, sum, tuple, bytes,
    )
}  # fmt: skip


#: ways around the '_' rule: str.format reads attributes named inside the format string
#: ("{0.field.__globals__}"), and generator and frame objects reach other modules' globals
_INTROSPECTION = frozenset({"format", "format_map", "mro"})
_FRAME_PREFIXES = ("gi_", "cr_", "ag_", "f_", "co_", "tb_")


def compile_condition(expression: str) -> CodeType:
    """Compile ``expression`` for :func:`eval`; ValueError explains why it is refused."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not a Python expression: {exc.msg}") from exc
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Name):
            name = node.id
        if name is not None and name.startswith("_"):
            raise ValueError(f"names starting with '_' are not allowed ({name})")
        if isinstance(node, ast.Attribute) and (
            node.attr in _INTROSPECTION or node.attr.startswith(_FRAME_PREFIXES)
        ):
            raise ValueError(f"the attribute {node.attr!r} is not allowed")
    return compile(tree, "<filter condition>", "eval")


def _header_map(headers: list[tuple[str, bytes]]) -> dict[str, str | bytes]:
    out: dict[str, str | bytes] = {}
    for name, raw in headers:
        try:
            out[name] = raw.decode()
        except UnicodeDecodeError:
            out[name] = raw
    return out


class Filter(Transformation):
    def __init__(self) -> None:
        self._code: CodeType | None = None
        self._expression = ""
        self._null_mode = "keep"
        self._topics: re.Pattern[str] | None = None
        self._wants_headers = False

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        language = cfg.required("language")
        if language and language.lower() != "python":
            if language.startswith(("jsr223.", "wasm.")) or language == "graal.js":
                cfg.error(
                    "language",
                    f"{language!r} is not supported: tidemark cannot run JSR-223 or WebAssembly "
                    "script engines; set language=python and write the condition as a Python "
                    "expression over value, key, topic, headers, valueSchema, keySchema",
                )
            else:
                cfg.error("language", f"must be 'python', got {language!r}")
        self._expression = cfg.required("condition")
        if self._expression:
            try:
                self._code = compile_condition(self._expression)
            except ValueError as exc:
                cfg.error("condition", str(exc))
        self._null_mode = cfg.choice("null.handling.mode", ("keep", "drop", "evaluate"), "keep")
        self._topics = cfg.regex("topic.regex")
        cfg.check()
        assert self._code is not None
        self._wants_headers = bool({"headers", "header"} & set(self._code.co_names))

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        if self._topics is not None and self._topics.fullmatch(record.topic) is None:
            return record
        if record.value is None:
            if self._null_mode == "keep":
                return record
            if self._null_mode == "drop":
                return None
        return record if self._evaluate(record) else None

    def _evaluate(self, record: SourceRecord) -> bool:
        assert self._code is not None, "configure() first"
        headers = _header_map(record.headers) if self._wants_headers else {}
        namespace = {
            "__builtins__": SAFE_BUILTINS,
            "value": record.value,
            "key": record.key,
            "topic": record.topic,
            "valueSchema": record.value_schema,
            "keySchema": record.key_schema,
            "headers": headers,
            "header": headers,
        }
        try:
            result = eval(self._code, namespace)
        except Exception as exc:
            raise TransformError(
                f"error evaluating filter condition {self._expression!r} on {record.topic}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(result, bool):
            raise TransformError(
                f"filter condition {self._expression!r} returned {type(result).__name__} "
                f"{result!r} on {record.topic}; it must return True or False"
            )
        return result


class DropRecord(Transformation):
    """Kafka Connect's ``org.apache.kafka.connect.transforms.Filter``: drops every record it
    sees, so it is used with a predicate (``predicate=isTombstone``, ``negate=true``...)."""

    def configure(self, config: Mapping[str, str]) -> None:
        PluginConfig(config).check()

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        return None
