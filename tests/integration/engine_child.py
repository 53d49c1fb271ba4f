"""A connector task in its own process, so tests can SIGKILL it mid-stream.

    python -m tests.integration.engine_child SPEC.json

SPEC: {"kind": "memory" | "postgres" | "mysql" | "sqlserver" | "mongodb" | "cassandra",
       "config": {...}, "bootstrap": "...",
       "offsets": {"file": path} | {"kafka_topic": name}, "exactly_once": bool,
       "memory": {"transactions": N, "rows_per_tx": k}, "hold_after_chunks": N,
       "hold_after_snapshot_rows": N}
The memory database is rebuilt identically on every start (same rows, same positions), so
a restarted child sees the same log, as a database would.

``hold_after_chunks``: the incremental snapshot's chunk reads after the first N block for
good (the open watermark of chunk N+1 is written, its read never returns), so a test kills
the child inside a snapshot however fast or slow the machine is, instead of racing it.
Streaming stops with it (chunks are read on the streaming thread); offsets of what was
sent before are still stored. Only SIGKILL ends a held child.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from cdc.engine import Engine, EngineSettings
from cdc.offsets.file import FileOffsetStore
from cdc.offsets.kafka import KafkaOffsetStore
from cdc.offsets.store import OffsetStore
from cdc.spi import ChunkReader, Connector


class HeldReader:
    """A connector's chunk reader whose chunk reads after the first ``chunks`` never return
    (see ``hold_after_chunks``); every other call goes to the connector's reader."""

    def __init__(self, inner: ChunkReader, chunks: int) -> None:
        self.inner, self.chunks = inner, chunks

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def read_chunk(self, *args: Any, **kwargs: Any) -> list[Sequence[Any]]:
        if self.chunks <= 0:
            print("HELD", flush=True)
            threading.Event().wait()
        self.chunks -= 1
        return self.inner.read_chunk(*args, **kwargs)


def hold_chunks(connector: Connector, chunks: int) -> None:
    """Make ``connector`` hand out :class:`HeldReader` s holding after ``chunks`` reads."""
    make = connector.chunk_reader

    def held() -> Any:
        inner = make()
        return None if inner is None else HeldReader(inner, chunks)

    setattr(connector, "chunk_reader", held)  # noqa: B010 (mypy: no assignment to a method)


def hold_snapshot_rows(rows: int) -> None:
    """The initial snapshot's row emission blocks for good once ``rows`` rows were handed to
    the core (``hold_after_snapshot_rows``), in the middle of a batch when that is where the
    count falls: the task thread still sends what was emitted and stores its offsets, so a
    test kills the child inside the snapshot (and inside a chunk) on any machine."""
    from cdc.snapshot import driver

    emit = driver.TableScan.emit
    emitted = 0

    class Holding:
        """The source context, with an ``emit``/``emit_row``/``emit_rows`` that blocks at the
        count."""

        def __init__(self, ctx: Any) -> None:
            self._ctx = ctx

        def __getattr__(self, name: str) -> Any:
            return getattr(self._ctx, name)

        def _count(self) -> None:
            nonlocal emitted
            if emitted >= rows:
                flush = getattr(self._ctx, "flush", None)
                if callable(flush):
                    flush()  # what the dispatcher holds back goes to the task thread
                print("HELD", flush=True)
                threading.Event().wait()
            emitted += 1

        def emit(self, event: Any) -> None:
            self._count()
            self._ctx.emit(event)

        def emit_row(self, *args: Any) -> None:
            self._count()
            self._ctx.emit_row(*args)

        def emit_rows(self, op: Any, table_id: Any, batch: Sequence[Any], *rest: Any) -> None:
            nonlocal emitted
            room = max(rows - emitted, 0)
            if room:  # the rows before the count go at once, as they would
                self._ctx.emit_rows(op, table_id, batch[:room], *rest)
                emitted += min(room, len(batch))
            if len(batch) > room:
                self._count()  # blocks

    def held(self: driver.TableScan, ctx: Any, batch: Sequence[Any]) -> None:
        emit(self, Holding(ctx), batch)

    setattr(driver.TableScan, "emit", held)  # noqa: B010 (mypy: no assignment to a method)


def build_memory_db(name: str, transactions: int, rows_per_tx: int) -> None:
    from cdc.testing.memory import MemoryDatabase

    db = MemoryDatabase(name)
    db.create_table("items", [("id", "int"), ("v", "text")], ["id"])
    n = 0
    for _ in range(transactions):
        changes = []
        for _ in range(rows_per_tx):
            n += 1
            changes.append(("c", "items", (n, f"value-{n}")))
        db.transaction(changes)


def main(spec_path: str) -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    engine: Engine | None = None
    stop_requested = False

    def on_term(*_: object) -> None:
        nonlocal stop_requested
        stop_requested = True
        if engine is not None:
            engine.stop()

    signal.signal(signal.SIGTERM, on_term)
    with open(spec_path) as fh:
        spec: dict[str, Any] = json.load(fh)
    cfg = spec["config"]
    connector: Connector
    if spec["kind"] == "memory":
        from cdc.testing.memory import MemoryConnector

        m = spec["memory"]
        build_memory_db(cfg["memory.database"], m["transactions"], m["rows_per_tx"])
        connector = MemoryConnector(cfg)
    elif spec["kind"] == "mysql":
        from connectors.mysql import MySqlConnector

        connector = MySqlConnector(cfg)
    elif spec["kind"] == "sqlserver":
        from connectors.sqlserver import SqlServerConnector

        connector = SqlServerConnector(cfg)
    elif spec["kind"] == "mongodb":
        from connectors.mongodb import MongoDbConnector

        connector = MongoDbConnector(cfg)
    elif spec["kind"] == "cassandra":
        from connectors.cassandra import CassandraConnector

        connector = CassandraConnector(cfg)
    else:
        from connectors.postgres import PostgresConnector

        connector = PostgresConnector(cfg)
    if "hold_after_snapshot_rows" in spec:
        hold_snapshot_rows(int(spec["hold_after_snapshot_rows"]))
    if "hold_after_chunks" in spec:
        hold_chunks(connector, int(spec["hold_after_chunks"]))
    offsets = spec["offsets"]
    store: OffsetStore
    if "file" in offsets:
        store = FileOffsetStore(offsets["file"])
    else:
        store = KafkaOffsetStore(spec["bootstrap"], offsets["kafka_topic"], partitions=3)
    eos = bool(spec.get("exactly_once"))
    engine = Engine(
        connector,
        connector.config,  # type: ignore[attr-defined]
        store,
        EngineSettings(
            producer={"bootstrap.servers": spec["bootstrap"]},
            offset_flush_interval_ms=int(spec.get("flush_ms", 100)),
            exactly_once=eos,
            transactional_id=f"tidemark-{cfg['name']}" if eos else None,
        ),
    )
    if stop_requested:
        return
    print("READY", flush=True)
    engine.run()


if __name__ == "__main__":
    main(sys.argv[1])
