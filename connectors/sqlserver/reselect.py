"""SQL Server's side of the reselect post-processor (``post.processors``), and the
``heartbeat.action.query`` session.

A change table holds what the capture instance captured; the reselect post-processor
(cdc/pipeline/reselect.py) re-reads columns of an event's ``after`` image from the table as
it is now, by primary key, on a connection of its own: with ``reselect.null.values`` the
NULLs (a computed column included in a capture instance is always NULL in the change table),
or the columns its lists name. Values come back through the same driver as the events'
(pyodbc), so the table's converters treat them alike; key values go back as query
parameters. With several databases (``database.names``) each table is read in its own
database, one connection each.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from cdc.config import Config
from cdc.own_session import OwnSession
from cdc.pipeline.reselect import SessionReselector
from cdc.spi import Table
from connectors.sqlserver.connection import connect, dialect_of

#: SQL Server takes at most 2100 parameters per statement
MAX_PARAMETERS = 2000


class _DatabaseReselector(SessionReselector):
    """The reselect session of one database."""

    def __init__(self, cfg: Config, database: str) -> None:
        super().__init__(cfg)
        self.database = database
        self.dialect = dialect_of(cfg)

    def connect(self) -> Any:
        return connect(self.cfg, database=self.database)

    def rows(
        self,
        conn: Any,
        table: Table,
        key_columns: Sequence[str],
        keys: Sequence[tuple[Any, ...]],
        columns: Sequence[str],
    ) -> Iterator[tuple[Any, ...]]:
        tid = table.id
        per_query = max(1, MAX_PARAMETERS // max(1, len(key_columns)))
        for start in range(0, len(keys), per_query):
            chunk = keys[start : start + per_query]
            sql = self.dialect.reselect(
                tid.schema or "dbo", tid.table, key_columns, columns, len(chunk)
            )
            cur = conn.cursor()
            try:
                cur.execute(sql, *[v for key in chunk for v in key])
                rows = cur.fetchall()
            finally:
                cur.close()
            for row in rows:
                yield tuple(row)


class SqlServerReselector:
    """:class:`cdc.spi.Reselector` for SQL Server: one ``SELECT ... WHERE (k = ? AND ...) OR
    ...`` per table and batch, in the table's database."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.sessions: dict[str, _DatabaseReselector] = {}

    def fetch(
        self,
        table: Table,
        key_columns: Sequence[str],
        keys: Sequence[tuple[Any, ...]],
        columns: Sequence[str],
    ) -> dict[tuple[Any, ...], tuple[Any, ...]]:
        db = str(table.id.catalog)
        session = self.sessions.get(db)
        if session is None:
            session = self.sessions[db] = _DatabaseReselector(self.cfg, db)
        return session.fetch(table, key_columns, keys, columns)

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()
        self.sessions.clear()


class HeartbeatAction:
    """``heartbeat.action.query`` run with each heartbeat (``heartbeat.interval.ms``) on an
    autocommit connection of its own to the first database of ``database.names`` (name
    another database's tables with three-part names); a failure is logged by the core and the
    next heartbeat opens a new connection."""

    def __init__(self, cfg: Config, query: str) -> None:
        self.query = query
        self.session = OwnSession(lambda: connect(cfg), "heartbeat action")
        self._held = 0

    @contextmanager
    def held(self) -> Iterator[None]:
        """No action while a snapshot runs: the action runs on the snapshot's own thread, and
        a write to a table the snapshot has locked (``exclusive``, ``repeatable_read``)
        would wait for the end of the snapshot forever (Debezium runs it while streaming)."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1

    def __call__(self) -> None:
        if not self._held:
            self.session.run(self._execute)

    def _execute(self, conn: Any) -> None:
        cur = conn.cursor()
        try:
            cur.execute(self.query)
        finally:
            cur.close()

    def close(self) -> None:
        self.session.close()
