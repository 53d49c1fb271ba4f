"""The herder: every state change of the worker's connectors goes through here.

It is Kafka Connect's ``StandaloneHerder``: it holds each connector's stored config and
*target state* (STARTED, PAUSED, STOPPED), starts and stops tasks through the
:class:`~worker.worker.Worker`, answers status queries in Kafka Connect's JSON shapes, and
persists configs and target states to ``<state.dir>/connectors.json`` so connectors created
through REST, and pauses and stops, survive a restart.

Connectors listed in the YAML file are applied at every start: the YAML config replaces one
changed through REST (with a warning), while the target state is kept. A YAML connector
deleted through REST comes back at the next start unless it is removed from the file.

Locking: ``self._lock`` guards the connector table and the state file; each connector has its
own lock that serialises its lifecycle operations, which may wait for a task to stop, so a slow
stop of one connector never blocks status requests or other connectors.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

from cdc.config import ConfigDef, is_secret_key, mask_url_passwords, url_passwords
from cdc.converters.base import (
    AVRO_CONVERTER_CLASS,
    JSON_CONVERTER_CLASS,
    SIMPLE_CONVERTER_CLASSES,
)
from cdc.errors import ConfigError
from cdc.metrics import TaskMetrics
from cdc.offsets.store import OffsetStore
from cdc.transforms.base import class_names as transform_class_names
from worker import redaction
from worker.code_policy import python_code_problems
from worker.config import ConnectorEntry, WorkerSettings
from worker.config_providers import Origin, Problem
from worker.connection_check import check_connection
from worker.path_policy import path_problems
from worker.regex_policy import regex_problems
from worker.registry import (
    MASK,
    CheckedConfig,
    ConnectorPlugin,
    PluginError,
    Registry,
    config_definitions,
    config_infos,
    endpoint_changes,
    is_literal_secret,
    is_reference,
    mask_config,
    normalise_config,
    tidemark_version,
)
from worker.sealing import Sealer, SealError
from worker.task import TaskRunner
from worker.worker import EngineFactory, Worker, task_credentials

log = logging.getLogger("tidemark.worker.herder")

STATE_FILE_VERSION = 1
_NAME = re.compile(r"^[^\x00-\x1f/\\]{1,249}$")


class HerderError(Exception):
    """An error the REST layer turns into ``{"error_code", "message"}``."""

    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(HerderError):
    status = 400


class NotFound(HerderError):
    status = 404


class Conflict(HerderError):
    status = 409


class TargetState(StrEnum):
    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"

    @classmethod
    def from_initial(cls, value: str) -> TargetState:
        return {"RUNNING": cls.STARTED, "PAUSED": cls.PAUSED, "STOPPED": cls.STOPPED}[value]


class Secrets:
    """Resolved secret values, so logs and traces can be scrubbed of them. A value that is
    also a non-secret value of the same config (a password equal to the user name) is not
    scrubbed: it is visible in the config anyway, and scrubbing it would mangle every log line
    that names the user."""

    MIN_LENGTH = 4

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._lock = threading.Lock()

    def add_config(self, config: Mapping[str, str], cdef: ConfigDef | None) -> None:
        plain = {v for k, v in config.items() if not is_secret_key(k, cdef)}
        found = {
            v
            for k, v in config.items()
            if is_secret_key(k, cdef) and len(v) >= self.MIN_LENGTH and v not in plain
        }
        # a password inside a URL (mongodb://user:pw@host) of a key that is not secret
        for v in config.values():
            found |= {pw for pw in url_passwords(v) if len(pw) >= self.MIN_LENGTH}
        if found:
            with self._lock:
                self._values |= found

    def add(self, *values: str) -> None:
        """Secrets of the worker itself (keys from its YAML file)."""
        with self._lock:
            self._values |= {v for v in values if len(v) >= self.MIN_LENGTH}

    def redact(self, text: str) -> str:
        with self._lock:
            values = sorted(self._values, key=len, reverse=True)
        for v in values:
            if v in text:
                text = text.replace(v, MASK)
        return text


@dataclass(eq=False)
class _Connector:
    name: str
    config: dict[str, str]  # as stored: placeholders kept, secrets unresolved
    target: TargetState
    from_yaml: bool = False
    plugin: ConnectorPlugin | None = None
    runner: TaskRunner | None = None
    failure: str | None = None  # connector-level FAILED (plugin missing, config invalid)
    lingering: list[TaskRunner] = field(default_factory=list)  # stop timed out
    deleted: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


#: (connector config, key, value) -> the value is a secret to seal
SecretRule = Callable[[Mapping[str, str], str, str], bool]


class StateFile:
    """``connectors.json``: configs and target states, replaced atomically on each change and
    readable only by the owner (REST-created configs may hold literal passwords). With
    ``config.storage.encryption.key`` the secret values are sealed (:mod:`worker.sealing`)
    under ``"sealed"`` beside each ``"config"``, as in the distributed config topic, so no
    literal password reaches the disk either; a file written without the key is read as it
    is and sealed on its next write."""

    def __init__(
        self,
        path: Path | None,
        sealer: Sealer | None = None,
        is_secret: SecretRule = lambda config, key, value: False,
    ) -> None:
        self.path = path
        self.sealer = sealer or Sealer(None)
        self.is_secret = is_secret

    def load(self) -> dict[str, dict[str, Any]]:
        if self.path is None or not self.path.exists():
            return {}
        try:
            doc = orjson.loads(self.path.read_bytes())
            entries = doc["connectors"]
            out = {e["name"]: e for e in entries}
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise HerderError(
                f"cannot read the connector state file {self.path}: {exc}. Fix or remove it."
            ) from exc
        for name, entry in out.items():
            sealed = entry.pop("sealed", None) or {}
            config = entry.setdefault("config", {})
            for key, token in sealed.items():
                try:
                    config[key] = self.sealer.unseal(name, key, str(token))
                except SealError as exc:
                    raise HerderError(
                        f"connector {name} in {self.path}: {key}: {exc}. Set "
                        "config.storage.encryption.key (or .previous.keys) to the key it was "
                        "sealed with, or remove the connector from the file."
                    ) from exc
        return out

    def save(self, connectors: list[_Connector]) -> None:
        if self.path is None:
            return
        doc = {
            "version": STATE_FILE_VERSION,
            "connectors": [
                {
                    "name": c.name,
                    **self._sealed(c.name, c.config),
                    "target_state": str(c.target),
                    "source": "yaml" if c.from_yaml else "rest",
                }
                for c in connectors
            ],
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".connectors-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _sealed(self, name: str, config: Mapping[str, str]) -> dict[str, Any]:
        if not self.sealer.enabled:
            return {"config": config}
        plain, sealed = self.sealer.split(name, config, self.is_secret)
        return {"config": plain, **({"sealed": sealed} if sealed else {})}


def _trace(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)).rstrip()


def invalid_config_message(name: str, checked: CheckedConfig) -> str:
    n = len(checked.problems)
    lines = "\n".join(f"{k}: {m}" for k, m in checked.problems)
    plugin = checked.plugin.class_name if checked.plugin else "{connectorType}"
    return (
        f"Connector configuration is invalid and contains the following {n} error(s):\n"
        f"{lines}\nYou can also find the above list of errors at the endpoint "
        f"`/connector-plugins/{plugin}/config/validate`"
    )


class Herder:
    def __init__(
        self,
        settings: WorkerSettings,
        store: OffsetStore,
        *,
        worker_id: str,
        registry: Registry | None = None,
        engine_factory: EngineFactory | None = None,
        state_file: Path | None = None,
        env: Mapping[str, str] | None = None,
        secrets: Secrets | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.worker_id = worker_id
        self.registry = registry or Registry()
        self.secrets = secrets or Secrets()
        self.env = env
        self.worker = Worker(
            settings,
            store,
            worker_id=worker_id,
            engine_factory=engine_factory,
            redact=self.secrets.redact,
        )
        s = settings
        keys = [s.config_storage_encryption_key] if s.config_storage_encryption_key else []
        keys += s.config_storage_encryption_previous_keys
        self.secrets.add(*(k.get_secret_value() for k in keys))
        self.sealer = Sealer(
            keys[0].get_secret_value() if s.config_storage_encryption_key else None,
            [k.get_secret_value() for k in s.config_storage_encryption_previous_keys],
        )
        self.state_file = StateFile(state_file, self.sealer, self._is_secret)
        self._lock = threading.RLock()
        self._connectors: dict[str, _Connector] = {}
        self._yaml: dict[str, dict[str, str]] = {}  # the YAML file's connector configs
        self.state = "starting"  # starting | running | stopping | stopped
        self.started_at = time.time()

    def _is_secret(self, config: Mapping[str, str], key: str, value: str) -> bool:
        """A value not to store in clear: see ``is_literal_secret``."""
        cdef = None
        with contextlib.suppress(PluginError):
            cdef = self.registry.resolve(config.get("connector.class", "")).config_def
        return is_literal_secret(key, value, cdef)

    # -- startup and shutdown -----------------------------------------------------------------
    def start(
        self, yaml_connectors: list[ConnectorEntry] | tuple[ConnectorEntry, ...] = ()
    ) -> None:
        """Load persisted connectors, apply the YAML ones, start their tasks."""
        persisted = self.state_file.load()
        with self._lock:
            for entry in yaml_connectors:
                config, _ = normalise_config({**entry.config, "name": entry.name})
                self._yaml[entry.name] = config
                prev = persisted.pop(entry.name, None)
                target = TargetState.from_initial(entry.initial_state)
                if prev is not None:
                    target = TargetState(prev.get("target_state", target))
                    if prev.get("config") != config:
                        log.warning(
                            "connector %s: the config in the YAML file replaces the stored one "
                            "(changed through REST or in an earlier version of the file)",
                            entry.name,
                        )
                self._add(entry.name, config, target, from_yaml=True)
            for name, prev in persisted.items():
                self._add(
                    name,
                    dict(prev.get("config", {})),
                    TargetState(prev.get("target_state", "STARTED")),
                    from_yaml=False,
                )
            self._persist()
            self.state = "running"
        log.info("worker %s started with %d connector(s)", self.worker_id, len(self._connectors))

    def _add(
        self, name: str, config: dict[str, str], target: TargetState, *, from_yaml: bool
    ) -> None:
        c = _Connector(name, config, target, from_yaml=from_yaml)
        self._connectors[name] = c
        with c.lock:
            self._start_tasks(c)

    def shutdown(self, timeout: float) -> bool:
        """Stop every task within ``timeout`` seconds (all at once, each commits its offsets).
        False if some did not stop in time."""
        self.state = "stopping"
        deadline = time.monotonic() + timeout
        with self._lock:
            runners = [
                (c.name, r)
                for c in self._connectors.values()
                for r in ([c.runner] if c.runner else []) + c.lingering
            ]
        for _, r in runners:
            r.shutdown()
        ok = True
        for name, r in runners:
            if not r.join(max(deadline - time.monotonic(), 0)):
                log.error("connector %s did not stop within %.1f s", name, timeout)
                ok = False
        self.state = "stopped"
        return ok

    def health(self) -> tuple[int, dict[str, str]]:
        if self.state == "running":
            return 200, {
                "status": "healthy",
                "message": "Worker has completed startup and is ready to handle requests.",
            }
        if self.state == "starting":
            return 503, {"status": "starting", "message": "Worker is still starting up."}
        return 500, {"status": "unhealthy", "message": "Worker is shutting down."}

    # -- task plumbing (callers hold c.lock) ------------------------------------------------------
    def origin(self, name: str, config: Mapping[str, Any]) -> Origin:
        """Which of a config's values the operator's YAML file wrote: those equal to the
        file's config of the same connector, unless the stored config connects elsewhere
        (then none: a placeholder of the file must not follow another host)."""
        yaml = self._yaml.get(name)
        if yaml is not None and endpoint_changes(yaml, config):
            yaml = None
        return Origin(self.settings.rest_providers(), yaml)

    def _check(self, config: Mapping[str, Any]) -> CheckedConfig:
        origin = self.origin(config["name"], config)
        checked = self.registry.check(config, self.env, origin)
        cdef = checked.plugin.config_def if checked.plugin is not None else None
        checked.problems += self._rest_policy_problems(checked.stored, origin, cdef)
        if checked.plugin is not None:
            self.secrets.add_config(checked.resolved, checked.plugin.config_def)
        return checked

    def _rest_policy_problems(
        self, stored: Mapping[str, Any], origin: Origin, cdef: ConfigDef | None
    ) -> list[Problem]:
        """The rules for what a REST caller may send, on paths, code and slow patterns
        (``worker.path_policy``, ``worker.code_policy``, ``worker.regex_policy``), for the
        values the YAML file did not write; checked before a config is stored, and
        again here, on the worker that runs the task: in distributed mode the worker that
        took the request may have another state dir, allowed paths or code switch, and a
        stored config may have reached the store without the REST check."""
        if origin.rest is None:
            return []
        problems = path_problems(stored, self.settings, origin.rest)
        problems += regex_problems(stored, cdef)
        if not self.settings.rest_allow_python_transforms:
            problems += python_code_problems(stored)
        return [(k, m) for k, m in problems if not origin.trusted(k, stored)]

    def _start_tasks(self, c: _Connector) -> None:
        c.failure = None
        checked = self._check({**c.config, "name": c.name})
        c.plugin = checked.plugin
        for key, msg in checked.warnings:
            log.warning("connector %s: %s %s", c.name, key, msg)
        if not checked.ok:
            c.failure = redaction.scrub(self.secrets.redact, _trace(ConfigError(checked.problems)))
            log.error("connector %s cannot start: %s", c.name, c.failure.splitlines()[-1])
            return
        if c.target is TargetState.STOPPED or checked.plugin is None:
            return
        c.runner = self.worker.runner(
            c.name,
            checked.plugin,
            c.config,
            paused=c.target is TargetState.PAUSED,
            env=self.env,
            origin=self.origin(c.name, c.config),
        )
        c.runner.start()
        log.info(
            "connector %s: task 0 started (%s)%s",
            c.name,
            checked.plugin.class_name,
            " paused" if c.target is TargetState.PAUSED else "",
        )

    def _stop_tasks(self, c: _Connector) -> bool:
        runner, c.runner = c.runner, None
        if runner is None:
            return True
        runner.shutdown()
        timeout = self.settings.task_shutdown_graceful_timeout_ms / 1000
        if runner.join(timeout):
            return True
        log.error("connector %s: task did not stop within %.1f s", c.name, timeout)
        c.lingering.append(runner)
        return False

    def _persist(self) -> None:
        with self._lock:
            self.state_file.save(list(self._connectors.values()))

    def _get(self, name: str) -> _Connector:
        with self._lock:
            c = self._connectors.get(name)
        if c is None or c.deleted:
            raise NotFound(f"Connector {name} not found")
        return c

    # -- queries ------------------------------------------------------------------------------
    def connector_names(self) -> list[str]:
        with self._lock:
            return sorted(self._connectors)

    def connector_info(self, name: str) -> dict[str, Any]:
        c = self._get(name)
        return {
            "name": c.name,
            "config": self._masked(c),
            "tasks": [{"connector": c.name, "task": 0}] if c.runner else [],
            "type": "source",
        }

    def connector_config(self, name: str) -> dict[str, str]:
        return self._masked(self._get(name))

    def _masked(self, c: _Connector) -> dict[str, str]:
        return mask_config(c.config, c.plugin.config_def if c.plugin else None)

    def _connector_state(self, c: _Connector) -> str:
        if c.target is TargetState.STOPPED:
            return "STOPPED"
        if c.failure:
            return "FAILED"
        if c.target is TargetState.PAUSED:
            return "PAUSED"
        return "RUNNING"

    def connector_status(self, name: str) -> dict[str, Any]:
        c = self._get(name)
        conn: dict[str, Any] = {"state": self._connector_state(c), "worker_id": self.worker_id}
        if c.failure and c.target is not TargetState.STOPPED:
            conn["trace"] = c.failure
        runner = c.runner
        return {
            "name": c.name,
            "connector": conn,
            "tasks": [runner.status()] if runner else [],
            "type": "source",
        }

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        c = self._get(name)
        if c.runner is None:
            return []
        config = self._masked(c)
        if c.plugin is not None:
            config["task.class"] = c.plugin.task_class_name
        return [{"id": {"connector": c.name, "task": 0}, "config": config}]

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        return self._runner(name, task).status()

    def task_worker(self, name: str) -> str | None:
        """The id of the worker running the connector's task (``host:port``, the REST
        address), None when it runs nowhere; here: this worker, or None. Signals sent over
        REST are forwarded to it (``worker.rest.forward``)."""
        return self.worker_id if self._get(name).runner is not None else None

    def _runner(self, name: str, task: int) -> TaskRunner:
        c = self._get(name)
        runner = c.runner
        if runner is None or task != runner.task_id:
            raise NotFound(f"Task {name}-{task} not found")
        return runner

    def expanded(self, expand: list[str]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for name in self.connector_names():
            entry: dict[str, Any] = {}
            try:
                if "status" in expand:
                    entry["status"] = self.connector_status(name)
                if "info" in expand:
                    entry["info"] = self.connector_info(name)
            except NotFound:
                continue  # deleted meanwhile
            out[name] = entry
        return out

    # -- writes -------------------------------------------------------------------------------
    def create(
        self, name: str, config: Mapping[str, Any], initial_state: str = "RUNNING"
    ) -> dict[str, Any]:
        checked = self._check_new(name, config, initial_state)
        with self._lock:
            if name in self._connectors:
                raise Conflict(f"Connector {name} already exists")
            c = _Connector(name, checked.stored, TargetState.from_initial(initial_state))
            self._connectors[name] = c
            with c.lock:
                self._start_tasks(c)
            self._persist()
        log.info("connector %s created (%s)", name, initial_state)
        return self.connector_info(name)

    def _check_new(self, name: str, config: Mapping[str, Any], initial_state: str) -> CheckedConfig:
        """The checks of a create (shared with the distributed herder): name, initial state,
        and the config itself."""
        if not isinstance(name, str) or not _NAME.match(name) or name != name.strip():
            raise BadRequest(
                "Connector name must be 1-249 characters without control characters, '/' or "
                "'\\', and without leading or trailing whitespace"
            )
        if initial_state not in ("RUNNING", "PAUSED", "STOPPED"):
            raise BadRequest(
                f"initial_state must be RUNNING, PAUSED or STOPPED, not {initial_state!r}"
            )
        given = config.get("name")
        if given is not None and str(given) != name:
            raise BadRequest(
                f"Connector name configuration ({given}) doesn't match connector name in the "
                f"URL ({name})"
            )
        checked = self._check({**config, "name": name})
        checked.problems += self._storage_problems(checked.stored)
        self._check_connection(name, checked)
        if not checked.ok:
            raise BadRequest(invalid_config_message(name, checked))
        return checked

    def _check_connection(
        self,
        name: str,
        checked: CheckedConfig,
        origin: Origin | None = None,
        *,
        log_warnings: bool = True,
    ) -> None:
        """Connect with a config a REST caller sent before it is stored (Kafka Connect's
        validate step, ``worker.connection_check``); only once everything else in it is
        valid, so a bad value is reported without a connection attempt. Warnings are logged
        for a config that is stored (not for ``/validate``'s dry run)."""
        if not checked.ok or not self.settings.rest_validate_connections:
            return
        assert checked.plugin is not None
        if origin is None:
            origin = self.origin(name, checked.stored)
        config = task_credentials(checked.plugin, checked.stored, checked.resolved, origin)
        report = check_connection(checked.plugin, config)
        checked.problems += report.errors
        checked.notices += report.warnings
        for key, message in report.warnings if log_warnings else ():
            log.warning("connector %s: %s: %s", name, key, self.secrets.redact(message))

    def _storage_problems(self, stored: Mapping[str, Any]) -> list[Problem]:
        """Values the herder's store cannot keep safely (the distributed config topic without
        a sealing key and a literal secret); checked before a config is written."""
        return []

    def put_config(self, name: str, config: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Create or replace; True when created (201 rather than 200)."""
        given = config.get("name")
        if given is not None and str(given) != name:
            raise BadRequest(
                f"Connector name configuration ({given}) doesn't match connector name in the "
                f"URL ({name})"
            )
        if not self._exists(name):
            # not under the herder's lock: a create connects to the database first
            try:
                return True, self.create(name, config)
            except Conflict:
                pass  # created meanwhile by another request: this one replaces it
        return False, self._reconfigure(name, dict(config))

    def _exists(self, name: str) -> bool:
        return name in self._connectors

    def patch_config(self, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        c = self._get(name)
        if "name" in patch and patch["name"] != name:
            raise BadRequest("The connector name cannot be changed through PATCH")
        merged: dict[str, Any] = dict(c.config)
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        moved = endpoint_changes(c.config, merged)
        cdef = c.plugin.config_def if c.plugin else None
        kept = [
            k
            for k, v in merged.items()
            if k not in patch
            and isinstance(v, str)
            and ((is_secret_key(k, cdef) and not is_reference(v)) or url_passwords(v))
        ]
        if moved and kept:
            # the stored secrets would follow the new endpoint (see _reconfigure)
            raise BadRequest(
                f"Connector configuration is invalid: {', '.join(kept)}: send the secret again; "
                f"a kept secret is not reused when {', '.join(moved)} change(s)"
            )
        return self._reconfigure(name, merged)

    def _restore_masked(self, c: _Connector, config: dict[str, Any]) -> dict[str, Any]:
        """A config read back from GET has masked secrets (whole values, or URL passwords);
        writing it back keeps the stored ones, but only while the connector still connects
        where it did: a kept secret must not follow a new hostname to another server."""
        cdef = c.plugin.config_def if c.plugin else None
        kept = {
            key: stored
            for key, value in config.items()
            if (stored := c.config.get(key)) is not None
            and value != stored
            and (
                (value == MASK and is_secret_key(key, cdef)) or value == mask_url_passwords(stored)
            )
        }
        restored = {**config, **kept}
        # a URL written back with its password masked is the same endpoint, not a move; one
        # that differs otherwise (another host) must bring its password
        masked = [
            k
            for k, v in restored.items()
            if isinstance(v, str) and (f":{MASK}@" in v or f"={MASK}" in v) and v != c.config.get(k)
        ]
        if masked:
            raise BadRequest(
                f"Connector configuration is invalid: {', '.join(masked)}: send the secret "
                "again; a masked password is kept only in the URL it was read from"
            )
        moved = endpoint_changes(c.config, restored)
        if kept and moved:
            raise BadRequest(
                f"Connector configuration is invalid: {', '.join(kept)}: send the secret again; "
                f"a kept secret is not reused when {', '.join(moved)} change(s)"
            )
        return restored

    def _reconfigure(self, name: str, config: dict[str, Any]) -> dict[str, Any]:
        c = self._get(name)
        config = self._restore_masked(c, config)
        checked = self._check({**config, "name": name})
        self._check_connection(name, checked)
        if not checked.ok:
            raise BadRequest(invalid_config_message(name, checked))
        with c.lock:
            if c.deleted:
                raise NotFound(f"Connector {name} not found")
            if checked.stored != c.config or c.failure:
                self._stop_tasks(c)
                c.config = checked.stored
                self._start_tasks(c)
                self._persist()
                log.info("connector %s reconfigured", name)
        return self.connector_info(name)

    def delete(self, name: str) -> None:
        c = self._get(name)
        with c.lock:
            if c.deleted:
                raise NotFound(f"Connector {name} not found")
            self._stop_tasks(c)
            c.deleted = True
            with self._lock:
                self._connectors.pop(name, None)
                self._persist()
        log.info("connector %s deleted (its offsets are kept)", name)

    def pause(self, name: str) -> None:
        c = self._get(name)
        with c.lock:
            previous, c.target = c.target, TargetState.PAUSED
            if c.runner is not None:
                c.runner.pause()
            elif previous is TargetState.STOPPED:
                self._start_tasks(c)
            self._persist()
        log.info("connector %s paused", name)

    def resume(self, name: str) -> None:
        c = self._get(name)
        with c.lock:
            c.target = TargetState.STARTED
            if c.runner is not None:
                c.runner.resume()
            else:
                self._start_tasks(c)
            self._persist()
        log.info("connector %s resumed", name)

    def stop(self, name: str) -> None:
        """Shut the tasks down and wait for them (offsets committed), so offsets can be edited
        as soon as this returns."""
        c = self._get(name)
        with c.lock:
            c.target = TargetState.STOPPED
            self._stop_tasks(c)
            self._persist()
        log.info("connector %s stopped", name)

    def restart_connector(
        self, name: str, include_tasks: bool = False, only_failed: bool = False
    ) -> dict[str, Any] | None:
        """KIP-745. Returns the status to answer 202 with, or None for a plain 204 restart.

        tidemark has no separate connector instance beyond its config and plugin, so
        restarting "the connector" re-checks them: a connector FAILED because its plugin was
        missing or a placeholder did not resolve starts its tasks if that is fixed now."""
        c = self._get(name)
        with c.lock:
            connector_failed = c.failure is not None
            restart_connector = not only_failed or connector_failed
            runner = c.runner
            restart_task = (
                include_tasks and runner is not None and (not only_failed or runner.failed)
            )
            body: dict[str, Any] | None = None
            if include_tasks or only_failed:
                body = self.connector_status(name)
                if restart_connector:
                    body["connector"]["state"] = "RESTARTING"
                    body["connector"].pop("trace", None)
                if restart_task:
                    for t in body["tasks"]:
                        t["state"] = "RESTARTING"
                        t.pop("trace", None)
            if restart_connector and (connector_failed or runner is None):
                self._stop_tasks(c)
                self._start_tasks(c)
            if restart_task and runner is not None:
                runner.restart()
        log.info(
            "connector %s restart (includeTasks=%s, onlyFailed=%s)",
            name,
            include_tasks,
            only_failed,
        )
        return body

    def restart_task(self, name: str, task: int) -> None:
        self._runner(name, task).restart()
        log.info("connector %s: task %d restart requested", name, task)

    # -- offsets ------------------------------------------------------------------------------
    def _refresh_offsets(self) -> None:
        """Exactly-once engines write offsets in their own Kafka transactions, past the store's
        in-memory view; read the topic again before answering from it."""
        refresh = getattr(self.store, "refresh", None)
        if self.settings.exactly_once and callable(refresh):
            refresh()

    def offsets(self, name: str) -> dict[str, Any]:
        self._get(name)
        self._refresh_offsets()
        return {
            "offsets": [
                {"partition": partition, "offset": offset}
                for partition, offset in self.store.all(name)
            ]
        }

    def _require_stopped(self, c: _Connector) -> None:
        if c.target is not TargetState.STOPPED:
            raise BadRequest(
                "Connectors must be in the STOPPED state before their offsets can be modified. "
                "This can be done for the specified connector by issuing a 'PUT' request to the "
                f"'/connectors/{c.name}/stop' endpoint"
            )
        c.lingering = [r for r in c.lingering if not r.join(0)]
        if c.runner is not None or c.lingering:
            raise Conflict(f"Connector {c.name}'s tasks are still stopping; try again shortly")

    def alter_offsets(self, name: str, body: Any) -> dict[str, str]:
        c = self._get(name)
        with c.lock:
            self._require_stopped(c)
            if c.plugin is None:
                raise BadRequest(f"Connector {name}'s plugin is not available: {c.failure}")
            items = parse_offsets(body, c.plugin)
            self.store.put_many([(name, p, o) for p, o in items])
        log.info("connector %s: %d offset(s) altered", name, len(items))
        return {"message": "The offsets for this connector have been altered successfully"}

    def reset_offsets(self, name: str) -> dict[str, str]:
        c = self._get(name)
        with c.lock:
            self._require_stopped(c)
            self._refresh_offsets()
            partitions = [p for p, _ in self.store.all(name)]
            if partitions:
                self.store.put_many([(name, p, None) for p in partitions])
        log.info("connector %s: offsets reset", name)
        return {"message": "The offsets for this connector have been reset successfully"}

    # -- plugins ------------------------------------------------------------------------------
    def plugins(self, connectors_only: bool = True) -> list[dict[str, Any]]:
        """Kafka Connect's plugin list; with ``connectors_only`` false also the converters,
        transformations and predicates a connector config may name."""
        out = [p.info() for p in self.registry.plugins()]
        if connectors_only:
            return out
        version = tidemark_version()
        transforms, predicates = transform_class_names()
        for kind, names in (
            ("converter", [JSON_CONVERTER_CLASS, AVRO_CONVERTER_CLASS, *SIMPLE_CONVERTER_CLASSES]),
            ("transformation", transforms),
            ("predicate", predicates),
        ):
            out += [{"class": name, "type": kind, "version": version} for name in names]
        return out

    def _plugin(self, name: str) -> ConnectorPlugin:
        try:
            return self.registry.resolve(name)
        except PluginError as exc:
            raise NotFound(str(exc)) from exc

    def plugin_config(self, plugin_name: str) -> list[dict[str, Any]]:
        return config_definitions(self._plugin(plugin_name))

    def validate(self, plugin_name: str, config: Mapping[str, Any]) -> dict[str, Any]:
        try:
            plugin = self.registry.resolve(plugin_name)
        except PluginError as exc:
            raise BadRequest(str(exc)) from exc
        given = config.get("connector.class")
        if given is not None:
            try:
                other = self.registry.resolve(str(given))
            except PluginError:
                other = None
            if other is not plugin:
                raise BadRequest(
                    f"Included connector type {given} does not match request type {plugin_name}"
                )
        # only REST validates through the herder: nothing of the config is the YAML file's
        origin = Origin(self.settings.rest_providers())
        checked = self.registry.check(
            {"connector.class": plugin.class_name, **config}, self.env, origin
        )
        checked.problems += self._rest_policy_problems(checked.stored, origin, plugin.config_def)
        checked.problems += self._storage_problems(checked.stored)
        self._check_connection(plugin_name, checked, origin, log_warnings=False)
        return config_infos(
            plugin, checked.stored, checked.problems, checked.warnings, checked.notices
        )

    # -- tidemark extensions ------------------------------------------------------------------
    def progress(self) -> dict[str, Any]:
        """Everything ``tidemark status`` shows: Kafka Connect's status plus snapshot and
        streaming progress per task (``GET /tidemark/status``)."""
        out: dict[str, Any] = {}
        for name in self.connector_names():
            try:
                c = self._get(name)
                status = self.connector_status(name)
            except NotFound:
                continue
            tasks = []
            runner = c.runner
            if runner is not None:
                tasks.append(
                    {
                        "id": runner.task_id,
                        "phase": runner.phase,
                        "runs": runner.runs,
                        "restarts": dict(runner.restarts),
                        **(task_progress(runner.metrics) if runner.metrics else {}),
                    }
                )
            out[name] = {
                "status": status,
                "plugin": c.plugin.type_name if c.plugin else None,
                "tasks": tasks,
            }
        return {
            "worker": {
                "worker_id": self.worker_id,
                "state": self.state,
                "uptime_s": round(time.time() - self.started_at, 1),
            },
            "connectors": out,
        }

    def runners(self) -> list[TaskRunner]:
        with self._lock:
            return [c.runner for c in self._connectors.values() if c.runner is not None]

    def connector_states(self) -> list[str]:
        with self._lock:
            return [self._connector_state(c) for c in self._connectors.values()]


def task_progress(m: TaskMetrics) -> dict[str, Any]:
    s, st = m.snapshot, m.streaming
    tables = sorted(set(s.rows_scanned) | set(s.rows_expected))
    return {
        "snapshot": {
            "running": s.running,
            "completed": s.completed,
            "aborted": s.aborted,
            "total_tables": s.total_table_count,
            "remaining_tables": s.remaining_table_count,
            "started_ms": s.started_ms,
            "duration_s": s.duration_seconds,
            "tables": [
                {"table": t, "rows": s.rows_scanned.get(t, 0), "expected": s.rows_expected.get(t)}
                for t in tables
            ],
        },
        "streaming": {
            "connected": st.connected,
            "ms_behind_source": st.ms_behind_source,
            "last_event_ms": st.last_event_ms,
            "events": st.total_events_seen,
            "committed_transactions": st.committed_transactions,
        },
        "records_sent": m.records_sent,
        "offset_commits": m.offset_commits,
        "offset_commit_seconds": round(m.offset_commit_seconds, 6),
    }


def parse_offsets(
    body: Any, plugin: ConnectorPlugin
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """``ConnectorOffsets`` checked against the plugin's offset shape, every problem at once,
    before anything is stored."""
    if not isinstance(body, dict) or not isinstance(body.get("offsets"), list):
        raise BadRequest(
            'Offsets must be given as {"offsets": [{"partition": {...}, "offset": {...}}]}'
        )
    if not body["offsets"]:
        raise BadRequest("Partitions / offsets need to be provided for an alter offsets request")
    problems: list[str] = []
    out: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for i, entry in enumerate(body["offsets"]):
        where = f"offsets[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{where} must be an object with partition and offset")
            continue
        partition, offset = entry.get("partition"), entry.get("offset")
        if not isinstance(partition, dict):
            problems.append(f"{where}.partition must be an object")
            continue
        if offset is not None and not isinstance(offset, dict):
            problems.append(f"{where}.offset must be an object or null")
            continue
        stored, found = plugin.offset_validator(partition, offset)
        problems.extend(f"{where}: {p}" for p in found)
        out.append((partition, stored))
    if problems:
        raise BadRequest("Invalid offsets: " + "; ".join(problems))
    return out
