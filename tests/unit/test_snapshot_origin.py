"""The snapshot origin: where streaming starts after a snapshot that was interrupted and
redone (``cdc.pipeline.coordinator``). Every attempt's rows are downstream, so streaming must
hand over from the earliest position any attempt started from: replaying the log from there
re-delivers the deletes of rows an attempt emitted and a later one no longer reads.

Each scenario runs the core's own parts (dispatcher, queue, delivery, offset writer, the
coordinator and the snapshot driver) with a fake Kafka: a record is in Kafka once the producer
is flushed (at-least-once) or its transaction committed (exactly-once). A crash is a
``BaseException`` raised on the source thread while nothing else runs: what was stored stays
stored, nothing more is (a SIGKILL). The user's check closes each scenario: the last event per
key in the topic equals the table.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest

from cdc.assembly import EngineSettings, TaskParts, assemble
from cdc.engine import Engine
from cdc.offsets.memory import MemoryOffsetStore
from cdc.offsets.store import OffsetStore
from cdc.pipeline.coordinator import SourceCoordinator
from cdc.snapshot.driver import (
    ResumePoint,
    TableScan,
    one_by_one,
    plain_key_reader,
    run_snapshot,
)
from cdc.spi import SchemaChange, SnapshotSource, SourceContext, TableId
from cdc.testing.memory import MemoryConnector, MemoryDatabase, MemoryTable
from tests.unit.fake_kafka import FakeKafkaOffsetStore, Kafka, fake_sink

PARTITION = {"server": "srv"}


class Crash(BaseException):
    """The task process killed (not an exception the engine handles)."""


def last_per_key(kafka: Kafka, topic: str) -> dict[int, Any]:
    """What a compacted topic (or ``tidemark verify``) keeps: the last row image per key,
    None for a delete or tombstone."""
    out: dict[int, Any] = {}
    for t, key, value in kafka:
        if t != topic or key is None:
            continue
        k = json.loads(key)["payload"]["id"]
        out[k] = None if value is None else json.loads(value)["payload"]["after"]
    return out


def table_rows(db: MemoryDatabase) -> dict[int, Any]:
    return {row[0]: {"id": row[0], "v": row[1]} for row in db.tables["t"].rows.values()}


def alive(downstream: dict[int, Any]) -> dict[int, Any]:
    return {k: v for k, v in downstream.items() if v is not None}


# -- a connector whose snapshot runs through the driver, as MySQL's does ----------------------

Hook = Callable[[], None]


class DriverSteps:
    """The driver's steps over the in-memory database, in MySQL's shape: the structure step
    emits a schema change per table at the snapshot's position (offset ``snapshot: true``;
    without ``include.schema.changes`` a position marker), rows are read in key order."""

    def __init__(self, db: MemoryDatabase, ctx: SourceContext, hooks: dict[str, Hook]) -> None:
        self.db, self.ctx, self.hooks = db, ctx, hooks
        self.pos = 0
        self.tables_read: dict[str, MemoryTable] = {}

    def _hook(self, name: str) -> None:
        self.hooks.get(name, lambda: None)()

    def prepare(self) -> None:
        pass

    def tables(self) -> Sequence[TableId]:
        with self.db.cond:
            self.pos = len(self.db.log)
            self.tables_read = {
                n: MemoryTable(mt.table, dict(mt.rows)) for n, mt in self.db.tables.items()
            }
        return [mt.table.id for mt in self.tables_read.values()]

    def lock(self) -> None:
        pass

    def position(self) -> dict[str, Any]:
        return {"pos": self.pos}

    def structure(self) -> None:
        for name, mt in self.tables_read.items():
            self.ctx.register_table(mt.table)
            self.ctx.emit(
                SchemaChange(
                    self.db.name,
                    None,
                    f"CREATE TABLE {name} (id int PRIMARY KEY, v text)",
                    [mt.table.id],
                    self._source(name),
                    {"pos": self.pos, "snapshot": True},
                )
            )
        self._hook("after_structure")

    def handover(self, resume: dict[str, Any]) -> dict[str, Any]:
        return {"pos": int(resume["pos"])}  # the log keeps every position

    def scans(self) -> list[TableScan]:
        return [
            TableScan(
                mt.table,
                self._source(name),
                {"pos": self.pos, "snapshot": True},
                len(mt.rows),
                plan=mt,
                key_of=plain_key_reader([0]),
            )
            for name, mt in self.tables_read.items()
        ]

    def read(self, scans: list[TableScan]) -> Iterator[tuple[TableScan, Sequence[Any] | None]]:
        def rows(scan: TableScan) -> Iterator[list[Any]]:
            after = scan.after[0] if scan.after else None
            keep = [r for k, r in sorted(scan.plan.rows.items()) if after is None or k[0] > after]
            if keep:
                yield keep

        yield from one_by_one(scans, self.ctx.stop_event.is_set, rows)
        self._hook("after_rows")

    def release(self, completed: bool) -> None:
        pass

    def _source(self, table: str) -> dict[str, Any]:
        return {
            "ts_ms": 0,
            "snapshot": True,
            "db": self.db.name,
            "table": table,
            "pos": self.pos,
            "txId": None,
        }


class DriverSnapshot(SnapshotSource):
    def __init__(self, db: MemoryDatabase, hooks: dict[str, Hook]) -> None:
        self.db, self.hooks = db, hooks

    def execute(
        self, ctx: SourceContext, previous_offset: Mapping[str, Any] | None, include_data: bool
    ) -> dict[str, Any]:
        steps = DriverSteps(self.db, ctx, self.hooks)
        return run_snapshot(
            ctx, steps, include_data=include_data, resume=ResumePoint.of(previous_offset)
        )


class DriverConnector(MemoryConnector):
    hooks: dict[str, Hook] = {}

    def snapshot_source(self) -> SnapshotSource:
        return DriverSnapshot(self.db, self.hooks)


def _raw(db: MemoryDatabase, mode: str, **extra: str) -> dict[str, Any]:
    return {
        "name": "c",
        "connector.class": "memory",
        "memory.database": db.name,
        "database.server.name": "srv",
        "topic.prefix": "srv",
        "snapshot.mode": mode,
        **extra,
    }


def crashed_run(
    cls: type[MemoryConnector],
    db: MemoryDatabase,
    store: OffsetStore,
    kafka: Kafka,
    mode: str,
    crash_at: str,
    **extra: str,
) -> None:
    """One task run on this thread, killed at hook ``crash_at`` right after the task thread
    sent everything queued and stored its offset (the interval commit; in exactly-once mode
    each batch's transaction)."""
    conn = cls(_raw(db, mode, **extra))
    eos = isinstance(store, FakeKafkaOffsetStore)
    p: TaskParts = assemble(
        conn,
        conn.config,
        store,
        EngineSettings(producer={}, exactly_once=eos),
        sink=fake_sink(kafka, store),
    )
    coordinator = SourceCoordinator(
        conn,
        name=p.name,
        snapshot_delay_ms=0,
        store=store,
        writer=p.writer,
        dispatcher=p.dispatcher,
        metrics=p.metrics,
        existing_topics=lambda: [],
        stopping=threading.Event(),
    )
    p.delivery.start()

    def commit_then_crash() -> None:
        while batch := p.queue.poll(0):
            p.delivery.process(batch)
        p.delivery.commit()
        raise Crash

    DriverConnector.hooks = {crash_at: commit_then_crash}
    try:
        with pytest.raises(Crash):
            coordinator.run()
    finally:
        DriverConnector.hooks = {}


def normal_run(
    cls: type[MemoryConnector],
    db: MemoryDatabase,
    store: OffsetStore,
    kafka: Kafka,
    mode: str,
    **extra: str,
) -> Any:
    """A run through the engine until streaming stored the end of the log; returns the
    stored offset."""
    conn = cls(_raw(db, mode, **extra))
    eos = isinstance(store, FakeKafkaOffsetStore)
    settings = EngineSettings(producer={}, offset_flush_interval_ms=20, exactly_once=eos)
    engine = Engine(conn, conn.config, store, settings, sink=fake_sink(kafka, store))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            engine.run()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    end = {"pos": len(db.log)}
    deadline = time.monotonic() + 20
    try:
        while store.get("c", PARTITION) != end or engine.state != "STREAMING":
            assert not errors, errors
            assert time.monotonic() < deadline, f"stored {store.get('c', PARTITION)}, not {end}"
            time.sleep(0.01)
    finally:
        engine.stop()
        thread.join(20)
    assert not errors, errors
    return store.get("c", PARTITION)


def stored_offset(store: OffsetStore) -> dict[str, Any]:
    stored = store.get("c", PARTITION)
    assert stored is not None
    return stored


def new_database(rows: int) -> MemoryDatabase:
    db = MemoryDatabase("o" + uuid.uuid4().hex[:10])
    db.create_table("t", [("id", "int"), ("v", "text")], ["id"])
    db.transaction([("c", "t", (i, f"v{i}")) for i in range(1, rows + 1)])
    return db


def new_store(delivery: str) -> OffsetStore:
    return FakeKafkaOffsetStore() if delivery == "exactly_once" else MemoryOffsetStore()


# -- BUG O2: an offset stored before snapshot_starting --------------------------------------


@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
def test_offset_stored_before_snapshot_starting_keeps_the_earlier_origin(delivery: str) -> None:
    """Attempt 1 emits every row (origin O) and is killed. Row 2 is deleted. Attempt 2 stores
    its structure step's offset (the new position, ``snapshot: true``) and is killed before
    ``snapshot_starting``. That offset must still name O (and attempt 1's progress), so
    attempt 3 hands over from O and the delete reaches the topic."""
    db, store, kafka = new_database(3), new_store(delivery), Kafka()
    crashed_run(DriverConnector, db, store, kafka, "initial", "after_rows")
    first = store.get("c", PARTITION)
    origin = {"pos": len(db.log)}
    assert first is not None and first["snapshot_origin"] == origin
    assert first["snapshot_table"] == f"{db.name}.t" and first["snapshot_after"] == [3]

    db.transaction([("d", "t", (2, "v2"))])
    crashed_run(DriverConnector, db, store, kafka, "initial", "after_structure")
    stored = store.get("c", PARTITION)
    assert stored is not None and stored["pos"] == len(db.log) and stored["snapshot"] is True
    assert stored["snapshot_origin"] == origin  # not lost to the structure step's position
    assert stored["snapshot_table"] == f"{db.name}.t" and stored["snapshot_after"] == [3]

    db.transaction([("u", "t", (3, "w3"))])
    final = normal_run(DriverConnector, db, store, kafka, "initial")
    assert final == {"pos": len(db.log)}
    downstream = last_per_key(kafka, f"srv.{db.name}.t")
    assert downstream[2] is None
    assert alive(downstream) == table_rows(db)


@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
def test_resnapshot_killed_after_its_structure_still_streams_from_the_replaced_offset(
    delivery: str,
) -> None:
    """``snapshot.mode=always`` replaces a streaming offset S: killed once its structure
    step's offset is stored, the next start must still hand over from S (rows streamed before
    S and deleted after it are downstream)."""
    db, store, kafka = new_database(2), new_store(delivery), Kafka()
    normal_run(MemoryConnector, db, store, kafka, "initial")
    replaced = store.get("c", PARTITION)
    db.transaction([("d", "t", (1, "v1"))])
    crashed_run(DriverConnector, db, store, kafka, "always", "after_structure")
    stored = store.get("c", PARTITION)
    assert stored is not None and stored["snapshot_origin"] == replaced

    normal_run(DriverConnector, db, store, kafka, "initial")
    downstream = last_per_key(kafka, f"srv.{db.name}.t")
    assert downstream[1] is None
    assert alive(downstream) == table_rows(db)


# -- BUG O3: a structure-only snapshot after an interrupted one -------------------------------


@pytest.mark.parametrize("connector", [DriverConnector, MemoryConnector], ids=["driver", "memory"])
@pytest.mark.parametrize("mode", ["no_data", "schema_only"])
def test_structure_only_snapshot_after_an_interrupted_one_streams_from_its_origin(
    connector: type[MemoryConnector], mode: str
) -> None:
    """An initial snapshot emits row 1 and fails; row 1 is deleted; the restart reads no
    rows (``no_data``/``schema_only``) and must stream from the interrupted snapshot's origin,
    so the delete reaches the topic."""
    db, store, kafka = new_database(2), MemoryOffsetStore(), Kafka()
    origin = {"pos": len(db.log)}
    if connector is DriverConnector:
        crashed_run(connector, db, store, kafka, "initial", "after_rows")
    else:
        conn = connector(_raw(db, "initial", **{"memory.snapshot.fail.after.rows": "1"}))
        settings = EngineSettings(producer={}, offset_flush_interval_ms=20)
        engine = Engine(conn, conn.config, store, settings, sink=fake_sink(kafka, store))
        with pytest.raises(RuntimeError, match=r"fail\.after\.rows"):
            engine.run()
    stored = store.get("c", PARTITION)
    assert stored is not None and stored["snapshot"] and stored["snapshot_origin"] == origin
    assert last_per_key(kafka, f"srv.{db.name}.t")[1] == {"id": 1, "v": "v1"}

    db.transaction([("d", "t", (1, "v1"))])
    final = normal_run(connector, db, store, kafka, mode)
    assert final == {"pos": len(db.log)}
    downstream = last_per_key(kafka, f"srv.{db.name}.t")
    assert downstream[1] is None
    assert alive(downstream) == {k: v for k, v in table_rows(db).items() if k in downstream}


def test_structure_only_snapshot_killed_keeps_the_origin() -> None:
    """The structure-only snapshot records the origin like a data snapshot does: killed after
    its structure, the stored offset still names the first attempt's origin."""
    db, store, kafka = new_database(2), MemoryOffsetStore(), Kafka()
    crashed_run(DriverConnector, db, store, kafka, "initial", "after_rows")
    origin = stored_offset(store)["snapshot_origin"]
    db.transaction([("d", "t", (2, "v2"))])
    crashed_run(DriverConnector, db, store, kafka, "no_data", "after_structure")
    assert stored_offset(store)["snapshot_origin"] == origin
    normal_run(DriverConnector, db, store, kafka, "no_data")
    downstream = last_per_key(kafka, f"srv.{db.name}.t")
    assert downstream[2] is None and alive(downstream) == table_rows(db)


# -- MySQL schema_only_recovery after an interrupted snapshot ---------------------------------

ORIGIN = {"file": "bin.000003", "pos": 154, "event": 0, "row": 0, "ts_sec": 1, "server_id": 7}
LATER = {**ORIGIN, "pos": 90_000, "ts_sec": 2}


@pytest.mark.parametrize(
    "previous",
    [
        # a row of a redone snapshot: its position is later than the origin
        {
            **LATER,
            "snapshot": True,
            "snapshot_origin": ORIGIN,
            "snapshot_done": [],
            "snapshot_table": "db.t",
            "snapshot_after": [7],
        },
        # the marker stored before the first row
        {"snapshot": True, "snapshot_origin": ORIGIN},
        # a streaming offset: recovered where it is
        ORIGIN,
    ],
    ids=["row", "marker", "streaming"],
)
def test_schema_only_recovery_starts_at_the_interrupted_snapshots_origin(
    monkeypatch: pytest.MonkeyPatch, previous: dict[str, Any]
) -> None:
    """``schema_only_recovery`` records the definitions where streaming starts and streams
    from there: after an interrupted snapshot that is its origin (an earlier attempt's rows
    are downstream), not the rows' later position."""
    from types import SimpleNamespace

    from connectors.mysql import connection as myconn
    from connectors.mysql import snapshot as mysnap
    from connectors.mysql.config import parse_config
    from connectors.mysql.state import MySqlMetrics, TaskState

    raw = {
        "database.server.name": "srv",
        "database.hostname": "h",
        "database.user": "u",
        "schema.history.internal": "memory",
        "snapshot.mode": "schema_only_recovery",
    }
    state = TaskState(parse_config(raw), {"server": "srv"}, MySqlMetrics())
    recorded: list[dict[str, Any]] = []

    def driver(ctx: Any, steps: Any, **kw: Any) -> dict[str, Any]:
        assert kw["include_data"] is False
        steps.position()  # where the definitions are recorded
        recorded.append(steps.binlog.to_offset())
        return dict(steps.own)  # handover: no earlier position than the recovered one

    monkeypatch.setattr(mysnap, "run_snapshot", driver)
    monkeypatch.setattr(myconn, "execute", lambda *a, **k: None)
    run = mysnap.SnapshotRun(state, None, False, previous)  # type: ignore[arg-type]
    run._info = SimpleNamespace()  # type: ignore[assignment]
    out = run.run(recovery=True)
    assert recorded == [{**ORIGIN, "snapshot": True}]
    assert out == ORIGIN
    assert state.schema_ready
