"""The worker's YAML file: worker settings (a pydantic model) and the connectors it hosts.

Loading reports every problem at once, each with its YAML path
(``worker.rest.port: Input should be a valid integer``,
``connectors[0].config.database.port: must be an integer``), because a daemon that stops at the
first error makes people fix a config one restart at a time. Worker keys are Kafka Connect's
dotted names; unknown keys are errors, since a misspelt ``offset.flush.interval.ms`` would
otherwise be silently ignored. Connector configs are checked by the connector's own
``ConfigDef``, the same check ``PUT /connector-plugins/{p}/config/validate`` runs.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from cdc.errors import ConfigError
from cdc.kafka_security import SECURITY_PREFIXES, librdkafka_config, security_settings
from worker.config_providers import (
    TRUSTED,
    Provider,
    Resolver,
    declared_providers,
    installed,
    resolve_tree,
    rest_default,
    scalar_text,
)
from worker.registry import PluginError, Registry, is_literal_secret
from worker.sealing import key_problem

Problem = tuple[str, str]


class WorkerConfigError(Exception):
    """Every problem of a worker config, each as ``(yaml path, message)``."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  {path}: {msg}" if path else f"  {msg}" for path, msg in problems)
        n = len(problems)
        super().__init__(f"{source}: {n} problem{'s' if n != 1 else ''}:\n{lines}")


def _port_in_range(url: str | None) -> str | None:
    port = re.search(r":(\d+)/?$", url or "")
    if port and not 0 <= int(port.group(1)) <= 65535:
        raise ValueError(f"{url!r}: the port must be from 0 (any free port) to 65535")
    return url


class WorkerSettings(BaseModel):
    """The ``worker:`` section. Field aliases are the YAML keys (Kafka Connect's names)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    bootstrap_servers: str = Field("127.0.0.1:9092", alias="bootstrap.servers", min_length=1)
    rest_host: str = Field("127.0.0.1", alias="rest.host", min_length=1)
    rest_port: int = Field(8083, alias="rest.port", ge=0, le=65535)
    rest_advertised_url: str | None = Field(None, alias="rest.advertised.url")
    state_dir: Path = Field(Path(".tidemark/worker"), alias="state.dir")
    offset_storage: Literal["file", "kafka", "memory"] = Field("file", alias="offset.storage")
    offset_storage_topic: str = Field("tidemark-offsets", alias="offset.storage.topic")
    offset_storage_partitions: int = Field(25, alias="offset.storage.partitions", ge=1)
    offset_storage_replication_factor: int = Field(
        1, alias="offset.storage.replication.factor", ge=-1
    )
    offset_flush_interval_ms: int = Field(5000, alias="offset.flush.interval.ms", ge=1)
    offset_flush_timeout_ms: int = Field(5000, alias="offset.flush.timeout.ms", ge=1)
    task_shutdown_graceful_timeout_ms: int = Field(
        30000, alias="task.shutdown.graceful.timeout.ms", ge=100
    )
    exactly_once_source_support: Literal["disabled", "enabled"] = Field(
        "disabled", alias="exactly.once.source.support"
    )
    producer: dict[str, str | int | float | bool] = Field(default_factory=dict)
    consumer: dict[str, str | int | float | bool] = Field(default_factory=dict)
    admin: dict[str, str | int | float | bool] = Field(default_factory=dict)
    # ``security.protocol``, ``ssl.*`` and ``sasl.*`` written at the worker level (Kafka
    # Connect's layout): every Kafka client of the worker gets them, ``producer.*``,
    # ``consumer.*`` and ``admin.*`` override them for one client.
    kafka_security: dict[str, str | int | float | bool] = Field(default_factory=dict)

    log_level: Literal["TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR"] = Field(
        "INFO", alias="log.level"
    )
    #: ``text`` lines, or ``json``: one object per line for log collectors
    log_format: Literal["text", "json"] = Field("text", alias="log.format")
    # -- REST security (docs/security.md) ----------------------------------------------------
    listeners: str | None = Field(None, alias="listeners", pattern=r"^https?://[^/]+:\d+/?$")
    ssl_keystore_location: Path | None = Field(None, alias="listeners.https.ssl.keystore.location")
    ssl_keystore_type: Literal["PEM"] = Field("PEM", alias="listeners.https.ssl.keystore.type")
    ssl_key_password: str | None = Field(None, alias="listeners.https.ssl.key.password")
    ssl_truststore_location: Path | None = Field(
        None, alias="listeners.https.ssl.truststore.location"
    )
    ssl_truststore_type: Literal["PEM"] = Field("PEM", alias="listeners.https.ssl.truststore.type")
    ssl_client_auth: Literal["none", "requested", "required"] = Field(
        "none", alias="listeners.https.ssl.client.auth"
    )
    basic_auth_credentials_file: Path | None = Field(None, alias="rest.basic.auth.credentials.file")
    basic_auth_readonly_users: list[str] = Field(
        default_factory=list, alias="rest.basic.auth.readonly.users"
    )
    #: whether configs sent over REST may carry Python code: a Debezium Filter ``condition``
    #: or a ``module:Class`` transform or predicate type (docs/security.md)
    rest_allow_python_transforms: bool = Field(False, alias="rest.allow.python.transforms")
    #: files and directories, besides ``<state.dir>/files``, that paths in configs sent over
    #: REST may name (schema history and signal files, Cassandra directories, client keys;
    #: worker.path_policy, docs/security.md)
    rest_allowed_paths: list[Path] = Field(default_factory=list, alias="rest.allowed.paths")
    #: whether a create or update over REST (and ``.../config/validate``) first connects to
    #: the database with the config, as Kafka Connect does with Debezium's connectors
    #: (worker.connection_check); false stores configs the database would refuse
    rest_validate_connections: bool = Field(True, alias="rest.validate.connections")
    metrics_listener: str | None = Field(
        None, alias="metrics.listener", pattern=r"^http://[^/]+:\d+/?$"
    )
    rest_allow_unauthenticated_remote: bool = Field(
        False, alias="rest.allow.unauthenticated.remote"
    )
    # -- distributed mode (docs/distributed.md) ---------------------------------------------
    mode: Literal["standalone", "distributed"] = Field("standalone", alias="mode")
    group_id: str = Field("tidemark-cluster", alias="group.id", min_length=1)
    config_storage_topic: str = Field("tidemark-configs", alias="config.storage.topic")
    config_storage_replication_factor: int = Field(
        1, alias="config.storage.replication.factor", ge=-1
    )
    status_storage_topic: str = Field("tidemark-status", alias="status.storage.topic")
    status_storage_partitions: int = Field(5, alias="status.storage.partitions", ge=1)
    status_storage_replication_factor: int = Field(
        1, alias="status.storage.replication.factor", ge=-1
    )
    assignment_storage_topic: str = Field("tidemark-assignments", alias="assignment.storage.topic")
    session_timeout_ms: int = Field(10000, alias="session.timeout.ms", ge=1000)
    heartbeat_interval_ms: int = Field(3000, alias="heartbeat.interval.ms", ge=100)
    rebalance_timeout_ms: int = Field(60000, alias="rebalance.timeout.ms", ge=1000)
    #: seals connector secrets before they are written to the config topic; every worker of
    #: the group needs the same key (worker.sealing, docs/distributed.md)
    config_storage_encryption_key: SecretStr | None = Field(
        None, alias="config.storage.encryption.key"
    )
    #: earlier keys, to open values sealed before the key changed
    config_storage_encryption_previous_keys: list[SecretStr] = Field(
        default_factory=list, alias="config.storage.encryption.previous.keys"
    )
    # Kafka Connect defaults to 300000; tidemark to 0, so a dead worker's tasks move within
    # session.timeout.ms (docs/distributed.md, "Waiting for a departed worker").
    scheduled_rebalance_max_delay_ms: int = Field(0, alias="scheduled.rebalance.max.delay.ms", ge=0)

    @model_validator(mode="before")
    @classmethod
    def _distributed_offsets(cls, data: Any) -> Any:
        """Distributed workers share offsets through Kafka: that is the default there."""
        if isinstance(data, dict) and data.get("mode") == "distributed":
            data = {"offset.storage": "kafka", **data}
        return data

    @model_validator(mode="after")
    def _check_distributed(self) -> WorkerSettings:
        if self.mode != "distributed":
            return self
        if self.offset_storage != "kafka":
            raise ValueError(
                "mode: distributed keeps offsets in Kafka, where every worker reads them; "
                f"offset.storage must be kafka, not {self.offset_storage}"
            )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                f"heartbeat.interval.ms ({self.heartbeat_interval_ms}) must be lower than "
                f"session.timeout.ms ({self.session_timeout_ms}), typically a third of it"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _split_lists(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("rest.basic.auth.readonly.users"), str):
            users = data["rest.basic.auth.readonly.users"].split(",")
            data = {**data, "rest.basic.auth.readonly.users": [u.strip() for u in users if u]}
        return data

    @model_validator(mode="after")
    def _check_https(self) -> WorkerSettings:
        https = (self.listeners or "").startswith("https://")
        if https and self.ssl_keystore_location is None:
            raise ValueError(
                "listeners=https://... needs listeners.https.ssl.keystore.location (a PEM file "
                "with the private key and the certificate chain)"
            )
        if self.ssl_client_auth != "none" and self.ssl_truststore_location is None:
            raise ValueError(
                "listeners.https.ssl.client.auth needs listeners.https.ssl.truststore.location "
                "(the PEM CA that signs client certificates)"
            )
        return self

    @field_validator("config_storage_encryption_previous_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [k.strip() for k in value.split(",") if k.strip()]
        return value

    @field_validator("config_storage_encryption_key", "config_storage_encryption_previous_keys")
    @classmethod
    def _sealing_keys(cls, value: Any) -> Any:
        for key in value if isinstance(value, list) else [value]:
            problem = key_problem(key.get_secret_value()) if key is not None else None
            if problem:
                raise ValueError(problem)
        return value

    @field_validator("rest_allowed_paths", mode="before")
    @classmethod
    def _split_paths(cls, value: Any) -> Any:
        """A YAML list, or Kafka's comma-separated form (like ``allowed.paths``)."""
        if isinstance(value, str):
            return [p.strip() for p in value.split(",") if p.strip()]
        return value

    @field_validator("rest_advertised_url")
    @classmethod
    def _advertised_url(cls, value: str | None) -> str | None:
        """The URL other workers reach this one's REST API at (its worker id)."""
        if value is not None and not re.fullmatch(
            r"https?://(\[[0-9A-Fa-f:.]+\]|[^/:\s\[\]]+)(:\d{1,5})?/?", value
        ):
            raise ValueError(f"{value!r} is not a URL of the form http(s)://<host>:<port>")
        return _port_in_range(value)

    @field_validator("listeners", "metrics_listener")
    @classmethod
    def _listener_port(cls, value: str | None) -> str | None:
        return _port_in_range(value)

    @field_validator(
        "offset_storage_partitions",
        "offset_storage_replication_factor",
        "offset_flush_interval_ms",
        "offset_flush_timeout_ms",
        "task_shutdown_graceful_timeout_ms",
        "rest_port",
        "config_storage_replication_factor",
        "status_storage_partitions",
        "status_storage_replication_factor",
        "session_timeout_ms",
        "heartbeat_interval_ms",
        "rebalance_timeout_ms",
        "scheduled_rebalance_max_delay_ms",
        mode="before",
    )
    @classmethod
    def _no_boolean_numbers(cls, value: Any) -> Any:
        """YAML's true is a bool, which pydantic would take as the number 1."""
        if isinstance(value, bool):
            raise ValueError(f"must be a number, not {str(value).lower()}")
        return value

    @field_validator(
        "offset_storage_replication_factor",
        "config_storage_replication_factor",
        "status_storage_replication_factor",
    )
    @classmethod
    def _replication_factor(cls, value: int) -> int:
        if value == 0:
            raise ValueError("must be -1 (the broker's default) or at least 1")
        return value

    @field_validator(
        "offset_storage_topic",
        "config_storage_topic",
        "status_storage_topic",
        "assignment_storage_topic",
        "state_dir",
        mode="before",
    )
    @classmethod
    def _not_blank(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError("may not be empty")
        return value

    @property
    def rest_scheme(self) -> str:
        return (self.listeners or "http://").split("://", 1)[0]

    @property
    def rest_bind(self) -> tuple[str, int]:
        """``(host, port)`` of ``listeners`` when given, else ``rest.host``/``rest.port``."""
        if not self.listeners:
            return self.rest_host, self.rest_port
        hostport = self.listeners.split("://", 1)[1].rstrip("/")
        host, _, port = hostport.rpartition(":")
        return host.strip("[]") or "0.0.0.0", int(port)

    @property
    def rest_authenticated(self) -> bool:
        return self.basic_auth_credentials_file is not None or self.ssl_client_auth == "required"

    # ``config.providers`` and every ``config.providers.<name>.*`` key, as given (checked by
    # parse_config with their YAML paths).
    config_providers: dict[str, str] = Field(default_factory=dict, alias="config.providers")

    @model_validator(mode="before")
    @classmethod
    def _group_providers(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        group = {
            k: scalar_text(v)
            for k, v in data.items()
            if isinstance(k, str) and k.startswith("config.providers") and not isinstance(v, dict)
        }
        if group:
            data = {k: v for k, v in data.items() if k not in group}
            data["config.providers"] = group
        return data

    def declared_providers(self) -> dict[str, Provider]:
        return declared_providers(self.config_providers, "worker")[0]

    def rest_providers(self) -> dict[str, Provider]:
        """What configs sent over REST may use: the declared providers, or files under
        ``<state.dir>/secrets`` when none are declared."""
        if "config.providers" in self.config_providers:
            return self.declared_providers()
        return rest_default(self.state_dir)

    def trusted_providers(self) -> dict[str, Provider]:
        """What the YAML file's connectors may use: file, env and dir without limits, and the
        other declared names."""
        return {**self.declared_providers(), **TRUSTED}

    @property
    def exactly_once(self) -> bool:
        return self.exactly_once_source_support == "enabled"

    def producer_config(self) -> dict[str, Any]:
        return self.client_config("producer")

    @model_validator(mode="before")
    @classmethod
    def _group_kafka_clients(cls, data: Any) -> Any:
        """Flat Kafka Connect keys (``sasl.mechanism``, ``producer.linger.ms``) into their
        maps; the nested form (``producer: {linger.ms: 5}``) is accepted as well."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for key in [k for k in data if isinstance(k, str)]:
            if key.startswith(SECURITY_PREFIXES):
                data.setdefault("kafka_security", {})[key] = data.pop(key)
                continue
            client, _, rest = key.partition(".")
            if client in ("producer", "consumer", "admin") and rest:
                nested = data.get(client)
                data[client] = {**(nested if isinstance(nested, dict) else {}), rest: data.pop(key)}
        return data

    @model_validator(mode="after")
    def _check_kafka_security(self) -> WorkerSettings:
        clients: tuple[Literal["producer", "consumer", "admin"], ...] = (
            "producer",
            "consumer",
            "admin",
        )
        for client in clients:
            try:
                librdkafka_config(self.client_config(client))
            except ConfigError as exc:
                key, reason = exc.problems[0]
                raise ValueError(f"{key}: {reason}") from exc
        return self

    def client_config(self, client: Literal["producer", "consumer", "admin"]) -> dict[str, Any]:
        """``bootstrap.servers``, the worker-level security settings, then the client's own
        ``producer.*``/``consumer.*``/``admin.*`` overrides (Kafka Connect's precedence)."""
        own = {"producer": self.producer, "consumer": self.consumer, "admin": self.admin}[client]
        return {"bootstrap.servers": self.bootstrap_servers, **self.kafka_security, **own}

    def internal_client_security(self) -> dict[str, Any]:
        """Security settings of the worker's own clients (offsets topic, cluster id): the
        worker-level ones, or those given under ``producer`` by configs written before
        worker-level keys were read."""
        return {**security_settings(self.producer), **self.kafka_security}


class ConnectorEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    config: dict[str, Any]
    initial_state: Literal["RUNNING", "PAUSED", "STOPPED"] = "RUNNING"


class WorkerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    worker: WorkerSettings = Field(default_factory=WorkerSettings)  # type: ignore[arg-type]
    connectors: list[ConnectorEntry] = Field(default_factory=list)


def yaml_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _key_names(model: type[BaseModel]) -> list[str]:
    """The YAML keys of a model (its internal fields without an alias are not keys)."""
    return [f.alias or name for name, f in model.model_fields.items() if f.alias or name.isalpha()]


def _known_keys(model: type[BaseModel]) -> str:
    return ", ".join(_key_names(model))


#: the member types pydantic appends to the location of a union's errors
_UNION_MEMBERS = {"str", "int", "float", "bool"}


def _pydantic_problems(exc: ValidationError) -> list[Problem]:
    out = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            owner: type[BaseModel] = WorkerConfig
            if loc[:1] == ("worker",):
                owner = WorkerSettings
            elif loc[:1] == ("connectors",):
                owner = ConnectorEntry
            names = _key_names(owner)
            meant = difflib.get_close_matches(str(loc[-1]), names, 1, 0.8)
            hint = f"did you mean {meant[0]}? " if meant else ""
            msg = f"unknown key ({hint}known keys: {_known_keys(owner)})"
        elif err["type"] == "missing":
            msg = "is required"
        elif loc and loc[-1] in _UNION_MEMBERS and len(loc) > 2:
            # one error per member of ``str | int | float | bool``: say it once
            loc, msg = loc[:-1], "must be a string, number or boolean"
        msg = msg.removeprefix("Value error, ")
        out.append((yaml_path(loc), msg))
    return list(dict.fromkeys(out))


def parse_config(
    text: str,
    *,
    source: str = "<config>",
    registry: Registry | None = None,
    env: Mapping[str, str] | None = None,
    warnings: list[Problem] | None = None,
) -> WorkerConfig:
    """Parse and validate; raises :class:`WorkerConfigError` with every problem. Likely typos
    among unknown connector keys are appended to ``warnings`` (they never fail the load)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise WorkerConfigError(source, [("", f"not valid YAML: {where}{problem}")]) from exc
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise WorkerConfigError(
            source, [("", "the file must be a mapping with `worker:` and `connectors:`")]
        )
    problems: list[Problem] = []
    if doc.get("connectors") is None and "connectors" in doc:
        doc["connectors"] = []
    # Worker settings are resolved now (they are not stored anywhere); connector configs keep
    # their placeholders and are resolved when the connector starts.
    if isinstance(doc.get("worker"), dict):
        doc["worker"] = resolve_tree(doc["worker"], "worker", Resolver(env), problems)
    try:
        cfg = WorkerConfig.model_validate(doc)
    except ValidationError as exc:
        problems.extend(_pydantic_problems(exc))
        cfg = None
    worker_doc: dict[str, Any] = doc["worker"] if isinstance(doc.get("worker"), dict) else {}
    declared, provider_problems = declared_providers(
        {k: v for k, v in worker_doc.items() if str(k).startswith("config.providers")}, "worker"
    )
    problems.extend(provider_problems)
    with installed(declared):
        problems.extend(
            _check_connectors(doc.get("connectors"), registry or Registry(), env, warnings)
        )
    if cfg is not None:
        w = cfg.worker
        if w.exactly_once and w.offset_storage != "kafka":
            problems.append(
                (
                    "worker.exactly.once.source.support",
                    "enabled requires offset.storage: kafka (offsets are written in the "
                    "same Kafka transaction as the records)",
                )
            )
        if w.mode == "distributed" and w.config_storage_encryption_key is None:
            problems += _literal_secrets(cfg.connectors, registry or Registry())
    if problems or cfg is None:
        raise WorkerConfigError(source, _dedupe(problems))
    return cfg


def _literal_secrets(entries: list[ConnectorEntry], registry: Registry) -> list[Problem]:
    """A distributed worker without a sealing key would write these to the config topic in
    clear (worker.sealing); said at load time, with their YAML paths."""
    problems: list[Problem] = []
    for i, entry in enumerate(entries):
        cdef = None
        with contextlib.suppress(PluginError):
            cdef = registry.resolve(str(entry.config.get("connector.class", ""))).config_def
        problems += [
            (
                f"connectors[{i}].config.{k}",
                "a literal secret would be stored in the config topic in clear: give it as a "
                "placeholder (${env:...}, ${file:...}) or set worker.config.storage.encryption.key",
            )
            for k, v in entry.config.items()
            if is_literal_secret(str(k), scalar_text(v), cdef)
        ]
    return problems


def _check_connectors(
    entries: Any,
    registry: Registry,
    env: Mapping[str, str] | None,
    warnings: list[Problem] | None = None,
) -> list[Problem]:
    if not isinstance(entries, list):
        return []  # pydantic reports the wrong type
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        name = entry.get("name")
        if isinstance(name, str) and name:
            if name in seen:
                problems.append(
                    (
                        f"connectors[{i}].name",
                        f"duplicate connector name {name!r} (also connectors[{seen[name]}])",
                    )
                )
            else:
                seen[name] = i
        config = entry.get("config")
        if not isinstance(config, dict):
            continue
        given = config.get("name")
        if given is not None and isinstance(name, str) and str(given) != name:
            problems.append(
                (f"connectors[{i}].config.name", f"{given!r} does not match name {name!r}")
            )
        checked = registry.check({**config, "name": name or ""}, env)
        for key, msg in checked.problems:
            problems.append((f"connectors[{i}].config.{key}", msg))
        if warnings is not None:
            warnings.extend((f"connectors[{i}].config.{key}", msg) for key, msg in checked.warnings)
    return problems


def _dedupe(problems: list[Problem]) -> list[Problem]:
    out: list[Problem] = []
    for p in problems:
        if p not in out:
            out.append(p)
    return out


def load_config(
    path: str | os.PathLike[str],
    *,
    registry: Registry | None = None,
    env: Mapping[str, str] | None = None,
    warnings: list[Problem] | None = None,
) -> WorkerConfig:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkerConfigError(source, [("", f"cannot read the file: {exc.strerror}")]) from exc
    return parse_config(text, source=source, registry=registry, env=env, warnings=warnings)
