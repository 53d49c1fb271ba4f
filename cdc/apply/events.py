"""From one Kafka record to one flattened change: the ``DebeziumAvroSource`` role of Hudi RFC-39.

A record is either a Debezium envelope (JSON, with or without the converter's
``{"schema", "payload"}`` wrapper), a tombstone (null value, only there for log compaction), or
bad input. Bad input is never dropped: it becomes a :class:`BadEvent` naming
topic/partition/offset, which the job fails on or quarantines.

The row of a change is ``after`` (``before`` for deletes, whose ``after`` is null), with the
key columns taken from the Kafka key: the key is the primary key by definition, and a delete's
``before`` may carry nothing else. Columns whose value is the TOAST placeholder are listed in
``unavailable`` so the merge keeps the stored value instead.

Parsing only what is needed is the main cost saver: the schema part of a JSON-with-schema record
(two thirds of its bytes) is identical for every record of a table version, so it is parsed once
and cached by its raw bytes, and only the payload is parsed per record.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from cdc.apply import cells, deltas, documents, ranges
from cdc.apply import sparktypes as st
from cdc.apply.ordering import (
    OrderingError,
    OrderingRules,
    detect_connector,
    is_snapshot,
    native_position,
    native_position_text,
    phase_of_snapshot,
    position_key,
)
from cdc.converters import avro_json

OPS = frozenset({"c", "u", "d", "r", "t", "m"})
META_PREFIX = "__"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_PAYLOAD_SEP = b',"payload":'
_SCHEMA_HEAD = b'{"schema":'
_SANITIZE = re.compile(r"[^A-Za-z0-9_]")
_CACHE_LIMIT = 512
_T = TypeVar("_T")
_NONE: frozenset[str] = frozenset()
OLD_KEY_HEADER = "__debezium.oldkey"
NEW_KEY_HEADER = "__debezium.newkey"
Headers = list[tuple[str, bytes | None]]


class BadInput(ValueError):
    """The record is not a change event this job can apply."""


@dataclass(frozen=True)
class ParseSettings:
    """What parsing needs from the configuration (picklable: it travels to the workers)."""

    placeholders: tuple[str, ...] = ("__debezium_unavailable_value",)
    ordering: OrderingRules = field(default_factory=OrderingRules)
    schemas: str = "auto"  # auto | true | false
    input_format: str = "auto"  # auto | json | avro
    registry: avro_json.RegistrySettings = field(default_factory=avro_json.RegistrySettings)
    table_name: str = "{topic}"
    tables: tuple[tuple[str, str], ...] = ()


@dataclass
class RowShape:
    """Everything derived from one row schema (cached): the columns, their Spark types, the
    per-column value rewrites for ``from_json`` and the placeholder forms per column."""

    columns: tuple[str, ...]
    types: dict[str, Any]
    normalizers: dict[str, st.Normalizer]
    placeholder_forms: dict[str, tuple[Any, ...]]
    digest: str
    inferred: bool = False


@dataclass(slots=True)
class Change:
    topic: str
    partition: int
    offset: int
    table: str
    op: str
    key: dict[str, Any] | None
    key_fields: tuple[str, ...]
    row: dict[str, Any]
    unavailable: frozenset[str]
    pos: tuple[int, ...]
    source_ts_ms: int | None
    ts_ms: int | None
    tx_id: str | None
    snapshot: bool
    position: str | None
    shape: RowShape
    layout: str
    descriptor: str = ""
    #: key JSON of the other key of a primary-key change: ``__debezium.oldkey`` on the create
    #: of the new key, ``__debezium.newkey`` on the delete of the old key (see handover.py)
    old_key: str | None = None
    new_key: str | None = None
    #: a MongoDB update's patch steps (position, ops) when it carries no document (documents.py)
    patch: list[tuple[tuple[int, ...], dict[str, Any]]] | None = None
    #: a Cassandra range delete's bounds (ranges.py); such a change is no row
    range: dict[str, Any] | None = None
    #: Cassandra sets and maps written by element: column -> the elements (keys) the write
    #: removed, in the column's form; the column's value in ``row`` is what it added (deltas.py)
    removed: dict[str, Any] | None = None

    @property
    def key_json(self) -> str:
        return key_json(self.key)


@dataclass
class Skipped:
    """Valid input with nothing to apply: tombstones and logical-decoding messages."""

    reason: str


@dataclass
class BadEvent:
    topic: str
    partition: int
    offset: int
    error: str

    def describe(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}: {self.error}"


Parsed = Change | Skipped | BadEvent


class _Heads(dict[bytes, _T]):
    """Schema parts seen (their bytes up to the payload) -> what the parser keeps for each.

    Remembers the last one matched, with its separator: records of one table come in runs with
    the same schema part, and comparing a prefix costs far less than finding the separator in
    the schema text and hashing it (a schema part is ~2/3 of a record's bytes)."""

    def __init__(self) -> None:
        super().__init__()
        self.last = b""  # the last matched head and the separator after it
        self.last_kept: Any = None

    def clear(self) -> None:
        super().clear()
        self.last, self.last_kept = b"", None


def _after_known_head(raw: bytes, heads: _Heads[_T]) -> tuple[Any, _T] | None:
    """A ``{"schema":..., "payload":...}`` record whose schema part is a head in ``heads``
    (:func:`_remember_head`): its payload, parsed alone, and what ``heads`` keeps for it.
    ``None``: not such a record, or its payload is not valid JSON (the caller's full parse
    then says why)."""
    if not raw.endswith(b"}"):
        return None
    last = heads.last
    # Same first separator as the record ``last`` came from, as both start with all of it.
    if last and raw.startswith(last):
        kept = heads.last_kept
        start = len(last)
    else:
        if not raw.startswith(_SCHEMA_HEAD):
            return None
        cut = raw.find(_PAYLOAD_SEP)
        if cut <= 0:
            return None
        kept = heads.get(raw[:cut])
        if kept is None:
            return None
        start = cut + len(_PAYLOAD_SEP)
        heads.last, heads.last_kept = raw[:start], kept
    try:
        return orjson.loads(memoryview(raw)[start:-1]), kept
    except orjson.JSONDecodeError:
        return None


def _remember_head(raw: bytes, schema: Any, heads: _Heads[_T], kept: _T) -> None:
    """Keeps ``kept`` under ``raw``'s bytes before its first ``,"payload":``, when those are
    exactly ``{"schema":<schema>`` (checked once per head: a ``,"payload":`` inside the
    schema's text would otherwise be taken for the payload's start)."""
    if not raw.startswith(_SCHEMA_HEAD):
        return
    cut = raw.find(_PAYLOAD_SEP)
    if cut <= 0:
        return
    head = raw[:cut]
    try:
        if orjson.loads(head + b"}") != {"schema": schema}:
            return
    except orjson.JSONDecodeError:
        return
    if len(heads) >= _CACHE_LIMIT:
        heads.clear()
    heads[head] = kept


def key_json(key: Mapping[str, Any] | None) -> str:
    return "" if key is None else orjson.dumps(key, option=orjson.OPT_SORT_KEYS).decode()


@dataclass
class Parser:
    settings: ParseSettings
    _shapes: _Heads[tuple[RowShape | None, RowShape | None]] = field(default_factory=_Heads)
    #: a key's schema part (its bytes up to the payload) -> the key schema: like _shapes, so a
    #: key's schema is parsed once, not with every record
    _key_schemas: _Heads[dict[str, Any]] = field(default_factory=_Heads)
    _tables: dict[str, str] = field(default_factory=dict)
    _layouts: dict[str, str] = field(default_factory=dict)
    #: parse numbers keeping their text (a decimal written as a JSON number)
    _exact: bool = False
    #: topics whose records needed that: read exactly at once, not parsed twice
    _exact_topics: set[str] = field(default_factory=set)

    def parse(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
    ) -> Parsed:
        try:
            try:
                if topic in self._exact_topics:
                    raise st.InexactNumber  # this topic's decimals are JSON numbers
                parsed = self._parse(topic, partition, offset, key, value)
            except st.InexactNumber:
                self._exact = True  # the same record, every number kept as written
                self._exact_topics.add(topic)
                try:
                    parsed = self._parse(topic, partition, offset, key, value)
                finally:
                    self._exact = False
                if isinstance(parsed, Change):
                    parsed.row = st.plain_floats(parsed.row)
                    # a key's identity (key_json) must keep every digit: 12345678901234567.25
                    # and .50 are two keys, one as binary floats
                    parsed.key = st.plain_floats(parsed.key, as_text=True)
                    parsed.removed = st.plain_floats(parsed.removed)
            if headers and isinstance(parsed, Change):
                _key_change_headers(parsed, headers)
            return parsed
        except BadInput as exc:
            return BadEvent(topic, partition, offset, str(exc))
        except OrderingError as exc:
            return BadEvent(topic, partition, offset, f"cannot order the event: {exc}")
        except st.TypeMappingError as exc:
            return BadEvent(topic, partition, offset, str(exc))

    # -- envelope ------------------------------------------------------------------------------
    def _parse(
        self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None
    ) -> Parsed:
        if value is None:
            return Skipped("tombstone")
        fmt = self.settings.input_format
        if fmt != "json":
            if avro_json.is_avro(value):
                value = self._from_avro(topic, value, is_key=False)
                if key is not None and avro_json.is_avro(key):
                    key = self._from_avro(topic, key, is_key=True)
            elif fmt == "avro":
                raise BadInput(
                    "value is not in the Confluent Avro wire format (its first byte is not 0) "
                    "but input.format is avro"
                )
        payload, shapes = self._value(value)
        if not isinstance(payload, dict):
            raise BadInput("value is not a JSON object (not a Debezium envelope)")
        op = payload.get("op")
        if op == "i" or op == "r":  # Debezium's Cassandra connector: insert, range delete
            try:
                op = cells.debezium_op(op, payload)
            except cells.CellError as exc:
                raise BadInput(str(exc)) from None
        if op not in OPS:
            raise BadInput(
                f"not a Debezium envelope: op is {op!r}"
                if "op" in payload
                else "not a Debezium envelope: no 'op' field"
            )
        if op == "m":
            return Skipped("message")
        source = payload.get("source")
        if not isinstance(source, dict):
            raise BadInput("not a Debezium envelope: 'source' is missing or not an object")
        rules = self.settings.ordering
        connector = "custom" if rules.custom_fields else detect_connector(source)
        snapshot = is_snapshot(source, op)
        native = native_position(source, rules, envelope=payload, connector=connector)
        for part in native:
            if not INT64_MIN <= part <= INT64_MAX:
                raise BadInput(f"ordering position {native} does not fit in 64-bit integers")
        pos = position_key(native, phase_of_snapshot(source, snapshot), offset, rules)
        layout = self._layouts.get(connector)
        if layout is None:
            layout = self._layouts[connector] = rules.layout(connector)
        table = self._table_name(topic, source)
        source_ts, ts, tx = _meta(payload, source)
        position = native_position_text(source, connector)
        # a truncate and a Cassandra range delete change no row: no image, no row shape
        if op == "t":
            meta = (pos, source_ts, ts, tx, snapshot, position)
            return _no_row(topic, partition, offset, table, op, meta, "truncate", layout)
        key_payload, key_schema = self._key(key)
        if op == "d" and cells.is_cassandra(source, connector):
            after = payload.get("after")
            if isinstance(after, dict) and ranges.is_range_delete(after):  # WHERE ck > x
                after_shape = shapes[0] if shapes is not None else None
                meta = (pos, source_ts, ts, tx, snapshot, position)
                bare = _no_row(topic, partition, offset, table, op, meta, "range", layout)
                try:
                    bare.range = ranges.parse(
                        after,
                        key_payload,
                        after_shape.normalizers if after_shape else {},
                        after_shape.types if after_shape else {},
                    )
                except (ranges.RangeError, KeyError, TypeError, ValueError) as exc:
                    raise BadInput(f"Cassandra range delete: {exc}") from None
                bare.key, bare.key_fields = key_payload, tuple(key_payload)
                return bare
        image = payload.get("before") if op == "d" else payload.get("after")
        after_shape, before_shape = shapes if shapes is not None else (None, None)
        known: RowShape | None = before_shape if op == "d" else after_shape
        if known is None and op == "d" and cells.is_cassandra(source, connector):
            known = after_shape  # Debezium's Cassandra envelope has no 'before'
        patch = None
        if image is None and op == "u":  # MongoDB: a patch, or the 1.2 shape's replacement
            try:
                update = documents.update_of(payload)
            except documents.PatchError as exc:
                raise BadInput(str(exc)) from None
            if update is not None:
                image = update[1] if update[0] == "document" else ""
                patch = [(pos, update[1])] if update[0] == "patch" else None
        if isinstance(image, str):  # MongoDB: the document as extended-JSON text
            image = {"document": image if patch is None else None}
            known = _mongo_shape(key_schema, key_payload) if shapes is not None else None
        if image is None:
            if op != "d":
                raise BadInput(f"op={op} event without 'after'")
            image = {}
        if not isinstance(image, dict):
            raise BadInput(f"'{'before' if op == 'd' else 'after'}' is not an object")
        unset = _NONE
        removed: dict[str, Any] | None = None
        if cells.is_cassandra(source, connector):  # cell structs to plain values (cells.py)
            try:
                image, unset, removed = cells.unwrap(image, key_payload, op)
            except cells.CellError as exc:
                raise BadInput(str(exc)) from None
        shape = (
            known
            if known is not None
            else _infer_shape(image, key_payload, self.settings.placeholders)
        )
        for name in key_payload:
            if name not in shape.types:
                raise BadInput(
                    f"key field {name!r} is not a column of the row "
                    f"(row columns: {', '.join(shape.columns)})"
                )
        row = dict(image)
        row.update(key_payload)
        unavailable = _NONE
        if op != "d" and shape.placeholder_forms:
            found = [
                col
                for col, forms in shape.placeholder_forms.items()
                if col in row and row[col] in forms
            ]
            if found:
                unavailable = frozenset(found)
        unavailable |= unset
        if patch is not None:
            unavailable = frozenset({"document"})  # completed from the stored document
        if removed:
            removed = _removed_forms(removed, shape)
        for col, fn in shape.normalizers.items():
            if row.get(col) is not None and col not in unavailable:
                row[col] = fn(row[col])
            if removed and col in removed:
                removed[col] = fn(removed[col])
        return Change(
            topic,
            partition,
            offset,
            table,
            op,
            key_payload,
            tuple(key_payload),
            row,
            unavailable,
            pos,
            source_ts,
            ts,
            tx,
            snapshot,
            position,
            shape,
            layout,
            patch=patch,
            removed=removed,
        )

    def _from_avro(self, topic: str, raw: bytes, *, is_key: bool) -> bytes:
        if not self.settings.registry.url:
            raise BadInput(avro_json.describe_missing_registry(raw, is_key=is_key))
        try:
            return avro_json.decoder(self.settings.registry).to_json(topic, raw, is_key=is_key)
        except avro_json.AvroInputError as exc:
            raise BadInput(str(exc)) from None

    def _value(self, raw: bytes) -> tuple[Any, tuple[RowShape | None, RowShape | None] | None]:
        mode = self.settings.schemas
        if self._exact:
            doc = json.loads(raw, parse_float=st.ExactNumber)
        else:
            if mode != "false":
                known = _after_known_head(raw, self._shapes)
                if known is not None:
                    return known
            try:
                doc = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise BadInput(f"value is not valid JSON: {exc}") from None
        if isinstance(doc, dict) and set(doc) == {"schema", "payload"} and mode != "false":
            shapes = self._shapes_of(doc["schema"])
            _remember_head(raw, doc["schema"], self._shapes, shapes)
            return doc["payload"], shapes
        if mode == "true":
            raise BadInput("value has no {schema, payload} wrapper but schemas=true")
        return doc, None

    def _shapes_of(self, schema: Any) -> tuple[RowShape | None, RowShape | None]:
        if not isinstance(schema, dict) or schema.get("type") != "struct":
            raise BadInput("value schema is not a struct (not a Debezium envelope)")
        fields = {f.get("field"): f for f in schema.get("fields", []) if isinstance(f, dict)}
        after, before = fields.get("after"), fields.get("before")
        plain = cells.is_cassandra_source_schema(fields.get("source"))
        return (
            self._shape(after, plain) if isinstance(after, dict) else None,
            self._shape(before, plain) if isinstance(before, dict) else None,
        )

    def _shape(self, schema: dict[str, Any], plain: bool = False) -> RowShape | None:
        if schema.get("type") == "string":
            return None  # MongoDB's JSON-text documents; shaped from the key later
        if schema.get("type") != "struct":
            raise BadInput("'after' schema is not a struct")
        types: dict[str, Any] = {}
        norms: dict[str, st.Normalizer] = {}
        forms: dict[str, tuple[Any, ...]] = {}
        for f in schema.get("fields", []):
            if plain:  # Cassandra: a cell struct's column is its value's type (cells.py)
                column = cells.plain_field(f)
                if column is None:
                    continue
                f = column
            name = f.get("field")
            if not isinstance(name, str):
                raise BadInput("row schema has a field without a name")
            types[name] = st.spark_type(f)
            fn = st.normalizer(f)
            if plain and fn is not None and f.get("name") == cells.DEBEZIUM_DATE:
                fn = _then(cells.raw_date, fn)
            if fn is not None:
                norms[name] = fn
            pf = st.placeholder_forms(f, self.settings.placeholders)
            if pf:
                forms[name] = pf
        digest = hashlib.sha1(orjson.dumps(types)).hexdigest()[:16]
        return RowShape(tuple(types), types, norms, forms, digest)

    def _key(self, raw: bytes | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
        if raw is None:
            raise BadInput("the Kafka key is null: the primary key of the row is unknown")
        if self._exact:
            doc = json.loads(raw, parse_float=st.ExactNumber)
        else:
            known = _after_known_head(raw, self._key_schemas)
            if known is not None and isinstance(known[0], dict) and known[0]:
                return known  # anything else: the full parse below says what is wrong
            try:
                doc = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise BadInput(f"key is not valid JSON: {exc}") from None
        schema = None
        if isinstance(doc, dict) and set(doc) == {"schema", "payload"}:
            schema, doc = doc["schema"], doc["payload"]
            if isinstance(schema, dict):
                _remember_head(raw, schema, self._key_schemas, schema)
        if not isinstance(doc, dict) or not doc:
            raise BadInput("key is not a JSON object with the primary key columns")
        return doc, schema if isinstance(schema, dict) else None

    def _table_name(self, topic: str, source: Mapping[str, Any]) -> str:
        name = self._tables.get(topic)
        if name is not None:
            return name
        overrides = dict(self.settings.tables)
        if topic in overrides:
            return overrides[topic]
        template = self.settings.table_name
        text = template.format(
            topic=topic,
            server=source.get("name") or "",
            db=source.get("db") or source.get("keyspace") or "",
            schema=source.get("schema") or "",
            table=source.get("table") or source.get("collection") or "",
        )
        name = _SANITIZE.sub("_", text).strip("_") or "_"
        if "{db}" not in template and "{schema}" not in template and "{table}" not in template:
            self._tables[topic] = name  # depends on the topic only: cache it
        return name


def _no_row(
    topic: str,
    partition: int,
    offset: int,
    table: str,
    op: str,
    meta: tuple[Any, ...],
    kind: str,
    layout: str,
) -> Change:
    """A change of no row (a truncate, a Cassandra range delete): no image, an empty shape;
    ``meta``: position, source and event times, transaction id, snapshot flag, position text."""
    pos, source_ts, ts, tx, snapshot, position = meta
    shape = RowShape((), {}, {}, {}, kind)
    return Change(
        topic, partition, offset, table, op, None, (), {}, _NONE, pos, source_ts, ts, tx,
        snapshot, position, shape, layout,
    )  # fmt: skip


def _meta(
    payload: Mapping[str, Any], source: Mapping[str, Any]
) -> tuple[int | None, int | None, str | None]:
    """The change's source time, envelope time and transaction id (a plain tuple: this runs
    once per record)."""
    tx: Any = None
    block = payload.get("transaction")
    if block is not None and isinstance(block, Mapping):
        tx = block.get("id")
    if tx is None:
        get = source.get
        for name in ("txId", "gtid", "commit_lsn"):
            value = get(name)
            if value is not None and value != "":
                tx = value
                break
    source_ts, ts = source.get("ts_ms"), payload.get("ts_ms")
    return (
        source_ts if type(source_ts) is int else _opt_int(source_ts),
        ts if type(ts) is int else _opt_int(ts),
        None if tx is None else str(tx),
    )


def _key_change_headers(change: Change, headers: Headers) -> None:
    """Reads the other key of a primary-key change from Debezium's headers (JSON text of the
    key, with or without the converter's schema wrapper)."""
    wanted = OLD_KEY_HEADER if change.op == "c" else NEW_KEY_HEADER if change.op == "d" else None
    if wanted is None:
        return
    for name, raw in headers:
        if name != wanted or raw is None:
            continue
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise BadInput(
                f"header {name} is not the JSON text of a key (the connector's header.converter "
                "must write it as JSON, as Debezium's and tidemark's do)"
            ) from None
        if isinstance(doc, dict) and set(doc) == {"schema", "payload"}:
            doc = doc["payload"]
        if not isinstance(doc, dict) or not doc:
            raise BadInput(f"header {name} is not a JSON object with the key columns")
        if change.op == "c":
            change.old_key = key_json(doc)
        else:
            change.new_key = key_json(doc)


def _opt_int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float):
        return int(value)
    return None


def _infer_shape(
    image: Mapping[str, Any], key: Mapping[str, Any], placeholders: tuple[str, ...]
) -> RowShape:
    """Schemaless JSON: the columns of this one image, types inferred from its values (None for
    nulls: unknown until a value shows up). Any column may carry the placeholder text."""
    names = list(image)
    names += [k for k in key if k not in image]
    forms = (*placeholders, *([p] for p in placeholders))
    types: dict[str, Any] = {}
    for n in names:
        value = key[n] if n in key else image.get(n)
        types[n] = None if value in forms else st.infer_type(value)
    digest = hashlib.sha1("\x00".join(names).encode()).hexdigest()[:16]
    return RowShape(tuple(names), types, {}, dict.fromkeys(names, forms), digest, inferred=True)


def _removed_forms(removed: dict[str, list[Any]], shape: RowShape) -> dict[str, Any] | None:
    """The removed elements of Cassandra deltas in their column's form (deltas.py); only for
    columns the row schema holds as a set (array) or map."""
    out = {}
    for col, gone in removed.items():
        t = shape.types.get(col)
        if isinstance(t, dict) and t.get("type") in ("array", "map"):
            out[col] = deltas.removed_form(gone, t["type"] == "map")
    return out or None


def _then(first: st.Normalizer, then: st.Normalizer) -> st.Normalizer:
    return lambda v: then(first(v))


def _mongo_shape(key_schema: Mapping[str, Any] | None, key: Mapping[str, Any]) -> RowShape:
    types: dict[str, Any] = {}
    if key_schema is not None:
        for f in key_schema.get("fields", []):
            if isinstance(f, dict) and isinstance(f.get("field"), str):
                types[f["field"]] = st.spark_type(f)
    for name, value in key.items():
        types.setdefault(name, st.infer_type(value) or "string")
    types["document"] = "string"
    digest = hashlib.sha1(orjson.dumps(types)).hexdigest()[:16]
    return RowShape(tuple(types), types, {}, {}, digest)


_DESCRIPTORS: dict[tuple[str, str, tuple[str, ...]], str] = {}


def descriptor_id(table: str, shape: RowShape, key_fields: tuple[str, ...]) -> str:
    """Identifies (table, row schema, key columns): the unit of schema checks."""
    k = (table, shape.digest, key_fields)
    did = _DESCRIPTORS.get(k)
    if did is None:
        if len(_DESCRIPTORS) > 4096:
            _DESCRIPTORS.clear()
        text = "\x00".join([table, shape.digest, *key_fields])
        did = _DESCRIPTORS[k] = hashlib.sha1(text.encode()).hexdigest()[:16]
    return did
