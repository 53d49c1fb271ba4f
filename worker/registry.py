"""Connector plugins: which class a ``connector.class`` names, and what its config means.

Plugins come from the ``tidemark.connectors`` entry point group (``name = "module:Class"``)
plus the built-ins (PostgreSQL and the in-memory test connector). They are imported on first
use, not at start, so a worker without ``psycopg`` still runs its other connectors and only a
PostgreSQL connector fails, with an error naming the ``pip install`` that fixes it.

``connector.class`` may be a short name (``postgres``), the connector's type name
(``postgresql``), one of its Debezium class names
(``io.debezium.connector.postgresql.PostgresConnector``) or that class's simple name
(``PostgresConnector``), so configs written for Debezium work unchanged.

This module also owns what "a valid connector config" means for the worker: values are
strings (Kafka Connect's model), placeholders resolve, the plugin's ``ConfigDef`` plus the
worker's own per-connector keys (:data:`WORKER_FIELDS`) accept it, and offsets given through
``PATCH /offsets`` have the shape the connector will read back.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdc.config import (
    ConfigDef,
    ConfigField,
    Kind,
    at_least,
    is_secret_key,
    mask_url_passwords,
    url_passwords,
)
from cdc.spi import Connector
from cdc.transforms import TransformConfigError, build_chain
from worker.config_providers import (
    PLACEHOLDER,
    Origin,
    has_placeholder,
    resolve_config,
    scalar_text,
)

log = logging.getLogger("tidemark.worker.registry")

ENTRY_POINT_GROUP = "tidemark.connectors"
MASK = "********"

Problem = tuple[str, str]

PRODUCER_OVERRIDE = "producer.override."
"""Per-connector Kafka producer settings, applied over the worker's (Kafka Connect's name)."""

WORKER_FIELDS = ConfigDef(
    [
        ConfigField(
            "errors.max.retries",
            Kind.INT,
            -1,
            doc=(
                "How often a task that fails with a retriable error (lost connection, slot in "
                "use) is restarted before it goes to FAILED: -1 without limit (Debezium's "
                "default), 0 never."
            ),
            validator=at_least(-1),
            group="Error Handling",
        ),
        ConfigField(
            "errors.retry.delay.initial.ms",
            Kind.LONG,
            300,
            doc="Delay before the first automatic restart; doubled on each further one.",
            validator=at_least(0),
            group="Error Handling",
        ),
        ConfigField(
            "errors.retry.delay.max.ms",
            Kind.LONG,
            10000,
            doc="Upper bound of the exponential restart delay.",
            validator=at_least(0),
            group="Error Handling",
        ),
    ],
    passthrough=[PRODUCER_OVERRIDE],
)


class PluginError(Exception):
    """A ``connector.class`` that names no installed plugin, or one that cannot be loaded."""


@dataclass(frozen=True)
class PluginSpec:
    """Where a plugin lives, known before it is imported."""

    name: str
    target: str  # "module:Class"
    aliases: tuple[str, ...] = ()
    extra: str | None = None  # the pip extra that brings its driver
    version: str | None = None


BUILTINS = (
    PluginSpec(
        "postgres",
        "connectors.postgres:PostgresConnector",
        ("postgresql", "io.debezium.connector.postgresql.PostgresConnector", "PostgresConnector"),
        extra="postgres",
    ),
    PluginSpec(
        "mysql",
        "connectors.mysql:MySqlConnector",
        (
            "mariadb",
            "io.debezium.connector.mysql.MySqlConnector",
            "io.debezium.connector.mariadb.MariaDbConnector",
            "MySqlConnector",
            "MariaDbConnector",
        ),
        extra="mysql",
    ),
    PluginSpec(
        "memory",
        "cdc.testing.memory:MemoryConnector",
        ("io.tidemark.connector.memory.MemoryConnector", "MemoryConnector"),
    ),
)

OffsetValidator = Callable[
    [dict[str, Any], dict[str, Any] | None], tuple[dict[str, Any] | None, list[str]]
]
"""(partition, offset) -> (offset to store, problems). May complete a partial offset."""


@dataclass
class ConnectorPlugin:
    spec: PluginSpec
    cls: type[Connector]
    config_def: ConfigDef
    offset_validator: OffsetValidator

    @property
    def class_name(self) -> str:
        names = self.cls.class_names
        return names[0] if names else f"{self.cls.__module__}.{self.cls.__qualname__}"

    @property
    def task_class_name(self) -> str:
        """The ``task.class`` Kafka Connect shows in task configs: Debezium's tasks are the
        connector's class name plus ``Task``."""
        return self.class_name + "Task"

    @property
    def type_name(self) -> str:
        return str(self.cls.type_name or self.spec.name)

    @property
    def version(self) -> str:
        return self.spec.version or tidemark_version()

    def info(self) -> dict[str, Any]:
        """Kafka Connect's ``PluginInfo``."""
        return {"class": self.class_name, "type": "source", "version": self.version}

    def names(self) -> set[str]:
        out = {self.spec.name, self.type_name, self.class_name, *self.spec.aliases}
        for cname in self.cls.class_names:
            out.update((cname, cname.rsplit(".", 1)[-1]))
        out.add(self.cls.__name__)
        return out


def tidemark_version() -> str:
    try:
        return importlib.metadata.version("tidemark")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - source tree only
        return "0.0.0"


class Registry:
    """The installed connector plugins. Thread-safe; plugins are loaded once, on demand."""

    def __init__(
        self, specs: tuple[PluginSpec, ...] | None = None, *, entry_points: bool = True
    ) -> None:
        self._specs: dict[str, PluginSpec] = {}
        for spec in specs if specs is not None else BUILTINS:
            self._specs[spec.name] = spec
        if entry_points:
            for spec in _entry_point_specs():
                self._specs.setdefault(spec.name, spec)
        self._loaded: dict[str, ConnectorPlugin] = {}
        self._lock = threading.Lock()

    @property
    def specs(self) -> list[PluginSpec]:
        return list(self._specs.values())

    def resolve(self, name: str) -> ConnectorPlugin:
        """The plugin ``name`` refers to; :class:`PluginError` says what is installed."""
        key = name.strip()
        if not key:
            raise PluginError("connector.class is empty")
        lowered = key.lower()
        for spec in self._specs.values():
            if lowered == spec.name.lower() or key in spec.aliases or key == spec.target:
                return self.load(spec)
        # Entry-point plugins are only known by their short name until imported.
        for spec in self._specs.values():
            try:
                plugin = self.load(spec)
            except PluginError:
                continue
            if key in plugin.names():
                return plugin
        known = ", ".join(f"{s.name} ({', '.join(s.aliases[:2]) or s.target})" for s in self.specs)
        raise PluginError(f"unknown connector class {key!r}; installed plugins: {known}")

    def load(self, spec: PluginSpec) -> ConnectorPlugin:
        with self._lock:
            plugin = self._loaded.get(spec.name)
            if plugin is None:
                plugin = self._loaded[spec.name] = _load(spec)
            return plugin

    def plugins(self) -> list[ConnectorPlugin]:
        """Every plugin that can be loaded here (``GET /connector-plugins`` reflects this
        worker only, as in Kafka Connect); the others are logged, not listed."""
        out = []
        for spec in self.specs:
            try:
                out.append(self.load(spec))
            except PluginError as exc:
                log.warning("connector plugin %s is not available: %s", spec.name, exc)
        return out

    def check(
        self,
        raw: Mapping[str, Any],
        env: Mapping[str, str] | None = None,
        origin: Origin | None = None,
    ) -> CheckedConfig:
        """Validate a connector config, reporting every problem at once; ``origin`` says
        which providers its placeholders may use (default: the YAML file's)."""
        stored, problems = normalise_config(raw)
        result = CheckedConfig(None, stored, dict(stored), problems)
        cls_name = stored.get("connector.class")
        if not cls_name:
            problems.append(("connector.class", "is required"))
            return result
        try:
            plugin = self.resolve(cls_name)
        except PluginError as exc:
            problems.append(("connector.class", str(exc)))
            return result
        result.plugin = plugin
        result.warnings = plugin.config_def.unknown_keys(stored)
        resolved, provider_problems = resolve_config(stored, env, origin=origin)
        result.resolved = resolved
        problems.extend(provider_problems)
        unresolved = {k for k, _ in provider_problems}
        _, def_problems = plugin.config_def.validate(resolved)
        for key, reason in def_problems:
            fld = plugin.config_def.lookup(key)
            names = set(fld.all_names) if fld is not None else {key}
            if not names & unresolved:
                problems.append((key, reason))
        typos: list[Problem] = []
        problems.extend(p for p in transform_problems(resolved, typos) if p[0] not in unresolved)
        overrides = {
            k[len(PRODUCER_OVERRIDE) :]: v
            for k, v in resolved.items()
            if k.startswith(PRODUCER_OVERRIDE) and k not in unresolved
        }
        if overrides and not problems:
            from cdc.sinks.kafka import producer_problems  # the Kafka client only when needed

            problems.extend(producer_problems(overrides, PRODUCER_OVERRIDE))
        result.warnings += typos
        return result


def transform_problems(
    config: Mapping[str, Any], warnings: list[Problem] | None = None
) -> list[Problem]:
    """Every bad ``transforms.*`` / ``predicates.*`` setting, found by building the chain as
    the task would (and closing it): Kafka Connect refuses them when a config is validated,
    so a typo is a 400 or a ``tidemark validate`` error rather than a task that fails on
    start. Configs sent over REST reach this only after :mod:`worker.code_policy`, so
    no ``module:Class`` type is imported for them unless the worker allows it."""
    if not str(config.get("transforms") or "").strip():
        return []
    try:
        build_chain(config, warnings).close()
    except TransformConfigError as exc:
        return list(exc.errors)
    return []


@dataclass
class CheckedConfig:
    """A connector config as stored (placeholders kept) and as the connector will see it."""

    plugin: ConnectorPlugin | None
    stored: dict[str, str]
    resolved: dict[str, str]
    problems: list[Problem] = field(default_factory=list)
    #: likely typos among the keys the plugin does not define: shown, never fatal
    warnings: list[Problem] = field(default_factory=list)
    #: what the connection check found that will matter later (a server not set up for
    #: change data capture): shown, never fatal
    notices: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.plugin is not None and not self.problems


def _entry_point_specs() -> list[PluginSpec]:
    out = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        out.append(
            PluginSpec(
                ep.name,
                ep.value,
                extra=ep.extras[0] if ep.extras else None,
                version=getattr(dist, "version", None),
            )
        )
    return out


def _load(spec: PluginSpec) -> ConnectorPlugin:
    module_name, _, attr = spec.target.partition(":")
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, attr) if attr else module
    except ImportError as exc:
        hint = f" Install its driver: pip install 'tidemark[{spec.extra}]'" if spec.extra else ""
        raise PluginError(f"connector plugin {spec.name!r} cannot be loaded: {exc}.{hint}") from exc
    except AttributeError as exc:
        raise PluginError(f"connector plugin {spec.name!r}: {spec.target} not found") from exc
    if not (isinstance(cls, type) and issubclass(cls, Connector)):
        raise PluginError(f"connector plugin {spec.name!r}: {spec.target} is not a Connector")
    # The class declares its keys (``Connector.config_def``); anything else than a ConfigDef
    # leaves the worker's own keys only.
    cdef = cls.config_def if isinstance(cls.config_def, ConfigDef) else ConfigDef()
    return ConnectorPlugin(spec, cls, cdef.extend(WORKER_FIELDS), _offset_validator(spec, cls))


# -- config values ------------------------------------------------------------------------------


#: librdkafka takes it for ``bootstrap.servers`` (the last one set wins), so a client setting
#: under this name would reach another cluster with every check reading ``bootstrap.servers``
#: none the wiser
BROKER_LIST_ALIAS = "metadata.broker.list"


def normalise_config(raw: Mapping[str, Any]) -> tuple[dict[str, str], list[Problem]]:
    """Connect configs are string maps. YAML and JSON give numbers, booleans and lists; they
    become the strings Connect would hold (``true``, ``5432``, ``a,b``). Nested objects and
    nulls are refused, naming the key."""
    out: dict[str, str] = {}
    problems: list[Problem] = []
    for key, value in raw.items():
        if not isinstance(key, str) or not key:
            problems.append((str(key), "config keys must be non-empty strings"))
            continue
        if value is None:
            problems.append((key, "must not be null"))
        elif isinstance(value, dict):
            problems.append((key, "must be a string, number, boolean or list, not an object"))
        elif isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
            problems.append((key, "a list may hold only strings, numbers and booleans"))
        elif key == BROKER_LIST_ALIAS or key.endswith("." + BROKER_LIST_ALIAS):
            problems.append(
                (
                    key,
                    f"is librdkafka's other name for bootstrap.servers; write "
                    f"{key[: -len(BROKER_LIST_ALIAS)]}bootstrap.servers (the rules that keep the "
                    "worker's Kafka credentials on its own cluster read that name)",
                )
            )
        else:
            out[key] = scalar_text(value)
    return out, problems


def is_reference(value: str) -> bool:
    """The value is nothing but placeholders, so showing it reveals no secret."""
    return has_placeholder(value) and not PLACEHOLDER.sub("", value).strip()


def is_literal_secret(key: str, value: str, cdef: ConfigDef | None) -> bool:
    """A secret written out rather than referenced: a secret key's value, or a URL with a
    password under any key, that is not only placeholders. What the distributed config topic
    must not hold in clear (worker.sealing)."""
    if key == "name" or is_reference(value):
        return False
    return is_secret_key(key, cdef) or bool(url_passwords(value))


#: keys that say where a connector connects (or what reads its config): a kept secret or an
#: unchanged YAML placeholder would follow a new value of one of them to another host
_ENDPOINT_KEY = re.compile(
    r"(?:^|\.)(?:host|hostname|hosts|port|url|urls|servers|connection\.string|address"
    r"|addresses|endpoint)$|^connector\.class$"
)


def endpoint_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The endpoint keys (``database.hostname``, ``*.bootstrap.servers``, URLs, ...) whose
    value differs between two versions of a connector config."""
    keys = {k for k in (*before, *after) if _ENDPOINT_KEY.search(k)}
    return sorted(k for k in keys if before.get(k) != after.get(k))


def mask_config(config: Mapping[str, str], cdef: ConfigDef | None) -> dict[str, str]:
    """Secrets hidden for REST responses and logs. Kafka Connect returns configs as stored;
    tidemark deliberately does not. Pure placeholders (``${env:PGPASSWORD}``) stay visible."""
    return {
        k: (MASK if is_secret_key(k, cdef) and not is_reference(v) else mask_url_passwords(v))
        for k, v in config.items()
    }


# -- Kafka Connect's ConfigInfos ----------------------------------------------------------------

UNKNOWN_GROUP = "Unknown keys"


def config_infos(
    plugin: ConnectorPlugin,
    given: Mapping[str, str],
    problems: list[Problem],
    warnings: list[Problem],
    notices: Sequence[Problem] = (),
) -> dict[str, Any]:
    """The body of ``PUT /connector-plugins/{p}/config/validate``.

    Every accepted name is listed, aliases too (``topic.prefix``, ``table.whitelist``), so
    tooling that checks keys against the list accepts them. Errors of an alias are reported on
    its canonical key. Likely typos (``warnings``) never count as errors: each gets an entry of
    its own in the group "Unknown keys", with the suggestion as its documentation and no
    errors, and the top-level ``warnings`` list (a tidemark addition) repeats them as text,
    followed by the connection check's ``notices`` on keys the plugin defines.
    """
    cdef = plugin.config_def
    errors: dict[str, list[str]] = {}
    for key, msg in problems:
        fld = cdef.lookup(key)
        errors.setdefault(fld.name if fld else key, []).append(msg)
    entries = _config_entries(cdef, given, errors)
    for key, msg in warnings:
        text = f"{key} {msg}"
        entries.append(_entry(key, given.get(key), [], group=UNKNOWN_GROUP, doc=text))
    groups = list(dict.fromkeys(e["definition"]["group"] for e in entries))
    return {
        "name": plugin.class_name,
        "error_count": sum(len(e["value"]["errors"]) for e in entries),
        "groups": groups,
        "configs": entries,
        "warnings": [f"{key} {msg}" for key, msg in warnings]
        + [f"{key}: {msg}" for key, msg in notices],
    }


def config_definitions(plugin: ConnectorPlugin) -> list[dict[str, Any]]:
    """``GET /connector-plugins/{p}/config``: the definition of every accepted key."""
    return [entry["definition"] for entry in _config_entries(plugin.config_def, {}, {})]


def _config_entries(
    cdef: ConfigDef, given: Mapping[str, str], errors: dict[str, list[str]]
) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    errors = {k: list(v) for k, v in errors.items()}
    for f in cdef.fields.values():
        raw = next((given[n] for n in f.all_names if n in given), None)
        value = raw if raw is not None else _text(f.default)
        entries.append(
            _entry(
                f.name, value, errors.pop(f.name, []), field=f, secret=is_secret_key(f.name, cdef)
            )
        )
        for alias in f.aliases:
            doc = f"Another name for {f.name} (Debezium's older or newer spelling). {f.doc}"
            entries.append(
                _entry(
                    alias,
                    given.get(alias),
                    [],
                    field=f,
                    doc=doc.strip(),
                    default=None,
                    secret=is_secret_key(f.name, cdef),
                )
            )
    for key, msgs in errors.items():  # problems of keys the plugin does not define
        entries.append(_entry(key, given.get(key), msgs, group="Common", doc=""))
    order: dict[str, int] = {}
    for e in entries:
        group = e["definition"]["group"]
        order[group] = e["definition"]["order"] = order.get(group, 0) + 1
    return entries


_UNSET = object()


def _entry(
    name: str,
    value: str | None,
    errors: list[str],
    *,
    field: ConfigField | None = None,
    group: str | None = None,
    doc: str | None = None,
    default: Any = _UNSET,
    secret: bool = False,
) -> dict[str, Any]:
    """One ``ConfigInfo`` (``definition`` + ``value``), Kafka Connect's shape."""
    if field is not None and default is _UNSET:
        default = field.default
    return {
        "definition": {
            "name": name,
            "type": str(field.kind) if field else "STRING",
            "required": bool(field and field.required and name == field.name),
            "default_value": None if default is _UNSET else _text(default),
            "importance": field.importance if field else "LOW",
            "documentation": doc if doc is not None else (field.doc if field else ""),
            "group": group or (field.group if field else "Common"),
            "order": 0,
            "width": "NONE",
            "display_name": name,
            "dependents": [],
        },
        "value": {
            "name": name,
            "value": MASK if secret and value is not None else _shown(value),
            "recommended_values": field.recommended_values if field else [],
            "errors": errors,
            "visible": True,
        },
    }


def _shown(value: str | None) -> str | None:
    return None if value is None else mask_url_passwords(value)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


# -- offsets ------------------------------------------------------------------------------------


def _offset_validator(spec: PluginSpec, cls: type[Connector]) -> OffsetValidator:
    """``Connector.validate_offset`` (its default accepts any JSON object), problems listed."""
    check = cls.validate_offset

    def from_connector(
        partition: dict[str, Any], offset: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, list[str]]:
        checked, problems = check(partition, offset)
        return checked, list(problems)

    return from_connector
