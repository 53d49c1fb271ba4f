"""An include list that matches nothing fails the start (Debezium DBZ-2885; issue 20.2).

A typo in ``table.include.list`` or ``database.include.list`` would otherwise run a task that
captures nothing and says nothing. The check runs against the server's current tables when
the connector starts (before a snapshot, and before streaming); ``table.include.list.allow.
empty=true`` keeps running with a warning, for tables that will be created later.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from cdc.config import Config
from cdc.errors import FatalError
from cdc.filters import describe_unmatched, warn_running_empty
from cdc.spi import TableId
from connectors.mysql import connection as myconn
from connectors.mysql.state import BUILTIN_DATABASES

log = logging.getLogger("tidemark.mysql")


def check_include_lists(
    cfg: Config,
    conn: myconn.Connection,
    table_included: Callable[[TableId], bool],
    database_included: Callable[[str], bool],
    notices: list[str],
) -> None:
    """Fail (or warn) when ``table.include.list`` matches no existing table, or, without a
    table list, ``database.include.list`` no existing database (an empty database is fine:
    its tables may come later)."""
    tables = list(cfg.get("table.include.list") or [])
    databases = list(cfg.get("database.include.list") or [])
    if tables:
        rows = myconn.query(
            conn,
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
            "WHERE TABLE_TYPE = 'BASE TABLE'",
        )
        existing = [TableId(str(db), None, str(name)) for db, name in rows]
        existing = [t for t in existing if (t.catalog or "").lower() not in BUILTIN_DATABASES]
        if any(table_included(t) for t in existing):
            return
        key, patterns = "table.include.list", tables
        names = [f"{t.catalog}.{t.table}" for t in existing]
    elif databases:
        every = [str(r[0]) for r in myconn.query(conn, "SHOW DATABASES")]
        names = [d for d in every if d.lower() not in BUILTIN_DATABASES]
        if any(database_included(d) for d in names):
            return
        key, patterns = "database.include.list", databases
    else:
        return  # nothing was asked for by name: an empty server is not a typo
    reason = f"{key} captures nothing: {describe_unmatched(patterns, names)}"
    if cfg["table.include.list.allow.empty"]:
        warn_running_empty(reason, notices)
        return
    raise FatalError(
        f"{reason}. Fix the patterns (anchored regular expressions on <database>.<table> for "
        f"table.include.list, on database names for database.include.list), or set "
        f"table.include.list.allow.empty=true to run until matching tables exist."
    )
