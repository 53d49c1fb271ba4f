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

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worker.config_providers import Resolver, resolve_tree
from worker.registry import Registry

Problem = tuple[str, str]


class WorkerConfigError(Exception):
    """Every problem of a worker config, each as ``(yaml path, message)``."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  {path}: {msg}" if path else f"  {msg}" for path, msg in problems)
        n = len(problems)
        super().__init__(f"{source}: {n} problem{'s' if n != 1 else ''}:\n{lines}")


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
    log_level: Literal["TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR"] = Field(
        "INFO", alias="log.level"
    )

    @property
    def exactly_once(self) -> bool:
        return self.exactly_once_source_support == "enabled"

    def producer_config(self) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap_servers, **self.producer}


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


def _known_keys(model: type[BaseModel]) -> str:
    return ", ".join(f.alias or name for name, f in model.model_fields.items())


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
            msg = f"unknown key (known keys: {_known_keys(owner)})"
        elif err["type"] == "missing":
            msg = "is required"
        out.append((yaml_path(loc), msg))
    return out


def parse_config(
    text: str,
    *,
    source: str = "<config>",
    registry: Registry | None = None,
    env: Mapping[str, str] | None = None,
) -> WorkerConfig:
    """Parse and validate; raises :class:`WorkerConfigError` with every problem."""
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
    problems.extend(_check_connectors(doc.get("connectors"), registry or Registry(), env))
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
    if problems or cfg is None:
        raise WorkerConfigError(source, _dedupe(problems))
    return cfg


def _check_connectors(
    entries: Any, registry: Registry, env: Mapping[str, str] | None
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
) -> WorkerConfig:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkerConfigError(source, [("", f"cannot read the file: {exc.strerror}")]) from exc
    return parse_config(text, source=source, registry=registry, env=env)
