"""Position-guarded MERGE: the ``DebeziumAvroPayload`` role of Hudi RFC-39, with the fix for its
out-of-order delete limitation.

Per table and batch, with ``s`` the batch's one row per key and ``t`` the stored row:

1. **Guard against deleted keys.** Rows whose position is not above the position remembered
   for a deleted key are dropped. This is the RFC's "keep the ordering value of each record
   even after deletion": Insert(1), Delete(3), Update(2) in three batches leaves the row deleted.
2. **MERGE into the table** on the key columns::

     WHEN MATCHED AND s.op = 'd' AND s.pos > t.pos      THEN DELETE          -- hard delete
     WHEN MATCHED AND s.op <> 'd' AND s.pos > t.pos     THEN UPDATE SET ...
     WHEN NOT MATCHED AND s.op <> 'd'                   THEN INSERT ...      -- r/c/u: upsert

   An update's TOAST placeholder columns keep ``t``'s value (or take the in-batch value that
   preceded the placeholder, unless ``t`` is newer than that value).
3. **Append the batch's deletes to the deleted-keys side table** (key, position). The guard
   reads the highest position per key, so a record whose key was re-inserted later is harmless
   (the table row's own, higher position guards the key from then on); :func:`compact_deletes`
   periodically rewrites the side table down to the keys that are still deleted.

Why a side table and not a ``__deleted`` marker row in the table: the data table stays a true
mirror of the source (hard deletes; readers need no view or filter), and deleted keys cost
nothing in scans of the data table.

Every step compares positions with ``>`` (the append is keyed by batch id with Delta's
idempotent writes), so running a batch again changes nothing: that, with Spark's checkpointed
Kafka offsets, makes the job exactly-once in effect. Step 3 after step 2: if the job dies in
between, the replay's step 2 is a no-op and step 3 completes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cdc.apply import cell_merge as cm
from cdc.apply import cells, deltas
from cdc.apply import sparktypes as st
from cdc.apply.policy import DELETE_META_TYPES, META_TYPES, TablePlan
from cdc.apply.policy import DESCRIPTOR as _DESCRIPTOR
from cdc.apply.policy import FILLS as _FILLS
from cdc.apply.policy import UNAVAILABLE as _UNAVAILABLE
from cdc.apply.tables import sql_string

_DELETED_AT = "_tm_deleted_pos"


@dataclass
class MergeCounts:
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    #: deletes appended to the deleted-keys side table
    deletes_recorded: int = 0
    #: rows of the batch that changed nothing (older than the table, replayed, deletes of
    #: absent keys)
    unchanged: int = 0
    #: rows held after this batch until a key change's old key hands over a value
    held: int = 0
    #: held or batch rows filled with values handed over across key changes
    filled: int = 0
    #: rows appended to a merge-on-read table's change log (changelog.py)
    logged: int = 0
    #: change-log compactions whose MERGE these counts include
    compactions: int = 0

    def add(self, other: MergeCounts) -> None:
        self.inserted += other.inserted
        self.updated += other.updated
        self.deleted += other.deleted
        self.deletes_recorded += other.deletes_recorded
        self.unchanged += other.unchanged
        self.held += other.held
        self.filled += other.filled
        self.logged += other.logged
        self.compactions += other.compactions


def q(name: str) -> str:
    return st.quote(name)


def typed_rows(rows: Any, plan: TablePlan, *, dedupe: bool) -> Any:
    """The batch's rows of one table with typed columns and the meta/helper columns."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.window import Window

    if dedupe:
        # Only needed when a key's changes came through more than one Kafka partition.
        w = Window.partitionBy("key_json").orderBy(F.col("pos").desc())
        rows = rows.withColumn("_tm_rn", F.row_number().over(w)).filter("_tm_rn = 1")
    read = plan.read_types()
    struct = T.StructType.fromJson(st.struct_of(list(read.items())))
    parsed = rows.withColumn("_tm_row", F.from_json("row_json", struct, {"mode": "FAILFAST"}))
    cols = []
    for name, t in plan.columns.items():
        c = F.col("_tm_row").getField(name)
        if name in plan.cast:
            c = F.expr(f"try_cast(_tm_row.{q(name)} AS {st.ddl(t)})")
        cols.append(c.alias(name))
    meta = {
        "__op": F.col("op"),
        "__pos": F.col("pos"),
        "__source_ts_ms": F.col("source_ts_ms"),
        "__ts_ms": F.col("ts_ms"),
        "__tx_id": F.col("tx_id"),
        "__snapshot": F.col("snapshot"),
        "__source_position": F.col("position"),
        "__topic": F.col("topic"),
        "__partition": F.col("partition"),
        "__offset": F.col("offset"),
    }
    assert set(meta) == set(META_TYPES)
    cols += [c.alias(n) for n, c in meta.items()]
    cols += [
        F.col("unavailable").alias(_UNAVAILABLE),
        F.col("fills").alias(_FILLS),
        F.col("descriptor").alias(_DESCRIPTOR),
    ]
    if cells.is_cell_table(plan):  # a row written after a row delete of the batch (fold.py)
        cols.append(F.col("cut").alias(cells.CUT))
        cols.append(F.col("marker").alias(cm.SOURCE_MARKER))
        collections = deltas.columns(plan.columns, plan.key)
        if collections:  # what the deltas of sets and maps removed (deltas.py)
            removed = T.StructType.fromJson(st.struct_of(list(collections.items())))
            cols.append(F.from_json("removed_json", removed).alias(deltas.REMOVED))
    return parsed.select(*cols)


#: the table property that keeps the newest TRUNCATE's position: the deleted-key records
#: older than it are removed with the rows, so it is what keeps an older event of a later
#: batch (another partition lagging, a re-sent event) from bringing a row back
TRUNCATED = "tidemark.truncated.position"


def native_part(pos: Sequence[int], order: str) -> tuple[int, int]:
    """(start, length) of the source's own position inside an ordering position:
    ``(phase, *native, offset)`` under ``before-stream``, ``(*native, phase, offset)``
    otherwise. A truncate is compared by it: a snapshot read after the truncate (a
    re-snapshot) has phase 0, below every streamed position, yet is newer than it."""
    return (1, len(pos) - 2) if order == "before-stream" else (0, len(pos) - 2)


def truncate(spark: Any, path: str, deletes_path: str, pos: list[int], order: str) -> None:
    """A source TRUNCATE: remove every row (and deleted-key record) older than it, and keep
    its position in the table's properties (:data:`TRUNCATED`)."""
    start, length = native_part(pos, order)
    native = pos[start : start + length]
    literal = "array(" + ", ".join(f"{int(p)}L" for p in native) + ")"
    older = f"slice(__pos, {start + 1}, {length}) < {literal}"
    from cdc.apply.tables import sql_path, sql_string

    spark.sql(f"DELETE FROM {sql_path(path)} WHERE {older}")
    spark.sql(f"DELETE FROM {sql_path(deletes_path)} WHERE {older}")
    text = sql_string(",".join(str(int(p)) for p in pos))
    spark.sql(f"ALTER TABLE {sql_path(path)} SET TBLPROPERTIES ('{TRUNCATED}' = {text})")


def truncated_position(spark: Any, path: str) -> list[int] | None:
    """The newest TRUNCATE applied to the table at ``path`` (:func:`truncate`), if any."""
    from cdc.apply.tables import sql_path

    try:
        rows = spark.sql(f"SHOW TBLPROPERTIES {sql_path(path)}").collect()
    except Exception:  # no table there yet
        return None
    for row in rows:
        if row[0] == TRUNCATED:
            return [int(p) for p in str(row[1]).split(",") if p]
    return None


def merge_table(
    spark: Any,
    source: Any,
    plan: TablePlan,
    path: str,
    deletes_path: str,
    *,
    deletes_nonempty: bool,
    has_deletes: bool,
    policy: str,
    app_id: str = "tidemark-apply",
    batch_id: int = 0,
    lap: Callable[[str], None] = lambda _: None,
) -> MergeCounts:
    from delta.tables import DeltaTable

    counts = MergeCounts()
    keys = list(plan.key)
    on = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in keys)
    guarded = source
    if deletes_nonempty:
        if cells.is_cell_table(plan):  # partition deletes, and cuts (cells.py)
            guarded = cells.guard(spark, source, plan, deletes_path)
        else:
            guarded = guard_deleted(spark, source, keys, deletes_path)

    absent = absent_by_column(plan) if policy == "ignore" else {}
    merge = DeltaTable.forPath(spark, path).alias("t").merge(guarded.alias("s"), on)
    if cells.is_cell_table(plan):
        merge = _cell_clauses(merge, plan, absent)
    else:
        data_cols = list(plan.columns)
        every = cells.keeps_stored(plan)  # custom ordering.fields: any column may be unset
        update_set: dict[str, Any] = {
            q(c): _update_expr(c, plan.columns[c], absent.get(c), every=every) for c in data_cols
        }
        update_set.update({q(m): f"s.{q(m)}" for m in META_TYPES})
        insert_values: dict[str, Any] = {q(c): f"s.{q(c)}" for c in [*data_cols, *META_TYPES]}
        merge = (
            merge.whenMatchedDelete(condition="s.__op = 'd' AND s.__pos > t.__pos")
            .whenMatchedUpdate(condition="s.__op <> 'd' AND s.__pos > t.__pos", set=update_set)
            .whenNotMatchedInsert(condition="s.__op <> 'd'", values=insert_values)
        )
    result = merge.execute()
    metrics = result.collect()[0] if result is not None else None
    if metrics is not None:
        counts.inserted = int(metrics["num_inserted_rows"] or 0)
        counts.updated = int(metrics["num_updated_rows"] or 0)
        counts.deleted = int(metrics["num_deleted_rows"] or 0)
    lap("merge")
    if has_deletes:
        record_deletes(spark, source, keys, deletes_path, app_id, batch_id)
        lap("deletes")
    return counts


def guard_deleted(spark: Any, source: Any, keys: list[str], deletes_path: str) -> Any:
    """``source`` without the rows a recorded delete of their key supersedes (the delete's
    position is not below the row's): an anti-join on the key with the position compared in
    the join condition. The same rows as keeping those above the highest delete position per
    key, without aggregating the whole deleted-keys log first: the log (key and position only)
    is usually small enough to broadcast, so no shuffle of the batch either."""
    from pyspark.sql import functions as F

    deleted = (
        spark.read.format("delta")
        .load(deletes_path)
        .select(*[F.col(k).alias(f"_tm_d_{i}") for i, k in enumerate(keys)], "__pos")
        .withColumnRenamed("__pos", _DELETED_AT)
    )
    cond = [source[k] == deleted[f"_tm_d_{i}"] for i, k in enumerate(keys)]
    return source.join(
        deleted, on=[*cond, deleted[_DELETED_AT] >= source["__pos"]], how="left_anti"
    )


def record_deletes(
    spark: Any, source: Any, keys: list[str], deletes_path: str, app_id: str, batch_id: int
) -> None:
    """Appends the batch's deletes (key, position) to the deleted-keys log.

    An append, not a MERGE: the guard reads the highest position per key, so older or stale
    records are harmless (a stale delete's key is still guarded by the table row's higher
    position), and appending costs a fraction of a MERGE. Delta's idempotent-write options make
    a replayed batch append nothing twice. :func:`compact_deletes` keeps the log small.
    """
    from pyspark.sql import functions as F

    rows = source.filter(F.col("__op") == "d").select(
        *[F.col(k) for k in keys], *[F.col(m) for m in DELETE_META_TYPES]
    )
    (
        rows.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", batch_id)
        .save(deletes_path)
    )


def without_stored(
    spark: Any, records: Any, path: str, keys: list[str], newer: Callable[[Any], Any]
) -> Any:
    """``records`` (by key) without those whose key the table at ``path`` holds at a position
    ``newer(row position)`` accepts: a side table's records the table has absorbed."""
    from pyspark.sql import functions as F

    alive = (
        spark.read.format("delta")
        .load(path)
        .select(*[F.col(k).alias(f"_tm_k_{i}") for i, k in enumerate(keys)], "__pos")
        .withColumnRenamed("__pos", "_tm_row_pos")
    )
    cond = [records[k] == alive[f"_tm_k_{i}"] for i, k in enumerate(keys)]
    return records.join(alive, on=[*cond, newer(alive["_tm_row_pos"])], how="left_anti")


def compact_deletes(spark: Any, path: str, deletes_path: str, keys: list[str]) -> None:
    """Rewrites the deleted-keys log as one record per key that is still deleted: the highest
    position per key, minus keys the table holds again at a higher position. Deterministic and
    replay-safe; run every ``deletes.compact.every`` batches."""
    from pyspark.sql import functions as F

    log = spark.read.format("delta").load(deletes_path)
    latest = log.groupBy(*[F.col(k) for k in keys]).agg(
        F.max_by(F.struct(*[F.col(m) for m in DELETE_META_TYPES]), F.col("__pos")).alias("_tm_d")
    )
    kept = without_stored(spark, latest, path, keys, lambda row_pos: row_pos > F.col("_tm_d.__pos"))
    kept = kept.select(
        *[F.col(k) for k in keys], *[F.col(f"_tm_d.{m}").alias(m) for m in DELETE_META_TYPES]
    )
    # Delta pins the read to the snapshot it planned with, so overwriting the table being read
    # is safe.
    kept.write.format("delta").mode("overwrite").save(deletes_path)


def _update_expr(col: str, t: Any, absent_in: Iterable[str] | None, *, every: bool = False) -> str:
    c = q(col)
    expr = f"s.{c}"
    if every or st.can_hold_placeholder(t):
        lit = sql_string(col)
        expr = (
            f"CASE WHEN array_contains(s.{_UNAVAILABLE}, {lit}) THEN t.{c} "
            f"WHEN s.{_FILLS}[{lit}] IS NOT NULL AND t.__pos > s.{_FILLS}[{lit}] THEN t.{c} "
            f"ELSE s.{c} END"
        )
    if absent_in:
        ids = ", ".join(sql_string(d) for d in sorted(absent_in))
        expr = f"CASE WHEN s.{_DESCRIPTOR} IN ({ids}) THEN t.{c} ELSE {expr} END"
    return expr


def _cell_clauses(merge: Any, plan: TablePlan, absent: dict[str, set[str]]) -> Any:
    """A Cassandra table's clauses: last write wins per cell (cell_merge.py). A delete newer
    than the stored row, or after which nothing of it survives, removes it; an older one cuts
    the cells it is newer than. A write after which the row has neither a cell with a value
    nor a row marker removes it too (or stores no new row), as Cassandra then shows none."""
    cols = [c for c in plan.columns if c not in plan.key]
    sets = deltas.columns(plan.columns, plan.key)  # sets and maps written by element
    return (
        merge.whenMatchedDelete(condition="s.__op = 'd' AND " + cm.removes(cols, "s.__pos"))
        .whenMatchedUpdate(
            condition="s.__op = 'd' AND " + cm.cut_condition("s.__pos"),
            set=cm.cut_set(cols, "s.__pos"),
        )
        .whenMatchedDelete(condition=cm.update_removes(cols, absent, sets))
        .whenMatchedUpdate(
            condition=cm.update_condition(cols, absent), set=cm.update_set(cols, absent, sets)
        )
        .whenNotMatchedInsert(
            condition=cm.insert_condition(cols, absent, sets),
            values=cm.insert_values(plan.key, cols, absent, sets),
        )
    )


def absent_by_column(plan: TablePlan) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for did, cols in plan.keep_absent.items():
        for c in cols:
            out.setdefault(c, set()).add(did)
    return out


def write_quarantine(spark: Any, errors: Any, location: str, app_id: str, batch_id: int) -> None:
    """Appends bad events to the quarantine table. Delta's idempotent-write options make a
    replayed batch append nothing the second time."""
    from pyspark.sql import functions as F

    out = errors.select(
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("tbl").alias("table"),
        F.col("descriptor"),
        F.col("info").alias("error"),
        F.col("raw_key").alias("key"),
        F.col("raw_value").alias("value"),
        F.lit(batch_id).cast("long").alias("batch_id"),
        F.current_timestamp().alias("quarantined_at"),
    )
    (
        out.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", batch_id)
        .save(location)
    )
