"""A small client of the worker's REST API, for ``tidemark status``/``offsets`` and the demo.

Standard library only, so the CLI works wherever the worker does.
"""

from __future__ import annotations

import os
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


class Client:
    def __init__(self, url: str | None = None, timeout: float = 10.0) -> None:
        self.url = (url or default_url()).rstrip("/")
        self.timeout = timeout

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """``(status, parsed JSON body or None)``; never raises for HTTP error statuses."""
        data = None if body is None else orjson.dumps(body)
        req = Request(f"{self.url}{path}", data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urlopen(req, timeout=self.timeout) as resp:
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
