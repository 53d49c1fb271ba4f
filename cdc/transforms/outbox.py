"""Debezium's outbox EventRouter: turn inserts into an outbox table into domain events.

Services write an event row (id, aggregatetype, aggregateid, type, payload) in the same
transaction as their state change; this SMT reroutes each inserted row to
``outbox.event.<aggregatetype>`` with the aggregate id as key (so one aggregate's events stay
ordered in one partition), the payload as value and the event id in an ``id`` header, which
consumers use to de-duplicate.

Only inserts (and snapshot reads) are events. Deletes are how the outbox is emptied (often in
the very transaction that inserted the row), so they are dropped with a DEBUG line only, as
Debezium does; an update means something edited an event after the fact and is reported per
``table.op.invalid.behavior`` (``warn`` / ``error`` / ``fatal``; the deprecated
``debezium.op.invalid.behavior`` is read when the new key is absent).

``table.field.event.type`` is accepted for compatibility; as in Debezium, the event type only
reaches consumers when ``table.fields.additional.placement`` puts it somewhere (for example
``type:header:eventType``). ``table.expand.json.payload`` infers a struct schema from a JSON
payload per record (Debezium's ``JsonSchemaData`` rules, but mixed number types in an array are
widened rather than rejected).

Column roles are resolved against the row schema once and cached; a row schema lacking a
configured column fails the task with the column's name, since no event can be built from it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdc.record import SourceRecord
from cdc.schema.logical import (
    CONNECT_TIMESTAMP,
    DBZ_MICRO_TIMESTAMP,
    DBZ_NANO_TIMESTAMP,
    DBZ_TIMESTAMP,
)
from cdc.schema.model import (
    OPTIONAL_BOOLEAN,
    OPTIONAL_BYTES,
    OPTIONAL_FLOAT64,
    OPTIONAL_INT32,
    OPTIONAL_INT64,
    OPTIONAL_STRING,
    STRING,
    Schema,
    Type,
    array,
    struct,
)
from cdc.transforms.base import (
    PluginConfig,
    SchemaCache,
    Transformation,
    TransformError,
    header_bytes,
    is_envelope,
)
from cdc.transforms.router import TopicRewriter

LOG = logging.getLogger("tidemark.transforms.outbox")

PLACEMENTS = ("header", "envelope", "partition")
_TIMESTAMP_DIVISORS = {
    CONNECT_TIMESTAMP: 1,
    DBZ_TIMESTAMP: 1,
    DBZ_MICRO_TIMESTAMP: 1_000,
    DBZ_NANO_TIMESTAMP: 1_000_000,
}


@dataclass(frozen=True, slots=True)
class AdditionalField:
    """One ``table.fields.additional.placement`` entry: ``column:placement[:alias]``."""

    field: str
    placement: str
    alias: str


@dataclass(frozen=True, slots=True)
class _RowPlan:
    """What one outbox row schema yields: the key schema and the envelope-placed fields."""

    key_schema: Schema
    payload_schema: Schema
    envelope: tuple[tuple[str, str, Schema], ...]  # (alias, column, schema)


class EventRouter(Transformation):
    def __init__(self) -> None:
        self._id = "id"
        self._key = "aggregateid"
        self._type = "type"
        self._payload = "payload"
        self._timestamp: str | None = None
        self._schema_version: str | None = None
        self._route_by = "aggregatetype"
        self._router: TopicRewriter | None = None
        self._tombstone_on_empty = False
        self._invalid_op = "warn"
        self._expand_json = False
        self._json_nulls = "ignore"
        self._json_empty_arrays = "ignore"
        self._additional: tuple[AdditionalField, ...] = ()
        self._headers_only = True
        self._plans: SchemaCache[_RowPlan] = SchemaCache()
        self._value_schemas: SchemaCache[Schema] = SchemaCache()

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._id = cfg.string("table.field.event.id") or "id"
        self._key = cfg.string("table.field.event.key") or "aggregateid"
        self._type = cfg.string("table.field.event.type") or "type"
        self._payload = cfg.string("table.field.event.payload") or "payload"
        self._timestamp = cfg.string("table.field.event.timestamp") or None
        self._schema_version = cfg.string("table.field.event.schema.version") or None
        self._route_by = cfg.string("route.by.field") or "aggregatetype"
        self._router = TopicRewriter.from_config(
            cfg,
            "route.topic.regex",
            "route.topic.replacement",
            default_regex="(?<routedByValue>.*)",
            default_replacement="outbox.event.${routedByValue}",
        )
        self._tombstone_on_empty = cfg.boolean("route.tombstone.on.empty.payload", False)
        behaviours = ("warn", "error", "fatal")
        if cfg.raw("table.op.invalid.behavior"):
            self._invalid_op = cfg.choice("table.op.invalid.behavior", behaviours, "warn")
        else:
            self._invalid_op = cfg.choice("debezium.op.invalid.behavior", behaviours, "warn")
        self._expand_json = cfg.boolean("table.expand.json.payload", False)
        self._json_nulls = cfg.choice(
            "table.json.payload.null.behavior", ("ignore", "optional_bytes"), "ignore"
        )
        self._json_empty_arrays = cfg.choice(
            "table.json.payload.empty.array.behavior", ("ignore", "optional_string"), "ignore"
        )
        self._additional = self._parse_additional(cfg)
        self._headers_only = all(f.placement != "envelope" for f in self._additional)
        cfg.check()

    @staticmethod
    def _parse_additional(cfg: PluginConfig) -> tuple[AdditionalField, ...]:
        key = "table.fields.additional.placement"
        out = []
        for entry in cfg.items(key):
            parts = [p.strip() for p in entry.split(":")]
            if len(parts) not in (2, 3) or not all(parts):
                cfg.error(key, f"{entry!r} is not column:placement or column:placement:alias")
                continue
            placement = parts[1].lower()
            if placement not in PLACEMENTS:
                cfg.error(key, f"{entry!r}: placement must be one of " + ", ".join(PLACEMENTS))
                continue
            alias = parts[2] if len(parts) == 3 else parts[0]
            out.append(AdditionalField(parts[0], placement, alias))
        return tuple(out)

    # -- per record ----------------------------------------------------------------------------

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        envelope = record.value
        if envelope is None:
            LOG.debug("tombstone on %s ignored", record.topic)
            return None
        schema = record.value_schema
        if schema is None or not is_envelope(schema):
            return record
        op = envelope.get("op")
        if op == "d":
            LOG.debug("delete on %s ignored (key %r)", record.topic, record.key)
            return None
        if op == "u":
            self._unexpected_update(record)
            return None
        row = envelope.get("after")
        after_field = schema.field("after")
        if row is None or after_field is None:
            LOG.debug("%r event on %s without an 'after' row ignored", op, record.topic)
            return None
        row_schema = after_field.schema
        plan = self._plans.get(row_schema) or self._plans.put(row_schema, self._plan(row_schema))
        return self._route(record, envelope, row, row_schema, plan)

    def _route(
        self,
        record: SourceRecord,
        envelope: Mapping[str, Any],
        row: Mapping[str, Any],
        row_schema: Schema,
        plan: _RowPlan,
    ) -> SourceRecord:
        routed_by = row.get(self._route_by)
        if routed_by is None:
            raise TransformError(f"outbox row on {record.topic} has a null {self._route_by!r}")
        routed_by = str(routed_by)
        payload = row.get(self._payload)
        payload_schema = plan.payload_schema
        if self._expand_json:
            payload_schema, payload = self._expand(record, payload_schema, payload)

        headers = [*record.headers, ("id", header_bytes(row.get(self._id)))]
        partition = record.kafka_partition
        for extra in self._additional:
            if extra.placement == "header":
                headers.append((extra.alias, header_bytes(row.get(extra.field))))
            elif extra.placement == "partition":
                partition = row.get(extra.field)

        value_schema: Schema | None
        value: Any
        if self._tombstone_on_empty and (
            payload is None or (isinstance(payload, str) and not payload.strip())
        ):
            value_schema, value = None, None
        elif self._headers_only:
            value_schema, value = payload_schema, payload
        else:
            value_schema = self._value_schema(row_schema, payload_schema, plan, routed_by, row)
            value = {"payload": payload}
            for alias, column, _ in plan.envelope:
                value[alias] = row.get(column)

        assert self._router is not None, "configure() first"
        topic = self._router.rewrite(routed_by) or routed_by
        return SourceRecord(
            topic,
            plan.key_schema,
            row.get(self._key),
            value_schema,
            value,
            record.source_partition,
            record.source_offset,
            headers,
            self._timestamp_ms(envelope, row, row_schema, record),
            partition,
            continued=record.continued,
        )

    def _unexpected_update(self, record: SourceRecord) -> None:
        message = "unexpected update on outbox table %s ignored (key %r)"
        if self._invalid_op == "fatal":
            raise TransformError(message % (record.topic, record.key))
        level = logging.WARNING if self._invalid_op == "warn" else logging.ERROR
        LOG.log(level, message, record.topic, record.key)

    def _expand(self, record: SourceRecord, schema: Schema, payload: Any) -> tuple[Schema, Any]:
        if payload is None:
            return schema, payload
        if not isinstance(payload, str):
            LOG.warning(
                "table.expand.json.payload is set but the payload on %s is not a string",
                record.topic,
            )
            return schema, payload
        try:
            return expand_json(self._payload, payload, self._json_nulls, self._json_empty_arrays)
        except ValueError as exc:
            LOG.warning("JSON expansion of the payload on %s failed: %s", record.topic, exc)
            return schema, payload

    def _timestamp_ms(
        self,
        envelope: Mapping[str, Any],
        row: Mapping[str, Any],
        row_schema: Schema,
        record: SourceRecord,
    ) -> int | None:
        """The event's Kafka timestamp: the configured column, else the envelope's ``ts_ms``."""
        fallback: int | None = envelope.get("ts_ms", record.timestamp_ms)
        column = self._timestamp
        value = None if column is None else row.get(column)
        if column is None or value is None:
            return fallback
        field = row_schema.field(column)
        assert field is not None  # checked by _plan
        divisor = _TIMESTAMP_DIVISORS.get(field.schema.name or "")
        if divisor is None:
            raise TransformError(
                f"unsupported type {field.schema.name or field.schema.type.value} for the event "
                f"timestamp column {column!r}"
            )
        return int(value) // divisor

    # -- per schema ----------------------------------------------------------------------------

    def _plan(self, row: Schema) -> _RowPlan:
        def column(name: str, role: str) -> Schema:
            field = row.field(name)
            if field is None:
                raise TransformError(f"outbox table {row.name} has no {role} column {name!r}")
            return field.schema

        column(self._id, "event id")
        column(self._route_by, "route.by.field")
        payload = column(self._payload, "payload")
        if self._timestamp is not None:
            column(self._timestamp, "event timestamp")
        columns = {extra.field: column(extra.field, "additional") for extra in self._additional}
        key_field = row.field(self._key)
        key_schema = key_field.schema if key_field is not None else STRING
        envelope = tuple(
            (extra.alias, extra.field, columns[extra.field])
            for extra in self._additional
            if extra.placement == "envelope"
        )
        return _RowPlan(key_schema, payload, envelope)

    def _value_schema(
        self,
        row_schema: Schema,
        payload_schema: Schema,
        plan: _RowPlan,
        routed_by: str,
        row: Mapping[str, Any],
    ) -> Schema:
        """``{payload, <envelope fields>}`` named after the row schema with the routed value
        spliced in (``server.public.outbox.<aggregatetype>.Value``), as Debezium names it."""
        version = row.get(self._schema_version) if self._schema_version else None
        cacheable = not self._expand_json  # an expanded payload's schema is inferred per record
        if cacheable:
            cached = self._value_schemas.get(row_schema, (routed_by, version))
            if cached is not None:
                return cached
        name = row_schema.name
        if name is None:
            schema_name = routed_by
        else:
            head, dot, tail = name.rpartition(".")
            schema_name = f"{head}.{routed_by}.{tail}" if dot else f"{routed_by}.{name}"
        fields = [("payload", payload_schema)] + [(alias, s) for alias, _, s in plan.envelope]
        try:
            built = struct(
                fields, name=schema_name, version=None if version is None else int(version)
            )
        except ValueError as exc:
            raise TransformError(f"cannot build outbox event schema {schema_name}: {exc}") from exc
        if not cacheable:
            return built
        return self._value_schemas.put(row_schema, built, (routed_by, version))


# -- table.expand.json.payload -----------------------------------------------------------------


def expand_json(name: str, text: str, nulls: str, empty_arrays: str) -> tuple[Schema, Any]:
    """Parse a JSON payload and infer a Connect schema for it, the way Debezium's
    ``JsonSchemaData`` does: objects become optional structs named by their path, numbers
    INT32 / INT64 / FLOAT64, and nulls and empty arrays are left out unless
    ``table.json.payload.null.behavior`` / ``...empty.array.behavior`` give them a type."""
    if not text.startswith(("{", "[")):
        raise ValueError(f"payload starts with {text[:1]!r}, not a JSON object or array")
    document: Any = json.loads(text)
    schema = _infer(name, document, nulls, empty_arrays)
    if schema is None:
        raise ValueError("no schema can be inferred for the payload")
    converted: Any = _convert(document, schema)
    return schema, converted


def _number_schema(value: int | float) -> Schema:
    if isinstance(value, float):
        return OPTIONAL_FLOAT64
    if -(2**31) <= value < 2**31:
        return OPTIONAL_INT32
    if -(2**63) <= value < 2**63:
        return OPTIONAL_INT64
    return OPTIONAL_FLOAT64


def _infer(key: str | None, node: Any, nulls: str, empty_arrays: str) -> Schema | None:
    if isinstance(node, bool):
        return OPTIONAL_BOOLEAN
    if isinstance(node, int | float):
        return _number_schema(node)
    if isinstance(node, str):
        return OPTIONAL_STRING
    if node is None:
        return OPTIONAL_BYTES if nulls == "optional_bytes" else None
    if isinstance(node, dict):
        fields: dict[str, Schema] = {}
        for name, child in node.items():
            child_schema = _infer(f"{key}.{name}" if key else name, child, nulls, empty_arrays)
            if child_schema is not None and name not in fields:
                fields[name] = child_schema
        return struct(fields.items(), name=key, optional=True)
    if isinstance(node, list):
        if not node:
            if empty_arrays == "optional_string":
                return array(OPTIONAL_STRING, optional=True)
            return None
        return array(_infer_element(key, node, nulls, empty_arrays), optional=True)
    raise ValueError(f"unsupported JSON value {node!r}")


def _kind(node: Any) -> str:
    if isinstance(node, bool):
        return "boolean"
    if isinstance(node, int | float):
        return "number"
    return type(node).__name__


def _infer_element(key: str | None, items: list[Any], nulls: str, empty_arrays: str) -> Schema:
    present = [item for item in items if item is not None]
    if not present:
        raise ValueError(f"array {key or ''} has only null members")
    kinds = {_kind(item) for item in present}
    if len(kinds) > 1:
        raise ValueError(f"array {key or ''} is not homogeneous ({', '.join(sorted(kinds))})")
    if isinstance(present[0], dict):
        merged: dict[str, Schema] = {}
        for item in present:
            element = _infer(key, item, nulls, empty_arrays)
            assert element is not None
            for f in element.fields:
                old = merged.get(f.name)
                if old is None or (old.type is Type.BYTES and f.schema.type is not Type.BYTES):
                    merged[f.name] = f.schema
        return struct(merged.items(), name=key, optional=True)
    if kinds == {"number"}:
        # Widen instead of failing on [1, 2.5] or [1, 2**40], where Debezium gives up.
        found = {_number_schema(item) for item in present}
        for widest in (OPTIONAL_FLOAT64, OPTIONAL_INT64, OPTIONAL_INT32):
            if widest in found:
                return widest
    element = _infer(None, present[0], nulls, empty_arrays)
    if element is None:
        raise ValueError(f"array {key or ''} has unrecognized member schema")
    return element


def _convert(node: Any, schema: Schema) -> Any:
    if node is None:
        return None
    if schema.type is Type.STRUCT:
        return {f.name: _convert(node.get(f.name), f.schema) for f in schema.fields}
    if schema.type is Type.ARRAY:
        assert schema.value_schema is not None
        return [_convert(item, schema.value_schema) for item in node]
    if schema.type is Type.FLOAT64:
        return float(node)
    if schema.type is Type.BYTES:
        return None  # the placeholder type of a field that was null where it was inferred
    return node
