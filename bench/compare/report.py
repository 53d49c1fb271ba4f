"""Aggregation (median and min-max of the measured runs), ratios, CSV, Markdown and plots."""

from __future__ import annotations

import csv
import math
import platform
import statistics
import subprocess
from pathlib import Path
from typing import Any

METRICS = (
    ("events_per_s", "events/s", "{:,.0f}"),
    ("cpu_s_per_1m", "CPU-s per 1M events", "{:.1f}"),
    ("peak_rss_mb", "peak RSS MB", "{:.0f}"),
    ("first_event_s", "start → first event s", "{:.1f}"),
    ("idle_rss_mb", "idle RSS MB", "{:.0f}"),
    ("idle_cpu_pct", "idle CPU %", "{:.1f}"),
    ("p50_ms", "p50 ms", "{:.1f}"),
    ("p99_ms", "p99 ms", "{:.1f}"),
    ("p999_ms", "p99.9 ms", "{:.1f}"),
    ("achieved_rate", "achieved rows/s", "{:,.0f}"),
    ("snapshot_rows_per_s", "snapshot rows/s", "{:,.0f}"),
    ("snapshot_cpu_s", "CPU-s (snapshot window)", "{:.1f}"),
)
LIMITS = ("pg_recvlogical", "COPY", "mysqlbinlog", "SELECT", "kafka_produce")
CONTENDERS = ("tidemark", "tidemark-2r", "debezium", *LIMITS)


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not (isinstance(v, float) and math.isnan(v))


def aggregate(
    rows: list[dict[str, Any]],
) -> dict[str, dict[str, dict[str, tuple[float, float, float, int]]]]:
    """workload -> contender -> metric -> (median, min, max, runs), measured runs only."""
    out: dict[str, dict[str, dict[str, tuple[float, float, float, int]]]] = {}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("warmup"):
            continue
        groups.setdefault((r["workload"], r["contender"]), []).append(r)
    for (w, c), rs in groups.items():
        for key, _label, _fmt in METRICS:
            vals = [float(r[key]) for r in rs if _finite(r.get(key))]
            if vals:
                out.setdefault(w, {}).setdefault(c, {})[key] = (
                    statistics.median(vals),
                    min(vals),
                    max(vals),
                    len(vals),
                )
    return out


def ratios(agg: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """workload -> "tidemark/debezium" | "tidemark/limit" -> metric -> ratio of medians."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for w, by in agg.items():
        tm = by.get("tidemark")
        if not tm:
            continue
        limit = next((by[c] for c in LIMITS if c in by), None)
        pairs = [
            ("tidemark/debezium", tm, by.get("debezium")),
            ("tidemark/limit", tm, limit),
            ("tidemark-2r/limit", by.get("tidemark-2r"), limit),
            ("tidemark/kafka", tm, by.get("kafka_produce")),
        ]
        for name, mine, other in pairs:
            if not mine or not other:
                continue
            for key in mine:
                if key in other and other[key][0]:
                    out.setdefault(w, {}).setdefault(name, {})[key] = mine[key][0] / other[key][0]
    return out


def _cell(stat: tuple[float, float, float, int] | None, fmt: str) -> str:
    if stat is None:
        return "-"
    med, lo, hi, n = stat
    if n > 1:
        return f"{fmt.format(med)} ({fmt.format(lo)}-{fmt.format(hi)})"
    return fmt.format(med)


def markdown(agg: dict[str, Any], rat: dict[str, Any], order: list[str]) -> str:
    lines: list[str] = []
    for w in order:
        if w not in agg:
            continue
        by = agg[w]
        keys = [(k, lab, f) for k, lab, f in METRICS if any(k in m for m in by.values())]
        lines.append(f"\n**{w}**\n")
        lines.append("| contender | " + " | ".join(lab for _, lab, _ in keys) + " |")
        lines.append("|---|" + "---|" * len(keys))
        for c in CONTENDERS:
            if c in by:
                cells = [_cell(by[c].get(k), f) for k, _, f in keys]
                lines.append(f"| {c} | " + " | ".join(cells) + " |")
        for name, vals in rat.get(w, {}).items():
            cells = [f"{vals[k]:.2f}x" if k in vals else "-" for k, _, _ in keys]
            lines.append(f"| *{name}* | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gb = f"{int(line.split()[1]) / 1024 / 1024:.0f}"
    except OSError:
        pass
    import os

    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "memory_gib": mem_gb,
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def versions(java: str | None, debezium_version: str) -> dict[str, str]:
    import confluent_kafka
    import psycopg

    out = {
        "debezium_server": debezium_version,
        "confluent_kafka": str(confluent_kafka.__version__),
        "librdkafka": str(confluent_kafka.libversion()[0]),
        "psycopg": str(psycopg.__version__),
    }
    if java:
        r = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
        out["java"] = (r.stderr.splitlines() or ["?"])[0]
    return out


def plots(
    agg: dict[str, Any],
    latencies: dict[str, dict[str, list[float]]],
    outdir: Path,
    order: list[str],
    caption: str = "",
) -> list[Path]:
    """PNG bar charts (median, min-max whiskers) of throughput, CPU per event and peak RSS
    (every workload, PostgreSQL and ``-mariadb`` alike), and the latency distribution of W5.
    Needs matplotlib (the ``bench`` extra); skipped without it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written: list[Path] = []
    colours = {
        "tidemark": "#1f77b4",
        "tidemark-2r": "#6baed6",
        "debezium": "#d62728",
        "pg_recvlogical": "#7f7f7f",
        "COPY": "#7f7f7f",
        "mysqlbinlog": "#7f7f7f",
        "SELECT": "#7f7f7f",
        "kafka_produce": "#bcbcbc",
    }
    for key, title, fname in (
        ("events_per_s", "Throughput (events/s, higher is better)", "compare-throughput.png"),
        ("cpu_s_per_1m", "CPU-seconds per 1M events (lower is better)", "compare-cpu.png"),
        # W3's headline (one huge transaction), and the memory side of every other workload.
        ("peak_rss_mb", "Peak RSS of the capture process (MB, lower is better)", "compare-rss.png"),
    ):
        ws = [w for w in order if w in agg and any(key in m for m in agg[w].values())]
        if not ws:
            continue
        contenders = [c for c in CONTENDERS if any(c in agg[w] for w in ws)]
        fig, ax = plt.subplots(figsize=(7, 4))
        width = 0.8 / max(len(contenders), 1)
        for i, c in enumerate(contenders):
            xs, meds, errs_lo, errs_hi = [], [], [], []
            for j, w in enumerate(ws):
                stat = agg[w].get(c, {}).get(key)
                if stat is None:
                    continue
                xs.append(j + i * width)
                meds.append(stat[0])
                errs_lo.append(stat[0] - stat[1])
                errs_hi.append(stat[2] - stat[0])
            ax.bar(
                xs, meds, width, yerr=[errs_lo, errs_hi], label=c, color=colours.get(c), capsize=3
            )
        ax.set_xticks([j + width * (len(contenders) - 1) / 2 for j in range(len(ws))], ws)
        ax.set_title(title)
        if caption:
            fig.text(0.01, 0.01, caption, fontsize=6.5, color="#555555", wrap=True)
        ax.legend()
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout(rect=(0, 0.07, 1, 1))
        path = outdir / fname
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    for w, series in latencies.items():
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(7, 4))
        for name, lat in sorted(series.items()):
            if not lat:
                continue
            c = name.split("#")[0]
            ys = [100 * (i + 0.5) / len(lat) for i in range(len(lat))]
            ax.plot([max(x, 0.1) for x in lat], ys, label=name, color=colours.get(c), alpha=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("commit → Kafka append (ms, log scale)")
        ax.set_ylabel("percentile")
        ax.set_title(f"{w}: latency distribution")
        if caption:
            fig.text(0.01, 0.01, caption, fontsize=6.5, color="#555555", wrap=True)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout(rect=(0, 0.07, 1, 1))
        path = outdir / f"compare-latency-{w.lower()}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def quantiles(sorted_values: list[float], n: int = 1000) -> list[float]:
    """``n`` evenly spaced quantiles of a sorted sample: enough to redraw a latency
    distribution, small enough to keep in summary.json."""
    if not sorted_values:
        return []
    last = len(sorted_values) - 1
    return [sorted_values[min(last, int((i + 0.5) / n * len(sorted_values)))] for i in range(n)]


def read_csv(path: Path) -> list[dict[str, Any]]:
    """results.csv back into rows with numbers and booleans restored."""
    rows: list[dict[str, Any]] = []
    with open(path, newline="") as fh:
        for raw in csv.DictReader(fh):
            row: dict[str, Any] = {}
            for k, v in raw.items():
                if v in ("True", "False"):
                    row[k] = v == "True"
                elif v == "":
                    continue
                else:
                    try:
                        row[k] = int(v) if k == "run" else float(v)
                    except ValueError:
                        row[k] = v
            rows.append(row)
    return rows
