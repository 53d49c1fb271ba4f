"""A Delta table written by the apply job (``cdc.apply``) as the copy of the table.

The apply job hard-deletes, so every row of the table is a live key. Its table for a topic
lives at ``<target.path>/<topic with non-word characters as _>`` (the default
``table.name`` template). Temporal columns are turned into epoch numbers by Spark SQL in UTC
(``timestamp_ntz`` columns hold the source's zone-less values, ``timestamp`` the zoned ones);
every other value is canonicalised from what Spark returns (``from_python``). The table is
read whole through Python: fine for checks and tests, slow for very large tables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from cdc.verify.canonical import ColumnSpec, KeyTexts, TableSpec, from_python, row_hash

_SANITIZE = re.compile(r"[^A-Za-z0-9_]")


def _expr(col: ColumnSpec) -> str:
    ref = f"`{col.name.replace('`', '``')}`"
    if col.kind in ("timestamp", "timestamptz"):
        micros = f"unix_micros(CAST({ref} AS TIMESTAMP))"
        if col.kind == "timestamp" and col.unit == "ms":
            return f"CAST(floor({micros} / 1000) AS STRING)"
        return f"CAST({micros} AS STRING)"
    if col.kind == "date":
        return f"CAST(datediff({ref}, DATE'1970-01-01') AS STRING)"
    return ref


class DeltaTargetError(Exception):
    """A Delta table that cannot be read (no table at the path, not a Delta table)."""


class DeltaTarget:
    name = "delta"

    def __init__(self, root: str, spark: Any = None) -> None:
        self.root = root.rstrip("/")
        self._spark = spark
        self._rows: dict[str, dict[KeyTexts, int]] = {}

    def path_of(self, topic: str) -> str:
        """Where the apply job writes ``topic`` under the default ``table.name``."""
        return f"{self.root}/{_SANITIZE.sub('_', topic).strip('_')}"

    def _session(self) -> Any:
        if self._spark is None:
            from pyspark.sql import SparkSession

            self._spark = (
                SparkSession.builder.appName("tidemark-verify")
                .config("spark.sql.session.timeZone", "UTC")
                .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
                .config(
                    "spark.sql.catalog.spark_catalog",
                    "org.apache.spark.sql.delta.catalog.DeltaCatalog",
                )
                .getOrCreate()
            )
        return self._spark

    def refresh(self, specs: Sequence[TableSpec]) -> None:
        spark = self._session()
        # the epoch numbers of zone-less timestamps are taken in UTC, whatever the caller's
        # session uses; its setting is put back afterwards
        zone = spark.conf.get("spark.sql.session.timeZone")
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        try:
            for spec in specs:
                self._rows[spec.topic] = self._read(spark, spec)
        finally:
            spark.conf.set("spark.sql.session.timeZone", zone)

    def _read(self, spark: Any, spec: TableSpec) -> dict[KeyTexts, int]:
        path = self.path_of(spec.topic)
        try:
            df = spark.read.format("delta").load(path)
        except Exception as exc:  # Spark's AnalysisException: no such path, not a Delta table
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DeltaTargetError(
                f"the Delta table of topic {spec.topic} cannot be read at {path}: {first}"
            ) from exc
        exprs = [f"{_expr(c)} AS `c{i}`" for i, c in enumerate(spec.columns)]
        index = {c.name: i for i, c in enumerate(spec.columns)}
        key_at = [index[k] for k in spec.key]
        rows: dict[KeyTexts, int] = {}
        for r in df.selectExpr(*exprs).toLocalIterator():
            texts = [
                (None if v is None else str(v))
                if c.kind in ("timestamp", "timestamptz", "date")
                else from_python(c, v)
                for c, v in zip(spec.columns, r, strict=True)
            ]
            rows[tuple(texts[i] or "" for i in key_at)] = row_hash(texts)
        return rows

    def rows(self, spec: TableSpec) -> Mapping[KeyTexts, int]:
        return self._rows.get(spec.topic, {})

    def close(self) -> None:
        """The Spark session is left to its owner (the process or the caller's)."""
