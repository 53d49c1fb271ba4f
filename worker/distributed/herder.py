"""The distributed herder: Kafka Connect's ``DistributedHerder`` on tidemark's standalone one.

It keeps the standalone herder's REST contract (it *is* a :class:`~worker.herder.Herder`), but
no worker owns the cluster's state:

- **Writes** (create, config changes, delete, pause, resume, stop, restarts) accepted on any
  worker are validated there and written to the config topic; the call returns once this
  worker has read its own write back, so the answer reflects it. Offsets are written to the
  shared offsets topic, as in standalone mode with ``offset.storage: kafka``.
- **Tasks** run where the consumer group put their slot (:mod:`.membership`). Every worker
  reads every config record; the owner of a task's slot starts, reconfigures, pauses or stops
  the task, and writes its status (and its connector's) to the status topic.
- **Reads** (status, configs, offsets) come from the topics, so every worker answers the same;
  ``worker_id`` in a status names the worker that runs the task.

All task starts and stops happen on the membership thread (its poll loop and rebalance
callbacks), so a revoke is complete, offsets committed, before the group hands the slot on.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

from cdc.errors import ConfigError
from cdc.offsets.store import OffsetStore
from worker.config import ConnectorEntry, WorkerSettings
from worker.config_providers import Problem
from worker.distributed.config_store import ConfigStore, Restart
from worker.distributed.membership import Membership, Slot
from worker.distributed.status_store import StatusStore, connector_key, task_key
from worker.herder import (
    BadRequest,
    Conflict,
    Herder,
    NotFound,
    Secrets,
    TargetState,
    _Connector,
    invalid_config_message,
)
from worker.registry import (
    PluginError,
    Registry,
    normalise_config,
)
from worker.worker import EngineFactory

log = logging.getLogger("tidemark.worker.distributed")


class DistributedHerder(Herder):
    def __init__(
        self,
        settings: WorkerSettings,
        store: OffsetStore,
        *,
        worker_id: str,
        registry: Registry | None = None,
        engine_factory: EngineFactory | None = None,
        env: Mapping[str, str] | None = None,
        secrets: Secrets | None = None,
    ) -> None:
        super().__init__(
            settings,
            store,
            worker_id=worker_id,
            registry=registry,
            engine_factory=engine_factory,
            state_file=None,
            env=env,
            secrets=secrets,
        )
        s = settings
        self.worker.refresh_offsets = True
        self.worker.transactional_prefix = s.group_id
        client = {"bootstrap.servers": s.bootstrap_servers, **s.internal_client_security()}
        self.configs = ConfigStore(
            client,
            s.config_storage_topic,
            replication_factor=s.config_storage_replication_factor,
            on_change=lambda name: self._dirty.set(),
            on_restart=self._restart_requested,
            sealer=self.sealer,
            is_secret=self._is_secret,
        )
        self.statuses = StatusStore(
            client,
            s.status_storage_topic,
            partitions=s.status_storage_partitions,
            replication_factor=s.status_storage_replication_factor,
        )
        self.membership = Membership(
            client,
            group_id=s.group_id,
            prefix=s.assignment_storage_topic,
            replication_factor=s.config_storage_replication_factor,
            session_timeout_ms=s.session_timeout_ms,
            heartbeat_interval_ms=s.heartbeat_interval_ms,
            rebalance_timeout_ms=s.rebalance_timeout_ms,
            scheduled_rebalance_max_delay_ms=s.scheduled_rebalance_max_delay_ms,
            # Stable across restarts and unique per host (a wildcard bind is the same
            # everywhere): a worker that comes back within the delay gets its tasks back.
            instance_id=f"{socket.gethostname()}-{worker_id}",
            on_assigned=self._assigned,
            on_revoked=self._revoked,
            tick=self._tick,
        )
        self._dirty = threading.Event()
        self._served: dict[str, int] = {}  # connector -> restart requests read before its start
        self._generation: dict[Slot, int] = {}  # slot -> when this worker got it (ms)
        self._applied: dict[str, tuple[dict[str, str], TargetState]] = {}
        self._written: dict[str, dict[str, Any] | None] = {}

    # -- startup and shutdown -----------------------------------------------------------------
    def start(
        self, yaml_connectors: list[ConnectorEntry] | tuple[ConnectorEntry, ...] = ()
    ) -> None:
        """Read the cluster's state, add the YAML file's connectors that the config topic
        lacks (or holds with another config), then join the group."""
        problems = []
        for entry in yaml_connectors:
            config, _ = normalise_config({**entry.config, "name": entry.name})
            problems += [
                (f"connectors[{entry.name}].{k}", why) for k, why in self._storage_problems(config)
            ]
        if problems:
            raise ConfigError(problems)
        self.configs.start()
        self.statuses.start()
        self._seal_stored()
        for entry in yaml_connectors:
            config, _ = normalise_config({**entry.config, "name": entry.name})
            self._yaml[entry.name] = config
            stored = self.configs.config(entry.name)
            if stored == config:
                continue
            if stored is not None:
                log.warning(
                    "connector %s: the config in the YAML file replaces the one in %s",
                    entry.name,
                    self.settings.config_storage_topic,
                )
            target = None if stored is not None else TargetState.from_initial(entry.initial_state)
            self.configs.put_connector(entry.name, config, target)
        self.membership.start()
        self._dirty.set()
        self.state = "running"
        log.info(
            "worker %s joined group %s (%d connector(s) in %s)",
            self.worker_id,
            self.settings.group_id,
            len(self.configs.connectors()),
            self.settings.config_storage_topic,
        )

    # -- sealed secrets (worker.sealing) -------------------------------------------
    def _storage_problems(self, stored: Mapping[str, Any]) -> list[Problem]:
        if self.sealer.enabled:
            return []
        why = (
            "a literal secret would be stored in the config topic in clear: set "
            "config.storage.encryption.key on every worker of the group, or give the value "
            "as a placeholder (${file:...}) instead"
        )
        return [(k, why) for k in self.configs.to_seal({k: str(v) for k, v in stored.items()})]

    def _seal_stored(self) -> None:
        """Seal the secrets of connectors stored in clear (written before sealing, or by a
        worker without a key), and seal again those sealed with a previous key: the topic is
        compacted, so the old record goes in time, and then the old key can be retired."""
        stale = self.configs.sealed_with_previous_key() if self.sealer.enabled else {}
        for name, keys in sorted({**self.configs.stored_in_clear(), **stale}.items()):
            config = self.configs.config(name)
            if config is None:
                continue
            if not self.sealer.enabled:
                log.warning(
                    "connector %s: %s stored in clear in %s; set config.storage.encryption.key "
                    "to seal them",
                    name,
                    ", ".join(keys),
                    self.settings.config_storage_topic,
                )
                continue
            self.configs.put_connector(name, config, None)
            log.info(
                "connector %s: sealed %s in %s with the current key",
                name,
                ", ".join(keys),
                self.settings.config_storage_topic,
            )

    def _start_tasks(self, c: _Connector) -> None:
        unreadable = self.configs.unreadable(c.name)
        if unreadable:
            c.failure = "cannot open the connector's sealed secrets: " + "; ".join(
                f"{k}: {why}" for k, why in sorted(unreadable.items())
            )
            log.error("connector %s %s", c.name, c.failure)
            return
        super()._start_tasks(c)

    def shutdown(self, timeout: float) -> bool:
        """Leave the group: the revoke stops this worker's tasks (offsets committed) before
        the group gives their slots to the others."""
        self.state = "stopping"
        deadline = time.monotonic() + timeout
        self.membership.close(timeout)
        ok = super().shutdown(max(deadline - time.monotonic(), 0.1))
        self.statuses.close()
        self.configs.close()
        return ok

    # -- the membership thread: assignment, reconciliation, status ------------------------------
    def _slot(self, name: str) -> Slot:
        return self.membership.slot(name)

    def _assigned(self, slots: set[Slot]) -> None:
        now = int(time.time() * 1000)
        for s in slots:
            self._generation[s] = now
        self._reconcile()

    def _revoked(self, slots: set[Slot], lost: bool) -> None:
        """Stop the tasks of these slots (all at once, then wait): they are handed over. A
        graceful hand-over marks them UNASSIGNED until the new owner reports; slots *lost*
        (session expired) may be someone else's already, so nothing is written then."""
        with self._lock:
            moving = [c for c in self._connectors.values() if self._slot(c.name) in slots]
        for c in moving:
            if c.runner is not None:
                c.runner.shutdown()
        handed: list[tuple[str, dict[str, Any] | None]] = []
        for c in moving:
            with c.lock:
                had_task = c.runner is not None
                self._stop_tasks(c)
            if self._applied.pop(c.name, None) is not None and had_task and not lost:
                handed.append((task_key(c.name, 0), self._status_value("UNASSIGNED", None, c)))
            for key in (connector_key(c.name), task_key(c.name, 0)):
                self._written.pop(key, None)
        if handed:
            self._put_status(handed)
        for s in slots:
            self._generation.pop(s, None)

    def _status_value(self, state: str, trace: str | None, c: _Connector) -> dict[str, Any]:
        return {
            "state": state,
            "trace": trace,
            "worker_id": self.worker_id,
            "generation": self._generation.get(self._slot(c.name), 0),
        }

    def _restart_requested(self, restart: Restart) -> None:
        self._dirty.set()

    def _tick(self) -> None:
        self.membership.ensure(self.configs.connectors())
        if self._dirty.is_set():
            self._dirty.clear()
            self._reconcile()
        self._write_statuses()

    def _entry(self, name: str, config: dict[str, str]) -> _Connector:
        """This worker's entry for a connector, with the config topic's config and target."""
        target = TargetState(self.configs.target(name))
        with self._lock:
            c = self._connectors.get(name)
            if c is None:
                c = self._connectors[name] = _Connector(name, config, target)
            c.config, c.target = config, target
            if c.plugin is None:
                with contextlib.suppress(PluginError):
                    c.plugin = self.registry.resolve(config.get("connector.class", ""))
            return c

    def _reconcile(self) -> None:
        owned = self.membership.owned()
        configs = self.configs.connectors()
        with self._lock:
            gone = [c for n, c in self._connectors.items() if n not in configs]
        for c in gone:  # deleted: stop the task, remove its status
            with c.lock:
                self._stop_tasks(c)
            with self._lock:
                self._connectors.pop(c.name, None)
            if self._applied.pop(c.name, None) is not None:
                self._put_status([(connector_key(c.name), None), (task_key(c.name, 0), None)])
            self.membership.retire(c.name)
        for name, config in configs.items():
            c = self._entry(name, config)
            if self._slot(name) not in owned:
                continue
            with c.lock:
                self._apply(c)
            self._check_restart(c)

    def _check_restart(self, c: _Connector) -> None:
        """Act on the connector's latest restart request unless its task was started after
        the request was read: the request stays in the config topic, so a new owner checks
        it too, and a request written while the task moved is not lost."""
        request = self.configs.restart_request(c.name)
        if request is None or request[0] <= self._served.get(c.name, 0):
            return
        self._served[c.name] = request[0]
        self._restart_local(c, request[1])

    def _apply(self, c: _Connector) -> None:
        """Bring an owned connector's task to its config and target state."""
        applied = self._applied.get(c.name)
        if applied is not None and applied == (c.config, c.target):
            return
        self._applied[c.name] = (dict(c.config), c.target)
        runner = c.runner
        if applied is None or applied[0] != c.config or runner is None:
            self._stop_tasks(c)
            self._served[c.name] = self.configs.read_count()  # a fresh start serves them
            self._start_tasks(c)
            if c.target is TargetState.STOPPED:
                self._put_status([(task_key(c.name, 0), None)])
        elif c.target is TargetState.STOPPED:
            self._stop_tasks(c)
            self._put_status([(task_key(c.name, 0), None)])
        elif c.target is TargetState.PAUSED:
            runner.pause()
        else:
            runner.resume()

    def _restart_local(self, c: _Connector, r: Restart) -> None:
        with c.lock:
            runner = c.runner
            if (not r.only_failed or c.failure is not None) and (
                c.failure is not None or runner is None
            ):
                self._stop_tasks(c)
                self._start_tasks(c)
            elif r.include_tasks and runner is not None and (not r.only_failed or runner.failed):
                runner.restart()
        log.info("connector %s restarted on request", c.name)

    def _write_statuses(self) -> None:
        owned = self.membership.owned()
        out: list[tuple[str, dict[str, Any] | None]] = []
        with self._lock:
            mine = [c for c in self._connectors.values() if self._slot(c.name) in owned]
        for c in mine:
            if c.name not in self._applied:
                continue
            trace = c.failure if c.target is not TargetState.STOPPED else None
            conn = self._status_value(self._connector_state(c), trace, c)
            entries: list[tuple[str, dict[str, Any] | None]] = [(connector_key(c.name), conn)]
            runner = c.runner
            if runner is not None:
                t = runner.status()
                task = self._status_value(t["state"], t.get("trace"), c)
                entries.append((task_key(c.name, 0), task))
            out += [(k, v) for k, v in entries if self._written.get(k, {}) != v]
        if out:
            self._put_status(out)

    def _put_status(self, entries: list[tuple[str, dict[str, Any] | None]]) -> None:
        self.statuses.put(entries)
        for k, v in entries:
            self._written[k] = v

    # -- queries: from the topics -------------------------------------------------------------
    def _get(self, name: str) -> _Connector:
        config = self.configs.config(name)
        if config is None:
            raise NotFound(f"Connector {name} not found")
        return self._entry(name, config)

    def connector_names(self) -> list[str]:
        return sorted(self.configs.connectors())

    def connector_info(self, name: str) -> dict[str, Any]:
        c = self._get(name)
        running = c.target is not TargetState.STOPPED and self.configs.task_count(name) > 0
        return {
            "name": name,
            "config": self._masked(c),
            "tasks": [{"connector": name, "task": 0}] if running else [],
            "type": "source",
        }

    def connector_status(self, name: str) -> dict[str, Any]:
        c = self._get(name)
        conn = self.statuses.get(connector_key(name)) or {"state": "UNASSIGNED", "worker_id": ""}
        out = {"state": conn["state"], "worker_id": conn.get("worker_id") or ""}
        if c.target is TargetState.STOPPED:
            out["state"] = "STOPPED"
        elif conn.get("trace"):
            out["trace"] = conn["trace"]
        tasks = [] if c.target is TargetState.STOPPED else [self._task_state(name)]
        return {"name": name, "connector": out, "tasks": tasks, "type": "source"}

    def _task_state(self, name: str) -> dict[str, Any]:
        t = self.statuses.get(task_key(name, 0)) or {"state": "UNASSIGNED", "worker_id": ""}
        out: dict[str, Any] = {"id": 0, "state": t["state"], "worker_id": t.get("worker_id", "")}
        if t.get("trace"):
            out["trace"] = t["trace"]
        return out

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        c = self._get(name)
        if not self.connector_info(name)["tasks"]:
            return []
        config = self._masked(c)
        if c.plugin is not None:
            config["task.class"] = c.plugin.task_class_name
        return [{"id": {"connector": name, "task": 0}, "config": config}]

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        if task != 0 or not self.connector_info(name)["tasks"]:
            raise NotFound(f"Task {name}-{task} not found")
        return self._task_state(name)

    def task_worker(self, name: str) -> str | None:
        """The worker the status topic says runs the task (RUNNING or PAUSED), else None."""
        self._get(name)
        t = self.statuses.get(task_key(name, 0))
        if t is None or t.get("state") not in ("RUNNING", "PAUSED"):
            return None
        return str(t.get("worker_id") or "") or None

    # -- writes: through the config topic ------------------------------------------------------
    def create(
        self, name: str, config: Mapping[str, Any], initial_state: str = "RUNNING"
    ) -> dict[str, Any]:
        checked = self._check_new(name, config, initial_state)
        if self.configs.config(name) is not None:
            raise Conflict(f"Connector {name} already exists")
        target = TargetState.from_initial(initial_state)
        self.configs.put_connector(name, checked.stored, str(target))
        log.info("connector %s created (%s)", name, initial_state)
        return self.connector_info(name)

    def _exists(self, name: str) -> bool:
        return self.configs.config(name) is not None

    def _reconfigure(self, name: str, config: dict[str, Any]) -> dict[str, Any]:
        c = self._get(name)
        unreadable = self.configs.unreadable(name)
        kept = [k for k, v in config.items() if k in unreadable and v == c.config.get(k)]
        if kept:
            raise BadRequest(
                f"Connector configuration is invalid: {', '.join(kept)}: send the secret again; "
                f"this worker cannot open the stored one ({unreadable[kept[0]]})"
            )
        checked = self._check({**self._restore_masked(c, config), "name": name})
        checked.problems += self._storage_problems(checked.stored)
        self._check_connection(name, checked)
        if not checked.ok:
            raise BadRequest(invalid_config_message(name, checked))
        if checked.stored != c.config:
            self.configs.put_connector(name, checked.stored, None)
            log.info("connector %s reconfigured", name)
        return self.connector_info(name)

    def delete(self, name: str) -> None:
        self._get(name)
        self.configs.delete_connector(name)
        log.info("connector %s deleted (its offsets are kept)", name)

    def pause(self, name: str) -> None:
        self._get(name)
        self.configs.put_target(name, "PAUSED")

    def resume(self, name: str) -> None:
        self._get(name)
        self.configs.put_target(name, "STARTED")

    def stop(self, name: str) -> None:
        """Write the target state, then wait (up to the graceful timeout) until the owner
        reports the task gone, so offsets can be edited when this returns."""
        self._get(name)
        self.configs.put_target(name, "STOPPED")
        deadline = time.monotonic() + self.settings.task_shutdown_graceful_timeout_ms / 1000
        while self.statuses.get(task_key(name, 0)) is not None:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)

    def restart_connector(
        self, name: str, include_tasks: bool = False, only_failed: bool = False
    ) -> dict[str, Any] | None:
        body: dict[str, Any] | None = None
        if include_tasks or only_failed:
            body = self.connector_status(name)
            if not only_failed or body["connector"]["state"] == "FAILED":
                body["connector"]["state"] = "RESTARTING"
                body["connector"].pop("trace", None)
            for t in body["tasks"]:
                if include_tasks and (not only_failed or t["state"] == "FAILED"):
                    t["state"] = "RESTARTING"
                    t.pop("trace", None)
        else:
            self._get(name)
        self.configs.request_restart(name, include_tasks, only_failed)
        return body

    def restart_task(self, name: str, task: int) -> None:
        self.task_status(name, task)
        self.configs.request_restart(name, True, False)

    # -- offsets: the shared offsets topic ---------------------------------------------------
    def _refresh_offsets(self) -> None:
        refresh = getattr(self.store, "refresh", None)
        if callable(refresh):
            refresh()

    def _require_stopped(self, c: _Connector) -> None:
        super()._require_stopped(c)
        if self.statuses.get(task_key(c.name, 0)) is not None:
            raise Conflict(f"Connector {c.name}'s tasks are still stopping; try again shortly")
