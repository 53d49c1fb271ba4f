"""Avro change events (Confluent wire format) turned into the JSON the JSON converter writes,
for the readers of topics: the apply job's parser (``cdc.apply.events``) and ``tidemark
verify`` (``cdc.verify.topic_ranges``).

Debezium and tidemark write Avro through a schema registry: each record is a magic byte 0, the
4-byte id of the writer schema, then the Avro binary body. The Avro schemas they register carry
Kafka Connect's metadata (``connect.name``, ``connect.parameters``), so the Connect schema of the
record — and with it the Debezium logical types (``MicroTimestamp``, ``Decimal``, ...) — comes
back exactly from :func:`cdc.converters.avro.avro_to_connect`.

Rather than teach the parser a second value model, a record is re-encoded with the JSON
converter (``schemas.enable=true``): the result is byte for byte what a JSON-configured connector
would have written for the same event, so every rule of the JSON path (type mapping, TOAST
placeholders, ordering, schema policy) applies unchanged and there is only one place to get
them right. The schema half of that JSON is identical for every record of a writer schema, so
the parser's schema cache still parses it once.

The registry client lives in the reading process (for the apply job: the Spark Python worker,
created on first use from the picklable URL settings), with the converter's caches: a schema
id is fetched once per process.
Its HTTP client keeps a connection to the registry open between batches; :func:`close_decoders`
closes them, and runs at interpreter exit, so a process that decoded Avro (a Python worker, the
driver, a test run) does not end with unclosed sockets (``ResourceWarning``).
"""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass
from typing import TypeGuard

import httpx

from cdc.converters.avro import AvroConverter
from cdc.converters.base import ConversionError
from cdc.converters.json import JsonConverter
from cdc.converters.schema_registry import SchemaRegistryClient, SchemaRegistryError

MAGIC = 0


class AvroInputError(ValueError):
    """The record claims to be Avro but cannot be read as such (bad input, quarantinable)."""


def is_avro(raw: bytes | None) -> TypeGuard[bytes]:
    """Confluent's framing: JSON never starts with a NUL byte, so the first byte decides."""
    return raw is not None and len(raw) >= 5 and raw[0] == MAGIC


def schema_id(raw: bytes) -> int:
    return int.from_bytes(raw[1:5], "big")


@dataclass(frozen=True)
class RegistrySettings:
    """Where the writer schemas are; picklable so it can travel to Spark's Python workers."""

    url: str | None = None
    #: ``user:password`` for HTTP basic auth (Confluent's ``basic.auth.user.info``)
    basic_auth: str | None = None
    timeout_s: float = 30.0


class AvroToJson:
    """One per Python process and registry: Avro bytes in, Connect-JSON bytes out."""

    def __init__(self, settings: RegistrySettings) -> None:
        if not settings.url:
            raise ValueError("schema.registry.url is not set")
        auth = None
        if settings.basic_auth:
            user, _, password = settings.basic_auth.partition(":")
            auth = httpx.BasicAuth(user, password)
        self._http = httpx.Client(
            timeout=settings.timeout_s,
            auth=auth,
            headers={"Accept": "application/vnd.schemaregistry.v1+json"},
        )
        self.registry = SchemaRegistryClient(settings.url, http=self._http)
        self._avro = AvroConverter(self.registry, auto_register=False)
        self._json = JsonConverter({"schemas.enable": True})

    def to_json(self, topic: str, raw: bytes, *, is_key: bool) -> bytes:
        """Raises :class:`AvroInputError` for records that are not readable with their writer
        schema; a registry that cannot be reached raises ``ConnectionError`` instead, which
        fails the batch (retried by Spark) rather than quarantining good data."""
        try:
            schema, value = self._avro.to_connect(topic, raw, is_key=is_key)
        except SchemaRegistryError as exc:
            raise AvroInputError(
                f"{'key' if is_key else 'value'} is Avro with schema id {schema_id(raw)}, which "
                f"the schema registry cannot give: {exc}"
            ) from None
        except (ConversionError, EOFError, ValueError, IndexError, TypeError) as exc:
            raise AvroInputError(
                f"{'key' if is_key else 'value'} is not readable as Avro with schema id "
                f"{schema_id(raw)}: {type(exc).__name__}: {exc}"
            ) from None
        out = self._json.from_connect(topic, schema, value)
        if out is None:  # a null Avro value decodes to no record: the same as a tombstone
            return b"null"
        return out

    def close(self) -> None:
        """Close the registry connections (the client was made here, so it is closed here)."""
        self._http.close()


_DECODERS: dict[RegistrySettings, AvroToJson] = {}
_LOCK = threading.Lock()


def decoder(settings: RegistrySettings) -> AvroToJson:
    """The process-wide decoder for ``settings`` (its caches outlive Spark tasks)."""
    found = _DECODERS.get(settings)
    if found is None:
        with _LOCK:
            found = _DECODERS.get(settings)
            if found is None:
                found = _DECODERS[settings] = AvroToJson(settings)
    return found


def close_decoders() -> None:
    """Close and forget every process-wide decoder; a later :func:`decoder` call makes a new
    one. Registered with :mod:`atexit`: the decoders live as long as the process."""
    with _LOCK:
        found = list(_DECODERS.values())
        _DECODERS.clear()
    for each in found:
        each.close()


atexit.register(close_decoders)


def describe_missing_registry(raw: bytes, *, is_key: bool) -> str:
    return (
        f"{'key' if is_key else 'value'} is Avro (Confluent wire format, schema id "
        f"{schema_id(raw)}) but schema.registry.url is not set in the apply configuration"
    )
