"""W8: an incremental snapshot (signal table, DBLog watermarks) while the connector streams.

PostgreSQL (``W8``) and MariaDB (``W8-mariadb``); the two differ only in a :class:`Side`.

The use case of Debezium's incremental snapshot: a table already holding N rows is brought
into a connector that keeps streaming the rest of the database. Per contender and run:

1. ``bench_rows`` holds N preloaded rows (loaded once, shared by every run: nothing writes it
   during the workload). The contender starts on a fresh slot without an initial snapshot
   (tidemark ``snapshot.mode=never``, Debezium ``no_data``), so it reads none of them.
2. Once it streams, a writer commits ``--w8-rate`` events/s into **another** table,
   ``bench_stream``: 10-event transactions of 5 INSERTs of new rows and 5 UPDATEs of the rows
   the same session inserted in its previous transaction (synchronous commit, 4 sessions, open
   loop like W5). Another table keeps the snapshot's completion exact (``bench_rows``' topic
   receives exactly N ``r`` events, none deduplicated away by a streamed change) and is the
   documented use: existing rows of a table added to a running connector, while every other
   table keeps flowing.
3. After a 5 s warm-up the harness inserts the ``execute-snapshot`` signal row
   (``{"data-collections": ["public.bench_rows"], "type": "incremental"}``) into
   ``bench_signal`` (Debezium's shape: ``id varchar(42) primary key, type varchar(32), data
   text``), captured by both, ``signal.data.collection=public.bench_signal`` (MariaDB:
   ``<database>.bench_signal``), source channel,
   ``incremental.snapshot.chunk.size`` the same for both (1024, Debezium's default, set
   explicitly).
4. The snapshot is done when ``bench_rows``' topic holds N records; the harness then stops
   the writer, waits for every streamed event, stops the contender and reads both topics.

Measured: snapshot rows/s = N / (broker append time of the last ``r`` minus the signal's commit),
after checking the topic holds every key 1..N once, as ``op=r``; commit → Kafka latency
(W5's method: commit-return wall clock to LogAppendTime) of the streamed events committed
between the signal and the last ``r``; CPU-s of the contender over that window (the snapshot
and the streaming together); peak RSS.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
import psycopg

from bench.compare import mariadb
from bench.compare.common import BenchError, pg_connect, pg_dsn, proc_sample
from bench.compare.contenders import Running, Sampler, start_capture, stop_capture, wait_for_count
from bench.compare.mariadb import MariaDatabase
from bench.compare.mariadb_runs import _streaming as maria_streaming
from bench.compare.mariadb_runs import label, start_maria
from bench.compare.runs import SHORT, Ctx, _order, latency_stats
from bench.compare.workloads import TABLE, TABLES, Database

SIGNAL_TABLE = "bench_signal"
STREAM_TABLE = "bench_stream"
BATCH = 10  # events per writer transaction: BATCH // 2 inserts + as many updates
SIGNAL_DDL = (
    f"CREATE TABLE {SIGNAL_TABLE} (id varchar(42) PRIMARY KEY, type varchar(32), data text)"
)
UPDATE_SQL = f"UPDATE {STREAM_TABLE} SET a = a + 1, b = md5(b) WHERE id BETWEEN %s AND %s"
PG_WRITE_SQL = (
    f"WITH u AS ({UPDATE_SQL} RETURNING id) "
    f"INSERT INTO {STREAM_TABLE} SELECT (bench_row(i)).* "
    "FROM generate_series(%s::bigint, %s::bigint) i"
)


def signal_data(table: str) -> str:
    return orjson.dumps({"data-collections": [table], "type": "incremental"}).decode()


def connector_keys(namespace: str, chunk_size: int) -> dict[str, str]:
    """The signal and chunk settings, under Debezium's names for both contenders (Debezium
    Server gets them with the ``debezium.source.`` prefix)."""
    return {
        "signal.data.collection": f"{namespace}.{SIGNAL_TABLE}",
        "signal.enabled.channels": "source",
        "incremental.snapshot.chunk.size": str(chunk_size),
    }


class WriteSession(Protocol):
    """One writer session: one transaction that updates ids ``ulo..uhi`` of ``bench_stream``
    and inserts ``lo..hi``; returns once its COMMIT has returned."""

    def write(self, ulo: int, uhi: int, lo: int, hi: int) -> None: ...

    def close(self) -> None: ...


class PgWrites:
    """One statement (a data-modifying CTE), autocommit, synchronous commit."""

    def __init__(self, env: dict[str, str], db: str) -> None:
        self.conn = psycopg.connect(pg_dsn(env, db), autocommit=True)
        self.cur = self.conn.cursor()

    def write(self, ulo: int, uhi: int, lo: int, hi: int) -> None:
        self.cur.execute(PG_WRITE_SQL, (ulo, uhi, lo, hi), prepare=True)

    def close(self) -> None:
        self.conn.close()


class MariaWrites:
    """UPDATE and INSERT (from the Sequence engine) in one explicit transaction; every
    commit flushes the redo log (the stack's ``innodb_flush_log_at_trx_commit=1``)."""

    def __init__(self, env: dict[str, str], db: str) -> None:
        self.conn = mariadb.connect(env, db)
        self.cur = self.conn.cursor()

    def write(self, ulo: int, uhi: int, lo: int, hi: int) -> None:
        self.conn.begin()
        self.cur.execute(UPDATE_SQL, (ulo, uhi))
        self.cur.execute(
            f"INSERT INTO {STREAM_TABLE} SELECT {mariadb.ROW_EXPR.format(i='seq')} "
            f"FROM seq_{lo}_to_{hi}"
        )
        self.conn.commit()

    def close(self) -> None:
        self.conn.close()


class StreamWriter:
    """Open-loop writer into ``bench_stream`` until stopped: transaction ``t`` is due at
    ``t / txn_rate`` s and runs on session ``t % connections``; it inserts the next
    ``BATCH // 2`` ids and updates the ids that session inserted in its previous transaction
    (committed: a session is sequential). ``commits[(op, id)]`` is the wall-clock time at
    which the COMMIT of that event's transaction returned."""

    def __init__(
        self,
        open_session: Callable[[], WriteSession],
        first_id: int,
        rate: int,
        connections: int = 4,
    ) -> None:
        self.open_session, self.first_id = open_session, first_id
        self.txn_rate = rate / BATCH
        self.connections = connections
        self.commits: dict[tuple[str, int], float] = {}
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.started = 0.0
        self.stopped = 0.0

    def start(self) -> None:
        self.started = time.perf_counter() + 0.2
        self._threads = [
            threading.Thread(target=self._session, args=(j,), daemon=True)
            for j in range(self.connections)
        ]
        for th in self._threads:
            th.start()

    def halt(self) -> None:
        """Stop scheduling transactions (the running ones still commit)."""
        self._stop.set()

    def stop(self) -> None:
        self.halt()
        for th in self._threads:
            th.join(30)
        self.stopped = time.perf_counter()
        if self.errors:
            raise BenchError(f"stream writer failed: {self.errors[0]!r}")

    @property
    def events(self) -> int:
        return len(self.commits)

    def achieved_rate(self) -> float:
        return self.events / max(self.stopped - self.started, 1e-3)

    def _session(self, j: int) -> None:
        half = BATCH // 2
        try:
            session = self.open_session()
        except BaseException as exc:
            self.errors.append(exc)
            return
        try:
            t = j
            prev: tuple[int, int] | None = None
            while not self._stop.is_set():
                delay = self.started + t / self.txn_rate - time.perf_counter()
                if delay > 0 and self._stop.wait(delay):
                    return
                lo = self.first_id + t * half
                hi = lo + half - 1
                ulo, uhi = prev if prev is not None else (0, -1)
                session.write(ulo, uhi, lo, hi)
                done = time.time()
                for i in range(lo, hi + 1):
                    self.commits[("c", i)] = done
                for i in range(ulo, uhi + 1):
                    self.commits[("u", i)] = done
                prev = (lo, hi)
                t += self.connections
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            session.close()


@dataclass
class Side:
    """What W8 needs from one database.

    ``start(contender, run, prefix, extra)`` starts a contender without reading any rows;
    ``wait_streaming(running, id)`` returns once it streams, with the number of records it
    put on ``bench_stream``'s topic (and ids it used there)."""

    label: str
    namespace: str  # PostgreSQL schema / MariaDB database: the middle of topic names
    database: str
    tables: tuple[str, ...]  # every table with a topic
    start: Callable[[str, int, str, dict[str, str]], Running]
    wait_streaming: Callable[[Running, int], int]
    open_session: Callable[[], WriteSession]
    execute: Callable[[str, Any], None]

    def topics(self, prefix: str) -> list[str]:
        return [f"{prefix}.{self.namespace}.{t}" for t in self.tables]


def pg_side(ctx: Ctx, db: Database, n: int) -> Side:
    """A fresh PostgreSQL database with ``n`` rows; a slot per contender and run."""
    db.create(["tm", "dbz"])
    t0 = time.monotonic()
    with pg_connect(db.env, db.name) as conn:
        conn.execute(SIGNAL_DDL)
        conn.execute(f"CREATE TABLE {STREAM_TABLE} (LIKE {TABLE} INCLUDING ALL)")
        for pub in ("tm", "dbz"):
            conn.execute(
                f"ALTER PUBLICATION {db.publication(pub)} ADD TABLE {STREAM_TABLE}, {SIGNAL_TABLE}"
            )
        conn.execute(
            f"INSERT INTO {TABLE} SELECT (bench_row(i)).* FROM generate_series(1, %s) i", (n,)
        )
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")
    ctx.log(f"   loaded {n:,} rows in {time.monotonic() - t0:.1f} s")

    def start(name: str, run: int, prefix: str, extra: dict[str, str]) -> Running:
        slot = db.slot_name(SHORT[name], run)
        db.create_slot(slot)
        return start_capture(
            name,
            ctx.opts,
            db,
            slot=slot,
            topic_prefix=prefix,
            snapshot_mode="no_data",
            tag=f"W8-run{run}",
            extra=extra,
        )

    def wait_streaming(running: Running, ping_id: int) -> int:
        db.execute(f"INSERT INTO {STREAM_TABLE} SELECT (bench_row(%s)).*", (ping_id,))
        wait_for_count(ctx.kafka, running, running.topic(STREAM_TABLE), 1, 180, poll=0.2)
        return 1

    return Side(
        label="W8",
        namespace="public",
        database=db.name,
        tables=(*TABLES, STREAM_TABLE, SIGNAL_TABLE),
        start=start,
        wait_streaming=wait_streaming,
        open_session=lambda: PgWrites(ctx.opts.env, db.name),
        execute=db.execute,
    )


def maria_side(ctx: Ctx, db: MariaDatabase, n: int) -> Side:
    """A fresh MariaDB database with ``n`` rows; contenders start schema-only (no slots: a
    contender streams from the position it reads at start, checked with marker rows)."""
    db.create()
    db.execute(SIGNAL_DDL)
    db.execute(f"CREATE TABLE {STREAM_TABLE} LIKE {TABLE}")
    secs = mariadb.load_table(db, n)
    ctx.log(f"   loaded {n:,} rows in {secs:.1f} s")
    name = label("W8")

    def start(contender: str, run: int, prefix: str, extra: dict[str, str]) -> Running:
        return start_maria(
            contender,
            ctx.opts,
            db,
            topic_prefix=prefix,
            snapshot_mode="no_data",
            tag=f"{name}-run{run}",
            extra=extra,
        )

    return Side(
        label=name,
        namespace=db.name,
        database=db.name,
        tables=(*mariadb.TABLES, mariadb.MARKER, STREAM_TABLE, SIGNAL_TABLE),
        start=start,
        wait_streaming=lambda running, _id: maria_streaming(ctx, db, running),
        open_session=lambda: MariaWrites(ctx.opts.env, db.name),
        execute=db.execute,
    )


def _check_reads(ctx: Ctx, topic: str, n: int) -> None:
    """Every key 1..n exactly once, every record a snapshot read (``op=r``)."""
    seen = bytearray(n + 1)
    for m in ctx.kafka.scan(topic, 0, n, timeout=120):
        value = orjson.loads(m.value())
        payload = value.get("payload", value)
        i = int(orjson.loads(m.key())["payload"]["id"])
        if payload.get("op") != "r" or not 1 <= i <= n or seen[i]:
            raise BenchError(f"{topic}: offset {m.offset()} is op={payload.get('op')} id={i}")
        seen[i] = 1
    if sum(seen) != n:
        raise BenchError(f"{topic}: {sum(seen)} distinct keys read, expected {n}")


def _latencies(
    ctx: Ctx, topic: str, skip: int, commits: dict[tuple[str, int], float], lo: float, hi: float
) -> list[float]:
    """ms from commit to broker append of the streamed events committed in [lo, hi]."""
    lat: list[float] = []
    for m in ctx.kafka.scan(topic, skip, len(commits), timeout=120):
        value = m.value()
        if value is None:
            continue
        op = orjson.loads(value)["payload"]["op"]
        i = int(orjson.loads(m.key())["payload"]["id"])
        at = commits[(op, i)]
        if lo <= at <= hi:
            lat.append(m.timestamp()[1] - at * 1000.0)
    lat.sort()
    return lat


def measure_incremental(ctx: Ctx, side: Side, running: Running, run: int, next_id: int) -> int:
    """One contender, already started: wait until it streams, write, signal, wait for N
    reads, measure. Stops the contender; returns the next free ``bench_stream`` id."""
    n, rows_topic, stream_topic = ctx.w8_rows, running.topic(TABLE), running.topic(STREAM_TABLE)
    writer: StreamWriter | None = None
    try:
        used = side.wait_streaming(running, next_id)
        writer = StreamWriter(side.open_session, next_id + used, ctx.w8_rate, ctx.w5_connections)
        with Sampler(running.proc.pid) as sampler:
            writer.start()
            time.sleep(ctx.w8_warmup_seconds)
            before = proc_sample(running.proc.pid)
            # taken before the signal's INSERT returns: its commit may reach the connector,
            # and the first read the broker, before the call returns here
            t_signal = time.time()
            side.execute(
                f"INSERT INTO {SIGNAL_TABLE} VALUES (%s, 'execute-snapshot', %s)",
                (f"w8-{uuid.uuid4().hex}", signal_data(f"{side.namespace}.{TABLE}")),
            )
            _first, _count, done = wait_for_count(
                ctx.kafka, running, rows_topic, n, n / 100 + 300, poll=0.1
            )
            writer.stop()
            wait_for_count(ctx.kafka, running, stream_topic, used + writer.events, 300, poll=0.2)
    finally:
        if writer is not None:
            writer.halt()
        stop_capture(running)
    t_first_r = ctx.kafka.timestamp_at(rows_topic, 0)
    t_last_r = ctx.kafka.timestamp_at(rows_topic, n - 1)
    _check_reads(ctx, rows_topic, n)
    lat = _latencies(ctx, stream_topic, used, writer.commits, t_signal, t_last_r)
    assert before is not None
    snapshot_s = max(t_last_r - t_signal, 1e-3)
    cpu = done.cpu_s - before.cpu_s
    res: dict[str, Any] = {
        "snapshot_rows": n,
        "chunk_size": ctx.w8_chunk,
        "snapshot_s": snapshot_s,
        "first_read_s": t_first_r - t_signal,
        "snapshot_rows_per_s": n / snapshot_s,
        "streamed_in_window": len(lat),
        "target_rate": ctx.w8_rate,
        "achieved_rate": writer.achieved_rate(),
        **latency_stats(lat),
        "snapshot_cpu_s": cpu,
        "cpu_pct": 100 * cpu / snapshot_s,
        "peak_rss_mb": max([done.hwm_mb, *(s.hwm_mb for s in sampler.samples)]),
        "rss_end_mb": done.rss_mb,
    }
    if res["achieved_rate"] < 0.95 * ctx.w8_rate:
        ctx.log(f"   note: the writer reached only {res['achieved_rate']:,.0f} events/s")
    ctx.latencies.setdefault(side.label, {})[f"{running.name}#{run}"] = lat
    ctx.record(side.label, running.name, run, res)
    return next_id + used + writer.events


def describe(ctx: Ctx) -> str:
    return (
        f"incremental snapshot of {ctx.w8_rows:,} rows (chunks of {ctx.w8_chunk}) while "
        f"streaming {ctx.w8_rate:,} events/s into another table"
    )


def _runs(ctx: Ctx, side: Side) -> None:
    """Per run and contender (order alternating): fresh topics, start, measure, delete."""
    next_id = 1
    for run in ctx.run_numbers():
        for c in _order(ctx.capture(), run):
            prefix = f"{SHORT[c]}_{side.database[4:]}_{run}"
            topics = side.topics(prefix)
            ctx.kafka.create_topics(topics)
            try:
                running = side.start(c, run, prefix, connector_keys(side.namespace, ctx.w8_chunk))
                next_id = measure_incremental(ctx, side, running, run, next_id)
            finally:
                # A run's topics go as soon as it is measured: a 1M-row run writes ~4 GB.
                ctx.kafka.delete_topics(topics)


def incremental_workload(ctx: Ctx) -> None:
    """W8 on PostgreSQL: the table is loaded once and read by every run."""
    db = Database(ctx.opts.env)
    ctx.databases.append(db.name)
    ctx.log(f"\n== W8: {describe(ctx)} (database {db.name})")
    try:
        _runs(ctx, pg_side(ctx, db, ctx.w8_rows))
    finally:
        db.drop()


def mariadb_workload(ctx: Ctx) -> None:
    """W8 on MariaDB (``W8-mariadb``)."""
    db = MariaDatabase(ctx.opts.env)
    ctx.maria_databases.append(db.name)
    ctx.log(f"\n== {label('W8')}: MariaDB {describe(ctx)} (database {db.name})")
    try:
        _runs(ctx, maria_side(ctx, db, ctx.w8_rows))
    finally:
        db.drop()
