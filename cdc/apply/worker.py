"""The Python side of a micro-batch: Kafka records in, one row per changed key out.

Runs inside Spark's Python workers through ``mapInArrow``. Spark's Kafka source gives each Kafka
topic-partition of a batch to exactly one task, and Debezium sends all changes of a key to one
partition, so a task sees every change of its keys and can fold them locally: only one row per
key leaves the worker, and the per-key ordering never depends on a shuffle. (Should a key still
show up in two tasks, after a topic's partition count changed, the driver reduces its rows by
position before merging, each placeholder column taking its newest value: changelog.fold.)

Besides the rows, a task emits a few small rows for the driver: one per row schema seen
(``schema``), one per truncate (``truncate``) and Cassandra range delete (``range_delete``,
see ranges.py), one per bad event (``error``, with the raw record
for the quarantine) and one with counters (``stats``). All share one Arrow schema,
:data:`OUTPUT_DDL`, told apart by ``kind``.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import orjson

from cdc.apply import documents
from cdc.apply.events import (
    BadEvent,
    Change,
    Headers,
    Parser,
    ParseSettings,
    Skipped,
    descriptor_id,
)
from cdc.apply.fold import Folded, Image, Resolved, fold, resolve
from cdc.apply.handover import encode_candidate, encode_image
from cdc.apply.policy import Descriptor, Policy, TablePlan, TableState, check_descriptor
from cdc.apply.sparktypes import merge_inferred

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

OUTPUT_DDL = (
    "kind string, topic string, partition int, offset bigint, tbl string, key_json string, "
    "op string, pos array<bigint>, source_ts_ms bigint, ts_ms bigint, tx_id string, "
    "snapshot boolean, position string, row_json string, unavailable array<string>, "
    "fills map<string,array<bigint>>, descriptor string, info string, raw_key binary, "
    "raw_value binary, refs string, patch string, cut array<bigint>, removed_json string, "
    "marker array<bigint>"
)
INPUT_COLUMNS = ("key", "value", "topic", "partition", "offset", "headers")
FLUSH_ROWS = 4096


@dataclass(frozen=True)
class WorkerSettings:
    parse: ParseSettings
    policy: Policy
    tables: tuple[tuple[str, TableState], ...] = ()
    #: descriptor id -> rejection reason or None (accepted), decided by the driver: a second
    #: pass uses these instead of checking again
    verdicts: tuple[tuple[str, str | None], ...] = ()
    reserved: frozenset[str] = frozenset()


_PARSERS: dict[ParseSettings, Parser] = {}


def _parser(settings: ParseSettings) -> Parser:
    """One parser per settings and Python worker process: its schema cache outlives tasks
    (Spark reuses Python workers), so a table's schema is parsed once per process."""
    parser = _PARSERS.get(settings)
    if parser is None:
        if len(_PARSERS) > 8:
            _PARSERS.clear()
        parser = _PARSERS[settings] = Parser(settings)
    return parser


#: output column -> the Change attribute it holds as is
_CHANGE_COLUMNS = tuple(
    (name, attrgetter(name))
    for name in (
        "topic",
        "partition",
        "offset",
        "op",
        "source_ts_ms",
        "ts_ms",
        "tx_id",
        "snapshot",
        "position",
        "descriptor",
    )
)
_POS = attrgetter("pos")
_UNAVAILABLE = attrgetter("unavailable")
_FILLS = attrgetter("fill_positions")


@dataclass
class _Columns:
    """Column lists for the output batch, in OUTPUT_DDL order."""

    data: dict[str, list[Any]] = field(
        default_factory=lambda: {name.split()[0]: [] for name in OUTPUT_DDL.split(", ")}
    )
    rows: int = 0

    def add(self, **values: Any) -> None:
        for name, column in self.data.items():
            column.append(values.get(name))
        self.rows += 1


class PartitionProcessor:
    """Pure-Python core of :func:`process`; the unit tests drive it without Arrow or Spark."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self.parser = _parser(settings.parse)
        self.known = dict(settings.tables)
        self.verdicts: dict[str, str | None] = dict(settings.verdicts)
        self.plans: dict[str, TablePlan] = {}
        self.descriptors: dict[str, Descriptor] = {}
        self.inferred: dict[str, dict[str, Any]] = {}
        self.states: dict[tuple[str, str], Folded] = {}
        self.truncates: list[Change] = []
        self.out = _Columns()
        self.stats: dict[str, int] = dict.fromkeys(
            ("events", "tombstones", "skipped", "errors", "changes", "rows"), 0
        )
        self.max_source_ts_ms: int | None = None

    # -- per record -----------------------------------------------------------------------------
    def record(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
    ) -> None:
        self.stats["events"] += 1
        parsed = self.parser.parse(topic, partition, offset, key, value, headers)
        if isinstance(parsed, Skipped):
            self.stats["tombstones" if parsed.reason == "tombstone" else "skipped"] += 1
            return
        if isinstance(parsed, BadEvent):
            self._error(topic, partition, offset, parsed.error, key, value, None, None)
            return
        change = parsed
        ts = change.source_ts_ms
        if ts is not None and (self.max_source_ts_ms is None or self.max_source_ts_ms < ts):
            self.max_source_ts_ms = ts
        if change.op == "t" or change.range is not None:  # truncates, range deletes: no rows
            self.truncates.append(change)
            self.stats["changes"] += 1
            return
        did = descriptor_id(change.table, change.shape, change.key_fields)
        change.descriptor = did
        verdict = self._verdict(change, did)
        if verdict is not None:
            self._error(topic, partition, offset, verdict, key, value, change.table, did)
            return
        if change.shape.inferred:
            merged = self.inferred[did]
            for name, t in change.shape.types.items():
                old = merged.get(name)
                if t is not None and old != t:
                    merged[name] = merge_inferred(old, t)
        self.stats["changes"] += 1
        k = (change.table, change.key_json)
        self.states[k] = fold(self.states.get(k), change)

    def _verdict(self, change: Change, did: str) -> str | None:
        if did in self.descriptors:
            return self.verdicts[did]
        d = Descriptor(
            did,
            change.table,
            tuple(change.shape.types.items()),
            change.key_fields,
            change.layout,
            change.shape.inferred,
            change.topic,
            change.partition,
            change.offset,
        )
        self.descriptors[did] = d
        if change.shape.inferred:
            self.inferred[did] = {n: t for n, t in d.columns if t is not None}
        if did in self.verdicts:  # decided by the driver (second pass)
            return self.verdicts[did]
        plan = self.plans.get(change.table)
        if plan is None:
            plan = self.plans[change.table] = TablePlan(change.table, self.known.get(change.table))
            plan.init_from_state()
        # Schemaless types are only known once the whole partition was seen: the driver checks
        # them; here only the key and the ordering layout are checked.
        verdict = check_descriptor(
            plan, d, self.settings.policy, self.settings.reserved, types=not d.inferred
        )
        self.verdicts[did] = verdict
        return verdict

    def _error(
        self,
        topic: str,
        partition: int,
        offset: int,
        message: str,
        key: bytes | None,
        value: bytes | None,
        table: str | None,
        did: str | None,
    ) -> None:
        self.stats["errors"] += 1
        self.out.add(
            kind="error",
            topic=topic,
            partition=partition,
            offset=offset,
            tbl=table,
            descriptor=did,
            info=message,
            raw_key=key,
            raw_value=value,
        )

    # -- end of partition -----------------------------------------------------------------------
    def finish(self) -> None:
        tables: dict[str, dict[str, Any]] = {}
        names: list[str] = []
        keys: list[str] = []
        results: list[Resolved] = []
        changes: list[Change] = []
        images: list[tuple[str, Image, Change]] = []
        for (table, kj), state in self.states.items():
            res = resolve(state)
            ch = res.change
            per = tables.get(table)
            if per is None:
                per = tables[table] = {
                    "sources": set(),
                    "deletes": 0,
                    "rows": 0,
                    "handover": 0,
                    "patches": 0,
                }
            per["sources"].add((ch.topic, ch.partition))
            per["rows"] += 1
            if ch.op == "d":
                per["deletes"] += 1
            if ch.patch is not None:
                per["patches"] += 1
            if state.images:
                images.extend((table, image, ch) for image in state.images)
                per["handover"] += len(state.images)
            if res.refs:
                per["handover"] += 1
            names.append(table)
            keys.append(kj)
            results.append(res)
            changes.append(ch)
        # Column-wise: one list per output column (this runs once per changed key), each built
        # by a map over the changes or results, which iterates in C.
        cols = self.out.data
        n = len(changes)
        cols["kind"].extend(["row"] * n)
        for name, attr in _CHANGE_COLUMNS:
            cols[name].extend(map(attr, changes))
        cols["tbl"].extend(names)
        cols["key_json"].extend(keys)
        cols["pos"].extend(map(list, map(_POS, changes)))
        cols["row_json"].extend([orjson.dumps(res.row).decode() for res in results])
        cols["unavailable"].extend(map(list, map(_UNAVAILABLE, results)))
        cols["fills"].extend(
            [[(c, list(p)) for c, p in fp.items()] if fp else None for fp in map(_FILLS, results)]
        )
        cols["refs"].extend(
            [
                orjson.dumps({c: encode_candidate(v) for c, v in res.refs.items()}).decode()
                if res.refs
                else None
                for res in results
            ]
        )
        cols["patch"].extend(
            [None if ch.patch is None else documents.encode(ch.patch) for ch in changes]
        )
        cols["cut"].extend([None if r.cut is None else list(r.cut) for r in results])
        cols["removed_json"].extend(
            [None if r.removed is None else orjson.dumps(r.removed).decode() for r in results]
        )
        cols["marker"].extend([None if r.marker is None else list(r.marker) for r in results])
        for name in ("info", "raw_key", "raw_value"):
            cols[name].extend([None] * n)
        self.out.rows += n
        for table, image, ch in images:
            self.out.add(
                kind="image",
                topic=ch.topic,
                partition=ch.partition,
                offset=ch.offset,
                tbl=table,
                key_json=image.new_key,
                pos=list(image.pos),
                info=orjson.dumps(encode_image(image)).decode(),
            )
        self.stats["rows"] = len(self.states)
        self.states = {}
        for did, d in self.descriptors.items():
            columns = [[n, t] for n, t in d.columns]
            if d.inferred:
                merged = self.inferred.get(did, {})
                columns = [[n, merged.get(n)] for n, _ in d.columns]
            self.out.add(
                kind="schema",
                topic=d.topic,
                partition=d.partition,
                offset=d.offset,
                tbl=d.table,
                descriptor=did,
                info=orjson.dumps(
                    {
                        "columns": columns,
                        "key": list(d.key),
                        "layout": d.layout,
                        "inferred": d.inferred,
                        "verdict": self.verdicts.get(did),
                    }
                ).decode(),
            )
        for ch in self.truncates:
            self.out.add(
                kind="truncate" if ch.range is None else "range_delete",
                topic=ch.topic,
                partition=ch.partition,
                offset=ch.offset,
                tbl=ch.table,
                op=ch.op,
                pos=list(ch.pos),
                source_ts_ms=ch.source_ts_ms,
                info=ch.layout if ch.range is None else orjson.dumps(ch.range).decode(),
            )
        stats: dict[str, Any] = {
            "counts": self.stats,
            "max_source_ts_ms": self.max_source_ts_ms,
            "tables": {
                t: {
                    "sources": sorted(v["sources"]),
                    "deletes": v["deletes"],
                    "rows": v["rows"],
                    "handover": v["handover"],
                    "patches": v["patches"],
                }
                for t, v in tables.items()
            },
        }
        self.out.add(kind="stats", info=orjson.dumps(stats).decode())

    def take(self) -> dict[str, list[Any]]:
        data = self.out.data
        self.out = _Columns()
        return data


#: One Kafka record as the processor takes it: topic, partition, offset, key, value, headers.
Record = tuple[str, int, int, bytes | None, bytes | None, Headers | None]


def process(
    settings: WorkerSettings, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function over Spark's Kafka source (bind ``settings`` with
    functools.partial)."""
    return process_records(settings, _records_of(batches))


def process_records(
    settings: WorkerSettings, chunks: Iterator[list[Record]]
) -> Iterator[pa.RecordBatch]:
    """One task's records, in chunks, folded into :data:`OUTPUT_DDL` batches; the records
    come from Spark's Kafka source (:func:`process`) or from the task's own consumer
    (``direct_reader``).

    Python's cyclic garbage collector is off while a partition is processed: the fold keeps
    every changed key's latest change alive until the partition ends, and the collector's
    passes over that growing heap cost nearly half of the worker's time (47 vs 25 us per
    event on the benchmark's records). The parse and the fold make no reference cycles, and a
    partition's memory is bounded by ``kafka.max.offsets.per.trigger``; the previous state is
    restored when the partition ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield from _process(settings, chunks)
    finally:
        if enabled:
            gc.enable()


def _records_of(batches: Iterator[pa.RecordBatch]) -> Iterator[list[Record]]:
    for batch in batches:
        # headers: absent when a caller reads Kafka without includeHeaders
        names = [n for n in INPUT_COLUMNS if batch.schema.get_field_index(n) >= 0]
        cols = {name: batch.column(name).to_pylist() for name in names}
        raw_headers = cols.get("headers") or [None] * batch.num_rows
        headers = [[(h["key"], h["value"]) for h in hs] if hs else None for hs in raw_headers]
        yield list(
            zip(
                cols["topic"],
                cols["partition"],
                cols["offset"],
                cols["key"],
                cols["value"],
                headers,
                strict=True,
            )
        )


def _process(settings: WorkerSettings, chunks: Iterator[list[Record]]) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    schema = arrow_schema()
    proc = PartitionProcessor(settings)
    record = proc.record
    for chunk in chunks:
        for topic, partition, offset, key, value, headers in chunk:
            record(topic, partition, offset, key, value, headers)
        if proc.out.rows >= FLUSH_ROWS:
            yield pa.RecordBatch.from_pydict(proc.take(), schema=schema)
    proc.finish()
    data = proc.take()
    total = len(data["kind"])
    for start in range(0, total, 65536):
        chunk_data = {k: v[start : start + 65536] for k, v in data.items()}
        yield pa.RecordBatch.from_pydict(chunk_data, schema=schema)


def arrow_schema() -> pa.Schema:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    return pa.schema(
        [
            ("kind", pa.string()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("tbl", pa.string()),
            ("key_json", pa.string()),
            ("op", pa.string()),
            ("pos", pa.list_(pa.int64())),
            ("source_ts_ms", pa.int64()),
            ("ts_ms", pa.int64()),
            ("tx_id", pa.string()),
            ("snapshot", pa.bool_()),
            ("position", pa.string()),
            ("row_json", pa.string()),
            ("unavailable", pa.list_(pa.string())),
            ("fills", pa.map_(pa.string(), pa.list_(pa.int64()))),
            ("descriptor", pa.string()),
            ("info", pa.string()),
            ("raw_key", pa.binary()),
            ("raw_value", pa.binary()),
            ("refs", pa.string()),
            ("patch", pa.string()),
            ("cut", pa.list_(pa.int64())),
            ("removed_json", pa.string()),
            ("marker", pa.list_(pa.int64())),
        ]
    )
