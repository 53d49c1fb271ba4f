"""SQL Server: a database added to ``database.names`` while the connector streams the others
is snapshotted on its own (``connectors.sqlserver.snapshot.snapshot_added``). That snapshot
must follow the core's rule for restarted snapshots (``tests/unit/test_snapshot_origin.py``):
after a kill during it, the redone snapshot reads the tables at a newer LSN, so streaming
must start from the position the *first* attempt started from (its snapshot origin), or the
deletes of rows the first attempt emitted are never replayed and those rows stay alive
downstream forever.

Each scenario runs the connector's own snapshot, streaming and offset code through the core
(dispatcher, queue, delivery, offset writer, coordinator) against a fake SQL Server (catalog,
change tables and rows answered per T-SQL statement) and a fake Kafka. A kill is a
``BaseException`` raised on the source thread right after the task sent everything queued
and stored its offset: what was stored stays, nothing more is. The user's check closes each
scenario: the last event per key downstream equals the table.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import struct
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from cdc.assembly import EngineSettings, TaskParts, assemble
from cdc.engine import Engine
from cdc.offsets.memory import MemoryOffsetStore
from cdc.offsets.store import OffsetItem, OffsetStore, normalise
from cdc.pipeline.coordinator import SourceCoordinator
from connectors.sqlserver import connection, snapshot, streaming
from connectors.sqlserver.connector import SqlServerConnector
from connectors.sqlserver.databases import DatabasePositions
from connectors.sqlserver.dialect import TSQL
from connectors.sqlserver.offsets import Lsn, validate_offset
from tests.unit.fake_kafka import FakeKafkaOffsetStore, Kafka, fake_sink

PARTITION = {"server": "srv"}
T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
COLUMNS = ["id", "v"]


class Crash(BaseException):
    """The task process killed (not an exception the engine handles)."""


# -- a fake SQL Server ------------------------------------------------------------------------


def commit_lsn(n: int) -> bytes:
    return struct.pack(">IIH", n, 0x10, 1)


def change_lsn(n: int, k: int) -> bytes:
    return struct.pack(">IIH", n, 0x08, k)


def lsn_text(raw: bytes) -> str:
    return str(Lsn(raw))


class FakeDatabase:
    """One CDC-enabled database with one captured table ``dbo.t (id int primary key, v
    nvarchar)``: its rows, change table and ``cdc.lsn_time_mapping``."""

    def __init__(self, server: FakeServer, name: str, object_id: int) -> None:
        self.server = server
        self.name = name
        self.object_id = object_id
        self.rows: dict[int, str] = {}
        self.changes: list[tuple[Any, ...]] = []
        self.commits: dict[bytes, dt.datetime] = {}
        #: the capture instance's start (sys.sp_cdc_enable_table)
        self.start = self._commit()[1]
        #: the cleanup job removed the changes committed before this LSN
        self.cleaned_to: bytes | None = None

    def _commit(self) -> tuple[int, bytes]:
        n = self.server.next_lsn()
        raw = commit_lsn(n)
        self.commits[raw] = T0 + dt.timedelta(seconds=n)
        return n, raw

    def write(self, *ops: tuple[str, int, str | None]) -> bytes:
        """One transaction of ``("insert"|"update"|"delete", id, v)``; its commit LSN."""
        n, raw = self._commit()
        for k, (op, key, value) in enumerate(ops, 1):
            seq = change_lsn(n, k)
            if op == "insert":
                self.rows[key] = str(value)
                self.changes.append((raw, seq, 2, b"\x03", key, value))
            elif op == "update":
                self.changes.append((raw, seq, 3, b"\x02", key, self.rows[key]))
                self.rows[key] = str(value)
                self.changes.append((raw, seq, 4, b"\x02", key, value))
            else:
                self.changes.append((raw, seq, 1, b"\x03", key, self.rows.pop(key)))
        return raw

    def cleanup(self) -> None:
        """The CDC cleanup job: every change committed so far is gone."""
        self.cleaned_to = self.max_lsn()
        self.changes = [c for c in self.changes if c[0] >= self.cleaned_to]

    def max_lsn(self) -> bytes:
        return max(self.commits)

    def table(self) -> dict[int, Any]:
        return {k: {"id": k, "v": v} for k, v in self.rows.items()}

    def answer(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if sql == TSQL.database_cdc_enabled():
            return [(1,)]
        if sql == TSQL.max_lsn():
            return [(self.max_lsn(),)]
        if sql == TSQL.min_lsn():
            return [(self.cleaned_to or self.start,)]
        if sql == TSQL.lsn_to_time():
            return [(self.commits.get(bytes(params[0])),)]
        if sql == TSQL.capture_instances():
            return [("dbo", "t", "dbo_t", self.start, self.object_id + 1, self.object_id, T0)]
        if sql == TSQL.tables():
            return [("dbo", "t", 1)]
        if sql == TSQL.captured_columns():
            return [(self.object_id + 1, "id", 1, "int"), (self.object_id + 1, "v", 2, "nvarchar")]
        if sql == TSQL.table_columns():
            return [
                ("id", 1, "int", 4, 10, 0, False, False),
                ("v", 2, "nvarchar", 200, 0, 0, True, False),
            ]
        if sql == TSQL.primary_key():
            return [("id",)]
        if sql.startswith("SET TRANSACTION ISOLATION LEVEL"):
            return []
        if sql == TSQL.transactions():
            lo, hi = params
            return [(c, t) for c, t in sorted(self.commits.items()) if lo <= c <= hi]
        if sql == TSQL.changes("dbo_t"):
            lo, hi = params
            return [c for c in self.changes if lo <= c[0] <= hi]
        if sql in (TSQL.snapshot_select("dbo", "t", COLUMNS), self._keyed()):
            return sorted(self.rows.items())
        if sql == TSQL.snapshot_select_after("dbo", "t", COLUMNS, ["id"]):
            (after,) = params[0] if isinstance(params[0], list) else params
            return [r for r in sorted(self.rows.items()) if r[0] > after]
        raise AssertionError(f"unexpected statement {sql}")

    def _keyed(self) -> str:
        return TSQL.snapshot_select("dbo", "t", COLUMNS, ["id"])


class FakeCursor:
    def __init__(self, db: FakeDatabase) -> None:
        self.db = db
        self.rows: list[tuple[Any, ...]] = []
        self.description = None
        self.selecting = False
        self.batches = 0

    def execute(self, sql: str, *params: Any) -> None:
        self.selecting = sql.startswith(TSQL.snapshot_select("dbo", "t", COLUMNS))
        self.rows = list(self.db.answer(sql, params))

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows.pop(0) if self.rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self.rows = self.rows, []
        return rows

    def fetchmany(self, n: int) -> list[tuple[Any, ...]]:
        if self.selecting:
            # the snapshot reads its next batch of rows
            self.db.server.before_batch(self.db.name, self.batches)
            self.batches += 1
        rows, self.rows = self.rows[:n], self.rows[n:]
        return rows

    def close(self) -> None:
        pass


class FakeConnection:
    def __init__(self, db: FakeDatabase) -> None:
        self.db = db

    def cursor(self) -> FakeCursor:
        return FakeCursor(self.db)

    def commit(self) -> None:
        pass

    def rollback(self) -> None:
        pass

    def close(self) -> None:
        pass


class FakeServer:
    def __init__(self) -> None:
        self.lsn = 0x30
        self.databases: dict[str, FakeDatabase] = {}
        #: called before each batch a snapshot reads: (database, batch number from 0)
        self.before_batch: Callable[[str, int], None] = lambda db, n: None

    def next_lsn(self) -> int:
        self.lsn += 1
        return self.lsn

    def database(self, name: str) -> FakeDatabase:
        db = self.databases[name] = FakeDatabase(self, name, 100 * (len(self.databases) + 1))
        return db

    def connect(self, cfg: Any, *, autocommit: bool = True, database: str | None = None) -> Any:
        assert database is not None
        return FakeConnection(self.databases[database])


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    fake = FakeServer()
    for module in (connection, snapshot, streaming):
        monkeypatch.setattr(module, "connect", fake.connect)
    return fake


# -- a fake Kafka (as in tests/unit/test_snapshot_origin.py) -----------------------------------


class Recording:
    """Every offset the store took, in order."""

    history: list[dict[str, Any]]

    def remember(self, offset: Any) -> None:
        if offset is not None:
            self.history.append(offset)


class RecordingStore(MemoryOffsetStore, Recording):
    def __init__(self) -> None:
        super().__init__()
        self.history = []

    def put_many(self, items: Iterable[OffsetItem]) -> None:
        entries = list(items)
        for _key, _connector, _partition, offset in normalise(entries):
            self.remember(offset)
        super().put_many(entries)


def new_store(delivery: str) -> Any:
    return FakeKafkaOffsetStore() if delivery == "exactly_once" else RecordingStore()


def last_per_key(kafka: Kafka, *topics: str) -> dict[int, Any]:
    """What a compacted topic keeps (over ``topics`` in order): the last row image per key,
    None for a delete or tombstone."""
    out: dict[int, Any] = {}
    for t, key, value in kafka:
        if t not in topics or key is None:
            continue
        k = json.loads(key)["payload"]["id"]
        out[k] = None if value is None else json.loads(value)["payload"]["after"]
    return out


def alive(downstream: dict[int, Any]) -> dict[int, Any]:
    return {k: v for k, v in downstream.items() if v is not None}


# -- task runs ---------------------------------------------------------------------------------


#: keys a scenario adds to every run's config
_RAW_EXTRA: dict[str, str] = {}


def _raw(names: str, mode: str) -> dict[str, Any]:
    return {
        **_RAW_EXTRA,
        "name": "c",
        "connector.class": "io.debezium.connector.sqlserver.SqlServerConnector",
        "database.server.name": "srv",
        "topic.prefix": "srv",
        "database.hostname": "h",
        "database.user": "u",
        "database.names": names,
        "snapshot.mode": mode,
        "snapshot.fetch.size": "1",
        "streaming.poll.interval.ms": "5",
    }


def crashed_run(
    server: FakeServer,
    store: OffsetStore,
    kafka: Kafka,
    names: str,
    crash_before: tuple[str, int],
    mode: str = "initial",
    at_batch: Callable[[str, int], None] = lambda db, n: None,
) -> None:
    """One task run on this thread, killed when a snapshot of database ``crash_before[0]``
    is about to read its batch ``crash_before[1]``, right after the task thread sent
    everything queued (it all reached Kafka) and stored its offset. The source's waits for
    a stored offset (``snapshot_chunk_done``) are served here, as the task thread would."""
    conn = SqlServerConnector(_raw(names, mode))
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

    def send_and_store() -> None:
        p.dispatcher.flush()  # records a source holds back (``batched``) go to the queue
        while batch := p.queue.poll(0):
            p.delivery.process(batch)
        p.delivery.commit()
        # what the producer sent reached Kafka (the commit skips the flush when the newest
        # offset is stored already: the added database's rows share the origin's offset)
        p.sink.flush(0)

    def chunk_done(mark: int, wait: bool = True) -> None:
        send_and_store()
        coordinator.stored(p.queue.taken_total)

    p.dispatcher.snapshot_chunk_hook = chunk_done

    def before_batch(db: str, n: int) -> None:
        at_batch(db, n)
        if (db, n) == crash_before:
            send_and_store()
            raise Crash

    server.before_batch = before_batch
    try:
        with pytest.raises(Crash):
            coordinator.run()
    finally:
        server.before_batch = lambda db, n: None


def normal_run(
    server: FakeServer,
    store: OffsetStore,
    kafka: Kafka,
    names: str,
    end: dict[str, Any] | Callable[[], dict[str, Any]],
    mode: str = "initial",
) -> None:
    """A run through the engine until it streams and stored ``end`` (or what it returns:
    an end that depends on changes made during the run)."""
    want = end if callable(end) else (lambda: end)
    conn = SqlServerConnector(_raw(names, mode))
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
    deadline = time.monotonic() + 20
    try:
        while store.get("c", PARTITION) != want() or engine.state != "STREAMING":
            assert not errors, errors
            assert time.monotonic() < deadline, f"stored {store.get('c', PARTITION)}, not {want()}"
            time.sleep(0.01)
    finally:
        engine.stop()
        thread.join(20)
    assert not errors, errors


def at(raw: bytes) -> dict[str, Any]:
    """A flat position: everything up to commit ``raw`` done."""
    return {"commit_lsn": lsn_text(raw), "change_lsn": None, "event_serial_no": None}


def streaming_a(server: FakeServer, store: OffsetStore, kafka: Kafka) -> None:
    """Database a, captured alone so far (flat offset): snapshotted and streaming."""
    a = server.databases["a"]
    normal_run(server, store, kafka, "a", at(a.max_lsn()))


def setup(server: FakeServer) -> tuple[FakeDatabase, FakeDatabase]:
    a, b = server.database("a"), server.database("b")
    a.write(("insert", 1, "a1"), ("insert", 2, "a2"))
    b.write(("insert", 1, "b1"), ("insert", 2, "b2"), ("insert", 3, "b3"))
    return a, b


def after_the_first_attempt(a: FakeDatabase, b: FakeDatabase) -> None:
    """Changes between the attempts: row 1 of b, which the first attempt emitted, deleted."""
    b.write(("delete", 1, None))
    b.write(("update", 2, "b2x"), ("insert", 4, "b4"))
    a.write(("update", 1, "a1x"))


# -- the scenarios -------------------------------------------------------------------------------


@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
def test_added_database_killed_during_its_snapshot_streams_from_the_first_attempts_origin(
    server: FakeServer, delivery: str
) -> None:
    """b is added to ``database.names`` while a streams; its snapshot (at LSN O) emits row 1
    and is killed. Row 1 is deleted. The restart snapshots b again at a newer LSN and must
    stream b from O: the delete reaches the topic."""
    a, b = setup(server)
    store = new_store(delivery)
    kafka: Kafka = []
    streaming_a(server, store, kafka)
    a_pos = at(a.max_lsn())
    origin = at(b.max_lsn())  # the first attempt's snapshot LSN
    seen_before_rows: list[Any] = []

    def before_rows(db: str, n: int) -> None:
        if (db, n) == ("b", 0):
            seen_before_rows.append(store.get("c", PARTITION))

    crashed_run(server, store, kafka, "a,b", crash_before=("b", 1), at_batch=before_rows)

    with_origin = {"positions": {"a": a_pos}, "snapshot_origins": {"b": origin}}
    # the origin was stored before b's first row went out
    assert seen_before_rows == [with_origin]
    # the row's offset (stored at the kill) keeps it; nothing of the driver's resume fields
    assert store.get("c", PARTITION) == with_origin
    assert last_per_key(kafka, "srv.b.dbo.t") == {1: {"id": 1, "v": "b1"}}
    # every offset stored is one PATCH /offsets takes
    for offset in store.history:
        assert validate_offset(PARTITION, offset)[1] == [], offset

    after_the_first_attempt(a, b)
    end = {"positions": {"a": at(a.max_lsn()), "b": at(b.max_lsn())}}
    normal_run(server, store, kafka, "a,b", end)

    # b's snapshot completed: its origin is gone from the offset
    assert store.get("c", PARTITION) == end
    assert alive(last_per_key(kafka, "srv.b.dbo.t")) == b.table()
    assert alive(last_per_key(kafka, "srv.dbo.t", "srv.a.dbo.t")) == a.table()
    for offset in store.history:
        assert validate_offset(PARTITION, offset)[1] == [], offset


def test_other_databases_offsets_keep_the_origin_until_the_snapshot_completes(
    server: FakeServer,
) -> None:
    """The others are polled between the added database's batches; their changes' offsets
    keep its origin (storing one of them must not drop it)."""
    a, b = setup(server)
    store = new_store("at_least_once")
    kafka: Kafka = []
    streaming_a(server, store, kafka)
    origin = at(b.max_lsn())

    def change_a(db: str, n: int) -> None:
        if db == "b" and n == 1:
            a.write(("insert", 3, "a3"))
            time.sleep(0.02)  # a is due for a poll before b's next batch: it is streamed

    crashed_run(server, store, kafka, "a,b", crash_before=("b", 2), at_batch=change_a)
    stored = store.get("c", PARTITION)
    assert stored is not None and stored["snapshot_origins"] == {"b": origin}
    # the last records were a's change (streamed between b's batches) and b's row 2
    assert last_per_key(kafka, "srv.a.dbo.t") == {3: {"id": 3, "v": "a3"}}
    assert stored["positions"] == {"a": at(a.max_lsn())}

    after_the_first_attempt(a, b)
    end = {"positions": {"a": at(a.max_lsn()), "b": at(b.max_lsn())}}
    normal_run(server, store, kafka, "a,b", end)
    assert alive(last_per_key(kafka, "srv.b.dbo.t")) == b.table()


def test_killed_twice_keeps_the_first_origin(server: FakeServer) -> None:
    """The second attempt is killed too: the origin stays the first attempt's."""
    a, b = setup(server)
    store = new_store("at_least_once")
    kafka: Kafka = []
    streaming_a(server, store, kafka)
    origin = at(b.max_lsn())
    crashed_run(server, store, kafka, "a,b", crash_before=("b", 1))
    b.write(("delete", 1, None))
    crashed_run(server, store, kafka, "a,b", crash_before=("b", 1))
    stored = store.get("c", PARTITION)
    assert stored is not None and stored["snapshot_origins"] == {"b": origin}
    b.write(("delete", 2, None))
    end = {"positions": {"a": at(a.max_lsn()), "b": at(b.max_lsn())}}
    normal_run(server, store, kafka, "a,b", end)
    assert alive(last_per_key(kafka, "srv.b.dbo.t")) == b.table()


def test_origin_no_longer_in_the_change_tables_falls_back_with_a_warning(
    server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The cleanup job removed b's changes past the origin: b streams from the new
    snapshot's position, with a warning naming the loss (as the core does)."""
    a, b = setup(server)
    store = new_store("at_least_once")
    kafka: Kafka = []
    streaming_a(server, store, kafka)
    crashed_run(server, store, kafka, "a,b", crash_before=("b", 1))
    after_the_first_attempt(a, b)
    b.cleanup()
    end = {"positions": {"a": at(a.max_lsn()), "b": at(b.max_lsn())}}
    with caplog.at_level(logging.WARNING, logger="tidemark.sqlserver.snapshot"):
        normal_run(server, store, kafka, "a,b", end)
    assert any(
        "b: streaming starts at this snapshot's position" in r.getMessage()
        and "CDC cleanup job" in r.getMessage()
        for r in caplog.records
    )
    assert store.get("c", PARTITION) == end


def test_a_whole_resnapshot_hands_an_added_database_over_from_its_origin(
    server: FakeServer,
) -> None:
    """``snapshot.mode=always`` after the kill: the whole connector is snapshotted again
    (the core's origin is the stored offset); b, which has no position in it, streams from
    its snapshot origin, not from the new snapshot's LSN."""
    a, b = setup(server)
    store = new_store("at_least_once")
    kafka: Kafka = []
    streaming_a(server, store, kafka)
    crashed_run(server, store, kafka, "a,b", crash_before=("b", 1))
    after_the_first_attempt(a, b)
    end = {"positions": {"a": at(a.max_lsn()), "b": at(b.max_lsn())}}
    normal_run(server, store, kafka, "a,b", end, mode="always")
    assert alive(last_per_key(kafka, "srv.b.dbo.t")) == b.table()
    assert alive(last_per_key(kafka, "srv.dbo.t", "srv.a.dbo.t")) == a.table()


def test_never_mode_streams_an_interrupted_added_database_from_its_origin(
    server: FakeServer,
) -> None:
    """Switched to ``snapshot.mode=never`` after the kill: b is not snapshotted again but
    streamed from where its interrupted snapshot started, so the rows it emitted get their
    later changes (row 1's delete)."""
    a, b = setup(server)
    store = new_store("at_least_once")
    kafka: Kafka = []
    streaming_a(server, store, kafka)
    crashed_run(server, store, kafka, "a,b", crash_before=("b", 1))
    after_the_first_attempt(a, b)
    end = {"positions": {"a": at(a.max_lsn()), "b": at(b.max_lsn())}}
    normal_run(server, store, kafka, "a,b", end, mode="never")
    downstream = last_per_key(kafka, "srv.b.dbo.t")
    assert downstream[1] is None
    assert downstream[2] == {"id": 2, "v": "b2x"}


def test_the_only_database_added_records_the_core_snapshot_origin(server: FakeServer) -> None:
    """The stored offset names only databases no longer listed and the one listed has none:
    its snapshot's rows carry the core's interrupted-snapshot offset with its origin (not
    ``{"snapshot": true}`` alone, which gave the re-snapshot an origin without an LSN)."""
    a, b = setup(server)
    store = new_store("at_least_once")
    kafka: Kafka = []
    store.put("c", PARTITION, {"positions": {"a": at(a.max_lsn())}})
    origin = at(b.max_lsn())
    crashed_run(server, store, kafka, "b", crash_before=("b", 1))
    assert store.get("c", PARTITION) == {"snapshot": True, "snapshot_origin": origin}
    after_the_first_attempt(a, b)
    normal_run(server, store, kafka, "b", at(b.max_lsn()))
    assert alive(last_per_key(kafka, "srv.dbo.t")) == b.table()


# -- offsets ---------------------------------------------------------------------------------------


def _cfg(names: str) -> Any:
    return SqlServerConnector(_raw(names, "initial")).config


A = {"commit_lsn": "00000027:00000758:0003", "change_lsn": None, "event_serial_no": None}
ORIGIN = {"commit_lsn": "00000030:00000010:0001", "change_lsn": None, "event_serial_no": None}


def test_positions_carry_the_origin_from_start_to_completion() -> None:
    from connectors.sqlserver.offsets import SqlServerPosition

    positions = DatabasePositions(_cfg("a,b"), {"positions": {"a": A}})
    assert positions.origin("b") is None
    started = positions.start_snapshot("b", SqlServerPosition.from_offset(ORIGIN))
    assert started == {"positions": {"a": A}, "snapshot_origins": {"b": ORIGIN}}
    # every offset meanwhile keeps it, the others' streaming offsets too
    moved = {**A, "change_lsn": "00000027:00000750:0001", "event_serial_no": 1}
    assert positions.advance("a", moved) == {
        "positions": {"a": moved},
        "snapshot_origins": {"b": ORIGIN},
    }
    # read back at a restart
    again = DatabasePositions(_cfg("a,b"), started)
    assert again.origin("b") == SqlServerPosition.from_offset(ORIGIN) and again.get("b") is None
    # gone once the snapshot completes
    done = positions.set("b", SqlServerPosition.from_offset(ORIGIN))
    assert done == {"positions": {"a": moved, "b": ORIGIN}}
    assert positions.offset() == done
    # a database no longer listed, or with a position, has none
    assert DatabasePositions(_cfg("a,c"), started).origin("b") is None
    assert (
        DatabasePositions(_cfg("a,b"), {**done, "snapshot_origins": {"b": A}}).origin("b") is None
    )


def test_rest_offsets_take_the_snapshot_origins() -> None:
    assert (
        validate_offset(PARTITION, {"positions": {"a": A}, "snapshot_origins": {"b": ORIGIN}})[1]
        == []
    )
    _, problems = validate_offset(
        PARTITION, {"positions": {"a": A}, "snapshot_origins": {"b": {"commit_lsn": "x"}}}
    )
    assert problems == [
        "snapshot_origins.b: not an LSN: 'x' (expected 8:8:4 hex digits, e.g. "
        "00000027:00000758:0003)"
    ]
    assert validate_offset(PARTITION, {"positions": {"a": A}, "snapshot_origins": [1]})[1] == [
        "offset.snapshot_origins must map each database to its snapshot origin"
    ]
    assert validate_offset(
        PARTITION, {"positions": {"a": A}, "snapshot_origins": {"b": {**ORIGIN, "snapshot": True}}}
    )[1] == ["unknown offset key(s) snapshot_origins.b: snapshot"]


def test_envelope_3_markers_of_an_added_database_survive_the_others_changes(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Debezium 3.x's ``source.snapshot`` markers of an added database's snapshot: ``first``
    on its first row, ``last`` on its last, ``true`` between, even when the other databases'
    changes are streamed between its batches (their position records must not end the
    snapshot's markers early); those changes are ``false``."""
    a, b = setup(server)
    store = new_store("at_least_once")
    kafka: Kafka = []
    monkeypatch.setitem(_RAW_EXTRA, "envelope.version", "3")
    streaming_a(server, store, kafka)

    def change_a(db: str, n: int) -> None:
        if db == "b" and n == 1:
            a.write(("insert", 3, "a3"))
            time.sleep(0.02)  # a is due for a poll before b's next batch

    server.before_batch = change_a
    try:
        b_end = at(b.max_lsn())
        normal_run(
            server, store, kafka, "a,b", lambda: {"positions": {"a": at(a.max_lsn()), "b": b_end}}
        )
    finally:
        server.before_batch = lambda db, n: None
    marks = [
        (t, json.loads(v)["payload"]["op"], json.loads(v)["payload"]["source"]["snapshot"])
        for t, _, v in kafka
        if v is not None and t in ("srv.b.dbo.t", "srv.a.dbo.t")
    ]
    b_rows = [m for t, op, m in marks if t == "srv.b.dbo.t"]
    assert b_rows == ["first", "true", "last"], marks
    assert [(op, m) for t, op, m in marks if t == "srv.a.dbo.t"] == [("c", "false")], marks
