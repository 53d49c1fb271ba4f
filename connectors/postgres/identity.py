"""Replica identity of the captured tables: what updates and deletes can carry.

A table without a usable replica identity (no primary key and ``REPLICA IDENTITY DEFAULT``,
``NOTHING``, or ``USING INDEX`` of a dropped index) cannot be in a publication that
publishes updates and deletes without PostgreSQL rejecting every ``UPDATE``/``DELETE`` on it
— the user's application's writes, not only capture. Debezium puts such a table into its
filtered publication anyway. tidemark refuses: with ``publication.autocreate.mode=filtered``
the start fails before the publication is changed, naming the tables and the fix; with a
publication it does not manage (``all_tables``, ``disabled``) it warns, since the damage is
the publication's and already there. ``replica.identity.autoset.values`` (Debezium's
setting) sets identities at start, before the check.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from psycopg import sql

from cdc.config import Config
from cdc.errors import FatalError
from cdc.spi import TableId
from connectors.postgres.reselect import warn_unavailable_values

log = logging.getLogger("tidemark.postgres")

_IDENTITY = re.compile(r"^(DEFAULT|FULL|NOTHING|INDEX\s+\S+)$", re.IGNORECASE)

_IDENTITY_SQL = """
SELECT c.oid, c.relreplident,
       EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary),
       EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisreplident)
FROM pg_class c WHERE c.oid = ANY(%s)
"""


def parse_autoset(entries: list[str]) -> list[tuple[re.Pattern[str], str]]:
    """``<schema>.<table regex>:<identity>`` entries; ValueError names a bad one."""
    out = []
    for entry in entries:
        table, sep, identity = entry.rpartition(":")
        identity = " ".join(identity.split())
        if not sep or not table.strip() or not _IDENTITY.match(identity):
            raise ValueError(
                f"entry {entry!r} must be <schema>.<table>:<DEFAULT|FULL|NOTHING|INDEX name>"
            )
        try:
            out.append((re.compile(table.strip(), re.IGNORECASE), identity))
        except re.error as exc:
            raise ValueError(f"entry {entry!r}: bad table pattern: {exc}") from exc
    return out


def validate_autoset(value: Any) -> str | None:
    """Config validator of ``replica.identity.autoset.values``."""
    try:
        parse_autoset(list(value or []))
    except ValueError as exc:
        return str(exc)
    return None


def autoset(conn: Any, cfg: Config, tables: list[tuple[TableId, int]]) -> None:
    """Apply ``replica.identity.autoset.values`` to the matching included tables."""
    rules = parse_autoset(list(cfg.get("replica.identity.autoset.values") or []))
    for tid, _ in tables:
        name = f"{tid.schema}.{tid.table}"
        identity = next((ident for pattern, ident in rules if pattern.fullmatch(name)), None)
        if identity is None:
            continue
        kind, _, index = identity.partition(" ")
        clause = (
            sql.SQL("USING INDEX {}").format(sql.Identifier(index.strip()))
            if kind.upper() == "INDEX"
            else sql.SQL(kind.upper())
        )
        try:
            conn.execute(
                sql.SQL("ALTER TABLE {} REPLICA IDENTITY {}").format(
                    sql.Identifier(tid.schema or "public", tid.table), clause
                )
            )
        except Exception as exc:
            log.warning(
                "replica.identity.autoset.values: cannot set %s on %s: %s", identity, name, exc
            )
            continue
        log.info(
            "replica identity of %s set to %s (replica.identity.autoset.values)", name, identity
        )


def without_identity(conn: Any, tables: list[tuple[TableId, int]]) -> list[TableId]:
    """The tables whose updates and deletes cannot be published."""
    if not tables:
        return []
    rows = conn.execute(_IDENTITY_SQL, ([oid for _, oid in tables],)).fetchall()
    usable = {
        int(oid)
        for oid, ident, has_pk, has_index in rows
        if ident == "f" or (ident == "d" and has_pk) or (ident == "i" and has_index)
    }
    return [tid for tid, oid in tables if oid not in usable]


def fix_hint(tables: list[TableId]) -> str:
    first = f"{tables[0].schema}.{tables[0].table}"
    return (
        f"give each a replica identity (ALTER TABLE {first} REPLICA IDENTITY FULL, or a "
        f"unique index on NOT NULL columns and ALTER TABLE {first} REPLICA IDENTITY USING "
        f"INDEX <index>), let the connector set it (replica.identity.autoset.values="
        f"{first}:FULL), or leave the table out of table.include.list"
    )


def check_identities(conn: Any, cfg: Config, tables: list[tuple[TableId, int]]) -> None:
    """Autoset, warn about unchanged TOASTed values updates will not carry, then refuse
    (filtered) or warn about tables without a usable identity."""
    autoset(conn, cfg, tables)
    warn_unavailable_values(conn, cfg, tables)
    bad = without_identity(conn, tables)
    if not bad:
        return
    names = ", ".join(f"{t.schema}.{t.table}" for t in bad)
    problem = (
        f"included table(s) {names} have no usable replica identity (no primary key and "
        f"REPLICA IDENTITY DEFAULT, or NOTHING): in a publication that publishes updates "
        f"and deletes, PostgreSQL rejects every UPDATE and DELETE on them"
    )
    if cfg["publication.autocreate.mode"] == "filtered":
        raise FatalError(
            f"{problem}, so they are not added to publication {cfg['publication.name']!r}. "
            f"To capture them, {fix_hint(bad)}."
        )
    log.warning(
        "%s; their updates and deletes are not captured. To fix, %s.", problem, fix_hint(bad)
    )
