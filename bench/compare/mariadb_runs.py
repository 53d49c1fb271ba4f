"""The MariaDB workloads: W1/W1b (backlog drains), W4 (initial snapshot), W5 (latency).

Contenders: tidemark's MySQL/MariaDB connector (``connectors/mysql``) in its own process,
Debezium Server with Debezium's own ``MariaDbConnector``, and the limits — ``mariadb-binlog
--read-from-remote-server`` for drains, ``mariadb --quick -e 'SELECT *'`` for snapshots.
Every capture contender gets its own ``database.server.id`` (a replica id the server uses to
tell binlog readers apart: two readers with one id disconnect each other).

**Drains without slots.** PostgreSQL keeps a backlog for a slot; a binlog reader instead
resumes from a position it stored. So a drain *primes* the contenders first: both start with
no data snapshot (schema only), the harness commits marker rows into ``bench_marker`` until
both have streamed one, commits a last marker, waits until both have it in Kafka and stops
them gracefully — each then holds a stored offset at that last marker (verified from the
files). Only then is the backlog committed. Each run starts from a plain *copy* of the
primed offset and schema history files, so every run and both contenders resume at the same
position — the same role the PostgreSQL path's slots created at one LSN play. Debezium's
offset file is Java-serialised and is only copied and read, never written. The topic prefix
is part of the stored offset, so a contender keeps one prefix for the whole workload and the
harness deletes its topics (and waits until they are gone) between runs.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path
from typing import Any

import orjson

from bench.compare import debezium, parity
from bench.compare.common import BenchError
from bench.compare.contenders import (
    PRODUCER,
    PROFILES,
    Options,
    Running,
    limit_row,
    measure_drain,
    spawn_tidemark,
    stop_capture,
    wait4_child,
)
from bench.compare.mariadb import (
    MARKER,
    PARITY_STREAM_EVENTS,
    TABLES,
    BinlogPos,
    MariaDatabase,
    MariaRows,
    copy_seed,
    load_inserts,
    load_table,
    mysqlbinlog_cmd,
    select_cmd,
)
from bench.compare.runs import SHORT, Ctx, LiveTarget, _order, describe, measure_latency
from bench.compare.runs import _parity as check_parity

SUFFIX = "-mariadb"
LIMIT_DRAIN = "mysqlbinlog"
LIMIT_SNAPSHOT = "SELECT"

# Replica ids far from the server's (1) and from the random 5400-6400 Debezium picks when
# none is configured; a random base keeps two harnesses on one server apart.
_SERVER_IDS: Iterator[int] = count(random.randrange(700_000, 900_000, 1000))


def label(workload: str) -> str:
    """How a MariaDB workload is named in results.csv, the tables and the plots."""
    return workload + SUFFIX


def _topics(prefix: str, db: MariaDatabase) -> list[str]:
    return [f"{prefix}.{db.name}.{t}" for t in (*TABLES, MARKER)]


def start_maria(
    name: str,
    opts: Options,
    db: MariaDatabase,
    *,
    topic_prefix: str,
    snapshot_mode: str,
    tag: str,
    extra: dict[str, str] | None = None,
) -> Running:
    """Start tidemark or Debezium Server on the MariaDB database. The offsets and the schema
    history live in the run directory (``opts.workdir/tag/name``), so a primed state can be
    copied there beforehand. ``snapshot_mode`` uses Debezium 3.x names (``no_data``,
    ``initial``); tidemark follows the 1.2 contract, where ``no_data`` is ``schema_only``.
    ``extra``: more connector keys for both (W8's signal table and chunk size)."""
    run_dir = opts.workdir / tag / name
    run_dir.mkdir(parents=True, exist_ok=True)
    server_id = next(_SERVER_IDS)
    if name == "tidemark":
        cfg = _tidemark_config(opts, db, topic_prefix, snapshot_mode, server_id, run_dir)
        cfg.update(extra or {})
        settings = {
            "connector": "mysql",
            "offsets_file": str(run_dir / "offsets.json"),
            "producer": {"bootstrap.servers": opts.env["TIDEMARK_KAFKA_BOOTSTRAP"], **PRODUCER},
            "offset_flush_interval_ms": opts.offset_flush_ms,
        }
        proc, started, log_path = spawn_tidemark(cfg, settings, run_dir)
        return Running(name, proc, started, log_path, topic_prefix, "", namespace=db.name)
    if name == "debezium":
        assert opts.java is not None and opts.debezium_home is not None
        props = debezium.mariadb_properties(
            env=opts.env,
            db=db.name,
            server_id=server_id,
            history_file=run_dir / "history.dat",
            topic_prefix=topic_prefix,
            snapshot_mode=snapshot_mode,
            queue=PROFILES[opts.profile],
            producer=PRODUCER,
            offsets_file=run_dir / "offsets.dat",
            offset_flush_ms=opts.offset_flush_ms,
            http_port=debezium.new_http_port(),
        )
        props.update({f"debezium.source.{k}": v for k, v in (extra or {}).items()})
        started = time.time()
        handle = debezium.start(opts.debezium_home, opts.java, run_dir, props, opts.jvm_opts)
        return Running(
            name, handle.proc, started, handle.log_path, topic_prefix, "", handle, db.name
        )
    raise BenchError(f"unknown contender {name}")


def _tidemark_config(
    opts: Options,
    db: MariaDatabase,
    topic_prefix: str,
    snapshot_mode: str,
    server_id: int,
    run_dir: Path,
) -> dict[str, Any]:
    return {
        "name": f"bench-{topic_prefix}",
        "topic.prefix": topic_prefix,
        "database.hostname": opts.env["TIDEMARK_MYSQL_HOST"],
        "database.port": opts.env["TIDEMARK_MYSQL_PORT"],
        "database.user": opts.env["TIDEMARK_MYSQL_USER"],
        "database.password": opts.env["TIDEMARK_MYSQL_PASSWORD"],
        "database.server.id": server_id,
        "database.include.list": db.name,
        "snapshot.mode": "schema_only" if snapshot_mode == "no_data" else snapshot_mode,
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(run_dir / "history.jsonl"),
        "include.schema.changes": False,
        # Debezium 3.x captures MariaDB with its own connector; under envelope 3 the class
        # makes tidemark write its source.connector and source struct name.
        "connector.class": debezium.MARIADB_CONNECTOR,
        "envelope.version": opts.envelope_version,
        **PROFILES[opts.profile],
    }


# -- priming ---------------------------------------------------------------------------------------
_GTIDS = re.compile(rb'"gtids"\s*:\s*"([^"]*)"')


def stored_gtids(state: Path) -> str | None:
    """The ``gtids`` of the offset a contender stored (tidemark's JSON file, or the JSON
    text Connect keeps inside Debezium's Java-serialised offset file: read, never written)."""
    for name in ("offsets.json", "offsets.dat"):
        path = state / name
        if path.exists():
            found = _GTIDS.findall(path.read_bytes())
            return found[-1].decode() if found else None
    return None


def _seq(gtids: str, domain_server: str) -> int:
    """Sequence number of ``domain-server`` in a MariaDB GTID list (-1 when absent)."""
    for part in gtids.split(","):
        d, s, n = part.strip().split("-")
        if f"{d}-{s}" == domain_server:
            return int(n)
    return -1


def _commit_marker(db: MariaDatabase) -> str:
    """Commit one marker row; returns its GTID (``domain-server-seq``)."""
    from bench.compare.mariadb import connect

    conn = connect(db.env, db.name)
    try:
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {MARKER} (at) VALUES (NOW(6))")
            cur.execute("SELECT @@last_gtid")
            row = cur.fetchone()
    finally:
        conn.close()
    return str(row[0])


def _last_marker_id(ctx: Ctx, running: Running) -> int:
    topic = running.topic(MARKER)
    end = ctx.kafka.end_offset(topic)
    if end == 0:
        return 0
    (msg,) = ctx.kafka.read(topic, end - 1, 1)
    return int(orjson.loads(msg.key())["payload"]["id"])


def _wait_markers(ctx: Ctx, db: MariaDatabase, runs: list[Running], timeout: float) -> str:
    """Markers every second until every contender streamed one (a marker committed before a
    contender read its start position is never captured), then a last one that all must
    deliver. Returns the last marker's GTID."""
    deadline = time.monotonic() + timeout

    def alive() -> None:
        for r in runs:
            if r.proc.poll() is not None:
                raise BenchError(f"{r.name} exited while priming:\n{r.log_tail()}")
        if time.monotonic() > deadline:
            raise BenchError(
                "priming: no marker streamed after "
                f"{timeout:.0f} s:\n" + "\n".join(f"{r.name}: {r.log_tail(10)}" for r in runs)
            )

    while not all(_last_marker_id(ctx, r) for r in runs):
        alive()
        _commit_marker(db)
        time.sleep(1.0)
    gtid = _commit_marker(db)
    last = int(db.scalar(f"SELECT max(id) FROM {MARKER}"))
    while not all(_last_marker_id(ctx, r) >= last for r in runs):
        alive()
        time.sleep(0.2)
    return gtid


def prime(ctx: Ctx, db: MariaDatabase, workload: str) -> dict[str, Path]:
    """Start every capture contender, stream the markers, stop them gracefully and check
    that each stored an offset at the last marker. Returns the primed state per contender."""
    running: list[Running] = []
    topics: list[str] = []
    tag = f"{workload}-prime"
    try:
        for c in ctx.capture():
            prefix = f"{SHORT[c]}_{db.name[4:]}"
            topics += _topics(prefix, db)
            ctx.kafka.create_topics(_topics(prefix, db))
            running.append(
                start_maria(c, ctx.opts, db, topic_prefix=prefix, snapshot_mode="no_data", tag=tag)
            )
        gtid = _wait_markers(ctx, db, running, 300)
    finally:
        for r in running:
            stop_capture(r)
        ctx.kafka.delete_topics(topics)
    ctx.kafka.wait_gone(topics)
    seeds = {r.name: ctx.opts.workdir / tag / r.name for r in running}
    domain_server, seq = gtid.rsplit("-", 1)
    for name, state in seeds.items():
        stored = stored_gtids(state)
        # A stored position names the start of the transaction to resume in, so the one
        # just before the last marker is as good as the marker itself.
        if stored is None or _seq(stored, domain_server) < int(seq) - 1:
            raise BenchError(
                f"priming: {name} stored no offset at the last marker {gtid} (found "
                f"{stored!r} in {state}); it would not start before the backlog"
            )
    ctx.log(
        "   primed at marker "
        + gtid
        + ": "
        + ", ".join(f"{n} offset gtids {stored_gtids(s)}" for n, s in seeds.items())
    )
    return seeds


# -- W1, W1b ---------------------------------------------------------------------------------------
def drain_workload(ctx: Ctx, workload: str, k: int) -> None:
    """N inserts, ``k`` per transaction, committed after every contender was primed."""
    name = label(workload)
    db = MariaDatabase(ctx.opts.env)
    ctx.maria_databases.append(db.name)
    created: list[str] = []
    ctx.log(f"\n== {name}: MariaDB {describe(workload, ctx)} (database {db.name})")
    try:
        db.create()
        seeds = prime(ctx, db, name) if ctx.capture() else {}
        start = db.position()
        db.apply_parity_dml()
        secs = load_inserts(db, 1, ctx.rows, k)
        ctx.log(f"   loaded {ctx.rows} inserts, {k} per transaction, in {secs:.1f} s")
        end = db.position()
        expected = {"bench_rows": ctx.rows, **PARITY_STREAM_EVENTS}
        for run in ctx.run_numbers():
            prefixes: dict[str, str] = {}
            for c in _order(ctx.contenders, run):
                if c == "limit":
                    ctx.record(name, LIMIT_DRAIN, run, _mysqlbinlog(ctx, db, start, end))
                    continue
                prefix = prefixes[c] = f"{SHORT[c]}_{db.name[4:]}"
                created += _topics(prefix, db)
                ctx.kafka.create_topics(_topics(prefix, db))
                tag = f"{name}-run{run}"
                copy_seed(seeds[c], ctx.opts.workdir / tag / c)
                ctx.record(name, c, run, _drain_one(ctx, db, c, prefix, tag, expected))
            if run == ctx.run_numbers()[0]:
                check_parity(ctx, name, expected, prefixes, namespace=db.name)
            ctx.kafka.delete_topics(created)
            ctx.kafka.wait_gone(created)
            created.clear()
    finally:
        ctx.kafka.delete_topics(created)
        db.drop()


def _drain_one(
    ctx: Ctx, db: MariaDatabase, c: str, prefix: str, tag: str, expected: dict[str, int]
) -> dict[str, Any]:
    running = start_maria(c, ctx.opts, db, topic_prefix=prefix, snapshot_mode="no_data", tag=tag)
    try:
        res = measure_drain(ctx.opts, running, db, expected, ctx.rows / 200 + 300)
    finally:
        stop_capture(running)
    stray = ctx.kafka.end_offset(running.topic(MARKER))
    if stray:
        raise BenchError(
            f"{c} re-emitted {stray} priming marker(s): it resumed before the primed position"
        )
    return res


def _mysqlbinlog(ctx: Ctx, db: MariaDatabase, start: BinlogPos, end: BinlogPos) -> dict[str, Any]:
    cmd = mysqlbinlog_cmd(ctx.opts.env, db.binlog_files(start, end), start, end)
    with open("/dev/null", "wb") as null:
        r = wait4_child(cmd, stdout=null)
    return limit_row(r, ctx.rows)


# -- W4 --------------------------------------------------------------------------------------------
def snapshot_workload(ctx: Ctx, workload: str = "W4") -> None:
    """Initial snapshot of M rows; each run starts with no stored state."""
    name = label(workload)
    db = MariaDatabase(ctx.opts.env)
    ctx.maria_databases.append(db.name)
    created: list[str] = []
    m = ctx.snapshot_rows
    ctx.log(f"\n== {name}: MariaDB {describe(workload, ctx)} (database {db.name})")
    try:
        db.create()
        db.apply_parity_dml()
        ctx.log(f"   loaded {m} rows in {load_table(db, m):.1f} s")
        expected = {t: int(db.scalar(f"SELECT count(*) FROM {t}")) for t in TABLES}
        for run in ctx.run_numbers():
            prefixes: dict[str, str] = {}
            for c in _order(ctx.contenders, run):
                if c == "limit":
                    with open("/dev/null", "wb") as null:
                        r = wait4_child(select_cmd(ctx.opts.env, db.name), stdout=null)
                    ctx.record(name, LIMIT_SNAPSHOT, run, limit_row(r, m))
                    continue
                prefix = prefixes[c] = f"{SHORT[c]}_{db.name[4:]}_{run}"
                created += _topics(prefix, db)
                ctx.kafka.create_topics(_topics(prefix, db))
                running = start_maria(
                    c,
                    ctx.opts,
                    db,
                    topic_prefix=prefix,
                    snapshot_mode="initial",
                    tag=f"{name}-run{run}",
                )
                try:
                    res = measure_drain(ctx.opts, running, db, expected, m / 200 + 300)
                finally:
                    stop_capture(running)
                ctx.record(name, c, run, res)
            if run == ctx.run_numbers()[0]:
                check_parity(
                    ctx,
                    name,
                    expected,
                    prefixes,
                    namespace=db.name,
                    also_ignored=parity.SNAPSHOT_POSITION,
                    by_key=True,
                )
            ctx.kafka.delete_topics(created)
            created.clear()
    finally:
        ctx.kafka.delete_topics(created)
        db.drop()


# -- W5 --------------------------------------------------------------------------------------------
def latency_workload(ctx: Ctx, workload: str = "W5") -> None:
    """Commit -> Kafka latency at the W5 rate; each contender starts fresh (schema only)."""
    name = label(workload)
    db = MariaDatabase(ctx.opts.env)
    ctx.maria_databases.append(db.name)
    created: list[str] = []
    ctx.log(f"\n== {name}: MariaDB {describe(workload, ctx)} (database {db.name})")
    target = LiveTarget(
        wait_streaming=lambda running, _id: _streaming(ctx, db, running),
        open_session=lambda: MariaRows(ctx.opts.env, db.name),
    )
    try:
        db.create()
        next_id = 1
        for run in ctx.run_numbers():
            for c in _order(ctx.capture(), run):
                prefix = f"{SHORT[c]}_{db.name[4:]}_{run}"
                created += _topics(prefix, db)
                ctx.kafka.create_topics(_topics(prefix, db))
                running = start_maria(
                    c,
                    ctx.opts,
                    db,
                    topic_prefix=prefix,
                    snapshot_mode="no_data",
                    tag=f"{name}-run{run}",
                )
                next_id = measure_latency(ctx, name, running, run, next_id, target)
                ctx.kafka.delete_topics(created)
                created.clear()
    finally:
        ctx.kafka.delete_topics(created)
        db.drop()


def _streaming(ctx: Ctx, db: MariaDatabase, running: Running) -> int:
    """Markers until the contender streams one (see :func:`_wait_markers`); uses no
    ``bench_rows`` id."""
    _wait_markers(ctx, db, [running], 180)
    return 0


WORKLOADS: dict[str, Callable[[Ctx], None]] = {
    "W1": lambda ctx: drain_workload(ctx, "W1", 1),
    "W1b": lambda ctx: drain_workload(ctx, "W1b", 100),
    "W5": latency_workload,
    "W4": snapshot_workload,
}
