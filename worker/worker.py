"""Builds and runs connector tasks: Kafka Connect's ``Worker``, minus the herding.

The worker turns a stored connector config into a :class:`~worker.task.TaskRunner` whose
engine gets the worker-wide settings (Kafka producer, offset store and flush interval,
shutdown timeout, exactly-once). Placeholders are resolved each time an engine is built, not
once at create time, so a rotated secret is picked up by a restart.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from cdc.common_config import AMBIENT_CREDENTIALS
from cdc.config import Config
from cdc.engine import Engine, EngineSettings
from cdc.errors import ConfigError
from cdc.kafka_security import is_credential_key, security_settings
from cdc.offsets.store import OffsetStore
from worker.config import WorkerSettings
from worker.config_providers import Origin, resolve_config
from worker.registry import WORKER_FIELDS, ConnectorPlugin
from worker.task import EngineLike, RetryPolicy, TaskRunner

log = logging.getLogger("tidemark.worker")

EngineFactory = Callable[[ConnectorPlugin, dict[str, str], EngineSettings, OffsetStore], EngineLike]
"""(plugin, resolved connector config, settings, offset store) -> engine. Tests pass fakes."""

PRODUCER_OVERRIDE = "producer.override."


def build_engine(
    plugin: ConnectorPlugin,
    config: dict[str, str],
    settings: EngineSettings,
    store: OffsetStore,
) -> EngineLike:
    """The real thing: the connector instance and an :class:`cdc.engine.Engine` for it."""
    connector = plugin.cls(config)
    parsed = connector.config
    if not isinstance(parsed, Config):  # the connector left parsing to the worker
        parsed = plugin.config_def.parse(config)
    return Engine(connector, parsed, store, settings)


def retry_policy(config: Mapping[str, str]) -> RetryPolicy:
    values, _ = WORKER_FIELDS.validate(config)  # already validated when stored
    return RetryPolicy(
        max_retries=int(values["errors.max.retries"]),
        initial_delay_s=int(values["errors.retry.delay.initial.ms"]) / 1000,
        max_delay_s=int(values["errors.retry.delay.max.ms"]) / 1000,
    )


def task_credentials(
    plugin: ConnectorPlugin,
    stored: Mapping[str, str],
    resolved: dict[str, str],
    origin: Origin | None,
) -> dict[str, str]:
    """``resolved`` as a task may connect with it: a config a REST caller wrote may not use
    the worker's ambient credentials (``.pgpass``, service files, Kerberos), whatever it says;
    the task and the connection check before a config is stored both apply this."""
    if (
        origin is not None
        and not origin.trusted(AMBIENT_CREDENTIALS, stored)
        and plugin.config_def.lookup(AMBIENT_CREDENTIALS) is not None
    ):
        return {**resolved, AMBIENT_CREDENTIALS: "false"}
    return resolved


class Worker:
    def __init__(
        self,
        settings: WorkerSettings,
        store: OffsetStore,
        *,
        worker_id: str,
        engine_factory: EngineFactory | None = None,
        redact: Callable[[str], str] = lambda s: s,
    ) -> None:
        self.settings = settings
        self.store = store
        self.worker_id = worker_id
        self.engine_factory = engine_factory or build_engine
        self.redact = redact
        # Topics each connector has written (``GET /connectors/{c}/topics``): one set per
        # connector, shared by each engine it builds as its sink's ``known_topics``, so a
        # topic is added when the first record goes to it and a reset (clear) re-tracks it.
        self.topics: dict[str, set[str]] = {}
        # The live sinks of each connector's engines: a reset must also empty their fast-path
        # topic cache, or records keep bypassing the tracking (weak: engines are rebuilt).
        self._sinks: dict[str, weakref.WeakSet[Any]] = {}
        # Distributed mode: another worker may have run the task and moved its offsets, so
        # every start reads the offsets topic again; transactional ids carry the group id.
        self.refresh_offsets = False
        self.transactional_prefix = "tidemark"

    def reset_topics(self, name: str) -> None:
        """``PUT /connectors/{name}/topics/reset``: forget the topics written so far; each is
        tracked again when the connector next writes to it."""
        self.topics.get(name, set()).clear()
        for sink in list(self._sinks.get(name, ())):
            fast = getattr(sink, "fast_topics", None)
            if isinstance(fast, set):
                fast.clear()

    def engine_settings(self, name: str, config: Mapping[str, str], task_id: int) -> EngineSettings:
        s = self.settings
        producer = s.producer_config()
        overrides = {
            k[len(PRODUCER_OVERRIDE) :]: v
            for k, v in config.items()
            if k.startswith(PRODUCER_OVERRIDE)
        }
        own_cluster = overrides.get(
            "bootstrap.servers", producer.get("bootstrap.servers")
        ) == producer.get("bootstrap.servers")
        if not own_cluster:
            # Another listener or cluster: the worker's credentials must not be sent to one a
            # connector config names (the schema history follows this rule); its trust
            # settings (CA, verification) stay, they protect the connection and reveal nothing
            producer = {k: v for k, v in producer.items() if not is_credential_key(k)}
        producer.update(overrides)
        producer.setdefault("client.id", f"tidemark-{name}-{task_id}")
        # The engine may spend its timeout twice (joining the source, flushing the producer)
        # after the source noticed the stop: a third each keeps the whole stop inside the
        # worker's graceful timeout.
        return EngineSettings(
            producer=producer,
            offset_flush_interval_ms=s.offset_flush_interval_ms,
            offset_flush_timeout_ms=s.offset_flush_timeout_ms,
            exactly_once=s.exactly_once,
            transactional_id=(
                f"{self.transactional_prefix}-{name}-{task_id}" if s.exactly_once else None
            ),
            shutdown_timeout_ms=max(s.task_shutdown_graceful_timeout_ms // 3, 100),
            task_id=task_id,
            reserved_topics=self.internal_topics() if own_cluster else frozenset(),
        )

    def internal_topics(self) -> frozenset[str]:
        """The topics this worker keeps its own state in. A connector writing there (a
        RegexRouter to ``tidemark-status``) could forge task states, and with them where a
        signal sent to another worker is forwarded, the caller's credentials included."""
        s = self.settings
        topics = {s.offset_storage_topic} if s.offset_storage == "kafka" else set()
        if s.mode == "distributed":
            topics |= {
                s.config_storage_topic,
                s.status_storage_topic,
                s.assignment_storage_topic,
            }
        return frozenset(topics)

    def with_defaults(self, plugin: ConnectorPlugin, config: dict[str, str]) -> dict[str, str]:
        """Worker-provided defaults for connectors that keep a schema history (not
        PostgreSQL): a file under the state dir in standalone mode, the worker's Kafka
        otherwise. Only keys the connector defines are added."""
        out = dict(config)
        cdef = plugin.config_def
        if cdef.lookup("schema.history.internal") is None:
            return out
        if any(k.startswith(("schema.history.internal", "database.history")) for k in out):
            if (
                "schema.history.internal.kafka.topic" in out
                or "database.history.kafka.topic" in out
            ) and not any(k.endswith("history.kafka.bootstrap.servers") for k in out):
                self._worker_kafka_history(out)
            return out
        if self.settings.offset_storage == "kafka":
            out["schema.history.internal"] = "kafka"
            out["schema.history.internal.kafka.topic"] = f"{config['name']}-schema-history"
            self._worker_kafka_history(out)
        else:
            path = Path(self.settings.state_dir) / "history" / f"{config['name']}.jsonl"
            out["schema.history.internal"] = "file"
            out["schema.history.internal.file.filename"] = str(path)
        return out

    def _worker_kafka_history(self, out: dict[str, str]) -> None:
        """A schema history on the worker's Kafka uses the worker's security settings too
        (a history client without them is the classic SASL/TLS misconfiguration); keys the
        connector sets itself win."""
        s = self.settings
        for key in ("schema.history.internal.kafka.topic", "database.history.kafka.topic"):
            if out.get(key) in self.internal_topics():
                raise ConfigError(
                    [
                        (
                            key,
                            f"{out[key]!r} is the worker's own internal topic; the schema "
                            "history needs a topic of its own",
                        )
                    ]
                )
        out["schema.history.internal.kafka.bootstrap.servers"] = s.bootstrap_servers
        clients: tuple[Literal["producer", "consumer"], ...] = ("producer", "consumer")
        for client in clients:
            for key, value in security_settings(s.client_config(client)).items():
                out.setdefault(f"schema.history.internal.{client}.{key}", str(value))

    def runner(
        self,
        name: str,
        plugin: ConnectorPlugin,
        stored: Mapping[str, str],
        *,
        paused: bool,
        env: Mapping[str, str] | None = None,
        origin: Origin | None = None,
    ) -> TaskRunner:
        """A (not yet started) runner for task 0 of a connector. Single-task connectors only:
        every tidemark connector reads one log, which cannot be split across tasks."""
        task_id = 0
        stored = dict(stored)
        settings = self.engine_settings(name, stored, task_id)

        def factory() -> EngineLike:
            resolved, problems = resolve_config(stored, env, origin=origin)
            if problems:
                raise ConfigError(problems)
            resolved = task_credentials(plugin, stored, resolved, origin)
            refresh = getattr(self.store, "refresh", None)
            if (settings.exactly_once or self.refresh_offsets) and callable(refresh):
                refresh()  # offsets the transactional producer wrote since the last start
            config = self.with_defaults(plugin, resolved)
            engine = self.engine_factory(plugin, config, settings, self.store)
            sink = getattr(engine, "sink", None)
            if sink is not None and isinstance(getattr(sink, "known_topics", None), set):
                sink.known_topics = self.topics.setdefault(name, set())
                self._sinks.setdefault(name, weakref.WeakSet()).add(sink)
            return engine

        return TaskRunner(
            name,
            task_id,
            factory,
            retry_policy(stored),
            worker_id=self.worker_id,
            paused=paused,
            redact=self.redact,
        )
