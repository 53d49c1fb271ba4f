"""The driver's step for MongoDB patches whose document is not in the batch: the stored
document is looked up in the Delta table and the patch applied to it, so the MERGE writes a
whole document. Its own module (used by the job only) because it needs the lake lookups of
:mod:`cdc.apply.keychanges` and :mod:`cdc.apply.handover`, which the event model in
:mod:`cdc.apply.documents` must not import (they import it, through the worker)."""

from __future__ import annotations

from typing import Any

import orjson

from cdc.apply import keychanges as kc
from cdc.apply.documents import DOCUMENT, MissingDocument, apply_steps, decode
from cdc.apply.handover import key_text, row_key
from cdc.apply.policy import TablePlan


def complete(
    spark: Any, table_rows: Any, plan: TablePlan, path: str, deletes_path: str, *, deletes: bool
) -> tuple[Any, int]:
    """Takes the batch's patch rows out of ``table_rows`` and puts them back as whole documents:
    the stored document with the steps newer than it applied. Returns the rows and how many
    were completed. A patch for a key the lake never held fails the batch (the update cannot
    be applied without its document: the topic was not read from its first event)."""
    from pyspark.sql import functions as F

    cond = F.col("patch").isNotNull()
    incoming = [kc.record(r) for r in table_rows.filter(cond).collect()]
    if not incoming:
        return table_rows, 0
    keys = [row_key(rec, plan.key) for rec in incoming]
    found = kc.lookup(spark, plan, path, deletes_path, deletes_nonempty=deletes, keys=keys)
    out = []
    for rec, key in zip(incoming, keys, strict=True):
        stored = found[key_text(key)]
        steps = decode(rec["patch"])
        if stored.pos is None or not isinstance(stored.values.get(DOCUMENT), str):
            if stored.deleted is not None and stored.deleted >= tuple(rec["pos"]):
                continue  # deleted later: the merge's guard would drop it anyway
            raise MissingDocument(
                f"{rec['topic']}[{rec['partition']}]@{rec['offset']}: update of the MongoDB "
                f"document {key_text(key)} in table {plan.table} is a patch, but the table "
                "holds no document for that key to apply it to (read the topic from its start, "
                "or snapshot the collection again)"
            )
        row = orjson.loads(rec["row_json"])
        row[DOCUMENT] = apply_steps(stored.values[DOCUMENT], steps, stored.pos)
        rec.update(row_json=orjson.dumps(row).decode(), unavailable=[], patch=None)
        out.append(rec)
    rest = table_rows.filter(~cond)
    if not out:
        return rest, 0
    return rest.unionByName(kc.records_frame(spark, out).select(*rest.columns)), len(out)
