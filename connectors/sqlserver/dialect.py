"""The one seam between SQL Server's T-SQL and what the stand-in accepts.

Every statement the connector sends is built here. :data:`TSQL` is what a SQL Server gets
(each statement is parsed with sqlglot's ``tsql`` dialect in
``tests/unit/test_sqlserver_dialect.py``); :data:`STANDIN` is the SQL Server stand-in of
``tidemark dev`` (a PostgreSQL database carrying SQL Server's ``sys``/``cdc`` catalog and
functions, ``worker/dev/sqlserver_standin.py``). They differ in exactly these places:

- identifier quoting: ``[name]`` versus ``"name"``;
- the snapshot's isolation level: T-SQL's ``SNAPSHOT`` is PostgreSQL's ``REPEATABLE READ``;
- the exclusive table lock: ``SELECT TOP (0) * FROM t WITH (TABLOCKX)`` versus
  ``LOCK TABLE t IN EXCLUSIVE MODE``;
- the ODBC connection string (FreeTDS versus the PostgreSQL ODBC driver).

Everything else (``sys.fn_cdc_get_max_lsn()``, ``cdc.fn_cdc_get_all_changes_<instance>(?, ?,
N'all update old')``, ``cdc.change_tables``, ``cdc.captured_columns``, ``sys.columns``,
``INFORMATION_SCHEMA``, ``cdc.lsn_time_mapping``) is the same text for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: ``SET TRANSACTION ISOLATION LEVEL ...`` per snapshot.isolation.mode, T-SQL
_TSQL_ISOLATION = {
    "snapshot": "SNAPSHOT",
    "repeatable_read": "REPEATABLE READ",
    "exclusive": "REPEATABLE READ",
    "read_committed": "READ COMMITTED",
    "read_uncommitted": "READ UNCOMMITTED",
}
#: the stand-in: PostgreSQL's REPEATABLE READ is a snapshot of the whole database
_PG_ISOLATION = {
    "snapshot": "REPEATABLE READ",
    "repeatable_read": "REPEATABLE READ",
    "exclusive": "REPEATABLE READ",
    "read_committed": "READ COMMITTED",
    "read_uncommitted": "READ UNCOMMITTED",
}


@dataclass(frozen=True)
class Dialect:
    name: str
    #: quote characters around identifiers
    open_quote: str
    close_quote: str
    isolation_levels: dict[str, str]

    def quote(self, name: str) -> str:
        escaped = name.replace(self.close_quote, self.close_quote * 2)
        return f"{self.open_quote}{escaped}{self.close_quote}"

    def table(self, schema: str, table: str) -> str:
        return f"{self.quote(schema)}.{self.quote(table)}"

    # -- the statements ---------------------------------------------------------------------
    def database_cdc_enabled(self) -> str:
        return "SELECT is_cdc_enabled FROM sys.databases WHERE name = ?"

    def max_lsn(self) -> str:
        return "SELECT sys.fn_cdc_get_max_lsn()"

    def min_lsn(self) -> str:
        return "SELECT sys.fn_cdc_get_min_lsn(?)"

    def lsn_to_time(self) -> str:
        return "SELECT sys.fn_cdc_map_lsn_to_time(?)"

    def capture_instances(self) -> str:
        return (
            "SELECT s.name, t.name, ct.capture_instance, ct.start_lsn, ct.object_id, "
            "ct.source_object_id, ct.create_date "
            "FROM cdc.change_tables ct "
            "JOIN sys.tables t ON t.object_id = ct.source_object_id "
            "JOIN sys.schemas s ON s.schema_id = t.schema_id "
            "ORDER BY ct.start_lsn"
        )

    def tables(self) -> str:
        """Every user table (to name the included ones that have no capture instance)."""
        return (
            "SELECT s.name, t.name, t.is_tracked_by_cdc FROM sys.tables t "
            "JOIN sys.schemas s ON s.schema_id = t.schema_id"
        )

    def captured_columns(self) -> str:
        return (
            "SELECT cc.object_id, cc.column_name, cc.column_ordinal, cc.column_type "
            "FROM cdc.captured_columns cc ORDER BY cc.object_id, cc.column_ordinal"
        )

    def table_columns(self) -> str:
        return (
            "SELECT c.name, c.column_id, ty.name, c.max_length, c.precision, c.scale, "
            "c.is_nullable, c.is_identity "
            "FROM sys.columns c JOIN sys.types ty ON ty.user_type_id = c.user_type_id "
            "WHERE c.object_id = ? ORDER BY c.column_id"
        )

    def primary_key(self) -> str:
        return (
            "SELECT kcu.COLUMN_NAME FROM INFORMATION_SCHEMA.TABLE_CONSTRAINTS tc "
            "JOIN INFORMATION_SCHEMA.KEY_COLUMN_USAGE kcu "
            "ON kcu.CONSTRAINT_NAME = tc.CONSTRAINT_NAME "
            "AND kcu.TABLE_SCHEMA = tc.TABLE_SCHEMA AND kcu.TABLE_NAME = tc.TABLE_NAME "
            "WHERE tc.CONSTRAINT_TYPE = 'PRIMARY KEY' AND tc.TABLE_SCHEMA = ? "
            "AND tc.TABLE_NAME = ? ORDER BY kcu.ORDINAL_POSITION"
        )

    def transactions(self) -> str:
        """Commit LSNs and times in a window (``cdc.lsn_time_mapping``)."""
        return (
            "SELECT start_lsn, tran_end_time FROM cdc.lsn_time_mapping "
            "WHERE start_lsn >= ? AND start_lsn <= ? ORDER BY start_lsn"
        )

    def changes(self, capture_instance: str) -> str:
        fn = self.quote(f"fn_cdc_get_all_changes_{capture_instance}")
        order = ", ".join(self.quote(c) for c in ("__$start_lsn", "__$seqval", "__$operation"))
        return f"SELECT * FROM cdc.{fn}(?, ?, N'all update old') ORDER BY {order}"

    def snapshot_select(
        self, schema: str, table: str, columns: Sequence[str], key: Sequence[str] = ()
    ) -> str:
        """A table's rows; in ``key`` order when given (a resumable snapshot)."""
        cols = ", ".join(self.quote(c) for c in columns)
        order = f" ORDER BY {', '.join(self.quote(k) for k in key)}" if key else ""
        return f"SELECT {cols} FROM {self.table(schema, table)}{order}"

    def snapshot_select_after(
        self,
        schema: str,
        table: str,
        columns: Sequence[str],
        key: Sequence[str],
        narrow: Sequence[str] = (),
    ) -> str:
        """The rows after a key, in key order (a resumed snapshot): ``(k1, k2) > (?, ?)``
        written out as ``k1 > ? OR (k1 = ? AND k2 > ?)``, which T-SQL has no row comparison
        for; the parameters are the key's prefixes, see :func:`after_key_args`. ``narrow``:
        key columns of a non-Unicode type (char, varchar). pyodbc sends a str as nvarchar, and
        against nvarchar a varchar column compares by Unicode rules, while ORDER BY used the
        column's own (a SQL_* collation sorts '-' and "'" apart): a resume could skip rows. The
        parameter cast to varchar takes the column's collation."""
        keys = [self.quote(k) for k in key]
        marks = ["CAST(? AS varchar(8000))" if k in narrow else "?" for k in key]
        terms = []
        for i, k in enumerate(keys):
            equal = [f"{e} = {m}" for e, m in zip(keys[:i], marks[:i], strict=True)]
            terms.append("(" + " AND ".join([*equal, f"{k} > {marks[i]}"]) + ")")
        base = self.snapshot_select(schema, table, columns)
        return f"{base} WHERE {' OR '.join(terms)} ORDER BY {', '.join(keys)}"

    def reselect(
        self, schema: str, table: str, key_columns: Sequence[str], columns: Sequence[str], rows: int
    ) -> str:
        """The key and ``columns`` of ``rows`` rows by key, one ``?`` per key value (T-SQL
        has no row-value ``IN``)."""
        cols = ", ".join(self.quote(c) for c in [*key_columns, *columns])
        one = "(" + " AND ".join(f"{self.quote(k)} = ?" for k in key_columns) + ")"
        where = " OR ".join([one] * rows)
        return f"SELECT {cols} FROM {self.table(schema, table)} WHERE {where}"

    def set_isolation(self, mode: str) -> str:
        return f"SET TRANSACTION ISOLATION LEVEL {self.isolation_levels[mode]}"

    def lock_exclusive(self, schema: str, table: str) -> str:
        return f"SELECT TOP (0) * FROM {self.table(schema, table)} WITH (TABLOCKX)"


@dataclass(frozen=True)
class StandinDialect(Dialect):
    def lock_exclusive(self, schema: str, table: str) -> str:
        return f"LOCK TABLE {self.table(schema, table)} IN EXCLUSIVE MODE"


def after_key_args(after: Sequence[object]) -> list[object]:
    """The parameters of :meth:`Dialect.snapshot_select_after` for the key ``after``."""
    return [v for i in range(len(after)) for v in after[: i + 1]]


TSQL = Dialect("tsql", "[", "]", _TSQL_ISOLATION)
STANDIN = StandinDialect("postgres-standin", '"', '"', _PG_ISOLATION)
DIALECTS = {d.name: d for d in (TSQL, STANDIN)}
