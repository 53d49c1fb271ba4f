"""The Delta tables the job writes: one per source table, plus its deleted-keys side table.

Tables are path-based (``<target.path>/<name>``), created on first sight from the event schema,
and carry the job's bookkeeping as table properties: the key columns (``tidemark.key``), the
ordering-key layout (``tidemark.ordering``) and the row-schema descriptors accepted so far
(``tidemark.schemas``). All DDL here is idempotent (IF NOT EXISTS, checks before ALTER), so a
replayed batch re-runs it harmlessly.

The job is the only writer, so table states are cached for the life of the job and updated as
DDL is issued rather than re-read every batch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from cdc.apply import sparktypes as st
from cdc.apply.config import ApplyConfig
from cdc.apply.policy import (
    ACCEPTED_PROPERTY,
    CELL_META_TYPES,
    DELETE_META_TYPES,
    KEY_PROPERTY,
    LAYOUT_PROPERTY,
    META_TYPES,
    TablePlan,
    TableState,
    is_cell_layout,
    state_from_schema,
)

log = logging.getLogger("tidemark.apply")


def sql_path(path: str) -> str:
    """``delta.`path``` with backticks in the path escaped."""
    return "delta.`" + path.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _props_sql(props: dict[str, str]) -> str:
    return ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in props.items())


@dataclass
class TableInfo:
    state: TableState
    deletes_nonempty: bool


class TableCatalog:
    def __init__(self, spark: Any, cfg: ApplyConfig) -> None:
        self.spark = spark
        self.cfg = cfg
        self._cache: dict[str, TableInfo | None] = {}

    # -- reading ------------------------------------------------------------------------------
    def info(self, table: str) -> TableInfo | None:
        if table not in self._cache:
            self._cache[table] = self._load(table)
        return self._cache[table]

    def state(self, table: str) -> TableState | None:
        info = self.info(table)
        return None if info is None else info.state

    def known_states(self) -> dict[str, TableState]:
        return {name: info.state for name, info in self._cache.items() if info is not None}

    def preload(self, names: list[str]) -> None:
        for name in names:
            self.info(name)

    def _load(self, table: str) -> TableInfo | None:
        from delta.tables import DeltaTable

        path = self.cfg.table_location(table)
        if not DeltaTable.isDeltaTable(self.spark, path):
            return None
        detail = self.spark.sql(f"DESCRIBE DETAIL {sql_path(path)}").collect()[0]
        props = dict(detail["properties"] or {})
        fields = self.spark.read.format("delta").load(path).schema.jsonValue()["fields"]
        state = state_from_schema(fields, props)
        if is_cell_layout(state.layout):
            self._add_cell_positions(path, {f["name"] for f in fields})
        if not state.key:
            raise RuntimeError(
                f"{path} is a Delta table without the {KEY_PROPERTY} property: it was not "
                "created by the apply job; choose another target.path or table name"
            )
        dpath = self.cfg.deletes_location(table)
        nonempty = False
        if DeltaTable.isDeltaTable(self.spark, dpath):
            ddetail = self.spark.sql(f"DESCRIBE DETAIL {sql_path(dpath)}").collect()[0]
            nonempty = int(ddetail["numFiles"] or 0) > 0
        return TableInfo(state, nonempty)

    def _add_cell_positions(self, path: str, names: set[str]) -> None:
        """A Cassandra table created before per-cell positions gets their column (null: every
        stored cell is at its row's position, as the MERGE then assumed)."""
        missing = [(n, t) for n, t in CELL_META_TYPES.items() if n not in names]
        if missing:
            cols = ", ".join(f"{st.quote(n)} {st.ddl(t)}" for n, t in missing)
            self.spark.sql(f"ALTER TABLE {sql_path(path)} ADD COLUMNS ({cols})")
            log.info("table at %s: added the per-cell position column", path)

    def mark_deletes(self, table: str) -> None:
        info = self._cache.get(table)
        if info is not None:
            info.deletes_nonempty = True

    # -- DDL ----------------------------------------------------------------------------------
    def apply(self, plan: TablePlan) -> bool:
        """Issues the plan's DDL; True when something changed."""
        if not plan.create and not plan.add and not plan.widen and not plan.new_accepted:
            return False
        path = self.cfg.table_location(plan.table)
        accepted = {ACCEPTED_PROPERTY: ",".join(sorted(plan.accepted))}
        if plan.create and plan.state is None:
            self._create(plan, path, accepted)
        else:
            self._evolve(plan, path)
            if plan.new_accepted:
                self.spark.sql(
                    f"ALTER TABLE {sql_path(path)} SET TBLPROPERTIES ({_props_sql(accepted)})"
                )
        columns = tuple(plan.columns.items())
        state = TableState(columns, plan.key, plan.layout, frozenset(plan.accepted))
        old = self._cache.get(plan.table)
        self._cache[plan.table] = TableInfo(state, old.deletes_nonempty if old else False)
        return True

    def _create(self, plan: TablePlan, path: str, extra: dict[str, str]) -> None:
        data = [(n, t) for n, t in plan.columns.items()]
        keys = [(k, plan.columns[k]) for k in plan.key]
        props = {KEY_PROPERTY: ",".join(plan.key), LAYOUT_PROPERTY: plan.layout, **extra}
        if self.cfg.schema_evolution == "evolve":
            props["delta.enableTypeWidening"] = "true"
        meta = [*META_TYPES.items()]
        if is_cell_layout(plan.layout):
            meta += CELL_META_TYPES.items()
        self._create_table(path, [*data, *meta], props)
        self._create_table(
            self.cfg.deletes_location(plan.table),
            [*keys, *DELETE_META_TYPES.items()],
            {KEY_PROPERTY: ",".join(plan.key)},
        )
        log.info(
            "created table %s at %s (key %s, %d columns)",
            plan.table,
            path,
            ", ".join(plan.key),
            len(data),
        )

    def _create_table(
        self, path: str, columns: list[tuple[str, Any]], props: dict[str, str]
    ) -> None:
        cols = ", ".join(f"{st.quote(n)} {st.ddl(t)}" for n, t in columns)
        self.spark.sql(
            f"CREATE TABLE IF NOT EXISTS {sql_path(path)} ({cols}) USING DELTA "
            f"TBLPROPERTIES ({_props_sql(props)})"
        )

    def _evolve(self, plan: TablePlan, path: str) -> None:
        existing = {f["name"]: f["type"] for f in self._fields(path)}
        adds = [(p, t) for p, t in plan.add if not self._has_path(existing, p)]
        if adds:
            cols = ", ".join(f"{p} {st.ddl(t)}" for p, t in adds)
            self.spark.sql(f"ALTER TABLE {sql_path(path)} ADD COLUMNS ({cols})")
            log.info("table %s: added column(s) %s", plan.table, ", ".join(p for p, _ in adds))
        for name, t in plan.widen:
            if existing.get(name) == t:
                continue
            self._widen(path, name, t)
            if name in plan.key:
                self._widen(self.cfg.deletes_location(plan.table), name, t)
            log.info("table %s: widened column %s to %s", plan.table, name, st.ddl(t))

    def _widen(self, path: str, name: str, t: Any) -> None:
        self.spark.sql(
            f"ALTER TABLE {sql_path(path)} CHANGE COLUMN {st.quote(name)} TYPE {st.ddl(t)}"
        )

    def _fields(self, path: str) -> list[dict[str, Any]]:
        fields: list[dict[str, Any]] = (
            self.spark.read.format("delta").load(path).schema.jsonValue()["fields"]
        )
        return fields

    @staticmethod
    def _has_path(existing: dict[str, Any], path: str) -> bool:
        """Whether a quoted column path (```a`.`b```) already exists."""
        parts = [p.replace("``", "`") for p in path[1:-1].split("`.`")]
        node: Any = existing.get(parts[0])
        for part in parts[1:]:
            if not (isinstance(node, dict) and node.get("type") == "struct"):
                return False
            node = st.struct_fields(node).get(part)
        return node is not None
