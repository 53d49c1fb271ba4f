"""A table in a relational database written by a JDBC sink (Debezium's JDBC sink connector,
Kafka Connect's JDBC sink, or any writer that keeps one row per key) as the copy of a table.

The target is named as the sink is configured: ``jdbc:postgresql://host:port/db`` or
``jdbc:mysql://`` / ``jdbc:mariadb://host:port/db``, with ``user`` and ``password`` as query
parameters. A sink hard-deletes (``delete.enabled``), so every row is a live key. The table of
a topic is ``table.name.format`` with ``${topic}`` replaced and dots turned into underscores,
as Debezium's JDBC sink names it by default (``${topic}``: ``server.schema.table`` becomes
``server_schema_table``); a ``table.name.format`` query parameter overrides the format.
Column names are the event's field names. Values are canonicalised from what the driver
returns (``from_python``); the table is read whole through Python, which suits checks of
sink output rather than very large tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from cdc.verify.canonical import KeyTexts, TableSpec, from_python, row_hash

_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306}


class JdbcTargetError(Exception):
    """A URL that is not a supported JDBC URL, or a table that cannot be read."""


class JdbcTarget:
    name = "jdbc"

    def __init__(self, url: str) -> None:
        if not url.startswith("jdbc:"):
            raise JdbcTargetError("not a JDBC URL (jdbc:postgresql://... or jdbc:mysql://...)")
        parts = urlsplit(url[len("jdbc:") :])
        if parts.scheme not in _DEFAULT_PORTS:
            raise JdbcTargetError(
                f"JDBC URL scheme {parts.scheme!r} is not supported: use jdbc:postgresql://, "
                f"jdbc:mysql:// or jdbc:mariadb://"
            )
        params = dict(parse_qsl(parts.query))
        self.dialect = "postgresql" if parts.scheme == "postgresql" else "mysql"
        self.table_format = params.pop("table.name.format", "${topic}")
        self.database = unquote(parts.path.lstrip("/"))
        if not self.database:
            raise JdbcTargetError("the JDBC URL names no database (jdbc:<db>://host:port/DB)")
        self._connect_args: dict[str, Any] = {
            "host": parts.hostname or "localhost",
            "port": parts.port or _DEFAULT_PORTS[parts.scheme],
            "user": params.get("user") or unquote(parts.username or ""),
            "password": params.get("password") or unquote(parts.password or ""),
        }
        self._conn: Any = None
        self._rows: dict[str, dict[KeyTexts, int]] = {}

    def table_of(self, topic: str) -> str:
        return self.table_format.replace("${topic}", topic).replace(".", "_")

    def _connection(self) -> Any:
        if self._conn is not None:
            return self._conn
        a = self._connect_args
        try:
            if self.dialect == "postgresql":
                import psycopg

                self._conn = psycopg.connect(
                    host=a["host"],
                    port=a["port"],
                    user=a["user"],
                    password=a["password"],
                    dbname=self.database,
                    autocommit=True,
                )
            else:
                import pymysql  # type: ignore[import-untyped]

                self._conn = pymysql.connect(
                    host=a["host"],
                    port=a["port"],
                    user=a["user"],
                    password=a["password"],
                    database=self.database,
                    autocommit=True,
                )
        except Exception as exc:  # the driver's: unreachable, refused login
            raise JdbcTargetError(
                f"cannot connect to the JDBC target {self.dialect}://{a['host']}:{a['port']}/"
                f"{self.database} as {a['user'] or '(no user)'}: {exc}"
            ) from exc
        return self._conn

    def _quote(self, name: str) -> str:
        if self.dialect == "postgresql":
            return '"' + name.replace('"', '""') + '"'
        return "`" + name.replace("`", "``") + "`"

    def refresh(self, specs: Sequence[TableSpec]) -> None:
        for spec in specs:
            self._rows[spec.topic] = self._read(spec)

    def _read(self, spec: TableSpec) -> dict[KeyTexts, int]:
        table = self.table_of(spec.topic)
        columns = ", ".join(self._quote(c.name) for c in spec.columns)
        sql = f"SELECT {columns} FROM {self._quote(table)}"
        conn = self._connection()
        try:
            cur = conn.cursor()
            cur.execute(sql)
            fetched = cur.fetchall()
        except Exception as exc:  # no such table or column
            raise JdbcTargetError(
                f"the sink table of topic {spec.topic} cannot be read as {table} in "
                f"{self.database}: {exc}"
            ) from exc
        index = {c.name: i for i, c in enumerate(spec.columns)}
        key_at = [index[k] for k in spec.key]
        rows: dict[KeyTexts, int] = {}
        for r in fetched:
            texts = [from_python(c, v) for c, v in zip(spec.columns, r, strict=True)]
            rows[tuple(texts[i] or "" for i in key_at)] = row_hash(texts)
        return rows

    def rows(self, spec: TableSpec) -> Mapping[KeyTexts, int]:
        return self._rows.get(spec.topic, {})

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
