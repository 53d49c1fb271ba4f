"""The data every contender reads: one database per workload, the same rows for everyone.

Tables (all in one publication per contender):

* ``bench_rows`` — the measured table, ~200 bytes a row, shaped like Sequin's
  ``benchmark_records`` (int PK, text, numeric, timestamptz, jsonb, ...) so figures can be put
  next to the published anchors. Rows are a pure function of ``id`` (``bench_row(id)``), so a
  run can be regenerated exactly.
* ``parity_types`` — one column per PostgreSQL type family tidemark maps (REPLICA IDENTITY
  FULL), a few rows inserted, updated and deleted: the parity check diffs every one of these
  events, so a type-mapping difference fails the run even when ``bench_rows`` does not use it.
* ``parity_toast`` — an update that leaves TOASTed columns unchanged (REPLICA IDENTITY
  DEFAULT), i.e. the ``__debezium_unavailable_value`` placeholder path: text, int[], date[]
  and hstore.
* ``parity_part`` — a partitioned table (list, its ``us`` partition hash-partitioned again),
  with a row moved between partitions; published via its root.

Drains (W1, W1b, W2) create every contender's slot at the same LSN *before* the load, so each
drains an identical backlog. Live workloads (W5, W7) create a slot just before starting the
contender, so it sees only the load generated while it runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bench.compare.common import BenchError, pg_connect, short_id

TABLE = "bench_rows"
PARITY_TABLES = ("parity_types", "parity_toast", "parity_part")
TABLES = (TABLE, *PARITY_TABLES)

SCHEMA_SQL = [
    """CREATE TABLE bench_rows (
        id bigint PRIMARY KEY, a int NOT NULL, b text, c numeric(12,2), d double precision,
        e boolean, ts timestamptz, dt date, j jsonb, u uuid)""",
    """CREATE FUNCTION bench_row(i bigint) RETURNS bench_rows LANGUAGE sql IMMUTABLE AS $$
        SELECT i, (i % 1000)::int, md5(i::text), (i * 0.01)::numeric(12,2), i / 7.0::float8,
               i % 2 = 0, timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second',
               date '2024-01-01' + (i % 365)::int,
               jsonb_build_object('k', i, 's', 'v' || i), md5(i::text)::uuid $$""",
    "CREATE EXTENSION IF NOT EXISTS hstore",
    "CREATE EXTENSION IF NOT EXISTS ltree",
    "CREATE EXTENSION IF NOT EXISTS citext",
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
    "CREATE DOMAIN posint AS int CHECK (VALUE > 0)",
    """CREATE TABLE parity_types (
        id int PRIMARY KEY, i2 smallint, i4 int, i8 bigint, f4 real, f8 double precision,
        n numeric, n73 numeric(7,3), m money, bo boolean, ch char(3), vc varchar(20), tx text,
        ci citext, by bytea, da date, ti time, ti3 time(3), ttz timetz, tsp timestamp,
        tsp3 timestamp(3), tstz timestamptz, iv interval, uu uuid, js json, jb jsonb, x xml,
        ip inet, cidr_ cidr, mac macaddr, ia int[], ta text[], pt point, mo mood, b1 bit(1),
        b4 bit(4), vb varbit(8), r4 int4range, rtz tstzrange, hs hstore, lt ltree, po posint,
        n38 numeric(38,0), n30 numeric(30,2), n40 numeric(40,10), bx box, ls lseg,
        vbx varbit, ia2 int[][], dar date[], tsv tsvector)""",
    "ALTER TABLE parity_types REPLICA IDENTITY FULL",
    """CREATE TABLE parity_toast (id int PRIMARY KEY, n int, big text, ia int[], dd date[],
        hs hstore)""",
    """ALTER TABLE parity_toast ALTER big SET STORAGE EXTERNAL, ALTER ia SET STORAGE EXTERNAL,
        ALTER dd SET STORAGE EXTERNAL, ALTER hs SET STORAGE EXTERNAL""",
    """CREATE TABLE parity_part (id int, region text, v text, PRIMARY KEY (id, region))
        PARTITION BY LIST (region)""",
    "CREATE TABLE parity_part_eu PARTITION OF parity_part FOR VALUES IN ('eu')",
    """CREATE TABLE parity_part_us PARTITION OF parity_part FOR VALUES IN ('us')
        PARTITION BY HASH (id)""",
    """CREATE TABLE parity_part_us0 PARTITION OF parity_part_us
        FOR VALUES WITH (MODULUS 2, REMAINDER 0)""",
    """CREATE TABLE parity_part_us1 PARTITION OF parity_part_us
        FOR VALUES WITH (MODULUS 2, REMAINDER 1)""",
]

PARITY_DML = [
    """INSERT INTO parity_types VALUES (
        1, -32768, 2147483647, -9223372036854775808, 1.5, -2.25e300, 12345.678901234,
        -1234.567, 12.34, true, 'ab', 'varchar', 'text ünïcödé ✓', 'MiXeD', '\\x00ff10',
        '2024-02-29', '13:45:59.123456', '01:02:03.456', '10:11:12+05:30',
        '2024-02-29 13:45:59.654321', '1999-12-31 23:59:59.999', '2024-02-29 13:45:59.1+02',
        '1 year 2 mons 3 days 04:05:06.789', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
        '{"a": [1, 2, {"b": null}]}', '{"z": 1, "a": "x"}', '<r><c>1</c></r>',
        '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', '{1,2,NULL,4}',
        '{"a","b c",NULL}', '(1.5,-2)', 'happy', B'1', B'1010', B'101', '[1,10)',
        '[2024-01-01 00:00:00+00,2024-12-31 00:00:00+00)', 'a=>1, b=>NULL', 'top.mid.leaf', 7)
    """,
    """INSERT INTO parity_types (id, i4, tx, n, tstz, da) VALUES
        (2, 0, '', 0, '1970-01-01 00:00:00+00', '1970-01-01')""",
    "INSERT INTO parity_types (id) VALUES (3)",
    # Values at the edges (issues 12.6, 20.3): ±infinity dates and timestamps, years beyond
    # 9999 and BC, -0 and non-finite doubles, a 1000-digit numeric. Numeric NaN/±Infinity
    # are not here: Debezium's default decimal.handling.mode=precise stops the task on them.
    """INSERT INTO parity_types (id, f4, f8, n, da, tsp, tsp3, tstz) VALUES
        (4, '-0', 'NaN', repeat('9', 1000)::numeric, 'infinity', '-infinity', 'infinity',
         '-infinity'),
        (5, 'Infinity', '-Infinity', ('-' || repeat('1', 600) || '.' || repeat('2', 400))::numeric,
         '10000-01-01', '0044-03-15 12:00:00 BC', '12345-06-07 08:09:10.5',
         '0001-01-01 00:00:00+00 BC'),
        (6, NULL, NULL, NULL, '-infinity', 'infinity', '-infinity', 'infinity')""",
    # Issue 25: numerics wider than 28 digits, geometric columns, huge intervals, money at its
    # limits, empty bit varying, 2-D arrays, BC dates in arrays, tsvector.
    """INSERT INTO parity_types (id, n38, n30, n40, bx, ls, iv, m, vbx, ia2, dar, tsv, da,
        tsp, tstz) VALUES
        (7, repeat('9', 38)::numeric, (repeat('9', 28) || '.99')::numeric,
         ('-' || repeat('9', 30) || '.' || repeat('9', 10))::numeric, '((1,2),(3,4))',
         '[(0,0),(1,1)]', '178000000 years', '92233720368547758.07', B'', '{{1,2},{3,4}}',
         '{2024-02-29,0044-03-15 BC,10000-01-01}', 'a:1 fat:2 cats:3,4',
         '0044-03-15 BC', '0001-01-01 00:00:00 BC', '10000-06-07 08:09:10+00'),
        (8, 1, 0.01, 1.5, '((0,0),(1,1))', '[(1,1),(2,2)]', '-178000000 years',
         '-92233720368547758.08', B'1', '{{5},{6}}', '{}', '', '10000-01-01',
         '20000-01-01 00:00:00', '0100-01-01 00:00:00+00 BC')""",
    """UPDATE parity_types SET i4 = 42, tx = 'changed', jb = '{"new": true}',
        ia = '{}', n = -0.5, bx = '((9,9),(8,8))', vbx = B'1010' WHERE id = 1""",
    "DELETE FROM parity_types WHERE id = 2",
    # 20 kB of incompressible text is stored out of line (TOAST); the update leaves it alone.
    "INSERT INTO parity_toast SELECT 1, 1, string_agg(md5(g::text), ''), "
    "(SELECT array_agg(i) FROM generate_series(1, 5000) i), "
    "(SELECT array_agg(DATE '2000-01-01' + i) FROM generate_series(1, 5000) i), "
    "(SELECT hstore(array_agg(md5(i::text)), array_agg(md5(i::text))) "
    "FROM generate_series(1, 400) i) FROM generate_series(1, 640) g",
    "UPDATE parity_toast SET n = 2 WHERE id = 1",
    "INSERT INTO parity_part VALUES (1, 'eu', 'a'), (2, 'eu', 'b'), (3, 'us', 'c'), (4, 'us', 'd')",
    "UPDATE parity_part SET v = 'b2' WHERE id = 2",
    "UPDATE parity_part SET region = 'us', v = 'moved' WHERE id = 1",  # eu -> us (hash leaf)
    "DELETE FROM parity_part WHERE id = 4",
]
# Events per parity topic in a drain: parity_types 8 c + 1 u + 1 d + 1 tombstone;
# parity_part 4 c + 1 u + (d, tombstone, c) for the move + (d, tombstone).
PARITY_STREAM_EVENTS = {"parity_types": 11, "parity_toast": 2, "parity_part": 10}


@dataclass
class Database:
    """One benchmark database with one publication per contender."""

    env: dict[str, str]
    name: str = field(default_factory=lambda: f"cmp_{short_id()}")
    slots: list[str] = field(default_factory=list)

    def publication(self, contender: str) -> str:
        return f"pub_{contender}"

    def create(self, contenders: list[str]) -> None:
        with pg_connect(self.env, "postgres") as c:
            c.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            c.execute(f'CREATE DATABASE "{self.name}"')
        with pg_connect(self.env, self.name) as c:
            for stmt in SCHEMA_SQL:
                c.execute(stmt)
            for name in contenders:
                c.execute(
                    f"CREATE PUBLICATION {self.publication(name)} FOR TABLE "
                    f"{', '.join(TABLES)} WITH (publish_via_partition_root = true)"
                )

    def create_slot(self, name: str) -> None:
        with pg_connect(self.env, self.name) as c:
            c.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))
        self.slots.append(name)

    def slot_name(self, contender: str, run: int) -> str:
        return f"{self.name}_{contender}_{run}"

    def execute(self, sql: str, params: Any = None) -> None:
        with pg_connect(self.env, self.name) as c:
            c.execute(sql, params)

    def scalar(self, sql: str, params: Any = None) -> Any:
        with pg_connect(self.env, self.name) as c:
            row = c.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def current_lsn(self) -> int:
        return int(self.scalar("SELECT pg_current_wal_lsn() - '0/0'"))

    def walsender_pid(self, slot: str) -> int | None:
        pid = self.scalar(
            "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", (slot,)
        )
        return int(pid) if pid else None

    def apply_parity_dml(self) -> None:
        with pg_connect(self.env, self.name) as c:
            for stmt in PARITY_DML:
                c.execute(stmt)

    def drop(self) -> None:
        """Drop the slots (waiting briefly for contenders to let go of them) and the database."""
        with pg_connect(self.env, "postgres") as c:
            for slot in self.slots:
                for _ in range(50):
                    row = c.execute(
                        "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
                    ).fetchone()
                    if row is None:
                        break
                    if not row[0]:
                        c.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                        break
                    time.sleep(0.2)
            # Slots a contender created itself (snapshot workloads) follow the same naming.
            for (slot,) in c.execute(
                "SELECT slot_name FROM pg_replication_slots WHERE database = %s AND NOT active",
                (self.name,),
            ).fetchall():
                c.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
            c.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


# -- loads ----------------------------------------------------------------------------------------
LOAD_PROCEDURES = [
    """CREATE PROCEDURE load_inserts(first bigint, n bigint, k int) LANGUAGE plpgsql AS $$
        BEGIN
          FOR i IN first..first + n - 1 LOOP
            INSERT INTO bench_rows SELECT (bench_row(i)).*;
            IF (i - first + 1) % k = 0 THEN COMMIT; END IF;
          END LOOP;
          COMMIT;
        END $$""",
    # 40/40/20 insert/update/delete in groups of five operations; group g inserts two new rows,
    # updates the two inserted by the group before, and deletes one preloaded row.
    """CREATE PROCEDURE load_mixed(preloaded bigint, groups bigint, k int) LANGUAGE plpgsql AS $$
        DECLARE ops bigint := 0; base bigint; prev bigint;
        BEGIN
          FOR g IN 0..groups - 1 LOOP
            base := preloaded + 2 * g;
            prev := CASE WHEN g = 0 THEN base ELSE base - 2 END;
            INSERT INTO bench_rows SELECT (bench_row(base + 1)).*;
            INSERT INTO bench_rows SELECT (bench_row(base + 2)).*;
            UPDATE bench_rows SET a = a + 1, b = md5(b), ts = ts + interval '1 hour'
              WHERE id = prev + 1;
            UPDATE bench_rows SET a = a + 1, b = md5(b), ts = ts + interval '1 hour'
              WHERE id = prev + 2;
            DELETE FROM bench_rows WHERE id = g + 1;
            ops := ops + 5;
            IF ops % k = 0 THEN COMMIT; END IF;
          END LOOP;
          COMMIT;
        END $$""",
]


def install_loaders(db: Database) -> None:
    with pg_connect(db.env, db.name) as c:
        for stmt in LOAD_PROCEDURES:
            c.execute(stmt)


def load_inserts(db: Database, first: int, n: int, k: int) -> float:
    """N inserts committed K per transaction; returns seconds taken. synchronous_commit is
    off for the load only: the backlog is the same WAL either way, and loading is faster."""
    t0 = time.monotonic()
    with pg_connect(db.env, db.name) as c:
        c.execute("SET synchronous_commit = off")
        c.execute("CALL load_inserts(%s, %s, %s)", (first, n, k))
    return time.monotonic() - t0


def mixed_events(ops: int) -> tuple[int, int]:
    """(groups, Kafka records) for ``ops`` mixed operations: per group 2 c + 2 u + 1 d + 1
    tombstone."""
    groups = max(1, ops // 5)
    return groups, groups * 6


def preload(db: Database, n: int) -> None:
    """Rows that exist before the slots: deleted by W2, not captured themselves."""
    with pg_connect(db.env, db.name) as c:
        c.execute(
            "INSERT INTO bench_rows SELECT (bench_row(i)).* FROM generate_series(1, %s) i", (n,)
        )
        c.execute("VACUUM ANALYZE bench_rows")


def load_mixed(db: Database, preloaded: int, groups: int, k: int) -> float:
    t0 = time.monotonic()
    with pg_connect(db.env, db.name) as c:
        c.execute("SET synchronous_commit = off")
        c.execute("CALL load_mixed(%s, %s, %s)", (preloaded, groups, k))
    return time.monotonic() - t0


def checkpoint(db: Database) -> None:
    with pg_connect(db.env, db.name) as c:
        c.execute("CHECKPOINT")


def require_rows(db: Database, expected: int) -> None:
    got = int(db.scalar("SELECT count(*) FROM bench_rows"))
    if got != expected:
        raise BenchError(f"bench_rows has {got} rows, expected {expected}")
