"""Cassandra topics: cell-level writes merged into the stored row.

A Cassandra write is an upsert of the cells it names, nothing more: no read before write, so
the connector's ``after`` holds each non-key column as a cell ``{value, deletion_ts, set}``
with ``set: true`` for the columns the mutation wrote and ``null`` (or ``set: false``) for the
others, whose value is unknown, not null. In the lake the table's columns are the plain values:

* ``c``/``u``: the written cells are unwrapped to their ``value``; every unset column is listed
  as *unavailable*, the same mark a TOAST placeholder gets, so the fold fills it from an earlier
  change of the key in the batch and the MERGE keeps the stored value (a new row gets null).
  ``c`` is not an insert-only: an ``INSERT`` over an existing row is an upsert in Cassandra.
* a deleted cell (``set: true``, ``value: null``) sets the column to null;
* ``r`` (a snapshot read) is the whole row: an unset column there is null;
* ``d`` of a row removes the row (the ordinary delete). A partition delete on a table with
  clustering columns has those key columns null: after the MERGE, :func:`delete_partitions`
  removes every stored row of the partition older than the delete. The deleted-keys side table
  records it with its null key columns, and :func:`guard` drops later-arriving writes of that
  partition that are older than it (the per-key guard cannot match nulls).

Which envelopes are Cassandra's is read from ``source.connector`` (or the position fields), and
which schema fields are cells from their shape, so the value schema gives the column types.

**Debezium's own Cassandra connector** (checked against ``debezium-connector-cassandra-5``
3.4.0.Final on the real node) writes the same cells with four differences the job reads too:
``op`` is ``i`` for an insert and for a snapshot read (then ``source.snapshot`` is ``"true"``),
key columns are cells as well, ``after`` carries ``_range_start``/``_range_end`` (null but for
a range delete) and there is no ``before``. Its ``r`` is a *range delete*
(``DELETE ... WHERE ck > x``), not a snapshot read: it is applied as one (ranges.py), never
as a row upserted with null clustering columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cdc.apply import cell_merge
from cdc.apply.policy import is_cell_layout

if TYPE_CHECKING:
    from cdc.apply.policy import TablePlan

CELL_FIELDS = frozenset({"value", "deletion_ts", "set"})
#: a non-frozen set's or map's fourth cell field: what a write by element removed (deltas.py)
REMOVED = "removed"
#: Debezium's range tombstone bounds, fields of every ``after`` it writes (not columns)
RANGE_FIELDS = frozenset({"_range_start", "_range_end"})
_NONE: frozenset[str] = frozenset()


class CellError(ValueError):
    """A Cassandra column whose value is not a cell struct (named in the message)."""


def debezium_op(op: str, payload: Mapping[str, Any]) -> str:
    """The common op code of an ``i`` or ``r`` event of Debezium's Cassandra connector: ``i``
    is ``c``, or ``r`` when ``source.snapshot`` says it is a snapshot read. Its ``r`` (an
    ``after`` with the range bound fields: Debezium's ``r`` is only ever a range tombstone) is
    a range delete, ``d`` (read as one by ranges.py). Other connectors' ops are returned as
    they are (tidemark's Cassandra connector writes ``c``/``r`` for rows, and ``d`` with
    bounds for a range delete)."""
    from cdc.apply.ordering import is_snapshot

    source = payload.get("source")
    if not isinstance(source, Mapping) or source.get("connector") != "cassandra":
        return op
    if op == "i":
        return "r" if is_snapshot(source, None) else "c"
    if "ts_micro" in source:
        return op  # tidemark's: a snapshot read (with null range bounds under emit)
    after = payload.get("after")
    if isinstance(after, Mapping) and any(f in after for f in RANGE_FIELDS):
        if not isinstance(after.get("_range_start"), Mapping):
            # never a partition delete by accident: a range delete needs its bounds
            raise CellError("Debezium's Cassandra op 'r' (a range delete) without its bounds")
        return "d"
    return op


#: the date type Debezium's Cassandra connector writes (tidemark's writes Connect's Date)
DEBEZIUM_DATE = "io.debezium.time.Date"
_DAYS_BIAS = 1 << 31


def raw_date(days: Any) -> Any:
    """Days since the epoch from a ``date`` of Debezium's Cassandra connector, which writes
    Cassandra's stored form: the days plus 2**31, read as a signed 32-bit int (2024-05-06 is
    -2147463799, not 19849; checked in its snapshot and its stream). Values within 2**30 days
    of the epoch (beyond any date Spark holds) are taken as they are, should Debezium fix it."""
    if isinstance(days, int) and not -(1 << 30) <= days < (1 << 30):
        return (days + 2 * _DAYS_BIAS) % (1 << 32) - _DAYS_BIAS
    return days


def _is_range_field(field: Mapping[str, Any]) -> bool:
    return field.get("field") in RANGE_FIELDS and field.get("type") == "struct"


def is_cassandra(source: Mapping[str, Any], connector: str) -> bool:
    """The event is Cassandra's (also when ``ordering.fields`` hides the detected connector)."""
    return connector == "cassandra" or source.get("connector") == "cassandra"


def is_cassandra_source_schema(schema: Any) -> bool:
    """The envelope schema's ``source`` struct is a Cassandra connector's: tidemark's (with
    ``ts_micro``) or Debezium's (named just ``source``, with the cluster and commit log)."""
    if not isinstance(schema, Mapping):
        return False
    names = {f.get("field") for f in schema.get("fields") or () if isinstance(f, Mapping)}
    return (
        {"keyspace", "ts_micro"} <= names
        or {"cluster", "keyspace", "file", "pos"} <= names
        or "cassandra" in str(schema.get("name") or "")
    )


def plain_field(field: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A cell struct's schema field as the schema of its ``value``, under the column's name
    (optional: an unset or deleted cell is null); None for Debezium's range bounds (not a
    column); any other field as it is."""
    if field.get("type") != "struct":
        return field
    if _is_range_field(field):
        return None
    inner = {f.get("field"): f for f in field.get("fields") or () if isinstance(f, Mapping)}
    if set(inner) - {REMOVED} != CELL_FIELDS:
        return field
    return {**inner["value"], "field": field.get("field"), "optional": True}


def unwrap(
    image: Mapping[str, Any], key: Mapping[str, Any], op: str
) -> tuple[dict[str, Any], frozenset[str], dict[str, list[Any]] | None]:
    """The row of a Cassandra ``after`` with plain values, the columns the change did not
    write (to keep their stored value), and the sets and maps it wrote by element: column ->
    the elements (keys) it removed (deltas.py). Key columns are plain (tidemark) or cells
    (Debezium)."""
    row: dict[str, Any] = {}
    unset: list[str] = []
    removed: dict[str, list[Any]] | None = None
    for col, cell in image.items():
        if col in key:
            is_cell = isinstance(cell, Mapping) and cell.keys() >= CELL_FIELDS
            row[col] = cell.get("value") if is_cell else cell
            continue
        if col in RANGE_FIELDS and (cell is None or isinstance(cell, Mapping)):
            continue  # the range bounds: null here (a range delete is read by ranges.py)
        if cell is None:
            row[col] = None
            unset.append(col)
            continue
        if not isinstance(cell, Mapping) or "set" not in cell:
            raise CellError(
                f"column {col!r} of a Cassandra event is not a cell "
                "{value, deletion_ts, set} (was the topic written by the Cassandra connector?)"
            )
        row[col] = cell.get("value") if cell["set"] else None
        if not cell["set"]:
            unset.append(col)
        elif isinstance(gone := cell.get(REMOVED), list) and op != "r":
            removed = removed or {}
            removed[col] = gone
    if op == "r" or not unset:
        return row, _NONE, removed  # a snapshot read is the whole row
    return row, frozenset(unset), removed


def keeps_stored(plan: TablePlan) -> bool:
    """Any column of the table, whatever its type, may be unset in a change (so the MERGE must
    be able to keep its stored value): Cassandra tables, and tables ordered by
    ``ordering.fields``, whose connector the layout does not name."""
    return ":cassandra:" in plan.layout or ":custom(" in plan.layout


def is_cell_table(plan: TablePlan) -> bool:
    return is_cell_layout(plan.layout)


# -- partition deletes ---------------------------------------------------------------------------
def _null_key(plan: TablePlan) -> Any:
    """Some key column is null: a partition delete (a row delete names every key column)."""
    from pyspark.sql import functions as F

    cond = F.lit(False)
    for k in plan.key:
        cond = cond | F.col(k).isNull()
    return cond


def partition_deletes(rows: Any, plan: TablePlan) -> Any:
    """The batch's partition deletes."""
    from pyspark.sql import functions as F

    return rows.filter((F.col("__op") == "d") & _null_key(plan))


def _patterns(deletes: Any, plan: TablePlan) -> list[list[str]]:
    """The key columns the partition deletes name, one list per pattern of null key columns
    (in practice one: the partition key)."""
    from pyspark.sql import functions as F

    flags = [F.col(k).isNotNull().alias(k) for k in plan.key]
    found = deletes.select(*flags).distinct().collect()
    return [named for r in found if (named := [k for k in plan.key if r[k]])]


def _named_exactly(named: list[str], plan: TablePlan) -> Any:
    from pyspark.sql import functions as F

    cond = F.lit(True)
    for k in plan.key:
        cond = cond & (F.col(k).isNotNull() if k in named else F.col(k).isNull())
    return cond


def guard(spark: Any, source: Any, plan: TablePlan, deletes_path: str) -> Any:
    """The batch's rows against the deletes recorded in earlier batches (the deleted-keys side
    table: row deletes by key, partition deletes with their null key columns, which a per-key
    match cannot find). A row not above the newest delete of its key or partition is dropped
    (a replayed or late older write must not bring the row back); a newer one gets that
    delete as its cut (:data:`CUT`), since the fold may have taken some of its cells from an
    older write of the batch, which the delete shadows (cell_merge.py)."""
    from pyspark.sql import functions as F

    log = spark.read.format("delta").load(deletes_path)
    patterns = [list(plan.key), *_patterns(log.filter(_null_key(plan)), plan)]
    out = source  # typed_rows gives a Cassandra table's rows their CUT
    for named in patterns:
        latest = (
            log.filter(_named_exactly(named, plan))
            .groupBy(*named)
            .agg(F.max("__pos").alias("_tm_gone"))
        )
        gone = F.col("_tm_gone")
        out = (
            out.join(latest, on=named, how="left")
            .filter(gone.isNull() | (F.col("__pos") > gone))
            .withColumn(CUT, F.greatest(F.col(CUT), gone))
            .drop("_tm_gone")
        )
    return out


def delete_partitions(spark: Any, typed: Any, plan: TablePlan, path: str) -> int:
    """Removes the stored rows of each partition deleted in the batch whose position is below
    the delete's; rows written after the delete lose only their cells older than it
    (cell_merge.py). Returns how many partition deletes the batch had."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from cdc.apply.sparktypes import quote as q

    deletes = partition_deletes(typed, plan).select(*plan.key, "__pos").cache()
    try:
        for named in _patterns(deletes, plan):
            source = (
                deletes.filter(_named_exactly(named, plan))
                .groupBy(*named)
                .agg(F.max("__pos").alias("__pos"))
            )
            on = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in named)
            cols = [c for c in plan.columns if c not in plan.key]
            (
                DeltaTable.forPath(spark, path)
                .alias("t")
                .merge(source.alias("s"), on)
                .whenMatchedDelete(condition=cell_merge.removes(cols, "s.__pos"))
                .whenMatchedUpdate(
                    condition=cell_merge.cut_condition("s.__pos"),
                    set=cell_merge.cut_set(cols, "s.__pos"),
                )
                .execute()
            )
        return int(deletes.count())
    finally:
        deletes.unpersist()


# -- writes after a delete in the same batch -------------------------------------------------------
#: the position of the newest delete of the batch that covers a row (cell_merge.py)
CUT = cell_merge.CUT


def with_cuts(spark: Any, typed: Any, plan: TablePlan, range_deletes: list[Any]) -> Any:
    """``typed`` with :data:`CUT` raised to the position of the newest delete of this batch (a
    partition delete, or a range delete: ``range_deletes`` as ranges.py parses them) that
    covers the row's key (typed_rows starts it at the fold's row-delete horizon). A row
    written after such a delete lives anew: what the fold took from writes before the delete,
    and what the table stored before it, is gone (Cassandra's tombstone shadows those cells),
    so the MERGE must not keep it (cell_merge.py)."""
    from pyspark.sql import functions as F

    from cdc.apply import ranges

    cuts = []
    deletes = partition_deletes(typed, plan).select(*plan.key, "__pos")
    for named in _patterns(deletes, plan):
        latest = (
            deletes.filter(_named_exactly(named, plan))
            .groupBy(*named)
            .agg(F.max("__pos").alias("_tm_c"))
        )
        cuts.append((named, latest))
    if range_deletes:
        cuts.append((list(plan.key), ranges.covering(spark, plan, typed, range_deletes)))
    out = typed
    for on, cut in cuts:
        out = out.join(cut, on=on, how="left").withColumn(
            CUT,
            F.when(F.col(CUT).isNull() | (F.col("_tm_c") > F.col(CUT)), F.col("_tm_c")).otherwise(
                F.col(CUT)
            ),
        )
        out = out.drop("_tm_c")
    return out
