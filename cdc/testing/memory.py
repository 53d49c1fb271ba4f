"""An in-memory "database" with a change log, and a connector for it.

It exercises the whole core (dispatcher, queue, converters, sink, offsets, restarts) without
a real database, which is what the core's own tests need; it is not a mock of any real
database. Its log positions are plain integers; its snapshot is consistent by construction
(taken under the same lock that appends to the log).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from cdc.common_config import common_def
from cdc.config import Config, ConfigDef, ConfigField, Kind, one_of
from cdc.envelope import source_block_schema
from cdc.offsets.core_keys import CORE_KEYS, core_key_problems
from cdc.schema import logical
from cdc.schema.model import INT32, INT64, STRING, Schema, Type, primitive
from cdc.snapshot_modes import MODES
from cdc.spi import (
    Column,
    Connector,
    Operation,
    PositionReached,
    RowChange,
    SnapshotSource,
    Snapshotter,
    SourceContext,
    StreamingSource,
    Table,
    TableId,
    TransactionBegin,
    TransactionEnd,
    ValueConverter,
)

SOURCE_SCHEMA = source_block_schema(
    "io.tidemark.connector.memory.Source",
    [("db", STRING), ("table", STRING), ("pos", INT64), ("txId", INT64.as_optional())],
)


@dataclass
class LogEntry:
    pos: int
    kind: str  # "row", "begin", "end"
    tx: int
    op: Operation | None = None
    table: str | None = None
    before: tuple[Any, ...] | None = None
    after: tuple[Any, ...] | None = None


@dataclass
class MemoryTable:
    table: Table
    rows: dict[Any, tuple[Any, ...]] = field(default_factory=dict)

    def key_of(self, row: tuple[Any, ...]) -> Any:
        idx = [c.position for c in self.table.columns if c.name in self.table.primary_key]
        return tuple(row[i] for i in idx)


class MemoryDatabase:
    """Tables of tuples and an append-only log of their changes, guarded by one condition."""

    _registry: ClassVar[dict[str, MemoryDatabase]] = {}

    def __init__(self, name: str) -> None:
        self.name = name
        self.tables: dict[str, MemoryTable] = {}
        self.log: list[LogEntry] = []
        self.cond = threading.Condition()
        self._tx = 0
        self.committed_positions: list[int] = []
        MemoryDatabase._registry[name] = self

    @classmethod
    def get(cls, name: str) -> MemoryDatabase:
        try:
            return cls._registry[name]
        except KeyError:
            raise KeyError(f"no in-memory database named {name!r}") from None

    def create_table(self, name: str, columns: list[tuple[str, str]], key: list[str]) -> Table:
        cols = tuple(Column(n, i, t, optional=n not in key) for i, (n, t) in enumerate(columns))
        table = Table(TableId(self.name, None, name), cols, tuple(key))
        with self.cond:
            self.tables[name] = MemoryTable(table)
        return table

    def transaction(self, changes: list[tuple[str, str, tuple[Any, ...]]]) -> int:
        """Apply ``(op, table, row)`` changes atomically; returns the END position. For ``u``
        the row is the new row; the before image is the stored row with the same key (or
        ``("u", table, (old_row, new_row))`` to change a primary key)."""
        with self.cond:
            self._tx += 1
            tx = self._tx
            self._append("begin", tx)
            for op, tname, row in changes:
                mt = self.tables[tname]
                if op == "c":
                    mt.rows[mt.key_of(row)] = row
                    self._append("row", tx, Operation.CREATE, tname, None, row)
                elif op == "u":
                    if row and isinstance(row[0], tuple):
                        old, new = row
                        mt.rows.pop(mt.key_of(old))
                    else:
                        old, new = mt.rows[mt.key_of(row)], row
                    mt.rows[mt.key_of(new)] = new
                    self._append("row", tx, Operation.UPDATE, tname, old, new)
                elif op == "d":
                    old = mt.rows.pop(mt.key_of(row))
                    self._append("row", tx, Operation.DELETE, tname, old, None)
                else:
                    raise ValueError(f"unknown op {op!r}")
            self._append("end", tx)
            self.cond.notify_all()
            return len(self.log)

    def _append(
        self,
        kind: str,
        tx: int,
        op: Operation | None = None,
        table: str | None = None,
        before: tuple[Any, ...] | None = None,
        after: tuple[Any, ...] | None = None,
    ) -> None:
        self.log.append(LogEntry(len(self.log) + 1, kind, tx, op, table, before, after))


_TYPES: dict[str, Schema] = {
    "int": INT32,
    "bigint": INT64,
    "text": STRING,
    "double": primitive(Type.FLOAT64),
    "bool": primitive(Type.BOOLEAN),
    "bytes": primitive(Type.BYTES),
    "date": logical.date(),
    "json": logical.json(),
}


class MemoryConverters:
    def schema_for(self, table: Table, column: Column) -> Schema | None:
        return _TYPES.get(column.type_name)

    def converter_for(self, table: Table, column: Column) -> ValueConverter | None:
        if column.type_name == "date":
            return logical.days_since_epoch
        return None


def _source(db: str, table: str | None, pos: int, tx: int | None, snapshot: bool) -> dict[str, Any]:
    return {
        "ts_ms": 0,
        "snapshot": snapshot,
        "db": db,
        "table": table or "",
        "pos": pos,
        "txId": tx,
    }


class MemorySnapshot(SnapshotSource):
    def __init__(self, db: MemoryDatabase, fail_after_rows: int = 0) -> None:
        self.db = db
        self.fail_after_rows = fail_after_rows

    def execute(
        self, ctx: SourceContext, previous_offset: Mapping[str, Any] | None, include_data: bool
    ) -> dict[str, Any]:
        with self.db.cond:
            pos = len(self.db.log)
            tables = {n: (mt.table, list(mt.rows.values())) for n, mt in self.db.tables.items()}
        ctx.snapshot_started([t.id for t, _ in tables.values() if ctx.is_included(t.id)])
        # The log keeps every position, so an earlier attempt's origin is always available.
        # Asked without data too: streaming starts at an interrupted attempt's origin.
        resume = ctx.snapshot_starting({"pos": pos})
        emitted = 0
        for name, (table, rows) in tables.items():
            ctx.register_table(table)
            if not include_data or not ctx.is_included(table.id):
                continue
            for i, row in enumerate(rows):
                ctx.emit(
                    RowChange(
                        Operation.READ,
                        table.id,
                        None,
                        row,
                        _source(self.db.name, name, pos, None, True),
                        {"pos": pos, "snapshot": True},
                    )
                )
                ctx.snapshot_progress(table.id, i + 1, len(rows))
                emitted += 1
                if emitted == self.fail_after_rows:
                    raise RuntimeError(f"memory.snapshot.fail.after.rows={emitted} reached")
            # a table is its own chunk: not resumable, but the wait is exercised
            ctx.snapshot_chunk_done()
            ctx.snapshot_table_completed(table.id, len(rows))
        ctx.snapshot_completed()
        return {"pos": int(resume["pos"])}


class MemoryStreaming(StreamingSource):
    """Tails the log through every member of the source context a real stream uses: rows
    through ``emit_row`` inside ``batched`` (flushed before each wait), BEGIN only with
    transaction metadata, the streaming gauges and an extra gauge of its own."""

    def __init__(self, db: MemoryDatabase, transactions_per_second: float = 0.0) -> None:
        self.db = db
        self.tx_interval = 1.0 / transactions_per_second if transactions_per_second else 0.0

    def execute(self, ctx: SourceContext, offset: Mapping[str, Any] | None) -> None:
        pos = int(offset["pos"]) if offset else 0
        for mt in list(self.db.tables.values()):
            ctx.register_table(mt.table)
        metrics = ctx.metrics
        metrics.extra["MemoryLogEntries"] = lambda: float(len(self.db.log))
        gauges = metrics.streaming
        gauges.connected = True
        try:
            with ctx.batched(64) as flush:
                while not ctx.stop_event.is_set():
                    with self.db.cond:
                        entries = self.db.log[pos:]
                    if not entries:
                        ctx.emit(PositionReached({"pos": pos}))
                        flush()  # nothing read may wait in the core while the log is idle
                        with self.db.cond:
                            if pos >= len(self.db.log):
                                self.db.cond.wait(0.1)
                        continue
                    for e in entries:
                        self._report(ctx, e, flush)
                        pos = e.pos
                    gauges.ms_behind_source = 0
                    gauges.source_event_position = {"pos": str(pos)}
        finally:
            gauges.connected = False

    def _report(self, ctx: SourceContext, e: LogEntry, flush: Callable[[], None]) -> None:
        src = _source(self.db.name, e.table, e.pos, e.tx, False)
        off = {"pos": e.pos}
        if e.kind == "begin":
            if ctx.tx_metadata:
                ctx.emit(TransactionBegin(str(e.tx), src, off))
        elif e.kind == "end":
            ctx.emit(TransactionEnd(str(e.tx), src, off))
            if self.tx_interval:
                flush()
                time.sleep(self.tx_interval)
        else:
            assert e.op is not None and e.table is not None
            table = self.db.tables[e.table].table
            ctx.emit_row(e.op, table.id, e.before, e.after, src, off, str(e.tx))

    def commit_offset(self, offset: Mapping[str, Any]) -> None:
        self.db.committed_positions.append(int(offset["pos"]))


CONFIG_DEF = common_def().extend(
    ConfigDef(
        [
            ConfigField(
                "memory.database",
                Kind.STRING,
                required=True,
                importance="HIGH",
                doc="Name of the in-process test database to capture (made by the test first).",
            ),
            ConfigField(
                "memory.transactions.per.second",
                Kind.DOUBLE,
                0.0,
                doc="Throttle streaming (0 = unthrottled), to stop a test mid-stream.",
            ),
            ConfigField(
                "snapshot.mode",
                Kind.STRING,
                "initial",
                validator=one_of(*MODES),
                group="Snapshot",
                doc="When to snapshot the test database's rows (Debezium's modes).",
            ),
            ConfigField(
                "memory.snapshot.fail.after.rows",
                Kind.INT,
                0,
                doc="Fail the snapshot after emitting this many rows (0 = never): an "
                "interrupted snapshot, for the core's restart tests.",
            ),
        ]
    )
)


class MemoryConnector(Connector):
    type_name = "memory"
    class_names = ("io.tidemark.connector.memory.MemoryConnector",)
    config_def = CONFIG_DEF
    config: Config

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        self.config = CONFIG_DEF.parse(config)
        self.db = MemoryDatabase.get(self.config["memory.database"])

    @classmethod
    def validate_offset(
        cls, partition: dict[str, Any], offset: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, list[str]]:
        problems = [] if set(partition) == {"server"} else ['partition must be {"server": ...}']
        if offset is None:
            return None, problems
        pos = offset.get("pos")
        if not isinstance(pos, int) or isinstance(pos, bool) or pos < 0:
            problems.append(f"offset.pos must be a non-negative integer, got {pos!r}")
        problems += core_key_problems(offset)
        unknown = sorted(set(offset) - {"pos", *CORE_KEYS})
        if unknown:
            problems.append(f"unknown offset key(s) {', '.join(unknown)}")
        return offset, problems

    def source_partition(self) -> dict[str, Any]:
        return {"server": self.config["database.server.name"]}

    def snapshotter(self) -> Snapshotter:
        return MODES[self.config["snapshot.mode"]]()

    def snapshot_source(self) -> SnapshotSource:
        return MemorySnapshot(self.db, self.config["memory.snapshot.fail.after.rows"])

    def streaming_source(self) -> StreamingSource:
        return MemoryStreaming(self.db, self.config["memory.transactions.per.second"])

    def value_converters(self) -> MemoryConverters:
        return MemoryConverters()

    def source_schema(self) -> Schema:
        return SOURCE_SCHEMA
