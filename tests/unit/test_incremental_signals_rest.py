"""``POST /connectors/{name}/signals``: the signal reaches the task that registered for it
(``signal.enabled.channels=rest``); status codes and bodies."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from cdc.signals import registry
from cdc.signals.model import Signal
from tests.unit.test_worker_herder import Engines, memory
from tests.unit.test_worker_rest import app, call, engines
from tests.unit.test_worker_task import wait_for
from worker.rest import App
from worker.rest.app import Request

__all__ = ["app", "engines"]  # the fixtures


def test_signal_reaches_the_registered_task(app: App, engines: Engines) -> None:
    assert call(app, "POST", "/connectors", {"name": "sig", "config": memory()}).status == 201
    wait_for(lambda: engines.running("sig"), what="engine")
    body = {"type": "execute-snapshot", "data": {"data-collections": ["db.t"]}}
    r = call(app, "POST", "/connectors/sig/signals", body)
    assert r.status == 409 and "signal.data.collection" in r.body["message"]
    got: list[Signal] = []
    registry.register("sig", got.append)
    try:
        r = call(app, "POST", "/connectors/sig/signals", {"id": "s-1", **body})
        assert r.status == 202
        assert r.body == {"id": "s-1", "type": "execute-snapshot", "data": body["data"]}
        assert got == [Signal("s-1", "execute-snapshot", body["data"], "rest")]
        r = call(app, "POST", "/connectors/sig/signals", {"data": {}})
        assert r.status == 400 and "no type" in r.body["message"]
        r = call(app, "POST", "/connectors/sig/signals", {"type": "log", "data": "{bad"})
        assert r.status == 400 and "not JSON" in r.body["message"]
        assert call(app, "POST", "/connectors/nope/signals", body).status == 404
    finally:
        registry.unregister("sig", got.append)


def test_signal_for_a_task_elsewhere(
    app: App, engines: Engines, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Distributed mode: the task runs on another worker (here one that does not answer):
    the call is forwarded there, and a failed forward is a 409 naming the worker; a call
    already forwarded (``forward=false``) is answered here. A task running nowhere is 409."""
    assert call(app, "POST", "/connectors", {"name": "far", "config": memory()}).status == 201
    wait_for(lambda: engines.running("far"), what="engine")
    body = {"type": "log", "data": {"message": "hi"}}
    monkeypatch.setattr(app.herder, "task_worker", lambda name: "127.0.0.1:1")
    r = call(app, "POST", "/connectors/far/signals", body)
    assert (
        r.status == 409 and "runs on worker 127.0.0.1:1, which did not answer" in r.body["message"]
    )
    r = call(app, "POST", "/connectors/far/signals?forward=false", body)
    assert r.status == 409 and "no running task here" in r.body["message"]
    monkeypatch.setattr(app.herder, "task_worker", lambda name: None)
    r = call(app, "POST", "/connectors/far/signals", body)
    assert r.status == 409 and "not running on any worker" in r.body["message"]


def test_forwarded_signal_returns_the_other_workers_answer(
    app: App, engines: Engines, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other worker gets the same body at the same path with ``forward=false`` and the
    caller's Authorization header; its status and body are the answer."""
    seen: list[tuple[str, str | None, bytes]] = []

    class Other(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.path, self.headers.get("Authorization"), body))
            self.send_response(202)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"id": "s-9", "type": "log", "data": {}}')

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert call(app, "POST", "/connectors", {"name": "fw", "config": memory()}).status == 201
        other = f"127.0.0.1:{server.server_address[1]}"
        monkeypatch.setattr(app.herder, "task_worker", lambda name: other)
        raw = b'{"id": "s-9", "type": "log", "data": {"message": "hi"}}'
        r = app.handle(
            Request("POST", "/connectors/fw/signals", {}, raw, {"authorization": "Basic eDp5"})
        )
        assert (r.status, r.body) == (202, {"id": "s-9", "type": "log", "data": {}})
        assert seen == [("/connectors/fw/signals?forward=false", "Basic eDp5", raw)]
    finally:
        server.shutdown()
        server.server_close()
