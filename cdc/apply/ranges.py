"""Cassandra range deletes (``DELETE ... WHERE ck > x``): every stored row of the partition
whose clustering key lies between the two bounds loses its cells older than the delete, and
goes when none is left (cell_merge.py).

Two producers write them: tidemark's Cassandra connector with
``range.delete.handling.mode=emit`` (a ``d`` whose ``after`` carries typed bounds and the
clustering columns' CQL types and order) and Debezium's own agent (an ``r`` whose bounds hold
each value as text with its Cassandra type, in no particular order). Both are reduced here, in
the worker, to one form the driver needs no schema knowledge for (:func:`parse`):

* ``eq``: the partition key and the clustering prefix both bounds share, as equalities;
* ``cols``: the clustering columns after that prefix, with whether each is descending;
* ``start``/``end``: the bounds' values on those columns (a prefix; empty: unbounded) and
  whether each bound includes rows equal to it.

Bounds are in clustering order, so a descending column compares the other way. Comparing in
Spark gives Cassandra's order where a type's order is its value's (numbers, text, blobs,
dates and times); ``uuid``, ``timeuuid``, ``inet`` and a ``decimal``/``varint`` the lake holds
as exact text compare by a sort key built from their text as Cassandra orders them
(:func:`sort_key`). A bound that needs ordering on another type (a tuple, a frozen
collection, a UDT; ``duration`` cannot be a clustering column) is bad input (``on.error``),
never applied by a wrong order.

The driver (:func:`delete_ranges`) runs after the batch's MERGE: rows the batch wrote before
the delete are removed with the stored ones, rows written after it (a higher position) stay,
and start anew (:func:`covering` marks them for the MERGE: cells.with_cuts); a stored row
with cells newer than the delete (written with a newer time, arriving earlier) keeps those.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cdc.apply.policy import TablePlan

#: the range bound fields of ``after`` (tidemark's and Debezium's names)
RANGE_FIELDS = ("_range_start", "_range_end")

#: CQL types whose order is their value's in Spark (a range may be compared on them)
_ORDERED = frozenset(
    {
        "tinyint",
        "smallint",
        "int",
        "bigint",
        "float",
        "double",
        "boolean",
        "text",
        "ascii",
        "varchar",
        "timestamp",
        "date",
        "time",
        "blob",
    }
)
#: CQL types compared by a sort key built from their text (their order is not the text's):
#: ``uuid``/``timeuuid`` (:func:`_uuid_key`), ``inet`` (:func:`_inet_key`), and ``decimal``/
#: ``varint`` where the lake holds them as exact text (:func:`_number_key`)
_KEYED = frozenset({"uuid", "timeuuid", "inet"})
_NUMBERS = frozenset({"decimal", "varint"})
#: Spark types (their JSON names, as sparktypes.spark_type gives them) a ``decimal``/``varint``
#: column may have in the lake that order as numbers
_NUMERIC_SPARK = re.compile(r"(byte|short|integer|long|float|double|decimal\(\d+,\d+\))")
_REVERSED = "org.apache.cassandra.db.marshal.ReversedType("


class RangeError(ValueError):
    """A range delete this job cannot apply exactly (the message says why)."""


def is_range_delete(after: Any) -> bool:
    """``after`` carries a range bound: the event is a range delete (tidemark's ``d`` or
    Debezium's ``r``), not a row or partition delete."""
    return isinstance(after, Mapping) and isinstance(after.get(RANGE_FIELDS[0]), Mapping)


def _bound_of(raw: Any, side: str) -> tuple[str, Any]:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("method"), str):
        raise RangeError(f"the range delete's _range_{side} is not a bound with a method")
    return raw["method"], raw.get("values")


def _incl(method: str, side: str) -> bool:
    expected = {
        "start": ("INCL_START_BOUND", "EXCL_START_BOUND"),
        "end": ("INCL_END_BOUND", "EXCL_END_BOUND"),
    }
    incl, excl = expected[side]
    if method not in (incl, excl):
        raise RangeError(f"the range delete's {side} bound has method {method!r}")
    return method == incl


def _tidemark_columns(raw: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    cols = raw.get("clustering")
    if not isinstance(cols, list):
        raise RangeError("the range delete's bound has no clustering columns")
    return [(str(c["name"]), str(c["type"]), bool(c["descending"])) for c in cols]


def _debezium_timestamp(text: str) -> int:
    """``2024-01-02T03:04:05.678Z`` (TimestampType's text) as the epoch milliseconds Debezium
    writes for the column."""
    at = dt.datetime.fromisoformat(text)
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    return (at - _EPOCH) // dt.timedelta(milliseconds=1)


def _debezium_date(text: str) -> int:
    """``2024-05-06`` as days since the epoch (what the column's values mean; cells.raw_date
    leaves such small numbers as they are)."""
    return (dt.date.fromisoformat(text) - _EPOCH.date()).days


def _debezium_time(text: str) -> int:
    """``12:34:56.789000000`` as the nanoseconds of the day Debezium writes for a ``time``."""
    clock, _, frac = text.partition(".")
    h, m, s = (int(x) for x in clock.split(":"))
    return ((h * 60 + m) * 60 + s) * 1_000_000_000 + int(frac.ljust(9, "0")[:9] or 0)


def _debezium_blob(text: str) -> str:
    """Hex (BytesType's text) as the base64 text a Connect ``bytes`` value is in JSON."""
    return base64.b64encode(bytes.fromhex(text)).decode()


def _debezium_number(text: str, spark: Any, cql: str) -> Any:
    """A ``decimal``/``varint`` bound as the lake holds the column: Debezium sends a decimal
    as a double and a varint as a 64-bit long (wrapping beyond it: such a bound cannot be
    placed among the wrapped values, so it is refused); exact text if the lake holds that."""
    import decimal

    value = decimal.Decimal(text)
    if spark == "double" or spark == "float":
        return float(value)
    if spark == "long" and cql == "varint":
        if not -(1 << 63) <= int(value) < (1 << 63):
            raise RangeError(
                f"a range delete bound {text} on a varint column Debezium sends as a 64-bit "
                "long (wrapping beyond it): the rows it covers cannot be told"
            )
        return int(value)
    if spark == "string":
        return format(value, "f")
    raise RangeError(f"a {cql} bound on a column the lake holds as {spark}")


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

#: Debezium's bound value types (Cassandra's marshal classes, whose ``getString`` text it
#: writes) with the CQL type and how the text becomes the value its records carry for the
#: column (the record's form: the row normalizers then apply, as to a row's values)
_DEBEZIUM_TYPES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "Int32Type": ("int", int),
    "LongType": ("bigint", int),
    "ShortType": ("smallint", int),
    "ByteType": ("tinyint", int),
    "FloatType": ("float", float),
    "DoubleType": ("double", float),
    "BooleanType": ("boolean", lambda s: s == "true"),
    "UTF8Type": ("text", str),
    "AsciiType": ("ascii", str),
    "UUIDType": ("uuid", str),
    "TimeUUIDType": ("timeuuid", str),
    "TimestampType": ("timestamp", _debezium_timestamp),
    "SimpleDateType": ("date", _debezium_date),
    "TimeType": ("time", _debezium_time),
    "BytesType": ("blob", _debezium_blob),
    "InetAddressType": ("inet", lambda s: "/" + s),  # Java's InetAddress.toString in rows
    "DecimalType": ("decimal", str),  # by the lake's type: _debezium_number
    "IntegerType": ("varint", str),
}


def _debezium_values(
    values: Sequence[Any],
    order: Sequence[str],
    types: dict[str, tuple[str, bool]],
    spark: Mapping[str, Any],
) -> list[Any]:
    """A bound of Debezium's (``[{name, value, type}]``) as values in clustering order;
    ``types`` collects each column's CQL type and order. A value of a type whose text this
    job does not read back (a tuple, a frozen collection, a UDT) is refused."""
    by_name: dict[str, Any] = {}
    for v in values:
        marshal = str(v.get("type", ""))
        descending = marshal.startswith(_REVERSED)
        if descending:
            marshal = marshal[len(_REVERSED) : -1]
        name = str(v.get("name"))
        known = _DEBEZIUM_TYPES.get(marshal.rsplit(".", 1)[-1])
        if known is None:
            raise RangeError(
                f"a range delete whose bound holds clustering column {name!r} of type "
                f"{marshal}: Debezium writes its value as text this job does not read back"
            )
        cql, read = known
        types[name] = (cql, descending)
        text = str(v.get("value"))
        if cql in _NUMBERS:
            by_name[name] = _debezium_number(text, spark.get(name), cql)
        else:
            by_name[name] = read(text)
    out = []
    for name in order:
        if name not in by_name:
            break
        out.append(by_name[name])
    return out


def parse(
    after: Mapping[str, Any],
    key: Mapping[str, Any],
    normalizers: Mapping[str, Any],
    spark: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The range delete of a Cassandra event's ``after`` in the driver's form (see the module
    docstring); ``key`` is the event key (the partition key set, clustering columns null),
    ``normalizers`` and ``spark`` the row shape's per-column value rewrites and Spark types.
    Raises :class:`RangeError`."""
    spark = spark or {}
    (m_start, v_start), (m_end, v_end) = (
        _bound_of(after.get(RANGE_FIELDS[0]), "start"),
        _bound_of(after.get(RANGE_FIELDS[1]), "end"),
    )
    partition = {k: v for k, v in key.items() if v is not None}
    order = [k for k, v in key.items() if v is None]  # the clustering columns, in key order
    if isinstance(v_start, Mapping):  # tidemark: typed values and the clustering columns
        described = _tidemark_columns(after[RANGE_FIELDS[0]])
        order = [name for name, _, _ in described]
        types = {name: (t, desc) for name, t, desc in described}
        start = _prefix(v_start, order)
        end = _prefix(v_end if isinstance(v_end, Mapping) else {}, order)
    elif isinstance(v_start, list):  # Debezium: text values with their Cassandra types
        types = {}
        start = _debezium_values(v_start, order, types, spark)
        end = _debezium_values(v_end if isinstance(v_end, list) else [], order, types, spark)
    else:
        raise RangeError("the range delete's bound values are neither typed nor Debezium's")
    common = 0
    while common < min(len(start), len(end)) and start[common] == end[common]:
        common += 1
    eq = dict(partition)
    eq.update(zip(order[:common], start[:common], strict=True))
    keys = {name: _key_of(types, spark, name) for name in order}
    for i in range(common, max(len(start), len(end))):
        cql = types.get(order[i], ("?", False))[0]
        if cql not in _ORDERED and keys[order[i]] is None and not _numeric(cql, spark, order[i]):
            raise RangeError(
                f"a range delete on clustering column {order[i]!r} of type {cql}: Spark does "
                f"not order that type as Cassandra does, so the rows it deleted cannot be found"
            )
    for col, value in list(eq.items()):
        fn = normalizers.get(col)
        if fn is not None and value is not None:
            eq[col] = fn(value)
    cols = order[common:]
    return {
        "partition": list(partition),
        "eq": eq,
        "eq_keys": {c: k for c in order[:common] if (k := keys[c]) is not None},
        "cols": [[name, types.get(name, ("?", False))[1], keys[name]] for name in cols],
        "start": [_normal(normalizers, c, v) for c, v in zip(cols, start[common:], strict=False)],
        "start_incl": _incl(m_start, "start"),
        "end": [_normal(normalizers, c, v) for c, v in zip(cols, end[common:], strict=False)],
        "end_incl": _incl(m_end, "end"),
    }


def _key_of(
    types: Mapping[str, tuple[str, bool]], spark: Mapping[str, Any], name: str
) -> str | None:
    """How a column's values are compared: by themselves (None), or by a sort key derived
    from their text: ``uuid``, ``timeuuid``, ``inet``, or ``number`` (a ``decimal``/``varint``
    the lake holds as exact text)."""
    cql = types.get(name, ("?", False))[0]
    if cql in _KEYED:
        return cql
    if cql in _NUMBERS and spark.get(name) == "string":
        return "number"
    return None


def _numeric(cql: str, spark: Mapping[str, Any], name: str) -> bool:
    """A ``decimal``/``varint`` the lake holds as a number (Spark orders it as Cassandra)."""
    return cql in _NUMBERS and bool(_NUMERIC_SPARK.fullmatch(str(spark.get(name))))


def _prefix(values: Mapping[str, Any], order: Sequence[str]) -> list[Any]:
    out = []
    for name in order:
        v = values.get(name)
        if v is None:
            break
        out.append(v)
    return out


def _normal(normalizers: Mapping[str, Any], col: str, value: Any) -> Any:
    fn = normalizers.get(col)
    return fn(value) if fn is not None and value is not None else value


# -- the driver ----------------------------------------------------------------------------------
def delete_ranges(
    spark: Any,
    plan: TablePlan,
    path: str,
    ranges: list[tuple[list[int], dict[str, Any]]],
    deletes_path: str,
    app_id: str,
    batch_id: int,
) -> int:
    """Applies the batch's range deletes to the stored rows they cover: a row older than the
    newest delete covering it is removed, a newer one loses the cells older than it
    (cell_merge.py); ``ranges`` holds ``(position, parsed)`` pairs (:func:`parse`, with the
    event's ``meta``: source time, topic, partition, offset). The rows are found by joining
    the table with the range deletes (:func:`_matches`), then merged by key, and their keys
    are recorded in the deleted-keys side table at the delete's position: an older write of
    such a row arriving in a later batch (replayed, or written with an older timestamp) is
    then dropped by the guard, as after a row delete. Returns the number of rows removed."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from cdc.apply import cell_merge
    from cdc.apply.sparktypes import quote as q

    stored = spark.read.format("delta").load(path)
    covered = (
        _matches(spark, plan, stored, ranges)
        .groupBy(*plan.key)
        .agg(
            F.max_by(
                F.struct(F.col("_tm_rpos").alias("rpos"), F.col("_tm_meta").alias("meta")),
                F.col("_tm_rpos"),
            ).alias("_tm_by"),
        )
    )
    # The keys first, read from the table before the delete (a DataFrame on a Delta table
    # reads its newest version: after the MERGE it would find nothing). A replayed batch
    # appends nothing twice (Delta's idempotent writes) and merges the same deletes again.
    (
        covered.select(
            *plan.key,
            F.col("_tm_by.rpos").alias("__pos"),
            F.col("_tm_by.meta.source_ts_ms").alias("__source_ts_ms"),
            F.col("_tm_by.meta.topic").alias("__topic"),
            F.col("_tm_by.meta.partition").alias("__partition"),
            F.col("_tm_by.meta.offset").alias("__offset"),
        )
        .write.format("delta")
        .mode("append")
        .option("txnAppId", f"{app_id}-range-deletes")
        .option("txnVersion", batch_id)
        .save(deletes_path)
    )
    keys = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in plan.key)
    cols = [c for c in plan.columns if c not in plan.key]
    at = "s._tm_by.rpos"
    result = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(covered.alias("s"), keys)
        .whenMatchedDelete(condition=cell_merge.removes(cols, at))
        .whenMatchedUpdate(condition=cell_merge.cut_condition(at), set=cell_merge.cut_set(cols, at))
        .execute()
    )
    metrics = result.collect()[0] if result is not None else None
    return int(metrics["num_deleted_rows"] or 0) if metrics is not None else 0


RANGES_DDL = "pos array<bigint>, source_ts_ms bigint, bounds string"
Recorded = list[tuple[list[int], dict[str, Any]]]


def retained_since(newest_ms: int | None, now_ms: int, retention_ms: int | None) -> int | None:
    """The oldest write time (ms) of a range delete still kept with ``retention_ms``
    (``range.deletes.retention.ms``), or None to keep all. Counted back from the newest write
    time the job has seen, so a backfill of old topics keeps the ranges its own late writes
    need, but never from beyond the wall clock (a client clock ahead, ``USING TIMESTAMP`` in
    the future, must not expire everything)."""
    if retention_ms is None or newest_ms is None:
        return None
    return min(newest_ms, now_ms) - retention_ms


def retained(ranges: Recorded, since: int | None) -> Recorded:
    """The range deletes written at or after ``since`` (those without a write time stay)."""
    if since is None:
        return ranges
    return [(p, r) for p, r in ranges if (ms := _written_ms(r)) is None or ms >= since]


def _written_ms(parsed: Mapping[str, Any]) -> int | None:
    meta = parsed.get("meta") or (None,)
    return int(meta[0]) if meta[0] is not None else None


def prune(spark: Any, location: str, since: int) -> None:
    """Removes the range deletes written before ``since`` from the side table."""
    from delta.tables import DeltaTable

    from cdc.apply.tables import sql_path

    if DeltaTable.isDeltaTable(spark, location):
        spark.sql(f"DELETE FROM {sql_path(location)} WHERE source_ts_ms < {int(since)}")


def record(
    spark: Any,
    location: str,
    ranges: Recorded,
    app_id: str,
    batch_id: int,
) -> None:
    """Appends the batch's range deletes (position and parsed bounds) to the table's range
    side table. A range delete also covers rows no batch has written yet: a late write of an
    older time into the range, which Cassandra's range tombstone shadows. The deleted-keys side
    table only holds the keys that were stored at the delete, so :func:`guard` reads these.
    Kept as Cassandra keeps tombstones until it purges them (``gc_grace_seconds``): not
    compacted (a range delete is one small row), but pruned after
    ``range.deletes.retention.ms`` (:func:`prune`). Delta's idempotent writes make a replayed
    batch append nothing twice."""
    import orjson

    rows = [([int(p) for p in pos], _written_ms(r), orjson.dumps(r).decode()) for pos, r in ranges]
    (
        spark.createDataFrame(rows, RANGES_DDL)
        .coalesce(1)
        .write.format("delta")
        .mode("append")
        .option("txnAppId", f"{app_id}-ranges")
        .option("txnVersion", batch_id)
        .save(location)
    )


def recorded(spark: Any, location: str) -> Recorded:
    """The range deletes :func:`record` appended (none when the side table does not exist)."""
    import orjson
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, location):
        return []
    rows = spark.read.format("delta").load(location).collect()
    return [(list(r["pos"]), orjson.loads(r["bounds"])) for r in rows]


def guard(
    spark: Any, plan: TablePlan, rows: Any, ranges: list[tuple[list[int], dict[str, Any]]]
) -> Any:
    """The batch's rows against range deletes of earlier batches: a row not above the newest
    one covering it is dropped (a late older write into a deleted range), a newer one gets it
    as its cut (its cells from before it are gone: cell_merge.py)."""
    from pyspark.sql import functions as F

    from cdc.apply.cell_merge import CUT

    cut = covering(spark, plan, rows, ranges)
    gone = F.col("_tm_c")
    return (
        rows.join(cut, on=list(plan.key), how="left")
        .filter(gone.isNull() | (F.col("__pos") > gone))
        .withColumn(CUT, F.greatest(F.col(CUT), gone))
        .drop("_tm_c")
    )


def covering(
    spark: Any, plan: TablePlan, rows: Any, ranges: list[tuple[list[int], dict[str, Any]]]
) -> Any:
    """The keys of ``rows`` (the batch's typed rows) that a range delete of the batch covers,
    with the newest such delete's position as ``_tm_c`` (cells.with_cuts)."""
    from pyspark.sql import functions as F

    return (
        _matches(spark, plan, rows, ranges).groupBy(*plan.key).agg(F.max("_tm_rpos").alias("_tm_c"))
    )


def _matches(
    spark: Any,
    plan: TablePlan,
    rows: Any,
    ranges: list[tuple[list[int], dict[str, Any]]],
) -> Any:
    """The keys of ``rows`` each range delete covers, with the delete's ``_tm_rpos`` and its
    event's ``_tm_meta``. The bounds are read as the table's columns by ``from_json``, as
    the batch's rows are, and the join is on the partition key (the deletes are few:
    broadcast)."""
    import orjson
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from cdc.apply import sparktypes as st
    from cdc.apply.sparktypes import quote as q

    struct = T.StructType.fromJson(st.struct_of(list(plan.read_types().items())))
    rows_of_bounds = []
    for i, (pos, r) in enumerate(ranges):
        names = [c[0] for c in r["cols"]]
        source_ts, topic, partition, offset = r.get("meta") or (None, None, None, None)
        rows_of_bounds.append(
            (
                i,
                [int(p) for p in pos],
                (source_ts, topic, partition, offset),
                orjson.dumps(r["eq"]).decode(),
                orjson.dumps(dict(zip(names, r["start"], strict=False))).decode(),
                orjson.dumps(dict(zip(names, r["end"], strict=False))).decode(),
            )
        )
    opts = {"mode": "FAILFAST"}
    meta = "struct<source_ts_ms: bigint, topic: string, partition: int, offset: bigint>"
    bounds = spark.createDataFrame(
        rows_of_bounds,
        f"i int, rpos array<bigint>, meta {meta}, eq string, st string, en string",
    ).select(
        "i",
        "rpos",
        "meta",
        F.from_json("eq", struct, opts).alias("eq"),
        F.from_json("st", struct, opts).alias("st"),
        F.from_json("en", struct, opts).alias("en"),
    )
    partition = list(ranges[0][1]["partition"])
    on = F.lit(True)
    for k in partition:
        on = on & (F.col(f"t.{q(k)}") == F.col(f"s.eq.{q(k)}"))
    # One join per shape of range delete (the same columns equal and compared, as far, with
    # the same inclusiveness): a thousand `t < x` deletes of a batch are one condition, not
    # a thousand-deep OR.
    by_shape: dict[str, list[int]] = {}
    for i, (_, r) in enumerate(ranges):
        shape = [list(r["eq"]), r.get("eq_keys"), r["cols"], len(r["start"]), len(r["end"])]
        key = orjson.dumps([*shape, r["start_incl"], r["end_incl"]]).decode()
        by_shape.setdefault(key, []).append(i)
    out = None
    for members in by_shape.values():
        some = bounds.filter(F.col("i").isin(members)).alias("s")
        joined = rows.alias("t").join(
            F.broadcast(some), on & _covers(ranges[members[0]][1], partition), "inner"
        )
        part = joined.select(
            *[F.col(f"t.{q(k)}").alias(k) for k in plan.key],
            F.col("s.rpos").alias("_tm_rpos"),
            F.col("s.meta").alias("_tm_meta"),
        )
        out = part if out is None else out.unionByName(part)
    return out


def _covers(r: dict[str, Any], partition: list[str]) -> Any:
    """A row ``t`` is in range delete ``s``'s bounds: ``r`` is its parsed form, which says the
    shape (which columns are equal, compared, how far)."""
    from pyspark.sql import functions as F

    from cdc.apply.sparktypes import quote as q

    cond = F.lit(True)
    eq_keys = r.get("eq_keys") or {}
    for col in r["eq"]:
        if col not in partition:
            c, v = F.col(f"t.{q(col)}"), F.col(f"s.eq.{q(col)}")
            key = eq_keys.get(col)
            cond = cond & (c == v if key is None else sort_key(c, key) == sort_key(v, key))
    cols = [(str(c[0]), bool(c[1]), c[2] if len(c) > 2 else None) for c in r["cols"]]
    cond = cond & _beyond(cols[: len(r["start"])], "s.st", r["start_incl"], after=True)
    return cond & _beyond(cols[: len(r["end"])], "s.en", r["end_incl"], after=False)


def _beyond(
    cols: list[tuple[str, bool, str | None]], bound: str, incl: bool, *, after: bool
) -> Any:
    """Rows after (or before) a bound in clustering order: beyond it on the first column that
    differs, a descending column the other way; equal on the whole prefix counts when
    ``incl``. No columns: unbounded on that side."""
    from pyspark.sql import functions as F

    from cdc.apply.sparktypes import quote as q

    if not cols:
        return F.lit(True)
    beyond = F.lit(False)
    same = F.lit(True)
    for name, desc, key in cols:
        c, v = F.col(f"t.{q(name)}"), F.col(f"{bound}.{q(name)}")
        ck, vk = (c, v) if key is None else (sort_key(c, key), sort_key(v, key))
        beyond = beyond | (same & ((ck > vk) if after != desc else (ck < vk)))
        same = same & (ck == vk)
    return beyond | same if incl else beyond


def sort_key(col: Any, key: str) -> Any:
    """A text whose order is Cassandra's order of the values in ``col`` (``key``: what
    :func:`parse` found the column needs)."""
    if key in ("uuid", "timeuuid"):
        return _uuid_key(col, key)
    if key == "inet":
        return _inet_key(col)
    if key == "number":
        return _number_key(col)
    raise ValueError(f"no sort key for {key!r}")


#: a hex digit with its top bit flipped: a byte compared as signed, compared as text
_SIGN_FLIP = ("0123456789abcdef", "89abcdef01234567")


def _uuid_key(col: Any, cql: str) -> Any:
    """A text whose order is Cassandra's order of the ``uuid``/``timeuuid`` in ``col``
    (canonical text). ``timeuuid`` (TimeUUIDType): the 60-bit time first (the time-high,
    time-mid, time-low groups), then the clock sequence and node as *signed* bytes. ``uuid``
    (UUIDType): the version first; a version 1 then by time as above and the rest as unsigned
    bytes, any other version by its bytes unsigned (its text in order)."""
    from pyspark.sql import functions as F

    u = F.lower(col)
    time_first = F.concat(F.substring(u, 15, 4), F.substring(u, 10, 4), F.substring(u, 1, 8))
    rest = F.concat(F.substring(u, 20, 4), F.substring(u, 25, 12))
    if cql == "timeuuid":
        signed = [
            F.concat(
                F.translate(F.substring(rest, 2 * i + 1, 1), *_SIGN_FLIP),
                F.substring(rest, 2 * i + 2, 1),
            )
            for i in range(8)
        ]
        return F.concat(time_first, *signed)
    version = F.substring(u, 15, 1)
    as_bytes = F.concat(F.substring(u, 1, 8), F.substring(u, 10, 4), F.substring(u, 15, 4))
    return F.concat(version, F.when(version == "1", time_first).otherwise(as_bytes), rest)


def _inet_key(col: Any) -> Any:
    """The address's bytes as hex (InetAddressType compares the bytes unsigned: 4 for IPv4,
    16 for IPv6, a shorter one first when it is the other's prefix). Read from tidemark's text
    (``10.0.0.1``, ``::1``, Python's compressed form) and Debezium's (Java's ``/10.0.0.1``,
    ``/0:0:0:0:0:0:0:1``); an IPv6 text may end in a dotted IPv4 part."""
    from pyspark.sql import functions as F

    def dotted_hex(text: Any) -> Any:
        return F.array_join(
            F.transform(
                F.split(text, r"\."), lambda p: F.lpad(F.lower(F.hex(p.cast("int"))), 2, "0")
            ),
            "",
        )

    s = F.lower(F.regexp_replace(col, "^[^/]*/", ""))
    tail = F.substring_index(s, ":", -1)
    tail_hex = dotted_hex(tail)
    six = F.when(
        F.instr(tail, ".") > 0,
        F.concat(
            s.substr(F.lit(1), F.length(s) - F.length(tail)),
            tail_hex.substr(1, 4),
            F.lit(":"),
            tail_hex.substr(5, 4),
        ),
    ).otherwise(s)
    gap = F.instr(six, "::") > 0
    none = F.array().cast("array<string>")
    left = F.substring_index(six, "::", 1)
    right = F.when(gap, F.substring_index(six, "::", -1)).otherwise(F.lit(""))
    lefts = F.when(left == "", none).otherwise(F.split(left, ":"))
    rights = F.when(right == "", none).otherwise(F.split(right, ":"))
    zeros = F.array_repeat(F.lit("0"), F.lit(8) - F.size(lefts) - F.size(rights))
    groups = F.concat(lefts, F.when(gap, zeros).otherwise(none), rights)
    v6 = F.array_join(F.transform(groups, lambda g: F.lpad(g, 4, "0")), "")
    return F.when(F.instr(s, ":") > 0, v6).otherwise(dotted_hex(s))


#: the exponent's offset and width in :func:`_number_key` (values within 10**±499999999)
_EXP_OFFSET, _EXP_WIDTH = 500_000_000, 10


def _number_key(col: Any) -> Any:
    """A text whose order is the numeric order of the exact decimal text in ``col``
    (``-12.50``: tidemark's ``decimal``/``varint`` in its default string mode). The number is
    ``0.m * 10**e`` with ``m``'s digits free of leading and trailing zeros: a positive one is
    ``2``, ``e`` (offset, fixed width), ``m``; zero is ``1``; a negative one is ``0``, then ``e``
    and ``m`` complemented and a closing ``~`` (so a longer ``m``, more negative, sorts
    first)."""
    from pyspark.sql import functions as F

    s = F.trim(col)
    negative = s.startswith("-")
    digits = F.regexp_replace(s, "^[-+]", "")
    whole = F.regexp_replace(F.substring_index(digits, ".", 1), "^0+", "")
    frac = F.when(F.instr(digits, ".") > 0, F.substring_index(digits, ".", -1)).otherwise("")
    lead = F.length(frac) - F.length(F.regexp_replace(frac, "^0+", ""))
    mantissa = F.regexp_replace(F.regexp_replace(F.concat(whole, frac), "^0+", ""), "0+$", "")
    exp = F.when(F.length(whole) > 0, F.length(whole)).otherwise(-lead)
    up = F.lpad((exp + _EXP_OFFSET).cast("string"), _EXP_WIDTH, "0")
    down = F.lpad(
        (F.lit(2 * _EXP_OFFSET - 1) - (exp + _EXP_OFFSET)).cast("string"), _EXP_WIDTH, "0"
    )
    flipped = F.translate(mantissa, "0123456789", "9876543210")
    return (
        F.when(s.isNull(), F.lit(None))
        .when(mantissa == "", F.lit("1"))
        .when(negative, F.concat(F.lit("0"), down, flipped, F.lit("~")))
        .otherwise(F.concat(F.lit("2"), up, mantissa))
    )
