"""Debezium's connector metrics, exported in the form Debezium's own JMX-exporter setup uses.

Debezium's monitoring examples map the MBean
``debezium.<plugin>:type=connector-metrics,context=<ctx>,server=<name>`` attribute ``<Attr>``
to the Prometheus metric ``debezium_metrics_<Attr>{plugin, name, context}``; we emit exactly
that (plus ``connector`` and ``task`` labels), so existing dashboards and alerts keep working.

The hot path only bumps plain attributes on a metrics object; Prometheus values are computed
when scraped, by a collector that reads those objects. No lock, no label lookup per event.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import REGISTRY, Collector


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class CommonMetrics:
    last_event: str = ""
    last_event_ms: int = 0
    total_events_seen: int = 0
    events_filtered: int = 0
    monitored_tables: set[str] = field(default_factory=set)

    def event(self, description: str) -> None:
        self.total_events_seen += 1
        self.last_event = description
        self.last_event_ms = _now_ms()


@dataclass
class SnapshotMetrics(CommonMetrics):
    total_table_count: int = 0
    remaining_table_count: int = 0
    running: bool = False
    aborted: bool = False
    completed: bool = False
    started_ms: int = 0
    ended_ms: int = 0
    rows_scanned: dict[str, int] = field(default_factory=dict)
    rows_expected: dict[str, int] = field(default_factory=dict)

    def start(self, tables: list[str]) -> None:
        self.running, self.aborted, self.completed = True, False, False
        self.started_ms = _now_ms()
        self.total_table_count = self.remaining_table_count = len(tables)
        self.monitored_tables.update(tables)

    def finish(self, *, aborted: bool = False) -> None:
        self.running = False
        self.aborted, self.completed = aborted, not aborted
        self.ended_ms = _now_ms()

    @property
    def duration_seconds(self) -> int:
        if not self.started_ms:
            return 0
        end = self.ended_ms if not self.running and self.ended_ms else _now_ms()
        return (end - self.started_ms) // 1000


@dataclass
class StreamingMetrics(CommonMetrics):
    connected: bool = False
    ms_behind_source: int = -1
    committed_transactions: int = 0
    source_event_position: dict[str, str] = field(default_factory=dict)
    last_transaction_id: str = ""


@dataclass
class TaskMetrics:
    """Everything one connector task reports. ``queue`` is read at scrape time."""

    plugin: str  # postgres, mysql, mongodb, sql_server, cassandra
    server: str
    connector: str
    task: int = 0
    snapshot: SnapshotMetrics = field(default_factory=SnapshotMetrics)
    streaming: StreamingMetrics = field(default_factory=StreamingMetrics)
    queue: Any = None
    extra: dict[str, Callable[[], float]] = field(default_factory=dict)
    #: text-valued attributes (e.g. MySQL's BinlogFilename), exported as value="..." with 1
    extra_text: dict[str, Callable[[], str]] = field(default_factory=dict)
    #: context label per extra attribute; default is ``streaming_context``
    extra_contexts: dict[str, str] = field(default_factory=dict)
    #: MySQL names its streaming context "binlog" (seed §1.14)
    streaming_context: str = "streaming"
    records_sent: int = 0
    records_acked: int = 0
    records_failed: int = 0
    offset_commits: int = 0
    offset_commit_seconds: float = 0.0
    dead_lettered: int = 0
    #: ``(records not yet acknowledged by Kafka, seconds since everything sent was)``, read
    #: when asked (the sink's :meth:`~cdc.sinks.kafka.KafkaSink.delivery_lag`)
    delivery: Callable[[], tuple[int, float]] | None = None
    #: unacknowledged records for longer than this make the task degraded (see problems())
    ack_alarm_s: float = 10.0
    #: things the operator should know about this run (e.g. a full re-snapshot and why)
    notices: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """Why a running task is not healthy, for ``/connectors/{name}/status``: Kafka not
        acknowledging records (down or unreachable), and the notices of this run."""
        out = list(self.notices)
        if self.delivery is not None:
            pending, since = self.delivery()
            if pending and since >= self.ack_alarm_s:
                out.append(
                    f"Kafka has not acknowledged {pending} records for {since:.0f} s (down or "
                    f"unreachable?); their offsets are stored once it does"
                )
        return out


class _Collector(Collector):
    def __init__(self) -> None:
        self._tasks: dict[tuple[str, int], TaskMetrics] = {}
        self._lock = threading.Lock()

    def register(self, m: TaskMetrics) -> None:
        with self._lock:
            self._tasks[(m.connector, m.task)] = m

    def unregister(self, m: TaskMetrics) -> None:
        with self._lock:
            if self._tasks.get((m.connector, m.task)) is m:
                del self._tasks[(m.connector, m.task)]

    def tasks(self) -> list[TaskMetrics]:
        with self._lock:
            return list(self._tasks.values())

    def collect(self) -> Iterator[Metric]:
        labels = ["plugin", "name", "context", "connector", "task"]
        fams: dict[str, GaugeMetricFamily] = {}

        def g(attr: str, doc: str, lv: list[str], value: float) -> None:
            fam = fams.get(attr)
            if fam is None:
                fam = fams[attr] = GaugeMetricFamily(f"debezium_metrics_{attr}", doc, labels=labels)
            fam.add_metric(lv, value)

        now = _now_ms()
        tidemark: dict[str, CounterMetricFamily] = {
            name: CounterMetricFamily(f"tidemark_{name}", doc, labels=["connector", "task"])
            for name, doc in (
                ("records_sent", "Records handed to the Kafka producer"),
                ("records_acked", "Records Kafka acknowledged"),
                ("records_failed", "Records Kafka rejected"),
                ("offset_commits", "Offset commits"),
                ("offset_commit_seconds", "Time spent committing offsets"),
                ("dead_lettered", "Events sent to the dead-letter topic"),
            )
        }
        delivery = {
            name: GaugeMetricFamily(f"tidemark_{name}", doc, labels=["connector", "task"])
            for name, doc in (
                ("records_unacknowledged", "Records handed to Kafka and not acknowledged yet"),
                (
                    "seconds_since_last_acknowledgement",
                    "Seconds since Kafka last had acknowledged everything sent (0: nothing "
                    "outstanding)",
                ),
            )
        }
        for m in self.tasks():
            for name, counter in tidemark.items():
                counter.add_metric([m.connector, str(m.task)], float(getattr(m, name)))
            if m.delivery is not None:
                pending, since = m.delivery()
                tl = [m.connector, str(m.task)]
                delivery["records_unacknowledged"].add_metric(tl, pending)
                delivery["seconds_since_last_acknowledgement"].add_metric(
                    tl, since if pending else 0.0
                )
            for ctx, common in (("snapshot", m.snapshot), (m.streaming_context, m.streaming)):
                lv = [m.plugin, m.server, ctx, m.connector, str(m.task)]
                since = now - common.last_event_ms if common.last_event_ms else -1
                g(
                    "TotalNumberOfEventsSeen",
                    "Events seen since start",
                    lv,
                    common.total_events_seen,
                )
                g(
                    "NumberOfEventsFiltered",
                    "Events filtered by include/exclude rules",
                    lv,
                    common.events_filtered,
                )
                g("MilliSecondsSinceLastEvent", "ms since the last event", lv, since)
                g("MonitoredTables", "Number of monitored tables", lv, len(common.monitored_tables))
                if m.queue is not None:
                    g("QueueTotalCapacity", "Queue capacity", lv, m.queue.max_size)
                    g(
                        "QueueRemainingCapacity",
                        "Free queue capacity",
                        lv,
                        m.queue.remaining_capacity,
                    )
                    g("MaxQueueSizeInBytes", "Queue byte limit", lv, m.queue.max_bytes)
                    g("CurrentQueueSizeInBytes", "Bytes in the queue", lv, m.queue.current_bytes)
            s = m.snapshot
            lv = [m.plugin, m.server, "snapshot", m.connector, str(m.task)]
            g("TotalTableCount", "Tables in the snapshot", lv, s.total_table_count)
            g("RemainingTableCount", "Tables not yet snapshotted", lv, s.remaining_table_count)
            g("SnapshotRunning", "Snapshot running", lv, float(s.running))
            g("SnapshotAborted", "Snapshot aborted", lv, float(s.aborted))
            g("SnapshotCompleted", "Snapshot completed", lv, float(s.completed))
            g("SnapshotDurationInSeconds", "Snapshot duration so far", lv, s.duration_seconds)
            for table, rows in s.rows_scanned.items():
                fam = fams.get("RowsScanned")
                if fam is None:
                    fam = fams["RowsScanned"] = GaugeMetricFamily(
                        "debezium_metrics_RowsScanned",
                        "Rows scanned per table",
                        labels=[*labels, "table"],
                    )
                fam.add_metric([*lv, table], rows)
            st = m.streaming
            lv = [m.plugin, m.server, m.streaming_context, m.connector, str(m.task)]
            g("Connected", "Connected to the database", lv, float(st.connected))
            g("MilliSecondsBehindSource", "Lag behind the source", lv, st.ms_behind_source)
            g(
                "NumberOfCommittedTransactions",
                "Committed transactions",
                lv,
                st.committed_transactions,
            )
            # Debezium's text-valued attributes: the position as key/value labels, the last
            # transaction id as a label (a gauge of 1, as Prometheus "info" metrics are)
            for key, value in sorted(st.source_event_position.items()):
                fam = fams.get("SourceEventPosition")
                if fam is None:
                    fam = fams["SourceEventPosition"] = GaugeMetricFamily(
                        "debezium_metrics_SourceEventPosition",
                        "Where in the log the last event was read (one sample per part)",
                        labels=[*labels, "key", "value"],
                    )
                fam.add_metric([*lv, key, str(value)], 1)
            if st.last_transaction_id:
                fam = fams.get("LastTransactionId")
                if fam is None:
                    fam = fams["LastTransactionId"] = GaugeMetricFamily(
                        "debezium_metrics_LastTransactionId",
                        "The id of the last transaction read",
                        labels=[*labels, "value"],
                    )
                fam.add_metric([*lv, str(st.last_transaction_id)], 1)
            for name, fn in m.extra.items():
                ctx = m.extra_contexts.get(name, m.streaming_context)
                g(name, name, [m.plugin, m.server, ctx, m.connector, str(m.task)], fn())
            for name, text_fn in m.extra_text.items():
                ctx = m.extra_contexts.get(name, m.streaming_context)
                fam = fams.get(name)
                if fam is None:
                    fam = fams[name] = GaugeMetricFamily(
                        f"debezium_metrics_{name}", name, labels=[*labels, "value"]
                    )
                fam.add_metric([m.plugin, m.server, ctx, m.connector, str(m.task), text_fn()], 1)
        yield from fams.values()
        yield from tidemark.values()
        yield from delivery.values()


COLLECTOR = _Collector()
_registered = False
_reg_lock = threading.Lock()


def register(m: TaskMetrics) -> None:
    """Add a task's metrics to the process-wide Prometheus registry."""
    global _registered
    with _reg_lock:
        if not _registered:
            REGISTRY.register(COLLECTOR)
            _registered = True
    COLLECTOR.register(m)


def unregister(m: TaskMetrics) -> None:
    COLLECTOR.unregister(m)
