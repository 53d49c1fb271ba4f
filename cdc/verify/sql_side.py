"""A source side for SQL databases: the chunk queries, built from a connector's dialect.

A connector supplies a :class:`Dialect` (how its SQL quotes a name, writes the canonical text
of a column, an MD5 and a hex-to-integer conversion, and how to run a query) and the table
descriptions; :class:`SqlSourceSide` builds the three queries of the contract from them:

* boundaries: every N-th key, numbered with ``row_number() OVER (ORDER BY key)``;
* checksum: ``count(*)`` and ``sum(<60-bit hash of the row text>)`` over ``lo < key <= hi``;
* row hashes: key texts and the MD5 of the row text, for a chunk that differs.

Tables with a column of a kind in :data:`~cdc.verify.canonical.PYTHON_KINDS` have their
checksum computed from the row hashes in Python (the rows of each chunk are pulled).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from cdc.verify.canonical import (
    ORDERABLE_KEY_KINDS,
    PYTHON_KINDS,
    ColumnSpec,
    KeyTexts,
    TableSpec,
    from_python,
    md5_hex_to_hash,
    row_hash,
)
from cdc.verify.contract import Boundary, Checksum


class Dialect(ABC):
    """What differs between databases. Expressions are SQL text over quoted column names."""

    placeholder = "%s"

    @abstractmethod
    def quote(self, name: str) -> str: ...

    @abstractmethod
    def table_ref(self, spec: TableSpec) -> str: ...

    @abstractmethod
    def canonical(self, col: ColumnSpec, ref: str) -> str:
        """The canonical text of the column (see cdc.verify.canonical), NULL for NULL."""

    def raw(self, col: ColumnSpec, ref: str) -> str:
        """The column as selected for a kind canonicalised in Python (PYTHON_KINDS)."""
        return ref

    @abstractmethod
    def text_order(self, ref: str) -> str:
        """The column as text that compares in code-point order (for text keys)."""

    @abstractmethod
    def length(self, expr: str) -> str: ...

    @abstractmethod
    def concat(self, exprs: Sequence[str]) -> str: ...

    @abstractmethod
    def md5(self, expr: str) -> str: ...

    @abstractmethod
    def hash60(self, md5_expr: str) -> str:
        """The first 15 hex digits of an MD5 as an integer."""

    @abstractmethod
    def query(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]: ...

    @abstractmethod
    def close(self) -> None: ...


class SqlSourceSide:
    def __init__(self, dialect: Dialect, specs: Sequence[TableSpec]) -> None:
        self.d = dialect
        self._specs = list(specs)

    def tables(self, selected: Sequence[str]) -> list[TableSpec]:
        if not selected:
            return list(self._specs)
        by_name = {s.identifier: s for s in self._specs}
        return [by_name[name] for name in selected]

    def close(self) -> None:
        self.d.close()

    # -- expressions ---------------------------------------------------------------------

    def _ref(self, col: ColumnSpec) -> str:
        return self.d.quote(col.name)

    def _order_expr(self, col: ColumnSpec) -> str:
        ref = self._ref(col)
        return self.d.text_order(ref) if col.kind == "text" else ref

    def _orderable(self, spec: TableSpec) -> bool:
        return all(c.kind in ORDERABLE_KEY_KINDS for c in spec.key_columns)

    def _row_text(self, spec: TableSpec) -> str:
        parts = []
        for col in spec.columns:
            e = self.d.canonical(col, self._ref(col))
            prefixed = self.d.concat([self.d.length(e), "':'", e])
            parts.append(f"COALESCE({prefixed}, '~')")
        return self.d.concat(parts)

    def _where(
        self, spec: TableSpec, lo: Boundary | None, hi: Boundary | None
    ) -> tuple[str, list[Any]]:
        if not self._orderable(spec):
            return "", []
        cols = [self._order_expr(c) for c in spec.key_columns]
        ph = ", ".join(self.d.placeholder for _ in cols)
        lhs = cols[0] if len(cols) == 1 else f"({', '.join(cols)})"
        rhs = ph if len(cols) == 1 else f"({ph})"
        conds: list[str] = []
        params: list[Any] = []
        if lo is not None:
            conds.append(f"{lhs} > {rhs}")
            params.extend(lo.raw)
        if hi is not None:
            conds.append(f"{lhs} <= {rhs}")
            params.extend(hi.raw)
        return (" WHERE " + " AND ".join(conds)) if conds else "", params

    # -- the contract ----------------------------------------------------------------------

    def boundaries(self, spec: TableSpec, chunk_rows: int) -> list[Boundary]:
        if not self._orderable(spec):
            return []
        keys = spec.key_columns
        order = [self._order_expr(c) for c in keys]
        inner = ", ".join(
            [f"{o} AS k{i}" for i, o in enumerate(order)]
            + [f"{self.d.canonical(c, self._ref(c))} AS c{i}" for i, c in enumerate(keys)]
        )
        outer = ", ".join([f"k{i}" for i in range(len(keys))] + [f"c{i}" for i in range(len(keys))])
        sql = (
            f"SELECT {outer} FROM (SELECT {inner}, row_number() OVER (ORDER BY "
            f"{', '.join(order)}) AS rn FROM {self.d.table_ref(spec)}) s "
            f"WHERE MOD(rn, {int(chunk_rows)}) = 0 ORDER BY rn"
        )
        n = len(keys)
        return [Boundary(tuple(r[:n]), tuple(str(v) for v in r[n:])) for r in self.d.query(sql, [])]

    def checksum(self, spec: TableSpec, lo: Boundary | None, hi: Boundary | None) -> Checksum:
        if spec.needs_python:
            hashes = self.row_hashes(spec, lo, hi)
            return Checksum(len(hashes), sum(hashes.values()))
        where, params = self._where(spec, lo, hi)
        h = self.d.hash60(self.d.md5(self._row_text(spec)))
        sql = f"SELECT count(*), COALESCE(sum({h}), 0) FROM {self.d.table_ref(spec)}{where}"
        rows, total = self.d.query(sql, params)[0]
        return Checksum(int(rows), int(total))

    def row_hashes(
        self, spec: TableSpec, lo: Boundary | None, hi: Boundary | None
    ) -> dict[KeyTexts, int]:
        where, params = self._where(spec, lo, hi)
        keys = spec.key_columns
        key_exprs = [self._canonical_or_raw(c) for c in keys]
        table = self.d.table_ref(spec)
        if not spec.needs_python:
            md5 = self.d.md5(self._row_text(spec))
            sql = f"SELECT {', '.join(key_exprs)}, {md5} FROM {table}{where}"
            return {
                self._key(keys, r[:-1]): md5_hex_to_hash(str(r[-1]))
                for r in self.d.query(sql, params)
            }
        cols = [self._canonical_or_raw(c) for c in spec.columns]
        sql = f"SELECT {', '.join(key_exprs + cols)} FROM {table}{where}"
        out: dict[KeyTexts, int] = {}
        n = len(keys)
        for r in self.d.query(sql, params):
            texts = [
                from_python(c, v) if c.kind in PYTHON_KINDS else (None if v is None else str(v))
                for c, v in zip(spec.columns, r[n:], strict=True)
            ]
            out[self._key(keys, r[:n])] = row_hash(texts)
        return out

    def _canonical_or_raw(self, col: ColumnSpec) -> str:
        ref = self._ref(col)
        return self.d.raw(col, ref) if col.kind in PYTHON_KINDS else self.d.canonical(col, ref)

    @staticmethod
    def _key(keys: Sequence[ColumnSpec], values: Sequence[Any]) -> KeyTexts:
        return tuple(
            (from_python(c, v) if c.kind in PYTHON_KINDS else str(v)) or ""
            for c, v in zip(keys, values, strict=True)
        )
