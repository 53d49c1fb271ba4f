"""The PySpark apply job: Debezium change events from Kafka into Delta Lake tables.

Hudi RFC-39's DeltaStreamer Debezium source, for Spark Structured Streaming and Delta: flatten
``after``/``before`` plus meta columns, reduce each micro-batch to the newest change per key by
*source* position, MERGE with position guards, hard deletes whose positions are remembered (so a
late older update cannot resurrect the row), TOAST placeholders that keep the stored value and
are handed over across primary-key changes.
See docs/apply.md. pyspark is imported lazily: the pure parts (ordering, parsing, folding,
schema policy) work without it.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``tidemark apply`` (``argv`` = the arguments after ``apply``)."""
    from cdc.apply.cli import main as _main

    return _main(argv)


__all__ = ["main"]
