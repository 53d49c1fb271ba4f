"""MySQL/MariaDB's side of incremental snapshots (:class:`cdc.spi.ChunkReader`).

Rows are read as the initial snapshot reads them (the same session settings, ``SELECT``
with FLOAT widened to DOUBLE, TIMESTAMP values marked as snapshot values), so the table's
converters treat them alike; key values are the driver's values and go back as query
parameters. The connector learns table structure from its schema history, not from the
catalog, so :meth:`describe` says None: the core waits until streaming declares the table.
Every statement commits on its own (autocommit) on a connection of its own, so the open
watermark is in the binlog before the chunk is read and the close watermark after.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cdc.config import Config
from cdc.spi import Table, TableId
from cdc.spi.chunks import Key
from connectors.mysql import connection as myconn
from connectors.mysql.snapshot import _quote, qualified, select_statement
from connectors.mysql.state import DatabaseFilter


class MySqlChunkReader:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._conn: Any = None

    @property
    def conn(self) -> Any:
        if self._conn is None or not self._conn.open:
            self._conn = myconn.connect(self.cfg, snapshot=True)
        return self._conn

    def tables(self) -> list[TableId]:
        rows = myconn.query(
            self.conn,
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
            "WHERE TABLE_TYPE = 'BASE TABLE'",
        )
        wanted = DatabaseFilter(self.cfg)
        return [TableId(str(db), None, str(t)) for db, t in rows if wanted(str(db))]

    def describe(self, table_id: TableId) -> Table | None:
        return None

    def max_key(
        self, table: Table, key_columns: Sequence[str], condition: str | None
    ) -> Key | None:
        keys = ", ".join(_quote(k) for k in key_columns)
        desc = ", ".join(f"{_quote(k)} DESC" for k in key_columns)
        where = f" WHERE ({condition})" if condition else ""
        row = myconn.query_one(
            self.conn, f"SELECT {keys} FROM {qualified(table.id)}{where} ORDER BY {desc} LIMIT 1"
        )
        return tuple(row) if row else None

    def read_chunk(
        self,
        table: Table,
        key_columns: Sequence[str],
        after: Key | None,
        upto: Key,
        limit: int,
        condition: str | None,
    ) -> list[Sequence[Any]]:
        keys = "(" + ", ".join(_quote(k) for k in key_columns) + ")"
        marks = "(" + ", ".join(["%s"] * len(key_columns)) + ")"
        where, args = [f"{keys} <= {marks}"], list(upto)
        if after is not None:
            where.insert(0, f"{keys} > {marks}")
            args = [*after, *upto]
        if condition:
            where.append(f"({condition})")
        order = ", ".join(_quote(k) for k in key_columns)
        query = (
            f"{select_statement(table)} WHERE {' AND '.join(where)} "
            f"ORDER BY {order} LIMIT {int(limit)}"
        )
        return [list(r) for r in myconn.query(self.conn, query, args)]

    def estimate_rows(self, table: Table) -> int | None:
        row = myconn.query_one(
            self.conn,
            "SELECT TABLE_ROWS FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (table.id.catalog, table.id.table),
        )
        return int(row[0]) if row and row[0] is not None else None

    def write_watermark(self, signal_table: TableId, signal_id: str, kind: str) -> None:
        myconn.execute(
            self.conn,
            f"INSERT INTO {qualified(signal_table)} (id, type, data) VALUES (%s, %s, NULL)",
            (signal_id, kind),
        )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
