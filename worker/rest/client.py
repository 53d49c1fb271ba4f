"""A small client of the worker's REST API, for ``tidemark status``/``offsets`` and the demo.

Standard library only, so the CLI works wherever the worker does. Credentials come from a file
or the environment, never from the command line (argv is visible to every local user):
``TIDEMARK_REST_CREDENTIALS_FILE`` (one ``user:password`` line) or ``TIDEMARK_REST_USER`` and
``TIDEMARK_REST_PASSWORD``; ``TIDEMARK_REST_CA`` is the CA that signs an ``https://`` worker's
certificate and ``TIDEMARK_REST_CERT`` a PEM client certificate with its key (mutual TLS).
"""

from __future__ import annotations

import base64
import os
import ssl
from pathlib import Path
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import quote
from urllib.request import Request, urlopen

import orjson

DEFAULT_URL = "http://127.0.0.1:8083"


def default_url() -> str:
    return os.environ.get("TIDEMARK_URL", DEFAULT_URL)


class ApiError(Exception):
    """An error answer (``status`` >= 400) or no answer at all (``status`` 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message if status == 0 else f"HTTP {status}: {message}")
        self.status = status
        self.message = message


def credentials_from(file: str | None = None) -> tuple[str, str] | None:
    """``(user, password)`` from ``file`` or ``$TIDEMARK_REST_CREDENTIALS_FILE``, else from
    ``$TIDEMARK_REST_USER``/``$TIDEMARK_REST_PASSWORD``; None when neither is set."""
    path = file or os.environ.get("TIDEMARK_REST_CREDENTIALS_FILE") or ""
    if path:
        try:
            line = Path(path).read_text(encoding="utf-8").strip().splitlines()[0]
        except (OSError, IndexError) as exc:
            raise ApiError(0, f"cannot read the REST credentials file {path}: {exc}") from exc
        sep = ":" if ":" in line else "="
        name, _, password = line.partition(sep)
        return name.strip(), password.strip()
    user = os.environ.get("TIDEMARK_REST_USER")
    if user:
        return user, os.environ.get("TIDEMARK_REST_PASSWORD", "")
    return None


def tls_context(ca: str | None = None, cert: str | None = None) -> ssl.SSLContext | None:
    ca = ca or os.environ.get("TIDEMARK_REST_CA")
    cert = cert or os.environ.get("TIDEMARK_REST_CERT")
    if not ca and not cert:
        return None
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(cert)
    return ctx


class Client:
    def __init__(
        self,
        url: str | None = None,
        timeout: float = 10.0,
        *,
        credentials: tuple[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.url = (url or default_url()).rstrip("/")
        self.timeout = timeout
        self.tls = tls
        self.authorization: str | None = None
        if credentials is not None:
            token = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()
            self.authorization = f"Basic {token}"

    @classmethod
    def from_env(
        cls,
        url: str | None = None,
        *,
        credentials_file: str | None = None,
        ca: str | None = None,
        cert: str | None = None,
    ) -> Client:
        """The CLI's client: URL, credentials and TLS from options and the environment."""
        return cls(url, credentials=credentials_from(credentials_file), tls=tls_context(ca, cert))

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """``(status, parsed JSON body or None)``; never raises for HTTP error statuses."""
        data = None if body is None else orjson.dumps(body)
        req = Request(f"{self.url}{path}", data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.authorization:
            req.add_header("Authorization", self.authorization)
        try:
            with urlopen(req, timeout=self.timeout, context=self.tls) as resp:
                return resp.status, _parse(resp.read())
        except HTTPError as exc:
            with exc:
                return exc.code, _parse(exc.read())
        except (URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiError(0, f"cannot reach the worker at {self.url}: {reason}") from exc

    def call(self, method: str, path: str, body: Any = None) -> Any:
        status, doc = self.request(method, path, body)
        if status >= 400:
            message = doc.get("message") if isinstance(doc, dict) else None
            raise ApiError(status, str(message or doc))
        return doc

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    @staticmethod
    def connector_path(name: str, suffix: str = "") -> str:
        return f"/connectors/{quote(name, safe='')}{suffix}"


def _parse(data: bytes) -> Any:
    if not data:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", "replace")
