"""The HTTP side: the standard library's ``ThreadingHTTPServer`` in front of :class:`App`.

The herder is synchronous and thread-safe, so a thread per connection is the simplest correct
server; an ASGI stack (uvicorn + starlette) would add two dependencies and an event loop only
to hand each request to a thread pool again. What the standard server gets wrong is its listen
backlog of 5: with more clients connecting at once the kernel drops their SYNs and they retry
after 1, 3, 7 ... seconds (a 27 s answer to 200 concurrent ``GET /connectors``). The backlog
here is the kernel's maximum (``somaxconn``), and accepting never waits for a request.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from worker.rest.app import App, Request, Response, error
from worker.rest.auth import BasicAuth

log = logging.getLogger("tidemark.worker.rest")

MAX_BODY = 16 * 1024 * 1024


def _somaxconn() -> int:
    try:
        return max(int(Path("/proc/sys/net/core/somaxconn").read_text()), 128)
    except (OSError, ValueError):
        return 1024


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = _somaxconn()
    app: App | None = None
    auth: BasicAuth | None = None
    only: frozenset[str] | None = None  # paths served (the metrics listener: /metrics)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a failed TLS handshake (no or a wrong client certificate) or a dropped connection
        log.debug("REST connection from %s failed", client_address, exc_info=True)


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "tidemark"

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._send(error(413, f"Request body larger than {MAX_BODY} bytes"))
            self.close_connection = True
            return
        body = self.rfile.read(length) if length > 0 else b""
        app = self.server.app
        refused = None
        if self.server.only is not None and url.path.rstrip("/") not in self.server.only:
            refused = (404, f"Unknown resource {url.path}; this listener serves only /metrics")
        elif self.server.auth is not None:
            refused = self.server.auth.check(self.headers.get("Authorization"), self.command)
        if refused is not None:
            resp = error(*refused)
            if refused[0] == 401:
                resp.headers["WWW-Authenticate"] = 'Basic realm="tidemark"'
        elif app is None:
            resp = Response(503, {"status": "starting", "message": "Worker is still starting up."})
        else:
            req = Request(
                self.command,
                url.path,
                parse_qs(url.query, keep_blank_values=True),
                body,
                {k.lower(): v for k, v in self.headers.items()},
            )
            resp = app.handle(req)
        self._send(resp)

    def _send(self, resp: Response) -> None:
        data = resp.encoded()
        self.send_response(resp.status)
        if data:
            self.send_header("Content-Type", resp.content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in resp.headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _dispatch

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class RestServer:
    """Binds at construction (so the worker id, ``host:port``, is known before the herder is
    built, even with port 0), serves once :meth:`start` hands it the app.

    With ``tls`` the listening socket is wrapped and each connection's handshake runs on its
    own thread (``do_handshake_on_connect=False``), so a slow or hostile client never holds
    up accepting the others."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        tls: ssl.SSLContext | None = None,
        auth: BasicAuth | None = None,
        only: frozenset[str] | None = None,
    ) -> None:
        server_cls: type[_Server] = _Server6 if ":" in host else _Server
        self.httpd = server_cls((host, port), _Handler)
        self.httpd.auth = auth
        self.httpd.only = only
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(
                self.httpd.socket, server_side=True, do_handshake_on_connect=False
            )
        self.scheme = "https" if tls is not None else "http"
        self.host = host
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def start(self, app: App) -> None:
        self.httpd.app = app
        self._thread = threading.Thread(
            target=self.httpd.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="tidemark-rest",
            daemon=True,
        )
        self._thread.start()
        log.info("REST API listening on %s", self.url)

    def close(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(5)
        self.httpd.server_close()


def server_tls(
    keystore: Path, key_password: str | None, truststore: Path | None, client_auth: str
) -> ssl.SSLContext:
    """The ``listeners.https.ssl.*`` settings as a server context (TLS 1.2 or newer)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(keystore, password=key_password)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(
            f"listeners.https.ssl.keystore.location {keystore}: cannot load a PEM private key "
            f"and certificate chain from it: {exc}"
        ) from exc
    if truststore is not None:
        try:
            ctx.load_verify_locations(truststore)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(
                f"listeners.https.ssl.truststore.location {truststore}: not a PEM CA: {exc}"
            ) from exc
    ctx.verify_mode = {
        "required": ssl.CERT_REQUIRED,
        "requested": ssl.CERT_OPTIONAL,
    }.get(client_auth, ssl.CERT_NONE)
    return ctx
