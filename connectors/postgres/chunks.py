"""PostgreSQL's side of incremental snapshots (:class:`cdc.spi.ChunkReader`).

Rows are read as the initial snapshot reads them (every value its text form, the text the
stream carries: :func:`~connectors.postgres.snapshot_rows.text_rows`), so the
table's converters need nothing new, and key values are that same text: they go back into
the next chunk's query as untyped literals, which PostgreSQL reads with the key column's
type, and into the offset as plain strings. Each statement runs in its own autocommit
transaction on a connection of its own: the open watermark commits before the chunk's
snapshot is taken, and the close watermark after it. With ``snapshot.max.threads`` > 1 each
reader thread of :mod:`cdc.snapshot.incremental_parallel` gets a :meth:`fork` (a connection of
its own), and :meth:`chunk_end` places the ranges with a keys-only ``LIMIT 1 OFFSET`` query.

With ``read.only=true`` nothing is written: :meth:`begin_chunk_read` opens a ``REPEATABLE
READ`` transaction whose first statement takes its snapshot and reads
``pg_current_snapshot()`` (which transactions the chunk's rows include) with
``pg_current_wal_insert_lsn()``; the chunk's ``SELECT`` runs in that same snapshot;
:meth:`end_chunk_read` commits and reads both again (the high watermark).
:class:`PgReadWindow` then places streamed events: a transaction visible to the read is older
than it, anything else de-duplicates the chunk; the window closes at the first event of a
transaction the high snapshot did not see, or at a stream position (a row's completed-up-to
LSN, a keepalive, a heartbeat) at or past the high LSN: every transaction the read could have
seen has then been streamed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cdc.config import Config
from cdc.errors import FatalError
from cdc.spi import Table, TableId
from cdc.spi.chunks import Key
from connectors.postgres import connection as pgconn
from connectors.postgres.schema import PgSchema
from connectors.postgres.snapshot_rows import text_rows
from connectors.postgres.types import TypeRegistry


class PostgresChunkReader:
    def __init__(self, cfg: Config, registry: TypeRegistry) -> None:
        self.cfg = cfg
        self.registry = registry
        self._conn: Any = None
        self._low: tuple[PgSnapshot, int] | None = None
        #: readers of one table's chunks at once (``snapshot.max.threads``)
        self.max_threads = int(cfg.get("snapshot.max.threads") or 1)
        #: a commit record can precede, in the WAL, the transaction's leaving the running set:
        #: parallel reads are placed by :meth:`begin_chunk_read` and checked by the core
        self.commit_visibility_lag = True

    def fork(self) -> PostgresChunkReader:
        return PostgresChunkReader(self.cfg, self.registry)

    @property
    def conn(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = pgconn.connect(self.cfg)
        return self._conn

    def tables(self) -> list[TableId]:
        return [t for t, _ in pgconn.list_tables(self.conn, self.cfg["database.dbname"])]

    def describe(self, table_id: TableId) -> Table | None:
        oid = pgconn.table_oid(self.conn, table_id)
        if oid is None:
            return None
        return PgSchema(self.conn, self.cfg["database.dbname"], self.registry).load(table_id, oid)

    def max_key(
        self, table: Table, key_columns: Sequence[str], condition: str | None
    ) -> Key | None:
        # NULLs sort first in a descending order: the largest key would be NULL, which no
        # chunk's range reaches (the table read as empty). Rows whose chunk key is NULL (a
        # nullable surrogate-key) are not read, as in Debezium.
        not_null: list[sql.Composable] = [
            sql.SQL("{} IS NOT NULL").format(sql.Identifier(k)) for k in key_columns
        ]
        query = sql.SQL("SELECT {} FROM {}{} ORDER BY {} LIMIT 1").format(
            _columns(key_columns),
            _ident(table.id),
            _where(not_null, condition),
            sql.SQL(", ").join(sql.SQL("{} DESC").format(sql.Identifier(k)) for k in key_columns),
        )
        rows = text_rows(self.conn, query)
        return tuple(rows[0]) if rows else None

    def read_chunk(
        self,
        table: Table,
        key_columns: Sequence[str],
        after: Key | None,
        upto: Key,
        limit: int,
        condition: str | None,
    ) -> list[Sequence[Any]]:
        # The columns by name, as the table is registered: ``*`` would give a column added or
        # dropped since (before the stream's next change of the table brings its new
        # relation) and shift every later value into the wrong field; by name, a dropped one
        # is an error instead, an added one comes with the next chunk read after the change.
        query = sql.SQL("SELECT {} FROM {}{} ORDER BY {} LIMIT {}").format(
            _columns(table.column_names()),
            _ident(table.id),
            _where(_range(key_columns, after, upto), condition),
            _columns(key_columns),
            sql.Literal(limit),
        )
        return list(text_rows(self.conn, query))

    def chunk_end(
        self,
        table: Table,
        key_columns: Sequence[str],
        after: Key | None,
        upto: Key,
        size: int,
        condition: str | None,
    ) -> Key | None:
        query = sql.SQL("SELECT {} FROM {}{} ORDER BY {} LIMIT 1 OFFSET {}").format(
            _columns(key_columns),
            _ident(table.id),
            _where(_range(key_columns, after, upto), condition),
            _columns(key_columns),
            sql.Literal(max(size - 1, 0)),
        )
        rows = text_rows(self.conn, query)
        return tuple(rows[0]) if rows else None

    def estimate_rows(self, table: Table) -> int | None:
        row = self.conn.execute(
            "SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass",
            (_ident(table.id).as_string(self.conn),),
        ).fetchone()
        return max(int(row[0]), 0) if row else None

    def write_watermark(self, signal_table: TableId, signal_id: str, kind: str) -> None:
        self.conn.execute(
            sql.SQL("INSERT INTO {} (id, type, data) VALUES (%s, %s, NULL)").format(
                _ident(signal_table)
            ),
            (signal_id, kind),
        )

    def begin_chunk_read(self) -> None:
        conn = self.conn
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        # the first statement takes the transaction's snapshot: the chunk's SELECT sees
        # exactly what pg_current_snapshot() describes here
        try:
            self._low = _watermark(conn)
        except psycopg.errors.UndefinedFunction as exc:
            conn.execute("ROLLBACK")
            raise FatalError(
                "read.only=true needs PostgreSQL 13 or later (pg_current_snapshot()); set "
                f"read.only=false to write watermark rows instead ({exc})"
            ) from exc

    def end_chunk_read(self) -> PgReadWindow:
        conn = self.conn
        conn.execute("COMMIT")
        low, self._low = self._low, None
        assert low is not None, "end_chunk_read without begin_chunk_read"
        high = _watermark(conn)
        return PgReadWindow(low[0], high[0], high[1])

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _ident(table_id: TableId) -> sql.Identifier:
    return sql.Identifier(table_id.schema or "public", table_id.table)


def _columns(names: Sequence[str]) -> sql.Composable:
    return sql.SQL(", ").join(sql.Identifier(n) for n in names)


def _row(values: Sequence[Any]) -> sql.Composable:
    return sql.SQL("({})").format(sql.SQL(", ").join(sql.Literal(v) for v in values))


def _range(key_columns: Sequence[str], after: Key | None, upto: Key) -> list[sql.Composable]:
    """``after < key <= upto`` (no lower bound when ``after`` is None)."""
    keys = sql.SQL("({})").format(_columns(key_columns))
    bounds: list[sql.Composable] = []
    if after is not None:
        bounds.append(sql.SQL("{} > {}").format(keys, _row(after)))
    bounds.append(sql.SQL("{} <= {}").format(keys, _row(upto)))
    return bounds


def _where(bounds: list[sql.Composable], condition: str | None) -> sql.Composable:
    parts = list(bounds)
    if condition:
        parts.append(sql.SQL("({})").format(sql.SQL(condition)))
    if not parts:
        return sql.SQL("")
    return sql.SQL(" WHERE ") + sql.SQL(" AND ").join(parts)


@dataclass(frozen=True)
class PgSnapshot:
    """``pg_current_snapshot()``: transactions below ``xmin`` had ended, those from ``xmax``
    on had not started, those in ``xip`` were running; 64-bit (epoch-qualified) ids."""

    xmin: int
    xmax: int
    xip: frozenset[int]

    @classmethod
    def parse(cls, text: str) -> PgSnapshot:
        xmin, xmax, xip = text.split(":")
        return cls(int(xmin), int(xmax), frozenset(int(x) for x in xip.split(",") if x))

    def visible(self, xid: int) -> bool:
        """Whether a committed transaction's changes are in this snapshot."""
        return xid < self.xmin or (xid < self.xmax and xid not in self.xip)

    def widen(self, xid32: int) -> int:
        """The 64-bit id of a 32-bit transaction id from the stream (pgoutput carries 32
        bits), taken as the one nearest to this snapshot's ``xmax``."""
        full = (self.xmax & ~0xFFFFFFFF) | (xid32 & 0xFFFFFFFF)
        if full > self.xmax + 0x80000000:
            full -= 1 << 32
        elif full < self.xmax - 0x80000000:
            full += 1 << 32
        return full


@dataclass(frozen=True)
class PgReadWindow:
    """A chunk's read-only window (:class:`cdc.spi.chunks.ReadWindow`)."""

    low: PgSnapshot
    high: PgSnapshot
    #: ``pg_current_wal_insert_lsn()`` after the read: every transaction the high snapshot
    #: sees committed before it
    high_lsn: int

    def older(
        self, source: Mapping[str, Any], offset: Mapping[str, Any], transaction_id: str | None
    ) -> bool | None:
        xid = _xid(offset, transaction_id)
        return None if xid is None else self.low.visible(self.low.widen(xid))

    def passed(
        self, source: Mapping[str, Any], offset: Mapping[str, Any], transaction_id: str | None
    ) -> bool:
        done = offset.get("flush_lsn")
        if isinstance(done, int) and done >= self.high_lsn:
            return True
        lsn = offset.get("lsn")
        if offset.get("complete") and isinstance(lsn, int) and lsn >= self.high_lsn:
            return True  # a keepalive or heartbeat past the read
        xid = _xid(offset, transaction_id)
        return xid is not None and not self.high.visible(self.high.widen(xid))


def _xid(offset: Mapping[str, Any], transaction_id: str | None) -> int | None:
    xid = offset.get("txId")
    if isinstance(xid, int) and xid > 0:
        return xid
    if transaction_id and transaction_id.isdigit():
        return int(transaction_id)
    return None


def _watermark(conn: Any) -> tuple[PgSnapshot, int]:
    row = conn.execute(
        "SELECT pg_current_snapshot()::text, (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint"
    ).fetchone()
    return PgSnapshot.parse(row[0]), int(row[1])
