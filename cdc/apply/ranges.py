"""Cassandra range deletes (``DELETE ... WHERE ck > x``): every stored row of the partition
whose clustering key lies between the two bounds, and that is older than the delete, goes.

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
dates and times); ``uuid`` and ``timeuuid`` compare by a sort key built from their text as
Cassandra orders them (:func:`_uuid_key`). A bound that needs ordering on another type
(``inet``, a ``decimal``/``varint`` sent as text, ...) is bad input (``on.error``), never
applied by a wrong order.

The driver (:func:`delete_ranges`) runs after the batch's MERGE: rows the batch wrote before
the delete are removed with the stored ones, rows written after it (a higher position) stay,
and start anew (:func:`covering` marks them for the MERGE: cells.with_cuts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
#: CQL types compared by a sort key built from their text (their order is not the text's)
_UUIDS = frozenset({"uuid", "timeuuid"})
#: Debezium's bound value types (Cassandra's marshal classes) the job reads, as CQL types with
#: how their text becomes the value (others: only as an equality it cannot read, so refused)
_DEBEZIUM_TYPES: dict[str, tuple[str, Any]] = {
    "Int32Type": ("int", int),
    "LongType": ("bigint", int),
    "ShortType": ("smallint", int),
    "ByteType": ("tinyint", int),
    "IntegerType": ("varint", int),
    "FloatType": ("float", float),
    "DoubleType": ("double", float),
    "BooleanType": ("boolean", lambda s: s == "true"),
    "UTF8Type": ("text", str),
    "AsciiType": ("ascii", str),
    "UUIDType": ("uuid", str),
    "TimeUUIDType": ("timeuuid", str),
}
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


def _debezium_values(
    values: Sequence[Any], order: Sequence[str], types: dict[str, tuple[str, bool]]
) -> list[Any]:
    """A bound of Debezium's (``[{name, value, type}]``) as values in clustering order;
    ``types`` collects each column's CQL type and order. A value of a type whose text this
    job does not read back is refused."""
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
        types[name] = (known[0], descending)
        by_name[name] = known[1](str(v.get("value")))
    out = []
    for name in order:
        if name not in by_name:
            break
        out.append(by_name[name])
    return out


def parse(
    after: Mapping[str, Any], key: Mapping[str, Any], normalizers: Mapping[str, Any]
) -> dict[str, Any]:
    """The range delete of a Cassandra event's ``after`` in the driver's form (see the module
    docstring); ``key`` is the event key (the partition key set, clustering columns null),
    ``normalizers`` the row shape's per-column value rewrites. Raises :class:`RangeError`."""
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
        start = _debezium_values(v_start, order, types)
        end = _debezium_values(v_end if isinstance(v_end, list) else [], order, types)
    else:
        raise RangeError("the range delete's bound values are neither typed nor Debezium's")
    common = 0
    while common < min(len(start), len(end)) and start[common] == end[common]:
        common += 1
    eq = dict(partition)
    eq.update(zip(order[:common], start[:common], strict=True))
    for i in range(common, max(len(start), len(end))):
        cql = types.get(order[i], ("?", False))[0]
        if not _orders(cql, start, end, i):
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
        "cols": [[name, types.get(name, ("?", False))[1], _key_of(types, name)] for name in cols],
        "start": [_normal(normalizers, c, v) for c, v in zip(cols, start[common:], strict=False)],
        "start_incl": _incl(m_start, "start"),
        "end": [_normal(normalizers, c, v) for c, v in zip(cols, end[common:], strict=False)],
        "end_incl": _incl(m_end, "end"),
    }


def _key_of(types: Mapping[str, tuple[str, bool]], name: str) -> str | None:
    """How a column's values are compared: by themselves (None), or by a sort key derived
    from their text (``uuid``, ``timeuuid``: :func:`_uuid_key`)."""
    cql = types.get(name, ("?", False))[0]
    return cql if cql in _UUIDS else None


def _orders(cql: str, start: list[Any], end: list[Any], i: int) -> bool:
    if cql in _ORDERED or cql in _UUIDS:
        return True
    if cql in ("varint", "decimal"):  # numbers only in their numeric modes, not as text
        vals = [b[i] for b in (start, end) if i < len(b)]
        return all(isinstance(v, int | float) and not isinstance(v, bool) for v in vals)
    return False


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
    """Removes the stored rows each range delete of the batch covers whose position is below
    the delete's; ``ranges`` holds ``(position, parsed)`` pairs (:func:`parse`, with the
    event's ``meta``: source time, topic, partition, offset). The rows are found by joining
    the table with the range deletes (:func:`_matches`), then deleted by key, and their keys
    are recorded in the deleted-keys side table at the delete's position: an older write of
    such a row arriving in a later batch (replayed, or written with an older timestamp) is
    then dropped by the guard, as after a row delete. Returns the number of rows removed."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from cdc.apply.sparktypes import quote as q

    stored = spark.read.format("delta").load(path)
    doomed = (
        _matches(spark, plan, stored, ranges, older=True)
        .groupBy(*plan.key)
        .agg(
            F.max("_tm_row_pos").alias("_tm_row_pos"),
            F.max_by(
                F.struct(F.col("_tm_rpos").alias("rpos"), F.col("_tm_meta").alias("meta")),
                F.col("_tm_rpos"),
            ).alias("_tm_by"),
        )
    )
    # The keys first, read from the table before the delete (a DataFrame on a Delta table
    # reads its newest version: after the MERGE it would find nothing). A replayed batch
    # appends nothing twice (Delta's idempotent writes) and deletes the same rows again.
    (
        doomed.select(
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
    result = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(doomed.alias("s"), keys)
        .whenMatchedDelete(condition="t.__pos = s._tm_row_pos")
        .execute()
    )
    metrics = result.collect()[0] if result is not None else None
    return int(metrics["num_deleted_rows"] or 0) if metrics is not None else 0


def covering(
    spark: Any, plan: TablePlan, rows: Any, ranges: list[tuple[list[int], dict[str, Any]]]
) -> Any:
    """The keys of ``rows`` (the batch's typed rows) that a range delete of the batch covers,
    with the newest such delete's position as ``_tm_c`` (cells.with_cuts)."""
    from pyspark.sql import functions as F

    return (
        _matches(spark, plan, rows, ranges, older=False)
        .groupBy(*plan.key)
        .agg(F.max("_tm_rpos").alias("_tm_c"))
    )


def _matches(
    spark: Any,
    plan: TablePlan,
    rows: Any,
    ranges: list[tuple[list[int], dict[str, Any]]],
    *,
    older: bool,
) -> Any:
    """The keys of ``rows`` each range delete covers (only those older than it with
    ``older``), with the row's position ``_tm_row_pos``, the delete's ``_tm_rpos`` and its
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
        shape = [list(r["eq"]), r["cols"], len(r["start"]), len(r["end"])]
        key = orjson.dumps([*shape, r["start_incl"], r["end_incl"]]).decode()
        by_shape.setdefault(key, []).append(i)
    out = None
    for members in by_shape.values():
        some = bounds.filter(F.col("i").isin(members)).alias("s")
        joined = rows.alias("t").join(
            F.broadcast(some), on & _covers(ranges[members[0]][1], partition, older), "inner"
        )
        part = joined.select(
            *[F.col(f"t.{q(k)}").alias(k) for k in plan.key],
            F.col("t.__pos").alias("_tm_row_pos"),
            F.col("s.rpos").alias("_tm_rpos"),
            F.col("s.meta").alias("_tm_meta"),
        )
        out = part if out is None else out.unionByName(part)
    return out


def _covers(r: dict[str, Any], partition: list[str], older: bool) -> Any:
    """A row ``t`` is in range delete ``s``'s bounds (and, with ``older``, older than it):
    ``r`` is its parsed form, which says the shape (which columns are equal, compared, how
    far)."""
    from pyspark.sql import functions as F

    from cdc.apply.sparktypes import quote as q

    cond = F.col("t.__pos") < F.col("s.rpos") if older else F.lit(True)
    for col in r["eq"]:
        if col not in partition:
            cond = cond & (F.col(f"t.{q(col)}") == F.col(f"s.eq.{q(col)}"))
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
        ck, vk = (c, v) if key is None else (_uuid_key(c, key), _uuid_key(v, key))
        beyond = beyond | (same & ((ck > vk) if after != desc else (ck < vk)))
        same = same & (c == v)
    return beyond | same if incl else beyond


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
