"""MySQL/MariaDB backlog drain: tidemark against the raw binlog reader and mysqlbinlog.

    .venv/bin/tidemark dev up mariadb kafka
    .venv/bin/python -m bench.mysql_bench [--rows 1000000]

The connector first records the (empty) table in its schema history and stores an offset;
then N single-row transactions are committed (16 loaders, so group commit keeps loading
fast). Each contender reads the same backlog, from the same GTID to the same end GTID:

- ``mysqlbinlog --read-from-remote-server -v --base64-output=decode-rows`` to /dev/null: the
  server's own client, decoding every row image — the limit;
- the raw ``BinLogStreamReader`` (python-mysql-replication, blocking, GTID positioned),
  decoding every row and nothing else — the ceiling for anything built on that library;
- tidemark: the MySQL connector → full Debezium envelope → JSON with schemas → Kafka
  (acks=all, idempotent), stopping once every event up to the end GTID is acknowledged.

Reported per contender: wall time, events/s, CPU-seconds of the reading process per 1M events
(user+sys, getrusage) and peak RSS; then tidemark's ratio to each.

``python -m bench.mysql_bench child <spec.json>`` is the tidemark side (and the raw reader),
in its own process so its CPU and RSS are its own.

``python -m bench.mysql_bench ab --trees OLD,NEW [--rows N] [--per-txn K] [--rounds R]``
compares source trees (e.g. one exported with ``git archive <rev> | tar -x -C /tmp/old``) on
one backlog of W1-mariadb's ``bench_rows`` (K rows per transaction), alternating the trees
R times: each drains it from the same primed offset with the harness's connector settings,
and the CPU-seconds of its process from the first event sent to the last acknowledged one
(start-up left out) are printed per run with the load average, then the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LOADERS = 16


def stack_env() -> dict[str, str]:
    from worker.dev import Stack

    return Stack().env(["mariadb", "kafka"])


def connect(env: dict[str, str], db: str | None = None) -> Any:
    import pymysql

    return pymysql.connect(
        host=env["TIDEMARK_MYSQL_HOST"],
        port=int(env["TIDEMARK_MYSQL_PORT"]),
        user=env["TIDEMARK_MYSQL_USER"],
        password=env["TIDEMARK_MYSQL_PASSWORD"],
        database=db,
        autocommit=True,
    )


def sql(env: dict[str, str], db: str | None, *statements: str) -> Any:
    conn = connect(env, db)
    try:
        with conn.cursor() as cur:
            row = None
            for s in statements:
                cur.execute(s)
                row = cur.fetchone() if cur.description else row
            return row
    finally:
        conn.close()


def connector_config(env: dict[str, str], db: str, work: Path) -> dict[str, Any]:
    server = f"bench{uuid.uuid4().hex[:6]}"
    return {
        "name": server,
        "database.server.name": server,
        "database.server.id": str(5400 + int(uuid.uuid4().int % 1000)),
        "database.hostname": env["TIDEMARK_MYSQL_HOST"],
        "database.port": env["TIDEMARK_MYSQL_PORT"],
        "database.user": env["TIDEMARK_MYSQL_USER"],
        "database.password": env["TIDEMARK_MYSQL_PASSWORD"],
        "database.include.list": db,
        "snapshot.mode": "schema_only",
        "database.history.file.filename": str(work / "history.jsonl"),
    }


def prepare(env: dict[str, str], db: str) -> None:
    sql(env, None, f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`")
    sql(
        env,
        db,
        "CREATE TABLE items (id bigint AUTO_INCREMENT PRIMARY KEY, name varchar(64) NOT NULL, "
        "price decimal(10,2), qty int, created datetime(3))",
        "CREATE PROCEDURE load_items(n INT) BEGIN DECLARE i INT DEFAULT 0; WHILE i < n DO "
        "INSERT INTO items (name, price, qty, created) VALUES (CONCAT('item ', i), i * 0.01, "
        "i % 100, NOW(3)); SET i = i + 1; END WHILE; END",
    )


def load(env: dict[str, str], db: str, rows: int) -> None:
    """N single-row transactions (autocommit inserts in a procedure), from parallel sessions."""
    per = [rows // LOADERS + (1 if i < rows % LOADERS else 0) for i in range(LOADERS)]
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            if n:
                sql(env, db, f"CALL load_items({n})")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t0 = time.monotonic()
    threads = [threading.Thread(target=run, args=(n,)) for n in per]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    print(
        f"loaded {rows} single-row transactions in {time.monotonic() - t0:.1f} s", file=sys.stderr
    )


def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
        path = f.name
    try:
        out = subprocess.run(
            [sys.executable, "-m", "bench.mysql_bench", "child", path],
            check=True,
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
    finally:
        os.unlink(path)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run_mysqlbinlog(
    env: dict[str, str], start: tuple[str, int], end: tuple[str, int]
) -> dict[str, Any]:
    files = [
        str(r[0])
        for r in _binlog_files(env)
        if _index(str(r[0])) >= _index(start[0]) and _index(str(r[0])) <= _index(end[0])
    ]
    cmd = [
        "mysqlbinlog",
        "--read-from-remote-server",
        f"--host={env['TIDEMARK_MYSQL_HOST']}",
        f"--port={env['TIDEMARK_MYSQL_PORT']}",
        f"--user={env['TIDEMARK_MYSQL_USER']}",
        f"--password={env['TIDEMARK_MYSQL_PASSWORD']}",
        "--verbose",
        "--base64-output=decode-rows",
        f"--start-position={start[1]}",
        f"--stop-position={end[1]}",
        *files,
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with open(os.devnull, "wb") as sink:
        subprocess.run(cmd, check=True, stdout=sink, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": after.ru_maxrss / 1024}


def _binlog_files(env: dict[str, str]) -> list[Any]:
    conn = connect(env)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            return list(cur.fetchall())
    finally:
        conn.close()


def _index(file: str) -> int:
    return int(file.rsplit(".", 1)[1])


def _position(env: dict[str, str]) -> tuple[str, int, str]:
    row = sql(env, None, "SHOW BINLOG STATUS")
    gtid = sql(env, None, "SELECT @@gtid_binlog_pos")
    return str(row[0]), int(row[1]), str(gtid[0])


# -- the child process ----------------------------------------------------------------------


def child(spec: dict[str, Any]) -> None:
    """``raw``: iterate BinLogStreamReader; ``prepare``: record the schema and an offset;
    ``drain``: run the connector until the end GTID is acknowledged. Prints one JSON line."""
    from cdc.engine import Engine, EngineSettings
    from cdc.offsets.file import FileOffsetStore
    from connectors.mysql import MySqlConnector
    from connectors.mysql.gtid import MariaDbGtidSet

    mode = spec["mode"]
    t0 = time.monotonic()
    events = 0
    if mode == "raw":
        events = _raw_reader(spec)
    else:
        store = FileOffsetStore(spec["offsets"])
        connector = MySqlConnector(spec["config"])
        engine = Engine(
            connector,
            connector.config,
            store,
            EngineSettings(
                producer={"bootstrap.servers": spec["kafka"]}, offset_flush_interval_ms=250
            ),
        )
        thread = threading.Thread(target=engine.run, daemon=True)
        thread.start()
        end = MariaDbGtidSet(spec.get("end_gtid") or "")
        while True:
            if not thread.is_alive():
                raise SystemExit("engine stopped early")
            if mode == "prepare":
                if engine.metrics.streaming.connected:
                    time.sleep(1.0)  # let the first offset be stored
                    break
            else:
                done = engine.writer.last_committed
                if (
                    done
                    and done.get("gtids")
                    and end.is_contained_within(MariaDbGtidSet(str(done["gtids"])))
                ):
                    break
            time.sleep(0.05)
        events = engine.metrics.records_sent
        wall = time.monotonic() - t0
        usage = resource.getrusage(resource.RUSAGE_SELF)
        engine.stop()
        thread.join(60)
        _report(wall, usage, events)
        return
    _report(time.monotonic() - t0, resource.getrusage(resource.RUSAGE_SELF), events)


def _raw_reader(spec: dict[str, Any]) -> int:
    import pymysql
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import MariadbGtidEvent, XidEvent
    from pymysqlreplication.row_event import WriteRowsEvent

    reader = BinLogStreamReader(
        connection_settings=spec["settings"],
        server_id=int(spec["server_id"]),
        blocking=True,
        is_mariadb=True,
        auto_position=spec["start_gtid"],
        only_events=[MariadbGtidEvent, WriteRowsEvent, XidEvent],
        pymysql_wrapper=pymysql.connect,
    )
    rows = 0
    last = None
    for ev in reader:
        if isinstance(ev, MariadbGtidEvent):
            last = ev.gtid
        elif isinstance(ev, WriteRowsEvent):
            rows += len(ev.rows)
        elif isinstance(ev, XidEvent) and last == spec["end_gtid"]:
            break
    reader.close()
    return rows


def _report(wall: float, usage: Any, events: int) -> None:
    print(
        json.dumps(
            {
                "wall_s": wall,
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "peak_rss_mb": usage.ru_maxrss / 1024,
                "events": events,
            }
        )
    )


# -- before/after on one backlog ------------------------------------------------------------------


def ab_child(spec: dict[str, Any]) -> None:
    """Runs inside the tree under test (its code on PYTHONPATH): drain, print one JSON line."""
    from cdc.engine import Engine, EngineSettings
    from cdc.offsets.file import FileOffsetStore
    from connectors.mysql import MySqlConnector
    from connectors.mysql.gtid import MariaDbGtidSet

    def cpu() -> float:
        u = resource.getrusage(resource.RUSAGE_SELF)
        return u.ru_utime + u.ru_stime

    connector = MySqlConnector(spec["config"])
    engine = Engine(
        connector,
        connector.config,
        FileOffsetStore(spec["offsets"]),
        EngineSettings(producer=spec["producer"], offset_flush_interval_ms=250),
    )
    thread = threading.Thread(target=engine.run, daemon=True)
    thread.start()
    end = MariaDbGtidSet(spec.get("end_gtid") or "")
    start: tuple[float, float, int] | None = None
    while thread.is_alive():
        sent = engine.metrics.records_sent
        if spec["mode"] == "prime":
            if engine.metrics.streaming.connected:
                time.sleep(1.5)  # let the first offset be stored
                break
        elif start is None and sent:
            start = (cpu(), time.monotonic(), sent)
        done = engine.writer.last_committed
        if (
            spec["mode"] == "drain"
            and done
            and done.get("gtids")
            and end.is_contained_within(MariaDbGtidSet(str(done["gtids"])))
        ):
            break
        time.sleep(0.1)
    else:
        raise SystemExit("engine stopped early")
    c1, t1, n1 = cpu(), time.monotonic(), engine.metrics.records_sent
    engine.stop()
    thread.join(60)
    if start is None:
        print("{}")
        return
    c0, t0, n0 = start
    events = n1 - n0
    print(json.dumps({"events": events, "cpu_s_per_1m": (c1 - c0) / events * 1e6,
                      "events_per_s": events / (t1 - t0)}))  # fmt: skip


def _ab_run(tree: str, spec: dict[str, Any]) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        out = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "ab-child", f.name],
            check=True,
            capture_output=True,
            text=True,
            cwd=tree,
            env={**os.environ, "PYTHONPATH": tree},
        )
    finally:
        os.unlink(f.name)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _drop_topics(bootstrap: str, part: str) -> None:
    """Delete the topics this run wrote (their names hold its unique database name)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [t for t in admin.list_topics(timeout=10).topics if part in t]
    for future in admin.delete_topics(topics).values() if topics else ():
        future.result()


def ab(argv: list[str]) -> None:
    import shutil
    import statistics

    from bench.compare.contenders import PRODUCER  # the side-by-side's producer settings
    from bench.compare.mariadb import SCHEMA_SQL

    parser = argparse.ArgumentParser(prog="bench.mysql_bench ab")
    parser.add_argument("--trees", required=True, help="comma-separated source trees")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--per-txn", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    trees = [str(Path(t).resolve()) for t in args.trees.split(",")]
    env = stack_env()
    db = f"bench_ab_{uuid.uuid4().hex[:6]}"
    producer = {"bootstrap.servers": env["TIDEMARK_KAFKA_BOOTSTRAP"], **PRODUCER}
    results: dict[str, list[float]] = {t: [] for t in trees}
    with tempfile.TemporaryDirectory() as tmp:
        seed = Path(tmp) / "seed"
        seed.mkdir()
        cfg = {
            **connector_config(env, db, seed),
            "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
            "envelope.version": 3,
            "include.schema.changes": False,
            "max.batch.size": 2048,
            "max.queue.size": 8192,
            "poll.interval.ms": 500,
        }
        sql(env, None, f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`")
        try:
            sql(env, db, SCHEMA_SQL[0], SCHEMA_SQL[4])  # bench_rows, load_inserts
            spec = {"config": cfg, "producer": producer, "offsets": str(seed / "offsets.json")}
            _ab_run(trees[-1], {**spec, "mode": "prime"})
            k, n = args.per_txn, args.rows
            per_loader = -(-n // LOADERS)
            chunk = -(-per_loader // k) * k  # whole transactions per loader
            loaders = [
                threading.Thread(
                    target=sql,
                    args=(env, db, f"CALL load_inserts({lo}, {min(chunk, 1 + n - lo)}, {k})"),
                )
                for lo in range(1, 1 + n, chunk)
            ]
            for t in loaders:
                t.start()
            for t in loaders:
                t.join()
            end_gtid = str(sql(env, None, "SELECT @@gtid_binlog_pos")[0])
            for _ in range(args.rounds):
                for tree in trees:
                    run = Path(tmp) / f"run-{uuid.uuid4().hex[:6]}"
                    shutil.copytree(seed, run)
                    run_cfg = {**cfg, "database.history.file.filename": str(run / "history.jsonl")}
                    load = os.getloadavg()[0]
                    r = _ab_run(
                        tree,
                        {**spec, "config": run_cfg, "offsets": str(run / "offsets.json"),
                         "mode": "drain", "end_gtid": end_gtid},
                    )  # fmt: skip
                    results[tree].append(r["cpu_s_per_1m"])
                    print(json.dumps({"tree": tree, "load1": round(load, 1), **r}), flush=True)
                    shutil.rmtree(run)
        finally:
            sql(env, None, f"DROP DATABASE IF EXISTS `{db}`")
            _drop_topics(env["TIDEMARK_KAFKA_BOOTSTRAP"], f".{db}.")
    for tree, cpus in results.items():
        print(f"{tree}: median {statistics.median(cpus):.1f} CPU-s per 1M ({min(cpus):.1f}-"
              f"{max(cpus):.1f}), {len(cpus)} runs of {args.rows} events")  # fmt: skip


# -- main -----------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["child"]:
        child(json.loads(Path(argv[1]).read_text()))
        return {}
    if argv[:1] == ["ab-child"]:
        ab_child(json.loads(Path(argv[1]).read_text()))
        return {}
    if argv[:1] == ["ab"]:
        ab(argv[1:])
        return {}
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    env = stack_env()
    db = f"bench_{uuid.uuid4().hex[:6]}"
    n = args.rows
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        prepare(env, db)
        cfg = connector_config(env, db, work)
        base = {
            "config": cfg,
            "kafka": env["TIDEMARK_KAFKA_BOOTSTRAP"],
            "offsets": str(work / "offsets.json"),
        }
        try:
            run_child({**base, "mode": "prepare"})
            start_file, start_pos, start_gtid = _position(env)
            load(env, db, n)
            end_file, end_pos, end_gtid = _position(env)
            settings = {
                "host": env["TIDEMARK_MYSQL_HOST"],
                "port": int(env["TIDEMARK_MYSQL_PORT"]),
                "user": env["TIDEMARK_MYSQL_USER"],
                "password": env["TIDEMARK_MYSQL_PASSWORD"],
            }
            limit = run_mysqlbinlog(env, (start_file, start_pos), (end_file, end_pos))
            raw = run_child(
                {
                    "mode": "raw",
                    "settings": settings,
                    "server_id": 6399,
                    "start_gtid": start_gtid,
                    "end_gtid": end_gtid,
                }
            )
            ours = run_child({**base, "mode": "drain", "end_gtid": end_gtid})
        finally:
            sql(env, None, f"DROP DATABASE IF EXISTS `{db}`")
    report: dict[str, Any] = {"rows": n}
    print(f"\nMariaDB backlog drain, {n} single-row transactions")
    print(f"{'contender':<22}{'wall s':>9}{'events/s':>12}{'CPU-s/1M':>11}{'peak RSS MB':>13}")
    for name, r in (("mysqlbinlog -v", limit), ("BinLogStreamReader", raw), ("tidemark", ours)):
        eps = n / r["wall_s"]
        cpu_per_m = r["cpu_s"] / n * 1e6
        report[name] = {**r, "events_per_s": eps, "cpu_s_per_1m": cpu_per_m}
        print(
            f"{name:<22}{r['wall_s']:>9.1f}{eps:>12,.0f}{cpu_per_m:>11.1f}{r['peak_rss_mb']:>13.0f}"
        )
    ours_eps = report["tidemark"]["events_per_s"]
    for name in ("mysqlbinlog -v", "BinLogStreamReader"):
        ratio = ours_eps / report[name]["events_per_s"]
        cpu = report["tidemark"]["cpu_s_per_1m"] / report[name]["cpu_s_per_1m"]
        report[f"ratio_vs_{name}"] = {"events_per_s": ratio, "cpu": cpu}
        print(f"tidemark / {name}: {ratio:.2f}x events/s, {cpu:.2f}x CPU per event")
    return report


if __name__ == "__main__":
    main()
