"""Mutations as Cassandra 4.0/5.0 write them into the commit log (messaging versions 12/13).

A mutation holds one partition update per table of one keyspace; each update names its table
by id, then carries the partition key, the columns present (by name), an optional partition
deletion, an optional static row, then rows and range tombstone markers. Rows carry the
clustering values, a liveness timestamp (INSERT), a row deletion, and one cell per column
(several for a non-frozen collection). Decoding a value needs its type, so every partition
update is decoded with the table schema in force (:class:`TableDef`).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cdc.errors import ConnectorError
from connectors.cassandra.cqltypes import CqlType, CqlTypeError, decode_value, map_key
from connectors.cassandra.rowcodec import (
    DELETION_TIME_EPOCH,
    TIMESTAMP_EPOCH,
    compile_partition,
)
from connectors.cassandra.tabledef import ColumnDef, TableDef
from connectors.cassandra.vint import read_unsigned_vint

_SIGN = 1 << 63
_MASK64 = (1 << 64) - 1

# partition flags (UnfilteredRowIteratorSerializer)
_IS_EMPTY = 0x01
_HAS_PARTITION_DELETION = 0x04
_HAS_STATIC_ROW = 0x08
_HAS_ROW_ESTIMATE = 0x10
# row flags (UnfilteredSerializer)
_END_OF_PARTITION = 0x01
_IS_MARKER = 0x02
_HAS_TIMESTAMP = 0x04
_HAS_TTL = 0x08
_HAS_DELETION = 0x10
_HAS_ALL_COLUMNS = 0x20
_HAS_COMPLEX_DELETION = 0x40
_EXTENSION_FLAG = 0x80
_IS_STATIC = 0x01
# cell flags (Cell.Serializer)
_CELL_DELETED = 0x01
_CELL_EXPIRING = 0x02
_CELL_EMPTY_VALUE = 0x04
_CELL_ROW_TIMESTAMP = 0x08
_CELL_ROW_TTL = 0x10
#: what each range tombstone marker kind (ClusteringPrefix.Kind ordinal) is, as the row kinds
#: a marker yields, in order: a boundary closes the range before it and opens the next
MARKER_KINDS: dict[int, tuple[str, ...]] = {
    0: ("range_end_excl",),
    1: ("range_start_incl",),
    2: ("range_end_excl", "range_start_incl"),
    5: ("range_end_incl", "range_start_excl"),
    6: ("range_end_incl",),
    7: ("range_start_excl",),
}


class MutationError(ValueError):
    """The mutation cannot be decoded; ``offset`` is the byte within the mutation."""

    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(f"{reason} (byte {offset} of the mutation)")
        self.reason = reason
        self.offset = offset


class UnknownTable(MutationError):
    def __init__(self, table_id: uuid.UUID, offset: int) -> None:
        super().__init__(f"mutation for an unknown table id {table_id}", offset)
        self.table_id = table_id


#: One column of a row as the event shows it: ``(value, deletion_ts, set)``: the value (None
#: for a deleted cell), ``deletion_ts`` (microseconds: when a tombstone was written or when a
#: TTL expires; None otherwise) and ``set`` (the column was written by this mutation, always
#: True here). A plain tuple, read by unpacking: one is built per cell, and a named tuple
#: costs four times as much to build (0.12 µs against 0.03). A non-frozen set or map written
#: by element has a fourth member, the elements or keys it removed (:func:`_complex`).
CellValue = tuple[Any, int | None, bool] | tuple[Any, int | None, bool, list[Any] | None]


#: One row (or a whole partition) changed by a partition update: ``(table, kind,
#: partition_key, clustering, cells, timestamp, static)``. ``kind``: ``insert`` (the row has
#: a liveness timestamp: an INSERT), ``update`` (cells only), ``row_delete``,
#: ``partition_delete``; ``clustering`` is None for a partition delete and for the static
#: row; ``cells`` by column name; ``timestamp`` the newest write timestamp in the row
#: (microseconds); ``static`` True for the static row. A plain tuple, read by unpacking, as
#: :data:`CellValue`: one is built per row. A range tombstone marker (a range delete's
#: bound, in clustering order) is one too: ``kind`` one of :data:`MARKER_KINDS`' names,
#: ``clustering`` the bound's prefix (shorter than the clustering key; empty: unbounded),
#: ``cells`` empty and ``timestamp`` the deletion's write timestamp.
RowChange = tuple[TableDef, str, list[Any], list[Any] | None, dict[str, CellValue], int, bool]
#: The rows one mutation changed in one partition of a table: ``(table, rows,
#: range_tombstones)``, the last being the number of range tombstone markers among the rows.
#: A plain tuple, one per mutation.
PartitionUpdate = tuple[TableDef, list[RowChange], int]


SchemaLookup = Callable[[uuid.UUID], TableDef | None]
#: table definitions by the 16 bytes of their id as the commit log spells them: the usual
#: entry finds its table without building and hashing a ``uuid.UUID`` (a miss asks the
#: :data:`SchemaLookup`); see :func:`~connectors.cassandra.tabledef.tables_by_raw_id`
RawTables = Mapping[bytes, TableDef]


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        b = self.data[self.pos]
        self.pos += 1
        return b

    def vint(self) -> int:
        pos = self.pos
        b = self.data[pos]
        if b < 0x80:  # one byte: most deltas, lengths and counts
            self.pos = pos + 1
            return b
        v, self.pos = read_unsigned_vint(self.data, pos)
        return v

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise IndexError("read past the end of the mutation")
        b = self.data[self.pos : end]
        self.pos = end
        return b

    def vbytes(self) -> bytes:
        n = self.vint()
        pos = self.pos
        end = pos + n
        if end > len(self.data):
            raise IndexError("read past the end of the mutation")
        self.pos = end
        return self.data[pos:end]

    def value(self, t: CqlType) -> bytes:
        n = t.fixed_length
        return self.take(n) if n >= 0 else self.vbytes()


@dataclass(slots=True)
class _Header:
    min_ts: int
    min_ldt: int
    min_ttl: int
    statics: list[ColumnDef]
    regulars: list[ColumnDef]

    def ts(self, r: _Reader) -> int:
        # a 64-bit delta that wraps (a live deletion time is Long.MIN_VALUE)
        return ((r.vint() + self.min_ts + _SIGN) & _MASK64) - _SIGN

    def ldt(self, r: _Reader) -> int:
        return r.vint() + self.min_ldt

    def ttl(self, r: _Reader) -> int:
        return r.vint() + self.min_ttl


_UUIDS: dict[bytes, uuid.UUID] = {}


def decode_mutation(
    data: bytes, lookup: SchemaLookup, tables: RawTables | None = None
) -> list[PartitionUpdate]:
    """Decode one commit log entry. Raises :class:`UnknownTable` when ``lookup`` does not know
    a table id and :class:`MutationError` for bytes that do not decode. ``tables`` (by raw
    id) is asked first when given; it must agree with ``lookup``.

    The fast path (compiled row readers, :mod:`connectors.cassandra.rowcodec`) decodes the
    common shapes; on any error the entry is decoded again by the generic decoder, which
    raises the error with its byte offset (or, should the fast path ever be wrong, decodes
    it right)."""
    try:
        if data[0] == 1:  # one partition update, of a table met before: the usual entry
            table = tables.get(data[1:17]) if tables is not None else None
            if table is None:
                table_id = _UUIDS.get(data[1:17])
                table = lookup(table_id) if table_id is not None else None
            fn = table.compiled.get("partition") if table is not None else None
            if fn is not None:
                got = fn(data, 17)
                if got is not None:
                    return [got[0]]
        return _decode_fast(data, lookup, tables)
    except ConnectorError:
        raise  # from the schema lookup (a node that does not answer): not the bytes
    except Exception:  # the generic decoder says what is wrong
        return decode_mutation_generic(data, lookup)


def decode_mutation_generic(data: bytes, lookup: SchemaLookup) -> list[PartitionUpdate]:
    """The reference decoder: every flag and cell interpreted as it comes (no compiled
    readers); :func:`decode_mutation` must return exactly what this returns."""
    r = _Reader(data)
    try:
        count = r.vint()
        return [_partition(r, lookup) for _ in range(count)]
    except MutationError:
        raise
    except (IndexError, struct.error) as exc:
        raise MutationError(f"truncated mutation: {exc}", r.pos) from exc
    except (CqlTypeError, UnicodeDecodeError, ValueError) as exc:
        raise MutationError(f"undecodable value: {exc}", r.pos) from exc


def _table(raw_id: bytes, lookup: SchemaLookup, at: int) -> TableDef:
    table_id = _UUIDS.get(raw_id)
    if table_id is None:
        table_id = _UUIDS.setdefault(raw_id, uuid.UUID(bytes=raw_id))
    table = lookup(table_id)
    if table is None:
        raise UnknownTable(table_id, at)
    if table.id is not table_id and table.id == table_id:
        _UUIDS[raw_id] = table.id  # the lookup's own key: its dict finds it by identity
    return table


def _partition(r: _Reader, lookup: SchemaLookup) -> PartitionUpdate:
    at = r.pos
    table = _table(r.take(16), lookup, at)
    key = _partition_key(table, r.vbytes())
    flags = r.byte()
    rows: list[RowChange] = []
    markers = 0
    if flags & _IS_EMPTY:
        return (table, rows, 0)
    min_ts = r.vint() + TIMESTAMP_EPOCH
    min_ldt = r.vint() + DELETION_TIME_EPOCH
    min_ttl = r.vint()
    statics = _columns(r, table) if flags & _HAS_STATIC_ROW else []
    regulars = _columns(r, table)
    h = _Header(min_ts, min_ldt, min_ttl, statics, regulars)
    if flags & _HAS_PARTITION_DELETION:
        ts = h.ts(r)
        ldt = h.ldt(r)
        rows.append((table, "partition_delete", key, None, {}, ts, False))
        _ = ldt
    if flags & _HAS_STATIC_ROW:
        row_flags = r.byte()
        ext = r.byte() if row_flags & _EXTENSION_FLAG else 0
        row = _row(r, h, table, key, row_flags, ext)
        if row is not None:
            rows.append(row)
    if flags & _HAS_ROW_ESTIMATE:
        r.vint()
    while True:
        row_flags = r.byte()
        if row_flags & _END_OF_PARTITION:
            break
        if row_flags & _IS_MARKER:
            _marker(r, h, table, key, rows)
            markers += 1
            continue
        ext = r.byte() if row_flags & _EXTENSION_FLAG else 0
        row = _row(r, h, table, key, row_flags, ext)
        if row is not None:
            rows.append(row)
    return (table, rows, markers)


# -- the fast path ------------------------------------------------------------------------

_HELPERS: dict[str, Any] = {}


def _decode_fast(
    data: bytes, lookup: SchemaLookup, tables: RawTables | None
) -> list[PartitionUpdate]:
    """Each partition read by its table's compiled reader (compiled on first sight of the
    table definition, kept on it), or the generic way where that reader declines."""
    count = data[0]
    if count < 0x80:
        pos = 1
    else:
        count, pos = read_unsigned_vint(data, 0)
    out = []
    for _ in range(count):
        raw_id = data[pos : pos + 16]
        known = tables.get(raw_id) if tables is not None else None
        table = known if known is not None else _table(raw_id, lookup, pos)
        fn = table.compiled.get("partition")
        if fn is None:
            fn = table.compiled["partition"] = compile_partition(table, _helpers())
        got = fn(data, pos + 16)
        if got is None:
            r = _Reader(data)
            r.pos = pos
            out.append(_partition(r, lookup))
            pos = r.pos
        else:
            update, pos = got
            out.append(update)
    return out


def _helpers() -> dict[str, Any]:
    if not _HELPERS:
        _HELPERS.update(
            _Reader=_Reader,
            _Header=_Header,
            _clustering_values=_clustering_values,
            _cell=_cell,
            _complex=_complex,
            _partition_key=_partition_key,
            _generic_row=_generic_row,
            _generic_body=_generic_body,
            _columns_at=_columns_at,
            _vint=read_unsigned_vint,
        )
    return _HELPERS


def _columns_at(data: bytes, pos: int, table: TableDef) -> tuple[list[ColumnDef], int]:
    r = _Reader(data)
    r.pos = pos
    cols = _columns(r, table)
    return cols, r.pos


def _generic_row(
    data: bytes,
    pos: int,
    flags: int,
    table: TableDef,
    rows: list[RowChange],
    key: list[Any],
    min_ts: int,
    min_ldt: int,
    min_ttl: int,
    cols: list[ColumnDef],
) -> tuple[int, int]:
    """One row (appended to ``rows``) or range tombstone marker of a partition without a
    static row, read the generic way: the position after it, and 1 for a marker."""
    r = _Reader(data)
    r.pos = pos
    h = _Header(min_ts, min_ldt, min_ttl, [], cols)
    if flags & _IS_MARKER:
        _marker(r, h, table, key, rows)
        return r.pos, 1
    ext = r.byte() if flags & _EXTENSION_FLAG else 0
    row = _row(r, h, table, key, flags, ext)
    if row is not None:
        rows.append(row)
    return r.pos, 0


def _generic_body(table: TableDef, cols: list[ColumnDef]) -> Callable[..., Any]:
    """The rest of a partition, every row read the generic way (a table with more column
    sets than :data:`MAX_SHAPES` or too long a clustering prefix for the compiled rows)."""

    def body(
        data: bytes, pos: int, flags: int, key: list[Any], min_ts: int, min_ldt: int, min_ttl: int
    ) -> tuple[PartitionUpdate, int]:
        rows: list[RowChange] = []
        markers = 0
        if flags & _HAS_PARTITION_DELETION:
            v, pos = read_unsigned_vint(data, pos)
            ts = ((v + min_ts + _SIGN) & _MASK64) - _SIGN
            _, pos = read_unsigned_vint(data, pos)  # the local deletion time
            rows.append((table, "partition_delete", key, None, {}, ts, False))
        if flags & _HAS_ROW_ESTIMATE:
            _, pos = read_unsigned_vint(data, pos)
        header = (table, rows, key, min_ts, min_ldt, min_ttl, cols)
        while True:
            row_flags = data[pos]
            pos += 1
            if row_flags & _END_OF_PARTITION:
                return (table, rows, markers), pos
            pos, marker = _generic_row(data, pos, row_flags, *header)
            markers += marker

    return body


def _partition_key(table: TableDef, raw: bytes) -> list[Any]:
    cols = table.partition_key
    if len(cols) == 1:
        return [cols[0].decode(raw)]
    # CompositeType: per component a 2-byte length, the bytes, an end-of-component byte.
    out: list[Any] = []
    pos = 0
    for c in cols:
        (n,) = struct.unpack_from(">H", raw, pos)
        out.append(c.decode(raw[pos + 2 : pos + 2 + n]))
        pos += 2 + n + 1
    return out


def _columns(r: _Reader, table: TableDef) -> list[ColumnDef]:
    n = r.vint()
    out = []
    by_raw = table.by_raw_name
    for _ in range(n):
        at = r.pos
        raw = r.vbytes()
        col = by_raw.get(raw)
        if col is None:
            name = raw.decode("utf-8", "replace")
            raise MutationError(
                f"column {name!r} is not in the schema of {table.qualified} (dropped?)", at
            )
        out.append(col)
    return out


def _subset(r: _Reader, superset: list[ColumnDef]) -> list[ColumnDef]:
    encoded = r.vint()
    if encoded == 0:
        return superset
    n = len(superset)
    if n < 64:
        return [c for i, c in enumerate(superset) if not (encoded >> i) & 1]
    present_count = n - encoded
    if present_count < n // 2:
        return [superset[r.vint()] for _ in range(present_count)]
    missing = {r.vint() for _ in range(encoded)}
    return [c for i, c in enumerate(superset) if i not in missing]


def _clustering_values(r: _Reader, cols: list[ColumnDef], size: int) -> list[Any]:
    values: list[Any] = []
    offset = 0
    while offset < size:
        header = r.vint()
        limit = min(size, offset + 32)
        while offset < limit:
            shift = (offset % 32) * 2
            if header & (1 << (shift + 1)):
                values.append(None)
            else:
                col = cols[offset]
                if header & (1 << shift):
                    values.append(col.decode(b""))
                else:
                    n = col.fixed
                    values.append(col.decode(r.take(n) if n >= 0 else r.vbytes()))
            offset += 1
    return values


def _marker(r: _Reader, h: _Header, table: TableDef, key: list[Any], rows: list[RowChange]) -> None:
    """A range tombstone marker, appended to ``rows`` as one row per bound it holds (a
    boundary closes a range and opens the next, each with its own deletion time)."""
    at = r.pos
    kind = r.byte()
    names = MARKER_KINDS.get(kind)
    if names is None:
        raise MutationError(f"range tombstone marker of unknown kind {kind}", at)
    (size,) = struct.unpack(">H", r.take(2))
    prefix = _clustering_values(r, table.clustering, size)
    for name in names:
        ts = h.ts(r)
        h.ldt(r)
        rows.append((table, name, key, prefix, {}, ts, False))


def _row(
    r: _Reader, h: _Header, table: TableDef, key: list[Any], flags: int, ext: int
) -> RowChange | None:
    static = bool(ext & _IS_STATIC)
    clustering = None
    if not static:
        ccols = table.clustering
        clustering = _clustering_values(r, ccols, len(ccols))
    row_ts: int | None = None
    row_ttl = 0
    row_ldt = 0
    newest = 0
    deleted = False
    if flags & _HAS_TIMESTAMP:
        row_ts = h.ts(r)
        newest = row_ts
    if flags & _HAS_TTL:
        row_ttl = h.ttl(r)
        row_ldt = h.ldt(r)
    if flags & _HAS_DELETION:
        del_ts = h.ts(r)
        h.ldt(r)
        newest = max(newest, del_ts)
        deleted = True
    superset = h.statics if static else h.regulars
    cols = superset if flags & _HAS_ALL_COLUMNS else _subset(r, superset)
    cells: dict[str, CellValue] = {}
    for col in cols:
        if col.type.multi_cell:
            cell, ts = _complex(r, h, col, flags & _HAS_COMPLEX_DELETION, row_ts, row_ttl, row_ldt)
        else:
            cell, ts = _cell(r, h, col, col.type, row_ts, row_ttl, row_ldt, complex_=False)
        newest = max(newest, ts)
        cells[col.name] = cell
    kind = "row_delete" if deleted else ("insert" if row_ts is not None else "update")
    return (table, kind, key, clustering, cells, newest, static)


def _cell(
    r: _Reader,
    h: _Header,
    col: ColumnDef,
    t: CqlType,
    row_ts: int | None,
    row_ttl: int,
    row_ldt: int,
    *,
    complex_: bool,
) -> tuple[CellValue, int]:
    # the innermost loop: the reader's state in locals, one-byte vints inline
    data = r.data
    pos = r.pos
    flags = data[pos]
    pos += 1
    if flags & _CELL_ROW_TIMESTAMP:
        if row_ts is None:
            raise MutationError(f"cell of {col.name!r} uses a missing row timestamp", pos)
        ts = row_ts
    else:
        v = data[pos]
        if v < 0x80:
            pos += 1
        else:
            v, pos = read_unsigned_vint(data, pos)
        ts = ((v + h.min_ts + _SIGN) & _MASK64) - _SIGN
    ldt: int | None = None
    if flags & _CELL_ROW_TTL:
        ldt = row_ldt
    elif flags & (_CELL_DELETED | _CELL_EXPIRING):
        v, pos = read_unsigned_vint(data, pos)
        ldt = v + h.min_ldt
    if flags & _CELL_EXPIRING and not flags & _CELL_ROW_TTL:
        _, pos = read_unsigned_vint(data, pos)  # the TTL itself
    path = None
    if complex_:
        n, pos = read_unsigned_vint(data, pos)
        path = data[pos : pos + n]
        pos += n
    if flags & _CELL_EMPTY_VALUE:
        raw = b""
    else:
        n = col.fixed if not complex_ else -1
        if n < 0:
            n = data[pos]
            if n < 0x80:
                pos += 1
            else:
                n, pos = read_unsigned_vint(data, pos)
        raw = data[pos : pos + n]
        pos += n
        if pos > len(data):
            raise IndexError("read past the end of the mutation")
    r.pos = pos
    deletion_ts = ldt * 1_000_000 if ldt is not None else None
    if flags & _CELL_DELETED:
        value: Any = path
    elif complex_:
        value = (path, raw)
    else:
        value = col.decode(raw)
    return (value, deletion_ts, True), ts


def _complex(
    r: _Reader,
    h: _Header,
    col: ColumnDef,
    has_deletion: int,
    row_ts: int | None,
    row_ttl: int,
    row_ldt: int,
) -> tuple[CellValue, int]:
    """A non-frozen collection: an optional whole-collection deletion (an overwrite or a
    delete of the column), then one cell per element written or removed. The value lists the
    elements this mutation wrote (a set's or list's new elements, a map's new entries).

    A set or map written by element (no whole-collection deletion: ``s = s + {...}``,
    ``s = s - {...}``, ``m['k'] = v``, ``DELETE m['k']``) is a *delta* of the stored
    collection, so its cell has a fourth member: the elements (set) or keys (map) it removed,
    an empty list for a pure addition; None for a whole write. Without it a consumer cannot
    tell an addition from an overwrite, nor see a removal at all. A list's elements are
    addressed by a hidden cell path (a timeuuid), not by value, so its removals are not
    expressible this way and a list keeps three members."""
    deletion_ts: int | None = None
    newest = 0
    if has_deletion:
        dts = h.ts(r)
        ldt = h.ldt(r)
        newest = dts
        if dts != -_SIGN:
            deletion_ts = ldt * 1_000_000
    n = r.vint()
    t = col.type
    elems: list[tuple[bytes, bytes]] = []
    gone: list[bytes] = []
    for _ in range(n):
        cell, ts = _cell(r, h, col, t, row_ts, row_ttl, row_ldt, complex_=True)
        newest = max(newest, ts)
        if isinstance(cell[0], tuple):
            elems.append(cell[0])
        elif cell[0] is not None:
            gone.append(cell[0])
    value: Any
    if t.name == "map":
        key = t.params[0]
        value = {map_key(decode_value(key, k)): decode_value(t.params[1], v) for k, v in elems}
    elif t.name == "set":
        value = [decode_value(t.params[0], k) for k, _ in elems]
    else:
        value = [decode_value(t.params[0], v) for _, v in elems]
    if not elems and deletion_ts is not None:
        value = None
    if t.name == "list":
        return (value, deletion_ts, True), newest
    removed = None
    if deletion_ts is None:
        removed = [decode_value(t.params[0], k) for k in gone]
        if t.name == "map":
            removed = [map_key(k) for k in removed]
    return (value, deletion_ts, True, removed), newest
