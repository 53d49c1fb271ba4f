"""The apply job's configuration: one YAML file, validated up front.

Keys may be written nested (``kafka: {bootstrap.servers: ...}``) or dotted
(``kafka.bootstrap.servers: ...``); both flatten to the same dotted names. A few keys hold maps
of free-form names (``kafka.options``, ``target.tables``, ``spark.conf``) and are kept as maps.
Unknown keys are errors: a typo such as ``on.eror`` must not silently select the default.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, cast

import yaml

from cdc.apply.ordering import MysqlOrder, OrderingRules, SnapshotOrder
from cdc.kafka_security import KafkaSecurityError, librdkafka_config

Policy = Literal["evolve", "fail", "ignore"]
OnError = Literal["fail", "quarantine"]
SchemasMode = Literal["auto", "true", "false"]
InputFormat = Literal["auto", "json", "avro"]
TableType = Literal["copy-on-write", "merge-on-read"]

DEFAULT_PLACEHOLDER = "__debezium_unavailable_value"
DEFAULT_TOPIC_EXCLUDE = r"(^__debezium-heartbeat\..*)|(.*\.transaction$)|(^__.*)"

_MAP_KEYS = frozenset({"kafka.options", "kafka.direct.options", "target.tables", "spark.conf"})
KafkaReader = Literal["auto", "spark", "direct"]
#: the librdkafka settings the direct reader takes from kafka.options (after the Java security
#: names are translated, cdc/kafka_security.py); any other setting keeps the job on Spark's
#: reader under kafka.reader: auto, since librdkafka might not read it the way Java does
DIRECT_READER_KEYS = frozenset(
    {
        "client.id",
        "isolation.level",
        "fetch.max.bytes",
        "max.partition.fetch.bytes",
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "ssl.ca.location",
        "ssl.ca.pem",
        "ssl.certificate.location",
        "ssl.certificate.pem",
        "ssl.key.location",
        "ssl.key.pem",
        "ssl.key.password",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.endpoint.identification.algorithm",
    }
)


class ConfigError(ValueError):
    """The configuration is invalid; the message names the key."""


@dataclass(frozen=True)
class ApplyConfig:
    bootstrap_servers: str
    target_path: str
    checkpoint: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    topic_exclude: str = DEFAULT_TOPIC_EXCLUDE
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = 100_000
    fail_on_data_loss: bool = True
    #: secrets (SASL passwords, private keys) may be in these three: kept out of the repr
    kafka_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    kafka_reader: KafkaReader = "auto"
    kafka_direct_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    table_name: str = "{topic}"
    tables: Mapping[str, str] = field(default_factory=dict)
    trigger: str = "10 seconds"
    schemas: SchemasMode = "auto"
    input_format: InputFormat = "auto"
    registry_url: str | None = None
    registry_basic_auth: str | None = field(default=None, repr=False)
    schema_evolution: Policy = "evolve"
    on_error: OnError = "fail"
    quarantine_path: str | None = None
    deletes_compact_every: int | None = 100
    #: how long a Cassandra range delete guards later batches (ranges.py); Cassandra's default
    #: gc_grace_seconds, after which it purges the tombstone itself
    range_deletes_retention_ms: int | None = 864_000_000
    table_type: TableType = "copy-on-write"
    compaction_every: int | None = 10
    placeholders: tuple[str, ...] = (DEFAULT_PLACEHOLDER,)
    snapshot_order: SnapshotOrder = "before-stream"
    mysql_order: MysqlOrder = "binlog"
    ordering_fields: tuple[str, ...] = ()
    master: str | None = None
    app_name: str = "tidemark-apply"
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    jars: str | tuple[str, ...] = "auto"
    query_name: str | None = None

    @property
    def ordering(self) -> OrderingRules:
        return OrderingRules(self.snapshot_order, self.mysql_order, self.ordering_fields)

    def direct_options(self) -> tuple[tuple[str, str], ...] | None:
        """The librdkafka settings of the direct reader (``direct_reader``), or ``None`` when
        Spark's Kafka source reads the records: ``kafka.reader: spark``, or ``auto`` with a
        ``kafka.options`` setting that has no librdkafka equivalent (and no
        ``kafka.direct.options`` given in its place)."""
        if self.kafka_reader == "spark":
            return None
        options, problem = _librdkafka_options(self.kafka_options)
        if problem is not None and not self.kafka_direct_options:
            if self.kafka_reader == "direct":
                raise ConfigError(
                    f"kafka.reader is direct but kafka.options {problem}; give the librdkafka "
                    "settings under kafka.direct.options, or use kafka.reader: spark"
                )
            return None
        return tuple(sorted({**options, **self.kafka_direct_options}.items()))

    @property
    def quarantine_location(self) -> str:
        return self.quarantine_path or _join(self.target_path, "_tidemark", "quarantine")

    def table_location(self, table: str) -> str:
        return _join(self.target_path, table)

    def deletes_location(self, table: str) -> str:
        """The side table holding the ordering position of deleted keys (see merge.py)."""
        return _join(self.target_path, "_tidemark", "deletes", table)

    def keychanges_location(self, table: str) -> str:
        """The side table of primary-key change images and held rows (see handover.py)."""
        return _join(self.target_path, "_tidemark", "keychanges", table)

    def tombstones_location(self, table: str) -> str:
        """The side table of a Cassandra table's cell deletes (see tombstones.py)."""
        return _join(self.target_path, "_tidemark", "tombstones", table)

    def ranges_location(self, table: str) -> str:
        """The side table of a Cassandra table's range deletes (see ranges.py)."""
        return _join(self.target_path, "_tidemark", "ranges", table)

    def changes_location(self, table: str) -> str:
        """The change log of a merge-on-read table: batches appended since its last compaction
        (see changelog.py)."""
        return _join(self.target_path, "_tidemark", "changes", table)

    @property
    def merge_on_read(self) -> bool:
        return self.table_type == "merge-on-read"

    def with_overrides(self, **changes: Any) -> ApplyConfig:
        return replace(self, **changes)


def _librdkafka_options(options: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """kafka.options in librdkafka's terms, and what stops the direct reader from using them
    (``None``: nothing)."""
    try:
        native = librdkafka_config({k.removeprefix("kafka."): v for k, v in options.items()})
    except KafkaSecurityError as exc:
        key, reason = exc.problems[0]
        return {}, f"sets {key!r}: {reason}"
    known = {k: str(v) for k, v in native.items() if k in DIRECT_READER_KEYS}
    unknown = sorted(set(native) - set(known))
    if unknown:
        return known, f"sets {unknown[0]!r}, which the direct reader (librdkafka) does not take"
    return known, None


def _join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


def flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for raw_key, value in doc.items():
        key = f"{prefix}{raw_key}"
        if isinstance(value, Mapping) and key not in _MAP_KEYS:
            out.update(flatten(value, key + "."))
        else:
            out[key] = value
    return out


def load(path: str | Path, overrides: Mapping[str, Any] | None = None) -> ApplyConfig:
    try:
        doc = yaml.safe_load(Path(path).read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{path}: the top level must be a mapping of keys")
    return from_mapping(doc, overrides)


def from_mapping(doc: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> ApplyConfig:
    flat = flatten(doc)
    if overrides:
        flat.update(overrides)
    known = {spec.key for spec in _SPECS}
    unknown = sorted(k for k in flat if k not in known)
    if unknown:
        hints = []
        for key in unknown:
            meant = difflib.get_close_matches(key, sorted(known), 1, 0.8)
            hints.append(f"{key} (did you mean {meant[0]}?)" if meant else key)
        raise ConfigError(
            f"unknown configuration key(s): {', '.join(hints)}. Known keys: "
            + ", ".join(sorted(known))
        )
    kwargs: dict[str, Any] = {}
    for spec in _SPECS:
        if spec.key in flat:
            kwargs[spec.attr] = spec.parse(spec.key, flat[spec.key])
        elif spec.required:
            raise ConfigError(f"{spec.key} is required")
    cfg = ApplyConfig(**kwargs)
    if bool(cfg.topics) == bool(cfg.topic_pattern):
        raise ConfigError("set exactly one of kafka.topics and kafka.topic.pattern")
    _check_regex("kafka.topic.pattern", cfg.topic_pattern)
    _check_regex("kafka.topics.exclude", cfg.topic_exclude)
    _check_trigger(cfg.trigger)
    _check_starting_offsets(cfg.starting_offsets)
    _check_kafka_options(cfg.kafka_options)
    cfg.direct_options()  # kafka.reader: direct with Java-only options fails here
    if cfg.input_format == "avro" and not cfg.registry_url:
        raise ConfigError(
            "input.format is avro but schema.registry.url is not set: the writer schemas of "
            "Avro records are fetched from the registry"
        )
    if cfg.registry_basic_auth is not None and ":" not in cfg.registry_basic_auth:
        raise ConfigError("schema.registry.basic.auth.user.info must be user:password")
    if "{" in cfg.table_name:
        try:
            cfg.table_name.format(topic="t", server="s", db="d", schema="s", table="t")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(
                f"target.table.name {cfg.table_name!r}: unknown placeholder {exc}; use "
                "{topic}, {server}, {db}, {schema}, {table}"
            ) from None
    return cfg


def _check_starting_offsets(value: str) -> None:
    """Spark's ``startingOffsets``: earliest, latest, or a JSON object of offsets per topic
    and partition (Spark would refuse anything else only when the stream starts)."""
    if value.strip().lower() in ("earliest", "latest"):  # Spark lower-cases it
        return
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ConfigError(
            f"kafka.starting.offsets must be earliest, latest or a JSON object such as "
            f'{{"topic": {{"0": 23}}}}, not {value!r}'
        )


def _check_regex(key: str, value: str | None) -> None:
    if value is None:
        return
    try:
        re.compile(value)
    except re.error as exc:
        raise ConfigError(f"{key} is not a valid regular expression: {exc}") from None


def _check_kafka_options(options: Mapping[str, str]) -> None:
    """Each option reaches Spark's Kafka source as ``kafka.<name>``, so ``sasl.jaas.config``
    and ``kafka.sasl.jaas.config`` are the same setting: given both, one would silently win."""
    for key in options:
        bare = key.removeprefix("kafka.")
        if bare != key and bare in options:
            raise ConfigError(
                f"kafka.options sets {bare!r} twice, as {bare!r} and {key!r} (both become "
                f"Spark's kafka.{bare}); keep one"
            )


_TRIGGER_INTERVAL = re.compile(r"^\s*\d+(\.\d+)?\s*(ms|millisecond|second|minute|hour)s?\s*$")


def _check_trigger(value: str) -> None:
    if value in ("available-now", "once") or _TRIGGER_INTERVAL.match(value):
        return
    raise ConfigError(
        f"trigger {value!r}: use 'available-now', 'once' or an interval such as '10 seconds'"
    )


# -- key specifications ------------------------------------------------------------------------
@dataclass(frozen=True)
class _Spec:
    key: str
    attr: str
    kind: str
    required: bool = False
    choices: tuple[str, ...] = ()

    def parse(self, key: str, value: Any) -> Any:
        kind = self.kind
        if kind == "str":
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                raise ConfigError(f"{key} must be a string")
            text = str(value)
            if self.choices and text not in self.choices:
                raise ConfigError(f"{key} must be one of {', '.join(self.choices)}, not {text!r}")
            if self.required and not text.strip():
                # an empty target.path would put tables at the root of the filesystem
                raise ConfigError(f"{key} is required and may not be blank")
            return text
        if kind == "opt_str":
            return None if value is None else _Spec(key, self.attr, "str").parse(key, value)
        if kind == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            raise ConfigError(f"{key} must be true or false")
        if kind == "opt_int":
            if value is None or value == "none":
                return None
            # int() would turn 2.9 into 2 and true into 1
            if isinstance(value, bool) or not (
                isinstance(value, int) or (isinstance(value, str) and _DIGITS.fullmatch(value))
            ):
                raise ConfigError(f"{key} must be a whole number, got {value!r}")
            number = int(value)
            if number <= 0:
                raise ConfigError(f"{key} must be positive")
            return number
        if kind == "str_list":
            return _str_list(key, value)
        if kind == "str_map":
            if not isinstance(value, Mapping):
                raise ConfigError(f"{key} must be a mapping")
            return {str(k): _scalar_text(key, v) for k, v in value.items()}
        if kind == "jars":
            if value in ("auto", "none"):
                return value
            return _str_list(key, value)
        if kind == "bool_text":
            if isinstance(value, bool):
                return "true" if value else "false"
            text = str(value).lower()
            if text not in self.choices:
                raise ConfigError(f"{key} must be one of {', '.join(self.choices)}")
            return text
        raise AssertionError(kind)


_DIGITS = re.compile(r"\s*[+-]?[0-9]+\s*")


def _scalar_text(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise ConfigError(f"{key}: values must be scalars, not {type(value).__name__}")


def _str_list(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        items: Sequence[Any] = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, Sequence):
        items = value
    else:
        raise ConfigError(f"{key} must be a list of strings")
    out = []
    for item in items:
        if not isinstance(item, str) or not item:
            raise ConfigError(f"{key} must be a list of non-empty strings")
        out.append(item)
    return tuple(out)


_SPECS: tuple[_Spec, ...] = (
    _Spec("kafka.bootstrap.servers", "bootstrap_servers", "str", required=True),
    _Spec("kafka.topics", "topics", "str_list"),
    _Spec("kafka.topic.pattern", "topic_pattern", "opt_str"),
    _Spec("kafka.topics.exclude", "topic_exclude", "str"),
    _Spec("kafka.starting.offsets", "starting_offsets", "str"),
    _Spec("kafka.max.offsets.per.trigger", "max_offsets_per_trigger", "opt_int"),
    _Spec("kafka.fail.on.data.loss", "fail_on_data_loss", "bool"),
    _Spec("kafka.options", "kafka_options", "str_map"),
    _Spec("kafka.reader", "kafka_reader", "str", choices=("auto", "spark", "direct")),
    _Spec("kafka.direct.options", "kafka_direct_options", "str_map"),
    _Spec("target.path", "target_path", "str", required=True),
    _Spec("target.table.name", "table_name", "str"),
    _Spec("target.tables", "tables", "str_map"),
    _Spec("checkpoint.location", "checkpoint", "str", required=True),
    _Spec("trigger", "trigger", "str"),
    _Spec("schemas", "schemas", "bool_text", choices=("auto", "true", "false")),
    _Spec("input.format", "input_format", "str", choices=("auto", "json", "avro")),
    _Spec("schema.registry.url", "registry_url", "opt_str"),
    _Spec("schema.registry.basic.auth.user.info", "registry_basic_auth", "opt_str"),
    _Spec("schema.evolution", "schema_evolution", "str", choices=("evolve", "fail", "ignore")),
    _Spec("on.error", "on_error", "str", choices=("fail", "quarantine")),
    _Spec("quarantine.path", "quarantine_path", "opt_str"),
    _Spec("deletes.compact.every", "deletes_compact_every", "opt_int"),
    _Spec("range.deletes.retention.ms", "range_deletes_retention_ms", "opt_int"),
    _Spec("table.type", "table_type", "str", choices=("copy-on-write", "merge-on-read")),
    _Spec("compaction.every", "compaction_every", "opt_int"),
    _Spec("toast.placeholders", "placeholders", "str_list"),
    _Spec("ordering.snapshot", "snapshot_order", "str", choices=("before-stream", "by-position")),
    _Spec("ordering.mysql", "mysql_order", "str", choices=("binlog", "gtid")),
    _Spec("ordering.fields", "ordering_fields", "str_list"),
    _Spec("spark.master", "master", "opt_str"),
    _Spec("spark.app.name", "app_name", "str"),
    _Spec("spark.conf", "spark_conf", "str_map"),
    _Spec("spark.jars", "jars", "jars"),
    _Spec("query.name", "query_name", "opt_str"),
)

KNOWN_KEYS: tuple[str, ...] = tuple(s.key for s in _SPECS)


def parse_override(text: str) -> tuple[str, Any]:
    """``--set key=value`` from the command line; the value is read as YAML (so ``true``, ``5``
    and ``[a, b]`` work)."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key=value")
    key, _, raw = text.partition("=")
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), cast(Any, value)
