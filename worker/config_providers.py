"""Config providers: ``${env:VAR}``, ``${file:path:key}`` and ``${dir:path:file}`` placeholders.

Kafka Connect's answer to "where do passwords go": the stored connector config keeps the
placeholder, and the value is looked up only when a connector starts. So the secret is never in
``connectors.json``, never in a REST response, and rotating it is a restart, not an edit.

Supported forms (the provider names and classes are Kafka Connect's):

- ``${env:VAR}`` (and Kafka's ``${env::VAR}``): an environment variable (``EnvVarConfigProvider``).
- ``${file:path:key}``: ``key`` in a properties, JSON or YAML file, chosen by its extension
  (``.json``; ``.yaml``/``.yml``; anything else is read as Java properties). In JSON and YAML a
  dotted key walks nested objects when no top-level key has the dotted name.
- ``${file:path}``: the whole file, trailing newline removed (a password file).
- ``${dir:path:name}``: the whole file ``name`` in directory ``path``
  (``DirectoryConfigProvider``, the shape of Docker and Kubernetes secret mounts).

A value may hold several placeholders, or text around one (``jdbc:${env:HOST}:5432``).

Who may use what (``docs/security.md``): a placeholder reads anything the worker process can
read, and a connector config can send what it read anywhere (as a user name to a host the
author chose, or in a topic name). So the YAML file the operator wrote resolves ``file``,
``env`` and ``dir`` without limits, while a config arriving over REST may only use providers
the worker config declares (``config.providers``), inside their ``allowed.paths`` /
``allowlist.pattern``; :func:`check_placeholders` is that check. Every value a placeholder
resolves to is remembered in :data:`RESOLVED` so logs, traces and REST answers can be scrubbed
of it.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from cdc.java_properties import parse_properties

PLACEHOLDER = re.compile(r"\$\{([A-Za-z][A-Za-z0-9_.-]*):([^}]*)\}")

Problem = tuple[str, str]
Kind = Literal["file", "dir", "env"]

KAFKA_CLASSES: dict[str, Kind] = {
    "org.apache.kafka.common.config.provider.FileConfigProvider": "file",
    "org.apache.kafka.common.config.provider.DirectoryConfigProvider": "dir",
    "org.apache.kafka.common.config.provider.EnvVarConfigProvider": "env",
}
CLASSES: dict[str, Kind] = {
    **KAFKA_CLASSES,
    **{name.rsplit(".", 1)[1]: kind for name, kind in KAFKA_CLASSES.items()},
    "file": "file",
    "dir": "dir",
    "env": "env",
}
PARAMS: dict[Kind, str] = {
    "file": "allowed.paths",
    "dir": "allowed.paths",
    "env": "allowlist.pattern",
}


class ProviderError(ValueError):
    """Why one placeholder cannot be resolved; the message names what is missing."""


def has_placeholder(value: Any) -> bool:
    return isinstance(value, str) and PLACEHOLDER.search(value) is not None


@dataclass(frozen=True)
class Provider:
    """One declared provider: ``config.providers.<name>.class`` and its limit (``None``: none,
    Kafka Connect's default when the parameter is not set)."""

    name: str
    kind: Kind
    allowed_paths: tuple[Path, ...] | None = None
    allowlist: re.Pattern[str] | None = None

    def refusal(self, body: str) -> str | None:
        """Why ``${name:body}`` is outside this provider's limits, or None. Paths are compared
        after resolving ``..`` and symlinks, so neither can step outside an allowed path."""
        if self.kind == "env":
            var = env_name(body)
            if self.allowlist is not None and not self.allowlist.fullmatch(var):
                return (
                    f"environment variable {var} does not match "
                    f"config.providers.{self.name}.param.allowlist.pattern"
                )
            return None
        if self.allowed_paths is None:
            return None
        path = file_path(self.kind, body)
        real = Path(os.path.realpath(path))
        if not any(real == a or real.is_relative_to(a) for a in self.allowed_paths):
            allowed = ",".join(str(a) for a in self.allowed_paths)
            return (
                f"path {path} is outside config.providers.{self.name}.param.allowed.paths "
                f"({allowed})"
            )
        return None


def env_name(body: str) -> str:
    return body[1:] if body.startswith(":") else body  # Kafka's ${env::VAR} form


def file_path(kind: Kind, body: str) -> str:
    """The file a ``file``/``dir`` placeholder reads (``dir``: the directory joined with the
    file name)."""
    path, sep, key = body.rpartition(":")
    if kind == "dir":
        return os.path.join(path, key) if sep else body
    return path if sep and path else body


TRUSTED: dict[str, Provider] = {k: Provider(k, k) for k in ("file", "dir", "env")}
"""What the operator's YAML file may use: everything the worker process can read."""


def rest_default(state_dir: Path) -> dict[str, Provider]:
    """REST configs, when ``config.providers`` is not set: files under ``<state.dir>/secrets``
    only (a directory only tidemark uses, so nothing else's secrets are put there by chance)."""
    secrets = (Path(os.path.realpath(state_dir)) / "secrets",)
    return {k: Provider(k, k, allowed_paths=secrets) for k in ("file", "dir")}


def declared_providers(
    props: Mapping[str, Any], where: str
) -> tuple[dict[str, Provider], list[Problem]]:
    """The providers of ``config.providers`` and its ``config.providers.<name>.*`` keys (as
    given in the ``worker:`` section); problems carry their YAML path."""
    problems: list[Problem] = []
    names = [n.strip() for n in scalar_text(props.get("config.providers", "")).split(",")]
    names = [n for n in names if n]
    out: dict[str, Provider] = {}
    used: set[str] = {"config.providers"}
    for name in names:
        key = f"config.providers.{name}.class"
        used.add(key)
        cls = scalar_text(props.get(key, "")).strip()
        kind = CLASSES.get(cls)
        if not cls:
            problems.append((f"{where}.{key}", f"is required for the declared provider {name!r}"))
            continue
        if kind is None:
            known = ", ".join(KAFKA_CLASSES)
            problems.append(
                (f"{where}.{key}", f"unknown config provider class {cls!r}; tidemark has {known}")
            )
            continue
        param = f"config.providers.{name}.param.{PARAMS[kind]}"
        used.add(param)
        value = props.get(param)
        provider = Provider(name, kind)
        if value is not None and kind == "env":
            try:
                provider = Provider(name, kind, allowlist=re.compile(scalar_text(value)))
            except re.error as exc:
                problems.append((f"{where}.{param}", f"not a valid regular expression: {exc}"))
        elif value is not None:
            paths = [p.strip() for p in scalar_text(value).split(",") if p.strip()]
            real = tuple(Path(os.path.realpath(p)) for p in paths)
            provider = Provider(name, kind, allowed_paths=real)
        out[name] = provider
    for key in props:
        if key.startswith("config.providers") and key not in used:
            problems.append(
                (
                    f"{where}.{key}",
                    "unknown key: declare the provider in config.providers; file and dir take "
                    "param.allowed.paths, env takes param.allowlist.pattern",
                )
            )
    return out, problems


def check_placeholders(
    config: Mapping[str, Any], providers: Mapping[str, Provider], *, origin: str = "over REST"
) -> list[Problem]:
    """``(key, reason)`` for each placeholder these providers do not allow. Nothing is read."""
    problems: list[Problem] = []
    declared = ", ".join(sorted(providers)) or "none"
    for key, value in config.items():
        if not isinstance(value, str):
            continue
        for match in PLACEHOLDER.finditer(value):
            name, body = match.group(1), match.group(2)
            provider = providers.get(name)
            if provider is None:
                problems.append(
                    (
                        key,
                        f"config provider {name!r} may not be used in configs sent {origin} "
                        f"(allowed: {declared}); the worker config declares them with "
                        "config.providers",
                    )
                )
                continue
            reason = provider.refusal(body)
            if reason is not None:
                problems.append((key, f"{match.group(0)} is not allowed: {reason}"))
    return problems


class SecretValues:
    """Every value a placeholder resolved to in this process, and the forms error messages
    print them in (JSON or ``repr`` escapes, one line of several, any case), so
    :meth:`redact` can replace them with ``********`` wherever they turn up as a whole token
    (not inside a longer word or number). Values shorter than four characters are not
    scrubbed: they would mangle every message, and they hide nothing worth a guess."""

    MIN_LENGTH = 4
    IGNORED = frozenset({"true", "false", "null", "none"})

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._lock = threading.Lock()

    def add(self, value: str) -> None:
        forms = {
            form for v in (value, value.strip()) for form in (v, json.dumps(v)[1:-1], repr(v)[1:-1])
        }
        forms |= {line.strip() for line in value.splitlines()}
        forms = {f for f in forms if len(f) >= self.MIN_LENGTH and f.lower() not in self.IGNORED}
        with self._lock:
            if forms - self._values:
                self._values |= forms
                alternatives = sorted(self._values, key=len, reverse=True)
                # Whole tokens only: a user name "postgres" must not mangle "PostgreSQL".
                self._pattern = re.compile(
                    r"(?<![A-Za-z0-9])(?:"
                    + "|".join(map(re.escape, alternatives))
                    + r")(?![A-Za-z0-9])",
                    re.IGNORECASE,
                )

    def redact(self, text: str, sent_folded: str = "") -> str:
        """``text`` with every secret value masked, except those the lower-cased text
        ``sent_folded`` holds: text a REST caller sent and gets echoed back (a validation
        message quoting its value) tells the caller nothing new, while masking it would tell
        them which of their guesses is some connector's secret."""
        pattern = self._pattern
        if pattern is None:
            return text
        if not sent_folded:
            return pattern.sub("********", text)
        return pattern.sub(lambda m: m[0] if m[0].lower() in sent_folded else "********", text)


RESOLVED = SecretValues()
"""Process-wide: a worker process has one worker config, and a value resolved for any
connector must stay out of every log line and answer."""

_installed: dict[str, Provider] = {}


@contextmanager
def installed(providers: Mapping[str, Provider]) -> Iterator[None]:
    """Resolve the declared provider names (beyond ``file``, ``env`` and ``dir``) while inside;
    the daemon installs the worker config's for its lifetime."""
    global _installed
    before, _installed = _installed, dict(providers)
    try:
        yield
    finally:
        _installed = before


def install(providers: Mapping[str, Provider]) -> None:
    global _installed
    _installed = dict(providers)


class Resolver:
    """Resolves placeholders, reading each referenced file once per resolver. ``providers``
    (default: the YAML's unrestricted ``file``/``env``/``dir`` plus the installed declared
    ones) decides which names exist and how far each may reach."""

    def __init__(
        self, env: Mapping[str, str] | None = None, providers: Mapping[str, Provider] | None = None
    ) -> None:
        self.env = os.environ if env is None else env
        self.providers = {**_installed, **TRUSTED} if providers is None else dict(providers)
        self._files: dict[str, dict[str, str] | str] = {}

    def resolve(self, value: str) -> str:
        def replace(match: re.Match[str]) -> str:
            name, body = match.group(1), match.group(2)
            provider = self.providers.get(name)
            if provider is None:
                raise ProviderError(
                    f"unknown config provider {name!r} in {match.group(0)}; "
                    f"declared: {', '.join(sorted(self.providers))}"
                )
            reason = provider.refusal(body)
            if reason is not None:
                raise ProviderError(f"{match.group(0)} is not allowed: {reason}")
            if provider.kind == "env":
                out = self._env(body)
            elif provider.kind == "dir":
                out = self._dir(body)
            else:
                out = self._file(body)
            RESOLVED.add(out)
            return out

        return PLACEHOLDER.sub(replace, value)

    def _env(self, body: str) -> str:
        name = env_name(body)
        if not name:
            raise ProviderError("${env:...} needs a variable name")
        value = self.env.get(name)
        if value is None:
            raise ProviderError(f"environment variable {name} is not set")
        return value

    def _dir(self, body: str) -> str:
        directory, sep, name = body.rpartition(":")
        if not sep or not name or "/" in name:
            raise ProviderError("${dir:...} needs a directory and a file name: ${dir:/path:name}")
        content = self._load(os.path.join(directory, name), whole=True)
        assert isinstance(content, str)
        return content

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


@dataclass(frozen=True)
class Origin:
    """Who wrote a connector config's values, so each placeholder resolves with the providers
    its author may use. A config sent over REST is checked before it is stored
    (:func:`check_placeholders`); resolving it with the same limits when its task starts is
    the second line, for whatever reached the store another way (a check that missed a form,
    a config topic written by another worker, a state file edited by hand).

    ``rest`` None: the operator's YAML file wrote all of it (or a caller inside the process).
    Otherwise a value is the operator's only where ``yaml`` (the YAML file's config of the
    same connector, None when it has none or when the stored config connects elsewhere) holds
    the same value under the same key."""

    rest: Mapping[str, Provider] | None = None
    yaml: Mapping[str, Any] | None = None

    def trusted(self, key: str, config: Mapping[str, Any]) -> bool:
        if self.rest is None:
            return True
        return self.yaml is not None and config.get(key) == self.yaml.get(key)


def resolve_config(
    raw: Mapping[str, Any],
    env: Mapping[str, str] | None = None,
    providers: Mapping[str, Provider] | None = None,
    origin: Origin | None = None,
) -> tuple[dict[str, Any], list[Problem]]:
    """Every placeholder of a connector config resolved; ``(key, reason)`` for each that is
    not, all at once. Keys whose value failed keep the placeholder text. With ``origin``,
    values not written by the operator's YAML file resolve with its REST providers."""
    resolver = Resolver(env, providers)
    limited = Resolver(env, origin.rest) if origin is not None and origin.rest is not None else None
    out: dict[str, Any] = {}
    problems: list[Problem] = []
    for key, value in raw.items():
        if has_placeholder(value):
            use = resolver
            if limited is not None and origin is not None and not origin.trusted(key, raw):
                use = limited
            try:
                out[key] = use.resolve(value)
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
