"""The publication carries exactly the included tables (``publication.autocreate.mode``).

A table the publication does not carry is invisible to the stream, while the slot keeps
advancing past its changes: that is silent data loss (issue 20). So on every start:

- ``filtered``: the publication's table set is made equal to the included tables
  (``ALTER PUBLICATION ... SET TABLE``, as Debezium does). Tables it gains are snapshotted
  before streaming resumes (see ``PostgresSnapshot``), because their changes before the
  ``ALTER`` were not published.
- ``all_tables``: the publication must be ``FOR ALL TABLES``.
- ``disabled``: the publication must exist and carry every included table; the start fails
  naming the ones it lacks.
"""

from __future__ import annotations

import logging
from typing import Any

from psycopg import sql

from cdc.config import Config
from cdc.errors import FatalError
from cdc.filters import describe_unmatched
from cdc.spi import TableId
from connectors.postgres import connection as pgconn

log = logging.getLogger("tidemark.postgres")


def _names(tables: list[TableId]) -> str:
    return ", ".join(f"{t.schema}.{t.table}" for t in tables)


def published(conn: Any, name: str) -> tuple[bool, set[TableId]] | None:
    """(FOR ALL TABLES?, the tables it carries), or None when it does not exist."""
    row = conn.execute("SELECT puballtables FROM pg_publication WHERE pubname = %s", (name,))
    found = row.fetchone()
    if found is None:
        return None
    rows = conn.execute(
        "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s", (name,)
    ).fetchall()
    return bool(found[0]), {TableId(None, s, t) for s, t in rows}


def not_published(conn: Any, cfg: Config, tables: list[TableId]) -> list[TableId]:
    """The included tables the publication does not carry (all of them if it is missing)."""
    state = published(conn, cfg["publication.name"])
    if state is None:
        return list(tables)
    all_tables, carried = state
    return [] if all_tables else [t for t in tables if _key(t) not in carried]


def _key(t: TableId) -> TableId:
    return TableId(None, t.schema or "public", t.table)


def sync_publication(conn: Any, cfg: Config, tables: list[TableId]) -> list[TableId]:
    """Create or check the publication per ``publication.autocreate.mode``; with ``filtered``
    make its table set equal to ``tables``. Returns the included tables it did not carry
    before."""
    name = cfg["publication.name"]
    mode = cfg["publication.autocreate.mode"]
    state = published(conn, name)
    if state is None:
        if mode == "disabled":
            raise FatalError(
                f"publication {name!r} does not exist and publication.autocreate.mode=disabled. "
                f"Create it (CREATE PUBLICATION {name} FOR TABLE ...) or change the mode."
            )
        _create(conn, cfg, None if mode == "all_tables" else tables)
        return list(tables)
    all_tables, carried = state
    if all_tables:
        return []
    missing = [t for t in tables if _key(t) not in carried]
    if mode == "all_tables":
        raise FatalError(
            f"publication {name!r} exists but is not FOR ALL TABLES, which "
            f"publication.autocreate.mode=all_tables requires"
            + (f" (it lacks {_names(missing)})" if missing else "")
            + f". Drop it (DROP PUBLICATION {name}) so it is re-created, or use "
            f"publication.autocreate.mode=filtered."
        )
    if mode == "disabled":
        if missing:
            raise FatalError(
                f"publication {name!r} does not carry the included table(s) {_names(missing)} "
                f"(publication.autocreate.mode=disabled): their changes would be lost. Run "
                f"ALTER PUBLICATION {name} ADD TABLE {_names(missing)}, or narrow "
                f"table.include.list."
            )
        return []
    wanted = {_key(t) for t in tables}
    if wanted != carried:
        _set_tables(conn, name, tables, carried)
        extra = sorted(carried - wanted, key=str)
        log.info(
            "publication %s now carries the included tables (added: %s; removed: %s)",
            name,
            _names(missing) or "none",
            _names(extra) or "none",
        )
    return missing


def _create(conn: Any, cfg: Config, tables: list[TableId] | None) -> None:
    name, mode = cfg["publication.name"], cfg["publication.autocreate.mode"]
    try:
        pgconn.create_publication(conn, name, tables)
    except Exception as exc:
        raise FatalError(
            f"cannot create publication {name!r} ({mode}): {exc}. Creating a publication FOR "
            f"ALL TABLES needs superuser; create it beforehand or use "
            f"publication.autocreate.mode=filtered with table ownership."
        ) from exc
    log.info("created publication %s (%s)", name, mode)


def _set_tables(conn: Any, name: str, tables: list[TableId], carried: set[TableId]) -> None:
    pub = sql.Identifier(name)
    try:
        if tables:
            idents = sql.SQL(", ").join(
                sql.Identifier(t.schema or "public", t.table) for t in tables
            )
            conn.execute(sql.SQL("ALTER PUBLICATION {} SET TABLE {}").format(pub, idents))
        elif carried:
            idents = sql.SQL(", ").join(sql.Identifier(t.schema or "", t.table) for t in carried)
            conn.execute(sql.SQL("ALTER PUBLICATION {} DROP TABLE {}").format(pub, idents))
    except Exception as exc:
        raise FatalError(
            f"cannot change publication {name!r} to the included tables: {exc}. "
            f"publication.autocreate.mode=filtered needs ownership of the publication and "
            f"the tables; or set the tables yourself and use publication.autocreate.mode="
            f"disabled."
        ) from exc


def check_included(cfg: Config, included: list[TableId], every: list[TableId]) -> None:
    """An include list that matches no table fails the start (Debezium: DBZ-2885) naming
    the patterns and the nearest table names, unless ``table.include.list.allow.empty``."""
    if included:
        return
    key = "table.include.list" if cfg.get("table.include.list") else "schema.include.list"
    patterns = list(cfg.get(key) or [])
    if not patterns:
        return  # nothing was asked for by name: an empty database is not a typo
    existing = [
        f"{t.schema}.{t.table}" if key == "table.include.list" else str(t.schema) for t in every
    ]
    reason = f"{key} captures nothing: {describe_unmatched(patterns, existing)}"
    if cfg["table.include.list.allow.empty"]:
        log.warning("%s (running anyway: table.include.list.allow.empty=true)", reason)
        return
    raise FatalError(
        f"{reason}. Fix the patterns (anchored regular expressions on <schema>.<table>), or "
        f"set table.include.list.allow.empty=true to run with no table."
    )
