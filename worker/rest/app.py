"""Kafka Connect's REST API as a plain function from :class:`Request` to :class:`Response`.

Kept apart from the HTTP server so the whole contract can be tested without sockets, and so
the route table is the one source for both dispatch and the OpenAPI document. Paths, status
codes and JSON shapes are Kafka Connect's (``docs/worker.md`` lists them); the differences are
deliberate and documented there: secrets are masked in configs, active topics are those
written since the worker started (not kept across restarts), placeholders in configs sent
here are limited to the providers the worker config allows (``docs/security.md``), every answer
is scrubbed of resolved secret values, and ``/health``, ``/metrics``, ``/openapi.json`` and
``/tidemark/status`` are added.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from cdc.signals import model as signals
from cdc.signals import registry as signal_registry
from worker import redaction
from worker.code_policy import python_code_problems
from worker.config_providers import RESOLVED, Provider, SecretValues, check_placeholders
from worker.herder import BadRequest, Conflict, Herder, HerderError, NotFound
from worker.path_policy import path_problems
from worker.registry import endpoint_changes, normalise_config
from worker.rest.forward import Unreachable, forward
from worker.rest.openapi import document

log = logging.getLogger("tidemark.worker.rest")


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]] = field(default_factory=dict)
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    #: ``scheme://host[:port]`` the client addressed (its Host header), for absolute
    #: ``Location`` headers as Kafka Connect sends them; empty: paths only
    base_url: str = ""

    def json(self) -> Any:
        if not self.body.strip():
            raise BadRequest("Request body is empty; a JSON document is required")
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(f"Request body is not valid JSON: {exc}") from exc

    def json_object(self) -> dict[str, Any]:
        doc = self.json()
        if not isinstance(doc, dict):
            raise BadRequest("Request body must be a JSON object")
        return doc

    def flag(self, name: str, default: bool = False) -> bool:
        values = self.query.get(name)
        if not values:
            return default
        text = values[-1].strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise BadRequest(f"Query parameter {name} must be true or false, not {values[-1]!r}")


def location(req: Request, name: str) -> str:
    """The new connector's URL: absolute, on the host the client addressed, as Kafka Connect
    answers (JAX-RS resolves its path against the request's base URI)."""
    return f"{req.base_url}/connectors/{quote(name, safe='')}"


@dataclass
class Response:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"

    def encoded(self) -> bytes:
        if self.status == 204 or self.body is None:
            return b""
        if isinstance(self.body, bytes):
            return self.body
        return orjson.dumps(self.body)


Handler = Callable[[Request, dict[str, str]], Response]


@dataclass(frozen=True)
class Route:
    method: str
    template: str
    handler: Handler
    summary: str
    responses: tuple[int, ...] = (200,)
    request: str | None = None  # OpenAPI schema name of the body
    response: str | None = None  # OpenAPI schema name of the success body
    query: tuple[str, ...] = ()
    tag: str = "connectors"

    @property
    def pattern(self) -> re.Pattern[str]:
        regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.template))
        return re.compile(f"^{regex}$")


def error(status: int, message: str) -> Response:
    return Response(status, {"error_code": status, "message": message})


LOG4J_LEVELS = {"WARNING": "WARN", "CRITICAL": "FATAL"}
PY_LEVELS = {"TRACE": "DEBUG", "WARN": "WARNING", "FATAL": "CRITICAL", "OFF": "CRITICAL"}


class App:
    def __init__(
        self,
        herder: Herder,
        *,
        version: str,
        commit: str = "unknown",
        cluster_id: Callable[[], str] = lambda: "",
        providers: Mapping[str, Provider] | None = None,
        secrets: SecretValues = RESOLVED,
    ) -> None:
        self.herder = herder
        self.providers = herder.settings.rest_providers() if providers is None else providers
        self.secrets = secrets
        self.version = version
        self.commit = commit
        self.cluster_id = cluster_id
        self._logger_changes: dict[str, int] = {}
        self.routes = self._routes()
        self._compiled = [(r, r.pattern) for r in self.routes]

    # -- dispatch -----------------------------------------------------------------------------
    def handle(self, req: Request) -> Response:
        resp = self._handle(req)
        # folded once per request, not per string of the answer
        sent = req.body.decode("utf-8", "replace").lower() if req.body else ""
        resp.body = self._scrub(resp.body, sent)
        return resp

    def _scrub(self, body: Any, sent: str = "") -> Any:
        """The last line of defence: no resolved secret value leaves in an answer, whatever
        path (a trace, an error message echoing a value, a metric label) carried it here.
        What the caller ``sent`` is not masked in its echo (see SecretValues.redact)."""

        def redact(text: str) -> str:
            return self.secrets.redact(text, sent)

        if isinstance(body, str):
            return redaction.scrub(redact, body)
        if isinstance(body, bytes):
            return redaction.scrub(redact, body.decode("utf-8", "replace")).encode()
        if isinstance(body, dict):
            return {self._scrub(k, sent): self._scrub(v, sent) for k, v in body.items()}
        if isinstance(body, list):
            return [self._scrub(v, sent) for v in body]
        return body

    def check_providers(self, config: Mapping[str, Any], name: str | None = None) -> None:
        """400 when the config names a provider, path or variable the worker does not allow
        for REST, or carries Python code (:mod:`worker.code_policy`). Values equal to
        the connector's current ones (a YAML connector's placeholders or condition read back
        with GET and sent again) are not new, so not checked."""
        current: dict[str, str] = {}
        if name is not None:
            with contextlib.suppress(NotFound):
                current = self.herder.connector_config(name)
        # Checked in the form the worker will use: a value sent as a JSON list
        # (["${env:X}"]) becomes the string the resolver reads, so it must be checked as one.
        normalised, _ = normalise_config(config)
        if current and endpoint_changes(current, normalised):
            # the connector would connect elsewhere: its unchanged placeholders would resolve
            # there too, so they are checked as if new
            current = {}
        given = {k: v for k, v in normalised.items() if current.get(k) != v}
        problems = check_placeholders(given, self.providers)
        if not self.herder.settings.rest_allow_python_transforms:
            problems += python_code_problems(given)
        problems += path_problems(given, self.herder.settings, self.providers)
        if problems:
            lines = "\n".join(f"{k}: {m}" for k, m in problems)
            raise BadRequest(
                f"Connector configuration is invalid and contains the following "
                f"{len(problems)} error(s):\n{lines}"
            )

    def _handle(self, req: Request) -> Response:
        path = req.path.rstrip("/") or "/"
        allowed: list[str] = []
        for route, pattern in self._compiled:
            match = pattern.match(path)
            if match is None:
                continue
            if route.method != req.method:
                allowed.append(route.method)
                continue
            params = {k: unquote(v) for k, v in match.groupdict().items()}
            try:
                return route.handler(req, params)
            except HerderError as exc:
                return error(exc.status, exc.message)
            except Exception:
                log.exception("%s %s failed", req.method, req.path)
                return error(500, "Internal error; see the worker log")
        if allowed:
            resp = error(405, f"Method {req.method} not allowed on {path}")
            resp.headers["Allow"] = ", ".join(sorted(set(allowed)))
            return resp
        return error(404, f"Unknown resource {path}")

    # -- route table --------------------------------------------------------------------------
    def _routes(self) -> list[Route]:
        R = Route
        c = "/connectors/{connector}"
        return [
            R(
                "GET",
                "/",
                self.server_info,
                "Worker version and Kafka cluster id",
                response="ServerInfo",
                tag="worker",
            ),
            R(
                "GET",
                "/health",
                self.health,
                "Worker health (KIP-1017)",
                (200, 500, 503),
                response="WorkerStatus",
                tag="worker",
            ),
            R("GET", "/metrics", self.metrics, "Prometheus metrics (text format)", tag="worker"),
            R("GET", "/openapi.json", self.openapi, "This document", tag="worker"),
            R(
                "GET",
                "/connectors",
                self.list_connectors,
                "Connector names, or with ?expand= their status and/or info",
                query=("expand",),
                response="ConnectorList",
            ),
            R(
                "POST",
                "/connectors",
                self.create,
                "Create a connector",
                (201, 400, 409),
                request="CreateConnectorRequest",
                response="ConnectorInfo",
            ),
            R("GET", c, self.info, "Connector info", (200, 404), response="ConnectorInfo"),
            R("DELETE", c, self.delete, "Delete a connector (its offsets are kept)", (204, 404)),
            R(
                "GET",
                f"{c}/config",
                self.get_config,
                "Connector config (secrets masked)",
                (200, 404),
                response="ConnectorConfig",
            ),
            R(
                "PUT",
                f"{c}/config",
                self.put_config,
                "Create or replace a connector's config",
                (200, 201, 400),
                request="ConnectorConfig",
                response="ConnectorInfo",
            ),
            R(
                "PATCH",
                f"{c}/config",
                self.patch_config,
                "Change some keys (null removes one)",
                (200, 400, 404),
                request="ConnectorConfigPatch",
                response="ConnectorInfo",
            ),
            R(
                "GET",
                f"{c}/status",
                self.status,
                "Connector and task states",
                (200, 404),
                response="ConnectorStateInfo",
            ),
            R(
                "POST",
                f"{c}/restart",
                self.restart,
                "Restart the connector (and its tasks)",
                (202, 204, 404),
                query=("includeTasks", "onlyFailed"),
                response="ConnectorStateInfo",
            ),
            R("PUT", f"{c}/pause", self.pause, "Pause: tasks stop producing", (202, 404)),
            R(
                "PUT",
                f"{c}/resume",
                self.resume,
                "Resume a paused or stopped connector",
                (202, 404),
            ),
            R("PUT", f"{c}/stop", self.stop, "Stop: tasks shut down, offsets editable", (204, 404)),
            R("GET", f"{c}/tasks", self.tasks, "Task configs", (200, 404), response="TaskInfos"),
            R(
                "GET",
                f"{c}/tasks-config",
                self.tasks_config,
                "Task configs (deprecated form)",
                (200, 404),
            ),
            R(
                "GET",
                f"{c}/tasks/{{task}}/status",
                self.task_status,
                "One task's state",
                (200, 404),
                response="TaskState",
            ),
            R(
                "POST",
                f"{c}/tasks/{{task}}/restart",
                self.task_restart,
                "Restart one task",
                (204, 404),
            ),
            R(
                "GET",
                f"{c}/topics",
                self.topics,
                "Topics the connector has written since the worker started or the last reset",
                (200, 404),
            ),
            R(
                "PUT",
                f"{c}/topics/reset",
                self.reset_topics,
                "Forget the connector's active topics",
                (202, 404),
            ),
            R(
                "GET",
                f"{c}/offsets",
                self.get_offsets,
                "Stored source offsets",
                (200, 404),
                response="ConnectorOffsets",
            ),
            R(
                "PATCH",
                f"{c}/offsets",
                self.alter_offsets,
                "Alter offsets (STOPPED only)",
                (200, 400, 404, 409),
                request="ConnectorOffsets",
                response="Message",
            ),
            R(
                "POST",
                f"{c}/signals",
                self.signal,
                "Send a signal (id, type, data) to the running task (signal.enabled.channels=rest)",
                (202, 400, 404, 409),
                query=("forward",),
            ),
            R(
                "DELETE",
                f"{c}/offsets",
                self.reset_offsets,
                "Reset offsets (STOPPED only)",
                (200, 400, 404, 409),
                response="Message",
            ),
            R(
                "GET",
                "/connector-plugins",
                self.plugins,
                "Installed connector plugins",
                query=("connectorsOnly",),
                response="PluginInfos",
                tag="plugins",
            ),
            R(
                "GET",
                "/connector-plugins/{plugin}/config",
                self.plugin_config,
                "A plugin's config definitions",
                (200, 404),
                tag="plugins",
            ),
            R(
                "PUT",
                "/connector-plugins/{plugin}/config/validate",
                self.validate,
                "Validate a connector config",
                (200, 400),
                request="ConnectorConfig",
                response="ConfigInfos",
                tag="plugins",
            ),
            R("GET", "/admin/loggers", self.loggers, "Logger levels", tag="admin"),
            R(
                "GET",
                "/admin/loggers/{logger}",
                self.logger,
                "One logger's level",
                (200, 404),
                tag="admin",
            ),
            R(
                "PUT",
                "/admin/loggers/{logger}",
                self.set_logger,
                "Set a logger's level",
                (200, 204, 400),
                query=("scope",),
                tag="admin",
            ),
            R(
                "GET",
                "/tidemark/status",
                self.progress,
                "tidemark extension: status with "
                "snapshot/streaming progress per task (used by `tidemark status`)",
                tag="tidemark",
            ),
        ]

    # -- worker -------------------------------------------------------------------------------
    def server_info(self, req: Request, p: dict[str, str]) -> Response:
        return Response(
            200,
            {"version": self.version, "commit": self.commit, "kafka_cluster_id": self.cluster_id()},
        )

    def health(self, req: Request, p: dict[str, str]) -> Response:
        status, body = self.herder.health()
        return Response(status, body)

    def metrics(self, req: Request, p: dict[str, str]) -> Response:
        return Response(200, generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)

    def openapi(self, req: Request, p: dict[str, str]) -> Response:
        return Response(200, document(self.routes, self.version))

    def progress(self, req: Request, p: dict[str, str]) -> Response:
        return Response(200, self.herder.progress())

    # -- connectors ---------------------------------------------------------------------------
    def list_connectors(self, req: Request, p: dict[str, str]) -> Response:
        expand = [v for value in req.query.get("expand", []) for v in value.split(",")]
        if any(e in ("status", "info") for e in expand):
            out = self.herder.expanded(expand)
            for entry in out.values():
                if "status" in entry:
                    self.versioned(entry["status"])
            return Response(200, out)
        return Response(200, self.herder.connector_names())

    def create(self, req: Request, p: dict[str, str]) -> Response:
        body = req.json_object()
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise BadRequest("Connector name must be given as a non-empty string in 'name'")
        config = body.get("config")
        if not isinstance(config, dict):
            raise BadRequest("Connector config must be given as a JSON object in 'config'")
        self.check_providers(config)
        info = self.herder.create(name, config, str(body.get("initial_state") or "RUNNING"))
        return Response(201, info, {"Location": location(req, name)})

    def info(self, req: Request, p: dict[str, str]) -> Response:
        return Response(200, self.herder.connector_info(p["connector"]))

    def delete(self, req: Request, p: dict[str, str]) -> Response:
        self.herder.delete(p["connector"])
        self.herder.worker.topics.pop(p["connector"], None)
        return Response(204)

    def get_config(self, req: Request, p: dict[str, str]) -> Response:
        return Response(200, self.herder.connector_config(p["connector"]))

    def put_config(self, req: Request, p: dict[str, str]) -> Response:
        name = p["connector"]
        config = req.json_object()
        self.check_providers(config, name)
        created, info = self.herder.put_config(name, config)
        if created:
            return Response(201, info, {"Location": location(req, name)})
        return Response(200, info)

    def patch_config(self, req: Request, p: dict[str, str]) -> Response:
        patch = req.json_object()
        # checked as the whole config it makes: a patch of the hostname alone would otherwise
        # send the connector's unchanged placeholders' values to the new host
        merged: dict[str, Any] = {}
        with contextlib.suppress(NotFound):  # the herder answers 404 itself
            merged = dict(self.herder.connector_config(p["connector"]))
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        self.check_providers(merged, p["connector"])
        return Response(200, self.herder.patch_config(p["connector"], patch))

    def versioned(self, status: dict[str, Any]) -> dict[str, Any]:
        """Kafka Connect 4.x reports the plugin version of the connector and of each task;
        every tidemark connector is tidemark's version."""
        if isinstance(status.get("connector"), dict):
            status["connector"]["version"] = self.version
        for task in status.get("tasks") or []:
            task["version"] = self.version
        return status

    def status(self, req: Request, p: dict[str, str]) -> Response:
        return Response(200, self.versioned(self.herder.connector_status(p["connector"])))

    def restart(self, req: Request, p: dict[str, str]) -> Response:
        include_tasks = req.flag("includeTasks")
        only_failed = req.flag("onlyFailed")
        body = self.herder.restart_connector(p["connector"], include_tasks, only_failed)
        return Response(204) if body is None else Response(202, self.versioned(body))

    def pause(self, req: Request, p: dict[str, str]) -> Response:
        self.herder.pause(p["connector"])
        return Response(202)

    def resume(self, req: Request, p: dict[str, str]) -> Response:
        self.herder.resume(p["connector"])
        return Response(202)

    def stop(self, req: Request, p: dict[str, str]) -> Response:
        self.herder.stop(p["connector"])
        return Response(204)

    def tasks(self, req: Request, p: dict[str, str]) -> Response:
        return Response(200, self.herder.task_configs(p["connector"]))

    def tasks_config(self, req: Request, p: dict[str, str]) -> Response:
        out = {
            f"{t['id']['connector']}-{t['id']['task']}": t["config"]
            for t in self.herder.task_configs(p["connector"])
        }
        return Response(200, out)

    def _task(self, p: dict[str, str]) -> int:
        try:
            return int(p["task"])
        except ValueError:
            raise NotFound(f"Task {p['connector']}-{p['task']} not found") from None

    def task_status(self, req: Request, p: dict[str, str]) -> Response:
        status = dict(self.herder.task_status(p["connector"], self._task(p)))
        return Response(200, {**status, "version": self.version})

    def task_restart(self, req: Request, p: dict[str, str]) -> Response:
        self.herder.restart_task(p["connector"], self._task(p))
        return Response(204)

    def topics(self, req: Request, p: dict[str, str]) -> Response:
        name = p["connector"]
        self.herder.connector_info(name)  # 404 for an unknown connector
        topics = sorted(self.herder.worker.topics.get(name, ()))
        return Response(200, {name: {"topics": topics}})

    def reset_topics(self, req: Request, p: dict[str, str]) -> Response:
        name = p["connector"]
        self.herder.connector_info(name)
        self.herder.worker.reset_topics(name)
        return Response(202)

    def get_offsets(self, req: Request, p: dict[str, str]) -> Response:
        return Response(200, self.herder.offsets(p["connector"]))

    def alter_offsets(self, req: Request, p: dict[str, str]) -> Response:
        name = p["connector"]
        self.herder.connector_info(name)  # 404 before a body error, as Kafka Connect
        return Response(200, self.herder.alter_offsets(name, req.json()))

    def signal(self, req: Request, p: dict[str, str]) -> Response:
        """tidemark's own route (Debezium signals by REST): hand the signal to the task's
        incremental snapshot; in distributed mode, forwarded to the worker running the task
        (unless ``forward=false``: a forwarded call); 409 when no running task accepts it."""
        name = p["connector"]
        self.herder.connector_info(name)  # 404 for an unknown connector
        body = req.json_object()
        try:
            sig = signals.parse(
                body.get("id") or uuid.uuid4().hex, body.get("type"), body.get("data"), "rest"
            )
        except signals.SignalError as exc:
            raise BadRequest(str(exc)) from exc
        if signal_registry.deliver(name, sig):
            return Response(202, {"id": sig.id, "type": sig.type, "data": sig.data})
        where = self.herder.task_worker(name)
        if where is None:
            raise Conflict(f"Connector {name}'s task is not running on any worker")
        if where != self.herder.worker_id and req.flag("forward", True):
            # distributed mode: the task runs on another worker, which answers
            try:
                status, answer = forward(
                    self.herder.settings,
                    where,
                    req.method,
                    req.path,
                    req.body,
                    req.headers.get("authorization"),
                )
            except Unreachable as exc:
                raise Conflict(
                    f"Connector {name}'s task runs on worker {where}, which did not answer "
                    f"({exc}); try again once the task's status is settled"
                ) from exc
            return Response(status, answer)
        raise Conflict(
            f"Connector {name} has no running task here that accepts signals (it needs "
            "signal.data.collection or read.only=true, and rest in signal.enabled.channels)"
        )

    def reset_offsets(self, req: Request, p: dict[str, str]) -> Response:
        return Response(200, self.herder.reset_offsets(p["connector"]))

    # -- plugins ------------------------------------------------------------------------------
    def plugins(self, req: Request, p: dict[str, str]) -> Response:
        only = (req.query.get("connectorsOnly") or ["true"])[-1].strip().lower()
        if only not in ("true", "false"):
            raise BadRequest(f"connectorsOnly must be true or false, got {only!r}")
        return Response(200, self.herder.plugins(connectors_only=only == "true"))

    def plugin_config(self, req: Request, p: dict[str, str]) -> Response:
        return Response(200, self.herder.plugin_config(p["plugin"]))

    def validate(self, req: Request, p: dict[str, str]) -> Response:
        config = req.json_object()
        self.check_providers(config)
        return Response(200, self.herder.validate(p["plugin"], config))

    # -- loggers ------------------------------------------------------------------------------
    def _level(self, name: str, logger: logging.Logger) -> dict[str, Any]:
        level = logging.getLevelName(logger.getEffectiveLevel())
        return {
            "level": LOG4J_LEVELS.get(level, level),
            "last_modified": self._logger_changes.get(name),
        }

    def loggers(self, req: Request, p: dict[str, str]) -> Response:
        out = {"root": self._level("root", logging.getLogger())}
        for name, obj in sorted(logging.Logger.manager.loggerDict.items()):
            if isinstance(obj, logging.Logger) and obj.level != logging.NOTSET:
                out[name] = self._level(name, obj)
        return Response(200, out)

    def _logger(self, name: str) -> logging.Logger:
        if name == "root":
            return logging.getLogger()
        if name not in logging.Logger.manager.loggerDict:
            raise NotFound(f"Logger {name} not found")
        return logging.getLogger(name)

    def logger(self, req: Request, p: dict[str, str]) -> Response:
        name = p["logger"]
        return Response(200, self._level(name, self._logger(name)))

    def set_logger(self, req: Request, p: dict[str, str]) -> Response:
        body = req.json_object()
        level = str(body.get("level", "")).upper()
        py_level = PY_LEVELS.get(level, level)
        if py_level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise BadRequest(f"Invalid log level '{body.get('level')}'")
        name = p["logger"]
        logger = logging.getLogger() if name == "root" else logging.getLogger(name)
        affected = [name]
        logger.setLevel(py_level)
        prefix = "" if name == "root" else name + "."
        for other, obj in list(logging.Logger.manager.loggerDict.items()):
            if (
                isinstance(obj, logging.Logger)
                and other.startswith(prefix)
                and other != name
                and obj.level != logging.NOTSET
            ):
                obj.setLevel(py_level)
                affected.append(other)
        now = int(time.time() * 1000)
        for n in affected:
            self._logger_changes[n] = now
        scope = (req.query.get("scope") or ["worker"])[-1].lower()
        if scope == "cluster":
            return Response(204)  # standalone: the cluster is this worker
        return Response(200, sorted(affected))
