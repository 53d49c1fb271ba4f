"""Forwarding a REST call to the worker that runs a connector's task (distributed mode).

Most calls need no forwarding here: writes go through the config topic and reads come from
the topics, on any worker. A signal (``POST /connectors/{c}/signals``) must reach the running
task itself, so the worker that receives it and does not run the task sends it on to the one
that does: ``<scheme>://<worker_id><path>?forward=false``, the worker id being the
``host:port`` the status topic names. ``forward=false`` is Kafka Connect's marker of a
forwarded request: the receiver answers itself and never forwards again (no loop while a task
moves). The caller's ``Authorization`` header goes along (Kafka Connect forwards it too); with
``listeners=https://...`` the worker's truststore verifies the other worker's certificate and
its keystore is the client certificate.
"""

from __future__ import annotations

import ssl
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import quote
from urllib.request import Request, urlopen

import orjson

from worker.config import WorkerSettings

TIMEOUT_S = 10.0


class Unreachable(Exception):
    """The other worker did not answer (it died, or the task is moving)."""


def client_tls(settings: WorkerSettings) -> ssl.SSLContext | None:
    if settings.rest_scheme != "https":
        return None
    truststore = settings.ssl_truststore_location
    ctx = ssl.create_default_context(cafile=str(truststore) if truststore else None)
    if settings.ssl_keystore_location is not None:
        ctx.load_cert_chain(settings.ssl_keystore_location, password=settings.ssl_key_password)
    return ctx


def forward(
    settings: WorkerSettings,
    worker_id: str,
    method: str,
    path: str,
    body: bytes,
    authorization: str | None,
) -> tuple[int, Any]:
    """Send the call to ``worker_id``; its status and JSON body. :class:`Unreachable` when
    it does not answer."""
    # the path as received, still percent-encoded: quoting again would turn %2F into %252F
    url = f"{settings.rest_scheme}://{worker_id}{quote(path, safe='/%')}?forward=false"
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if authorization:
        headers["Authorization"] = authorization
    req = Request(url, data=body, headers=headers, method=method)
    try:
        with urlopen(req, timeout=TIMEOUT_S, context=client_tls(settings)) as resp:
            return resp.status, _json(resp.read())
    except HTTPError as exc:
        return exc.code, _json(exc.read()) or {"error_code": exc.code, "message": exc.reason}
    except (URLError, OSError, ValueError) as exc:
        raise Unreachable(str(getattr(exc, "reason", exc))) from exc


def _json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {"message": raw.decode(errors="replace")[:500]}
