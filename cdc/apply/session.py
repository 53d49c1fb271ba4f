"""Creating (or joining) the SparkSession the job runs in.

Three ways the job starts, all handled here:

* ``python -m cdc.apply CONFIG`` / ``tidemark apply CONFIG``: no JVM yet. pyspark launches one
  with our settings: master (``local[*]`` unless ``spark.master``/``--master``), the cached
  Kafka/Delta jars, Delta's SQL extension and catalog.
* ``spark-submit .../cdc/apply/__main__.py CONFIG``: spark-submit already launched the JVM with
  its ``--master``/``--jars``; we add only what may still be set (SQL extensions are read when
  the first session is built) and never override the master.
* an existing session (tests, notebooks): used as is, after checking Delta is configured.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping
from typing import Any

from cdc.apply.config import ApplyConfig
from cdc.apply.jars import PYSPARK_VERSION, resolved_jars

log = logging.getLogger("tidemark.apply")

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
_LOCAL = re.compile(r"^local(?:\[(\d+|\*)(?:,\d+)?\])?$")


def local_cores(master: str) -> int | None:
    """Cores of a ``local[...]`` master, None for a cluster master."""
    m = _LOCAL.match(master.strip())
    if m is None:
        return None
    n = m.group(1)
    if n is None:
        return 1
    return (os.cpu_count() or 1) if n == "*" else int(n)


def session_conf(cfg: ApplyConfig, master: str | None) -> dict[str, str]:
    """Settings for a new session: ours first, the user's ``spark.conf`` wins."""
    conf: dict[str, str] = {
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
    }
    cores = local_cores(master) if master else None
    if cores is not None:
        # Small local jobs: Spark's 200 shuffle partitions and Delta's 50 log-replay partitions
        # cost more in task overhead than the work itself.
        conf["spark.sql.shuffle.partitions"] = str(max(2, cores))
        conf["spark.databricks.delta.snapshotPartitions"] = str(max(2, cores))
    if cfg.jars == "auto":
        conf["spark.jars"] = ",".join(resolved_jars())
    elif isinstance(cfg.jars, tuple):
        conf["spark.jars"] = ",".join(cfg.jars)
    conf.update(cfg.spark_conf)
    return conf


def launched_by_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_session(cfg: ApplyConfig, master: str | None = None) -> Any:
    """The SparkSession to run in (see the module docstring)."""
    from pyspark.sql import SparkSession

    _check_pyspark()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None:
        check_delta(active)
        return active
    chosen = master or cfg.master
    if chosen is None and not launched_by_spark_submit():
        chosen = "local[*]"
    builder: Any = SparkSession.builder.appName(cfg.app_name)
    if chosen is not None:
        builder = builder.master(chosen)
    for key, value in session_conf(cfg, chosen).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("TIDEMARK_SPARK_LOG_LEVEL", "WARN"))
    check_delta(spark)
    return spark


def check_delta(spark: Any) -> None:
    extensions = spark.conf.get("spark.sql.extensions", "") or ""
    if DELTA_EXTENSION not in extensions:
        raise RuntimeError(
            "the SparkSession is not configured for Delta Lake: set spark.sql.extensions="
            f"{DELTA_EXTENSION} and spark.sql.catalog.spark_catalog={DELTA_CATALOG} "
            "before the session is created"
        )


def _check_pyspark() -> None:
    import pyspark

    if pyspark.__version__ != PYSPARK_VERSION:
        log.warning(
            "pyspark %s is installed but the Kafka source jars are built for %s; "
            "install pyspark==%s (tidemark[spark])",
            pyspark.__version__,
            PYSPARK_VERSION,
            PYSPARK_VERSION,
        )


def apply_runtime_conf(spark: Any, conf: Mapping[str, str]) -> None:
    for key, value in conf.items():
        spark.conf.set(key, value)
