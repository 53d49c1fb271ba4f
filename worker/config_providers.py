"""Config providers: ``${env:VAR}`` and ``${file:path:key}`` placeholders in config values.

Kafka Connect's answer to "where do passwords go": the stored connector config keeps the
placeholder, and the value is looked up only when a connector starts. So the secret is never in
``connectors.json``, never in a REST response, and rotating it is a restart, not an edit.

Supported forms (the provider names are Kafka Connect's):

- ``${env:VAR}`` (and Kafka's ``${env::VAR}``): an environment variable.
- ``${file:path:key}``: ``key`` in a properties, JSON or YAML file, chosen by its extension
  (``.json``; ``.yaml``/``.yml``; anything else is read as Java properties). In JSON and YAML a
  dotted key walks nested objects when no top-level key has the dotted name.
- ``${file:path}``: the whole file, trailing newline removed (a password file).

A value may hold several placeholders, or text around one (``jdbc:${env:HOST}:5432``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

PLACEHOLDER = re.compile(r"\$\{([A-Za-z][A-Za-z0-9_.-]*):([^}]*)\}")

Problem = tuple[str, str]


class ProviderError(ValueError):
    """Why one placeholder cannot be resolved; the message names what is missing."""


def has_placeholder(value: Any) -> bool:
    return isinstance(value, str) and PLACEHOLDER.search(value) is not None


class Resolver:
    """Resolves placeholders, reading each referenced file once per resolver."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = os.environ if env is None else env
        self._files: dict[str, dict[str, str] | str] = {}

    def resolve(self, value: str) -> str:
        def replace(match: re.Match[str]) -> str:
            provider, body = match.group(1), match.group(2)
            if provider == "env":
                return self._env(body)
            if provider == "file":
                return self._file(body)
            raise ProviderError(
                f"unknown config provider {provider!r} in {match.group(0)}; "
                "tidemark has 'env' and 'file'"
            )

        return PLACEHOLDER.sub(replace, value)

    def _env(self, body: str) -> str:
        name = body[1:] if body.startswith(":") else body  # Kafka's ${env::VAR} form
        if not name:
            raise ProviderError("${env:...} needs a variable name")
        value = self.env.get(name)
        if value is None:
            raise ProviderError(f"environment variable {name} is not set")
        return value

    def _file(self, body: str) -> str:
        path, sep, key = body.rpartition(":")
        if not sep or not path:
            # ${file:/run/secrets/pw}: the whole file
            content = self._load(body, whole=True)
            assert isinstance(content, str)
            return content
        content = self._load(path, whole=False)
        assert isinstance(content, dict)
        if key not in content:
            raise ProviderError(f"file {path} has no key {key!r}")
        return content[key]

    def _load(self, path: str, *, whole: bool) -> dict[str, str] | str:
        cache_key = f"{'whole' if whole else 'keys'}:{path}"
        if cache_key in self._files:
            return self._files[cache_key]
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ProviderError(f"cannot read {path}: {exc.strerror or exc}") from exc
        parsed = text.rstrip("\r\n") if whole else parse_key_file(path, text)
        self._files[cache_key] = parsed
        return parsed


def parse_key_file(path: str, text: str) -> dict[str, str]:
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProviderError(f"{path} is not valid JSON: {exc}") from exc
        return _flatten(path, doc)
    if suffix in (".yaml", ".yml"):
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ProviderError(f"{path} is not valid YAML: {exc}") from exc
        return _flatten(path, doc)
    return parse_properties(text)


def _flatten(path: str, doc: Any) -> dict[str, str]:
    """Top-level keys as they are, nested objects also under dotted names (``db.password``)."""
    if not isinstance(doc, dict):
        raise ProviderError(f"{path} must hold an object at the top level")
    out: dict[str, str] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif prefix not in out:
            out[prefix] = scalar_text(node)

    for k, v in doc.items():  # top-level keys win over dotted paths of the same name
        if not isinstance(v, dict):
            out[str(k)] = scalar_text(v)
    walk("", doc)
    return out


def scalar_text(value: Any) -> str:
    """Connect configs are strings: booleans as Java prints them, None as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(scalar_text(v) for v in value)
    return str(value)


def parse_properties(text: str) -> dict[str, str]:
    """Java properties: ``key=value`` or ``key: value``, ``#``/``!`` comments, ``\\`` line
    continuations. Enough for the secrets files people point FileConfigProvider at."""
    out: dict[str, str] = {}
    logical: list[str] = []
    for line in text.splitlines():
        stripped = line.strip() if not logical else line.lstrip()
        if not logical and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            logical.append(stripped[:-1])
            continue
        logical.append(stripped)
        entry = "".join(logical)
        logical = []
        match = re.match(r"((?:\\.|[^=:\s])+)\s*[=:\s]\s*(.*)$", entry)
        if match:
            out[match.group(1).replace("\\", "")] = match.group(2)
        else:
            out[entry.replace("\\", "")] = ""
    return out


def resolve_config(
    raw: Mapping[str, Any], env: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], list[Problem]]:
    """Every placeholder of a connector config resolved; ``(key, reason)`` for each that is
    not, all at once. Keys whose value failed keep the placeholder text."""
    resolver = Resolver(env)
    out: dict[str, Any] = {}
    problems: list[Problem] = []
    for key, value in raw.items():
        if has_placeholder(value):
            try:
                out[key] = resolver.resolve(value)
            except ProviderError as exc:
                problems.append((key, str(exc)))
                out[key] = value
        else:
            out[key] = value
    return out, problems


def resolve_tree(node: Any, path: str, resolver: Resolver, problems: list[Problem]) -> Any:
    """Placeholders anywhere in a parsed YAML document (the worker section), with the YAML
    path of each failure."""
    if isinstance(node, dict):
        return {
            k: resolve_tree(v, f"{path}.{k}" if path else str(k), resolver, problems)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [resolve_tree(v, f"{path}[{i}]", resolver, problems) for i, v in enumerate(node)]
    if has_placeholder(node):
        try:
            return resolver.resolve(node)
        except ProviderError as exc:
            problems.append((path, str(exc)))
    return node
