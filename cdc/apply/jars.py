"""The JVM jars the job needs, resolved ahead of time (no download when a query starts).

Spark's Kafka source (``spark-sql-kafka-0-10``, pinned to the exact pyspark version) and Delta
Lake are not in pyspark's bundled jars. ``configure_spark_with_delta_pip`` and ``--packages``
would fetch them with Ivy at every session start, which needs the network at query time; instead
``scripts/setup.sh`` resolves the poms ``worker/dev/maven/spark-kafka.xml`` and
``delta-spark.xml`` once into the shared Maven cache (the same ``<cache>/<pom>-<version>/lib``
layout as the dev stack's Kafka broker), and the job puts those files on ``spark.jars``.

This module only *finds* them: the job must not import the dev tooling (``worker``), and a
cluster deployment passes its own jars (``spark.jars: none`` plus ``--jars``/``--packages``).
"""

from __future__ import annotations

import os
from pathlib import Path

PYSPARK_VERSION = "4.2.0"
SPARK_KAFKA = ("spark-kafka", PYSPARK_VERSION)
#: The newest Delta build for Spark 4.2 on Maven Central (no 4.4.1 jars were published).
DELTA_JARS = ("delta-spark", "4.4.0")
POMS = (SPARK_KAFKA, DELTA_JARS)

RESOLVE_COMMAND = (
    'python -c "from worker.dev.kafka import resolve_jars; '
    f"resolve_jars('{SPARK_KAFKA[0]}', '{SPARK_KAFKA[1]}'); "
    f"resolve_jars('{DELTA_JARS[0]}', '{DELTA_JARS[1]}')\""
)


class JarsMissing(RuntimeError):
    """The Kafka/Delta jars have not been resolved into the cache yet."""


def maven_cache() -> Path:
    return Path(os.environ.get("TIDEMARK_MAVEN_CACHE", Path.home() / ".cache" / "tidemark"))


def lib_dir(pom: str, version: str) -> Path:
    return maven_cache() / f"{pom}-{version}" / "lib"


def resolved_jars() -> list[str]:
    """Absolute paths of every cached jar, or :class:`JarsMissing` naming the fix."""
    out: list[str] = []
    missing: list[str] = []
    for pom, version in POMS:
        lib = lib_dir(pom, version)
        if not (lib / ".resolved").exists():
            missing.append(f"{pom} {version} (expected in {lib})")
            continue
        out.extend(str(p) for p in sorted(lib.glob("*.jar")))
    if missing:
        raise JarsMissing(
            "the Spark Kafka source / Delta jars are not resolved: "
            + "; ".join(missing)
            + f". Resolve them once (needs Maven Central): {RESOLVE_COMMAND}  "
            "or run scripts/setup.sh spark; or set spark.jars: none and pass your own jars."
        )
    return out
