"""``tidemark run CONFIG``: the worker process.

Start order: lock the state dir (two workers on one offsets file would overwrite each other's
offsets), open the offset store, bind the REST port (``/health`` answers "starting"), start the
connectors, then report healthy. On SIGTERM or SIGINT every task stops at once: sources stop
reading, queues drain, the producer flushes and acknowledged offsets are committed (the
engine's own stop). The process exits 0 when all of that finished within
``task.shutdown.graceful.timeout.ms``, 1 otherwise; a second signal exits at once.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import ipaddress
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import IO, Any
from urllib.parse import urlsplit

import orjson

from cdc.errors import ConfigError
from cdc.offsets.file import FileOffsetStore
from cdc.offsets.memory import MemoryOffsetStore
from cdc.offsets.store import OffsetStore
from worker import config_providers, redaction
from worker.config import WorkerConfig, WorkerSettings
from worker.herder import Herder, Secrets
from worker.registry import Registry, tidemark_version
from worker.rest import App, RestServer
from worker.rest import metrics as worker_metrics
from worker.rest.auth import BasicAuth
from worker.rest.server import server_tls
from worker.task import TaskRunner
from worker.worker import EngineFactory

log = logging.getLogger("tidemark.worker")

LEVELS = {"TRACE": logging.DEBUG, "WARN": logging.WARNING}
#: Python's level names as log4j writes them, for the JSON format's ``level``
LOG4J_NAMES = {"WARNING": "WARN", "CRITICAL": "FATAL"}


# -- logging ----------------------------------------------------------------------------------
class ContextFilter(logging.Filter):
    """Adds ``[connector-task phase]`` to records logged from a task's threads, whatever logger
    they use (the engine's, the connector's), by the thread names the worker and engine give."""

    def __init__(self, phase: Callable[[str], str | None] = lambda c: None) -> None:
        super().__init__()
        self.phase = phase

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.threadName or ""
        connector = task = None
        if name.startswith("tidemark-task-"):
            connector, _, task = name[len("tidemark-task-") :].rpartition("-")
        elif name.startswith("tidemark-source-"):
            connector, task = name[len("tidemark-source-") :], "0"
        phase = self.phase(connector) if connector else None
        record.connector, record.task, record.phase = connector, task, phase
        if connector:
            record.context = f" [{connector}-{task}{' ' + phase if phase else ''}]"
        else:
            record.context = ""
        return True


class WorkerSecrets(Secrets):
    """The herder's secret values (secret keys of each config) and every value a placeholder
    resolved to in this process, whatever key it filled (a host name read from a file is
    scrubbed from a driver's "cannot resolve host" as well)."""

    def redact(self, text: str) -> str:
        return config_providers.RESOLVED.redact(super().redact(text))


class RedactingFormatter(logging.Formatter):
    """Last line of defence: resolved secrets never reach the log, not even in a traceback.

    Only what can carry a value is scrubbed: the message, and an exception's or a stack's
    text except its frame lines (:mod:`worker.redaction`). Not the logger name, the time, the
    level, the task context or the code paths: those are the same on every line, so a short
    password that happens to equal a word of them (``tidemark``, as in every logger name)
    would be masked there on every line and so disclosed by where the mask stands."""

    def __init__(self, secrets: Secrets, fmt: str) -> None:
        super().__init__(fmt)
        self.secrets = secrets

    def format(self, record: logging.LogRecord) -> str:
        # Another handler may have formatted the record first and cached its exception text
        # unscrubbed; logging would reuse that cache instead of calling formatException.
        cached = record.exc_text
        if cached:
            record.exc_text = self._scrub_trace(cached)
        try:
            return super().format(record)
        finally:
            record.exc_text = cached

    def formatMessage(self, record: logging.LogRecord) -> str:
        message = record.message
        record.message = self.secrets.redact(message)
        try:
            return super().formatMessage(record)
        finally:
            record.message = message

    def formatException(self, ei: Any) -> str:
        return self._scrub_trace(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return self._scrub_trace(super().formatStack(stack_info))

    def _scrub_trace(self, text: str) -> str:
        return redaction.scrub(self.secrets.redact, text)


class JsonRedactingFormatter(RedactingFormatter):
    """``log.format: json``: one JSON object per line, for log collectors that index fields
    (Kubernetes, Loki, Elasticsearch) instead of parsing text. The message, the exception and
    the stack are scrubbed as in the text format; the task context is split into its own
    fields (``connector``, ``task``, ``phase``) so a query can select one connector."""

    def __init__(self, secrets: Secrets) -> None:
        super().__init__(secrets, "%(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        doc: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": LOG4J_NAMES.get(record.levelname, record.levelname),
            "logger": record.name,
            "message": self.secrets.redact(record.message),
            "thread": record.threadName,
        }
        for name in ("connector", "task", "phase"):
            value = getattr(record, name, None)
            if value is not None:
                doc[name] = value
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:  # cached by another handler, unscrubbed
            doc["exception"] = self._scrub_trace(record.exc_text)
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(doc, default=str).decode()


def setup_logging(
    level: str,
    secrets: Secrets,
    phase: Callable[[str], str | None],
    stream: IO[str] | None = None,
    fmt: str = "text",
) -> logging.Handler:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ContextFilter(phase))
    handler.setFormatter(
        JsonRedactingFormatter(secrets)
        if fmt == "json"
        else RedactingFormatter(
            secrets, "%(asctime)s %(levelname)-7s %(name)s%(context)s: %(message)s"
        )
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(LEVELS.get(level, getattr(logging, level, logging.INFO)))
    # librdkafka and psycopg are chatty at DEBUG; their warnings still come through.
    for noisy in ("kafka", "psycopg"):
        logging.getLogger(noisy).setLevel(max(root.level, logging.INFO))
    return handler


# -- building blocks ----------------------------------------------------------------------------
def make_offset_store(s: WorkerSettings) -> OffsetStore:
    if s.offset_storage == "memory":
        return MemoryOffsetStore()
    if s.offset_storage == "kafka":
        from cdc.offsets.kafka import KafkaOffsetStore  # the Kafka client only when used

        return KafkaOffsetStore(
            s.bootstrap_servers,
            s.offset_storage_topic,
            partitions=s.offset_storage_partitions,
            replication_factor=s.offset_storage_replication_factor,
            client_config=s.internal_client_security(),
        )
    return FileOffsetStore(Path(s.state_dir) / "offsets.json")


def cluster_id_fetcher(bootstrap: str, extra: dict[str, Any]) -> Callable[[], str]:
    """``GET /`` reports the Kafka cluster id; asked lazily (a down broker must not slow the
    worker's start) and remembered once known."""
    known: list[str] = []
    lock = threading.Lock()

    def fetch() -> str:
        with lock:
            if known:
                return known[0]
            try:
                from cdc.kafka_client_log import LoggedAdminClient

                admin = LoggedAdminClient({"bootstrap.servers": bootstrap, **extra})
                cid = admin.list_topics(timeout=5).cluster_id or ""
            except Exception as exc:
                log.warning("cannot read the Kafka cluster id: %s", exc)
                return ""
            if cid:
                known.append(cid)
            return cid

    return fetch


def git_commit() -> str:
    repo = Path(__file__).resolve().parents[1]
    if not (repo / ".git").exists():
        return "unknown"
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


class StateDirLock:
    """An exclusive ``flock`` on ``<state.dir>/worker.lock`` for the process's lifetime."""

    def __init__(self, state_dir: Path) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.path = state_dir / "worker.lock"
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise RuntimeError(
                f"another tidemark worker uses the state dir {state_dir}; stop it or set a "
                "different worker.state.dir"
            ) from None
        os.ftruncate(self._fd, 0)
        os.write(self._fd, f"{os.getpid()}\n".encode())

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


def warn_unlimited_providers(s: WorkerSettings) -> None:
    """Kafka Connect's default for a declared provider is no limit; say what that means."""
    for p in s.rest_providers().values():
        if p.kind == "env" and p.allowlist is None:
            limit = "param.allowlist.pattern"
        elif p.kind != "env" and p.allowed_paths is None:
            limit = "param.allowed.paths"
        else:
            continue
        log.warning(
            "config provider %s has no config.providers.%s.%s: whoever can reach the REST "
            "API can read every %s the worker can (docs/security.md)",
            p.name,
            p.name,
            limit,
            "environment variable" if p.kind == "env" else "file",
        )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def advertised_id(s: WorkerSettings, port: int) -> str:
    """The worker's id, ``host:port``: the address the other workers reach its REST API at
    (forwarded calls go there). ``rest.advertised.url`` when set; else the bound address,
    or this machine's name for a wildcard bind (``0.0.0.0``, ``::``), which no other worker
    could use."""
    if s.rest_advertised_url:
        url = urlsplit(s.rest_advertised_url)
        if not url.hostname:
            raise ValueError(
                f"rest.advertised.url {s.rest_advertised_url!r} has no host; "
                "write it as http(s)://<host>:<port>"
            )
        host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
        return f"{host}:{url.port or port}"
    host = s.rest_bind[0]
    if host in ("0.0.0.0", "::", ""):
        host = socket.getfqdn()
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def rest_server(s: WorkerSettings) -> RestServer:
    """The REST listener as configured, refusing an unauthenticated one beyond loopback: any
    caller of the API can run connectors that connect anywhere with the worker's secrets."""
    host, port = s.rest_bind
    if (
        not is_loopback(host)
        and not s.rest_authenticated
        and not s.rest_allow_unauthenticated_remote
    ):
        raise RuntimeError(
            f"the REST API would listen on {host}:{port} without authentication; set "
            "worker.rest.basic.auth.credentials.file (or listeners.https.ssl.client.auth: "
            "required), bind it to 127.0.0.1, or set worker.rest.allow.unauthenticated.remote: "
            "true if a proxy in front of it authenticates (docs/security.md)"
        )
    tls = None
    if s.rest_scheme == "https":
        assert s.ssl_keystore_location is not None  # checked when the config was parsed
        tls = server_tls(
            s.ssl_keystore_location,
            s.ssl_key_password,
            s.ssl_truststore_location,
            s.ssl_client_auth,
        )
    auth = None
    if s.basic_auth_credentials_file is not None:
        auth = BasicAuth.from_file(s.basic_auth_credentials_file, s.basic_auth_readonly_users)
    return RestServer(host, port, tls=tls, auth=auth)


def metrics_server(s: WorkerSettings) -> RestServer | None:
    """``metrics.listener``: ``/metrics`` alone, without authentication, for Prometheus."""
    if not s.metrics_listener:
        return None
    hostport = s.metrics_listener.split("://", 1)[1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    return RestServer(host.strip("[]") or "0.0.0.0", int(port), only=frozenset({"/metrics"}))


# -- the daemon ---------------------------------------------------------------------------------
class Daemon:
    """The worker's pieces wired together; :func:`run` adds signals and the exit code. Tests
    embed it directly."""

    def __init__(
        self,
        config: WorkerConfig,
        *,
        registry: Registry | None = None,
        engine_factory: EngineFactory | None = None,
        secrets: Secrets | None = None,
    ) -> None:
        self.config = config
        s = config.worker
        self.settings = s
        self.lock = StateDirLock(Path(s.state_dir))
        self.store = make_offset_store(s)
        self.server: RestServer | None = None
        self.metrics_server: RestServer | None = None
        self.herder: Herder | None = None
        config_providers.install(s.trusted_providers())
        warn_unlimited_providers(s)
        try:
            self.store.start()
            self.server = rest_server(s)
            self.metrics_server = metrics_server(s)
            worker_id = advertised_id(s, self.server.port)
            if s.mode == "distributed":
                from worker.distributed.herder import DistributedHerder

                self.herder = DistributedHerder(
                    s,
                    self.store,
                    worker_id=worker_id,
                    registry=registry,
                    engine_factory=engine_factory,
                    secrets=secrets or WorkerSecrets(),
                )
            else:
                self.herder = Herder(
                    s,
                    self.store,
                    worker_id=worker_id,
                    registry=registry,
                    engine_factory=engine_factory,
                    state_file=Path(s.state_dir) / "connectors.json",
                    secrets=secrets or WorkerSecrets(),
                )
        except BaseException:
            self._release()
            raise

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    def phase(self, connector: str) -> str | None:
        if self.herder is None:
            return None
        for r in self.herder.runners():
            if r.connector == connector:
                return r.phase
        return None

    def start(self) -> None:
        assert self.server is not None and self.herder is not None
        s = self.settings
        app = App(
            self.herder,
            version=tidemark_version(),
            commit=git_commit(),
            cluster_id=cluster_id_fetcher(s.bootstrap_servers, s.internal_client_security()),
        )
        worker_metrics.track(self.herder)
        self.server.start(app)
        if self.metrics_server is not None:
            self.metrics_server.start(app)
        self.herder.start(self.config.connectors)

    def stop(self) -> bool:
        """Graceful stop within ``task.shutdown.graceful.timeout.ms``; False on timeout."""
        timeout = self.settings.task_shutdown_graceful_timeout_ms / 1000
        ok = True
        if self.herder is not None:
            ok = self.herder.shutdown(timeout)
        self._release()
        return ok

    def _release(self) -> None:
        for server in (self.server, self.metrics_server):
            if server is not None:
                server.close()
        self.server = self.metrics_server = None
        if self.herder is not None:
            worker_metrics.untrack(self.herder)
        try:
            self.store.close()
        finally:
            self.lock.release()

    def runners(self) -> list[TaskRunner]:
        return self.herder.runners() if self.herder else []


def run(
    config: WorkerConfig, *, log_level: str | None = None, log_format: str | None = None
) -> int:
    """The ``tidemark run`` main loop; returns the process exit code."""
    secrets = WorkerSecrets()
    holder: list[Daemon] = []

    def phase(connector: str) -> str | None:
        return holder[0].phase(connector) if holder else None

    setup_logging(
        log_level or config.worker.log_level,
        secrets,
        phase,
        fmt=log_format or config.worker.log_format,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            log.warning("second %s: exiting without waiting", signal.Signals(signum).name)
            os._exit(1)
        log.info("%s received: stopping the worker", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        daemon = Daemon(config, secrets=secrets)
    except Exception as exc:
        log.error("the worker cannot start: %s", exc)
        return 1
    holder.append(daemon)
    try:
        daemon.start()
    except ConfigError as exc:
        log.error("the worker cannot start: %s", exc)
        daemon.stop()
        return 1
    except Exception:
        log.exception("the worker failed to start")
        daemon.stop()
        return 1
    log.info("worker ready: %s (state dir %s)", daemon.url, config.worker.state_dir)
    while not stop.wait(0.5):
        pass
    t0 = time.monotonic()
    ok = daemon.stop()
    if ok:
        log.info("worker stopped cleanly in %.1f s", time.monotonic() - t0)
        return 0
    log.error(
        "worker stopped with tasks still running after task.shutdown.graceful.timeout.ms=%d",
        config.worker.task_shutdown_graceful_timeout_ms,
    )
    return 1
