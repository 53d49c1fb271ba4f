"""Cassandra tables: the cell deletes of rows that are gone, kept for later batches.

A Cassandra row lives while it has a cell with a value or a row marker (cell_merge.py), so a
write that nulls the last cell of a row no ``INSERT`` made removes the row from the lake, and
an ``UPDATE`` that only nulls columns of a row the lake does not hold stores none. The row's
cell tombstones went with it: a *late* write of an older time to such a column (client-side
timestamps, hints, one connector per replica) would then make a row Cassandra does not show,
since Cassandra's tombstone shadows it. A live row keeps its tombstones in ``__cells``; a gone
one keeps them here.

* every batch appends, per key, the positions of the nulls its rows wrote (and the row's cut,
  under ``""``) to ``<target.path>/_tidemark/tombstones/<table>``, for the rows that write no
  value and no row marker: which of them die is only known inside the MERGE, and the others
  stay live, holding their tombstones in ``__cells``. (Not kept: a late write whose values all
  lose to newer stored cells while its nulls take the row's last live cell; its nulls go with
  the row.)
* a later batch's rows are guarded with them: a column whose recorded tombstone is not older
  than the batch's cell becomes that tombstone (null at its position), and the cut rises to the
  recorded one, so the MERGE decides the row as if it had never left the table;
* every ``deletes.compact.every`` batches the log keeps one record per key, the newest position
  per column, and forgets the keys the table holds at or above it (the stored row has absorbed
  them: its ``__cells`` has every tombstone that won).

Replays append nothing twice (Delta's idempotent writes by batch id).
"""

from __future__ import annotations

from typing import Any

from cdc.apply import cell_merge, deltas
from cdc.apply import sparktypes as st
from cdc.apply.merge import without_stored
from cdc.apply.policy import CELLS, TablePlan
from cdc.apply.policy import FILLS as _FILLS
from cdc.apply.policy import UNAVAILABLE as _UNAVAILABLE
from cdc.apply.tables import sql_string

_APP = "-tombstones"
_TOMBS = "_tm_tombs"


def exists(spark: Any, location: str) -> bool:
    from delta.tables import DeltaTable

    return bool(DeltaTable.isDeltaTable(spark, location))


def _data_columns(plan: TablePlan) -> list[str]:
    return [c for c in plan.columns if c not in plan.key]


def record(
    spark: Any,
    source: Any,
    plan: TablePlan,
    location: str,
    absent: cell_merge.Absent,
    app_id: str,
    batch_id: int,
) -> None:
    """Appends the written nulls (column -> position) and cuts of the batch's rows that may
    leave the table or not enter it: rows writing no value and no row marker. (A row that
    writes a value, or an ``INSERT``, stays in the table, with its tombstones in ``__cells``;
    left out of the log, they keep it small where most writes set values.)"""
    from pyspark.sql import functions as F

    collections = deltas.columns(plan.columns, plan.key)
    values = [
        f"({cell_merge.source_sets(c, absent)} AND s.{st.quote(c)} IS NOT NULL"
        + (f" AND size(s.{st.quote(c)}) > 0)" if c in collections else ")")
        for c in _data_columns(plan)
    ]
    dies = f"s.__op <> 'd' AND s.{cell_merge.SOURCE_MARKER} IS NULL"
    if values:
        dies += f" AND NOT ({' OR '.join(values)})"
    entries = [
        f"CASE WHEN {cell_merge.source_sets(c, absent)} AND s.{st.quote(c)} IS NULL "
        f"THEN named_struct('k', {sql_string(c)}, 'v', {cell_merge.source_pos(c)}) END"
        for c in _data_columns(plan)
    ]
    entries.append(
        f"CASE WHEN s.{cell_merge.CUT} IS NOT NULL "
        f"THEN named_struct('k', {sql_string(cell_merge.HORIZON)}, 'v', s.{cell_merge.CUT}) END"
    )
    tombs = F.expr(f"map_from_entries(array_compact(array({', '.join(entries)})))")
    rows = (
        source.alias("s")
        .filter(dies)
        .select(
            *[F.col(f"s.{st.quote(k)}").alias(k) for k in plan.key], "s.__pos", tombs.alias(CELLS)
        )
        .filter(F.size(CELLS) > 0)
    )
    if rows.isEmpty():
        return
    (
        rows.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id + _APP)
        .option("txnVersion", batch_id)
        .save(location)
    )


def _latest(log: Any, plan: TablePlan) -> Any:
    """One row per key: the newest recorded position per column (``_tm_tombs``), and the
    newest row position."""
    from pyspark.sql import functions as F

    keys = list(plan.key)
    cells = log.select(*keys, "__pos", F.explode(CELLS).alias("_tm_c", "_tm_p"))
    per_column = cells.groupBy(*keys, "_tm_c").agg(
        F.max("_tm_p").alias("_tm_p"), F.max("__pos").alias("__pos")
    )
    return per_column.groupBy(*keys).agg(
        F.map_from_entries(F.collect_list(F.struct("_tm_c", "_tm_p"))).alias(_TOMBS),
        F.max("__pos").alias("__pos"),
    )


def guard(spark: Any, source: Any, plan: TablePlan, location: str) -> Any:
    """``source`` with the recorded tombstones of its keys: a column whose tombstone is not
    older than the row's cell (or that the row does not write) becomes null at the tombstone's
    position, and the row's cut rises to a recorded one (module docstring)."""
    from pyspark.sql import functions as F

    keys = list(plan.key)
    latest = _latest(spark.read.format("delta").load(location), plan).drop("__pos")
    out = source.join(latest, on=keys, how="left")
    tombs = F.col(_TOMBS)
    unavailable = F.coalesce(F.col(_UNAVAILABLE), F.array().cast("array<string>"))
    fills = F.col(_FILLS)
    cols = _data_columns(plan)
    loses = {}
    for c in cols:
        t = tombs[c]
        pos = F.coalesce(fills[c], F.col("__pos"))
        unset = F.array_contains(unavailable, c)
        loses[c] = t.isNotNull() & (unset | (t >= pos)) & (F.col("__op") != "d")
    fill_entries = [
        F.when(loses[c], F.struct(F.lit(c).alias("k"), tombs[c].alias("v"))).when(
            fills[c].isNotNull(), F.struct(F.lit(c).alias("k"), fills[c].alias("v"))
        )
        for c in cols
    ]
    taken = F.array_compact(F.array(*[F.when(loses[c], F.lit(c)) for c in cols]))
    replaced = {
        c: F.when(loses[c], F.lit(None)).otherwise(F.col(st.quote(c))).alias(c) for c in cols
    }
    horizon = tombs[cell_merge.HORIZON]
    cut = F.when(
        horizon.isNotNull() & (F.col(cell_merge.CUT).isNull() | (horizon > F.col(cell_merge.CUT))),
        horizon,
    ).otherwise(F.col(cell_merge.CUT))
    helpers = {cell_merge.CUT: cut}
    if cols:  # a table of key columns only has no cells to shadow
        helpers[_UNAVAILABLE] = F.array_except(unavailable, taken)
        helpers[_FILLS] = F.map_from_entries(F.array_compact(F.array(*fill_entries)))
    sets = deltas.columns(plan.columns, plan.key) if deltas.REMOVED in source.columns else {}
    if sets:  # a tombstone that wins replaces a delta whole
        removed = F.col(deltas.REMOVED)
        helpers[deltas.REMOVED] = F.struct(
            *[F.when(loses[c], F.lit(None)).otherwise(removed.getField(c)).alias(c) for c in sets]
        )
    chosen = []
    for name in source.columns:
        if name in replaced:
            chosen.append(replaced[name])
        elif name in helpers:
            chosen.append(helpers[name].alias(name))
        else:
            chosen.append(F.col(st.quote(name)))
    return out.select(*chosen)


def compact(spark: Any, path: str, location: str, plan: TablePlan) -> None:
    """One record per key (the newest position per column), without the keys the table holds
    at or above the record (module docstring)."""
    from pyspark.sql import functions as F

    keys = list(plan.key)
    latest = _latest(spark.read.format("delta").load(location), plan)
    kept = without_stored(
        spark, latest, path, keys, lambda row_pos: row_pos >= latest["__pos"]
    ).select(*keys, "__pos", F.col(_TOMBS).alias(CELLS))
    # Delta pins the read to the snapshot it planned with: overwriting the log read is safe.
    kept.write.format("delta").mode("overwrite").save(location)
