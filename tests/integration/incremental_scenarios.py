"""The incremental snapshot acceptance scenarios (AC-72…AC-77), run on PostgreSQL and MariaDB
by ``test_incremental_snapshot_*.py``: the database differs only in a few SQL spellings
(:class:`Db`). A chunk reader :class:`Spy` records every chunk query and lets a scenario act
on the database at exact points of the watermark algorithm (after the maximum key is read,
after the open watermark, after the chunk query). A :class:`Db` with ``read_only`` set runs
the same scenarios with ``read.only=true``: signals through the REST channel, no watermark
rows (the open-watermark point is then the start of the chunk's consistent read)."""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdc.offsets.memory import MemoryOffsetStore
from cdc.spi import ChunkReader, Table, TableId
from cdc.spi.chunks import Key, ReadWindow
from cdc.testing.kafka_reader import Event, read_topic
from tests.integration.engine_runner import RunningConnector

Hook = Callable[[], None]
SIGNAL_DDL = "CREATE TABLE dbz_signal (id varchar(64), type varchar(32), data varchar(2048))"


@dataclass
class Spy:
    """Wraps a connector's chunk reader; each hook runs once, in order, one per point."""

    inner: ChunkReader
    queries: list[tuple[Key | None, Key]] = field(default_factory=list)
    after_max: list[Hook] = field(default_factory=list)
    after_open: list[Hook] = field(default_factory=list)
    after_read: list[Hook] = field(default_factory=list)
    #: every watermark row written: (signal id, kind)
    watermarks: list[tuple[str, str]] = field(default_factory=list)

    @property
    def commit_visibility_lag(self) -> bool:
        """The reader's (PostgreSQL: reads are placed and checked by the core)."""
        return bool(getattr(self.inner, "commit_visibility_lag", False))

    def tables(self) -> list[TableId]:
        return self.inner.tables()

    def describe(self, table_id: TableId) -> Table | None:
        return self.inner.describe(table_id)

    def max_key(
        self, table: Table, key_columns: Sequence[str], condition: str | None
    ) -> Key | None:
        key = self.inner.max_key(table, key_columns, condition)
        _run(self.after_max)
        return key

    def read_chunk(
        self,
        table: Table,
        key_columns: Sequence[str],
        after: Key | None,
        upto: Key,
        limit: int,
        condition: str | None,
    ) -> list[Sequence[Any]]:
        self.queries.append((after, upto))
        rows = self.inner.read_chunk(table, key_columns, after, upto, limit, condition)
        _run(self.after_read)
        return rows

    def estimate_rows(self, table: Table) -> int | None:
        return self.inner.estimate_rows(table)

    def write_watermark(self, signal_table: TableId, signal_id: str, kind: str) -> None:
        self.watermarks.append((signal_id, kind))
        self.inner.write_watermark(signal_table, signal_id, kind)
        if kind == "snapshot-window-open":
            _run(self.after_open)

    def begin_chunk_read(self) -> None:
        self.inner.begin_chunk_read()  # type: ignore[attr-defined]
        _run(self.after_open)

    def end_chunk_read(self) -> ReadWindow:
        return self.inner.end_chunk_read()  # type: ignore[attr-defined,no-any-return]

    def close(self) -> None:
        self.inner.close()


def other_channels(db: Db, spies: list[Spy]) -> None:
    """Signals through the Kafka signal topic (keyed by topic.prefix) and through the REST
    channel's receiver reach an idle connector (its wake-up row makes the stream report an
    event); pause-snapshot holds the next chunk until resume-snapshot; a blocking snapshot
    reads every chunk at once."""
    from confluent_kafka import Producer

    from cdc.signals import model, registry

    db.sql("CREATE TABLE ch80 (id int PRIMARY KEY, v varchar(20))")
    db.fill("ch80", range(1, 5), lambda i: f"'v{i}'")
    cfg = db.config(
        "ch80",
        snapshot_mode=db.no_data,
        incremental_snapshot_chunk_size=1,
        signal_enabled_channels="source,kafka,rest",
        signal_kafka_bootstrap_servers=db.kafka,
    )
    server, topic = cfg["database.server.name"], db.topic(cfg, "ch80")
    data = {"data-collections": [db.q("ch80")]}

    def rest(kind: str, payload: dict[str, Any] | None = None) -> None:
        signal = model.parse(uuid.uuid4().hex, kind, payload, "rest")
        assert registry.deliver(cfg["name"], signal)

    def reads() -> list[Any]:
        return [k for op, k in summary(read_topic(db.kafka, topic, timeout=3)) if op == "r"]

    with db.h.running(cfg) as run:
        db.h.wait_streaming(run)
        producer = Producer({"bootstrap.servers": db.kafka})
        message = {"type": "execute-snapshot", "data": data}
        producer.produce(f"{server}-signal", json.dumps(message).encode(), server.encode())
        producer.produce(f"{server}-signal", json.dumps(message).encode(), b"another-server")
        producer.flush(10)
        assert sorted(k for _, k in summary(read(db, topic, 4))) == [1, 2, 3, 4]
        spies[-1].after_read.append(lambda: rest("pause-snapshot"))
        wait_until(lambda: run.engine.coordinator.incremental is not None, run)
        rest("execute-snapshot", data)
        inc = run.engine.coordinator.incremental
        assert inc is not None
        wait_until(lambda: inc.paused and inc.chunk_id is None, run)
        time.sleep(1)
        assert reads() == [1, 2, 3, 4, 1]  # paused after the first chunk
        rest("resume-snapshot")
        wait_until(lambda: len(reads()) == 8, run)
        assert not inc.active and run.engine.metrics.notices == []
        rest("execute-snapshot", {**data, "type": "blocking"})  # no watermarks, stream waits
        wait_until(lambda: len(reads()) == 12, run)
        assert not inc.active and run.engine.metrics.notices == []


def postgres_db(postgres: Any, kafka: str, read_only: dict[str, Any] | None = None) -> Iterator[Db]:
    """A :class:`Db` on a database of its own on the test PostgreSQL (fixture body)."""
    from tests.integration.pg_harness import PgHarness

    with PgHarness(postgres, kafka, f"tmi_{uuid.uuid4().hex[:8]}") as harness:
        harness.sql(SIGNAL_DDL)
        yield Db(
            harness,
            schema="public",
            key=str,
            no_data="never",
            upsert="INSERT INTO w77 VALUES ({k}, 1) ON CONFLICT (id) DO UPDATE SET n = w77.n + 1",
            read_only=read_only,
        )


def mariadb_db(
    mariadb: Any, kafka: str, tmp: Any, read_only: dict[str, Any] | None = None
) -> Iterator[Db]:
    """A :class:`Db` on a database of its own on the test MariaDB (fixture body)."""
    from tests.integration.mysql_harness import MySqlHarness

    harness = MySqlHarness(mariadb, kafka, f"tmi_{uuid.uuid4().hex[:8]}", tmp)
    harness.sql(SIGNAL_DDL)
    yield Db(
        harness,
        schema=harness.dbname,
        key=int,
        no_data="schema_only",
        upsert="INSERT INTO w77 VALUES ({k}, 1) ON DUPLICATE KEY UPDATE n = n + 1",
        read_only=read_only,
    )
    harness.drop()


def spy_on(monkeypatch: Any, connector_class: Any) -> list[Spy]:
    """Every chunk reader ``connector_class`` makes from now on, wrapped in a :class:`Spy`."""
    made: list[Spy] = []
    original = connector_class.chunk_reader

    def spied(self: Any) -> Spy:
        made.append(Spy(original(self)))
        return made[-1]

    monkeypatch.setattr(connector_class, "chunk_reader", spied)
    return made


class Scenarios:
    """The scenarios as tests; a test module subclasses it with ``db`` and ``spies``
    fixtures for its database."""

    def test_new_table_snapshot_by_signal_in_chunks_while_streaming(
        self, db: Db, spies: list[Spy]
    ) -> None:
        new_table_in_chunks(db, spies)

    def test_k1_to_k6_figure(self, db: Db, spies: list[Spy]) -> None:
        k1_to_k6(db, spies)

    def test_resume_after_stop_mid_snapshot(self, db: Db, spies: list[Spy]) -> None:
        resume_after_stop(db, spies)

    def test_table_without_primary_key(self, db: Db, spies: list[Spy]) -> None:
        table_without_key(db, spies)

    def test_concurrent_writers_end_equal_to_the_table(self, db: Db, spies: list[Spy]) -> None:
        concurrent_writers(db, spies)


class ReadOnlyScenarios:
    """The scenarios with ``read.only=true`` (``db.read_only`` set): the same events, and
    nothing written to the database by the snapshot."""

    def test_k1_to_k6_figure(self, db: Db, spies: list[Spy]) -> None:
        k1_to_k6(db, spies)
        nothing_written(db, spies)

    def test_concurrent_writers_end_equal_to_the_table(self, db: Db, spies: list[Spy]) -> None:
        concurrent_writers(db, spies)
        nothing_written(db, spies)

    def test_resume_after_stop_mid_snapshot(self, db: Db, spies: list[Spy]) -> None:
        resume_after_stop(db, spies)
        nothing_written(db, spies)

    def test_changes_the_read_saw_keep_their_reads(self, db: Db, spies: list[Spy]) -> None:
        changes_the_read_saw(db, spies)
        nothing_written(db, spies)


def changes_the_read_saw(db: Db, spies: list[Spy]) -> None:
    """Read-only windows tell older from newer changes by the read's own snapshot: a change
    committed before the chunk's read but streamed after it (here: while the streaming
    thread reads the maximum key) is older than the read and keeps the row's read event; one
    committed after the read drops it."""
    db.sql(
        "CREATE TABLE b78 (id int PRIMARY KEY, v varchar(20))",
        "INSERT INTO b78 VALUES (1, 'a'), (2, 'b')",
    )
    cfg = db.config("b78", snapshot_mode=db.no_data)
    topic = db.topic(cfg, "b78")
    with db.h.running(cfg) as run:
        db.h.wait_streaming(run)
        spy = spies[-1]
        spy.after_max.append(lambda: db.sql("UPDATE b78 SET v = 'b2' WHERE id = 2"))
        spy.after_read.append(lambda: db.sql("UPDATE b78 SET v = 'a2' WHERE id = 1"))
        db.signal(["b78"])
        events = read(db, topic, 3)
    assert summary(events) == [("u", 2), ("u", 1), ("r", 2)]
    assert events[-1].after == {"id": 2, "v": "b2"}


def nothing_written(db: Db, spies: list[Spy]) -> None:
    """No watermark row was written, the signal table is empty, and every chunk was read."""
    assert spies and all(spy.queries for spy in spies)
    assert [w for spy in spies for w in spy.watermarks] == []
    assert db.h.sql("SELECT count(*) FROM dbz_signal")[0][0] == 0


def _run(hooks: list[Hook]) -> None:
    if hooks:
        hooks.pop(0)()


@dataclass
class Db:
    """A harness (``PgHarness``/``MySqlHarness``) and the spellings that differ."""

    h: Any
    #: the container tables are named in: ``public`` or the MariaDB database
    schema: str
    #: a key value as the connector's chunk reader returns it (PostgreSQL: text)
    key: Callable[[int], Any]
    #: the snapshot.mode that snapshots no rows
    no_data: str
    #: increments n of row {k}, inserting it when missing
    upsert: str
    #: set: read-only watermarks (``read.only=true``), with these extra settings (a heartbeat
    #: so that signals and window closes come promptly on an idle database; the channel,
    #: ``rest`` unless ``signal_enabled_channels`` says ``kafka``)
    read_only: dict[str, Any] | None = None
    #: the connector and the topic prefix the last :meth:`config` named (signals go there)
    name: str = ""
    server: str = ""

    @property
    def kafka(self) -> str:
        return str(self.h.kafka)

    def sql(self, *statements: str, params: Any = None) -> None:
        self.h.sql(*statements, params=params)

    def q(self, table: str) -> str:
        return f"{self.schema}.{table}"

    def config(self, *tables: str, **extra: Any) -> dict[str, Any]:
        include = ",".join(self.q(t) for t in ("dbz_signal", *tables))
        if self.read_only is not None:
            extra = {**extra, "read_only": "true", "signal_enabled_channels": "rest"}
            extra.update(self.read_only, signal_kafka_bootstrap_servers=self.kafka)
        cfg: dict[str, Any] = self.h.config(
            table_include_list=include, signal_data_collection=self.q("dbz_signal"), **extra
        )
        self.name, self.server = cfg["name"], cfg["database.server.name"]
        return cfg

    def topic(self, cfg: dict[str, Any], table: str) -> str:
        return f"{cfg['database.server.name']}.{self.schema}.{table}"

    def fill(self, table: str, ids: range, value: Callable[[int], str]) -> None:
        rows = ", ".join(f"({i}, {value(i)})" for i in ids)
        self.sql(f"INSERT INTO {table} VALUES {rows}")

    def _signal_elsewhere(self, kind: str, data: str) -> None:
        """Through the Kafka signal topic (keyed by the topic prefix) or the REST channel's
        receiver, whichever the read-only settings name."""
        from cdc.signals import model, registry

        assert self.read_only is not None
        if self.read_only.get("signal_enabled_channels") == "kafka":
            from confluent_kafka import Producer

            producer = Producer({"bootstrap.servers": self.kafka})
            message = json.dumps({"type": kind, "data": json.loads(data)})
            producer.produce(f"{self.server}-signal", message.encode(), self.server.encode())
            assert producer.flush(10) == 0
            return
        signal = model.parse(uuid.uuid4().hex, kind, data, "rest")
        assert registry.deliver(self.name, signal), f"{self.name} takes no REST signals"

    def signal(self, tables: list[str], kind: str = "execute-snapshot") -> None:
        data = json.dumps({"data-collections": [self.q(t) for t in tables]})
        if self.read_only is not None:  # nothing may be written: another channel
            self._signal_elsewhere(kind, data)
            return
        self.sql(
            "INSERT INTO dbz_signal VALUES (%s, %s, %s)", params=(uuid.uuid4().hex, kind, data)
        )


def summary(events: list[Event], field_name: str = "id") -> list[tuple[str, Any]]:
    """``(op, key)`` of each event, tombstones left out."""
    return [(e.op or "", (e.key or {}).get(field_name)) for e in events if e.value is not None]


def wait_until(predicate: Callable[[], bool], run: RunningConnector, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if run.errors:
            raise run.errors[0]
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def read(db: Db, topic: str, count: int, timeout: float = 60) -> list[Event]:
    return read_topic(db.kafka, topic, min_count=count, timeout=timeout)


def nothing_in(db: Db, topic: str) -> bool:
    return read_topic(db.kafka, topic, timeout=2, settle=1) == []


# -- the scenarios ---------------------------------------------------------------------------


def new_table_in_chunks(db: Db, spies: list[Spy]) -> None:
    """AC-72, AC-73: a table added to the include list has no events until the signal; then
    its rows arrive as reads in chunks of 2 (3 chunk queries for 5 rows, each bounded by the
    maximum key read at the start) while another table keeps streaming; a row inserted
    above that maximum after the start arrives only as a create."""
    db.sql(
        "CREATE TABLE cust72 (id int PRIMARY KEY, name varchar(20))",
        "CREATE TABLE ord72 (id int PRIMARY KEY, v varchar(20))",
        "INSERT INTO cust72 VALUES (1, 'a'), (2, 'b')",
    )
    db.fill("ord72", range(1, 6), lambda i: f"'o{i}'")
    store = MemoryOffsetStore()
    cfg = db.config("cust72", incremental_snapshot_chunk_size=2)
    with db.h.running(cfg, store) as run:
        db.h.wait_streaming(run)
    cfg["table.include.list"] += "," + db.q("ord72")
    notifications = f"{cfg['database.server.name']}.notifications"
    cfg.update({"notification.enabled.channels": "sink,log"})
    cfg["notification.sink.topic.name"] = notifications
    orders, customers = db.topic(cfg, "ord72"), db.topic(cfg, "cust72")
    with db.h.running(cfg, store) as run:
        db.h.wait_streaming(run)
        db.sql("INSERT INTO cust72 VALUES (3, 'c')")
        read(db, customers, 3)
        assert nothing_in(db, orders)  # no snapshot of the new table without a signal
        spy = spies[-1]
        spy.after_max.append(lambda: db.sql("INSERT INTO ord72 VALUES (6, 'late')"))
        spy.after_read.append(lambda: db.sql("INSERT INTO cust72 VALUES (4, 'during')"))
        db.signal(["ord72"])
        events = read(db, orders, 6)
        streamed = read(db, customers, 4)
    assert sorted(k for op, k in summary(events) if op == "r") == [1, 2, 3, 4, 5]
    assert [op for op, k in summary(events) if k == 6] == ["c"]
    k = db.key
    assert spy.queries == [(None, (k(5),)), ((k(2),), (k(5),)), ((k(4),), (k(5),))]
    assert summary(streamed)[-1] == ("c", 4)
    first_read = next(e for e in events if e.op == "r")
    assert first_read.value["source"]["table"] == "ord72"
    assert first_read.value["source"]["snapshot"] is True
    assert run.engine.metrics.notices == []
    snap = run.engine.metrics.snapshot
    assert snap.completed and snap.rows_scanned[db.q("ord72")] == 5
    notes = [e.value for e in read(db, notifications, 6)]
    assert [n["type"] for n in notes] == [
        "STARTED",
        "IN_PROGRESS",
        "IN_PROGRESS",
        "IN_PROGRESS",
        "TABLE_SCAN_COMPLETED",
        "COMPLETED",
    ]
    assert notes[0]["aggregate_type"] == "Incremental Snapshot"
    assert json.loads(notes[0]["additional_data"]["data_collections"]) == [db.q("ord72")]
    assert notes[4]["additional_data"]["total_rows_scanned"] == "5"
    assert notes[4]["additional_data"]["status"] == "SUCCEEDED"


def k1_to_k6(db: Db, spies: list[Spy]) -> None:
    """AC-74, the seed's figure 2: K2, K3, K4 exist; before the window K1 is inserted, K2
    updated, K3 deleted; the chunk reads K1, K2, K4; inside the window K4 is deleted and K5
    (below the maximum key) and K6 inserted; at the close only K1 and K2 are read events."""
    db.sql(
        "CREATE TABLE k74 (id int PRIMARY KEY, v varchar(20))",
        "INSERT INTO k74 VALUES (20, 'K2'), (30, 'K3'), (40, 'K4')",
    )
    cfg = db.config("k74", snapshot_mode=db.no_data)
    topic = db.topic(cfg, "k74")
    with db.h.running(cfg) as run:
        db.h.wait_streaming(run)
        db.sql(
            "INSERT INTO k74 VALUES (10, 'K1')",
            "UPDATE k74 SET v = 'K2 updated' WHERE id = 20",
            "DELETE FROM k74 WHERE id = 30",
        )
        read(db, topic, 4)
        spies[-1].after_read.append(
            lambda: db.sql(
                "DELETE FROM k74 WHERE id = 40",
                "INSERT INTO k74 VALUES (35, 'K5')",
                "INSERT INTO k74 VALUES (60, 'K6')",
            )
        )
        db.signal(["k74"])
        events = read(db, topic, 10)  # 8 events and the tombstones of the 2 deletes
    assert [i for i, e in enumerate(events) if e.value is None] == [3, 5]  # after each d
    assert summary(events) == [
        ("c", 10),
        ("u", 20),
        ("d", 30),
        ("d", 40),
        ("c", 35),
        ("c", 60),
        ("r", 10),
        ("r", 20),
    ]
    assert events[-1].after == {"id": 20, "v": "K2 updated"}


def resume_after_stop(db: Db, spies: list[Spy]) -> None:
    """AC-75: stopped inside the third chunk, the connector resumes after the last read
    Kafka acknowledged (the offset held the tables, the maximum and the last key): the
    first chunk query after the restart starts there, every row is read, none twice."""
    db.sql("CREATE TABLE r75 (id int PRIMARY KEY, v varchar(20))")
    db.fill("r75", range(1, 11), lambda i: f"'v{i}'")
    store = MemoryOffsetStore()
    cfg = db.config("r75", snapshot_mode=db.no_data, incremental_snapshot_chunk_size=3)
    topic = db.topic(cfg, "r75")
    with db.h.running(cfg, store) as run:
        db.h.wait_streaming(run)
        spy = spies[-1]
        # the first two chunks are delivered; the stop comes with the third chunk's query
        spy.after_read += [lambda: None, lambda: None, run.engine.stop]
        db.signal(["r75"])
        wait_until(lambda: not run.thread.is_alive(), run)
    stored = store.get(cfg["name"], {"server": cfg["database.server.name"]})
    assert stored is not None
    first = read(db, topic, 6)
    last_sent = max(k for op, k in summary(first) if op == "r")
    k = db.key
    assert json.loads(stored["incremental_snapshot_maximum_key"]) == [k(10)]
    assert json.loads(stored["incremental_snapshot_primary_key"]) == [k(last_sent)]
    with db.h.running(cfg, store) as run:
        db.h.wait_streaming(run)
        events = read(db, topic, 10)
    reads = [key for op, key in summary(events) if op == "r"]
    assert sorted(reads) == list(range(1, 11)), (reads, stored)
    assert spies[0].queries[0] == (None, (k(10),))
    assert spies[-1].queries[0] == ((k(last_sent),), (k(10),))


def table_without_key(db: Db, spies: list[Spy]) -> None:
    """AC-76: a table without a primary key is rejected with a notice that says why, and
    streaming goes on; with message.key.columns it is snapshotted by that key."""
    db.sql(
        "CREATE TABLE nopk76 (a int NOT NULL, b varchar(20))",
        "CREATE TABLE side76 (id int PRIMARY KEY)",
        "INSERT INTO nopk76 VALUES (1, 'x'), (2, 'y'), (3, 'z')",
    )
    cfg = db.config("nopk76", "side76", snapshot_mode=db.no_data)
    with db.h.running(cfg) as run:
        db.h.wait_streaming(run)
        db.signal(["nopk76"])
        db.sql("INSERT INTO side76 VALUES (1)")
        read(db, db.topic(cfg, "side76"), 1)
        wait_until(lambda: bool(run.engine.metrics.notices), run)
        assert "no primary key" in run.engine.metrics.notices[0]
    assert nothing_in(db, db.topic(cfg, "nopk76"))
    keyed = db.config("nopk76", snapshot_mode=db.no_data, message_key_columns=db.q("nopk76:a"))
    with db.h.running(keyed) as run:
        db.h.wait_streaming(run)
        db.signal(["nopk76"])
        events = read(db, db.topic(keyed, "nopk76"), 3)
    assert summary(events, "a") == [("r", 1), ("r", 2), ("r", 3)]


def concurrent_writers(db: Db, spies: list[Spy]) -> None:
    """AC-77: rows updated, deleted and inserted by four writers while their chunks are read:
    after the snapshot, the last event of every key equals the table."""
    db.sql("CREATE TABLE w77 (id int PRIMARY KEY, n int)")
    db.fill("w77", range(1, 3001), lambda i: "0")
    cfg = db.config("w77", snapshot_mode=db.no_data, incremental_snapshot_chunk_size=100)
    topic = db.topic(cfg, "w77")
    stop = threading.Event()

    def writer(seed: int) -> None:
        rnd = random.Random(seed)
        while not stop.is_set():
            k = rnd.randint(1, 3200)
            statement = (
                db.upsert.format(k=k) if rnd.random() < 0.8 else f"DELETE FROM w77 WHERE id = {k}"
            )
            with contextlib.suppress(Exception):  # a deadlock between writers: skip that one
                db.sql(statement)

    with db.h.running(cfg) as run:
        db.h.wait_streaming(run)
        threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(4)]
        for thread in threads:
            thread.start()
        db.signal(["w77"])
        wait_until(lambda: run.engine.coordinator.incremental is not None, run)
        inc = run.engine.coordinator.incremental
        assert inc is not None
        wait_until(lambda: inc.chunks_read > 0 and not inc.active, run, timeout=120)
        stop.set()
        for thread in threads:
            thread.join()
        expected = dict(db.h.sql("SELECT id, n FROM w77"))
        events = read_topic(db.kafka, topic, min_count=len(expected), timeout=90, settle=3)
    last: dict[int, Any] = {}
    for e in events:
        if e.key is not None:
            last[e.key["id"]] = None if e.value is None else e.after
    assert {k: v["n"] for k, v in last.items() if v is not None} == expected
    assert inc.chunks_read >= 30
    assert sum(1 for e in events if e.op == "r") > 0
