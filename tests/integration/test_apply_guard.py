"""The deleted-keys guard before the MERGE (merge.guard_deleted), on tiny Delta tables.

The guard is an anti-join with the position in the join condition; this checks it keeps exactly
the rows the definition keeps (no recorded delete of the key at or above the row's position),
for single and composite keys, NULL key parts and multi-element positions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_guard_drops_rows_a_recorded_delete_supersedes(spark: Any, tmp_path: Path) -> None:
    from cdc.apply.merge import guard_deleted

    schema = "a bigint, b string, __pos array<bigint>, v string"
    source = spark.createDataFrame(
        [
            (1, "x", [0, 4, 1], "older than its delete"),
            (2, "x", [0, 6, 2], "below the second of two deletes"),
            (3, "x", [0, 7, 3], "above its delete"),
            (4, "x", [0, 8, 4], "never deleted"),
            (5, "x", [0, 9, 5], "same position as its delete"),
            (6, "y", [0, 3, 6], "deleted under another b only"),
            (7, None, [0, 1, 7], "NULL key part"),
            (8, "x", [1, 0, 0], "first element decides"),
        ],
        schema,
    )
    deletes = spark.createDataFrame(
        [
            (1, "x", [0, 5, 0]),
            (2, "x", [0, 3, 0]),
            (2, "x", [0, 9, 0]),
            (3, "x", [0, 2, 0]),
            (5, "x", [0, 9, 5]),
            (6, "x", [0, 99, 0]),
            (7, None, [0, 99, 0]),
            (8, "x", [0, 99, 99]),
        ],
        "a bigint, b string, __pos array<bigint>",
    )
    path = str(tmp_path / "deletes")
    deletes.write.format("delta").save(path)

    kept = guard_deleted(spark, source, ["a", "b"], path)

    assert kept.columns == source.columns
    assert sorted(r["a"] for r in kept.collect()) == [3, 4, 6, 7, 8]
