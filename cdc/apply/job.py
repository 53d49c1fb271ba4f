"""The streaming job: Kafka -> per-batch fold -> position-guarded MERGE into Delta tables.

One Structured Streaming query reads the topics with Spark's own Kafka source and hands each
micro-batch to :meth:`ApplyJob.process_batch` (``foreachBatch``):

1. Python workers parse and fold the batch (``worker.process`` via ``mapInArrow``): one row per
   changed key, plus schema descriptors, truncates, bad events and counters.
2. The driver checks the descriptors against the tables (``policy.plan_table``). Bad input of
   any kind either fails the batch, before anything is written, with a message naming
   topic/partition/offset (``on.error: fail``), or goes to the quarantine table
   (``on.error: quarantine``). Never silently dropped.
3. DDL (create, add columns, widen), then per table: truncates, fills across primary-key
   changes (``handover``: images kept, rows held until their old key's image arrives), MERGE,
   deleted-keys append.
4. One log line per batch; Spark's own progress is logged by a query listener.

Exactly-once in effect: Spark commits the Kafka offsets of a batch to the checkpoint only after
``foreachBatch`` returned, so a crash replays the batch; every write of a batch is idempotent
(position-guarded MERGE, IF NOT EXISTS DDL, deleted-keys and quarantine appends keyed by batch
id), so the replay changes nothing that was already applied.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from cdc.apply import cells, changelog, document_patches, documents, ranges, tombstones
from cdc.apply import keychanges as kc
from cdc.apply import policy as pol
from cdc.apply.config import ApplyConfig
from cdc.apply.direct_reader import RANGE_DDL, DirectSettings, read_ranges
from cdc.apply.events import ParseSettings
from cdc.apply.handover import KeyChanges, Outcome, decode_image, lookup_keys, step
from cdc.apply.merge import (
    MergeCounts,
    absent_by_column,
    compact_deletes,
    merge_table,
    native_part,
    truncate,
    truncated_position,
    typed_rows,
    write_quarantine,
)
from cdc.apply.offset_log import batch_ranges
from cdc.apply.tables import TableCatalog
from cdc.apply.worker import INPUT_COLUMNS, OUTPUT_DDL, WorkerSettings, process
from cdc.converters.avro_json import RegistrySettings

log = logging.getLogger("tidemark.apply")
#: the app id of on-demand compactions' idempotent deleted-keys appends (see compact_all)
ON_DEMAND_APP = "tidemark-apply-on-demand"
MAX_REPORTED_ERRORS = 5
#: Above this many rows of a table in a batch, a distinct-key count decides whether the per-key
#: reduction before the MERGE is needed; below it, the reduction runs whenever the rows came
#: from more than one partition (one Spark job fewer, and cheap at that size).
REDUCE_CHECK_ROWS = 20_000


class ApplyError(RuntimeError):
    """A batch cannot be applied (bad input with ``on.error: fail``, a forbidden schema
    change, ...). The message names the offending Kafka records."""


@dataclass
class BatchReport:
    batch_id: int
    events: int = 0
    tombstones: int = 0
    skipped: int = 0
    changes: int = 0
    rows: int = 0
    errors: int = 0
    quarantined: int = 0
    tables: dict[str, MergeCounts] = field(default_factory=dict)
    lag_ms: int | None = None
    duration_ms: int = 0
    #: who read the batch's records: "direct" (the workers' own consumers) or "spark"
    reader: str = "spark"
    #: milliseconds per phase (parse, ddl, merge:<table>, ...), for tuning
    timings: dict[str, int] = field(default_factory=dict)

    @property
    def totals(self) -> MergeCounts:
        total = MergeCounts()
        for c in self.tables.values():
            total.add(c)
        return total

    def line(self) -> str:
        t = self.totals
        lag = "-" if self.lag_ms is None else str(self.lag_ms)
        mor = f"logged={t.logged} compactions={t.compactions} " if t.logged or t.compactions else ""
        return (
            f"batch {self.batch_id}: events={self.events} changes={self.changes} "
            f"keys={self.rows} inserted={t.inserted} updated={t.updated} deleted={t.deleted} "
            f"unchanged={t.unchanged} held={t.held} filled={t.filled} {mor}"
            f"tombstones={self.tombstones} skipped={self.skipped} "
            f"quarantined={self.quarantined} tables={len(self.tables)} lag_ms={lag} "
            f"reader={self.reader} took_ms={self.duration_ms} ("
            + " ".join(f"{k}={v}" for k, v in self.timings.items())
            + ")"
        )


@dataclass
class _Side:
    """What the driver collects from the workers' small rows."""

    descriptors: dict[str, pol.Descriptor] = field(default_factory=dict)
    #: every verdict a worker gave each descriptor (workers judge in their own arrival
    #: order, so two may disagree: keeping one would hide the other)
    worker_verdicts: dict[str, set[str | None]] = field(default_factory=dict)
    truncates: dict[str, list[int]] = field(default_factory=dict)
    #: table -> the batch's Cassandra range deletes: (position, bounds) (ranges.py)
    ranges: dict[str, list[tuple[list[int], dict[str, Any]]]] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)
    max_source_ts_ms: int | None = None
    #: table -> Kafka (topic, partition)s its rows came from
    sources: dict[str, set[tuple[str, int]]] = field(default_factory=dict)
    #: table -> number of keys whose last change in the batch is a delete
    deletes: dict[str, int] = field(default_factory=dict)
    #: table -> rows (changed keys) in the batch
    rows: dict[str, int] = field(default_factory=dict)
    #: table -> key-change images and rows with refs in the batch (see handover.py)
    handover: dict[str, int] = field(default_factory=dict)
    #: table -> MongoDB rows that are patches to complete from the stored document
    patches: dict[str, int] = field(default_factory=dict)
    #: table -> worker tasks that emitted rows of it (a key folded by two tasks has two rows)
    tasks: dict[str, int] = field(default_factory=dict)


class ApplyJob:
    def __init__(self, spark: Any, cfg: ApplyConfig) -> None:
        self.spark = spark
        self.cfg = cfg
        self.catalog = TableCatalog(spark, cfg)
        self.parse_settings = ParseSettings(
            placeholders=cfg.placeholders,
            ordering=cfg.ordering,
            schemas=cfg.schemas,
            input_format=cfg.input_format,
            registry=RegistrySettings(cfg.registry_url, cfg.registry_basic_auth),
            table_name=cfg.table_name,
            tables=tuple(sorted(cfg.tables.items())),
        )
        self.reports: list[BatchReport] = []
        self.error: BaseException | None = None
        self.query: Any = None
        self._preloaded = False
        self._keychanges: dict[str, KeyChanges] = {}
        #: table -> the key-change side table's rows as last read or written
        self._keychanges_saved: dict[str, list[tuple[str, str, str]]] = {}
        #: merge-on-read: table -> whether its change log may hold rows (absent: not checked)
        self._logged: dict[str, bool] = {}
        #: table -> the Cassandra range deletes of earlier batches (ranges.record)
        self._ranges: dict[str, ranges.Recorded] = {}
        #: copy-on-write: whether the tables' change logs were checked for leftovers
        self._leftovers_checked = False
        #: table -> its newest TRUNCATE's position (merge.TRUNCATED), read once per run
        self._truncated: dict[str, list[int] | None] = {}

    # -- the query ----------------------------------------------------------------------------
    def source(self) -> Any:
        from pyspark.sql import functions as F

        cfg = self.cfg
        reader = (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", cfg.bootstrap_servers)
            .option("startingOffsets", cfg.starting_offsets)
            .option("failOnDataLoss", "true" if cfg.fail_on_data_loss else "false")
            .option("includeHeaders", "true")  # __debezium.oldkey / newkey of key changes
        )
        if cfg.topics:
            reader = reader.option("subscribe", ",".join(cfg.topics))
        else:
            reader = reader.option("subscribePattern", cfg.topic_pattern)
        if cfg.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger))
        for key, value in cfg.kafka_options.items():
            reader = reader.option(key if key.startswith("kafka.") else f"kafka.{key}", value)
        df = reader.load().select(*INPUT_COLUMNS)
        if cfg.topic_exclude:
            df = df.filter(~F.col("topic").rlike(cfg.topic_exclude))
        return df

    def start(self, trigger: str | None = None) -> Any:
        self.error = None
        self._preload()
        writer = (
            self.source()
            .writeStream.foreachBatch(self._foreach_batch)
            .option("checkpointLocation", self.cfg.checkpoint)
        )
        if self.cfg.query_name:
            writer = writer.queryName(self.cfg.query_name)
        chosen = trigger or self.cfg.trigger
        if chosen == "available-now":
            writer = writer.trigger(availableNow=True)
        elif chosen == "once":
            writer = writer.trigger(once=True)
        else:
            writer = writer.trigger(processingTime=chosen)
        self.query = writer.start()
        log.info(
            "apply query %s started: topics=%s target=%s checkpoint=%s trigger=%s",
            self.query.id,
            ",".join(self.cfg.topics) or self.cfg.topic_pattern,
            self.cfg.target_path,
            self.cfg.checkpoint,
            chosen,
        )
        return self.query

    def run(self, trigger: str | None = None, timeout: float | None = None) -> None:
        """Starts the query and waits for it to end (``available-now``/``once``) or fail.
        Raises :class:`ApplyError` (or the batch's exception) when a batch failed."""
        query = self.start(trigger)
        try:
            if timeout is None:
                query.awaitTermination()
            elif not query.awaitTermination(timeout):
                query.stop()
                raise TimeoutError(f"apply query still running after {timeout} s")
        except Exception as exc:
            if self.error is not None:
                raise self.error from exc
            raise
        if self.error is not None:
            raise self.error

    def _preload(self) -> None:
        """States of the tables already under target.path, so workers check keys and types
        of existing tables from the first batch on."""
        if self._preloaded:
            return
        self._preloaded = True
        jvm = self.spark.sparkContext._jvm
        hconf = self.spark.sparkContext._jsc.hadoopConfiguration()
        base = jvm.org.apache.hadoop.fs.Path(self.cfg.target_path)
        fs = base.getFileSystem(hconf)
        if not fs.exists(base):
            return
        names = [
            status.getPath().getName()
            for status in fs.listStatus(base)
            if status.isDirectory() and not status.getPath().getName().startswith("_")
        ]
        self.catalog.preload(sorted(names))

    def _foreach_batch(self, df: Any, batch_id: int) -> None:
        try:
            self.process_batch(df, batch_id, own_query=True)
        except BaseException as exc:
            self.error = exc
            log.error("batch %d failed: %s", batch_id, exc)
            raise

    # -- one micro-batch ----------------------------------------------------------------------
    def process_batch(self, df: Any, batch_id: int, *, own_query: bool = False) -> BatchReport:
        """Applies one micro-batch. ``own_query``: ``df`` is batch ``batch_id`` of this job's
        own streaming query, so the query's offset log holds its Kafka ranges and the workers
        may read them directly; any other ``df`` (tests, tools) is read as given."""
        from pyspark import StorageLevel

        started = time.monotonic()
        report = BatchReport(batch_id)
        known = self.catalog.known_states()
        settings = WorkerSettings(
            self.parse_settings,
            self.cfg.schema_evolution,
            tables=tuple(sorted(known.items())),
            reserved=pol.RESERVED,
        )
        parse = self._parser_of(df, batch_id, report, own_query)
        parsed = parse(settings).persist(StorageLevel.MEMORY_AND_DISK)
        clock = _Clock(report.timings)
        try:
            side = self._side(parsed)
            clock.lap("parse")
            plans = self._plan(side)
            verdicts = _verdicts(plans)
            worker_says = side.worker_verdicts
            if any(worker_says.get(d, {None}) != {v} for d, v in verdicts.items()):
                # A worker saw a new table's descriptors in another order than the driver (or
                # checked schemaless types it could not know): re-run with the driver's verdicts.
                settings = WorkerSettings(
                    self.parse_settings,
                    self.cfg.schema_evolution,
                    tables=settings.tables,
                    verdicts=tuple(sorted(verdicts.items())),
                    reserved=pol.RESERVED,
                )
                parsed.unpersist()
                parsed = parse(settings).persist(StorageLevel.MEMORY_AND_DISK)
                side = self._side(parsed)
                clock.lap("reparse")
            self._fill_report(report, side)
            if report.errors:
                self._bad_input(parsed, batch_id, report)
                clock.lap("quarantine")
            logged = self._merge_on_read(plans, side, report, clock)
            for plan in plans.values():
                self.catalog.apply(plan)
            clock.lap("ddl")
            self._apply(parsed, side, plans, report, clock, logged)
            every = self.cfg.compaction_every
            if self.cfg.merge_on_read and every and batch_id % every == every - 1:
                self.compact_all(batch_id, report, clock)
        finally:
            parsed.unpersist()
        report.duration_ms = int((time.monotonic() - started) * 1000)
        if side.max_source_ts_ms is not None:
            report.lag_ms = max(0, int(time.time() * 1000) - side.max_source_ts_ms)
        self.reports.append(report)
        log.info("%s", report.line())
        return report

    def _parser_of(
        self, df: Any, batch_id: int, report: BatchReport, own_query: bool
    ) -> Callable[[WorkerSettings], Any]:
        """How this batch's records reach the workers: read by each task itself over the
        batch's offset ranges (``direct_reader``), or, when the config or the offset log
        rules that out, through Spark's Kafka source (``df``)."""
        direct_options = self.cfg.direct_options() if own_query else None
        ranges = None
        if direct_options is not None:
            ranges = batch_ranges(self._checkpoint_text, self.cfg.checkpoint, batch_id)
            if ranges is None:
                log.warning(
                    "batch %d: the offset log under %s does not give ranges the direct reader "
                    "can take (a form it does not know, or offsets that went back); Spark's "
                    "Kafka source reads this batch",
                    batch_id,
                    self.cfg.checkpoint,
                )
        if ranges is None:
            return lambda settings: df.mapInArrow(functools.partial(process, settings), OUTPUT_DDL)
        from pyspark.sql import functions as F

        report.reader = "direct"
        direct = DirectSettings(
            self.cfg.bootstrap_servers, direct_options or (), self.cfg.fail_on_data_loss
        )
        rows = [(r.topic, r.partition, r.start, r.end) for r in ranges]
        ranged = self.spark.createDataFrame(
            self.spark.sparkContext.parallelize(rows, max(1, len(rows))), RANGE_DDL
        )
        if self.cfg.topic_exclude:
            ranged = ranged.filter(~F.col("topic").rlike(self.cfg.topic_exclude))
        return lambda settings: ranged.mapInArrow(
            functools.partial(read_ranges, settings, direct), OUTPUT_DDL
        )

    def _checkpoint_text(self, path: str) -> str | None:
        jvm = self.spark.sparkContext._jvm
        hpath = jvm.org.apache.hadoop.fs.Path(path)
        fs = hpath.getFileSystem(self.spark.sparkContext._jsc.hadoopConfiguration())
        if not fs.exists(hpath):
            return None
        stream = fs.open(hpath)
        try:
            return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def _side(self, parsed: Any) -> _Side:
        side = _Side()
        rows = parsed.filter("kind IN ('schema', 'truncate', 'range_delete', 'stats')").collect()
        for r in rows:
            if r["kind"] == "stats":
                info = orjson.loads(r["info"])
                for k, v in info["counts"].items():
                    side.stats[k] = side.stats.get(k, 0) + int(v)
                ts = info["max_source_ts_ms"]
                if ts is not None and (side.max_source_ts_ms is None or side.max_source_ts_ms < ts):
                    side.max_source_ts_ms = ts
                for table, per in info["tables"].items():
                    side.sources.setdefault(table, set()).update(
                        (t, int(p)) for t, p in per["sources"]
                    )
                    side.deletes[table] = side.deletes.get(table, 0) + int(per["deletes"])
                    side.rows[table] = side.rows.get(table, 0) + int(per["rows"])
                    side.handover[table] = side.handover.get(table, 0) + int(per.get("handover", 0))
                    side.patches[table] = side.patches.get(table, 0) + int(per.get("patches", 0))
                    if int(per["rows"]):
                        side.tasks[table] = side.tasks.get(table, 0) + 1
            elif r["kind"] == "range_delete":
                bounds = orjson.loads(r["info"])
                bounds["meta"] = [r["source_ts_ms"], r["topic"], r["partition"], r["offset"]]
                side.ranges.setdefault(r["tbl"], []).append((list(r["pos"]), bounds))
            elif r["kind"] == "truncate":
                pos = list(r["pos"])
                old = side.truncates.get(r["tbl"])
                if old is None or pos > old:
                    side.truncates[r["tbl"]] = pos
            else:
                info = orjson.loads(r["info"])
                d = pol.Descriptor(
                    r["descriptor"],
                    r["tbl"],
                    tuple((n, t) for n, t in info["columns"]),
                    tuple(info["key"]),
                    info["layout"],
                    bool(info["inferred"]),
                    r["topic"],
                    int(r["partition"]),
                    int(r["offset"]),
                )
                side.worker_verdicts.setdefault(d.id, set()).add(info["verdict"])
                old_d = side.descriptors.get(d.id)
                side.descriptors[d.id] = d if old_d is None else _merge_descriptors(old_d, d)
        return side

    def _plan(self, side: _Side) -> dict[str, pol.TablePlan]:
        by_table: dict[str, list[pol.Descriptor]] = {}
        for d in side.descriptors.values():
            by_table.setdefault(d.table, []).append(d)
        plans: dict[str, pol.TablePlan] = {}
        for table, descs in sorted(by_table.items()):
            descs.sort(key=lambda d: (d.topic, d.partition, d.offset))
            plans[table] = pol.plan_table(
                table, self.catalog.state(table), descs, self.cfg.schema_evolution, pol.RESERVED
            )
        for table in [*side.truncates, *side.ranges]:
            if table not in plans and self.catalog.state(table) is not None:
                plans[table] = pol.plan_table(
                    table, self.catalog.state(table), [], self.cfg.schema_evolution
                )
        return plans

    def _fill_report(self, report: BatchReport, side: _Side) -> None:
        s = side.stats
        report.events = s.get("events", 0)
        report.tombstones = s.get("tombstones", 0)
        report.skipped = s.get("skipped", 0)
        report.changes = s.get("changes", 0)
        report.rows = s.get("rows", 0)
        report.errors = s.get("errors", 0)

    def _bad_input(self, parsed: Any, batch_id: int, report: BatchReport) -> None:
        errors = parsed.filter("kind = 'error'")
        if self.cfg.on_error == "fail":
            sample = errors.orderBy("topic", "partition", "offset").limit(MAX_REPORTED_ERRORS)
            lines = [
                f"  {r['topic']}[{r['partition']}]@{r['offset']}: {r['info']}"
                for r in sample.collect()
            ]
            more = report.errors - len(lines)
            raise ApplyError(
                f"batch {batch_id}: {report.errors} bad event(s), nothing applied "
                "(on.error=fail; set on.error: quarantine to divert them):\n"
                + "\n".join(lines)
                + (f"\n  ... and {more} more" if more > 0 else "")
            )
        app_id = self._app_id()
        write_quarantine(self.spark, errors, self.cfg.quarantine_location, app_id, batch_id)
        report.quarantined = report.errors
        log.warning(
            "batch %d: %d bad event(s) quarantined in %s",
            batch_id,
            report.errors,
            self.cfg.quarantine_location,
        )

    def _app_id(self) -> str:
        """Delta idempotent-write id: the streaming query's id, which survives restarts from
        the same checkpoint (batch ids are only unique within one query)."""
        return str(self.query.id) if self.query is not None else "tidemark-apply"

    def _truncated_of(self, table: str, path: str) -> list[int] | None:
        if table not in self._truncated:
            self._truncated[table] = truncated_position(self.spark, path)
        return self._truncated[table]

    def _apply(
        self,
        parsed: Any,
        side: _Side,
        plans: dict[str, pol.TablePlan],
        report: BatchReport,
        clock: _Clock,
        logged: frozenset[str] = frozenset(),
    ) -> None:
        batch_id = report.batch_id
        from pyspark.sql import functions as F

        rows = parsed.filter("kind = 'row'")
        for table, plan in plans.items():
            info = self.catalog.info(table)
            if info is None:
                continue  # every descriptor of a new table was rejected (quarantined)
            path = self.cfg.table_location(table)
            dpath = self.cfg.deletes_location(table)
            trunc = side.truncates.get(table)
            table_rows = rows.filter(F.col("tbl") == table)
            keys = self._keychanges_of(table)
            if trunc is not None:
                truncate(self.spark, path, dpath, trunc, self.cfg.snapshot_order)
                self._truncated[table] = max(trunc, self._truncated_of(table, path) or [])
                keys.truncate(tuple(trunc))
                self._save_keychanges(table, keys)
            horizon = self._truncated_of(table, path)
            if horizon:  # older than a truncate (this batch's or an earlier one's): gone
                start, length = native_part(horizon, self.cfg.snapshot_order)
                bound = F.array(*[F.lit(p).cast("long") for p in horizon[start : start + length]])
                table_rows = table_rows.filter(F.slice("pos", start + 1, length) > bound)
            sources = side.sources.get(table, set())
            if not sources:
                if side.ranges.get(table):
                    self._delete_ranges(table, plan, path, side, batch_id)
                continue
            if table in logged:
                # Merge-on-read: no per-key reduction either, the compaction's fold does it.
                typed = typed_rows(table_rows, plan, dedupe=False)
                location = self.cfg.changes_location(table)
                if table not in self._logged:
                    # first append of this run: a log a compaction emptied keeps its old
                    # schema, which a column widened since cannot be merged into
                    self._logged[table] = not changelog.is_empty(self.spark, location)
                changelog.append(
                    self.spark,
                    typed,
                    location,
                    self._app_id(),
                    batch_id,
                    empty=self._logged.get(table) is False,
                )
                self._logged[table] = True
                logged_counts = MergeCounts(logged=side.rows.get(table, 0))
                report.tables.setdefault(table, MergeCounts()).add(logged_counts)
                _lap(clock, table if len(plans) > 1 else None, "log")
                continue
            handed: Outcome | None = None
            if side.handover.get(table) or keys.pending or keys.images:
                table_rows, handed = self._hand_over(
                    parsed, table_rows, table, plan, info, keys, horizon
                )
            extra = handed is not None and bool(handed.merge)
            if side.patches.get(table):
                try:
                    table_rows, patched = document_patches.complete(
                        self.spark, table_rows, plan, path, dpath, deletes=info.deletes_nonempty
                    )
                except documents.MissingDocument as exc:
                    raise ApplyError(f"batch {batch_id}: {exc}") from None
                log.info("table %s: %d document(s) patched", table, patched)
                extra = extra or bool(patched)
            if side.rows.get(table, 0) <= REDUCE_CHECK_ROWS:
                dedupe = len(sources) > 1 or extra  # small: reducing is cheaper than checking
            else:
                dedupe = extra or (side.tasks.get(table, 0) > 1 and _repeated_keys(table_rows))
            if dedupe and (changelog.supports(plan) or cells.is_cell_table(plan)):
                # One row per key by position, each placeholder column taking its newest
                # value across the rows (a key folded by two tasks: the newest row's
                # placeholder may have been filled from an older change than the other's).
                typed = changelog.fold(typed_rows(table_rows, plan, dedupe=False), plan)
            else:
                typed = typed_rows(table_rows, plan, dedupe=dedupe)
            if cells.is_cell_table(plan):
                earlier = self._recorded_ranges(table, side)
                if earlier:  # late writes into ranges deleted before (ranges.py)
                    typed = ranges.guard(self.spark, plan, typed, earlier)
            if cells.is_cell_table(plan) and (side.deletes.get(table) or side.ranges.get(table)):
                # rows written after a partition or range delete of the batch start anew
                typed = cells.with_cuts(self.spark, typed, plan, side.ranges.get(table, []))
            tpath = self.cfg.tombstones_location(table)
            if cells.is_cell_table(plan) and tombstones.exists(self.spark, tpath):
                # cell deletes of rows that left the table (tombstones.py)
                typed = tombstones.guard(self.spark, typed, plan, tpath)
            counts = merge_table(
                self.spark,
                typed,
                plan,
                path,
                dpath,
                deletes_nonempty=info.deletes_nonempty,
                has_deletes=bool(side.deletes.get(table, 0)),
                policy=self.cfg.schema_evolution,
                app_id=self._app_id(),
                batch_id=batch_id,
                lap=functools.partial(_lap, clock, table if len(plans) > 1 else None),
            )
            counts.unchanged = max(
                0, side.rows.get(table, 0) - counts.inserted - counts.updated - counts.deleted
            )
            if cells.is_cell_table(plan):
                absent = absent_by_column(plan) if self.cfg.schema_evolution == "ignore" else {}
                tombstones.record(self.spark, typed, plan, tpath, absent, self._app_id(), batch_id)
            if side.deletes.get(table, 0) and cells.is_cell_table(plan):
                cells.delete_partitions(self.spark, typed, plan, path)  # Cassandra (cells.py)
            if side.ranges.get(table):
                self._delete_ranges(table, plan, path, side, batch_id)
            if side.deletes.get(table, 0):
                counts.deletes_recorded = side.deletes[table]
                self.catalog.mark_deletes(table)
            if handed is not None:
                counts.held, counts.filled = handed.held, handed.filled
            self._save_keychanges(table, keys)
            report.tables.setdefault(table, MergeCounts()).add(counts)
            every = self.cfg.deletes_compact_every
            if every and info.deletes_nonempty and batch_id % every == every - 1:
                compact_deletes(self.spark, path, dpath, list(plan.key))
                clock.lap("compact")
            compacts = every and batch_id % every == every - 1 and cells.is_cell_table(plan)
            if compacts and tombstones.exists(self.spark, tpath):
                tombstones.compact(self.spark, path, tpath, plan)

    def _delete_ranges(
        self, table: str, plan: pol.TablePlan, path: str, side: _Side, batch_id: int
    ) -> None:
        """The batch's Cassandra range deletes of ``table``, after its rows are merged."""
        found = side.ranges[table]
        dpath = self.cfg.deletes_location(table)
        removed = ranges.delete_ranges(
            self.spark, plan, path, found, dpath, self._app_id(), batch_id
        )
        self.catalog.mark_deletes(table)  # the removed keys are recorded there
        # kept for later batches unless already past range.deletes.retention.ms (one the
        # connector sent again, say)
        kept = ranges.retained(found, self._ranges_since(side))
        if kept:
            location = self.cfg.ranges_location(table)
            ranges.record(self.spark, location, kept, self._app_id(), batch_id)
            self._recorded_ranges(table, side).extend(kept)
        log.info("table %s: %d range delete(s) removed %d row(s)", table, len(found), removed)

    def _ranges_since(self, side: _Side) -> int | None:
        now = int(time.time() * 1000)
        retention = self.cfg.range_deletes_retention_ms
        return ranges.retained_since(side.max_source_ts_ms, now, retention)

    def _recorded_ranges(self, table: str, side: _Side) -> ranges.Recorded:
        """The table's range deletes of earlier batches still retained (ranges.py)."""
        location = self.cfg.ranges_location(table)
        if table not in self._ranges:
            self._ranges[table] = ranges.recorded(self.spark, location)
        since = self._ranges_since(side)
        kept = ranges.retained(self._ranges[table], since)
        if since is not None and len(kept) < len(self._ranges[table]):
            ranges.prune(self.spark, location, since)
            log.info(
                "table %s: %d range delete(s) past range.deletes.retention.ms forgotten",
                table,
                len(self._ranges[table]) - len(kept),
            )
            self._ranges[table] = kept
        return self._ranges[table]

    # -- merge-on-read (changelog.py) ------------------------------------------------------
    def _merge_on_read(
        self, plans: dict[str, pol.TablePlan], side: _Side, report: BatchReport, clock: _Clock
    ) -> frozenset[str]:
        """The tables whose rows this batch appends to their change log. The others' logs
        are compacted first, before any DDL, with the table's columns as they were: a
        truncate, key change, patch or schema change needs the stored rows up to date. A
        copy-on-write job compacts whatever logs a merge-on-read run left, once."""
        if not self.cfg.merge_on_read:
            if not self._leftovers_checked:
                # Switched back from merge-on-read: logged changes are already past the
                # checkpoint, so they must reach the tables before anything else does.
                self.compact_all(report.batch_id, report, clock)
                self._leftovers_checked = True
            return frozenset()
        logged = set()
        for table, plan in plans.items():
            state = self.catalog.state(table)
            if state is None:
                continue  # created by this batch: its first rows are MERGEd into it
            keys = self._keychanges_of(table)
            copy_on_write = (
                table in side.truncates
                or side.handover.get(table)
                or keys.pending
                or keys.images
                or side.patches.get(table)
                or plan.add
                or plan.widen
                or not changelog.supports(plan)
            )
            if copy_on_write:
                self._compact(table, report.batch_id, report, clock)
            else:
                logged.add(table)
        return frozenset(logged)

    def compact_all(
        self, batch_id: int | None = None, report: BatchReport | None = None, clock: Any = None
    ) -> dict[str, MergeCounts]:
        """Compacts every merge-on-read table's change log (every ``compaction.every``
        batches, and on demand: ``cdc.apply job.yaml --compact``). On demand, no batch id is
        at hand: the deleted-keys append is keyed by the time, under an app id of its own
        (Delta skips an idempotent write whose version is not above the app id's last one,
        so a time-keyed version must never share the batches' app id)."""
        self._preload()
        app_id = self._app_id()
        if batch_id is None:
            batch_id = int(time.time() * 1000)
            app_id = ON_DEMAND_APP
        report = report or BatchReport(batch_id)
        for table in sorted(self.catalog.known_states()):
            self._compact(table, batch_id, report, clock or _Clock(report.timings), app_id)
        return report.tables

    def _compact(
        self,
        table: str,
        batch_id: int,
        report: BatchReport,
        clock: _Clock,
        app_id: str | None = None,
    ) -> None:
        info = self.catalog.info(table)
        if info is None or self._logged.get(table) is False:
            return
        plan = pol.plan_table(table, info.state, [], self.cfg.schema_evolution)
        counts = changelog.compact(
            self.spark,
            plan,
            self.cfg.table_location(table),
            self.cfg.deletes_location(table),
            self.cfg.changes_location(table),
            deletes_nonempty=info.deletes_nonempty,
            policy=self.cfg.schema_evolution,
            app_id=app_id or self._app_id(),
            batch_id=batch_id,
            lap=functools.partial(_lap, clock, table),
        )
        self._logged[table] = False
        if counts is not None:
            self.catalog.mark_deletes(table)
            counts.compactions = 1
            report.tables.setdefault(table, MergeCounts()).add(counts)

    def read_table(self, table: str) -> Any:
        """A table as of every change applied so far: for a merge-on-read table the real-time
        view (changelog.read), else the Delta table itself."""
        info = self.catalog.info(table)
        if info is None:
            raise ApplyError(f"no table {table!r} under {self.cfg.target_path}")
        plan = pol.plan_table(table, info.state, [], self.cfg.schema_evolution)
        return changelog.read(
            self.spark,
            plan,
            self.cfg.table_location(table),
            self.cfg.deletes_location(table),
            self.cfg.changes_location(table),
        )

    def _keychanges_of(self, table: str) -> KeyChanges:
        state = self._keychanges.get(table)
        if state is None:
            state = self._keychanges[table] = kc.load(
                self.spark, self.cfg.keychanges_location(table)
            )
            self._keychanges_saved[table] = kc.encoded(state)
        return state

    def _save_keychanges(self, table: str, state: KeyChanges) -> None:
        """Rewrites the side table when ``state`` differs from what it holds."""
        rows = kc.encoded(state)
        if rows != self._keychanges_saved.get(table):
            kc.save(self.spark, self.cfg.keychanges_location(table), state)
            self._keychanges_saved[table] = rows

    def _hand_over(
        self,
        parsed: Any,
        table_rows: Any,
        table: str,
        plan: pol.TablePlan,
        info: Any,
        keys: KeyChanges,
        horizon: list[int] | None = None,
    ) -> tuple[Any, Outcome]:
        """Fills unavailable values across key changes (handover.py): takes the batch's rows
        with refs and the rows of held keys out of the MERGE source, puts back what can be
        filled, keeps the rest held. Images are saved before the MERGE deletes their old keys."""
        from pyspark.sql import functions as F

        held = sorted(keys.pending)
        cond = F.col("refs").isNotNull()
        if held:
            cond = cond | F.col("key_json").isin(held)
        incoming = [kc.record(r) for r in table_rows.filter(cond).collect()]
        images = [
            decode_image(orjson.loads(r["info"]))
            for r in parsed.filter((F.col("kind") == "image") & (F.col("tbl") == table))
            .select("info")
            .collect()
        ]
        if horizon:  # a key change a truncate erased: its new key is never stored, and its
            # image would stay in the side table for good (every batch a lookup, and a
            # merge-on-read table copy-on-write)
            start, length = native_part(horizon, self.cfg.snapshot_order)
            native = horizon[start : start + length]
            images = [i for i in images if list(i.pos[start : start + length]) > native]
        before = keys.copy()
        lookups = kc.lookup(
            self.spark,
            plan,
            self.cfg.table_location(table),
            self.cfg.deletes_location(table),
            deletes_nonempty=info.deletes_nonempty,
            keys=lookup_keys(keys, images, incoming, plan.key),
        )
        out = step(keys, images, incoming, lookups, plan.key)
        if out.images_added:
            # Durable before the MERGE deletes the old keys: a crash in between replays the
            # batch, which then finds the images (never recomputed from a later state).
            before.images.update({k: v for k, v in keys.images.items() if k not in before.images})
            self._save_keychanges(table, before)
        log.info(
            "table %s: key changes: images=%d filled=%d held=%d dropped=%d no_value=%d",
            table,
            len(images),
            out.filled,
            out.held,
            out.dropped,
            len(out.missing),
        )
        rest = table_rows.filter(~cond)
        if not out.merge:
            return rest, out
        extra = kc.records_frame(self.spark, out.merge).select(*rest.columns)
        return rest.unionByName(extra), out


def _repeated_keys(rows: Any) -> bool:
    """Whether some key has more than one row: its changes were folded by two worker tasks
    (its topic's partition count changed, or two topics feed one table). Rows then need the
    per-key reduction by position before the MERGE; counting distinct keys is much cheaper
    than that reduction (a shuffle of the keys only, not a sort of whole rows), and a batch
    from several partitions rarely needs it."""
    from pyspark.sql import functions as F

    got = rows.agg(F.count(F.lit(1)).alias("n"), F.count_distinct("key_json").alias("k"))
    r = got.collect()[0]
    return bool(r["n"] != r["k"])


def _lap(clock: _Clock, table: str | None, phase: str) -> None:
    clock.lap(phase if table is None else f"{phase}:{table}")


class _Clock:
    def __init__(self, into: dict[str, int]) -> None:
        self.into = into
        self.last = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.into[name] = self.into.get(name, 0) + int((now - self.last) * 1000)
        self.last = now


def _merge_descriptors(a: pol.Descriptor, b: pol.Descriptor) -> pol.Descriptor:
    """The same descriptor seen by two workers: the earliest sighting, and for schemaless rows
    the union of the inferred types."""
    first = min(a, b, key=lambda d: (d.topic, d.partition, d.offset))
    if not a.inferred:
        return first
    from cdc.apply.sparktypes import merge_inferred

    types = dict(a.columns)
    for n, t in b.columns:
        types[n] = merge_inferred(types.get(n), t)
    return pol.Descriptor(
        first.id,
        first.table,
        tuple(types.items()),
        first.key,
        first.layout,
        True,
        first.topic,
        first.partition,
        first.offset,
    )


def _verdicts(plans: dict[str, pol.TablePlan]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for plan in plans.values():
        for did in plan.accepted:
            out[did] = None
        out.update(plan.rejected)
    return out
