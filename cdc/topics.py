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


@lru_cache(maxsize=4096)
def unicode_field_name(name: str) -> str:
    """``field.name.adjustment.mode=avro_unicode``: each character Avro names cannot hold as
    ``_uXXXX`` (its UTF-16 code unit), so two names that differ only there stay apart."""
    out = _FIELD_INVALID.sub(
        lambda m: "".join(
            f"_u{int.from_bytes(m.group(0).encode('utf-16-be', 'surrogatepass')[i : i + 2]):04x}"
            for i in range(0, len(m.group(0).encode("utf-16-be", "surrogatepass")), 2)
        ),
        name,
    )
    if out and out[0].isdigit():
        out = f"_u{ord(out[0]):04x}" + out[1:]
    return out


def sanitize_topic(name: str) -> str:
    return _TOPIC_INVALID.sub("_", name)


class TopicNamer:
    """``<server>.<schema-or-db>.<table>`` data topics and the special topics;
    ``<server>.<db>.<schema>.<table>`` with ``include_catalog`` (a SQL Server connector
    capturing several databases, as Debezium 2.x names them)."""

    def __init__(
        self,
        server_name: str,
        heartbeat_prefix: str = "__debezium-heartbeat",
        *,
        include_catalog: bool = False,
    ) -> None:
        self.server = server_name
        self.heartbeat_prefix = heartbeat_prefix
        self.include_catalog = include_catalog
        self._cache: dict[TableId, str] = {}

    def _containers(self, table_id: TableId) -> list[str]:
        if self.include_catalog and table_id.catalog is not None and table_id.schema is not None:
            return [table_id.catalog, table_id.schema]
        container = table_id.schema if table_id.schema is not None else table_id.catalog
        return [container] if container is not None else []

    def data_topic(self, table_id: TableId) -> str:
        topic = self._cache.get(table_id)
        if topic is None:
            parts = [self.server, *self._containers(table_id), table_id.table]
            topic = self._cache[table_id] = sanitize_topic(".".join(parts))
        return topic

    def schema_name(self, table_id: TableId, suffix: str) -> str:
        parts = [sanitize_schema_part(self.server, first=True)]
        parts.extend(sanitize_schema_part(c) for c in self._containers(table_id))
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
