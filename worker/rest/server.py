"""The HTTP side: uvicorn (httptools parser, uvloop) in front of :class:`App`.

The herder is synchronous and thread-safe and some of its calls wait (a restart waits for the
task to stop), so each request's :meth:`App.handle` runs on a thread of a pool, while one
event loop thread accepts connections, parses HTTP and writes responses. The standard
library's thread-per-connection server spent about half a millisecond of interpreter time
per request before the app was even called (thread start, header parsing through the
``email`` package): 200 clients arriving at once then waited ~100 ms for the last answer on
this project's 2-core machine, and its default listen backlog of 5 made some wait for SYN
retransmits (27 s). The backlog here is the kernel's maximum (``somaxconn``).

The listening socket is bound at construction (so the worker id, ``host:port``, is known
before the herder is built, even with port 0); serving starts with :meth:`RestServer.start`.
TLS handshakes run on the event loop without blocking other connections.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import ssl
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import uvicorn
import uvloop

from worker.rest.app import App, Request, Response, error
from worker.rest.auth import BasicAuth

log = logging.getLogger("tidemark.worker.rest")
# uvicorn's start/stop lines ("Started server process") would repeat in the worker's log
if logging.getLogger("uvicorn.error").level == logging.NOTSET:
    logging.getLogger("uvicorn.error").setLevel(logging.WARNING)

MAX_BODY = 16 * 1024 * 1024
#: a client that stalls mid-body is dropped after this long instead of holding what it sent
BODY_TIMEOUT_S = 30
#: threads running App.handle; a request that waits (a restart) holds one
HANDLER_THREADS = 64

Scope = dict[str, Any]
Receive = Any
Send = Any


def _somaxconn() -> int:
    try:
        return max(int(Path("/proc/sys/net/core/somaxconn").read_text()), 128)
    except (OSError, ValueError):
        return 1024


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(_somaxconn())
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class _Endpoint:
    """The ASGI application: authentication, the body limit, then the app on a thread."""

    def __init__(self, auth: BasicAuth | None, only: frozenset[str] | None) -> None:
        self.app: App | None = None
        self.auth = auth
        self.only = only
        self.pool = ThreadPoolExecutor(HANDLER_THREADS, thread_name_prefix="tidemark-rest")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is off; websockets are not served
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        method = str(scope["method"])
        try:
            length = int(headers.get("content-length") or 0)
        except ValueError:
            await self._send(send, method, error(400, "Content-Length is not a number"))
            return
        if length > MAX_BODY:
            await self._send(send, method, error(413, f"Request body larger than {MAX_BODY} bytes"))
            return
        # the path as sent (still percent-encoded): the app decodes each segment itself
        path = bytes(scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        loop = asyncio.get_running_loop()
        # Who may send a body is decided from the headers, before it is read: an
        # unauthenticated client must not make the worker hold MAX_BODY bytes for it.
        refused = await loop.run_in_executor(self.pool, self._refusal, method, path, headers)
        if refused is not None:
            await self._send(send, method, refused)
            return
        chunks = []
        size = 0
        more = True
        try:
            async with asyncio.timeout(BODY_TIMEOUT_S):
                while more:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > MAX_BODY:
                        await self._send(
                            send, method, error(413, f"Request body larger than {MAX_BODY} bytes")
                        )
                        return
                    chunks.append(chunk)
                    more = bool(message.get("more_body"))
        except TimeoutError:
            await self._send(
                send, method, error(408, f"Request body not received within {BODY_TIMEOUT_S} s")
            )
            return
        query = parse_qs(scope["query_string"].decode("latin-1"), keep_blank_values=True)
        req = Request(method, path, query, b"".join(chunks), headers, base_url(scope, headers))
        resp = await loop.run_in_executor(self.pool, self._respond, req)
        await self._send(send, method, resp)

    def _refusal(self, method: str, path: str, headers: dict[str, str]) -> Response | None:
        refused = None
        if self.only is not None and path.rstrip("/") not in self.only:
            refused = (404, f"Unknown resource {path}; this listener serves only /metrics")
        elif self.auth is not None:
            refused = self.auth.check(headers.get("authorization"), method)
        if refused is None:
            return None
        resp = error(*refused)
        if refused[0] == 401:
            resp.headers["WWW-Authenticate"] = 'Basic realm="tidemark"'
        return resp

    def _respond(self, req: Request) -> Response:
        if self.app is None:
            return Response(503, {"status": "starting", "message": "Worker is still starting up."})
        try:
            return self.app.handle(req)
        except Exception:  # the app answers its own errors; this is a bug, not the client's
            log.exception("REST %s %s failed", req.method, req.path)
            return error(500, "Internal server error")

    @staticmethod
    async def _send(send: Send, method: str, resp: Response) -> None:
        data = resp.encoded()
        headers = [(b"content-length", str(len(data)).encode())]
        if data:
            headers.append((b"content-type", resp.content_type.encode("latin-1")))
        headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in resp.headers.items()]
        await send({"type": "http.response.start", "status": resp.status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else data})


_HOST = re.compile(r"^[A-Za-z0-9.\-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$")


def base_url(scope: Scope, headers: Mapping[str, str]) -> str:
    """``scheme://host`` from the request's Host header when it is a plain host[:port] (an
    IPv6 literal in brackets included); otherwise "" and the app answers with paths."""
    host = headers.get("host", "")
    if not _HOST.match(host):
        return ""
    return f"{'https' if scope.get('scheme') == 'https' else 'http'}://{host}"


class RestServer:
    """Binds at construction, serves once :meth:`start` hands it the app."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        tls: ssl.SSLContext | None = None,
        auth: BasicAuth | None = None,
        only: frozenset[str] | None = None,
    ) -> None:
        self.sock = _listen(host, port)
        self.endpoint = _Endpoint(auth, only)
        self.tls = tls
        self.scheme = "https" if tls is not None else "http"
        self.host = host
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def start(self, app: App) -> None:
        self.endpoint.app = app
        tls = self.tls
        config = uvicorn.Config(
            self.endpoint,
            http="httptools",
            lifespan="off",
            interface="asgi3",
            access_log=False,
            log_config=None,  # the worker's logging stays as configured
            server_header=False,
            headers=[("server", "tidemark")],
            backlog=_somaxconn(),
            timeout_keep_alive=5,
        )
        config.load()
        config.ssl = tls  # the context built from listeners.https.ssl.* (server_tls)
        self._server = server = uvicorn.Server(config)
        ready = threading.Event()

        def serve() -> None:
            loop = uvloop.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._serve(server, ready))
            finally:
                loop.close()

        self._thread = threading.Thread(target=serve, name="tidemark-rest", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"the REST server on {self.url} did not start")
        log.info("REST API listening on %s", self.url)

    async def _serve(self, server: uvicorn.Server, ready: threading.Event) -> None:
        task = asyncio.ensure_future(server.serve(sockets=[self.sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        ready.set()
        await task

    def close(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(5)
        self.endpoint.pool.shutdown(wait=False, cancel_futures=True)
        self.sock.close()


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
