"""EventDispatcher: turns what a connector reports into Kafka Connect source records.

This is the only place that builds envelopes, so every connector gets filters, column
controls, tombstones, the primary-key-change split, transaction metadata and heartbeats the
same way. It runs on the source's thread; its output goes to the ChangeEventQueue.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from cdc import __version__
from cdc.envelope import V1_2, V3, SourceShaper, envelope_schema, source_shaper
from cdc.errors import ConversionError, SchemaError
from cdc.filters import TableFilter
from cdc.metrics import CommonMetrics, TaskMetrics
from cdc.pipeline.failures import FailureHandler
from cdc.pipeline.queue import ChangeEventQueue, QueueClosed
from cdc.pipeline.reselect import ReselectColumns
from cdc.pipeline.snapshot_marks import SnapshotMarks
from cdc.pipeline.special_records import SpecialRecords
from cdc.record import SourceRecord, offset_marker
from cdc.schema.model import Schema
from cdc.schema.table_schema import TableSchema, TableSchemaBuilder
from cdc.spi import (
    LogicalMessage,
    Operation,
    PositionReached,
    RowChange,
    SchemaChange,
    SourceEvent,
    Table,
    TableId,
    TableTruncated,
    TransactionBegin,
    TransactionEnd,
)
from cdc.topics import TopicNamer

log = logging.getLogger("tidemark.dispatcher")

NEW_KEY_HEADER = "__debezium.newkey"
OLD_KEY_HEADER = "__debezium.oldkey"


_MISSING: Any = object()
_UNREGISTERED: Any = object()


class _Transaction:
    __slots__ = ("id", "per_collection", "total")

    def __init__(self, tx_id: str) -> None:
        self.id = tx_id
        self.total = 0
        self.per_collection: dict[str, int] = {}


class EventDispatcher:
    def __init__(
        self,
        *,
        connector_type: str,
        server_name: str,
        source_partition: dict[str, Any],
        source_schema: Schema,
        schema_builder: TableSchemaBuilder,
        table_filter: TableFilter,
        queue: ChangeEventQueue[SourceRecord],
        metrics: TaskMetrics,
        namer: TopicNamer,
        failures: FailureHandler,
        tombstones_on_delete: bool = True,
        provide_transaction_metadata: bool = False,
        skipped_operations: frozenset[str] = frozenset(),
        heartbeat_interval_ms: int = 0,
        heartbeat_action: Callable[[], None] | None = None,
        include_schema_changes: bool = False,
        envelope_version: str = V1_2,
        source_derive: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.connector_type = connector_type
        self.server_name = server_name
        self.partition = source_partition
        self.source_schema = source_schema
        self.builder = schema_builder
        self.filter = table_filter
        self.queue = queue
        self.metrics = metrics
        self.namer = namer
        self.failures = failures
        self.tombstones = tombstones_on_delete
        self.tx_metadata = provide_transaction_metadata
        self.skipped = skipped_operations
        self.include_schema_changes = include_schema_changes
        self._source_prefix = {
            "version": __version__,
            "connector": connector_type,
            "name": server_name,
        }
        self.envelope_version = envelope_version
        #: the ``source`` keys every event starts with (1.2 envelope only; None with 3.x,
        #: whose source is shaped per event). A connector may build its row sources with
        #: them in front, once per transaction: such a source is used as it is, not merged.
        self.source_prefix: dict[str, Any] | None = (
            None if envelope_version == V3 else self._source_prefix
        )
        #: the snapshot's first/last markers (Debezium 3.x envelope only, while snapshotting)
        self._marks: SnapshotMarks | None = None
        #: the 3.x source shaper (None with 1.2). A connector may shape a table's source
        #: once and set its per-row fields itself: a source that has ``ts_ns`` (a field no
        #: 1.2 source block has) is taken as shaped, not shaped again.
        self.shape_source: SourceShaper | None = None
        if envelope_version == V3:
            # Chosen once: the 3.x source shape and record builder replace the 1.2 ones, so
            # the per-event path never tests the generation.
            self._shape = source_shaper(source_schema, self._source_prefix, source_derive)
            self.shape_source = self._shape
            self._records = self._records_v3  # type: ignore[method-assign]
            self.special = SpecialRecords(
                namer, source_schema, self._source_prefix, self._shape, V3
            )
        else:
            self.special = SpecialRecords(namer, source_schema, self._source_prefix)
        self.stop_event = threading.Event()
        #: the registered table schemas (set by ``register_table`` only)
        self.schemas: dict[TableId, TableSchema] = {}
        self._routes: dict[TableId, TableSchema | None] = {}
        self.tables: dict[TableId, Table] = {}
        self.phase: CommonMetrics = metrics.streaming
        self._streaming_metrics = metrics.streaming
        #: the initial snapshot's way to the delivery when it is not the queue (set by the
        #: engine: ``cdc.pipeline.direct_send``); streaming always uses the queue
        self.snapshot_hand_over: Callable[[list[SourceRecord]], None] | None = None
        self._tx: _Transaction | None = None
        self._heartbeat_s = heartbeat_interval_ms / 1000.0
        self._heartbeat_action = heartbeat_action
        self._next_heartbeat = time.monotonic() + self._heartbeat_s
        self._progress_hook: Callable[[TableId, int, int | None], None] | None = None
        #: set by the engine: records a snapshot's start durably, returns the resume offset
        self.snapshot_start_hook: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
        #: set by the engine: asks for the records handed over so far to have their offsets
        #: stored and, unless told not to, waits for it
        self.snapshot_chunk_hook: Callable[[int, bool], None] | None = None
        #: set by the engine: waits until the records up to a mark have stored offsets
        self.snapshot_chunk_wait: Callable[[int], None] | None = None
        #: a chunk whose store was asked for and not yet waited on (direct send only: there
        #: every snapshot row reaches the producer through ``_hand_over``, which waits first)
        self._chunk_gate = 0
        self._next_end_marker = 0.0
        #: records not yet handed to the queue while a source runs ``batched`` (else None)
        self._held: list[SourceRecord] | None = None
        self._hold_limit = 0
        #: the reselect post-processor (``post.processors``), set by the engine; None: none
        self.post_processor: ReselectColumns | None = None

    # -- SourceContext ------------------------------------------------------------------------
    def register_table(self, table: Table) -> None:
        if self.tables.get(table.id) == table and table.id in self.schemas:
            return
        self.tables[table.id] = table
        ts = self.builder.build(table)
        ts.envelope_schema = envelope_schema(
            self.namer.schema_name(table.id, "Envelope"),
            ts.value_schema,
            self.source_schema,
            with_transaction=self.tx_metadata,
            version=self.envelope_version,
            flat=ts.flat,
        )
        ts.topic = self.namer.data_topic(table.id)
        self.schemas[table.id] = ts
        self._routes.pop(table.id, None)
        if self.filter.is_included(table.id):
            self.metrics.streaming.monitored_tables.add(table.id.identifier)

    def is_included(self, table_id: TableId) -> bool:
        return bool(self.filter.is_included(table_id))

    def snapshot_started(self, table_ids: list[TableId]) -> None:
        self.metrics.snapshot.start([t.identifier for t in table_ids])
        if self.envelope_version == V3:
            self._marks = SnapshotMarks(table_ids)

    def snapshot_starting(self, position: Mapping[str, Any]) -> dict[str, Any]:
        hook = self.snapshot_start_hook
        if hook is None:
            return dict(position)
        return hook(position)

    def snapshot_chunk_done(self) -> None:
        hook = self.snapshot_chunk_hook
        if hook is None:
            return
        self.flush()
        if self._direct_phase() and self.snapshot_chunk_wait is not None:
            # The wait comes before the next hand-over (_hand_over): the source reads and
            # decodes the next batch meanwhile, and sends nothing more before it.
            self._chunk_gate = self.queue.put_total
            hook(self._chunk_gate, False)
        else:
            hook(self.queue.put_total, True)

    def snapshot_table_completed(self, table_id: TableId, rows: int) -> None:
        snap = self.metrics.snapshot
        snap.rows_scanned[table_id.identifier] = rows
        snap.rows_expected[table_id.identifier] = rows
        snap.remaining_table_count = max(snap.remaining_table_count - 1, 0)
        marks = self._marks
        if marks is not None:
            for record in marks.table_completed(table_id):
                self._enqueue(record)

    def snapshot_completed(self) -> None:
        marks, self._marks = self._marks, None
        if marks is not None:  # the snapshot's last record goes now
            for record in marks.finish():
                self._put(record)

    def snapshot_progress(self, table_id: TableId, rows: int, total: int | None) -> None:
        snap = self.metrics.snapshot
        snap.rows_scanned[table_id.identifier] = rows
        if total is not None:
            snap.rows_expected[table_id.identifier] = total

    def emit(self, event: SourceEvent) -> None:
        if isinstance(event, RowChange):
            self._row(event)
        elif isinstance(event, PositionReached):
            self._position(event.offset)
        elif isinstance(event, TransactionBegin):
            self._begin(event)
        elif isinstance(event, TransactionEnd):
            self._end(event)
        elif isinstance(event, TableTruncated):
            self._truncate(event)
        elif isinstance(event, SchemaChange):
            self._schema_change(event)
        elif isinstance(event, LogicalMessage):
            self._message(event)
        else:  # pragma: no cover - the SPI union is closed
            raise TypeError(f"unknown source event {event!r}")

    # -- handing records to the queue ------------------------------------------------------------
    @contextlib.contextmanager
    def batched(self, limit: int = 512) -> Iterator[Callable[[], None]]:
        """Within the block, records collect here and go to the queue ``limit`` at a time,
        or when the source calls the yielded ``flush`` (it must do so before it waits for
        input, so nothing it decoded sits here while it idles). One queue hand-off per run of
        records instead of one lock round trip per record; order is unchanged. Leaving the
        block hands over the rest, also on an error (records emitted before a failure are
        delivered before it, as with unbuffered puts)."""
        self._held = []
        self._hold_limit = max(int(limit), 1)
        try:
            yield self.flush
        except BaseException:
            with contextlib.suppress(QueueClosed):
                self._release()
            raise
        self._release()

    def flush(self) -> None:
        """Hand the records collected by ``batched`` to the queue (blocks while it is full)."""
        held = self._held
        if held:
            self._held = []
            if self.post_processor is not None:
                held = self.post_processor.resolve(held, self.partition, self.queue.put_many)
            self._hand_over(held)

    def _release(self) -> None:
        held, self._held = self._held, None
        if held:
            if self.post_processor is not None:
                held = self.post_processor.resolve(held, self.partition, self.queue.put_many)
            self._hand_over(held)

    def _direct_phase(self) -> bool:
        return self.snapshot_hand_over is not None and self.phase is not self._streaming_metrics

    def _hand_over(self, held: list[SourceRecord]) -> None:
        if not self._direct_phase():
            self.queue.put_many(held)
            return
        gate = self._chunk_gate
        if gate and self.snapshot_chunk_wait is not None:
            self._chunk_gate = 0
            self.snapshot_chunk_wait(gate)
        assert self.snapshot_hand_over is not None
        self.snapshot_hand_over(held)

    def _put(self, record: SourceRecord) -> None:
        marks = self._marks
        if marks is not None and marks.holding():
            # Not a snapshot row (a heartbeat, a failure's marker or dead letter): it goes
            # ahead of the rows the markers hold back, and its offset counts them as read, so
            # it may not be stored before they are in Kafka (the next released row's offset,
            # stored after its own acknowledgement, moves the position instead).
            record.continued = True
        self._enqueue(record)

    def _enqueue(self, record: SourceRecord) -> None:
        held = self._held
        if held is None:
            self.queue.put(record)
            return
        held.append(record)
        if len(held) >= self._hold_limit:
            self.flush()

    # -- rows ------------------------------------------------------------------------------------
    def _row(self, ev: RowChange) -> None:
        self.emit_row(
            ev.op,
            ev.table_id,
            ev.before,
            ev.after,
            ev.source,
            ev.offset,
            ev.transaction_id,
            ev.partial,
            ev,
        )

    def emit_row(
        self,
        op: Operation,
        table_id: TableId,
        before_row: Sequence[Any] | None,
        after_row: Sequence[Any] | None,
        source: dict[str, Any],
        offset: dict[str, Any],
        transaction_id: str | None = None,
        partial: bool = False,
        event: RowChange | None = None,
    ) -> None:
        """``emit(RowChange(...))`` with the fields passed directly: a source that reports a
        row per call of its innermost loop (the PostgreSQL stream) saves building and
        dispatching the event object. The ``RowChange`` is built only if conversion fails,
        for the failure handler."""
        phase = self.phase
        # One lookup per row for "captured?" and "which schema": the filter's answer and the
        # registered schema, cached per table until the table is registered again.
        ts = self._routes.get(table_id, _MISSING)
        if ts is _MISSING:
            ts = self._route(table_id)
        if ts is None:
            phase.events_filtered += 1
            self._maybe_heartbeat(offset)
            return
        op_code: str = op._value_  # the plain str; ``.value`` is a slower descriptor
        if op_code in self.skipped:
            phase.events_filtered += 1
            self._maybe_heartbeat(offset)
            return
        if ts is _UNREGISTERED:
            raise SchemaError(
                f"no schema registered for table {table_id}; the connector must register a "
                f"table before emitting its rows (position {offset})"
            )
        try:
            records = self._records(
                ts, op_code, before_row, after_row, source, offset, transaction_id, partial
            )
        except Exception as exc:
            if event is None:
                event = RowChange(
                    op,
                    table_id,
                    before_row,
                    after_row,
                    self._connector_source(source),
                    offset,
                    transaction_id,
                    partial,
                )
            self._conversion_failed(exc, event)
            return
        held = self._held
        post = self.post_processor
        if post is not None:
            rest = (before_row, self._connector_source(source), offset, transaction_id)
            noted = post.note(ts, op_code, after_row, partial, rest, records, len(held or ()))
            if noted and held is None:
                records = post.resolve(records, self.partition, self.queue.put_many)
        if held is None:
            put = self.queue.put
            for r in records:
                put(r)
        else:
            held += records
            if len(held) >= self._hold_limit:
                self.flush()
        phase.total_events_seen += 1
        if self._heartbeat_s:
            self._maybe_heartbeat(offset)

    def emit_rows(
        self,
        op: Operation,
        table_id: TableId,
        rows: Sequence[Sequence[Any]],
        source: dict[str, Any],
        offset: dict[str, Any],
    ) -> None:
        """``emit_row(op, table_id, None, row, source, offset)`` for each row of a snapshot
        batch that share one source block and offset. The checks ``emit_row`` makes per row
        (captured, registered, skipped, post-processed, heartbeat) are made once, and the
        records go straight onto the ``batched`` run: at a million rows a snapshot spends
        its time in the per-row path, not in the rows' own work. Outside ``batched``, or
        when a check does not pass, row by row through ``emit_row``."""
        ts = self._routes.get(table_id, _MISSING)
        if ts is _MISSING:
            ts = self._route(table_id)
        op_code: str = op._value_
        held = self._held
        if (
            held is None
            or ts is None
            or ts is _UNREGISTERED
            or op_code in self.skipped
            or self.post_processor is not None
        ):
            emit = self.emit_row
            for row in rows:
                emit(op, table_id, None, row, source, offset)
            return
        marks = self._marks
        if (
            marks is not None
            and op_code == "r"
            and not ts.flat
            and not self.tx_metadata
            and "ts_ns" in source
            and "version" in source
        ):
            records = self._snapshot_records(ts, rows, source, offset)
            if records is not None:  # else a row failed: row by row below, failure in place
                held += marks.push_many(table_id, records)
                self.phase.total_events_seen += len(records)
                if len(held) >= self._hold_limit:
                    self.flush()
                if self._heartbeat_s:
                    self._maybe_heartbeat(offset)
                return
        records_of = self._records
        limit = self._hold_limit
        run: list[SourceRecord] = held
        sent = 0
        for row in rows:
            try:
                records = records_of(ts, op_code, None, row, source, offset, None, False)
            except Exception as exc:
                event = RowChange(
                    op, table_id, None, row, self._connector_source(source), offset, None, False
                )
                self._conversion_failed(exc, event)
                run = self._current_run(run)  # the failure's records may have flushed it
                continue
            run += records
            sent += 1
            if len(run) >= limit:
                self.flush()
                run = self._current_run(run)
        self.phase.total_events_seen += sent
        if self._heartbeat_s:
            self._maybe_heartbeat(offset)

    def _snapshot_records(
        self,
        ts: TableSchema,
        rows: Sequence[Sequence[Any]],
        source: dict[str, Any],
        offset: dict[str, Any],
    ) -> list[SourceRecord] | None:
        """The 3.x records of a batch of snapshot rows sharing one shaped source: what
        ``_records_v3`` builds per row (``ts_ms``/``ts_us``/``ts_ns`` from one clock reading
        per row, the same dict order), in one comprehension instead of a call per row, which
        at a million rows is a large share of a snapshot's own time. None when a row fails
        to convert: the caller redoes the batch row by row, so the failure is handled in
        place and nothing of the batch has been emitted twice."""
        value_of, key_of, now_ns = ts.value_from_row, ts.key_from_row, time.time_ns
        topic, key_schema, schema, partition = (
            ts.topic,
            ts.key_schema,
            ts.envelope_schema,
            self.partition,
        )
        try:
            records = [
                SourceRecord(
                    topic,
                    key_schema,
                    key_of(row),
                    schema,
                    {
                        "before": None,
                        "after": value_of(row),
                        "source": source,
                        "transaction": None,
                        "op": "r",
                        "ts_ms": (now := now_ns()) // 1_000_000,
                        "ts_us": now // 1000,
                        "ts_ns": now,
                    },
                    partition,
                    offset,
                )
                for row in rows
            ]
        except Exception:
            return None
        if records:
            self.phase.last_event_ms = records[-1].value["ts_ms"]
        return records

    def _current_run(self, run: list[SourceRecord]) -> list[SourceRecord]:
        """The ``batched`` run records are collected in now (a flush starts a new one)."""
        held = self._held
        return run if held is None else held

    def _conversion_failed(self, exc: Exception, event: RowChange) -> None:
        """A row that could not be converted: through the failure mode, in order."""
        error = ConversionError(
            f"cannot convert {event.op._value_} event of {event.table_id} at {event.offset}: {exc}",
            position=event.offset,
        )
        error.__cause__ = exc
        self.failures.handle(error, event, self.partition, self._put)

    def _connector_source(self, source: dict[str, Any]) -> dict[str, Any]:
        """The source as the connector would give it without ``source_prefix`` (what an
        event handed to the failure handler carries, whichever way it was built)."""
        if "version" not in source:
            return source
        prefix = self._source_prefix
        return {k: v for k, v in source.items() if k not in prefix}

    def _route(self, table_id: TableId) -> Any:
        """None when the table is filtered out, its schema when registered (both cached),
        else ``_UNREGISTERED`` (not cached: the schema may still come)."""
        if not self.filter.is_included(table_id):
            self._routes[table_id] = None
            return None
        ts = self.schemas.get(table_id)
        if ts is None:
            return _UNREGISTERED
        self._routes[table_id] = ts
        return ts

    def _row_records(self, ev: RowChange, ts: TableSchema, op: str) -> list[SourceRecord]:
        return self._records(
            ts, op, ev.before, ev.after, ev.source, ev.offset, ev.transaction_id, ev.partial
        )

    def _records(
        self,
        ts: TableSchema,
        op: str,
        before_row: Sequence[Any] | None,
        after_row: Sequence[Any] | None,
        connector_source: dict[str, Any],
        offset: dict[str, Any],
        transaction_id: str | None,
        partial: bool,
    ) -> list[SourceRecord]:
        now = time.time_ns() // 1_000_000
        self.phase.last_event_ms = now
        source = (
            connector_source
            if "version" in connector_source  # built with source_prefix in front
            else {**self._source_prefix, **connector_source}
        )
        value_fn = ts.value_from_partial_row if partial else ts.value_from_row
        before = None if before_row is None else value_fn(before_row)
        after = None if after_row is None else value_fn(after_row)
        key = ts.key_from_row(after_row if after_row is not None else before_row)  # type: ignore[arg-type]
        if ts.flat:  # a document table: its fields are the envelope's (MongoDB)
            value = {**(after or {}), "source": source, "op": op, "ts_ms": now}
            if self.tx_metadata:
                value["transaction"] = self._tx_block(transaction_id, ts)
        elif self.tx_metadata:
            tx = self._tx_block(transaction_id, ts)
            value = {
                "before": before,
                "after": after,
                "source": source,
                "op": op,
                "ts_ms": now,
                "transaction": tx,
            }
        else:
            value = {"before": before, "after": after, "source": source, "op": op, "ts_ms": now}
        if op == "c" or op == "r":  # what ``_finish`` does for them, without the call
            return [
                SourceRecord(
                    ts.topic, ts.key_schema, key, ts.envelope_schema, value, self.partition, offset
                )
            ]
        return self._finish(ts, op, key, value, before_row, offset)

    def _records_v3(
        self,
        ts: TableSchema,
        op: str,
        before_row: Sequence[Any] | None,
        after_row: Sequence[Any] | None,
        connector_source: dict[str, Any],
        offset: dict[str, Any],
        transaction_id: str | None,
        partial: bool,
    ) -> list[SourceRecord]:
        """``_records`` for the Debezium 3.x envelope: the source shaped for its schema,
        ``ts_us``/``ts_ns`` from the same clock reading as ``ts_ms``, ``transaction`` always
        present; a snapshot row goes through the first/last markers. (Its first lines repeat
        ``_records`` on purpose: a shared helper would add a call to every 1.2 event.)"""
        now_ns = time.time_ns()
        now = now_ns // 1_000_000
        self.phase.last_event_ms = now
        if "ts_ns" in connector_source:  # shaped by the connector (see ``shape_source``)
            source = (
                connector_source
                if "version" in connector_source
                else {**self._source_prefix, **connector_source}
            )
        else:
            source = self._shape(connector_source, offset)
        value_fn = ts.value_from_partial_row if partial else ts.value_from_row
        before = None if before_row is None else value_fn(before_row)
        after = None if after_row is None else value_fn(after_row)
        key = ts.key_from_row(after_row if after_row is not None else before_row)  # type: ignore[arg-type]
        value = {
            "before": before,
            "after": after,
            "source": source,
            "transaction": self._tx_block(transaction_id, ts) if self.tx_metadata else None,
            "op": op,
            "ts_ms": now,
            "ts_us": now_ns // 1000,
            "ts_ns": now_ns,
        }
        if ts.flat:  # a document table: its fields are the envelope's (MongoDB)
            del value["before"], value["after"]
            value = {**(after or {}), **value}
        marks = self._marks
        if marks is not None and op == "r":
            record = SourceRecord(
                ts.topic, ts.key_schema, key, ts.envelope_schema, value, self.partition, offset
            )
            return marks.push(ts.table_id, record)
        return self._finish(ts, op, key, value, before_row, offset)

    def _finish(
        self,
        ts: TableSchema,
        op: str,
        key: Any,
        value: dict[str, Any],
        before_row: Sequence[Any] | None,
        offset: dict[str, Any],
    ) -> list[SourceRecord]:
        """The records of one row event: the primary-key-change split, or the event and,
        for a delete, its tombstone."""
        topic = ts.topic
        if op == "u" and before_row is not None and ts.key_schema is not None:
            old_key = ts.key_from_row(before_row)
            if old_key is not None and old_key != key:
                return self._key_change(ts, topic, old_key, key, value, offset)
        if op == "d" and self.tombstones:
            # one event, two records: only the tombstone's offset may be stored
            return [
                SourceRecord(
                    topic,
                    ts.key_schema,
                    key,
                    ts.envelope_schema,
                    value,
                    self.partition,
                    offset,
                    continued=True,
                ),
                SourceRecord(topic, ts.key_schema, key, None, None, self.partition, offset),
            ]
        return [
            SourceRecord(
                topic, ts.key_schema, key, ts.envelope_schema, value, self.partition, offset
            )
        ]

    def _key_change(
        self,
        ts: TableSchema,
        topic: str,
        old_key: dict[str, Any],
        new_key: dict[str, Any] | None,
        value: dict[str, Any],
        offset: dict[str, Any],
    ) -> list[SourceRecord]:
        """The seed's PK-change rule: delete (old key) + tombstone + create (new key), with the
        other key in a header of each. Headers carry the key as JSON text. One event: all
        but the create are ``continued`` (only its offset may be stored)."""
        import orjson

        new_h = [(NEW_KEY_HEADER, orjson.dumps(new_key, default=_json_default))]
        old_h = [(OLD_KEY_HEADER, orjson.dumps(old_key, default=_json_default))]
        p = self.partition
        out = [
            SourceRecord(
                topic,
                ts.key_schema,
                old_key,
                ts.envelope_schema,
                {**value, "after": None, "op": "d"},
                p,
                offset,
                new_h,
                continued=True,
            )
        ]
        if self.tombstones:
            out.append(
                SourceRecord(
                    topic, ts.key_schema, old_key, None, None, p, offset, new_h, continued=True
                )
            )
        out.append(
            SourceRecord(
                topic,
                ts.key_schema,
                new_key,
                ts.envelope_schema,
                {**value, "before": None, "op": "c"},
                p,
                offset,
                old_h,
            )
        )
        return out

    # -- transactions ---------------------------------------------------------------------------
    def _tx_block(self, transaction_id: str | None, ts: TableSchema) -> dict[str, Any] | None:
        tx = self._tx
        if tx is None or transaction_id is None or transaction_id != tx.id:
            return None
        tx.total += 1
        name = ts.extra.get("data_collection") or ts.table_id.identifier
        n = tx.per_collection.get(name, 0) + 1
        tx.per_collection[name] = n
        return {"id": tx.id, "total_order": tx.total, "data_collection_order": n}

    def _begin(self, ev: TransactionBegin) -> None:
        if not self.tx_metadata:
            return
        self._tx = _Transaction(ev.transaction_id)
        record = self.special.transaction_begin(ev, self.partition)
        # A BEGIN never moves the position by itself: a connector may give it the offset of
        # the transaction's first change (MongoDB has no position between two changes), and
        # storing that before the change is in Kafka would skip the change on restart.
        record.continued = True
        self._put(record)

    def _end(self, ev: TransactionEnd) -> None:
        self.metrics.streaming.committed_transactions += 1
        self.metrics.streaming.last_transaction_id = ev.transaction_id
        if self.tx_metadata and self._tx is not None:
            tx, self._tx = self._tx, None
            self._put(self.special.transaction_end(ev, tx.total, tx.per_collection, self.partition))
            return
        # A transaction end only moves the position. Queue that at most every 100 ms: with
        # single-row transactions a marker per commit would double the queue traffic, and
        # the next record or marker carries a later position anyway.
        now = time.monotonic()
        if now >= self._next_end_marker:
            self._next_end_marker = now + 0.1
            self._position(ev.offset)

    # -- other events ---------------------------------------------------------------------------
    def _truncate(self, ev: TableTruncated) -> None:
        if "t" in self.skipped:
            self._position(ev.offset)
            return
        now_ns = time.time_ns()
        now = now_ns // 1_000_000
        records: list[SourceRecord] = []
        for table_id in ev.table_ids:
            ts = self.schemas.get(table_id)
            if ts is None or not self.filter.is_included(table_id):
                continue
            table_source = {**ev.source, "schema": table_id.schema, "table": table_id.table}
            value: dict[str, Any] = {
                "before": None,
                "after": None,
                "source": self.special.source_of(table_source, ev.offset),
            }
            if self.envelope_version == V3:
                value.update(transaction=None, op="t", ts_ms=now, ts_us=now_ns // 1000)
                value["ts_ns"] = now_ns
            else:
                value.update(op=Operation.TRUNCATE.value, ts_ms=now)
                if self.tx_metadata:
                    value["transaction"] = None
            records.append(
                SourceRecord(
                    self.namer.data_topic(table_id),
                    None,
                    None,
                    ts.envelope_schema,
                    value,
                    self.partition,
                    ev.offset,
                    continued=True,
                )
            )
            self.phase.total_events_seen += 1
        if not records:  # no captured table: moves the position, as a skipped truncate does
            self._position(ev.offset)
            return
        # one event, a record per table: only the last one's offset may be stored
        records[-1].continued = False
        for record in records:
            self._put(record)

    def _schema_change(self, ev: SchemaChange) -> None:
        if not self.include_schema_changes:
            if not ev.continued:  # else the event's last part moves the position
                self._position(ev.offset)
            return
        record = self.special.schema_change(ev, self.partition, self.tables)
        if ev.continued:
            record.continued = True
        self._put(record)

    def _message(self, ev: LogicalMessage) -> None:
        if "m" in self.skipped:
            self._position(ev.offset)
            return
        self._put(self.special.logical_message(ev, self.partition))

    def _position(self, offset: dict[str, Any]) -> None:
        if not self._maybe_heartbeat(offset):
            self._put(offset_marker(self.partition, offset))

    # -- heartbeats -----------------------------------------------------------------------------
    def _maybe_heartbeat(self, offset: dict[str, Any]) -> bool:
        if not self._heartbeat_s:
            return False
        now = time.monotonic()
        if now < self._next_heartbeat:
            return False
        self._next_heartbeat = now + self._heartbeat_s
        # Only while streaming, as Debezium: during a snapshot the action would run on the
        # snapshot's own thread, and a write to a table the snapshot locks waits for it to
        # end (a hang with SQL Server's snapshot.isolation.mode=exclusive).
        if self._heartbeat_action is not None and self.phase is self._streaming_metrics:
            try:
                self._heartbeat_action()
            except Exception:
                log.warning("heartbeat.action.query failed", exc_info=True)
        self._put(self.special.heartbeat(self.partition, offset))
        return True

    def heartbeat_due(self) -> bool:
        return bool(self._heartbeat_s) and time.monotonic() >= self._next_heartbeat


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        import base64

        return base64.b64encode(value).decode()
    return str(value)
