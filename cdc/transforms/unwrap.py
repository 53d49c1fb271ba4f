"""Debezium's ExtractNewRecordState ("unwrap"): replace the change envelope by the row it carries.

Sinks (JDBC, search indexes, the Spark apply job) want rows, not ``before``/``after`` pairs, so
this SMT emits ``after`` for creates, updates and snapshot reads, and decides per
``delete.handling.mode`` what a delete becomes. The Debezium 1.x keys (``drop.tombstones``,
``delete.handling.mode``) are the primary ones, matching the seed documents; the 2.x key
``delete.tombstone.handling.mode`` is accepted and mapped onto them. Without any of them the
default is the seed's (1.x: deletes and tombstones dropped), except on a connector with
``envelope.version=3``, which gets Debezium 3.x's (``tombstone``: a delete becomes a record
with a null value, which Debezium's JDBC sink and other consumers read as the row's delete).

Metadata requested by ``add.fields`` / ``add.headers`` is resolved against the envelope schema
once and cached with the derived value schema, so a record costs one dict copy at most. Output
field order follows Debezium 1.x: the row's columns, then the added fields, then ``__deleted``;
under ``envelope.version=3`` Debezium 3.x's: the row's columns, ``__deleted``, the added fields.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cdc.record import SourceRecord
from cdc.schema.model import OPTIONAL_STRING, Schema
from cdc.transforms.base import (
    PluginConfig,
    SchemaCache,
    Transformation,
    TransformError,
    copy_basics,
    header_bytes,
    is_envelope,
)

LOG = logging.getLogger("tidemark.transforms.unwrap")

DELETED_FIELD = "__deleted"
_TOP_LEVEL_FIELDS = frozenset({"op", "ts_ms", "ts_us", "ts_ns"})
_TRANSACTION_FIELDS = frozenset({"id", "total_order", "data_collection_order"})

# delete.tombstone.handling.mode (Debezium 2.5+) -> (drop.tombstones, delete handling)
_TOMBSTONE_MODES = {
    "drop": (True, "drop"),
    "tombstone": (True, "none"),
    "rewrite": (True, "rewrite"),
    "rewrite-with-tombstone": (False, "rewrite"),
    "delete-to-tombstone": (True, "tombstone"),
}


@dataclass(frozen=True, slots=True)
class FieldReference:
    """One ``add.fields`` / ``add.headers`` entry: ``[struct.]field[:new_name]``.

    An unqualified name lives in ``source``, except the envelope's own ``op``/``ts_ms`` and the
    ``transaction`` block's ``id``/``total_order``/``data_collection_order`` (Debezium's rule)."""

    struct: str | None
    field: str
    new_name: str

    @classmethod
    def parse(cls, spec: str, prefix: str) -> FieldReference:
        path, _, alias = spec.partition(":")
        if ":" in alias:
            raise ValueError(f"unexpected field name {spec!r}")
        parts = path.split(".")
        if len(parts) > 2 or not all(parts) or (":" in spec and not alias):
            raise ValueError(f"unexpected field name {spec!r}")
        if len(parts) == 2:
            parent: str | None = parts[0]
            field = parts[1]
            default_name = f"{parent}_{field}"
        else:
            field = parts[0]
            parent = (
                None
                if field in _TOP_LEVEL_FIELDS
                else "transaction"
                if field in _TRANSACTION_FIELDS
                else "source"
            )
            default_name = field
        return cls(parent, field, prefix + (alias or default_name))


@dataclass(frozen=True, slots=True)
class _Resolved:
    """A field reference located in one envelope schema (``parent`` None: top level)."""

    name: str
    parent: str | None
    field: str
    schema: Schema

    def extract(self, envelope: Mapping[str, Any]) -> Any:
        holder = envelope if self.parent is None else envelope.get(self.parent)
        return None if holder is None else holder.get(self.field)


@dataclass(frozen=True, slots=True)
class _Plan:
    """Everything derived from one envelope schema."""

    fields: tuple[_Resolved, ...]
    headers: tuple[_Resolved, ...]
    after_schema: Schema | None  # the envelope's own (optional) row schema
    after_value_schema: Schema | None  # what a create/update is emitted with
    before_value_schema: Schema | None  # what a rewritten delete is emitted with


class ExtractNewRecordState(Transformation):
    def __init__(self) -> None:
        self._debezium_3 = False
        self._drop_tombstones = True
        self._delete_mode = "drop"
        self._fields: tuple[FieldReference, ...] = ()
        self._headers: tuple[FieldReference, ...] = ()
        self._route_by_field: str | None = None
        self._tombstone_op_header: str | None = None
        self._plans: SchemaCache[_Plan] = SchemaCache()

    def connector_context(self, connector_config: Mapping[str, Any]) -> None:
        self._debezium_3 = str(connector_config.get("envelope.version", "")).strip() == "3"

    def configure(self, config: Mapping[str, str]) -> None:
        cfg = PluginConfig(config)
        self._drop_tombstones = cfg.boolean("drop.tombstones", True)
        self._delete_mode = cfg.choice("delete.handling.mode", ("drop", "rewrite", "none"), "drop")
        legacy = cfg.raw("drop.tombstones") or cfg.raw("delete.handling.mode")
        if self._debezium_3 and not legacy and not cfg.raw("delete.tombstone.handling.mode"):
            # Debezium 3.x's default (delete.tombstone.handling.mode=tombstone): a delete
            # becomes a record with a null value, which sinks read as a delete; 1.x's default
            # (the seed's) drops it
            self._drop_tombstones, self._delete_mode = _TOMBSTONE_MODES["tombstone"]
        if cfg.raw("delete.tombstone.handling.mode"):
            mode = cfg.choice(
                "delete.tombstone.handling.mode", tuple(_TOMBSTONE_MODES), "tombstone"
            )
            if cfg.raw("drop.tombstones") or cfg.raw("delete.handling.mode"):
                cfg.error(
                    "delete.tombstone.handling.mode",
                    "cannot be combined with drop.tombstones / delete.handling.mode",
                )
            self._drop_tombstones, self._delete_mode = _TOMBSTONE_MODES[mode]
        self._fields = self._references(cfg, "add.fields", "add.fields.prefix")
        self._headers = self._references(cfg, "add.headers", "add.headers.prefix")
        self._route_by_field = cfg.string("route.by.field") or None
        self._tombstone_op_header = next(
            (ref.new_name for ref in self._headers if ref.field == "op" and ref.struct is None),
            None,
        )
        cfg.check()

    @staticmethod
    def _references(cfg: PluginConfig, key: str, prefix_key: str) -> tuple[FieldReference, ...]:
        prefix = cfg.string(prefix_key, "__") or ""
        refs = []
        for spec in cfg.items(key):
            try:
                refs.append(FieldReference.parse(spec, prefix))
            except ValueError as exc:
                cfg.error(key, str(exc))
        return tuple(refs)

    # -- per record ----------------------------------------------------------------------------

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        envelope = record.value
        if envelope is None:
            if self._drop_tombstones:
                return None
            if self._tombstone_op_header is not None:
                # Debezium marks the tombstone as the tail of a delete.
                return record.with_(headers=[*record.headers, (self._tombstone_op_header, b"d")])
            return record
        schema = record.value_schema
        if schema is None or not is_envelope(schema):
            return record
        plan = self._plans.get(schema) or self._plans.put(schema, self._plan(schema))

        headers = record.headers
        if plan.headers:
            headers = [
                *headers,
                *((h.name, header_bytes(h.extract(envelope))) for h in plan.headers),
            ]

        after = envelope.get("after")
        if after is not None:
            value = self._with_metadata(after, plan, envelope, "false")
            return self._emit(
                record, self._topic(record, after), plan.after_value_schema, value, headers
            )

        before = envelope.get("before")
        if envelope.get("op") == "t":
            LOG.debug("dropping truncate event on %s", record.topic)
            return None
        mode = self._delete_mode
        if mode == "drop":
            return None
        topic = self._topic(record, before)
        if mode == "rewrite":
            if before is not None:
                value = self._with_metadata(before, plan, envelope, "true")
                return self._emit(record, topic, plan.before_value_schema, value, headers)
            LOG.warning(
                "delete on %s carries no 'before' image to rewrite; emitting it with a null value",
                record.topic,
            )
        if mode == "tombstone":
            return self._emit(record, topic, None, None, headers)
        return self._emit(record, topic, plan.after_schema, None, headers)

    def _with_metadata(
        self, row: dict[str, Any], plan: _Plan, envelope: Mapping[str, Any], deleted: str
    ) -> dict[str, Any]:
        if not plan.fields and self._delete_mode != "rewrite":
            return row
        value = dict(row)
        rewrite = self._delete_mode == "rewrite"
        if rewrite and self._debezium_3:
            value[DELETED_FIELD] = deleted  # 3.x: before the added fields
        for ref in plan.fields:
            value[ref.name] = ref.extract(envelope)
        if rewrite and not self._debezium_3:
            value[DELETED_FIELD] = deleted
        return value

    def _topic(self, record: SourceRecord, row: Mapping[str, Any] | None) -> str:
        if self._route_by_field is None or row is None:
            return record.topic
        routed = row.get(self._route_by_field)
        return record.topic if routed is None or routed == "" else str(routed)

    @staticmethod
    def _emit(
        record: SourceRecord,
        topic: str,
        schema: Schema | None,
        value: Any,
        headers: list[tuple[str, bytes]],
    ) -> SourceRecord:
        return SourceRecord(
            topic,
            record.key_schema,
            record.key,
            schema,
            value,
            record.source_partition,
            record.source_offset,
            headers,
            record.timestamp_ms,
            record.kafka_partition,
            continued=record.continued,
        )

    # -- per schema ----------------------------------------------------------------------------

    def _plan(self, envelope: Schema) -> _Plan:
        fields = self._resolve(self._fields, envelope)
        headers = self._resolve(self._headers, envelope)
        after_field = envelope.field("after")
        before_field = envelope.field("before")
        after = after_field.schema if after_field else None
        before = before_field.schema if before_field else None
        after_value = self._value_schema(after, fields, envelope)
        before_value = (
            after_value if before is after else self._value_schema(before, fields, envelope)
        )
        return _Plan(fields, headers, after, after_value, before_value)

    def _value_schema(
        self, row: Schema | None, added: Sequence[_Resolved], envelope: Schema
    ) -> Schema | None:
        """The row schema made required (Debezium rebuilds it, dropping ``optional``), with the
        metadata fields and ``__deleted`` appended as optional fields."""
        if row is None:
            return None
        columns = [(f.name, f.schema) for f in row.fields]
        rewrite = self._delete_mode == "rewrite"
        if rewrite and self._debezium_3:
            columns.append((DELETED_FIELD, OPTIONAL_STRING))
        columns += [(ref.name, ref.schema) for ref in added]
        if rewrite and not self._debezium_3:
            columns.append((DELETED_FIELD, OPTIONAL_STRING))
        try:
            return copy_basics(row, columns)
        except ValueError as exc:
            raise TransformError(f"cannot unwrap {envelope.name}: {exc}") from exc

    @staticmethod
    def _resolve(refs: Sequence[FieldReference], envelope: Schema) -> tuple[_Resolved, ...]:
        found = []
        for ref in refs:
            parent_schema: Schema | None = envelope
            if ref.struct is not None:
                parent_field = envelope.field(ref.struct)
                parent_schema = parent_field.schema if parent_field is not None else None
            field = parent_schema.field(ref.field) if parent_schema is not None else None
            holder = ref.struct
            if field is None:
                # Debezium falls back to the envelope itself: another SMT may have put it there.
                field = envelope.field(ref.field)
                holder = None
            if field is None:
                LOG.warning(
                    "field %r not found in %s; %s is not added",
                    ref.field if ref.struct is None else f"{ref.struct}.{ref.field}",
                    envelope.name,
                    ref.new_name,
                )
                continue
            optional = field.schema.with_(optional=True, default=None)
            found.append(_Resolved(ref.new_name, holder, ref.field, optional))
        return tuple(found)


__all__ = ["DELETED_FIELD", "ExtractNewRecordState", "FieldReference"]
