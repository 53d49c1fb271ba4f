"""What ``tidemark status`` prints: states, snapshot progress bars with rows and ETA,
streaming lag and failure traces, from ``GET /tidemark/status`` (Kafka Connect's status plus
the task metrics)."""

from __future__ import annotations

import time
from typing import Any

from worker.rest.client import ApiError, Client

BAR = 24


def bar(done: int, total: int | None) -> str:
    if not total:
        return f"[{'?' * BAR}] {done:,} rows"
    frac = min(done / total, 1.0)
    fill = int(frac * BAR)
    return f"[{'#' * fill}{'-' * (BAR - fill)}] {done:,}/{total:,} rows {frac * 100:3.0f}%"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def snapshot_lines(snap: dict[str, Any], now_ms: int) -> list[str]:
    tables = snap.get("tables") or []
    if snap.get("running"):
        head = "running"
    elif snap.get("completed"):
        head = f"completed: {len(tables)} table(s) in {_duration(snap.get('duration_s', 0))}"
    elif snap.get("aborted"):
        head = "aborted"
    else:
        return ["    snapshot   not run by this task (resumed from stored offsets)"]
    lines = [f"    snapshot   {head}"]
    if snap.get("running") and snap.get("started_ms"):
        elapsed = max((now_ms - snap["started_ms"]) / 1000, 0.001)
        scanned = sum(t["rows"] for t in tables)
        remaining = sum(max((t["expected"] or 0) - t["rows"], 0) for t in tables)
        rate = scanned / elapsed
        eta = f", ETA {_duration(remaining / rate)}" if rate > 0 and remaining else ""
        left = snap.get("remaining_tables", 0)
        lines[0] += (
            f" ({left} of {snap.get('total_tables', 0)} tables left, {rate:,.0f} rows/s{eta})"
        )
    width = max((len(t["table"]) for t in tables), default=0)
    for t in tables:
        lines.append(f"      {t['table']:<{width}}  {bar(t['rows'], t['expected'])}")
    return lines


def streaming_lines(st: dict[str, Any], task: dict[str, Any], now_ms: int) -> list[str]:
    if not st.get("connected") and not st.get("events"):
        return []
    parts = ["connected" if st.get("connected") else "not connected"]
    lag = st.get("ms_behind_source", -1)
    if lag is not None and lag >= 0:
        parts.append(f"lag {lag:,} ms")
    parts.append(f"{st.get('events', 0):,} events")
    if st.get("last_event_ms"):
        parts.append(f"last event {_duration((now_ms - st['last_event_ms']) / 1000)} ago")
    parts.append(f"{task.get('records_sent', 0):,} records sent")
    return [f"    streaming  {', '.join(parts)}"]


def _first_line_of(trace: str) -> str:
    lines = [ln.strip() for ln in trace.strip().splitlines() if ln.strip()]
    text = lines[-1] if lines else ""
    return text if len(text) <= 300 else text[:297] + "..."


def render_status(client: Client) -> str:
    out: list[str] = []
    _, health = client.request("GET", "/health")
    info = client.get("/")
    h = health.get("status", "?") if isinstance(health, dict) else "?"
    code, doc = client.request("GET", "/tidemark/status")
    if code == 404:  # a plain Kafka Connect worker: states only
        doc = {
            "worker": {},
            "connectors": {
                n: {"status": e["status"], "plugin": None, "tasks": []}
                for n, e in client.get("/connectors?expand=status").items()
            },
        }
    elif code >= 400:
        raise ApiError(code, str(doc))
    worker = doc.get("worker", {})
    up = f"  up {_duration(worker['uptime_s'])}" if "uptime_s" in worker else ""
    out.append(f"worker {client.url}  {h}  tidemark {info.get('version', '?')}{up}")
    connectors = doc.get("connectors", {})
    if not connectors:
        out.append("no connectors")
    now_ms = int(time.time() * 1000)
    width = max((len(n) for n in connectors), default=0)
    for name, entry in connectors.items():
        st = entry["status"]
        conn = st["connector"]
        out.append("")
        out.append(f"{name:<{width}}  {entry.get('plugin') or st.get('type', '')}  {conn['state']}")
        if conn.get("trace"):
            out.append(f"    error      {_first_line_of(conn['trace'])}")
        details = {t["id"]: t for t in entry.get("tasks", [])}
        for task in st.get("tasks", []):
            d = details.get(task["id"], {})
            phase = f"  {d['phase']}" if d.get("phase") else ""
            restarts = sum((d.get("restarts") or {}).values())
            extra = f"  restarts {restarts}" if restarts else ""
            out.append(f"  task {task['id']}  {task['state']}{phase}{extra}")
            if task.get("trace") and task["state"] == "RUNNING":  # degraded, still running
                out.extend(f"    warning    {line}" for line in task["trace"].splitlines())
            elif task.get("trace"):
                out.append(f"    error      {_first_line_of(task['trace'])}")
            if "snapshot" in d:
                out.extend(snapshot_lines(d["snapshot"], now_ms))
            if "streaming" in d:
                out.extend(streaming_lines(d["streaming"], d, now_ms))
    return "\n".join(out) + "\n"
