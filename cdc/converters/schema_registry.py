"""A client for the Confluent Schema Registry REST API (also served by Apicurio's
``/apis/ccompat/v7`` and by ``cdc.converters.registry_server``).

The Avro converter asks for a schema id on every record, so the client remembers every answer:
a schema is registered once per subject per process and an id is fetched once per process. The
lock is taken only on a miss, so the hot path is a dictionary lookup.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from cdc.config import mask_url_passwords

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class SchemaRegistryError(RuntimeError):
    """An error answer from the registry, with its HTTP status and Confluent error code."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(f"schema registry error {error_code} (HTTP {status}): {message}")
        self.status = status
        self.error_code = error_code
        self.message = message


def canonical_schema(schema: str | dict[str, Any] | list[Any]) -> str:
    """Compact JSON, the form the registry stores and returns, so equal schemas hit one cache
    entry whatever whitespace they were written with."""
    parsed = orjson.loads(schema) if isinstance(schema, str) else schema
    return orjson.dumps(parsed).decode()


class SchemaRegistryClient:
    """Confluent REST calls plus the caches Confluent's ``CachedSchemaRegistryClient`` keeps.

    ``url`` may list several comma-separated registries; they are tried in order on
    connection errors, as Confluent's client does.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 10.0,
        http: httpx.Client | None = None,
    ) -> None:
        self.urls = [u.strip().rstrip("/") for u in url.split(",") if u.strip()]
        if not self.urls:
            raise ValueError("schema.registry.url is empty")
        self._http = http or httpx.Client(timeout=timeout, headers={"Accept": CONTENT_TYPE})
        self._owns_http = http is None
        self._lock = threading.Lock()
        self._ids: dict[tuple[str, str], int] = {}
        self._schemas: dict[int, str] = {}

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> SchemaRegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- cached calls ------------------------------------------------------------------------
    def register(self, subject: str, schema: str, *, schema_type: str = "AVRO") -> int:
        """``POST /subjects/{subject}/versions``: the schema's global id (cached)."""
        key = (subject, schema)
        found = self._ids.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._ids.get(key)
            if found is None:
                body: dict[str, Any] = {"schema": schema}
                if schema_type != "AVRO":
                    body["schemaType"] = schema_type
                answer = self._call("POST", f"/subjects/{_seg(subject)}/versions", body)
                found = int(answer["id"])
                self._ids[key] = found
            return found

    def lookup(self, subject: str, schema: str) -> dict[str, Any]:
        """``POST /subjects/{subject}``: the registered version of ``schema``, without registering
        it (what ``auto.register.schemas=false`` relies on); caches the id."""
        key = (subject, schema)
        answer: dict[str, Any] = self._call(
            "POST", f"/subjects/{_seg(subject)}", {"schema": schema}
        )
        with self._lock:
            self._ids[key] = int(answer["id"])
        return answer

    def id_for(self, subject: str, schema: str) -> int:
        """The id of an already registered schema (cached), never registering it."""
        found = self._ids.get((subject, schema))
        return found if found is not None else int(self.lookup(subject, schema)["id"])

    def get_schema(self, schema_id: int) -> str:
        """``GET /schemas/ids/{id}``: the schema text (cached; ids never change meaning)."""
        found = self._schemas.get(schema_id)
        if found is None:
            found = str(self._call("GET", f"/schemas/ids/{int(schema_id)}")["schema"])
            with self._lock:
                self._schemas[schema_id] = found
        return found

    # -- plain calls -------------------------------------------------------------------------
    def subjects(self) -> list[str]:
        return list(self._call("GET", "/subjects"))

    def versions(self, subject: str) -> list[int]:
        return list(self._call("GET", f"/subjects/{_seg(subject)}/versions"))

    def get_version(self, subject: str, version: int | str = "latest") -> dict[str, Any]:
        """``GET /subjects/{s}/versions/{v}``: subject, version, id and schema."""
        return dict(self._call("GET", f"/subjects/{_seg(subject)}/versions/{version}"))

    def latest(self, subject: str) -> dict[str, Any]:
        return self.get_version(subject, "latest")

    def delete_subject(self, subject: str) -> list[int]:
        return list(self._call("DELETE", f"/subjects/{_seg(subject)}"))

    def get_compatibility(self, subject: str | None = None) -> str:
        """``GET /config[/{subject}]``; a subject without its own level reports the global one."""
        path = "/config" if subject is None else f"/config/{_seg(subject)}?defaultToGlobal=true"
        return str(self._call("GET", path)["compatibilityLevel"])

    def set_compatibility(self, level: str, subject: str | None = None) -> str:
        path = "/config" if subject is None else f"/config/{_seg(subject)}"
        return str(self._call("PUT", path, {"compatibility": level})["compatibility"])

    def is_compatible(self, subject: str, schema: str, version: int | str = "latest") -> bool:
        """``POST /compatibility/subjects/{s}/versions/{v}``."""
        path = f"/compatibility/subjects/{_seg(subject)}/versions/{version}"
        return bool(self._call("POST", path, {"schema": schema})["is_compatible"])

    # -- transport ---------------------------------------------------------------------------
    def _call(self, method: str, path: str, body: Any = None) -> Any:
        content = None if body is None else orjson.dumps(body)
        headers = {"Content-Type": CONTENT_TYPE} if content is not None else None
        last: Exception | None = None
        for base in self.urls:
            try:
                resp = self._http.request(method, base + path, content=content, headers=headers)
            except httpx.TransportError as exc:
                last = exc
                continue
            if resp.status_code >= 400:
                raise _error(resp)
            return orjson.loads(resp.content)
        shown = [mask_url_passwords(u) for u in self.urls]  # the message reaches traces
        raise ConnectionError(f"no schema registry reachable at {shown}: {last}")


def _seg(subject: str) -> str:
    return quote(subject, safe="")


def _error(resp: httpx.Response) -> SchemaRegistryError:
    try:
        body = orjson.loads(resp.content)
        return SchemaRegistryError(resp.status_code, int(body["error_code"]), str(body["message"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return SchemaRegistryError(resp.status_code, resp.status_code, resp.text)
