"""The Spark side of :mod:`cdc.apply.handover`: the key-change side table and key lookups.

The side table ``<target.path>/_tidemark/keychanges/<table>`` (``kind``, ``key_json``,
``data``: JSON) holds the images handed over by key changes and the rows held until their image
arrives. It is small (key changes whose other half has not been applied yet), so it is read
once per job run, kept in the driver, and rewritten whole (one Delta overwrite) when it changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from cdc.apply import sparktypes as st
from cdc.apply.handover import KeyChanges, Lookup, decode_image, encode_image, key_text
from cdc.apply.policy import TablePlan
from cdc.apply.worker import OUTPUT_DDL

SCHEMA = "kind string, key_json string, data string"
OUTPUT_NAMES = tuple(c.split()[0] for c in OUTPUT_DDL.split(", "))
_RECORD_SKIP = frozenset({"raw_key", "raw_value", "info"})


def load(spark: Any, path: str) -> KeyChanges:
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return KeyChanges()
    rows = spark.read.format("delta").load(path).collect()
    return decoded([(r["kind"], r["key_json"], r["data"]) for r in rows])


def decoded(rows: Iterable[tuple[str, str, str]]) -> KeyChanges:
    """The state from side-table rows (the inverse of :func:`encoded`)."""
    state = KeyChanges()
    for kind, key, data in rows:
        doc = orjson.loads(data)
        if kind == "image":
            image = decode_image(doc)
            state.images[(image.new_key, image.kc)] = image
        else:
            state.pending[key] = doc
    return state


def encoded(state: KeyChanges) -> list[tuple[str, str, str]]:
    rows = [
        ("image", image.new_key, orjson.dumps(encode_image(image)).decode())
        for image in state.images.values()
    ]
    rows += [
        ("pending", key, orjson.dumps(rec, option=orjson.OPT_SORT_KEYS).decode())
        for key, rec in state.pending.items()
    ]
    return sorted(rows)


def save(spark: Any, path: str, state: KeyChanges) -> None:
    rows = encoded(state)
    spark.createDataFrame(rows, SCHEMA).coalesce(1).write.format("delta").mode("overwrite").save(
        path
    )


def record(row: Any) -> dict[str, Any]:
    """A worker output row (Spark Row) as a JSON-able dict."""
    d: dict[str, Any] = row.asDict()
    out = {k: v for k, v in d.items() if k not in _RECORD_SKIP}
    out["pos"] = list(out["pos"]) if out.get("pos") is not None else None
    fills = out.get("fills")
    out["fills"] = {c: list(p) for c, p in fills.items()} if fills else None
    out["unavailable"] = list(out.get("unavailable") or ())
    return out


def records_frame(spark: Any, records: Iterable[Mapping[str, Any]]) -> Any:
    rows = [tuple(rec.get(c) for c in OUTPUT_NAMES) for rec in records]
    return spark.createDataFrame(rows, OUTPUT_DDL)


def lookup(
    spark: Any,
    plan: TablePlan,
    path: str,
    deletes_path: str,
    *,
    deletes_nonempty: bool,
    keys: list[dict[str, Any]],
) -> dict[str, Lookup]:
    """Stored position, placeholder-capable values and highest delete position of ``keys``
    (typed-form key dicts), by :func:`~cdc.apply.handover.key_text`."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if not keys:
        return {}
    key_cols = list(plan.key)
    read = plan.read_types()
    struct = T.StructType.fromJson(st.struct_of([(k, read[k]) for k in key_cols]))
    wanted = spark.createDataFrame([(key_text(k),) for k in keys], "_tm_lk string")
    wanted = wanted.withColumn("_tm_k", F.from_json("_tm_lk", struct)).select(
        "_tm_lk", *[F.col("_tm_k").getField(k).alias(k) for k in key_cols]
    )
    values = [c for c, t in plan.columns.items() if st.can_hold_placeholder(t)]
    # Inner joins with the few wanted keys broadcast: one scan of the key columns, no shuffle,
    # and values serialized only for the matched rows.
    small = F.broadcast(wanted)
    stored = (
        spark.read.format("delta")
        .load(path)
        .join(small, on=key_cols, how="inner")
        .select(
            "_tm_lk",
            F.col("__pos").alias("_tm_pos"),
            F.to_json(
                F.struct(*[F.col(st.quote(c)) for c in values]), {"ignoreNullFields": "false"}
            ).alias("_tm_vals"),
        )
    )
    result = {key_text(k): Lookup() for k in keys}
    for r in stored.collect():
        found = result[r["_tm_lk"]]
        found.pos = tuple(r["_tm_pos"])
        found.values = orjson.loads(r["_tm_vals"])
    if deletes_nonempty:
        deleted = (
            spark.read.format("delta")
            .load(deletes_path)
            .join(small, on=key_cols, how="inner")
            .groupBy("_tm_lk")
            .agg(F.max("__pos").alias("_tm_del"))
        )
        for r in deleted.collect():
            result[r["_tm_lk"]].deleted = tuple(r["_tm_del"])
    return result
