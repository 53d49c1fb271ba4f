"""Topic and schema naming: the seed's rules in one place (catalogue §1.3, §1.5)."""

from __future__ import annotations

import re

from cdc.schema.name_adjust import adjust, field_name
from cdc.spi import TableId

_TOPIC_INVALID = re.compile(r"[^A-Za-z0-9._-]")


def sanitize_field_name(name: str) -> str:
    """``sanitize.field.names``/``field.name.adjustment.mode=avro``: what Avro names cannot
    hold becomes ``_`` (Debezium's adjuster, see cdc/schema/name_adjust.py)."""
    return field_name(name, "avro")


def unicode_field_name(name: str) -> str:
    """``field.name.adjustment.mode=avro_unicode``: each such character as ``_uXXXX``, so two
    names that differ only there stay apart (with Debezium's quirks, name_adjust.py)."""
    return field_name(name, "avro_unicode")


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
        schema_name_mode: str = "avro",
    ) -> None:
        self.server = server_name
        self.heartbeat_prefix = heartbeat_prefix
        self.include_catalog = include_catalog
        self.schema_name_mode = schema_name_mode
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
        """``<topic>.<suffix>`` through ``schema.name.adjustment.mode``, as Debezium names
        record schemas (a ``.`` inside the prefix or a table name stays a ``.``)."""
        return adjust(f"{self.data_topic(table_id)}.{suffix}", self.schema_name_mode)

    @property
    def schema_change_topic(self) -> str:
        return self.server

    @property
    def transaction_topic(self) -> str:
        return f"{self.server}.transaction"

    @property
    def heartbeat_topic(self) -> str:
        return f"{self.heartbeat_prefix}.{self.server}"
