"""The MariaDB side of the harness: one database per workload, loads, binlog positions, limits.

Tables (all captured by both contenders, ``database.include.list`` = the benchmark database):

* ``bench_rows`` — the measured table, the same ~200-byte shape as the PostgreSQL one (bigint
  PK, int, text, decimal, double, boolean, timestamp, date, JSON, a UUID string). Rows are a
  pure function of ``id`` (:data:`ROW_EXPR`), so every contender reads the same data.
* ``parity_types`` — one column per MariaDB type family the connectors map, a few rows
  inserted, updated and deleted: the parity check diffs every one of these events. ``INET4``
  and ``INET6`` are not in it: Debezium 3.6's MariaDB DDL parser rejects them ("no viable
  alternative at input ... inet4") and its connector stops, so there is nothing to compare;
  ``tests/integration/test_mysql_mariadb_types.py`` checks tidemark's text for them.
* ``parity_geo`` — the spatial types: POINT (as ``io.debezium.data.geometry.Point``) with
  and without an SRID, the other geometry types (``Geometry``), SRID 0 (null in both) and
  NULLs.
* ``bench_marker`` — drains only: the rows the harness commits while priming the
  contenders (see ``bench/compare/mariadb_runs.py``); never measured.

A binlog has no replication slot: a backlog drain needs every contender to hold a stored
offset *before* the backlog. ``mariadb_runs`` primes them (start, stream a marker, stop
gracefully) and then copies the stored offsets for each run.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql  # type: ignore[import-untyped]

from bench.compare.common import BenchError, short_id

TABLE = "bench_rows"
MARKER = "bench_marker"
PARITY_TABLES = ("parity_types", "parity_geo")
TABLES = (TABLE, *PARITY_TABLES)

# bench_row(i) of the PostgreSQL side, as a MariaDB select list over a bigint ``{i}``.
ROW_EXPR = (
    "{i}, {i} % 1000, md5({i}), {i} * 0.01, {i} / 7.0e0, {i} % 2 = 0, "
    "TIMESTAMP'2024-01-01 00:00:00' + INTERVAL {i} SECOND, "
    "DATE'2024-01-01' + INTERVAL ({i} % 365) DAY, "
    "JSON_OBJECT('k', {i}, 's', CONCAT('v', {i})), "
    "INSERT(INSERT(INSERT(INSERT(md5({i}), 9, 0, '-'), 14, 0, '-'), 19, 0, '-'), 24, 0, '-')"
)

SCHEMA_SQL = [
    """CREATE TABLE bench_rows (
        id bigint PRIMARY KEY, a int NOT NULL, b text, c decimal(12,2), d double,
        e boolean, ts timestamp(6) NULL, dt date, j json, u char(36))""",
    f"CREATE TABLE {MARKER} (id int AUTO_INCREMENT PRIMARY KEY, at datetime(6))",
    """CREATE TABLE parity_types (
        id int PRIMARY KEY, ti tinyint, tu tinyint unsigned, si smallint, mi mediumint,
        iu int unsigned, bi bigint, bu bigint unsigned, de decimal(10,3), fl float,
        db double, bo boolean, b1 bit(1), b4 bit(4), ch char(3), vc varchar(20), tx text,
        bl blob, bn binary(4), vb varbinary(8), da date, tm time(3), dtm datetime,
        dt6 datetime(6), tsp timestamp(3) NULL, yr year, en enum('sad','ok','happy'),
        st set('a','b','c'), js json, uu uuid, u4 uuid)""",
    """CREATE TABLE parity_geo (
        id int PRIMARY KEY, p point, ps point, pn point NOT NULL, l linestring,
        pg polygon, g geometry, mp multipoint, ml multilinestring, mpg multipolygon,
        gc geometrycollection)""",
    # Inserts k rows per transaction (k=1: single-row transactions); parallel sessions
    # call it on disjoint id ranges.
    f"""CREATE PROCEDURE load_inserts(first bigint, n bigint, k int)
        BEGIN
          DECLARE i bigint DEFAULT first;
          START TRANSACTION;
          WHILE i < first + n DO
            INSERT INTO bench_rows VALUES ({ROW_EXPR.format(i="i")});
            IF (i - first + 1) % k = 0 THEN COMMIT; START TRANSACTION; END IF;
            SET i = i + 1;
          END WHILE;
          COMMIT;
        END""",
]

PARITY_DML = [
    """INSERT INTO parity_types VALUES (
        1, -128, 255, -32768, -8388608, 4294967295, -9223372036854775808,
        18446744073709551615, -1234567.891, 1.5, -2.25e300, true, b'1', b'1010', 'ab',
        'varchar', 'text ünïcödé ✓', x'00ff10', x'0102', x'cafe', '2024-02-29',
        '-13:45:59.123', '2024-02-29 13:45:59', '1999-12-31 23:59:59.999999',
        '2024-02-29 13:45:59.100', 2024, 'happy', 'a,c', '{"a": [1, 2, {"b": null}]}',
        'fc1a4092-1b2c-11ef-8a3b-0242ac120002', '123e4567-e89b-42d3-a456-426614174000')""",
    """INSERT INTO parity_types (id, iu, tx, de, tsp, da, dt6, tm, yr) VALUES
        (2, 0, '', 0, '1970-01-01 00:00:01.000', '1970-01-01', '1970-01-01 00:00:00',
         '00:00:00', 1970)""",
    "INSERT INTO parity_types (id) VALUES (3)",
    """UPDATE parity_types SET iu = 42, tx = 'changed', js = '{"new": true}', de = -0.5,
        st = '', uu = '00000000-0000-0000-0000-000000000000' WHERE id = 1""",
    "DELETE FROM parity_types WHERE id = 2",
    """INSERT INTO parity_geo VALUES (
        1, ST_GeomFromText('POINT(1.5 -2.25)'), ST_GeomFromText('POINT(13.4 52.5)', 4326),
        ST_GeomFromText('POINT(0 0)'), ST_GeomFromText('LINESTRING(0 0, 1 1, 2 0)'),
        ST_GeomFromText('POLYGON((0 0, 4 0, 4 4, 0 0), (1 1, 2 1, 2 2, 1 1))', 3857),
        ST_GeomFromText('POINT(7 8)'), ST_GeomFromText('MULTIPOINT(1 2, 3 4)'),
        ST_GeomFromText('MULTILINESTRING((0 0, 1 1), (2 2, 3 3))'),
        ST_GeomFromText('MULTIPOLYGON(((0 0, 1 0, 1 1, 0 0)))', 4326),
        ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1), LINESTRING(0 0, 1 1))'))""",
    "INSERT INTO parity_geo (id, pn) VALUES (2, ST_GeomFromText('POINT(-180 90)', 4326))",
    """INSERT INTO parity_geo (id, pn, gc) VALUES
        (3, ST_GeomFromText('POINT(1e300 -1e-300)'),
         ST_GeomFromText('GEOMETRYCOLLECTION EMPTY'))""",
    """UPDATE parity_geo SET p = ST_GeomFromText('POINT(3 4)', 4326),
        g = ST_GeomFromText('LINESTRING(5 5, 6 6)') WHERE id = 1""",
    "DELETE FROM parity_geo WHERE id = 3",
]
# Events per parity topic in a drain: 3 c + 1 u + 1 d + 1 tombstone.
PARITY_STREAM_EVENTS = {"parity_types": 6, "parity_geo": 6}


@dataclass(frozen=True)
class BinlogPos:
    """A binlog coordinate: file and position for mysqlbinlog, GTID set for the record."""

    file: str
    pos: int
    gtids: str


def connect(env: dict[str, str], db: str | None = None) -> Any:
    return pymysql.connect(
        host=env["TIDEMARK_MYSQL_HOST"],
        port=int(env["TIDEMARK_MYSQL_PORT"]),
        user=env["TIDEMARK_MYSQL_USER"],
        password=env["TIDEMARK_MYSQL_PASSWORD"],
        database=db,
        autocommit=True,
        charset="utf8mb4",
    )


@dataclass
class MariaDatabase:
    """One benchmark database on the shared MariaDB server."""

    env: dict[str, str]
    name: str = field(default_factory=lambda: f"cmp_{short_id()}")

    def execute(self, sql: str, params: Any = None) -> None:
        conn = connect(self.env, self.name)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
        finally:
            conn.close()

    def scalar(self, sql: str, params: Any = None) -> Any:
        conn = connect(self.env, self.name)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                row = cur.fetchone()
        finally:
            conn.close()
        return None if row is None else row[0]

    def create(self) -> None:
        conn = connect(self.env)
        try:
            with conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{self.name}`")
                cur.execute(f"CREATE DATABASE `{self.name}`")
        finally:
            conn.close()
        for stmt in SCHEMA_SQL:
            self.execute(stmt)

    def apply_parity_dml(self) -> None:
        for stmt in PARITY_DML:
            self.execute(stmt)

    def position(self) -> BinlogPos:
        conn = connect(self.env)
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW BINLOG STATUS")
                row = cur.fetchone()
                cur.execute("SELECT @@gtid_binlog_pos")
                gtid = cur.fetchone()
        finally:
            conn.close()
        if row is None or gtid is None:
            raise BenchError("SHOW BINLOG STATUS returned nothing: is the binlog on?")
        return BinlogPos(str(row[0]), int(row[1]), str(gtid[0]))

    def binlog_files(self, start: BinlogPos, end: BinlogPos) -> list[str]:
        """The binlog files from ``start``'s to ``end``'s, in order (rotation may happen
        while a backlog is written)."""
        conn = connect(self.env)
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                names = [str(r[0]) for r in cur.fetchall()]
        finally:
            conn.close()
        lo, hi = _binlog_index(start.file), _binlog_index(end.file)
        return [n for n in names if lo <= _binlog_index(n) <= hi]

    def walsender_pid(self, slot: str) -> int | None:
        """A binlog dump is a thread inside mariadbd, not a process: no separate CPU figure."""
        return None

    def drop(self) -> None:
        conn = connect(self.env)
        try:
            with conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{self.name}`")
        finally:
            conn.close()


def _binlog_index(file: str) -> int:
    return int(file.rsplit(".", 1)[1])


# -- loads ----------------------------------------------------------------------------------------
def load_inserts(db: MariaDatabase, first: int, n: int, k: int, sessions: int = 8) -> float:
    """N inserts committed K per transaction from ``sessions`` parallel sessions on disjoint
    id ranges (every commit flushes the redo log, so one session would be slow; concurrent
    sessions share flushes through group commit). Returns the seconds taken."""
    chunk = -(-n // sessions)
    chunk = -(-chunk // k) * k  # whole transactions per session
    ranges = [(lo, min(chunk, first + n - lo)) for lo in range(first, first + n, chunk)]
    errors: list[BaseException] = []

    def run(lo: int, count: int) -> None:
        try:
            db.execute("CALL load_inserts(%s, %s, %s)", (lo, count, k))
        except BaseException as exc:  # reported below
            errors.append(exc)

    t0 = time.monotonic()
    threads = [threading.Thread(target=run, args=r) for r in ranges]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise BenchError(f"loading bench_rows failed: {errors[0]!r}")
    return time.monotonic() - t0


def insert_range_sql(lo: int, hi: int) -> str:
    """One INSERT of rows ``lo..hi`` (the Sequence engine's ``seq_<lo>_to_<hi>`` table)."""
    return f"INSERT INTO bench_rows SELECT {ROW_EXPR.format(i='seq')} FROM seq_{lo}_to_{hi}"


def load_table(db: MariaDatabase, m: int, chunk: int = 100_000) -> float:
    """M rows for the snapshot workload, in 100k-row transactions."""
    t0 = time.monotonic()
    for lo in range(1, m + 1, chunk):
        db.execute(insert_range_sql(lo, min(m, lo + chunk - 1)))
    db.execute("ANALYZE TABLE bench_rows")
    return time.monotonic() - t0


class MariaRows:
    """A W5 generator session: commits rows ``lo..hi`` as one transaction (autocommit, one
    statement), like the PostgreSQL side's ``PgRows``."""

    def __init__(self, env: dict[str, str], db: str) -> None:
        self.conn = connect(env, db)
        self.cur = self.conn.cursor()

    def commit_rows(self, lo: int, hi: int) -> None:
        self.cur.execute(insert_range_sql(lo, hi))

    def close(self) -> None:
        self.conn.close()


# -- the limits -----------------------------------------------------------------------------------
def mysqlbinlog_cmd(
    env: dict[str, str], files: list[str], start: BinlogPos, end: BinlogPos
) -> list[str]:
    """The decode + transport limit: the server's own client reads the same binlog range
    over the replication protocol and decodes every row image (``-v``) to /dev/null.
    Without ``--stop-never`` it asks for a non-blocking dump under server id 0, which the
    server does not register as a replica, so it cannot collide with a contender's id."""
    return [
        "mariadb-binlog",
        "--read-from-remote-server",
        f"--host={env['TIDEMARK_MYSQL_HOST']}",
        f"--port={env['TIDEMARK_MYSQL_PORT']}",
        f"--user={env['TIDEMARK_MYSQL_USER']}",
        f"--password={env['TIDEMARK_MYSQL_PASSWORD']}",
        "--verbose",
        "--base64-output=decode-rows",
        f"--start-position={start.pos}",
        f"--stop-position={end.pos}",
        *files,
    ]


def select_cmd(env: dict[str, str], db: str) -> list[str]:
    """The snapshot limit: the client streams ``SELECT *`` row by row (``--quick``) into
    /dev/null — the read a snapshot does, without any conversion or Kafka."""
    return [
        "mariadb",
        f"--host={env['TIDEMARK_MYSQL_HOST']}",
        f"--port={env['TIDEMARK_MYSQL_PORT']}",
        f"--user={env['TIDEMARK_MYSQL_USER']}",
        f"--password={env['TIDEMARK_MYSQL_PASSWORD']}",
        "--quick",
        "--batch",
        "--skip-column-names",
        "-e",
        f"SELECT * FROM `{db}`.bench_rows",
    ]


def require_tools() -> None:
    from shutil import which

    missing = [t for t in ("mariadb-binlog", "mariadb") if which(t) is None]
    if missing:
        raise BenchError(f"{', '.join(missing)} not found: apt-get install -y mariadb-client")


def copy_seed(seed: Path, run_dir: Path) -> None:
    """A primed contender's stored state (offsets, schema history) for one run: a plain file
    copy, so every run resumes from the same binlog position without writing any format."""
    import shutil

    run_dir.mkdir(parents=True, exist_ok=True)
    for f in seed.iterdir():
        if f.is_file():
            shutil.copy(f, run_dir / f.name)
