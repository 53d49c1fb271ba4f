"""What ``tidemark verify`` prints and exports: a summary table, a JSON report, and Prometheus
gauges of the last result (for a scheduled run: a textfile for node_exporter's textfile
collector, or a Pushgateway)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, push_to_gateway, write_to_textfile

from cdc.verify.canonical import KeyTexts
from cdc.verify.compare import TableResult

#: keys named per table and kind in the summary (all are in the JSON report)
SHOWN_KEYS = 10


def key_label(key: KeyTexts) -> str:
    return key[0] if len(key) == 1 else "(" + ", ".join(key) + ")"


def to_json(connector: str, results: Sequence[TableResult]) -> dict[str, Any]:
    return {
        "connector": connector,
        "equal": all(r.equal for r in results),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tables": [
            {
                "table": r.table,
                "topic": r.topic,
                "target": r.target,
                "equal": r.equal,
                "source_rows": r.source_rows,
                "target_rows": r.target_rows,
                "chunks": r.chunks,
                "chunks_differing": r.chunks_differing,
                "rechecks": r.rechecks,
                "missing": [list(k) for k in r.missing],
                "extra": [list(k) for k in r.extra],
                "stale": [list(k) for k in r.stale],
                "skipped_columns": [{"column": c, "type": t} for c, t in r.skipped_columns],
                "seconds": round(r.seconds, 3),
                "error": r.error,
            }
            for r in results
        ],
    }


def summary(results: Sequence[TableResult]) -> str:
    head = ("table", "target", "source", "target", "missing", "extra", "stale", "time", "result")
    rows = [head, ("", "", "rows", "rows", "", "", "", "", "")]
    for r in results:
        verdict = "EQUAL" if r.equal else ("ERROR" if r.error else "DIFFERENT")
        rows.append(
            (
                r.table,
                r.target,
                str(r.source_rows),
                str(r.target_rows),
                str(len(r.missing)),
                str(len(r.extra)),
                str(len(r.stale)),
                f"{r.seconds:.1f}s",
                verdict,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    for r in results:
        if r.error:
            lines.append(f"{r.table}: {r.error}")
        for kind, keys in (("missing", r.missing), ("extra", r.extra), ("stale", r.stale)):
            if keys:
                shown = ", ".join(key_label(k) for k in keys[:SHOWN_KEYS])
                more = f" (+{len(keys) - SHOWN_KEYS} more)" if len(keys) > SHOWN_KEYS else ""
                lines.append(f"{r.table}: {kind} keys: {shown}{more}")
        if r.skipped_columns:
            cols = ", ".join(f"{c} ({t})" for c, t in r.skipped_columns)
            lines.append(f"{r.table}: not compared (no canonical form): {cols}")
    return "\n".join(lines) + "\n"


def gauges(connector: str, results: Sequence[TableResult]) -> CollectorRegistry:
    """``tidemark_verify_*{connector, table, target}`` gauges of this run."""
    registry = CollectorRegistry()
    labels = ["connector", "table", "target"]
    g = {
        name: Gauge(f"tidemark_verify_{name}", doc, labels, registry=registry)
        for name, doc in (
            ("equal", "1 when the last verify found the target equal to the source"),
            ("missing_rows", "keys at the source that the target lacks"),
            ("extra_rows", "keys alive in the target that the source no longer has"),
            ("stale_rows", "keys the target holds in another version than the source"),
            ("source_rows", "rows compared at the source"),
            ("target_rows", "live keys compared in the target"),
            ("duration_seconds", "how long the comparison of the table took"),
            ("last_run_timestamp_seconds", "when the last verify of the table finished"),
        )
    }
    now = time.time()
    for r in results:
        lv = (connector, r.table, r.target)
        g["equal"].labels(*lv).set(1 if r.equal else 0)
        g["missing_rows"].labels(*lv).set(len(r.missing))
        g["extra_rows"].labels(*lv).set(len(r.extra))
        g["stale_rows"].labels(*lv).set(len(r.stale))
        g["source_rows"].labels(*lv).set(r.source_rows)
        g["target_rows"].labels(*lv).set(r.target_rows)
        g["duration_seconds"].labels(*lv).set(r.seconds)
        g["last_run_timestamp_seconds"].labels(*lv).set(now)
    return registry


def export(
    connector: str,
    results: Sequence[TableResult],
    *,
    textfile: str | None = None,
    pushgateway: str | None = None,
) -> None:
    registry = gauges(connector, results)
    if textfile:
        write_to_textfile(textfile, registry)
    if pushgateway:
        push_to_gateway(pushgateway, job="tidemark-verify", registry=registry)
