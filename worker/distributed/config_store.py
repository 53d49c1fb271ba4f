"""Connector configs, task configs and target states in the config topic, as Kafka Connect's
``KafkaConfigBackingStore`` writes them (string keys, JSON values without schemas):

=============================== ==============================================================
key                              value
=============================== ==============================================================
``connector-<name>``             ``{"properties": {...}}`` (null: the connector was deleted)
``task-<name>-<n>``              ``{"properties": {...}}``
``commit-<name>``                ``{"tasks": <count>}``: the task configs before it are complete
``target-state-<name>``          ``{"state": "STARTED"|"PAUSED", "state.v2": ...}`` (STOPPED is
                                 written as ``"state": "PAUSED", "state.v2": "STOPPED"``, as
                                 Kafka Connect 3.5+ does for older readers)
``restart-connector-<name>``     ``{"include-tasks": bool, "only-failed": bool}``
=============================== ==============================================================

Secret values are not in ``properties``: they are sealed (:mod:`worker.sealing`) under
``"tidemark.sealed": {key: token}`` beside it, and opened again when read; a value this worker
cannot open stands as ``********`` in the config and is reported by :meth:`unreadable`.

The topic has one partition, so every worker sees the writes in the same order and builds the
same table. A restart request is kept (the latest per connector, numbered in reading order) so
that whichever worker owns the task, now or after a move, checks it: the owner restarts the
task unless it started the task after the request was read (a task started by its new owner
after a move has been restarted already). A request found while reading the topic at start
is therefore never acted on twice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from worker.distributed.kafka_log import KafkaLog
from worker.sealing import Sealer, SealError

log = logging.getLogger("tidemark.worker.distributed")

STATES = ("STARTED", "PAUSED", "STOPPED")
SEALED = "tidemark.sealed"
#: what an unopenable sealed value reads as (the REST layer's mask, so GET shows it as one)
UNREADABLE = "********"

#: (connector config, key, value) -> the value is a secret to seal
SecretRule = Callable[[Mapping[str, str], str, str], bool]


@dataclass(frozen=True)
class Restart:
    connector: str
    include_tasks: bool
    only_failed: bool


def target_value(state: str) -> bytes:
    legacy = "PAUSED" if state == "STOPPED" else state
    return orjson.dumps({"state": legacy, "state.v2": state})


class ConfigStore:
    def __init__(
        self,
        client: Mapping[str, Any],
        topic: str,
        *,
        replication_factor: int = 1,
        on_change: Callable[[str], None] = lambda name: None,
        on_restart: Callable[[Restart], None] = lambda r: None,
        sealer: Sealer | None = None,
        is_secret: SecretRule = lambda config, key, value: False,
    ) -> None:
        self.on_change = on_change
        self.sealer = sealer or Sealer(None)
        self.is_secret = is_secret
        self.on_restart = on_restart
        self._lock = threading.Lock()
        self._configs: dict[str, dict[str, str]] = {}
        self._targets: dict[str, str] = {}
        self._tasks: dict[tuple[str, int], dict[str, str]] = {}
        self._commits: dict[str, int] = {}
        self._restarts: dict[str, tuple[int, Restart]] = {}
        self._unreadable: dict[str, dict[str, str]] = {}  # connector -> {key: why}
        self._clear: dict[str, list[str]] = {}  # connector -> secret keys stored in clear
        self._stale: dict[str, list[str]] = {}  # connector -> keys sealed with a previous key
        self._read = 0  # config records read: numbers restart requests in reading order
        self._live = False
        self.log = KafkaLog(
            client, topic, self._apply, partitions=1, replication_factor=replication_factor
        )

    def start(self) -> None:
        self.log.start()
        self._live = True

    def close(self) -> None:
        self.log.close()

    # -- reads --------------------------------------------------------------------------------
    def connectors(self) -> dict[str, dict[str, str]]:
        with self._lock:
            return {n: dict(c) for n, c in self._configs.items()}

    def config(self, name: str) -> dict[str, str] | None:
        with self._lock:
            c = self._configs.get(name)
            return dict(c) if c is not None else None

    def target(self, name: str) -> str:
        with self._lock:
            return self._targets.get(name, "STARTED")

    def restart_request(self, name: str) -> tuple[int, Restart] | None:
        """The latest restart request for the connector and its number (higher is later)."""
        with self._lock:
            return self._restarts.get(name)

    def read_count(self) -> int:
        """How many records were read: a restart request numbered at most this was read
        before now."""
        with self._lock:
            return self._read

    def unreadable(self, name: str) -> dict[str, str]:
        """The connector's sealed values this worker cannot open, each with the reason."""
        with self._lock:
            return dict(self._unreadable.get(name, {}))

    def stored_in_clear(self) -> dict[str, list[str]]:
        """Connectors whose latest record holds secret values in clear (written before
        sealing, or by a worker without a key), with those keys."""
        with self._lock:
            return {n: list(keys) for n, keys in self._clear.items() if keys}

    def sealed_with_previous_key(self) -> dict[str, list[str]]:
        """Connectors with values sealed with a key other than this worker's current one."""
        with self._lock:
            return {n: list(keys) for n, keys in self._stale.items() if keys}

    def to_seal(self, config: Mapping[str, str]) -> list[str]:
        """The keys of ``config`` whose values would be sealed."""
        return [k for k, v in config.items() if self.is_secret(config, k, v)]

    def task_count(self, name: str) -> int:
        with self._lock:
            return self._commits.get(name, 0)

    # -- writes -------------------------------------------------------------------------------
    def put_connector(self, name: str, config: Mapping[str, str], target: str | None) -> None:
        """The connector's config, its (single) task config and commit record, and optionally
        its target state, then wait until this worker's view has them. Raises
        :class:`SealError` when a secret value must be sealed and this worker has no key:
        it is never written in clear."""
        plain, sealed = self.sealer.split(name, config, self.is_secret)
        props = orjson.dumps({"properties": plain, **({SEALED: sealed} if sealed else {})})
        records: list[tuple[str, bytes | None]] = []
        if target is not None:
            records.append((f"target-state-{name}", target_value(target)))
        records += [
            (f"connector-{name}", props),
            (f"task-{name}-0", props),
            (f"commit-{name}", orjson.dumps({"tasks": 1})),
        ]
        self.log.send(records)
        self.log.sync()

    def put_target(self, name: str, state: str) -> None:
        self.log.send([(f"target-state-{name}", target_value(state))])
        self.log.sync()

    def delete_connector(self, name: str) -> None:
        self.log.send(
            [
                (f"connector-{name}", None),
                (f"target-state-{name}", None),
                (f"task-{name}-0", None),
                (f"commit-{name}", None),
            ]
        )
        self.log.sync()

    def request_restart(self, name: str, include_tasks: bool, only_failed: bool) -> None:
        value = {"include-tasks": include_tasks, "only-failed": only_failed}
        self.log.send([(f"restart-connector-{name}", orjson.dumps(value))])
        self.log.sync()

    # -- the reader ---------------------------------------------------------------------------
    def _open(self, name: str, value: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
        """A record's properties with its sealed values opened, and those that would not open
        (they read as ``********``) with the reason."""
        config = {str(k): str(v) for k, v in (value.get("properties") or {}).items()}
        unreadable: dict[str, str] = {}
        sealed = value.get(SEALED)
        for k, token in sealed.items() if isinstance(sealed, dict) else ():
            try:
                config[str(k)] = self.sealer.unseal(name, str(k), str(token))
            except SealError as exc:
                config[str(k)] = UNREADABLE
                unreadable[str(k)] = str(exc)
        return config, unreadable

    def _apply(self, key: str, raw: bytes | None) -> None:
        value: Any = None
        if raw is not None:
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                log.warning("ignoring config record %s: not JSON", key)
                return
        changed: str | None = None
        requested: Restart | None = None
        with self._lock:
            self._read += 1
            if key.startswith("connector-"):
                changed = key[len("connector-") :]
                if value is None:
                    self._configs.pop(changed, None)
                    self._targets.pop(changed, None)
                    self._restarts.pop(changed, None)
                    self._unreadable.pop(changed, None)
                    self._clear.pop(changed, None)
                    self._stale.pop(changed, None)
                elif isinstance(value.get("properties"), dict):
                    config, unreadable = self._open(changed, value)
                    self._configs[changed] = config
                    self._unreadable[changed] = unreadable
                    sealed = value.get(SEALED)
                    self._clear[changed] = [
                        k for k in value["properties"] if self.is_secret(config, k, config[k])
                    ]
                    self._stale[changed] = [
                        str(k)
                        for k, token in (sealed.items() if isinstance(sealed, dict) else ())
                        if str(k) not in unreadable and not self.sealer.is_current(str(token))
                    ]
            elif key.startswith("target-state-"):
                changed = key[len("target-state-") :]
                state = (value or {}).get("state.v2") or (value or {}).get("state")
                if state in STATES:
                    self._targets[changed] = state
                elif value is None:
                    self._targets.pop(changed, None)
            elif key.startswith("task-"):
                name, _, n = key[len("task-") :].rpartition("-")
                if n.isdigit():
                    if value is None:
                        self._tasks.pop((name, int(n)), None)
                    else:
                        self._tasks[(name, int(n))] = self._open(name, value)[0]
            elif key.startswith("commit-"):
                name = key[len("commit-") :]
                if value is None:
                    self._commits.pop(name, None)
                else:
                    self._commits[name] = int(value.get("tasks", 0))
                changed = name
            elif key.startswith("restart-connector-"):
                name = key[len("restart-connector-") :]
                if value is None:
                    self._restarts.pop(name, None)
                    return
                restart = Restart(
                    name, bool(value.get("include-tasks")), bool(value.get("only-failed"))
                )
                self._restarts[name] = (self._read, restart)
                requested = restart if self._live else None
        if requested is not None:
            self.on_restart(requested)
        if changed is not None:
            self.on_change(changed)
