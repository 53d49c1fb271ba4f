"""MySQL/MariaDB's side of ``tidemark verify``: the canonical text of each column in SQL.

The session runs in UTC (the connector's ``connect``), so a TIMESTAMP's epoch value is
``TIMESTAMPDIFF`` from 1970 in UTC; DATETIME is read as UTC, as the connector does. Every
canonical text is converted to utf8mb4 before it is hashed, so latin1 and other column
character sets hash as the UTF-8 the events carry. Text keys are ordered with
``utf8mb4_bin`` (code-point order). Columns of a type with no canonical form yet (spatial
types, BIT(n > 1)) are left out of the comparison and named in the report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cdc.config import Config
from cdc.engine import table_filter_from_config
from cdc.filters import ColumnFilter
from cdc.spi import TableId
from cdc.topics import TopicNamer
from cdc.verify.canonical import ColumnSpec, Kind, TableSpec
from cdc.verify.sql_side import Dialect, SqlSourceSide
from connectors.mysql import connection as myconn
from connectors.mysql.config import parse_config, tinyint_boolean_selectors
from connectors.mysql.state import BUILTIN_DATABASES

_KINDS: dict[str, Kind] = {
    **dict.fromkeys(("tinyint", "smallint", "mediumint", "int", "bigint", "year"), "int"),
    **dict.fromkeys(
        ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"),
        "text",
    ),
    **dict.fromkeys(("uuid", "inet4", "inet6"), "text"),
    **dict.fromkeys(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"), "bytes"),
    "decimal": "decimal",
    "numeric": "decimal",
    "float": "float32",
    "real": "float64",
    "double": "float64",
    "json": "json",
    "date": "date",
    "time": "time",
    "datetime": "timestamp",
    "timestamp": "timestamptz",
}

_COLUMNS_SQL = (
    "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, NUMERIC_SCALE, DATETIME_PRECISION "
    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
    "ORDER BY ORDINAL_POSITION"
)
_PK_SQL = (
    "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s "
    "AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION"
)


def column_spec(
    cfg: Config,
    data_type: str,
    column_type: str,
    scale: int | None,
    precision: int | None,
    name: str,
    boolean: bool,
) -> ColumnSpec | None:
    """The column as the connector converts it under ``cfg``'s handling modes."""
    dtype = data_type.lower()
    if dtype == "bit":
        return ColumnSpec(name, "bool", column_type) if column_type in ("bit", "bit(1)") else None
    if boolean:
        return ColumnSpec(name, "bool", column_type)
    kind = _KINDS.get(dtype)
    if kind is None:
        return None
    connect = cfg.get("time.precision.mode") == "connect"
    if dtype == "bigint" and "unsigned" in column_type:
        mode = str(cfg.get("bigint.unsigned.handling.mode") or "long")
        return ColumnSpec(name, "int", column_type, form="long" if mode == "long" else None)
    if dtype == "year":
        return ColumnSpec(name, "int", column_type, form="year")
    if kind == "decimal":
        mode = str(cfg.get("decimal.handling.mode") or "precise")
        if mode == "double":
            return ColumnSpec(name, "float64", column_type)
        return ColumnSpec(name, kind, column_type, scale=scale or 0, form=mode)
    if kind == "bytes":
        return ColumnSpec(name, kind, column_type, form=str(cfg.get("binary.handling.mode")))
    if kind == "timestamp":
        ms = connect or (precision or 0) <= 3
        return ColumnSpec(name, kind, column_type, unit="ms" if ms else "us")
    if kind == "time":
        return ColumnSpec(name, kind, column_type, unit="ms" if connect else "us")
    return ColumnSpec(name, kind, column_type)


class MySqlDialect(Dialect):
    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def quote(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def table_ref(self, spec: TableSpec) -> str:
        return f"{self.quote(spec.extra['database'])}.{self.quote(spec.extra['table'])}"

    def canonical(self, col: ColumnSpec, ref: str) -> str:
        return f"CONVERT({self._canonical(col, ref)} USING utf8mb4)"

    @staticmethod
    def _canonical(col: ColumnSpec, ref: str) -> str:
        k = col.kind
        if k == "int" and col.form == "long":  # BIGINT UNSIGNED wraps like Java's long
            return (
                f"CAST(IF({ref} > 9223372036854775807, CAST({ref} AS DECIMAL(20)) "
                f"- 18446744073709551616, {ref}) AS CHAR)"
            )
        if k == "int" and col.form == "year":
            return f"CAST({ref} + 0 AS CHAR)"
        if k == "bool":
            return f"IF({ref} IS NULL, NULL, IF({ref} = 1, 'true', 'false'))"
        if k in ("timestamp", "timestamptz"):
            micros = f"TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {ref})"
            return (
                f"CAST(FLOOR({micros} / 1000) AS CHAR)"
                if col.unit == "ms"
                else (f"CAST({micros} AS CHAR)")
            )
        if k == "time":  # HOUR() etc. of a negative TIME are absolute; TIME_TO_SEC varies
            micros = (
                f"(IF({ref} < TIME'00:00:00', -1, 1) * ((HOUR({ref}) * 3600 + MINUTE({ref}) * 60"
                f" + SECOND({ref})) * 1000000 + MICROSECOND({ref})))"
            )
            return (
                f"CAST(FLOOR({micros} / 1000) AS SIGNED)"
                if col.unit == "ms"
                else (f"CAST({micros} AS SIGNED)")
            )
        if k == "date":
            return f"CAST(DATEDIFF({ref}, '1970-01-01') AS CHAR)"
        if k == "bytes":
            return f"LOWER(HEX({ref}))"
        if k == "text":
            return ref
        return f"CAST({ref} AS CHAR)"

    def raw(self, col: ColumnSpec, ref: str) -> str:
        # the text protocol rounds FLOAT to 6 digits; +0e0 gives the stored float32 exactly
        return f"({ref} + 0e0)" if col.kind == "float32" else ref

    def text_order(self, ref: str) -> str:
        return f"(CONVERT({ref} USING utf8mb4) COLLATE utf8mb4_bin)"

    def length(self, expr: str) -> str:
        return f"CHAR_LENGTH({expr})"

    def concat(self, exprs: Sequence[str]) -> str:
        return f"CONCAT({', '.join(exprs)})"

    def md5(self, expr: str) -> str:
        return f"MD5({expr})"

    def hash60(self, md5_expr: str) -> str:
        return f"CAST(CONV(SUBSTRING({md5_expr}, 1, 15), 16, 10) AS UNSIGNED)"

    def query(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return myconn.query(self.conn, sql, list(params) if params else None)

    def close(self) -> None:
        self.conn.close()


def _is_boolean(
    patterns: tuple[Any, ...] | None, db: str, table: str, column: str, column_type: str
) -> bool:
    """``TinyIntOneToBooleanConverter``: TINYINT(1) columns its selector matches."""
    if patterns is None or not column_type.lower().startswith("tinyint(1)"):
        return False
    return not patterns or any(p.fullmatch(f"{db}.{table}.{column}") for p in patterns)


def verify_side(config: Mapping[str, Any]) -> SqlSourceSide:
    """The verify side of a MySQL/MariaDB connector config (resolved)."""
    cfg = parse_config(dict(config))
    conn = myconn.connect(cfg)
    system = BUILTIN_DATABASES if cfg["table.ignore.builtin"] else frozenset()
    included = table_filter_from_config(cfg, system).is_included
    columns = ColumnFilter(cfg.get("column.include.list", []), cfg.get("column.exclude.list", []))
    booleans = tinyint_boolean_selectors(cfg)
    namer = TopicNamer(cfg["database.server.name"])
    specs = []
    tables = myconn.query(
        conn,
        "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
        "WHERE TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_SCHEMA, TABLE_NAME",
    )
    for db, name in tables:
        table_id = TableId(str(db), None, str(name))
        if not included(table_id):
            continue
        compared: list[ColumnSpec] = []
        skipped: list[tuple[str, str]] = []
        for col, dtype, ctype, scale, precision in myconn.query(conn, _COLUMNS_SQL, [db, name]):
            if not columns.is_included(table_id, str(col)):
                continue
            spec = column_spec(
                cfg,
                str(dtype),
                str(ctype),
                scale,
                precision,
                str(col),
                _is_boolean(booleans, str(db), str(name), str(col), str(ctype)),
            )
            if spec is None:
                skipped.append((str(col), str(ctype)))
            else:
                compared.append(spec)
        key = tuple(str(r[0]) for r in myconn.query(conn, _PK_SQL, [db, name]))
        specs.append(
            TableSpec(
                identifier=table_id.identifier,
                topic=namer.data_topic(table_id),
                columns=tuple(compared),
                key=key,
                skipped=tuple(skipped),
                extra={"database": str(db), "table": str(name)},
            )
        )
    return SqlSourceSide(MySqlDialect(conn), specs)
