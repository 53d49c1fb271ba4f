"""Spark's own streaming progress, logged once per batch next to the job's batch line."""

from __future__ import annotations

import logging
import threading
from typing import Any

from cdc.apply.offset_log import parse_kafka_offsets

log = logging.getLogger("tidemark.apply.progress")


def progress_line(progress: Any) -> str:
    """One line from a ``StreamingQueryProgress``: rates, duration, the Kafka offsets the batch
    covered and the Kafka source's offsets-behind-latest metrics (the consumer lag in records).

    ``input_rows`` counts what Spark's Kafka source read: 0 when the workers read the batch
    themselves (``kafka.reader``), so ``input_offsets``, taken from the batch's start and end
    offsets, is the figure that holds for both readers. It counts the partitions the progress
    gives a start offset for: not a partition new in the batch, and nothing when Spark
    reports no start at all (a query's first batch)."""
    behind = []
    covered = 0
    for src in progress.sources or []:
        metrics = getattr(src, "metrics", None) or {}
        if "maxOffsetsBehindLatest" in metrics:
            behind.append(str(metrics["maxOffsetsBehindLatest"]))
        covered += _offsets_between(getattr(src, "startOffset", None), src.endOffset)
    duration = (progress.durationMs or {}).get("triggerExecution")
    return (
        f"query {progress.name or progress.id} batch {progress.batchId}: "
        f"input_rows={progress.numInputRows} input_offsets={covered} "
        f"input_rows_per_s={progress.inputRowsPerSecond:.0f} "
        f"processed_rows_per_s={progress.processedRowsPerSecond:.0f} "
        f"trigger_ms={duration} "
        f"kafka_max_offsets_behind={'/'.join(behind) or '-'}"
    )


def _offsets_between(start: Any, end: Any) -> int:
    ends = parse_kafka_offsets(end) if isinstance(end, str) else None
    if not ends:
        return 0
    starts = (parse_kafka_offsets(start) if isinstance(start, str) else None) or {}
    return sum(until - starts.get(tp, until) for tp, until in ends.items())


def add_listener(spark: Any) -> Any:
    """Registers a listener logging every progress event; returns it for :func:`remove_listener`."""
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class _Listener(StreamingQueryListener):  # type: ignore[misc,unused-ignore]
        def __init__(self) -> None:
            self.terminated: dict[str, threading.Event] = {}
            self._lock = threading.Lock()

        def ended(self, query_id: str) -> threading.Event:
            with self._lock:
                return self.terminated.setdefault(query_id, threading.Event())

        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            try:
                log.info("%s", progress_line(event.progress))
            except Exception:  # a log line must never fail the query
                log.debug("cannot format progress", exc_info=True)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            if event.exception:
                log.error("query %s terminated: %s", event.id, event.exception)
            self.ended(str(event.id)).set()

    listener = _Listener()
    spark.streams.addListener(listener)
    return listener


def remove_listener(spark: Any, listener: Any, query: Any, timeout: float = 10.0) -> None:
    """Unregisters ``listener`` once it has seen ``query`` end (or after ``timeout`` s).

    Why wait: Spark posts progress and termination events to Python listeners from its
    listener bus, after the query itself has returned. A process that exits straight after an
    ``available-now`` run closes the Python side while the last batch's progress is still on
    its way: that line is lost, and Spark logs an ERROR with a py4j stack trace at every clean
    exit. The bus delivers in order, so the termination event arriving means the progress
    before it did."""
    if query is not None:
        listener.ended(str(query.id)).wait(timeout)
    try:
        spark.streams.removeListener(listener)
    except Exception:  # the session may already be gone; nothing is left to deliver then
        log.debug("cannot remove the progress listener", exc_info=True)
