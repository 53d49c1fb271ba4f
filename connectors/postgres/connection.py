"""Everything that talks to PostgreSQL through psycopg: sessions, catalog, slot, publication.

This is the only module of the connector that imports the driver, so the pgoutput decoder
and the type mapping stay pure.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

try:
    import psycopg
    from psycopg import sql
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the PostgreSQL connector needs psycopg 3: pip install 'tidemark[postgres]'"
    ) from exc

from cdc.common_config import AMBIENT_CREDENTIALS
from cdc.config import Config
from cdc.errors import ConfigError
from cdc.spi import Column, Table, TableId
from connectors.postgres.types import TypeInfo

log = logging.getLogger("tidemark.postgres")

SESSION_OPTIONS = (
    "-c TimeZone=UTC -c DateStyle=ISO -c IntervalStyle=iso_8601 -c extra_float_digits=3"
)
SYSTEM_SCHEMAS = frozenset({"pg_catalog", "information_schema", "pg_toast"})


def conninfo(cfg: Config, *, replication: bool = False) -> dict[str, Any]:
    params: dict[str, Any] = {
        "host": cfg["database.hostname"],
        "port": cfg["database.port"],
        "user": cfg["database.user"],
        "password": cfg.get("database.password") or None,
        "dbname": cfg["database.dbname"],
        "sslmode": cfg["database.sslmode"],
        "application_name": f"tidemark-{cfg['database.server.name']}",
        "options": SESSION_OPTIONS,
        "connect_timeout": max(int(cfg["database.connect.timeout.ms"]) // 1000, 1),
        "keepalives": 1 if cfg["database.tcpKeepAlive"] else 0,
    }
    for key, opt in (
        ("database.sslcert", "sslcert"),
        ("database.sslkey", "sslkey"),
        ("database.sslpassword", "sslpassword"),
        ("database.sslrootcert", "sslrootcert"),
    ):
        if cfg.get(key):
            params[opt] = cfg[key]
    if not cfg.get(AMBIENT_CREDENTIALS, True):
        params.update(_no_ambient_credentials(params))
    if replication:
        params["replication"] = "database"
    return {k: v for k, v in params.items() if v is not None}


#: a path that can never exist (a file "inside" /dev/null): libpq skips a missing password
#: file or client certificate without a word
_NOWHERE = os.path.join(os.devnull, "tidemark-none")


def _no_ambient_credentials(params: dict[str, Any]) -> dict[str, Any]:
    """libpq settings that keep the worker's own credentials out of a connection whose
    endpoint the worker's operator did not write: without them libpq falls back to
    ``PGPASSWORD``, ``~/.pgpass``, ``~/.postgresql/postgresql.crt``/``.key``, the worker's
    Kerberos tickets, and (for a host that is a directory) the worker's OS user over a Unix
    socket, so a REST caller naming a server the worker can reach would log in as the worker.
    Explicit values stop each fallback: libpq reads the environment and files only for
    settings left unset."""
    for host in str(params.get("host") or "").split(","):
        if host.strip().startswith(("/", "@")) or not host.strip():
            raise ConfigError(
                [
                    (
                        "database.hostname",
                        f"{host.strip()!r} is a Unix socket (or empty), which would log in as "
                        "the worker's OS user; connectors configured over REST reach "
                        "PostgreSQL over TCP only",
                    )
                ]
            )
    return {
        "password": params.get("password") or "",
        "passfile": _NOWHERE,
        "sslcert": params.get("sslcert") or _NOWHERE,
        "sslkey": params.get("sslkey") or _NOWHERE,
        "gssencmode": "disable",
        "require_auth": "!gss,!sspi",
    }


def connect(cfg: Config, *, autocommit: bool = True) -> psycopg.Connection[Any]:
    conn = psycopg.connect(**conninfo(cfg), autocommit=autocommit)
    for stmt in initial_statements(cfg.get("database.initial.statements")):
        conn.execute(stmt)
    return conn


def connect_replication(cfg: Config) -> psycopg.Connection[Any]:
    return psycopg.connect(**conninfo(cfg, replication=True), autocommit=True)


def initial_statements(text: str | None) -> list[str]:
    """``;`` separates statements, ``;;`` is a literal semicolon (the seed's rule)."""
    if not text:
        return []
    parts = text.replace(";;", "\x00").split(";")
    return [p.replace("\x00", ";").strip() for p in parts if p.strip()]


# -- catalog ---------------------------------------------------------------------------------
_TABLES_SQL = """
SELECT n.nspname, c.relname, c.oid
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%'
  AND n.nspname NOT LIKE 'pg_temp%%'
ORDER BY n.nspname, c.relname
"""

_COLUMNS_SQL = """
SELECT a.attnum, a.attname, a.atttypid, a.atttypmod, a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), format_type(a.atttypid, a.atttypmod),
       a.attndims,
       a.attidentity <> '' OR coalesce(pg_get_expr(d.adbin, d.adrelid), '') LIKE 'nextval(%%'
FROM pg_attribute a
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""

_PK_SQL = """
SELECT a.attname
FROM pg_index i
JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = %s AND i.indisprimary
ORDER BY k.ord
"""

_TYPES_SQL = """
SELECT t.oid, t.typname, t.typcategory, t.typelem, t.typbasetype, t.typtypmod,
       coalesce((SELECT array_agg(e.enumlabel ORDER BY e.enumsortorder)
                 FROM pg_enum e WHERE e.enumtypid = t.oid), '{}')
FROM pg_type t WHERE t.oid = ANY(%s)
"""


def list_tables(conn: psycopg.Connection[Any], dbname: str) -> list[tuple[TableId, int]]:
    rows = conn.execute(_TABLES_SQL).fetchall()
    return [(TableId(dbname, r[0], r[1]), int(r[2])) for r in rows]


def table_oid(conn: psycopg.Connection[Any], table_id: TableId) -> int | None:
    row = conn.execute(
        "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s",
        (table_id.schema, table_id.table),
    ).fetchone()
    return None if row is None else int(row[0])


def _length_scale(type_name: str) -> tuple[int | None, int | None]:
    if "(" not in type_name:
        return None, None
    inner = type_name[type_name.index("(") + 1 : type_name.index(")")]
    parts = [p.strip() for p in inner.split(",")]
    try:
        length = int(parts[0])
        scale = int(parts[1]) if len(parts) > 1 else None
    except ValueError:
        return None, None
    return length, scale


def load_table(conn: psycopg.Connection[Any], table_id: TableId, oid: int) -> Table:
    cols = []
    for i, (attnum, name, typid, typmod, notnull, default, fmt, ndims, auto) in enumerate(
        conn.execute(_COLUMNS_SQL, (oid,)).fetchall()
    ):
        del attnum
        length, scale = _length_scale(fmt)
        base = fmt.split("(")[0].replace("[]", "")
        cols.append(
            Column(
                name=name,
                position=i,
                type_name=base,
                native_type=int(typid),
                length=length,
                scale=scale,
                optional=not notnull,
                default=default,
                has_default=default is not None,
                auto_increment=bool(auto),
                dimensions=int(ndims or 0),
                type_modifier=int(typmod),
            )
        )
    pk = tuple(r[0] for r in conn.execute(_PK_SQL, (oid,)).fetchall())
    return Table(table_id, tuple(cols), pk, extra={"oid": oid, **data_collection(table_id)})


def data_collection(table_id: TableId) -> dict[str, str]:
    """The table's name in transaction metadata: ``schema.table``, as the seed's AC-63 and
    Debezium write it (the id's catalog, the database, is not part of it)."""
    return {"data_collection": f"{table_id.schema}.{table_id.table}"}


def load_types(conn: psycopg.Connection[Any], oids: Iterable[int]) -> dict[int, TypeInfo]:
    """Catalog information for user types, following domains and arrays to their base."""
    out: dict[int, TypeInfo] = {}
    todo = set(oids)
    while todo:
        rows = conn.execute(_TYPES_SQL, (list(todo),)).fetchall()
        todo = set()
        for oid, name, cat, elem, base, base_typmod, labels in rows:
            out[int(oid)] = TypeInfo(
                int(oid), name, cat, int(elem), int(base), int(base_typmod), tuple(labels)
            )
            for dep in (int(elem), int(base)):
                if dep and dep not in out:
                    todo.add(dep)
    return out


# -- slot and publication ----------------------------------------------------------------------
@dataclass(frozen=True)
class SlotInfo:
    name: str
    plugin: str
    database: str
    active: bool
    active_pid: int | None
    restart_lsn: str | None
    confirmed_flush_lsn: str | None
    wal_status: str | None


def slot_info(conn: psycopg.Connection[Any], name: str) -> SlotInfo | None:
    row = conn.execute(
        "SELECT slot_name, plugin, database, active, active_pid, restart_lsn::text, "
        "confirmed_flush_lsn::text, wal_status FROM pg_replication_slots WHERE slot_name = %s",
        (name,),
    ).fetchone()
    return None if row is None else SlotInfo(*row)


def drop_slot(conn: psycopg.Connection[Any], name: str) -> None:
    conn.execute("SELECT pg_drop_replication_slot(%s)", (name,))


def publication_exists(conn: psycopg.Connection[Any], name: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,)).fetchone()
        is not None
    )


def create_publication(
    conn: psycopg.Connection[Any], name: str, tables: list[TableId] | None
) -> None:
    """``tables`` None → FOR ALL TABLES; otherwise FOR TABLE the given ones."""
    if tables is None:
        conn.execute(sql.SQL("CREATE PUBLICATION {} FOR ALL TABLES").format(sql.Identifier(name)))
        return
    if not tables:
        conn.execute(sql.SQL("CREATE PUBLICATION {}").format(sql.Identifier(name)))
        return
    idents = sql.SQL(", ").join(sql.Identifier(t.schema or "public", t.table) for t in tables)
    conn.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(sql.Identifier(name), idents))


def server_version(conn: psycopg.Connection[Any]) -> int:
    return int(conn.info.server_version)


def copy_rows(
    conn: psycopg.Connection[Any], query: sql.Composable, ncols: int
) -> Iterator[tuple[Any, ...]]:
    """Stream a query's rows through COPY TO STDOUT, every value as its text form (None for
    NULL): the fastest way out of PostgreSQL, and the same text the stream carries."""
    with conn.cursor() as cur, cur.copy(sql.SQL("COPY ({}) TO STDOUT").format(query)) as copy:
        copy.set_types(["text"] * ncols)
        yield from copy.rows()
