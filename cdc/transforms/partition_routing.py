"""Debezium's ``PartitionRouting``: the Kafka partition from fields of the change event.

Users route by a payload field when the key is not what order must follow: all orders of one
customer in one partition, whatever the order's primary key, so one consumer sees a
customer's changes in sequence. The partition is ``sum(hash(field)) mod partition.topic.num``
with the JVM's hash (:mod:`cdc.transforms.java_hash`), so a topic Debezium filled keeps each
customer in the same partition after the switch to tidemark.

As Debezium's:

* ``partition.payload.fields`` are paths into the envelope (``after.customer_id``,
  ``source.table``, ``op``); ``change.<field>`` reads ``before`` for a delete and ``after``
  otherwise. A field the record's schema lacks, or whose value is null, is left out; a record
  with none of them keeps its partition (the producer's, by key).
* tombstones, values that are not change events, truncates and logical messages pass
  unchanged.
* ``partition.topic.num`` must equal the topic's partition count; use a ``TopicNameMatches``
  predicate to scope the transform to topics of one size.

Deliberately different: Debezium reads an unknown ``partition.hash.function`` as ``java``;
tidemark refuses it, since a typo would silently re-partition a topic. And a path through a
null struct (``before.id`` on an insert) fails the task in Debezium with a
NullPointerException; here the task fails too, with the field named.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cdc.record import SourceRecord
from cdc.schema.model import Schema, Type
from cdc.transforms.base import (
    PluginConfig,
    SchemaCache,
    Transformation,
    TransformError,
    is_envelope,
)
from cdc.transforms.java_hash import HASH_FUNCTIONS, JavaHashError, int32

_SKIPPED_OPS = ("t", "m")  # truncate, logical message: no row to route by

_Path = tuple[str, ...]
#: a field's location in one envelope schema: the path (``change`` resolved per record) and
#: the schema of the value at its end (None: the last field is not in the schema)
_Resolved = tuple[_Path, Schema | None]


class PartitionRouting(Transformation):
    def __init__(self) -> None:
        self._fields: list[_Path] = []
        self._partitions = 1
        self._hash: Callable[[Schema | None, Any], int] = HASH_FUNCTIONS["java"]
        self._resolved: SchemaCache[
            tuple[tuple[_Resolved | None, ...], tuple[_Resolved | None, ...]]
        ]
        self._resolved = SchemaCache()

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        raw = cfg.required("partition.payload.fields")
        names = raw.split(",") if raw else []
        if any(not n.strip() for n in names):
            cfg.error("partition.payload.fields", "must not contain empty elements")
        self._fields = [tuple(p.strip() for p in n.strip().split(".")) for n in names if n.strip()]
        number = cfg.required("partition.topic.num")
        if number:
            try:
                self._partitions = int(number)
            except ValueError:
                cfg.error("partition.topic.num", f"must be a positive integer, got {number!r}")
            else:
                if self._partitions <= 0:
                    cfg.error("partition.topic.num", f"must be a positive integer, got {number}")
        name = cfg.choice("partition.hash.function", tuple(HASH_FUNCTIONS), "java")
        self._hash = HASH_FUNCTIONS[name]
        cfg.check()

    def apply(self, record: SourceRecord) -> SourceRecord:
        value, schema = record.value, record.value_schema
        if value is None or schema is None or not is_envelope(schema):
            return record
        if value.get("op") in _SKIPPED_OPS:
            return record
        resolved = self._resolved.get(schema)
        if resolved is None:
            resolved = self._resolved.put(
                schema, (self._resolve(schema, "after"), self._resolve(schema, "before"))
            )
        by_field = resolved[1] if value.get("op") == "d" else resolved[0]
        total, found = 0, False
        for path, spec in zip(self._fields, by_field, strict=True):
            if spec is None:
                continue
            field_value = self._read(value, spec[0], path)
            if spec[1] is None:
                continue
            if field_value is None:
                field_value = spec[1].default  # Connect's Struct.get reads null as the default
                if field_value is None:
                    continue
            try:
                total += self._hash(spec[1], field_value)
            except JavaHashError as exc:
                raise TransformError(
                    f"PartitionRouting cannot hash {'.'.join(path)} of {record.topic}: {exc}"
                ) from None
            found = True
        if not found:
            return record
        normalized = int32(total) & 0x7FFFFFFF
        if normalized == 0x7FFFFFFF:
            normalized = 0
        return record.with_(kafka_partition=normalized % self._partitions)

    def _resolve(self, schema: Schema, change_side: str) -> tuple[_Resolved | None, ...]:
        """Each configured field's path and value schema in ``schema``, with ``change`` read
        as ``change_side``. None where a struct on the way is missing (Debezium skips the
        field); a missing last field keeps the path with no schema, since Debezium walks the
        structs first and fails on a null one before it finds the field missing."""
        out: list[_Resolved | None] = []
        for path in self._fields:
            current: Schema | None = schema
            names: list[str] = []
            for i, part in enumerate(path):
                last = i == len(path) - 1
                name = change_side if part == "change" and not last else part
                field = current.field(name) if current is not None else None
                names.append(name)
                if field is None or (not last and field.schema.type is not Type.STRUCT):
                    current = None
                    break
                current = field.schema
            if current is None and len(names) < len(path):
                out.append(None)
            else:
                out.append((tuple(names), current))
        return tuple(out)

    @staticmethod
    def _read(value: dict[str, Any], names: _Path, path: _Path) -> Any:
        current: Any = value
        for name in names[:-1]:
            current = current.get(name)
            if current is None:
                raise TransformError(
                    f"PartitionRouting: {'.'.join(path)} passes through {name}, which is null "
                    "in this record (use change.<field> to read before or after by operation)"
                )
        return current.get(names[-1])
