"""PostgreSQL's side of ``tidemark verify``: the canonical text of each column in SQL.

Each column's canonical text (``cdc.verify.canonical``) is written with casts so the server
computes the chunk checksums; the session runs in UTC (the connector's session options), and
``extract(epoch ...)`` of a ``timestamp`` reads it as UTC, as the connector does. Text keys are
ordered with ``COLLATE "C"`` (code-point order, like Python's). Columns of a type with no
canonical form yet (arrays, intervals, geometric types, ranges, money, bit strings, ...) are
left out of the comparison and named in the report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from cdc.config import Config
from cdc.engine import table_filter_from_config
from cdc.filters import ColumnFilter
from cdc.topics import TopicNamer
from cdc.verify.canonical import ColumnSpec, Kind, TableSpec
from cdc.verify.sql_side import Dialect, SqlSourceSide
from connectors.postgres import connection as pgconn
from connectors.postgres import types as pgtypes
from connectors.postgres.config import CONFIG_DEF

_KINDS: dict[int, Kind] = {
    pgtypes.BOOL: "bool",
    pgtypes.INT2: "int",
    pgtypes.INT4: "int",
    pgtypes.INT8: "int",
    pgtypes.OID: "int",
    pgtypes.TEXT: "text",
    pgtypes.VARCHAR: "text",
    pgtypes.BPCHAR: "text",
    pgtypes.NAME: "text",
    pgtypes.UUID: "text",
    pgtypes.INET: "text",
    pgtypes.CIDR: "text",
    pgtypes.MACADDR: "text",
    pgtypes.XML: "text",
    pgtypes.NUMERIC: "decimal",
    pgtypes.DATE: "date",
    pgtypes.TIME: "time",
    pgtypes.TIMESTAMP: "timestamp",
    pgtypes.TIMESTAMPTZ: "timestamptz",
    pgtypes.BYTEA: "bytes",
    pgtypes.FLOAT4: "float32",
    pgtypes.FLOAT8: "float64",
    pgtypes.JSON: "json",
    pgtypes.JSONB: "json",
}


def _precision(typmod: int) -> int:
    return 6 if typmod < 0 else typmod


def column_spec(
    cfg: Config, name: str, oid: int, typmod: int, type_name: str, enum: bool
) -> ColumnSpec | None:
    """The column as the connector converts it under ``cfg``'s handling modes."""
    kind: Kind | None = "text" if enum else _KINDS.get(oid)
    if kind is None:
        return None
    time_mode = str(cfg.get("time.precision.mode") or "adaptive")
    if kind == "decimal":
        mode = str(cfg.get("decimal.handling.mode") or "precise")
        if mode == "double":
            return ColumnSpec(name, "float64", type_name)
        scale = None if typmod < 4 else (typmod - 4) & 0xFFFF
        return ColumnSpec(name, kind, type_name, scale=scale, form=mode)
    if kind == "bytes":
        return ColumnSpec(name, kind, type_name, form=str(cfg.get("binary.handling.mode")))
    if kind == "timestamp":
        ms = time_mode == "connect" or _precision(typmod) <= 3
        return ColumnSpec(name, kind, type_name, unit="ms" if ms else "us")
    if kind == "time":
        ms = time_mode == "connect" or (time_mode == "adaptive" and _precision(typmod) <= 3)
        return ColumnSpec(name, kind, type_name, unit="ms" if ms else "us")
    return ColumnSpec(name, kind, type_name)


class PostgresDialect(Dialect):
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def quote(self, name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    def table_ref(self, spec: TableSpec) -> str:
        return f"{self.quote(spec.extra['schema'])}.{self.quote(spec.extra['table'])}"

    def canonical(self, col: ColumnSpec, ref: str) -> str:
        k = col.kind
        if k == "decimal" and col.scale is None and col.form == "precise":
            # a numeric without scale loses its trailing zeros in the event, as Debezium's
            # (stripTrailingZeros): 1.50 is 1.5, 0.00 is 0, 100 stays 100
            t = f"({ref})::text"
            return f"(CASE WHEN strpos({t}, '.') > 0 THEN rtrim(rtrim({t}, '0'), '.') ELSE {t} END)"
        if k in ("int", "decimal"):
            return f"({ref})::text"
        if k == "text":
            # concat() keeps char(n) padding (a ::text cast strips it; the connector does not)
            return f"(CASE WHEN {ref} IS NOT NULL THEN concat({ref}) END)"
        if k == "bool":
            return f"(CASE WHEN {ref} THEN 'true' WHEN NOT {ref} THEN 'false' END)"
        if k in ("timestamp", "timestamptz", "time"):
            if col.unit == "ms":
                return f"(floor(extract(epoch FROM {ref}) * 1000)::bigint)::text"
            return f"((extract(epoch FROM {ref}) * 1000000)::bigint)::text"
        if k == "date":
            return f"(({ref}) - DATE '1970-01-01')::text"
        if k == "bytes":
            return f"encode({ref}, 'hex')"
        return f"({ref})::text"

    def text_order(self, ref: str) -> str:
        return f'(({ref})::text COLLATE "C")'

    def length(self, expr: str) -> str:
        return f"length({expr})::text"

    def concat(self, exprs: Sequence[str]) -> str:
        return "(" + " || ".join(exprs) + ")"

    def md5(self, expr: str) -> str:
        return f"md5({expr})"

    def hash60(self, md5_expr: str) -> str:
        return f"(('x' || substr({md5_expr}, 1, 15))::bit(60)::bigint)"

    def query(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        cur = self.conn.execute(sql, params or None)
        return list(cur.fetchall())

    def close(self) -> None:
        self.conn.close()


def verify_side(config: Mapping[str, Any]) -> SqlSourceSide:
    """The verify side of a PostgreSQL connector config (resolved, as the worker passes it)."""
    cfg = CONFIG_DEF.parse(dict(config))
    conn = pgconn.connect(cfg)
    included = table_filter_from_config(cfg, pgconn.SYSTEM_SCHEMAS).is_included
    columns = ColumnFilter(cfg.get("column.include.list", []), cfg.get("column.exclude.list", []))
    namer = TopicNamer(cfg["database.server.name"])
    specs = []
    for table_id, oid in pgconn.list_tables(conn, cfg["database.dbname"]):
        if not included(table_id):
            continue
        table = pgconn.load_table(conn, table_id, oid)
        enums = {
            int(r[0])
            for r in conn.execute(
                "SELECT oid FROM pg_type WHERE typtype = 'e' AND oid = ANY(%s)",
                ([c.native_type for c in table.columns],),
            ).fetchall()
        }
        specs.append(table_spec(cfg, table, enums, columns, namer))
    return SqlSourceSide(PostgresDialect(conn), specs)


def table_spec(
    cfg: Config, table: Any, enums: set[int], columns: ColumnFilter, namer: TopicNamer
) -> TableSpec:
    compared: list[ColumnSpec] = []
    skipped: list[tuple[str, str]] = []
    for c in table.columns:
        if not columns.is_included(table.id, c.name):
            continue
        spec = (
            None
            if c.dimensions
            else column_spec(
                cfg, c.name, c.native_type, c.type_modifier, c.type_name, c.native_type in enums
            )
        )
        if spec is None:
            skipped.append((c.name, c.type_name))
        else:
            compared.append(spec)
    return TableSpec(
        identifier=f"{table.id.schema}.{table.id.table}",
        topic=namer.data_topic(table.id),
        columns=tuple(compared),
        key=tuple(table.primary_key),
        skipped=tuple(skipped),
        extra={"schema": table.id.schema, "table": table.id.table},
    )
