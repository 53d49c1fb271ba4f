"""What the connector reads of SQL Server's catalog: capture instances, their captured
columns, the source tables' structure, the database's CDC state and LSN bounds.

Read at start and on every poll (capture instances come and go while the connector runs: a
table enabled for CDC, the second instance of the online schema-evolution procedure).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cdc.spi import Column, Table, TableId
from connectors.sqlserver.dialect import Dialect
from connectors.sqlserver.errors import CdcNotEnabled
from connectors.sqlserver.offsets import Lsn

log = logging.getLogger("tidemark.sqlserver.schema")


@dataclass(frozen=True)
class CaptureInstance:
    """One ``cdc.change_tables`` row: a change table of one source table."""

    name: str
    schema: str
    table: str
    start_lsn: Lsn | None
    object_id: int
    source_object_id: int
    columns: tuple[str, ...] = field(default=())
    create_date: Any = None

    def table_id(self, database: str) -> TableId:
        return TableId(database, self.schema, self.table)


def enable_table_call(schema: str, table: str) -> str:
    return (
        f"EXEC sys.sp_cdc_enable_table @source_schema = N'{schema}', @source_name = N'{table}', "
        "@role_name = NULL"
    )


def _size(
    type_name: str, max_length: int | None, precision: int | None, scale: int | None
) -> tuple[int | None, int | None]:
    """(length, scale) of a column as Debezium reports them: characters for n-strings,
    precision for decimals, fractional digits for temporal types."""
    kind = type_name.lower()
    if kind in ("decimal", "numeric"):
        return precision, scale
    if kind in ("datetime2", "datetimeoffset", "time"):
        return None, scale
    if max_length is None or max_length < 0:
        return None, None
    if kind in ("nchar", "nvarchar"):
        return max_length // 2, None
    return max_length, None


class Catalog:
    """Catalog queries on one pyodbc connection (autocommit)."""

    def __init__(self, conn: Any, dialect: Dialect, database: str) -> None:
        self.conn = conn
        self.dialect = dialect
        self.database = database

    def _rows(self, sql: str, *params: Any) -> list[Any]:
        cur = self.conn.cursor()
        try:
            cur.execute(sql, *params)
            return list(cur.fetchall())
        finally:
            cur.close()

    def check_cdc_enabled(self) -> None:
        rows = self._rows(self.dialect.database_cdc_enabled(), self.database)
        if not rows or not rows[0][0]:
            raise CdcNotEnabled(
                [
                    (
                        "database.names",
                        f"CDC is not enabled on database {self.database!r}: run "
                        f"`USE [{self.database}]; EXEC sys.sp_cdc_enable_db` as a member of "
                        "sysadmin, then enable each table with sys.sp_cdc_enable_table",
                    )
                ]
            )

    def max_lsn(self) -> Lsn | None:
        rows = self._rows(self.dialect.max_lsn())
        return Lsn.of(rows[0][0]) if rows else None

    def min_lsn(self, instance: str) -> Lsn | None:
        rows = self._rows(self.dialect.min_lsn(), instance)
        return Lsn.of(rows[0][0]) if rows else None

    def table_ids(self) -> list[TableId]:
        return [
            TableId(self.database, str(s), str(t)) for s, t, _ in self._rows(self.dialect.tables())
        ]

    def lsn_time(self, lsn: Lsn) -> Any:
        """``sys.fn_cdc_map_lsn_to_time``: the commit time of the transaction at ``lsn``."""
        rows = self._rows(self.dialect.lsn_to_time(), lsn.raw)
        return rows[0][0] if rows else None

    def instances(self) -> list[CaptureInstance]:
        """Every capture instance, oldest first, with its captured columns in order."""
        columns: dict[int, list[str]] = {}
        for object_id, name, _ordinal, _type in self._rows(self.dialect.captured_columns()):
            columns.setdefault(int(object_id), []).append(name)
        return [
            CaptureInstance(
                name=str(inst),
                schema=str(schema),
                table=str(table),
                start_lsn=Lsn.of(start),
                object_id=int(obj),
                source_object_id=int(src),
                columns=tuple(columns.get(int(obj), ())),
                create_date=created,
            )
            for schema, table, inst, start, obj, src, created in self._rows(
                self.dialect.capture_instances()
            )
        ]

    def table(self, inst: CaptureInstance) -> Table:
        """The source table as the capture instance sees it: its captured columns, in the
        change table's order, typed from ``sys.columns``."""
        captured = set(inst.columns)
        cols: list[Column] = []
        for name, _cid, type_name, max_length, precision, scale, nullable, identity in self._rows(
            self.dialect.table_columns(), inst.source_object_id
        ):
            if captured and name not in captured:
                continue
            length, col_scale = _size(str(type_name), max_length, precision, scale)
            cols.append(
                Column(
                    name=str(name),
                    position=len(cols),
                    type_name=str(type_name),
                    length=length,
                    scale=col_scale,
                    optional=bool(nullable),
                    auto_increment=bool(identity),
                )
            )
        order = {n: i for i, n in enumerate(inst.columns)}
        cols.sort(key=lambda c: order.get(c.name, len(order)))
        cols = [replace(c, position=i) for i, c in enumerate(cols)]
        pk = tuple(
            str(r[0]) for r in self._rows(self.dialect.primary_key(), inst.schema, inst.table)
        )
        return Table(
            inst.table_id(self.database),
            tuple(cols),
            pk,
            extra={"capture_instance": inst.name},
        )


def instance_of(table: Table) -> str:
    """The capture instance a table's structure was read from (:meth:`Catalog.table`)."""
    return str(table.extra.get("capture_instance", ""))


def current_instances(
    instances: list[CaptureInstance], included: Callable[[TableId], bool], database: str
) -> dict[TableId, list[CaptureInstance]]:
    """Included tables and their capture instances, oldest first (two during the online
    schema-evolution procedure)."""
    out: dict[TableId, list[CaptureInstance]] = {}
    for inst in instances:
        tid = inst.table_id(database)
        if included(tid):
            out.setdefault(tid, []).append(inst)
    for lst in out.values():
        lst.sort(key=lambda i: i.start_lsn.raw if i.start_lsn else b"")
    return out


def check_captured(
    catalog: Catalog,
    included: Callable[[TableId], bool],
    explicit: bool,
    captured: Mapping[TableId, object],
) -> None:
    """Fail naming the ``sys.sp_cdc_enable_table`` call for each table the include list names
    that has no capture instance (SQL Server would never report its changes); with no
    include list such tables are only logged."""
    missing = [t for t in catalog.table_ids() if included(t) and t not in captured]
    if missing and explicit:
        calls = "; ".join(enable_table_call(t.schema or "dbo", t.table) for t in missing[:5])
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        names = ", ".join(f"{t.schema}.{t.table}" for t in missing[:5])
        raise CdcNotEnabled(
            [
                (
                    "table.include.list",
                    f"CDC is not enabled on {names}{more} in database {catalog.database!r}: "
                    f"run {calls}",
                )
            ]
        )
    for t in missing:
        log.warning(
            "table %s is not enabled for CDC and is not captured: %s",
            t,
            enable_table_call(t.schema or "dbo", t.table),
        )
    if not captured:
        raise CdcNotEnabled(
            [
                (
                    "table.include.list",
                    f"no table of database {catalog.database!r} selected by the include/"
                    "exclude lists has CDC enabled: enable each with "
                    + enable_table_call("<schema>", "<table>"),
                )
            ]
        )


def explicit_tables(cfg: Any) -> bool:
    """Tables are named (``table.include.list``), not just whatever has CDC enabled."""
    return bool(cfg["table.include.list"])
