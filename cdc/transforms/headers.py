"""Kafka Connect's header transforms: ``InsertHeader``, ``DropHeaders`` and ``HeaderFrom``.

Header values are written the way Connect's ``SimpleHeaderConverter`` renders them (strings
as they are, numbers and booleans as text, structs as JSON): see
:func:`cdc.transforms.base.header_bytes`. ``InsertHeader``'s ``value.literal`` is written as
given; Connect parses it into a typed value first, which renders back to the same text for
strings, numbers and booleans.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdc.record import SourceRecord
from cdc.schema.model import Schema
from cdc.transforms.base import (
    PluginConfig,
    SchemaCache,
    Transformation,
    TransformError,
    copy_basics,
    header_bytes,
)
from cdc.transforms.fields import KeyOrValue, field_value, require_struct


class InsertHeader(Transformation):
    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._header = cfg.required("header")
        literal = cfg.raw("value.literal")
        if literal is None:
            cfg.error("value.literal", "missing required configuration")
        self._value = (literal or "").encode()
        cfg.check()

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        return record.with_(headers=[*record.headers, (self._header, self._value)])


class DropHeaders(Transformation):
    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._names = frozenset(cfg.items("headers"))
        if not self._names:
            cfg.error("headers", "must name at least one header")
        cfg.check()

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        names = self._names
        if not any(name in names for name, _ in record.headers):
            return record
        return record.with_(headers=[h for h in record.headers if h[0] not in names])


class HeaderFrom(KeyOrValue):
    """Copies (``operation=copy``) or moves (``move``) fields into headers, the i-th field of
    ``fields`` into the i-th name of ``headers``."""

    PURPOSE = "header from"

    def __init__(self) -> None:
        self._cache: SchemaCache[Schema] = SchemaCache()

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._fields = cfg.items("fields")
        self._headers = cfg.items("headers")
        if not self._fields:
            cfg.error("fields", "must name at least one field")
        if len(self._fields) != len(self._headers):
            cfg.error(
                "headers",
                f"must list as many headers as fields ({len(self._headers)} for "
                f"{len(self._fields)})",
            )
        self._move = cfg.choice("operation", ("move", "copy"), "") == "move"
        if not cfg.raw("operation"):
            cfg.error("operation", "missing required configuration (move or copy)")
        self._use_default = cfg.boolean("replace.null.with.default", True)
        cfg.check()

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        value, schema = self.value_of(record), self.schema_of(record)
        if value is None:
            return record
        value = require_struct(value, schema, self.PURPOSE)
        added: list[tuple[str, bytes]] = []
        for name, header in zip(self._fields, self._headers, strict=True):
            if schema is None:
                v: Any = value.get(name)
            else:
                f = schema.field(name)
                if f is None:
                    raise TransformError(f"{self.PURPOSE}: no field {name!r} on {record.topic}")
                v = field_value(value, name, f.schema, self._use_default)
            added.append((header, header_bytes(v)))
        headers = [*record.headers, *added]
        if not self._move:
            return record.with_(headers=headers)
        moved = set(self._fields)
        kept = {k: v for k, v in value.items() if k not in moved}
        if schema is None:
            return self.replaced(record, None, kept).with_(headers=headers)
        updated = self._cache.get(schema)
        if updated is None:
            fields = [(f.name, f.schema) for f in schema.fields if f.name not in moved]
            updated = self._cache.put(schema, copy_basics(schema, fields))
        return self.replaced(record, updated, kept).with_(headers=headers)


class HeaderFromKey(HeaderFrom):
    side = "key"
