"""Partition readers compiled once per table and column set: the commit log reader's fast
path.

The generic decoder (:mod:`connectors.cassandra.mutation`) dispatches on every flag and every
column type per cell, through a reader object; most of its time is that interpretation, not
the bytes. The column types come from the table schema, and a partition update names the
columns it carries once (the header's column set), so the work per row is known in advance.
This module writes Python source for one table (the partition key and header) and for each
column set met (the rows loop), with the reader's state in locals, each value read by its
type's own code (``struct`` unpacking straight from the mutation for fixed-width numbers, a
slice and ``decode`` for text) and one-byte vints inline. A column set is recognised by its
bytes (``startswith`` at the position: the encoding is prefix-free).

Only the common shapes are compiled: a partition without a static row; rows with all the
header's columns (``HAS_ALL_COLUMNS``), with or without a row timestamp, and no TTL, row
deletion, complex deletion or extension flags; cells that are plain writes (the row's
timestamp or their own). Anything else (a deleted or expiring cell, a collection, a
clustering prefix with nulls, a range tombstone marker) is handed to the generic functions
given in ``helpers``, which stay the reference. The caller re-decodes the whole mutation
with the generic decoder on any error, so errors (and their byte offsets) are the generic
decoder's.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from connectors.cassandra.tabledef import ColumnDef, TableDef
from connectors.cassandra.vint import VINT_EXTRA, VINT_MASK

#: a compiled partition reader: (data, position after the table id) -> (PartitionUpdate,
#: position after the partition), or None for a partition to read the generic way
PartitionFn = Callable[[bytes, int], tuple[Any, int] | None]
#: column sets (header shapes) compiled per table; past it, rows are read the generic way
MAX_SHAPES = 32
# EncodingStats epochs: 2015-09-22T00:00:00Z in microseconds and seconds.
TIMESTAMP_EPOCH = 1442880000 * 1_000_000
DELETION_TIME_EPOCH = 1442880000

#: row flags the compiled readers take: HAS_ALL_COLUMNS, with or without HAS_TIMESTAMP
FAST_ROW_FLAGS = (0x20, 0x24)

# fixed-width types read with struct straight from the mutation (no slice)
_UNPACK = {
    "int": struct.Struct(">i"),
    "bigint": struct.Struct(">q"),
    "double": struct.Struct(">d"),
    "float": struct.Struct(">f"),
    "timestamp": struct.Struct(">q"),
}
# types whose value decoder is ``bytes.decode`` (UTF-8), empty values included
_TEXT = frozenset({"text", "varchar"})
#: clustering prefixes longer than one header vint (32 columns) take the generic path
_MAX_FAST_CLUSTERING = 32


def _value(lines: list[str], ind: str, col: ColumnDef, var: str, dec: str) -> None:
    """Lines reading one value of ``col`` at ``pos`` into ``var``, ``pos`` moved past it.
    A short slice is caught by the caller's end check (or its decoder's error)."""
    name = col.type.name
    n = col.fixed
    if n >= 0 and name in _UNPACK:
        lines.append(f"{ind}{var} = _U_{name}(data, pos)[0]")
        lines.append(f"{ind}pos += {n}")
    elif n >= 0:
        lines.append(f"{ind}{var} = {dec}(data[pos:pos + {n}])")
        lines.append(f"{ind}pos += {n}")
    else:
        lines.append(f"{ind}n = data[pos]")
        lines.append(f"{ind}if n < 128:")
        lines.append(f"{ind}    pos += 1")
        lines.append(f"{ind}else:")
        lines.append(f"{ind}    n, pos = _vint(data, pos)")
        lines.append(f"{ind}e = pos + n")
        if name in _TEXT:
            lines.append(f"{ind}{var} = data[pos:e].decode()")
        else:
            lines.append(f"{ind}{var} = {dec}(data[pos:e])")
        lines.append(f"{ind}pos = e")


def _vint_ts(lines: list[str], ind: str, at: str, var: str) -> None:
    """A timestamp delta vint at ``at`` as a 64-bit wrapped timestamp in ``var`` (the sum
    is never negative: it wraps only from 2^63 up)."""
    lines.append(f"{ind}v = data[{at}]")
    lines.append(f"{ind}if v < 128:")
    lines.append(f"{ind}    pos = {at} + 1")
    lines.append(f"{ind}else:")
    lines.append(f"{ind}    v, pos = _vint(data, {at})")
    lines.append(f"{ind}{var} = v + min_ts")
    lines.append(f"{ind}if {var} >= {1 << 63}:")
    lines.append(f"{ind}    {var} = (({var} + {1 << 63}) & {(1 << 64) - 1}) - {1 << 63}")


_HEADER = "_Header(min_ts, min_ldt, min_ttl, [], [])"


def _generic_cell(L: list[str], ind: str, i: int) -> None:
    """Cell ``i`` read by the generic cell reader (deleted, expiring, empty, ...)."""
    L.append(f"{ind}r = _Reader(data)")
    L.append(f"{ind}r.pos = pos")
    L.append(
        f"{ind}c{i}, t = _cell(r, {_HEADER}, _COL{i}, _COL{i}.type, row_ts, 0, 0, complex_=False)"
    )
    L.append(f"{ind}pos = r.pos")
    L.append(f"{ind}if t > newest:")
    L.append(f"{ind}    newest = t")


def _cell_lines(L: list[str], ind: str, i: int, col: ColumnDef, insert: bool) -> None:
    """Cell ``i``: in an INSERT row a plain value with the row's timestamp (flags 0x08),
    in an UPDATE row a plain value with its own timestamp (flags 0); else generic."""
    if col.type.multi_cell:
        L.append(f"{ind}r = _Reader(data)")
        L.append(f"{ind}r.pos = pos")
        L.append(f"{ind}c{i}, t = _complex(r, {_HEADER}, _COL{i}, 0, row_ts, 0, 0)")
        L.append(f"{ind}pos = r.pos")
        L.append(f"{ind}if t > newest:")
        L.append(f"{ind}    newest = t")
        return
    if insert:
        L.append(f"{ind}if data[pos] == 8:")
        L.append(f"{ind}    pos += 1")
    else:
        L.append(f"{ind}if data[pos] == 0:")
        _vint_ts(L, ind + "    ", "pos + 1", "t")
        L.append(f"{ind}    if t > newest:")
        L.append(f"{ind}        newest = t")
    _value(L, ind + "    ", col, "x", f"_DEC{i}")
    L.append(f"{ind}    c{i} = (x, None, True)")
    L.append(f"{ind}else:")
    _generic_cell(L, ind + "    ", i)


def _runs(cols: Sequence[ColumnDef]) -> list[list[int]]:
    """Consecutive columns read by one ``struct`` call in an INSERT row (fixed-width numbers,
    each after a 0x08 flags byte), as index lists; other columns alone."""
    out: list[list[int]] = []
    after_packable = False
    for i, c in enumerate(cols):
        packable = _packable(c)
        if packable and after_packable:
            out[-1].append(i)
        else:
            out.append([i])
        after_packable = packable
    return out


def _packable(c: ColumnDef) -> bool:
    """A fixed-width number: read by ``struct`` straight from the mutation."""
    return not c.type.multi_cell and c.fixed >= 0 and c.type.name in _UNPACK


def _clustering_lines(L: list[str], ind: str, ccols: Sequence[ColumnDef]) -> None:
    if not ccols:
        L.append(f"{ind}clustering = []")
        return
    L.append(f"{ind}if data[pos] == 0:")  # one header vint: every value present, non-empty
    L.append(f"{ind}    pos += 1")
    for i, c in enumerate(ccols):
        _value(L, ind + "    ", c, f"k{i}", f"_KDEC{i}")
    L.append(f"{ind}    clustering = [{', '.join(f'k{i}' for i in range(len(ccols)))}]")
    L.append(f"{ind}else:")
    L.append(f"{ind}    r = _Reader(data)")
    L.append(f"{ind}    r.pos = pos")
    L.append(f"{ind}    clustering = _clustering_values(r, _CCOLS, {len(ccols)})")
    L.append(f"{ind}    pos = r.pos")


def _cells(
    L: list[str],
    ind: str,
    cols: Sequence[ColumnDef],
    runs: list[list[int]],
    insert: bool,
    ns: dict[str, Any],
) -> None:
    """The cells of ``runs`` (column indexes; several in a run of fixed-width numbers)."""
    for run in runs:
        if len(run) == 1:
            _cell_lines(L, ind, run[0], cols[run[0]], insert)
            continue
        # flags byte, value; flags byte, value; ...: one unpack when every flags byte is 0x08
        fmt = ">" + "".join("x" + _UNPACK[cols[i].type.name].format[1:] for i in run)
        st = struct.Struct(fmt)
        name = f"_RUN{run[0]}"
        ns[name] = st.unpack_from
        offsets = []
        at = 0
        for i in run:
            offsets.append(at)
            at += 1 + cols[i].fixed
        checks = " and ".join(f"data[pos + {o}] == 8" if o else "data[pos] == 8" for o in offsets)
        L.append(f"{ind}if pos + {st.size} <= ld and {checks}:")
        L.append(f"{ind}    {', '.join(f'x{i}' for i in run)}, = {name}(data, pos)")
        L.append(f"{ind}    pos += {st.size}")
        for i in run:
            L.append(f"{ind}    c{i} = (x{i}, None, True)")
        L.append(f"{ind}else:")
        for i in run:
            _cell_lines(L, ind + "    ", i, cols[i], insert)


def _prefix_lines(
    L: list[str], ind: str, table: TableDef, cols: Sequence[ColumnDef], ns: dict[str, Any]
) -> list[list[int]] | None:
    """An INSERT row's usual start in one ``struct`` call: the clustering values (header 0:
    all present), a one-byte row timestamp delta, the first run of fixed-width cells with
    the row's timestamp, and the flags and one-byte length of a text cell after them.
    Emits ``if fast:`` with that branch open, and returns the runs of cells left to read
    after it (None: no such prefix, nothing emitted)."""
    ccols = table.clustering
    if not all(_packable(c) for c in ccols):
        return None
    runs = _runs(cols)
    first = runs[0] if runs and _packable(cols[runs[0][0]]) else []
    rest = runs[1:] if first else runs
    text = None  # the text cell whose head the struct reads too
    if rest and not cols[rest[0][0]].type.multi_cell and cols[rest[0][0]].type.name in _TEXT:
        text = rest[0][0]
        rest = rest[1:]
    fmt = ">"
    names: list[str] = []
    if ccols:
        fmt += "B" + "".join(_UNPACK[c.type.name].format[1:] for c in ccols)
        names += ["h"] + [f"k{i}" for i in range(len(ccols))]
    fmt += "B"
    names.append("tb")
    for i in first:
        fmt += "B" + _UNPACK[cols[i].type.name].format[1:]
        names += [f"f{i}", f"x{i}"]
    checks = (["h == 0"] if ccols else []) + ["tb < 128"] + [f"f{i} == 8" for i in first]
    if text is not None:
        fmt += "BB"  # flags 0x08 (the row's timestamp), a length under 128
        names += [f"f{text}", f"n{text}"]
        checks += [f"f{text} == 8", f"n{text} < 128"]
    st = struct.Struct(fmt)
    ns["_PREFIX"] = st.unpack_from
    L.append(f"{ind}if pos + {st.size} <= ld:")
    L.append(f"{ind}    {', '.join(names)}, = _PREFIX(data, pos)")
    L.append(f"{ind}    fast = {' and '.join(checks)}")
    L.append(f"{ind}else:")
    L.append(f"{ind}    fast = False")
    L.append(f"{ind}if fast:")
    L.append(f"{ind}    pos += {st.size}")
    L.append(f"{ind}    clustering = [{', '.join(f'k{i}' for i in range(len(ccols)))}]")
    L.append(f"{ind}    row_ts = tb + min_ts")
    L.append(f"{ind}    if row_ts >= {1 << 63}:")
    L.append(f"{ind}        row_ts = ((row_ts + {1 << 63}) & {(1 << 64) - 1}) - {1 << 63}")
    L.append(f"{ind}    newest = row_ts")
    for i in first:
        L.append(f"{ind}    c{i} = (x{i}, None, True)")
    if text is not None:
        L.append(f"{ind}    e = pos + n{text}")
        L.append(f"{ind}    c{text} = (data[pos:e].decode(), None, True)")
        L.append(f"{ind}    pos = e")
    return rest


def _row_lines(
    L: list[str],
    ind: str,
    table: TableDef,
    cols: Sequence[ColumnDef],
    insert: bool,
    ns: dict[str, Any],
) -> None:
    """The rows loop's branch for a row with flags 0x24 (``insert``: HAS_ALL_COLUMNS and a
    row timestamp) or 0x20, ``pos`` after the flags; appends the row to ``rows``.
    ``ns`` receives the structs of multi-column runs."""
    runs = _runs(cols) if insert else [[i] for i in range(len(cols))]
    body = ind
    if insert:
        rest = _prefix_lines(L, ind, table, cols, ns)
        if rest is not None:
            _cells(L, ind + "    ", cols, rest, insert, ns)
            L.append(f"{ind}else:")
            body = ind + "    "
    _clustering_lines(L, body, table.clustering)
    if insert:
        _vint_ts(L, body, "pos", "row_ts")
        L.append(f"{body}newest = row_ts")
    else:
        L.append(f"{body}row_ts = None")
        L.append(f"{body}newest = 0")
    _cells(L, body, cols, runs, insert, ns)
    L.append(f"{ind}if pos > ld:")
    L.append(f"{ind}    raise IndexError('read past the end of the mutation')")
    cells = ", ".join(f"{c.name!r}: c{i}" for i, c in enumerate(cols))
    kind = "insert" if insert else "update"
    fields = f"_TABLE, {kind!r}, key, clustering, {{{cells}}}, newest, False"
    L.append(f"{ind}rows.append(({fields}))")


def _body_lines(
    L: list[str], b: str, table: TableDef, cols: Sequence[ColumnDef], ns: dict[str, Any]
) -> None:
    """The rest of a partition after its header (indented by ``b``), for ``table``
    partitions whose header names ``cols``: the partition deletion, then the rows up to the
    end of the partition, where it returns ``(update, pos)``. ``ns`` receives the structs
    the lines use."""
    L += [
        f"{b}rows = []",
        f"{b}markers = 0",
        f"{b}if flags & 4:",  # HAS_PARTITION_DELETION
        f"{b}    v, pos = _vint(data, pos)",
        f"{b}    ts = ((v + min_ts + {1 << 63}) & {(1 << 64) - 1}) - {1 << 63}",
        f"{b}    _, pos = _vint(data, pos)",  # the local deletion time
        f"{b}    fields = (_TABLE, 'partition_delete', key, None, {{}}, ts, False)",
        f"{b}    rows.append(fields)",
        f"{b}if flags & 16:",  # HAS_ROW_ESTIMATE
        f"{b}    if data[pos] < 128:",
        f"{b}        pos += 1",
        f"{b}    else:",
        f"{b}        _, pos = _vint(data, pos)",
        f"{b}while True:",
        f"{b}    rf = data[pos]",
        f"{b}    pos += 1",
        f"{b}    if rf == {FAST_ROW_FLAGS[1]}:",
    ]
    _row_lines(L, b + "        ", table, cols, True, ns)
    L.append(f"{b}    elif rf & 1:")  # END_OF_PARTITION
    L.append(f"{b}        return (_TABLE, rows, markers), pos")
    L.append(f"{b}    elif rf == {FAST_ROW_FLAGS[0]}:")
    _row_lines(L, b + "        ", table, cols, False, ns)
    L.append(f"{b}    else:")
    L.append(f"{b}        args = (_TABLE, rows, key, min_ts, min_ldt, min_ttl, _COLS)")
    L.append(f"{b}        pos, marker = _generic_row(data, pos, rf, *args)")
    L.append(f"{b}        markers += marker")


def body_source(table: TableDef, cols: Sequence[ColumnDef], ns: dict[str, Any]) -> str:
    """:func:`_body_lines` as a function of the partition's header."""
    L = ["def body(data, pos, flags, key, min_ts, min_ldt, min_ttl):", "    ld = len(data)"]
    _body_lines(L, "    ", table, cols, ns)
    return "\n".join(L) + "\n"


def partition_source(
    table: TableDef, first: tuple[bytes, Sequence[ColumnDef]] | None, ns: dict[str, Any]
) -> str:
    """A ``table`` partition after its table id: the key, the header, then the body of its
    column set (compiled on first sight, :data:`MAX_SHAPES` kept), the ``first`` column set
    met inline (no call) when the partition has no deletion time or TTL. None: the generic
    way (a static row, an empty update)."""
    pk = table.partition_key
    L = [
        "def partition(data, pos):",
        "    ld = len(data)",  # the mutation's end: every read is checked against it
        "    n = data[pos]",
        "    if n < 128:",
        "        pos += 1",
        "    else:",
        "        n, pos = _vint(data, pos)",
        "    end = pos + n",
        "    if end > ld:",
        "        raise IndexError('read past the end of the mutation')",
    ]
    name = pk[0].type.name if len(pk) == 1 else ""
    if name in _UNPACK:
        L.append(f"    if n == {pk[0].fixed}:")
        L.append(f"        key = [_U_{name}(data, pos)[0]]")
        L.append("    else:")
        L.append("        key = [_PK0(data[pos:end])]")
    elif name in _TEXT:
        L.append("    key = [data[pos:end].decode()]")
    else:
        L.append("    key = _partition_key(_TABLE, data[pos:end])")
    L += [
        "    flags = data[end]",
        "    if flags & 9:",  # IS_EMPTY, HAS_STATIC_ROW
        "        return None",
        "    min_ts = data[end + 1]",  # the partition's oldest timestamp: several bytes
        "    if min_ts < 128:",
        "        pos = end + 2",
        "    else:",
        "        x = _EXTRA[min_ts]",
        "        pos = end + 2 + x",
        "        if pos > ld:",
        "            raise IndexError('read past the end of the mutation')",
        "        min_ts = _from_bytes(data[end + 1:pos], 'big') & _MASK[x]",
        f"    min_ts += {TIMESTAMP_EPOCH}",
    ]
    if first is not None:
        # no deletion time or TTL in the partition (deltas 0, 0), then the first column set
        ns["_FIRST"] = b"\x00\x00" + first[0]
        L.append("    if data.startswith(_FIRST, pos):")
        L.append(f"        pos += {len(first[0]) + 2}")
        L.append(f"        min_ldt = {DELETION_TIME_EPOCH}")
        L.append("        min_ttl = 0")
        _body_lines(L, "        ", table, first[1], ns)
    L += [
        "    min_ldt = data[pos]",
        "    if min_ldt < 128:",
        "        pos += 1",
        "    else:",
        "        min_ldt, pos = _vint(data, pos)",
        f"    min_ldt += {DELETION_TIME_EPOCH}",
        "    min_ttl = data[pos]",
        "    if min_ttl < 128:",
        "        pos += 1",
        "    else:",
        "        min_ttl, pos = _vint(data, pos)",
        "    for block, body in _SHAPES:",
        "        if data.startswith(block, pos):",
        "            return body(data, pos + len(block), flags, key, min_ts, min_ldt, min_ttl)",
        "    body, pos = _new_shape(data, pos)",
        "    return body(data, pos, flags, key, min_ts, min_ldt, min_ttl)",
    ]
    return "\n".join(L) + "\n"


def _exec(source: str, name: str, ns: dict[str, Any]) -> Any:
    exec(compile(source, f"<{name}>", "exec"), ns)
    return ns[name.split()[0]]


def compile_partition(table: TableDef, helpers: Mapping[str, Any]) -> PartitionFn:
    """The compiled partition reader of ``table``. ``helpers``: the generic decoder's
    ``_Reader``, ``_Header``, ``_clustering_values``, ``_cell``, ``_complex``,
    ``_partition_key``, ``_generic_row`` (one row or marker the generic way, returns the
    position after it), ``_generic_body`` (a body reading every row the generic way, for
    ``cols``), ``_columns_at`` (a header column set: columns and the position after it),
    and ``_vint``.

    Once the first column set is met, a partition reader with that set's rows inline
    replaces this one as ``table.compiled["partition"]``."""
    ns: dict[str, Any] = dict(helpers)
    ns["_from_bytes"] = int.from_bytes
    ns["_EXTRA"] = VINT_EXTRA
    ns["_MASK"] = VINT_MASK
    ns["_TABLE"] = table
    ns["_CCOLS"] = table.clustering
    for name, st in _UNPACK.items():
        ns[f"_U_{name}"] = st.unpack_from
    for i, c in enumerate(table.clustering):
        ns[f"_KDEC{i}"] = c.decode
    if table.partition_key:
        ns["_PK0"] = table.partition_key[0].decode
    shapes: list[tuple[bytes, Any]] = []
    ns["_SHAPES"] = shapes

    def new_shape(data: bytes, pos: int) -> tuple[Any, int]:
        cols, end = helpers["_columns_at"](data, pos, table)
        if len(shapes) >= MAX_SHAPES or len(table.clustering) > _MAX_FAST_CLUSTERING:
            return helpers["_generic_body"](table, cols), end
        body_ns = dict(ns)
        body_ns["_COLS"] = cols
        for i, c in enumerate(cols):
            body_ns[f"_COL{i}"] = c
            body_ns[f"_DEC{i}"] = c.decode
        source = body_source(table, cols, body_ns)
        body = _exec(source, f"body of {table.qualified}", body_ns)
        block = data[pos:end]
        if not shapes:  # the first column set: inline in the partition reader from now on
            source = partition_source(table, (block, cols), body_ns)
            table.compiled["partition"] = _exec(source, f"partition of {table.qualified}", body_ns)
        shapes.append((block, body))
        return body, end

    ns["_new_shape"] = new_shape
    source = partition_source(table, None, ns)
    fn: PartitionFn = _exec(source, f"partition of {table.qualified}", ns)
    return fn
