"""The SMT contract and the chain that runs a connector's transforms, as Kafka Connect defines them.

Connector configs name transforms the Kafka Connect way (``transforms=a,b``,
``transforms.a.type=...``, ``transforms.a.predicate=p``, ``predicates.p.type=...``) so that
existing Debezium configs work unchanged. Java class names and short aliases both resolve to
the Python implementations; an unknown name may also be a ``module:Class`` Python path, so users
can plug in their own transforms.

Config problems are collected across the whole chain and raised once, each naming its full key,
because fixing a connector config one error per restart is painful. Schema-derived work is
cached by schema *identity*: ``Schema.__hash__`` walks every field, which would cost more per
record than the transform itself, while the dispatcher hands out one schema object per table.
"""

from __future__ import annotations

import difflib
import importlib
import json
import logging
import re
import warnings
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from cdc.record import SourceRecord
from cdc.schema.model import Schema, struct
from cdc.transforms.java_text import java_float_text

LOG = logging.getLogger("tidemark.transforms")

ENVELOPE_SUFFIX = ".Envelope"

# -- errors ------------------------------------------------------------------------------------


class TransformConfigError(ValueError):
    """Every invalid key of a transform (or of a whole chain), each as ``(key, problem)``."""

    def __init__(self, errors: Iterable[tuple[str, str]]) -> None:
        self.errors: tuple[tuple[str, str], ...] = tuple(errors)
        lines = [f"{key}: {problem}" if key else problem for key, problem in self.errors]
        if len(lines) == 1:
            message = lines[0]
        else:
            message = f"{len(lines)} invalid transform settings: " + "; ".join(lines)
        super().__init__(message)

    def prefixed(self, prefix: str) -> TransformConfigError:
        """The same errors with keys made absolute (``delete.handling.mode`` becomes
        ``transforms.unwrap.delete.handling.mode``)."""
        return TransformConfigError(
            (prefix + key if key else prefix.rstrip("."), problem) for key, problem in self.errors
        )


class TransformError(RuntimeError):
    """A record the configured transform cannot handle; fails the task like Connect does."""


# -- the contract ------------------------------------------------------------------------------


class Transformation(ABC):
    """One SMT. ``configure`` receives only its own properties, prefix stripped (Connect's
    ``originalsWithPrefix``), and raises :class:`TransformConfigError` listing every bad key."""

    @abstractmethod
    def configure(self, config: Mapping[str, str]) -> None: ...

    def connector_context(self, connector_config: Mapping[str, Any]) -> None:
        """Called before :meth:`configure` with the whole connector config, for a transform
        whose defaults follow the connector's (``ExtractNewRecordState`` takes Debezium
        3.x's defaults under ``envelope.version=3``). Most ignore it."""
        return None

    @abstractmethod
    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """Return the (possibly new) record, or None to drop it. Must not mutate ``record``:
        the same object may still be referenced by the offset bookkeeping."""

    def close(self) -> None:
        return None


class Predicate(ABC):
    """Decides per record whether a transform runs (Kafka Connect KIP-585)."""

    def configure(self, config: Mapping[str, str]) -> None:
        return None

    @abstractmethod
    def test(self, record: SourceRecord) -> bool: ...

    def close(self) -> None:
        return None


# -- config access -----------------------------------------------------------------------------


class PluginConfig:
    """Typed reads of one plugin's properties that record problems instead of raising, so that
    ``check()`` can report all of them together. Strings are trimmed, as Kafka's ConfigDef
    does."""

    def __init__(self, config: Mapping[str, str]) -> None:
        self._config = config
        self.errors: list[tuple[str, str]] = []

    def error(self, key: str, problem: str) -> None:
        self.errors.append((key, problem))

    def check(self) -> None:
        if self.errors:
            raise TransformConfigError(self.errors)

    def raw(self, key: str) -> str | None:
        value = self._config.get(key)
        return None if value is None else str(value).strip()

    def string(self, key: str, default: str | None = None) -> str | None:
        value = self.raw(key)
        return default if value is None else value

    def required(self, key: str, *, allow_empty: bool = False) -> str:
        value = self.raw(key)
        if value is None or (value == "" and not allow_empty):
            self.error(key, "missing required configuration")
            return ""
        return value

    def boolean(self, key: str, default: bool) -> bool:
        """Unset is the default; set, it must say true or false (blank too: Kafka's BOOLEAN
        refuses an empty value rather than defaulting it)."""
        value = self.raw(key)
        if value is None:
            return default
        lowered = value.lower()
        if lowered not in ("true", "false"):
            self.error(key, f"must be true or false, got {value!r}")
            return default
        return lowered == "true"

    def choice(self, key: str, choices: Sequence[str], default: str) -> str:
        value = self.raw(key)
        if value is None:
            return default
        lowered = value.lower()
        if lowered not in choices:
            self.error(key, "must be one of " + ", ".join(choices))
            return default
        return lowered

    def items(self, key: str) -> list[str]:
        """A Connect LIST: comma separated, blanks ignored."""
        value = self.raw(key)
        if not value:
            return []
        return [item.strip() for item in value.split(",") if item.strip()]

    def regex(
        self, key: str, default: str | None = None, *, required: bool = False
    ) -> re.Pattern[str] | None:
        """A Java regular expression, translated to Python's ``re``; None when absent."""
        value = self.required(key) if required else self.string(key, default)
        if not value:
            return None
        try:
            return compile_java_regex(value)
        except re.error as exc:
            self.error(key, f"invalid regular expression {value!r}: {exc}")
            return None


def compile_java_regex(pattern: str) -> re.Pattern[str]:
    """Compile a ``java.util.regex`` pattern. The syntaxes agree except for named groups
    (``(?<name>...)``, ``\\k<name>``), which Debezium's own defaults use; anything else
    Java-only fails to compile and is reported as a config error, never reinterpreted."""
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            if not in_class and pattern[i + 1] == "k" and pattern.startswith("<", i + 2):
                end = pattern.find(">", i + 3)
                if end != -1:
                    out.append(f"(?P={pattern[i + 3 : end]})")
                    i = end + 1
                    continue
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            # A leading ']' (or '^]') is a literal inside the class.
            lead = (
                2 if pattern.startswith("]", i + 1) else 3 if pattern.startswith("^]", i + 1) else 0
            )
            if lead:
                out.append(pattern[i : i + lead])
                i += lead
                continue
        elif c == "(" and pattern.startswith("?<", i + 1) and pattern[i + 3 : i + 4].isalpha():
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    with warnings.catch_warnings():
        # Python warns where Java means nested classes or intersections ([a-z&&[^b]]); the
        # meaning would differ silently, so refuse the pattern instead.
        warnings.simplefilter("error", FutureWarning)
        try:
            return re.compile("".join(out))
        except FutureWarning as exc:
            raise re.error(f"Java character class syntax is not supported ({exc})") from None


# -- helpers shared by the transforms ----------------------------------------------------------


def is_envelope(schema: Schema | None) -> bool:
    """Debezium's test for a change event: the value schema is named ``*.Envelope``. Heartbeats,
    schema changes and transaction events pass through transforms untouched."""
    return schema is not None and schema.name is not None and schema.name.endswith(ENVELOPE_SUFFIX)


def header_bytes(value: Any) -> bytes:
    """Encode a header value the way Kafka Connect's ``SimpleHeaderConverter`` renders it
    (strings raw, numbers and booleans as text, a double as Java's ``Double.toString``,
    structs as JSON). ``SourceRecord`` headers
    are bytes, so a null value becomes empty bytes."""
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, bool):
        return b"true" if value else b"false"
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, float):
        return java_float_text(value).encode()
    if isinstance(value, dict | list):
        return json.dumps(value, default=str, separators=(",", ":")).encode()
    return str(value).encode()


def copy_basics(schema: Schema, fields: list[tuple[str, Schema]]) -> Schema:
    """A struct with ``fields`` and the name, version, doc and parameters of ``schema``;
    required, as Connect's ``copySchemaBasics`` leaves the builder."""
    return struct(
        fields,
        name=schema.name,
        version=schema.version,
        doc=schema.doc,
        parameters=schema.parameters,
    )


V = TypeVar("V")


class SchemaCache(Generic[V]):
    """Per-schema derived values keyed by schema identity (plus an optional extra key). The
    schema is held by the entry, so its ``id`` cannot be reused while cached. Bounded: a
    connector sees a handful of schemas per table, so a full cache is simply cleared."""

    __slots__ = ("_entries", "_max_size")

    def __init__(self, max_size: int = 512) -> None:
        self._entries: dict[tuple[int, Hashable], tuple[Schema, V]] = {}
        self._max_size = max_size

    def get(self, schema: Schema, extra: Hashable = None) -> V | None:
        entry = self._entries.get((id(schema), extra))
        if entry is not None and entry[0] is schema:
            return entry[1]
        return None

    def put(self, schema: Schema, value: V, extra: Hashable = None) -> V:
        if len(self._entries) >= self._max_size:
            self._entries.clear()
        self._entries[(id(schema), extra)] = (schema, value)
        return value


# -- the chain ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stage:
    """A transform plus the optional predicate that gates it (Connect's TransformationStage)."""

    alias: str
    transformation: Transformation
    predicate: Predicate | None = None
    negate: bool = False


class TransformChain:
    """Runs the stages in order; a stage returning None drops the record and ends the chain."""

    __slots__ = ("_predicates", "_stages")

    def __init__(self, stages: Sequence[Stage] = (), predicates: Sequence[Predicate] = ()) -> None:
        self._stages = tuple(stages)
        self._predicates = tuple(predicates)

    @property
    def aliases(self) -> tuple[str, ...]:
        return tuple(stage.alias for stage in self._stages)

    @property
    def stages(self) -> tuple[Stage, ...]:
        return self._stages

    def __len__(self) -> int:
        return len(self._stages)

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        stages = self._stages
        if not stages:
            return record
        for stage in stages:
            predicate = stage.predicate
            if predicate is not None and predicate.test(record) == stage.negate:
                continue
            result = stage.transformation.apply(record)
            if result is None:
                return None
            record = result
        return record

    def apply_all(self, records: Iterable[SourceRecord]) -> list[SourceRecord]:
        if not self._stages:
            return list(records)
        out = []
        for record in records:
            result = self.apply(record)
            if result is not None:
                out.append(result)
        return out

    def close(self) -> None:
        for stage in self._stages:
            stage.transformation.close()
        for predicate in self._predicates:
            predicate.close()


# -- plugin registry ---------------------------------------------------------------------------

# Targets are import paths so that building a chain imports only the transforms it uses.
_TRANSFORMS: dict[str, str] = {}
_PREDICATES: dict[str, str] = {}


def register_transformation(target: str, *names: str) -> None:
    """Make ``target`` (``module:Class``) available under each of ``names``."""
    for name in names:
        _TRANSFORMS[name] = target


def is_built_in(name: str, kind: str = "transformation") -> bool:
    """Whether ``name`` (a ``type`` value) names one of tidemark's own transformations (or
    predicates), as opposed to a ``module:Class`` path to import."""
    registry = _TRANSFORMS if kind == "transformation" else _PREDICATES
    name = name.strip()
    return name in registry or name.lower() in registry


def class_names() -> tuple[list[str], list[str]]:
    """The Java class names transformations and predicates are known by (for the REST API's
    plugin list), without the snake_case aliases."""
    return (
        sorted(n for n in _TRANSFORMS if "." in n),
        sorted(n for n in _PREDICATES if "." in n),
    )


def register_predicate(target: str, *names: str) -> None:
    for name in names:
        _PREDICATES[name] = target


register_transformation(
    "cdc.transforms.unwrap:ExtractNewRecordState",
    "io.debezium.transforms.ExtractNewRecordState",
    "unwrap",
    "extract_new_record_state",
)
register_transformation(
    "cdc.transforms.router:RegexRouter",
    "org.apache.kafka.connect.transforms.RegexRouter",
    "route",
    "regex_router",
)
register_transformation(
    "cdc.transforms.router:ByLogicalTableRouter",
    "io.debezium.transforms.ByLogicalTableRouter",
    "reroute",
    "by_logical_table_router",
    "logical_table_router",
)
register_transformation("cdc.transforms.filter:Filter", "io.debezium.transforms.Filter", "filter")
register_transformation(
    "cdc.transforms.outbox:EventRouter",
    "io.debezium.transforms.outbox.EventRouter",
    "outbox",
    "event_router",
    "outbox_event_router",
)
register_transformation(
    "cdc.transforms.partition_routing:PartitionRouting",
    "io.debezium.transforms.partitions.PartitionRouting",
    "partition_routing",
)
register_transformation(
    "cdc.transforms.timezone:TimezoneConverter",
    "io.debezium.transforms.TimezoneConverter",
    "timezone_converter",
)
register_transformation(
    "cdc.transforms.schema_change_filter:SchemaChangeEventFilter",
    "io.debezium.transforms.SchemaChangeEventFilter",
    "schema_change_event_filter",
)
_KAFKA_TRANSFORMS = "org.apache.kafka.connect.transforms."
register_transformation("cdc.transforms.filter:DropRecord", _KAFKA_TRANSFORMS + "Filter")
# Kafka's key/value pairs: Java's nested class names, and snake_case aliases (``insert_field``
# for the value side, ``insert_field_key`` for the key side).
for _module, _java, _alias, _sides in (
    ("fields", "InsertField", "insert_field", True),
    ("fields", "ReplaceField", "replace_field", True),
    ("fields", "MaskField", "mask_field", True),
    ("fields", "ExtractField", "extract_field", True),
    ("fields", "HoistField", "hoist_field", True),
    ("fields", "ValueToKey", "value_to_key", False),
    ("reshape", "Flatten", "flatten", True),
    ("reshape", "Cast", "cast", True),
    ("reshape", "SetSchemaMetadata", "set_schema_metadata", True),
    ("timestamps", "TimestampConverter", "timestamp_converter", True),
    ("headers", "HeaderFrom", "header_from", True),
    ("headers", "InsertHeader", "insert_header", False),
    ("headers", "DropHeaders", "drop_headers", False),
):
    _target = f"cdc.transforms.{_module}:{_java}"
    if _sides:
        register_transformation(_target, f"{_KAFKA_TRANSFORMS}{_java}$Value", _alias)
        register_transformation(_target + "Key", f"{_KAFKA_TRANSFORMS}{_java}$Key", _alias + "_key")
    else:
        register_transformation(_target, _KAFKA_TRANSFORMS + _java, _alias)
_KAFKA_PREDICATES = "org.apache.kafka.connect.transforms.predicates."
register_predicate(
    "cdc.transforms.predicates:TopicNameMatches",
    _KAFKA_PREDICATES + "TopicNameMatches",
    "topic_name_matches",
)
register_predicate(
    "cdc.transforms.predicates:HasHeaderKey", _KAFKA_PREDICATES + "HasHeaderKey", "has_header_key"
)
register_predicate(
    "cdc.transforms.predicates:RecordIsTombstone",
    _KAFKA_PREDICATES + "RecordIsTombstone",
    "record_is_tombstone",
)

P = TypeVar("P", Transformation, Predicate)
# Abstract classes are fine here: they are only used for issubclass checks.
_TRANSFORM_BASE: type[Transformation] = Transformation  # type: ignore[type-abstract]
_PREDICATE_BASE: type[Predicate] = Predicate  # type: ignore[type-abstract]


def _load(name: str, registry: Mapping[str, str], base: type[P], kind: str) -> type[P] | str:
    """The class for ``name``, or the reason there is none."""
    target = registry.get(name) or registry.get(name.lower())
    if target is None:
        if ":" not in name:
            known = ", ".join(sorted(k for k in registry if "." not in k))
            return f"unknown {kind} type {name!r} (known aliases: {known}; or a module:Class path)"
        target = name
    module_name, _, attr = target.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), attr)
    except Exception as exc:  # any import failure is a config problem of this key
        return f"cannot load {kind} type {name!r}: {exc}"
    if not (isinstance(found, type) and issubclass(found, base)):
        return f"{name!r} is not a {base.__name__} subclass"
    return found


# -- building a chain from connector config ----------------------------------------------------


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(_text(v) for v in value)
    return str(value)


def _aliases(config: Mapping[str, Any], key: str, errors: list[tuple[str, str]]) -> list[str]:
    raw = config.get(key)
    if raw is None:
        return []
    aliases = [a.strip() for a in _text(raw).split(",") if a.strip()]
    duplicates = sorted({a for a in aliases if aliases.count(a) > 1})
    if duplicates:
        errors.append((key, "duplicate alias " + ", ".join(duplicates)))
    return list(dict.fromkeys(aliases))


def _sub_config(config: Mapping[str, Any], prefix: str) -> dict[str, str]:
    return {
        k[len(prefix) :]: _text(v)
        for k, v in config.items()
        if k.startswith(prefix) and v is not None
    }


class _ReadKeys(dict[str, str]):
    """A plugin's settings that note which keys the plugin asked for while it configured
    itself, so a setting it never read and that is one letter off one it did
    (``delete.handling.mod``) can be named: Kafka Connect ignores it without a word, and the
    default silently applies. A plugin that walks all its keys reads them all."""

    def __init__(self, values: Mapping[str, str]) -> None:
        super().__init__(values)
        self.read: set[str] = set()
        self.whole = False

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.read.add(key)
        return super().__contains__(key)

    def __iter__(self) -> Any:
        self.whole = True
        return super().__iter__()

    def keys(self) -> Any:
        self.whole = True
        return super().keys()

    def items(self) -> Any:
        self.whole = True
        return super().items()

    def unread_typos(self) -> list[tuple[str, str]]:
        """(key, the key it is likely a misspelling of) for each setting never read."""
        if self.whole:
            return []
        out = []
        for key in dict.keys(self):
            if key in self.read or key == "type":
                continue
            found = difflib.get_close_matches(key, sorted(self.read - {"type"}), 1, 0.8)
            if found:
                out.append((key, found[0]))
        return out


def _instantiate(
    sub: dict[str, str],
    prefix: str,
    registry: Mapping[str, str],
    base: type[P],
    kind: str,
    errors: list[tuple[str, str]],
    connector_config: Mapping[str, Any] | None = None,
    warnings: list[tuple[str, str]] | None = None,
) -> P | None:
    type_name = sub.get("type", "").strip()
    if not type_name:
        errors.append((prefix + "type", "missing required configuration"))
        return None
    cls = _load(type_name, registry, base, kind)
    if isinstance(cls, str):
        errors.append((prefix + "type", cls))
        return None
    plugin = cls()
    if connector_config is not None and isinstance(plugin, Transformation):
        plugin.connector_context(connector_config)
    settings = _ReadKeys(sub)
    try:
        plugin.configure(settings)
    except TransformConfigError as exc:
        errors.extend(exc.prefixed(prefix).errors)
        return None
    except ValueError as exc:
        errors.append((prefix.rstrip("."), str(exc)))
        return None
    if warnings is not None:
        for key, meant in settings.unread_typos():
            warnings.append(
                (
                    prefix + key,
                    f"is not a setting of {type_name}; did you mean `{prefix}{meant}`? (ignored)",
                )
            )
    return plugin


def build_chain(
    connector_config: Mapping[str, Any], warnings: list[tuple[str, str]] | None = None
) -> TransformChain:
    """Build the transform chain a connector config describes; raise
    :class:`TransformConfigError` naming every invalid key of every transform and predicate.
    ``warnings`` collects the settings no plugin read that look like misspellings."""
    errors: list[tuple[str, str]] = []
    transform_aliases = _aliases(connector_config, "transforms", errors)
    if not transform_aliases and not errors:
        return TransformChain()

    predicates: dict[str, Predicate] = {}
    broken_predicates: set[str] = set()
    for alias in _aliases(connector_config, "predicates", errors):
        prefix = f"predicates.{alias}."
        sub = _sub_config(connector_config, prefix)
        predicate = _instantiate(
            sub, prefix, _PREDICATES, _PREDICATE_BASE, "predicate", errors, None, warnings
        )
        if predicate is None:
            broken_predicates.add(alias)
        else:
            predicates[alias] = predicate

    stages: list[Stage] = []
    for alias in transform_aliases:
        prefix = f"transforms.{alias}."
        sub = _sub_config(connector_config, prefix)
        predicate_alias = sub.pop("predicate", "").strip()
        negate_text = sub.pop("negate", None)
        negate = False
        if negate_text is not None and negate_text.strip():
            if negate_text.strip().lower() not in ("true", "false"):
                errors.append((prefix + "negate", f"must be true or false, got {negate_text!r}"))
            negate = negate_text.strip().lower() == "true"
            if not predicate_alias:
                errors.append(
                    (prefix + "negate", f"is set but no {prefix}predicate names what to negate")
                )
        predicate = None
        if predicate_alias:
            predicate = predicates.get(predicate_alias)
            if predicate is None and predicate_alias not in broken_predicates:
                errors.append(
                    (
                        prefix + "predicate",
                        f"unknown predicate {predicate_alias!r} (not listed in 'predicates')",
                    )
                )
        transformation = _instantiate(
            sub,
            prefix,
            _TRANSFORMS,
            _TRANSFORM_BASE,
            "transformation",
            errors,
            connector_config,
            warnings,
        )
        if transformation is not None:
            stages.append(Stage(alias, transformation, predicate, negate))

    chain = TransformChain(stages, tuple(predicates.values()))
    if errors:
        chain.close()
        raise TransformConfigError(errors)
    return chain
