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

Partitioned tables (issue 25.4): without ``publish_via_partition_root`` PostgreSQL publishes
a partitioned table's changes under its leaf partitions' names, which the include list (of
root tables) does not match. So publications are created with it on, ``filtered`` and
``all_tables`` turn it on when an included table is partitioned, and ``disabled`` refuses to
start then, giving the ``ALTER PUBLICATION`` that fixes it. Streaming also routes any leaf
relation that still arrives to its root table (``partition_root``).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from psycopg import sql

from cdc.config import Config
from cdc.errors import FatalError
from cdc.filters import describe_unmatched, warn_running_empty
from cdc.spi import Table, TableId
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
    # pg_publication_tables names the leaf partitions of a partitioned member when
    # publish_via_partition_root is off; pg_publication_rel names the member itself.
    rows = conn.execute(_CARRIED_SQL, (name, name)).fetchall()
    return bool(found[0]), {TableId(None, s, t) for s, t in rows}


_CARRIED_SQL = """
SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s
UNION
SELECT n.nspname, c.relname FROM pg_publication_rel r
JOIN pg_publication p ON p.oid = r.prpubid
JOIN pg_class c ON c.oid = r.prrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE p.pubname = %s
"""

_PARTITIONED_SQL = """
SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'p' AND NOT c.relispartition
"""

_VIAROOT = "publish_via_partition_root"


def partitioned(conn: Any, tables: list[TableId]) -> list[TableId]:
    """The given tables that are partitioned."""
    found = {TableId(None, s, t) for s, t in conn.execute(_PARTITIONED_SQL).fetchall()}
    return [t for t in tables if _key(t) in found]


def partition_root(conn: Any, oid: int) -> tuple[str, str] | None:
    """(schema, table) of the partitioned table a leaf partition belongs to (the top of a
    multi-level tree), or None when the relation is no partition."""
    row = conn.execute(
        "SELECT n.nspname, c.relname FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.oid = pg_partition_root(%s::oid) AND c.oid <> %s::oid",
        (oid, oid),
    ).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))


def not_published(conn: Any, cfg: Config, tables: list[TableId]) -> list[TableId]:
    """The included tables the publication does not carry (all of them if it is missing)."""
    state = published(conn, cfg["publication.name"])
    if state is None:
        return list(tables)
    all_tables, carried = state
    return [] if all_tables else [t for t in tables if _key(t) not in carried]


def _key(t: TableId) -> TableId:
    return TableId(None, t.schema or "public", t.table)


def as_partition_root(conn: Any, table: Table) -> Table:
    """A leaf partition's relation as its root table, so its changes reach the root's topic
    whatever the publication's ``publish_via_partition_root`` (the values keep the leaf's
    column order, which the Relation message describes)."""
    oid = table.extra.get("oid")
    root = partition_root(conn, int(oid)) if oid else None
    if root is None:
        return table
    log.debug("relation %s is a partition of %s.%s", table.id, *root)
    return replace(table, id=TableId(table.id.catalog, root[0], root[1]))


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
    _check_viaroot(conn, cfg, tables)
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
        # always: harmless for plain tables, and right for tables partitioned later
        conn.execute(
            sql.SQL("ALTER PUBLICATION {} SET ({} = true)").format(
                sql.Identifier(name), sql.SQL(_VIAROOT)
            )
        )
    except Exception as exc:
        raise FatalError(
            f"cannot create publication {name!r} ({mode}): {exc}. Creating a publication FOR "
            f"ALL TABLES needs superuser; create it beforehand or use "
            f"publication.autocreate.mode=filtered with table ownership."
        ) from exc
    log.info("created publication %s (%s)", name, mode)


def _check_viaroot(conn: Any, cfg: Config, tables: list[TableId]) -> None:
    """An existing publication must publish included partitioned tables via their root:
    turned on in the modes that manage the publication, refused with the fix otherwise."""
    name = cfg["publication.name"]
    row = conn.execute("SELECT pubviaroot FROM pg_publication WHERE pubname = %s", (name,))
    found = row.fetchone()
    if found is None or found[0]:
        return
    parted = partitioned(conn, tables)
    if not parted:
        return
    fix = f"ALTER PUBLICATION {name} SET ({_VIAROOT} = true)"
    reason = (
        f"publication {name!r} has {_VIAROOT} off while the included table(s) "
        f"{_names(parted)} are partitioned: PostgreSQL would publish their changes under "
        f"the partitions' names"
    )
    if cfg["publication.autocreate.mode"] == "disabled":
        raise FatalError(
            f"{reason} (publication.autocreate.mode=disabled leaves the publication to you). "
            f"Run {fix}."
        )
    try:
        conn.execute(
            sql.SQL("ALTER PUBLICATION {} SET ({} = true)").format(
                sql.Identifier(name), sql.SQL(_VIAROOT)
            )
        )
    except Exception as exc:
        raise FatalError(f"{reason}, and turning it on failed: {exc}. Run {fix}.") from exc
    log.info("publication %s: %s turned on for %s", name, _VIAROOT, _names(parted))


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


def check_included(
    cfg: Config, included: list[TableId], every: list[TableId], notices: list[str]
) -> None:
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
        warn_running_empty(reason, notices)
        return
    raise FatalError(
        f"{reason}. Fix the patterns (anchored regular expressions on <schema>.<table>), or "
        f"set table.include.list.allow.empty=true to run with no table."
    )
