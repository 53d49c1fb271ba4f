"""PostgreSQL's side of incremental snapshots (:class:`cdc.spi.ChunkReader`).

Rows are read as the initial snapshot reads them (``COPY`` text through
:func:`~connectors.postgres.connection.copy_rows`, the text the stream carries), so the
table's converters need nothing new, and key values are that same text: they go back into
the next chunk's query as untyped literals, which PostgreSQL reads with the key column's
type, and into the offset as plain strings. Each statement runs in its own autocommit
transaction on a connection of its own: the open watermark commits before the chunk's
snapshot is taken, and the close watermark after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql

from cdc.config import Config
from cdc.spi import Table, TableId
from cdc.spi.chunks import Key
from connectors.postgres import connection as pgconn
from connectors.postgres.schema import PgSchema
from connectors.postgres.types import TypeRegistry


class PostgresChunkReader:
    def __init__(self, cfg: Config, registry: TypeRegistry) -> None:
        self.cfg = cfg
        self.registry = registry
        self._conn: Any = None

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
        query = sql.SQL("SELECT {} FROM {}{} ORDER BY {} LIMIT 1").format(
            _columns(key_columns),
            _ident(table.id),
            _where([], condition),
            sql.SQL(", ").join(sql.SQL("{} DESC").format(sql.Identifier(k)) for k in key_columns),
        )
        rows = list(pgconn.copy_rows(self.conn, query, len(key_columns)))
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
        keys = sql.SQL("({})").format(_columns(key_columns))
        bounds: list[sql.Composable] = []
        if after is not None:
            bounds.append(sql.SQL("{} > {}").format(keys, _row(after)))
        bounds.append(sql.SQL("{} <= {}").format(keys, _row(upto)))
        query = sql.SQL("SELECT * FROM {}{} ORDER BY {} LIMIT {}").format(
            _ident(table.id), _where(bounds, condition), _columns(key_columns), sql.Literal(limit)
        )
        return list(pgconn.copy_rows(self.conn, query, len(table.columns)))

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


def _where(bounds: list[sql.Composable], condition: str | None) -> sql.Composable:
    parts = list(bounds)
    if condition:
        parts.append(sql.SQL("({})").format(sql.SQL(condition)))
    if not parts:
        return sql.SQL("")
    return sql.SQL(" WHERE ") + sql.SQL(" AND ").join(parts)
