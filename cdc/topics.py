"""Topic and schema naming: the seed's rules in one place (catalogue §1.3, §1.5)."""

from __future__ import annotations

import re
from functools import lru_cache

from cdc.spi import TableId

_SCHEMA_INVALID = re.compile(r"[^A-Za-z0-9_]")
_TOPIC_INVALID = re.compile(r"[^A-Za-z0-9._-]")
_FIELD_INVALID = re.compile(r"[^A-Za-z0-9_]")


@lru_cache(maxsize=4096)
def sanitize_schema_part(part: str, *, first: bool = False) -> str:
    """Avro-compatible schema names: invalid characters become ``_``; the server name must
    start with a Latin letter or ``_``."""
    out = _SCHEMA_INVALID.sub("_", part)
    if first and out and not (out[0].isalpha() or out[0] == "_"):
        out = "_" + out
    return out


@lru_cache(maxsize=4096)
def sanitize_field_name(name: str) -> str:
    """``sanitize.field.names``: Avro field names start with a letter or ``_``."""
    out = _FIELD_INVALID.sub("_", name)
    if out and out[0].isdigit():
        out = "_" + out
    return out


def sanitize_topic(name: str) -> str:
    return _TOPIC_INVALID.sub("_", name)


class TopicNamer:
    """``<server>.<schema-or-db>.<table>`` data topics and the special topics."""

    def __init__(self, server_name: str, heartbeat_prefix: str = "__debezium-heartbeat") -> None:
        self.server = server_name
        self.heartbeat_prefix = heartbeat_prefix
        self._cache: dict[TableId, str] = {}

    def data_topic(self, table_id: TableId) -> str:
        topic = self._cache.get(table_id)
        if topic is None:
            container = table_id.schema if table_id.schema is not None else table_id.catalog
            parts = [self.server, *([container] if container is not None else []), table_id.table]
            topic = self._cache[table_id] = sanitize_topic(".".join(parts))
        return topic

    def schema_name(self, table_id: TableId, suffix: str) -> str:
        container = table_id.schema if table_id.schema is not None else table_id.catalog
        parts = [sanitize_schema_part(self.server, first=True)]
        if container is not None:
            parts.append(sanitize_schema_part(container))
        parts.append(sanitize_schema_part(table_id.table))
        return ".".join([*parts, suffix])

    @property
    def schema_change_topic(self) -> str:
        return self.server

    @property
    def transaction_topic(self) -> str:
        return f"{self.server}.transaction"

    @property
    def heartbeat_topic(self) -> str:
        return f"{self.heartbeat_prefix}.{self.server}"
