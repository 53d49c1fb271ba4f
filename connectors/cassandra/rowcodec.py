"""Row decoders compiled once per table and column set: the commit log reader's fast path.

The generic decoder (:mod:`connectors.cassandra.mutation`) dispatches on every flag and every
column type per cell, through a reader object; most of its time is that interpretation, not
the bytes. A partition update names the columns it carries once (the header's column set),
and the column types come from the table schema, so the per-row work is known in advance: this
module writes a Python function for one (table, column set) that reads a row with the
reader's state in locals, each value read by its type's own code (``struct`` unpacking for
fixed-width numbers, a slice and ``decode`` for text) and one-byte vints inline.

Only the common shapes are compiled: a row with all the header's columns (``HAS_ALL_COLUMNS``),
with or without a row timestamp, no TTL, row deletion, complex deletion or extension flags;
cells that are plain writes (row timestamp or their own). Everything else in a row (a
deleted or expiring cell, a collection, a clustering prefix with nulls) is handed to the
generic functions given in ``helpers``, which stay the reference. The caller also checks
``pos`` against the end of the mutation and re-decodes with the generic decoder on any
error, so errors (and their byte offsets) are the generic decoder's.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from connectors.cassandra.tabledef import ColumnDef, TableDef

#: a compiled row reader: (data, pos after the row flags, row flags, partition key, min_ts,
#: min_ldt, min_ttl) -> (RowChange, position after the row)
RowFn = Callable[[bytes, int, int, list[Any], int, int, int], tuple[Any, int]]

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
    """A timestamp delta vint at ``at`` as a 64-bit wrapped timestamp in ``var``."""
    lines.append(f"{ind}v = data[{at}]")
    lines.append(f"{ind}if v < 128:")
    lines.append(f"{ind}    pos = {at} + 1")
    lines.append(f"{ind}else:")
    lines.append(f"{ind}    v, pos = _vint(data, {at})")
    lines.append(f"{ind}{var} = ((v + min_ts + {1 << 63}) & {(1 << 64) - 1}) - {1 << 63}")


def source(table: TableDef, cols: Sequence[ColumnDef]) -> str:
    """The Python source of the row reader for ``table`` rows carrying ``cols``."""
    ccols = table.clustering
    L: list[str] = ["def row(data, pos, rf, key, min_ts, min_ldt, min_ttl):"]
    if not ccols:
        L.append("    clustering = []")
    else:
        L.append("    if data[pos] == 0:")  # one header vint: every value present, non-empty
        L.append("        pos += 1")
        for i, c in enumerate(ccols):
            _value(L, "        ", c, f"k{i}", f"_KDEC{i}")
        L.append(f"        clustering = [{', '.join(f'k{i}' for i in range(len(ccols)))}]")
        L.append("    else:")
        L.append("        r = _Reader(data)")
        L.append("        r.pos = pos")
        L.append(f"        clustering = _clustering_values(r, _CCOLS, {len(ccols)})")
        L.append("        pos = r.pos")
    L.append("    if rf & 4:")
    _vint_ts(L, "        ", "pos", "row_ts")
    L.append("        newest = row_ts")
    L.append("        kind = 'insert'")
    L.append("    else:")
    L.append("        row_ts = None")
    L.append("        newest = 0")
    L.append("        kind = 'update'")
    for i, c in enumerate(cols):
        generic_args = "_Header(min_ts, min_ldt, min_ttl, [], [])"
        if c.type.multi_cell:
            L.append("    r = _Reader(data)")
            L.append("    r.pos = pos")
            L.append(f"    c{i}, t = _complex(r, {generic_args}, _COL{i}, 0, row_ts, 0, 0)")
            L.append("    pos = r.pos")
            L.append("    if t > newest:")
            L.append("        newest = t")
            continue
        L.append("    f = data[pos]")
        L.append("    if f == 8 and row_ts is not None:")  # the row's timestamp, a plain value
        L.append("        pos += 1")
        _value(L, "        ", c, "x", f"_DEC{i}")
        L.append(f"        c{i} = _CV(x, None)")
        L.append("    elif f == 0:")  # its own timestamp, a plain value
        _vint_ts(L, "        ", "pos + 1", "t")
        L.append("        if t > newest:")
        L.append("            newest = t")
        _value(L, "        ", c, "x", f"_DEC{i}")
        L.append(f"        c{i} = _CV(x, None)")
        L.append("    else:")  # deleted, expiring, empty: the generic cell reader
        L.append("        r = _Reader(data)")
        L.append("        r.pos = pos")
        L.append(
            f"        c{i}, t = _cell(r, {generic_args}, _COL{i}, _COL{i}.type, row_ts, 0, 0, "
            "complex_=False)"
        )
        L.append("        pos = r.pos")
        L.append("        if t > newest:")
        L.append("            newest = t")
    L.append("    if pos > len(data):")
    L.append("        raise IndexError('read past the end of the mutation')")
    cells = ", ".join(f"{c.name!r}: c{i}" for i, c in enumerate(cols))
    L.append(
        f"    return _RowChange(_TABLE, kind, key, clustering, {{{cells}}}, newest, False), pos"
    )
    return "\n".join(L) + "\n"


def compile_row(
    table: TableDef, cols: Sequence[ColumnDef], helpers: Mapping[str, Any]
) -> RowFn | None:
    """The compiled row reader, or None when the table's rows always take the generic path.
    ``helpers``: ``_Reader``, ``_Header``, ``_clustering_values``, ``_cell``, ``_complex``,
    ``_vint``, ``_CV`` (CellValue) and ``_RowChange`` from the generic decoder."""
    if len(table.clustering) > _MAX_FAST_CLUSTERING:
        return None
    ns: dict[str, Any] = dict(helpers)
    ns["_TABLE"] = table
    ns["_CCOLS"] = table.clustering
    for name, st in _UNPACK.items():
        ns[f"_U_{name}"] = st.unpack_from
    for i, c in enumerate(table.clustering):
        ns[f"_KDEC{i}"] = c.decode
    for i, c in enumerate(cols):
        ns[f"_COL{i}"] = c
        ns[f"_DEC{i}"] = c.decode
    code = compile(source(table, cols), f"<row reader of {table.qualified}>", "exec")
    exec(code, ns)
    fn: RowFn = ns["row"]
    return fn
