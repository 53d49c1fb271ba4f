"""MySQL/MariaDB's side of incremental snapshots (:class:`cdc.spi.ChunkReader`).

Rows are read as the initial snapshot reads them (the same session settings, ``SELECT``
with FLOAT widened to DOUBLE, TIMESTAMP values marked as snapshot values), so the table's
converters treat them alike; key values are the driver's values and go back as query
parameters. The connector learns table structure from its schema history, not from the
catalog, so :meth:`describe` says None: the core waits until streaming declares the table.
Every statement commits on its own (autocommit) on a connection of its own, so the open
watermark is in the binlog before the chunk is read and the close watermark after. With
``snapshot.max.threads`` > 1 each reader thread gets a :meth:`fork` (a connection of its own)
and :meth:`chunk_end` places the ranges (``LIMIT 1 OFFSET``, keys only).

With ``read.only=true`` nothing is written: the chunk is read in a ``START TRANSACTION WITH
CONSISTENT SNAPSHOT`` transaction, and GTIDs say where it stands. The low watermark is what
that snapshot includes: on MariaDB the GTID position of ``Binlog_snapshot_file/position``
(reported for exactly this snapshot), on MySQL ``@@gtid_executed`` read just before the
snapshot is opened (a GTID enters it only after its transaction committed in the engine). The
high watermark, after the read, is ``@@gtid_binlog_pos`` / ``@@gtid_executed``. A streamed
transaction whose GTID is in the low set is older than the read; any other de-duplicates the
chunk; the window closes once the stream's GTID set holds the whole high set. GTIDs are
required: MySQL without ``gtid_mode=ON`` is refused with an error saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdc.config import Config
from cdc.errors import FatalError
from cdc.spi import Table, TableId
from cdc.spi.chunks import Key
from connectors.mysql import connection as myconn
from connectors.mysql.gtid import GtidSet, MariaDbGtidSet, parse_gtid_set
from connectors.mysql.snapshot import _quote, qualified, select_statement
from connectors.mysql.state import DatabaseFilter
from connectors.mysql.types import base_type


class MySqlChunkReader:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._conn: Any = None
        self._info: myconn.ServerInfo | None = None
        self._low: GtidSet | None = None
        #: readers of one table's chunks at once (``snapshot.max.threads``)
        self.max_threads = int(cfg.get("snapshot.max.threads") or 1)

    def fork(self) -> MySqlChunkReader:
        return MySqlChunkReader(self.cfg)

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
        keys = _key_select(table, key_columns)
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
        where, args = _range(table, key_columns, after, upto, condition)
        order = ", ".join(_quote(k) for k in key_columns)
        query = f"{select_statement(table)} WHERE {where} ORDER BY {order} LIMIT {int(limit)}"
        return [list(r) for r in myconn.query(self.conn, query, args)]

    def chunk_end(
        self,
        table: Table,
        key_columns: Sequence[str],
        after: Key | None,
        upto: Key,
        size: int,
        condition: str | None,
    ) -> Key | None:
        keys = ", ".join(_quote(k) for k in key_columns)
        where, args = _range(table, key_columns, after, upto, condition)
        row = myconn.query_one(
            self.conn,
            f"SELECT {_key_select(table, key_columns)} FROM {qualified(table.id)} WHERE {where} "
            f"ORDER BY {keys} "
            f"LIMIT 1 OFFSET {max(int(size) - 1, 0)}",
            args,
        )
        return tuple(row) if row else None

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

    def begin_chunk_read(self) -> None:
        conn = self.conn
        info = self._info = self._info or myconn.server_info(conn)
        if not info.gtid_mode:
            raise FatalError(
                "read.only=true needs GTIDs to place chunk reads in the binlog without writing "
                "watermarks: enable gtid_mode=ON and enforce_gtid_consistency=ON, or set "
                "read.only=false (watermark rows in signal.data.collection)"
            )
        if info.is_mariadb:
            myconn.execute(conn, "START TRANSACTION WITH CONSISTENT SNAPSHOT")
            position = myconn.consistent_snapshot_position(conn)
            if position is None:
                raise FatalError("read.only=true: MariaDB reports no Binlog_snapshot_position")
            low = myconn.mariadb_gtid_at(conn, *position) or ""
        else:
            row = myconn.query_one(conn, "SELECT @@GLOBAL.gtid_executed")
            low = str(row[0] or "") if row else ""
            myconn.execute(conn, "START TRANSACTION WITH CONSISTENT SNAPSHOT")
        self._low = parse_gtid_set(low.replace("\n", ""), mariadb=info.is_mariadb)

    def end_chunk_read(self) -> MySqlReadWindow:
        conn, info, low = self.conn, self._info, self._low
        assert info is not None and low is not None, "end_chunk_read without begin_chunk_read"
        myconn.execute(conn, "COMMIT")
        self._low = None
        variable = "gtid_binlog_pos" if info.is_mariadb else "gtid_executed"
        row = myconn.query_one(conn, f"SELECT @@GLOBAL.{variable}")
        high = str(row[0] or "").replace("\n", "") if row else ""
        return MySqlReadWindow(low, parse_gtid_set(high, mariadb=info.is_mariadb))

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _key_select(table: Table, key_columns: Sequence[str]) -> str:
    """The key columns as a chunk bound is read: a FLOAT widened to DOUBLE as the rows are
    (``select_statement``); its 6-digit text (0.1) is below the stored float32 value
    (0.100000001...), so ``key <= 0.1`` would leave out the row with the largest key."""
    parts = []
    for name in key_columns:
        column = table.column(name)
        if column is not None and base_type(column)[0] == "FLOAT":
            parts.append(f"({_quote(name)} + 0e0)")
        else:
            parts.append(_quote(name))
    return ", ".join(parts)


def _range(
    table: Table, key_columns: Sequence[str], after: Key | None, upto: Key, condition: str | None
) -> tuple[str, list[Any]]:
    """``after < key <= upto`` (and the condition) as a WHERE clause and its parameters."""
    keys = "(" + ", ".join(_quote(k) for k in key_columns) + ")"
    marks = "(" + ", ".join(myconn.key_marks(table, key_columns)) + ")"
    where, args = [f"{keys} <= {marks}"], list(upto)
    if after is not None:
        where.insert(0, f"{keys} > {marks}")
        args = [*after, *upto]
    if condition:
        where.append(f"({condition})")
    return " AND ".join(where), args


@dataclass
class MySqlReadWindow:
    """A chunk's read-only window (:class:`cdc.spi.chunks.ReadWindow`) by GTIDs."""

    low: GtidSet
    high: GtidSet
    #: the last stream set checked (offsets repeat it for every event of a transaction)
    _seen: tuple[str, bool] = field(default=("", False), repr=False)

    def older(
        self, source: Mapping[str, Any], offset: Mapping[str, Any], transaction_id: str | None
    ) -> bool | None:
        gtid = source.get("gtid")
        return self.low.contains(str(gtid)) if gtid else None

    def passed(
        self, source: Mapping[str, Any], offset: Mapping[str, Any], transaction_id: str | None
    ) -> bool:
        text = offset.get("gtids")
        if not isinstance(text, str) or not text:
            return False
        if self._seen[0] == text:
            return self._seen[1]
        streamed = parse_gtid_set(text, mariadb=isinstance(self.high, MariaDbGtidSet))
        # sources the stream does not track (gtid.source.excludes) never count as behind
        wanted: GtidSet
        if isinstance(self.high, MariaDbGtidSet):
            domains = {s.split("-")[0] for s in streamed.sources()}
            wanted = self.high.retain(lambda s: s.split("-")[0] in domains)
        else:
            known = set(streamed.sources())
            wanted = self.high.retain(lambda s: s in known)
        result = wanted.is_contained_within(streamed)
        self._seen = (text, result)
        return result
