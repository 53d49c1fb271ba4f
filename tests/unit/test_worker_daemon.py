"""The daemon's wiring: start, graceful stop within the timeout (or not), the state-dir lock,
log context and secret scrubbing. Engines are fakes; the real process runs in the
integration tests (``tidemark run`` under SIGTERM)."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_worker_herder import Engines
from tests.unit.test_worker_task import FakeEngine, wait_for
from worker.config import parse_config
from worker.daemon import ContextFilter, Daemon, RedactingFormatter, setup_logging
from worker.herder import Secrets
from worker.rest.client import Client


def config(tmp_path: Path, timeout_ms: int = 5000) -> Any:
    return parse_config(
        f"""
worker:
  rest.port: 0
  state.dir: {tmp_path / "state"}
  offset.storage: memory
  task.shutdown.graceful.timeout.ms: {timeout_ms}
connectors:
  - name: m
    config: {{connector.class: memory, memory.database: db, topic.prefix: p}}
"""
    )


def test_start_serve_and_stop_cleanly(tmp_path: Path) -> None:
    engines = Engines()
    daemon = Daemon(config(tmp_path), engine_factory=engines)
    try:
        daemon.start()
        client = Client(daemon.url)
        assert client.request("GET", "/health")[0] == 200
        wait_for(lambda: engines.running("m"), what="engine")
        assert client.get("/connectors") == ["m"]
        assert (tmp_path / "state" / "connectors.json").exists()
    finally:
        assert daemon.stop() is True
    assert engines.built["m"][0].stopped.is_set()


def test_stop_reports_a_timeout(tmp_path: Path) -> None:
    release = threading.Event()

    class Stubborn(FakeEngine):
        def stop(self) -> None:  # ignores the request, as a hung driver call would
            pass

        def run(self) -> None:
            self.started.set()
            release.wait(10)

    built: list[Stubborn] = []

    def factory(*args: Any) -> Stubborn:
        built.append(Stubborn("m"))
        return built[-1]

    daemon = Daemon(config(tmp_path, timeout_ms=300), engine_factory=factory)
    try:
        daemon.start()
        wait_for(lambda: bool(built) and built[0].started.is_set(), what="engine")
        assert daemon.stop() is False
    finally:
        release.set()


def test_two_workers_cannot_share_a_state_dir(tmp_path: Path) -> None:
    first = Daemon(config(tmp_path), engine_factory=Engines())
    try:
        with pytest.raises(RuntimeError, match="another tidemark worker uses the state dir"):
            Daemon(config(tmp_path), engine_factory=Engines())
    finally:
        first.stop()
    Daemon(config(tmp_path), engine_factory=Engines()).stop()  # free again


def test_log_records_carry_the_task_context_and_never_a_secret() -> None:
    secrets = Secrets()
    secrets.add_config({"database.password": "hunter22", "database.user": "u"}, None)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter(lambda c: "STREAMING" if c == "inv" else None))
    handler.setFormatter(RedactingFormatter(secrets, "%(name)s%(context)s: %(message)s"))
    log = logging.getLogger("tidemark.test.daemon")
    log.addHandler(handler)
    log.propagate = False
    try:

        def in_task() -> None:
            log.warning("login with %s failed", "hunter22")

        t = threading.Thread(target=in_task, name="tidemark-task-inv-0")
        t.start()
        t.join()
        t = threading.Thread(target=lambda: log.warning("x"), name="tidemark-source-other")
        t.start()
        t.join()
        log.error("plain")
    finally:
        log.removeHandler(handler)
        log.propagate = True
    lines = stream.getvalue().splitlines()
    assert lines == [
        "tidemark.test.daemon [inv-0 STREAMING]: login with ******** failed",
        "tidemark.test.daemon [other-0]: x",
        "tidemark.test.daemon: plain",
    ]


def test_a_password_equal_to_a_word_of_the_line_format_is_not_disclosed_by_it(
    tmp_path: Path,
) -> None:
    """A password "tidemark" masked inside every logger name would tell anyone reading the log
    what it is: only the message and the exception's text are scrubbed."""
    secrets = Secrets()
    secrets.add_config({"database.password": "tidemark", "database.user": "u"}, None)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter(lambda c: None))
    handler.setFormatter(RedactingFormatter(secrets, "%(name)s%(context)s: %(message)s"))
    log = logging.getLogger("tidemark.test.daemon.format")
    log.addHandler(handler)
    log.propagate = False
    module = tmp_path / "tidemark" / "raiser.py"
    module.parent.mkdir()
    module.write_text("def boom(v):\n    raise ValueError('bad password ' + v)\n")
    namespace: dict[str, Any] = {}
    exec(compile(module.read_text(), str(module), "exec"), namespace)
    try:
        log.warning("login as u with tidemark failed")
        try:
            namespace["boom"]("tidemark")
        except ValueError:
            log.exception("connect failed: %s", "tidemark")
    finally:
        log.removeHandler(handler)
        log.propagate = True
    out = stream.getvalue()
    assert "tidemark" not in out.replace("tidemark.test.daemon.format", "").replace(str(module), "")
    lines = out.splitlines()
    assert lines[0] == "tidemark.test.daemon.format: login as u with ******** failed"
    assert lines[1] == "tidemark.test.daemon.format: connect failed: ********"
    assert f'File "{module}", line 2, in boom' in out  # the frame's path is kept
    assert lines[-1] == "ValueError: bad password ********"


def test_an_exception_text_another_handler_cached_is_still_scrubbed() -> None:
    secrets = Secrets()
    secrets.add_config({"database.password": "hunter22", "database.user": "u"}, None)
    plain, ours = io.StringIO(), io.StringIO()
    first = logging.StreamHandler(plain)  # e.g. a handler the user's config added
    first.setFormatter(logging.Formatter("%(message)s"))
    second = logging.StreamHandler(ours)
    second.addFilter(ContextFilter(lambda c: None))
    second.setFormatter(RedactingFormatter(secrets, "%(name)s%(context)s: %(message)s"))
    log = logging.getLogger("tidemark.test.daemon.cached")
    log.addHandler(first)
    log.addHandler(second)
    log.propagate = False
    try:
        try:
            raise ValueError("login hunter22 refused")
        except ValueError:
            log.exception("connect failed")
    finally:
        log.removeHandler(first)
        log.removeHandler(second)
        log.propagate = True
    assert "hunter22" in plain.getvalue()  # the other handler's own business
    assert "hunter22" not in ours.getvalue()
    assert ours.getvalue().rstrip().endswith("ValueError: login ******** refused")


def test_a_password_equal_to_a_plain_value_is_not_scrubbed() -> None:
    """The local stack's password is its user name; scrubbing it would mangle every line."""
    secrets = Secrets()
    secrets.add_config({"database.password": "postgres", "database.user": "postgres"}, None)
    assert secrets.redact("user postgres") == "user postgres"


@pytest.fixture
def root_logging() -> Iterator[logging.Logger]:
    """The root logger, its handlers and level put back after the test (setup_logging
    replaces them, and pytest's own capture lives there)."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    yield root
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in saved[0]:
        root.addHandler(h)
    root.setLevel(saved[1])


def test_setup_logging_installs_one_handler(root_logging: logging.Logger) -> None:
    stream = io.StringIO()
    setup_logging("WARN", Secrets(), lambda c: None, stream)
    setup_logging("WARN", Secrets(), lambda c: None, stream)
    ours = [h for h in root_logging.handlers if isinstance(h.formatter, RedactingFormatter)]
    assert len(ours) == 1 and root_logging.level == logging.WARNING


def test_worker_id_is_the_address_other_workers_reach() -> None:
    """Forwarded calls (signals in distributed mode) go to the worker id."""
    import socket

    import pytest
    from pydantic import ValidationError

    from worker.config import WorkerSettings
    from worker.daemon import advertised_id

    def settings(**kw: object) -> WorkerSettings:
        return WorkerSettings.model_validate(kw)

    assert advertised_id(settings(**{"rest.host": "10.0.0.5"}), 8083) == "10.0.0.5:8083"
    assert advertised_id(settings(**{"rest.host": "0.0.0.0"}), 8083) == f"{socket.getfqdn()}:8083"
    assert advertised_id(settings(**{"rest.host": "::1"}), 8083) == "[::1]:8083"
    url = {"rest.host": "0.0.0.0", "rest.advertised.url": "https://connect-1.example:9443"}
    assert advertised_id(settings(**url), 8083) == "connect-1.example:9443"
    assert advertised_id(settings(**{"rest.advertised.url": "http://w2"}), 8083) == "w2:8083"
    with pytest.raises(ValidationError, match=r"http\(s\)://<host>:<port>"):
        settings(**{"rest.advertised.url": "w2:8083"})


def test_json_log_lines_carry_the_task_context_and_no_secret(root_logging: logging.Logger) -> None:
    """``log.format: json``: one object per line, fields a log collector can index, and the
    same scrubbing as the text format (message and exception)."""
    secrets = Secrets()
    secrets.add_config({"database.password": "hunter22", "database.user": "u"}, None)
    stream = io.StringIO()
    setup_logging("INFO", secrets, lambda c: "streaming", stream, fmt="json")
    log = logging.getLogger("tidemark.test.daemon.json")

    def task() -> None:
        try:
            raise ValueError("login hunter22 refused")
        except ValueError:
            log.exception("connect with %s failed", "hunter22")
        log.warning("plain")

    thread = threading.Thread(target=task, name="tidemark-task-inv-0")
    thread.start()
    thread.join()
    log.info("from the main thread")
    out = stream.getvalue()
    assert "hunter22" not in out
    first, second, third = (json.loads(line) for line in out.splitlines())
    assert first["level"] == "ERROR" and first["logger"] == "tidemark.test.daemon.json"
    assert first["message"] == "connect with ******** failed"
    assert (first["connector"], first["task"], first["phase"]) == ("inv", "0", "streaming")
    assert first["exception"].rstrip().endswith("ValueError: login ******** refused")
    assert first["time"].endswith("+00:00") and first["thread"] == "tidemark-task-inv-0"
    assert second["level"] == "WARN" and "exception" not in second
    assert "connector" not in third and third["message"] == "from the main thread"
