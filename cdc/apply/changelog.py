"""Merge-on-read tables (``table.type: merge-on-read``): Hudi's MERGE_ON_READ for Delta.

Why: a position-guarded MERGE per micro-batch joins the batch against the whole table (random
keys touch every file), so its cost grows with the table, not the batch; measured, it is two
thirds of a batch's CPU and keeps the copy-on-write apply near 0.2x of a plain append
(docs/benchmarks.md). A merge-on-read table pays that join once per ``compaction.every``
batches instead:

* **a batch** appends its rows (already folded to one row per key and Kafka partition by the
  workers, typed as the MERGE source) to the table's *change log*,
  ``<target.path>/_tidemark/changes/<table>``, with Delta's idempotent-write options keyed by
  batch id, so a replayed batch appends nothing twice;
* **a compaction** folds the change log to one row per key (:func:`fold`) and runs the same
  position-guarded MERGE and deleted-keys append as a copy-on-write batch
  (:func:`cdc.apply.merge.merge_table`), then empties the change log. Replaying it changes
  nothing (every step compares positions with ``>``; its deleted-keys append is keyed by the
  batch id under its own app id);
* **readers** see the table as of the last compaction at the table's path (Hudi's
  read-optimized view) or the current state through :func:`read` (the real-time view): the
  base rows and the change log folded together by position, the deleted-keys guard applied.
  The change log is read before the table, so a compaction (MERGE, then empty the log)
  running meanwhile can show a change twice, which the fold absorbs, never not at all.

What stays copy-on-write: a batch with a truncate, a primary-key change, MongoDB patches or a
schema change of the table, and every batch of a table whose columns may be unset
(Cassandra, custom ``ordering.fields``). Such a batch first compacts the change log, then
MERGEs as a copy-on-write table would: their semantics need the stored row, which the log
does not have.

The fold gives what applying the log's rows one batch after another would: per key the row
with the highest position; each column that may hold a TOAST placeholder takes, from all rows
of the key, the value with the highest *value position* (the position of the change that
carried it, which a worker's in-batch fill recorded in ``_tm_fills``), unless that change was a
delete: a placeholder does not reach back across one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cdc.apply import cell_merge, cells, deltas
from cdc.apply import sparktypes as st
from cdc.apply.merge import MergeCounts, guard_deleted, merge_table
from cdc.apply.policy import DESCRIPTOR as _DESCRIPTOR
from cdc.apply.policy import FILLS as _FILLS
from cdc.apply.policy import UNAVAILABLE as _UNAVAILABLE
from cdc.apply.policy import TablePlan
from cdc.apply.tables import sql_path, sql_string

#: app id suffix of a compaction's deleted-keys append: a batch that compacts and then MERGEs
#: its own rows appends deletes twice under the same batch id
COMPACTION_APP = "-compaction"
_FILLS_TYPE = "map<string,array<bigint>>"
#: a change log is only ever read whole (fold, real-time view), so Delta's per-file column
#: statistics buy nothing there; collecting them was ~0.5 s of a 250k batch's log append
#: (docs/benchmarks.md). Delta takes it when a log is created (not on a later append or
#: overwrite: a log created before this setting keeps its statistics).
NO_STATS = "delta.dataSkippingNumIndexedCols"


def supports(plan: TablePlan) -> bool:
    """Tables the change log can hold: every column of a row is in the row (see above)."""
    return not cells.keeps_stored(plan) and not plan.keep_absent


def append(
    spark: Any, typed: Any, location: str, app_id: str, batch_id: int, *, empty: bool = False
) -> None:
    """Appends a batch's typed rows (:func:`cdc.apply.merge.typed_rows`) to the change log.

    ``empty``: this job emptied the log since it last wrote it (a compaction). The rows then
    replace it, schema included: a column widened since (INT to BIGINT) cannot be merged into
    the old log schema, and an empty log has nothing to lose. Otherwise an append that may add
    columns (a schema change compacts the log first, so only additions remain)."""
    writer = (
        typed.write.format("delta")
        .option("txnAppId", app_id)
        .option("txnVersion", batch_id)
        .option(NO_STATS, "0")
    )
    if empty:
        writer = writer.mode("overwrite").option("overwriteSchema", "true")
    else:
        writer = writer.mode("append").option("mergeSchema", "true")
    writer.save(location)


def is_empty(spark: Any, location: str) -> bool:
    """Whether the change log at ``location`` holds no row (or does not exist)."""
    if not exists(spark, location):
        return True
    return not spark.read.format("delta").load(location).limit(1).count()


def exists(spark: Any, location: str) -> bool:
    from delta.tables import DeltaTable

    return bool(DeltaTable.isDeltaTable(spark, location))


def compact(
    spark: Any,
    plan: TablePlan,
    path: str,
    deletes_path: str,
    location: str,
    *,
    deletes_nonempty: bool,
    policy: str,
    app_id: str,
    batch_id: int,
    lap: Callable[[str], None] = lambda _: None,
) -> MergeCounts | None:
    """MERGEs the change log into the table and empties it of what was merged; None when it
    held nothing.

    The log is read at one version, and only the rows of that version are removed afterwards:
    by Kafka partition, those at or below the highest offset read. A running job may append a
    batch meanwhile (an on-demand compaction beside it); that batch's offsets are higher in
    every partition, so it stays for the next compaction instead of being removed unmerged
    (a plain ``DELETE FROM`` would remove it, and the job has already committed its offsets)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    if not exists(spark, location):
        return None
    version = DeltaTable.forPath(spark, location).history(1).collect()[0]["version"]
    log = spark.read.format("delta").option("versionAsOf", version).load(location)
    reached = log.groupBy("__topic", "__partition").agg(F.max("__offset").alias("offset")).collect()
    if not reached:
        return None
    folded = fold(log, plan)
    counts = merge_table(
        spark,
        folded,
        plan,
        path,
        deletes_path,
        deletes_nonempty=deletes_nonempty,
        has_deletes=True,
        policy=policy,
        app_id=app_id + COMPACTION_APP,
        batch_id=batch_id,
        lap=lap,
    )
    # After the MERGE: a crash in between leaves the log to be merged again, a no-op.
    merged = " OR ".join(
        f"(__topic = {sql_string(r['__topic'])} AND __partition = {int(r['__partition'])} "
        f"AND __offset <= {int(r['offset'])})"
        for r in reached
    )
    spark.sql(f"DELETE FROM {sql_path(location)} WHERE {merged}")
    lap("compact")
    return counts


def fold(rows: Any, plan: TablePlan) -> Any:
    """One row per key, as if the rows had been applied in position order (module docstring).
    ``rows`` has the columns of :func:`cdc.apply.merge.typed_rows`.

    A Cassandra table's rows (a key folded by two worker tasks) are folded the same way with
    every column a placeholder column (any may be unset), and the row's cut
    (:data:`cells.CUT`) is the newest delete or cut of any of the key's rows: a value one task
    took from before a delete the other task saw is then not kept (cell_merge.py). A set or
    map whose newest write in either task was a delta keeps that delta (with what it removed)
    for the MERGE: the other task's older writes of that column are not applied under it."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    keys = [F.col(k) for k in plan.key]
    latest = Window.partitionBy(*keys).orderBy(F.col("__pos").desc())
    everything = Window.partitionBy(*keys)
    every = cells.is_cell_table(plan)
    sets = deltas.columns(plan.columns, plan.key) if deltas.REMOVED in rows.columns else {}
    placeholder_cols = [
        c
        for c, t in plan.columns.items()
        if c not in plan.key and (every or st.can_hold_placeholder(t))
    ]
    if cells.CUT in rows.columns:
        deleted_at = F.when(F.col("__op") == "d", F.col("__pos"))
        cut = F.max(F.greatest(F.col(cells.CUT), deleted_at)).over(everything)
        rows = rows.withColumn(cells.CUT, cut)
    if cell_merge.SOURCE_MARKER in rows.columns:  # the newest row marker of either part
        marker = F.max(cell_merge.SOURCE_MARKER).over(everything)
        rows = rows.withColumn(cell_merge.SOURCE_MARKER, marker)
    unavailable = F.coalesce(F.col(_UNAVAILABLE), F.array().cast("array<string>"))
    fills = F.coalesce(F.col(_FILLS), F.create_map().cast(_FILLS_TYPE))
    # The row number first: its sort (key, position) also serves the per-key windows below,
    # which Spark then evaluates in one pass over one sort instead of sorting twice.
    rows = rows.withColumn("_tm_rn", F.row_number().over(latest))
    if not placeholder_cols:
        return rows.filter("_tm_rn = 1").drop("_tm_rn")
    best = {}
    candidates = []
    for i, c in enumerate(placeholder_cols):
        carried = F.col("__op") == "d"
        has_value = carried | ~F.array_contains(unavailable, c)
        value_pos = F.when(carried, F.col("__pos")).otherwise(F.coalesce(fills[c], F.col("__pos")))
        fields = [F.col(st.quote(c)).alias("v"), carried.alias("gone"), value_pos.alias("p")]
        if c in sets:  # a Cassandra delta's removed elements go with its value (deltas.py)
            fields.append(F.col(deltas.REMOVED).getField(c).alias("rm"))
        candidate = F.struct(*fields)
        best[c] = f"_tm_best_{i}"
        candidates.append(
            F.max_by(F.when(has_value, candidate), F.when(has_value, value_pos))
            .over(everything)
            .alias(best[c])
        )
    rows = rows.select("*", *candidates).filter("_tm_rn = 1")
    taken = {
        c: F.col(best[c]).isNotNull() & ~F.col(best[c]).getField("gone") for c in placeholder_cols
    }
    # A Cassandra column whose newest candidate is a delete: the winner's value is a fill from
    # before it (its own write would be newer), so it has no cell.
    gone = {
        c: F.col(best[c]).isNotNull() & F.col(best[c]).getField("gone") if every else F.lit(False)
        for c in placeholder_cols
    }
    out = rows
    for c in placeholder_cols:
        out = out.withColumn(
            c,
            F.when(taken[c], F.col(best[c]).getField("v"))
            .when(gone[c], F.lit(None))
            .otherwise(F.col(st.quote(c))),
        )
    filled = F.array(*[F.when(taken[c], F.lit(c)) for c in placeholder_cols])
    if every:
        emptied = F.array_compact(F.array(*[F.when(gone[c], F.lit(c)) for c in placeholder_cols]))
        unavailable = F.array_union(unavailable, emptied)
    entries = F.array(
        *[
            F.when(taken[c], F.struct(F.lit(c).alias("k"), F.col(best[c]).getField("p")))
            for c in placeholder_cols
        ]
    )
    if sets:
        removed = [
            F.when(taken[c], F.col(best[c]).getField("rm"))
            .when(gone[c], F.lit(None))
            .otherwise(F.col(deltas.REMOVED).getField(c))
            .alias(c)
            for c in sets
        ]
        out = out.withColumn(deltas.REMOVED, F.struct(*removed))
    out = out.withColumn(_UNAVAILABLE, F.array_except(unavailable, filled))
    out = out.withColumn(
        _FILLS,
        F.map_from_entries(F.filter(entries, lambda e: e.isNotNull())).cast(_FILLS_TYPE),
    )
    helpers = ["_tm_rn", *best.values()]
    return out.drop(*helpers)


def read(spark: Any, plan: TablePlan, path: str, deletes_path: str, location: str) -> Any:
    """The real-time view: the table's rows as they are after every logged change, with the
    table's columns. The change log is read (and so pinned by Delta) before the table."""
    from pyspark.sql import functions as F

    if not exists(spark, location):
        return spark.read.format("delta").load(path)
    log = spark.read.format("delta").load(location)
    base = spark.read.format("delta").load(path)
    log = guard_deleted(spark, log, list(plan.key), deletes_path)
    stored = (
        base.withColumn(_UNAVAILABLE, F.array().cast("array<string>"))
        .withColumn(_FILLS, F.lit(None).cast(_FILLS_TYPE))
        .withColumn(_DESCRIPTOR, F.lit(None).cast("string"))
    )
    both = stored.unionByName(log, allowMissingColumns=True)
    current = fold(both, plan).filter(F.col("__op") != "d")
    return current.select(*[F.col(st.quote(c)) for c in base.columns])
