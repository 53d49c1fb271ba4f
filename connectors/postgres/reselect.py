"""PostgreSQL's side of the reselect post-processor, and the start-up warning about TOAST.

An UPDATE that leaves a value stored out of line (TOAST) unchanged does not log it unless the
table is ``REPLICA IDENTITY FULL``: the event carries the unavailable-value placeholder. The
reselect post-processor (cdc/pipeline/reselect.py) re-reads such columns by primary key on a
connection of its own. The rows are read exactly as the snapshot reads them (``COPY`` text,
through :func:`~connectors.postgres.connection.copy_rows`), which is the text the stream
carries, so the table's converters need nothing new. Key values go back into the query as
untyped literals of that same text, which PostgreSQL reads with the key column's type.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from psycopg import sql

from cdc.config import Config
from cdc.pipeline.reselect import (
    DEFAULT_ALIAS,
    RESELECT_CLASS,
    SessionReselector,
    parse_settings,
)
from cdc.spi import Table, TableId
from connectors.postgres import connection as pgconn

log = logging.getLogger("tidemark.postgres.reselect")


class PostgresReselector(SessionReselector):
    """:class:`cdc.spi.Reselector` for PostgreSQL: one ``COPY (SELECT ... WHERE (key) IN
    (...))`` per call, on an autocommit session."""

    def connect(self) -> Any:
        return pgconn.connect(self.cfg)

    def rows(
        self,
        conn: Any,
        table: Table,
        key_columns: Sequence[str],
        keys: Sequence[tuple[Any, ...]],
        columns: Sequence[str],
    ) -> Iterator[tuple[Any, ...]]:
        tid = table.id
        names = [*key_columns, *columns]
        tuples = sql.SQL(", ").join(
            sql.SQL("({})").format(sql.SQL(", ").join(sql.Literal(v) for v in key)) for key in keys
        )
        query = sql.SQL("SELECT {} FROM {} WHERE ({}) IN ({})").format(
            sql.SQL(", ").join(sql.Identifier(n) for n in names),
            sql.Identifier(tid.schema or "public", tid.table),
            sql.SQL(", ").join(sql.Identifier(n) for n in key_columns),
            tuples,
        )
        return pgconn.copy_rows(conn, query, len(names))


# -- the start-up warning -------------------------------------------------------------------------
_OUT_OF_LINE_SQL = """
SELECT c.oid, a.attname
FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
WHERE c.oid = ANY(%s) AND c.relreplident <> 'f' AND a.attnum > 0 AND NOT a.attisdropped
  AND a.attstorage IN ('x', 'e')
ORDER BY c.oid, a.attnum
"""

#: (server, table) pairs already warned about in this process (snapshot and streaming both
#: check at start)
_warned: set[tuple[str, TableId]] = set()


def out_of_line_columns(
    conn: Any, tables: Sequence[tuple[TableId, int]]
) -> dict[TableId, list[str]]:
    """Columns that may be stored out of line (storage ``extended`` or ``external``: text,
    bytea, jsonb, arrays, ...) of the tables that are not ``REPLICA IDENTITY FULL``."""
    if not tables:
        return {}
    by_oid = {oid: tid for tid, oid in tables}
    out: dict[TableId, list[str]] = {}
    for oid, name in conn.execute(_OUT_OF_LINE_SQL, (list(by_oid),)).fetchall():
        out.setdefault(by_oid[int(oid)], []).append(str(name))
    return out


def warn_unavailable_values(
    conn: Any, cfg: Config, tables: Sequence[tuple[TableId, int]]
) -> list[str]:
    """Warn, per included table, about columns whose unchanged values updates will not carry
    (no ``REPLICA IDENTITY FULL``, no reselect covering them), with the fixes. Returns the
    warnings (for tests); each table is warned about once per process."""
    settings, _ = parse_settings(cfg.raw)
    messages = []
    server = str(cfg.get("database.server.name"))
    for tid, columns in out_of_line_columns(conn, tables).items():
        if settings is not None:
            columns = [c for c in columns if not settings.selects(tid, c)]
        if not columns or (server, tid) in _warned:
            continue
        _warned.add((server, tid))
        name = f"{tid.schema}.{tid.table}"
        message = (
            f"table {name}: column(s) {', '.join(columns)} can be stored out of line (TOAST) "
            f"and the table is not REPLICA IDENTITY FULL, so an UPDATE that leaves them "
            f"unchanged carries the unavailable-value placeholder instead of their value. "
            f"To fix, run ALTER TABLE {name} REPLICA IDENTITY FULL (or set "
            f"replica.identity.autoset.values={name}:FULL), or configure the reselect post "
            f"processor (post.processors={DEFAULT_ALIAS}, {DEFAULT_ALIAS}.type="
            f"{RESELECT_CLASS}), or let the apply job fill them; see docs/unavailable-values.md"
        )
        log.warning("%s", message)
        messages.append(message)
    return messages
