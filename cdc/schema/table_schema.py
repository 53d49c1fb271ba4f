"""From a relational ``Table`` to key/value schemas and fast row → struct functions.

Built once per table version. The row functions are generated as straight-line Python (one
dict literal per row) because this is the innermost loop of every connector: no per-column
loop, no per-row lookups, NULL handled inline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdc import compiled
from cdc.column_mappers import ColumnMappers, KeyColumns
from cdc.filters import ColumnFilter, column_matches, compile_patterns
from cdc.schema.model import STRING, ZERO_VALUES, Schema, Type, struct
from cdc.spi import Column, Table, TableId, ValueConverter, ValueConverterProvider
from cdc.spi.events import UNAVAILABLE
from cdc.topics import TopicNamer, sanitize_field_name

RowFn = Callable[[Sequence[Any]], dict[str, Any]]
KeyFn = Callable[[Sequence[Any]], dict[str, Any] | None]


@dataclass
class TableSchema:
    table_id: TableId
    key_schema: Schema | None
    value_schema: Schema
    key_from_row: KeyFn
    value_from_row: RowFn
    #: for rows flagged ``partial``: substitutes the unavailable-value placeholder
    value_from_partial_row: RowFn
    key_columns: list[str]
    envelope_schema: Schema | None = None
    topic: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: a document table (``Table.extra["flat_envelope"]``): the value's fields are the
    #: envelope's own fields (no ``before``/``after`` structs) and the key is not in the value
    flat: bool = False


@dataclass(frozen=True)
class _Col:
    field_name: str
    index: int
    schema: Schema
    fn: ValueConverter | None
    placeholder: Any


def _placeholder_for(schema: Schema, text: str) -> Any:
    if schema.type is Type.STRING:
        return text
    if schema.type is Type.BYTES:
        return text.encode()
    if schema.type is Type.ARRAY and schema.value_schema is not None:
        inner = _placeholder_for(schema.value_schema, text)
        return None if inner is None else [inner]
    return None


def _fallback(schema: Schema) -> Any:
    """What a NULL becomes in a required field: the schema default, else the type's zero
    value (Debezium's rule; it happens for key-only ``before`` images of NOT NULL columns)."""
    if schema.default is not None:
        return schema.default
    if schema.name == "org.apache.kafka.connect.data.Decimal":
        import decimal

        return decimal.Decimal(0)
    if schema.type is Type.STRUCT:
        return {
            f.name: _fallback(f.schema) if not f.schema.optional else None for f in schema.fields
        }
    return ZERO_VALUES.get(schema.type)


_rowfn_c = compiled.load("cdc.schema._rowfn_c")


def _native_row_fn(cols: list[_Col]) -> RowFn | None:
    """The compiled twin of ``_generated_row_fn`` (``cdc/schema/_rowfn_c.c``): the same plan
    (field, index, what NULL becomes, converter), plus the kind of a converter whose common
    case it does without a Python call."""
    if _rowfn_c is None:
        return None
    plan: list[tuple[str, int, Any, Any, int, Any]] = []
    for c in cols:
        null = None if c.schema.optional else _fallback(c.schema)
        if c.fn is None:
            plan.append((c.field_name, c.index, null, None, 0, None))
            continue
        kind, arg = compiled.native_kind(c.fn) or (1, None)
        plan.append((c.field_name, c.index, null, c.fn, kind, arg))
    builder: RowFn = _rowfn_c.RowBuilder(tuple(plan))
    return builder


def _compile_row_fn(cols: list[_Col], name: str) -> tuple[RowFn, RowFn]:
    """``lambda row: {"a": conv(row[0]) ..., ...}`` for the given columns (compiled when
    the extension is there, else generated Python), and a slower twin for rows that contain
    UNAVAILABLE values."""
    fast = _native_row_fn(cols) or _generated_row_fn(cols, name)
    placeholders = {c.field_name: c.placeholder for c in cols}
    index_of = {c.field_name: c.index for c in cols}

    def with_unavailable(row: Sequence[Any]) -> dict[str, Any]:
        patched = [None if v is UNAVAILABLE else v for v in row]
        out = fast(patched)
        for fname, idx in index_of.items():
            if row[idx] is UNAVAILABLE:
                out[fname] = placeholders[fname]
        return out

    return fast, with_unavailable


def _generated_row_fn(cols: list[_Col], name: str) -> RowFn:
    """The row function as one generated dict display: the reference of the compiled one."""
    ns: dict[str, Any] = {}
    items = []
    for i, c in enumerate(cols):
        null = "None"
        if not c.schema.optional:
            ns[f"f{i}"] = _fallback(c.schema)
            null = f"f{i}"
        if c.fn is None and null == "None":
            value = f"row[{c.index}]"
        elif c.fn is None:
            value = f"{null} if (v{i} := row[{c.index}]) is None else v{i}"
        else:
            ns[f"c{i}"] = c.fn
            value = f"{null} if (v{i} := row[{c.index}]) is None else c{i}(v{i})"
        items.append(f"{c.field_name!r}: {value}")
    src = f"def {name}(row):\n    return {{{', '.join(items)}}}\n"
    exec(compile(src, f"<tidemark:{name}>", "exec"), ns)
    fn: RowFn = ns[name]
    return fn


class TableSchemaBuilder:
    def __init__(
        self,
        provider: ValueConverterProvider,
        namer: TopicNamer,
        *,
        column_filter: ColumnFilter | None = None,
        mappers: ColumnMappers | None = None,
        key_columns: KeyColumns | None = None,
        sanitize_field_names: bool | Callable[[str], str] = False,
        propagate_source_type: Sequence[str] = (),
        propagate_source_datatype: Sequence[str] = (),
        debezium_3: bool = False,
        unavailable_placeholder: str = "__debezium_unavailable_value",
    ) -> None:
        self.provider = provider
        self.namer = namer
        self.column_filter = column_filter or ColumnFilter()
        self.mappers = mappers
        self.key_columns = key_columns
        #: the field name of a column (Avro's name rules, or the name as it is)
        self.field_name: Callable[[str], str] | None = (
            sanitize_field_name if sanitize_field_names is True else sanitize_field_names or None
        )
        self.sanitize = self.field_name is not None
        self.propagate = compile_patterns(propagate_source_type)
        self.propagate_datatype = compile_patterns(propagate_source_datatype)
        #: Debezium 3.x's extra schema parameters (``envelope.version=3``)
        self.debezium_3 = debezium_3
        self.placeholder = unavailable_placeholder

    def _column(self, table: Table, col: Column) -> _Col | None:
        schema = self.provider.schema_for(table, col)
        if schema is None:
            return None
        fn = self.provider.converter_for(table, col)
        if self.mappers is not None:
            mapper = self.mappers.for_column(table.id, col)
            if mapper is not None:
                if self.mappers.changes_to_string(table.id, col):
                    schema = STRING
                fn = mapper if fn is None else _compose(fn, mapper)
                if self.debezium_3:
                    added = self.mappers.parameters(table.id, col)
                    if added:
                        schema = schema.with_(parameters={**(schema.parameters or {}), **added})
        # the type name, length and scale Debezium reports (a connector may know them
        # better than its catalog's own names: PostgreSQL's JDBC type names and sizes)
        source_type = getattr(self.provider, "source_type", None)
        type_name, length, scale = (
            source_type(table, col) if source_type else (col.type_name, col.length, col.scale)
        )
        if (self.propagate and column_matches(self.propagate, table.id, col.name)) or (
            # Debezium matches datatype.propagate.source.type against <table id>.<type name>
            self.propagate_datatype and column_matches(self.propagate_datatype, table.id, type_name)
        ):
            params = dict(schema.parameters or {})
            params["__debezium.source.column.type"] = type_name.upper()
            if length is not None:
                params["__debezium.source.column.length"] = str(length)
            if scale is not None:
                params["__debezium.source.column.scale"] = str(scale)
            if self.debezium_3:
                params["__debezium.source.column.name"] = col.name
            schema = schema.with_(parameters=params)
        schema = schema.with_(optional=col.optional)
        if col.has_default and col.default is not None:
            try:
                default = fn(col.default) if fn is not None else col.default
                schema = schema.with_(default=default)
            except Exception:
                pass
        name = self.field_name(col.name) if self.field_name is not None else col.name
        placeholder = _placeholder_for(schema, self.placeholder)
        # a connector may know better forms (PostgreSQL: hstore, arrays of numbers)
        custom = getattr(self.provider, "unavailable_placeholder", None)
        if custom is not None:
            placeholder = custom(table, col, schema, self.placeholder, placeholder)
        return _Col(name, col.position, schema, fn, placeholder)

    def build(self, table: Table) -> TableSchema:
        tid = table.id
        names = table.column_names()
        key_names = None
        if self.key_columns is not None:
            key_names = self.key_columns.for_table(tid, names)
        if not key_names:
            key_names = list(table.primary_key)
        value_cols: list[_Col] = []
        all_cols: dict[str, _Col] = {}
        flat = bool(table.extra.get("flat_envelope"))
        for col in table.columns:
            built = self._column(table, col)
            if built is None:
                continue
            all_cols[col.name] = built
            if flat and col.name in key_names:
                continue
            if self.column_filter.is_included(tid, col.name):
                value_cols.append(built)
        value_schema = struct(
            [(c.field_name, c.schema) for c in value_cols],
            name=self.namer.schema_name(tid, "Value"),
            optional=True,
        )
        # ASCII only: "¼".isalnum() is true, yet it is no identifier character
        ident = "".join(ch if ch.isascii() and ch.isalnum() else "_" for ch in tid.identifier)
        value_fn, partial_fn = _compile_row_fn(value_cols, f"value_{ident}")
        key_cols = [all_cols[n] for n in key_names if n in all_cols]
        if key_cols:
            key_schema: Schema | None = struct(
                [(c.field_name, _without_source_type(c.schema)) for c in key_cols],
                name=self.namer.schema_name(tid, "Key"),
            )
            key_fn: KeyFn = _compile_row_fn(key_cols, f"key_{ident}")[0]
        else:
            key_schema = None
            key_fn = _no_key
        out = TableSchema(
            tid, key_schema, value_schema, key_fn, value_fn, partial_fn, key_names, flat=flat
        )
        if "data_collection" in table.extra:  # the name in transaction metadata, if not tid's
            out.extra["data_collection"] = table.extra["data_collection"]
        return out


def _no_key(row: Sequence[Any]) -> None:
    return None


def _compose(first: ValueConverter, second: Callable[[Any], Any]) -> ValueConverter:
    return lambda v: second(first(v))


_SOURCE_TYPE_PREFIX = "__debezium.source.column."


def _without_source_type(schema: Schema) -> Schema:
    """A key field's schema: Debezium propagates the source type to value fields only."""
    params = schema.parameters
    if not params or not any(k.startswith(_SOURCE_TYPE_PREFIX) for k in params):
        return schema
    kept = {k: v for k, v in params.items() if not k.startswith(_SOURCE_TYPE_PREFIX)}
    return schema.with_(parameters=kept or None)
