"""Debezium's ``io.debezium.transforms.SchemaChangeEventFilter``: drop schema change events by
the kind of change.

Users put this on a connector whose schema change topic feeds something that replays DDL
downstream (a replica, a data lake's table definitions, a schema registry of its own) and that
must never see destructive changes: with ``schema.change.event.exclude.list=DROP,TRUNCATE``
the ``CREATE`` and ``ALTER`` events still arrive, while a ``DROP TABLE`` upstream does not
drop anything downstream. Row changes, heartbeats and every other record pass untouched; the
schema history is not affected either (it is written before transforms run).

A record counts as a schema change when its value schema is named ``*.SchemaChangeValue``
(also ``*.SchemaChangeKey``, as Debezium's ``SmtManager.isValidSchemaChange`` accepts both):
what tidemark's MySQL/MariaDB and SQL Server connectors write to the schema change topic
(``io.debezium.connector.mysql.SchemaChangeValue`` and so on). Its kind is the ``type`` of its
first ``tableChanges`` entry; an event without table changes (``CREATE DATABASE``, and in
tidemark a MySQL ``TRUNCATE TABLE``) is ``DATABASE``; a null ``tableChanges`` is always
dropped, as in Debezium.

Differences from Debezium, on purpose: an unknown type name (Debezium: an
``IllegalArgumentException`` from ``valueOf`` when the connector starts) is a config error of
``schema.change.event.exclude.list`` that lists the valid names, reported with the chain's
other errors; blank entries are ignored (``DROP,,ALTER``), and a list naming no type at all
(``","``, which Debezium accepts and then filters nothing) is a config error. Names are
case-sensitive, as Java's ``valueOf`` is.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from enum import StrEnum

from cdc.record import SourceRecord
from cdc.schema.model import Schema
from cdc.transforms.base import PluginConfig, Transformation, TransformError
from cdc.transforms.fields import require_struct

LOG = logging.getLogger("tidemark.transforms")

EXCLUDE_LIST = "schema.change.event.exclude.list"
TABLE_CHANGES = "tableChanges"
#: Debezium's SchemaFactory suffixes of the schema change topic's value and key schemas
SCHEMA_CHANGE_SUFFIXES = (".SchemaChangeValue", ".SchemaChangeKey")


class SchemaChangeEventType(StrEnum):
    """Debezium's ``SchemaChangeEvent.SchemaChangeEventType``, in its declaration order."""

    CREATE = "CREATE"
    ALTER = "ALTER"
    DROP = "DROP"
    TRUNCATE = "TRUNCATE"
    DATABASE = "DATABASE"


_BY_NAME = {t.value: t for t in SchemaChangeEventType}
_VALID_NAMES = ", ".join(_BY_NAME)


def is_schema_change(schema: Schema | None) -> bool:
    """Debezium's ``SmtManager.isValidSchemaChange``: decided by the value schema's name."""
    return (
        schema is not None
        and schema.name is not None
        and schema.name.endswith(SCHEMA_CHANGE_SUFFIXES)
    )


class SchemaChangeEventFilter(Transformation):
    def __init__(self) -> None:
        self._excluded: frozenset[SchemaChangeEventType] = frozenset()

    @property
    def excluded(self) -> frozenset[SchemaChangeEventType]:
        """The types this transform drops."""
        return self._excluded

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        names = cfg.items(EXCLUDE_LIST) if cfg.required(EXCLUDE_LIST) else []
        excluded: set[SchemaChangeEventType] = set()
        unknown: list[str] = []
        for name in names:
            found = _BY_NAME.get(name)
            if found is None:
                unknown.append(name)
            else:
                excluded.add(found)
        if unknown:
            listed = ", ".join(repr(name) for name in unknown)
            plural = "s" if len(unknown) > 1 else ""
            cfg.error(
                EXCLUDE_LIST,
                f"unknown schema change event type{plural} {listed} (valid, case-sensitive: "
                f"{_VALID_NAMES})",
            )
        elif cfg.raw(EXCLUDE_LIST) and not names:
            cfg.error(EXCLUDE_LIST, f"must name at least one of {_VALID_NAMES}")
        cfg.check()
        self._excluded = frozenset(excluded)

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        schema = record.value_schema
        if record.value is None or schema is None or not is_schema_change(schema):
            return record
        value = require_struct(record.value, schema, "Read schema change event to filter")
        if schema.field(TABLE_CHANGES) is None:
            # Connect's Struct.getArray of a field the schema does not have
            raise TransformError(
                f"{TABLE_CHANGES} is not a valid field name (schema {schema.name} of a record "
                f"on {record.topic})"
            )
        changes = value.get(TABLE_CHANGES)
        if changes is None:
            LOG.debug("schema change on %s without %s: dropped", record.topic, TABLE_CHANGES)
            return None
        if not changes:
            kind = SchemaChangeEventType.DATABASE
        else:
            first = changes[0]
            type_name = first.get("type") if isinstance(first, dict) else None
            found = _BY_NAME.get(type_name) if isinstance(type_name, str) else None
            if found is None:
                # Java: SchemaChangeEventType.valueOf fails the task
                raise TransformError(
                    f"schema change on {record.topic}: table change type {type_name!r} is not "
                    f"one of {_VALID_NAMES}"
                )
            kind = found
        return None if kind in self._excluded else record
