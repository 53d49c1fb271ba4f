"""A live SQL Server CDC stand-in: a database in the local PostgreSQL that answers the SQL
Server connector's queries with SQL Server's result shapes.

No SQL Server can run on these machines (no T-SQL engine is packaged for Debian, PyPI or
Maven). So that the connector's real pyodbc code runs against a real server process, with
concurrent writers and real transactions, this module installs into a PostgreSQL database:

- ``sys.databases``, ``sys.schemas``, ``sys.tables``, ``sys.columns``, ``sys.types``: views
  over PostgreSQL's catalog with SQL Server's column names; PostgreSQL types are reported
  under SQL Server's names (``int4`` → ``int``, ``timestamp`` → ``datetime2``, ``uuid`` →
  ``uniqueidentifier``), and domains in schema ``sys`` stand for the types PostgreSQL lacks
  (``sys.datetime``, ``sys.smalldatetime``, ``sys.money``, ``sys.smallmoney``,
  ``sys.tinyint``, ``sys.uniqueidentifier``);
- ``sys.fn_cdc_get_max_lsn()``, ``sys.fn_cdc_get_min_lsn(instance)``,
  ``sys.fn_cdc_increment_lsn(lsn)``, ``sys.fn_cdc_map_lsn_to_time(lsn)``: LSNs are
  ``binary(10)`` values (4-byte VLF, 4-byte block, 2-byte slot) drawn from one sequence;
- ``sys.sp_cdc_enable_db()``, ``sys.sp_cdc_enable_table(...)``, ``sys.sp_cdc_disable_table``,
  ``sys.sp_cdc_cleanup_change_table`` (called with PostgreSQL's ``SELECT``, not ``EXEC``: only
  tests and operators call them, never the connector);
- ``cdc.change_tables``, ``cdc.captured_columns``, ``cdc.index_columns``,
  ``cdc.lsn_time_mapping`` and per capture instance a change table ``cdc.<instance>_CT``
  filled by row triggers, read through ``cdc.fn_cdc_get_all_changes_<instance>(from, to,
  N'all update old')`` returning ``__$start_lsn``, ``__$seqval``, ``__$operation`` (1 delete,
  2 insert, 3/4 update before/after), ``__$update_mask``, then the captured columns.

Commit LSNs follow commit order, as SQL Server's capture job assigns them from the log: a
deferred trigger takes one transaction-scoped advisory lock at commit, draws the commit LSN
and records the transaction in ``cdc.lsn_time_mapping``; PostgreSQL releases the lock only
after the commit is visible, so a transaction whose commit LSN is at most
``fn_cdc_get_max_lsn()`` is always visible to a reader. What the stand-in does *not* give:
T-SQL syntax (see the connector's dialect seam), TDS, the asynchronous capture job's latency,
``datetime2(7)``/``time(7)`` (PostgreSQL keeps 6 fractional digits), ``sql_variant``,
``hierarchyid``, ``geometry``/``geography``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from worker.dev.postgres import PASSWORD, USER, PostgresService
from worker.dev.service import Service, ServiceStatus, StackError

#: the database ``tidemark dev`` prepares; tests may install the stand-in into their own
DATABASE = "sqlserver_standin"
#: bumped when the SQL below changes, so an older installation is replaced
VERSION = 4

STANDIN_SQL = r"""
CREATE SCHEMA IF NOT EXISTS sys;
CREATE SCHEMA IF NOT EXISTS cdc;
CREATE SCHEMA IF NOT EXISTS dbo;

-- types PostgreSQL lacks, reported under SQL Server's names by sys.types
DO $$ BEGIN
  CREATE DOMAIN sys.datetime AS timestamp(3);
  CREATE DOMAIN sys.smalldatetime AS timestamp(0);
  CREATE DOMAIN sys.money AS numeric(19, 4);
  CREATE DOMAIN sys.smallmoney AS numeric(10, 4);
  CREATE DOMAIN sys.tinyint AS smallint CHECK (VALUE BETWEEN 0 AND 255);
  CREATE DOMAIN sys.uniqueidentifier AS uuid;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;

CREATE TABLE IF NOT EXISTS sys.standin_info (version int NOT NULL, is_cdc_enabled boolean NOT NULL);

CREATE OR REPLACE VIEW sys.databases AS
  SELECT current_database()::text AS name, 1 AS database_id,
         coalesce((SELECT is_cdc_enabled FROM sys.standin_info LIMIT 1), false) AS is_cdc_enabled;

CREATE OR REPLACE VIEW sys.schemas AS
  SELECT n.oid::int AS schema_id, n.nspname::text AS name FROM pg_namespace n;

CREATE OR REPLACE FUNCTION sys.sqlserver_type(t oid, typmod int) RETURNS text
LANGUAGE sql STABLE AS $f$
  SELECT CASE
    WHEN ty.typnamespace = 'sys'::regnamespace THEN ty.typname::text
    WHEN ty.typname = 'int2' THEN 'smallint'
    WHEN ty.typname = 'int4' THEN 'int'
    WHEN ty.typname = 'int8' THEN 'bigint'
    WHEN ty.typname = 'bool' THEN 'bit'
    WHEN ty.typname = 'numeric' THEN 'decimal'
    WHEN ty.typname = 'float4' THEN 'real'
    WHEN ty.typname = 'float8' THEN 'float'
    WHEN ty.typname IN ('varchar', 'text') THEN 'nvarchar'
    WHEN ty.typname = 'bpchar' THEN 'nchar'
    WHEN ty.typname = 'bytea' THEN 'varbinary'
    WHEN ty.typname = 'date' THEN 'date'
    WHEN ty.typname = 'time' THEN 'time'
    WHEN ty.typname = 'timestamp' THEN 'datetime2'
    WHEN ty.typname = 'timestamptz' THEN 'datetimeoffset'
    WHEN ty.typname = 'uuid' THEN 'uniqueidentifier'
    WHEN ty.typname = 'xml' THEN 'xml'
    ELSE ty.typname::text END
  FROM pg_type ty WHERE ty.oid = t
$f$;

CREATE OR REPLACE VIEW sys.types AS
  SELECT t.oid::int AS user_type_id, sys.sqlserver_type(t.oid, -1) AS name,
         t.typnamespace::int AS schema_id
  FROM pg_type t;

-- max_length in bytes (-1: max), precision and scale as SQL Server reports them
CREATE OR REPLACE VIEW sys.columns AS
  SELECT a.attrelid::int AS object_id, a.attname::text AS name, a.attnum::int AS column_id,
         a.atttypid::int AS user_type_id,
         CASE WHEN b.typname IN ('varchar', 'bpchar') AND a.atttypmod > 0
                THEN (a.atttypmod - 4) * 2
              WHEN b.typname IN ('varchar', 'text', 'bpchar', 'bytea', 'xml') THEN -1
              WHEN b.typlen > 0 THEN b.typlen ELSE -1 END::smallint AS max_length,
         CASE WHEN b.typname = 'numeric' AND a.atttypmod > 0
                THEN ((a.atttypmod - 4) >> 16) & 65535
              WHEN b.typname = 'numeric' THEN 38
              WHEN b.typname = 'int2' THEN 5 WHEN b.typname = 'int4' THEN 10
              WHEN b.typname = 'int8' THEN 19 WHEN b.typname = 'float8' THEN 53
              WHEN b.typname = 'float4' THEN 24 ELSE 0 END::smallint AS precision,
         CASE WHEN b.typname = 'numeric' AND a.atttypmod > 0 THEN (a.atttypmod - 4) & 65535
              WHEN b.typname IN ('timestamp', 'timestamptz', 'time') AND a.atttypmod >= 0
                THEN a.atttypmod
              WHEN b.typname IN ('timestamp', 'timestamptz', 'time') THEN 6
              ELSE 0 END::smallint AS scale,
         NOT a.attnotnull AS is_nullable,
         (a.attidentity <> '' OR coalesce(pg_get_expr(d.adbin, d.adrelid) LIKE 'nextval(%', false))
           AS is_identity
  FROM (SELECT a.attrelid, a.attname, a.attnum, a.atttypid, a.attnotnull, a.attidentity,
               CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END AS atttypmod,
               CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END AS base
          FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
         WHERE a.attnum > 0 AND NOT a.attisdropped) a
  JOIN pg_type b ON b.oid = a.base
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum;

-- LSNs: binary(10), the big-endian bytes of one sequence's values
CREATE SEQUENCE IF NOT EXISTS cdc.lsn_seq START WITH 10977524214923264;  -- 00000027:00000758:0000

CREATE OR REPLACE FUNCTION sys.lsn_of(n bigint) RETURNS bytea
LANGUAGE sql IMMUTABLE AS $f$ SELECT decode(lpad(to_hex(n), 20, '0'), 'hex') $f$;

CREATE OR REPLACE FUNCTION sys.lsn_value(lsn bytea) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $f$
  SELECT ('x' || encode(substr(lsn, 3, 8), 'hex'))::bit(64)::bigint
$f$;

CREATE TABLE IF NOT EXISTS cdc.change_tables (
  object_id int PRIMARY KEY, version int NOT NULL DEFAULT 0, source_object_id int NOT NULL,
  capture_instance text NOT NULL UNIQUE, start_lsn bytea, end_lsn bytea,
  supports_net_changes boolean NOT NULL DEFAULT false,
  has_drop_pending boolean, role_name text, index_name text, filegroup_name text,
  create_date timestamp NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  partition_switch boolean NOT NULL DEFAULT false);
CREATE TABLE IF NOT EXISTS cdc.captured_columns (
  object_id int NOT NULL, column_name text NOT NULL, column_id int, column_type text NOT NULL,
  column_ordinal int NOT NULL, is_computed boolean NOT NULL DEFAULT false,
  PRIMARY KEY (object_id, column_ordinal));
CREATE TABLE IF NOT EXISTS cdc.index_columns (
  object_id int NOT NULL, column_name text NOT NULL, index_ordinal int NOT NULL,
  column_id int, PRIMARY KEY (object_id, index_ordinal));
CREATE TABLE IF NOT EXISTS cdc.lsn_time_mapping (
  start_lsn bytea PRIMARY KEY, tran_begin_time timestamp, tran_end_time timestamp,
  tran_id bytea, tran_begin_lsn bytea, xid bigint NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS cdc.tx_pending (xid bigint PRIMARY KEY);

CREATE OR REPLACE VIEW sys.tables AS
  SELECT c.oid::int AS object_id, c.relname::text AS name, c.relnamespace::int AS schema_id,
         EXISTS (SELECT 1 FROM cdc.change_tables ct WHERE ct.source_object_id = c.oid::int)
           AS is_tracked_by_cdc
  FROM pg_class c WHERE c.relkind IN ('r', 'p');


CREATE OR REPLACE FUNCTION sys.fn_cdc_get_max_lsn() RETURNS bytea
LANGUAGE sql STABLE AS $f$
  SELECT start_lsn FROM cdc.lsn_time_mapping ORDER BY start_lsn DESC LIMIT 1
$f$;

CREATE OR REPLACE FUNCTION sys.fn_cdc_get_min_lsn(capture_instance_name text) RETURNS bytea
LANGUAGE sql STABLE AS $f$
  SELECT coalesce((SELECT start_lsn FROM cdc.change_tables
                   WHERE capture_instance = capture_instance_name), sys.lsn_of(0))
$f$;

CREATE OR REPLACE FUNCTION sys.fn_cdc_increment_lsn(lsn bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE AS $f$ SELECT sys.lsn_of(sys.lsn_value(lsn) + 1) $f$;

CREATE OR REPLACE FUNCTION sys.fn_cdc_map_lsn_to_time(lsn bytea) RETURNS timestamp
LANGUAGE sql STABLE AS $f$
  SELECT tran_end_time FROM cdc.lsn_time_mapping WHERE start_lsn <= lsn
  ORDER BY start_lsn DESC LIMIT 1
$f$;

-- the "capture job": commit LSNs in commit order (see the module docstring)
CREATE OR REPLACE FUNCTION cdc.commit_tx() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE n bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(726562);
  n := nextval('cdc.lsn_seq');
  INSERT INTO cdc.lsn_time_mapping (start_lsn, tran_begin_time, tran_end_time, tran_id,
                                    tran_begin_lsn, xid)
  VALUES (sys.lsn_of(n), transaction_timestamp() AT TIME ZONE 'UTC',
          clock_timestamp() AT TIME ZONE 'UTC', sys.lsn_of(NEW.xid), NULL, NEW.xid);
  DELETE FROM cdc.tx_pending WHERE xid = NEW.xid;
  RETURN NULL;
END $f$;

DROP TRIGGER IF EXISTS commit_tx ON cdc.tx_pending;
CREATE CONSTRAINT TRIGGER commit_tx AFTER INSERT ON cdc.tx_pending
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION cdc.commit_tx();

-- one row trigger per capture instance writes the change rows
CREATE OR REPLACE FUNCTION cdc.capture_row() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
  inst text := TG_ARGV[0];
  seq bytea := sys.lsn_of(nextval('cdc.lsn_seq'));
  xid bigint := txid_current();
  meta jsonb;
  mask bytea;
BEGIN
  IF current_setting('cdc.tx_marked', true) IS DISTINCT FROM xid::text THEN
    PERFORM set_config('cdc.tx_marked', xid::text, true);
    INSERT INTO cdc.tx_pending (xid) VALUES (xid) ON CONFLICT DO NOTHING;
  END IF;
  meta := jsonb_build_object('__$xid', xid, '__$seqval', seq, '__$command_id', 1);
  IF TG_OP = 'INSERT' THEN
    EXECUTE format('INSERT INTO cdc.%I SELECT * FROM jsonb_populate_record(NULL::cdc.%I, $1)',
                   inst || '_CT', inst || '_CT')
      USING to_jsonb(NEW) || meta || jsonb_build_object('__$operation', 2,
            '__$update_mask', cdc.full_mask(inst));
  ELSIF TG_OP = 'DELETE' THEN
    EXECUTE format('INSERT INTO cdc.%I SELECT * FROM jsonb_populate_record(NULL::cdc.%I, $1)',
                   inst || '_CT', inst || '_CT')
      USING to_jsonb(OLD) || meta || jsonb_build_object('__$operation', 1,
            '__$update_mask', cdc.full_mask(inst));
  ELSE
    mask := cdc.update_mask(inst, to_jsonb(OLD), to_jsonb(NEW));
    EXECUTE format('INSERT INTO cdc.%I SELECT * FROM jsonb_populate_record(NULL::cdc.%I, $1)'
                   ' UNION ALL SELECT * FROM jsonb_populate_record(NULL::cdc.%I, $2)',
                   inst || '_CT', inst || '_CT', inst || '_CT')
      USING to_jsonb(OLD) || meta || jsonb_build_object('__$operation', 3, '__$update_mask', mask),
            to_jsonb(NEW) || meta || jsonb_build_object('__$operation', 4, '__$update_mask', mask);
  END IF;
  RETURN NULL;
END $f$;

-- __$update_mask: bit (ordinal - 1) counted from the last byte, as SQL Server lays it out
CREATE OR REPLACE FUNCTION cdc.mask_of(ordinals int[], total int) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE AS $f$
DECLARE m bytea := decode(repeat('00', greatest((total + 7) / 8, 1)), 'hex'); o int; i int;
BEGIN
  FOREACH o IN ARRAY coalesce(ordinals, '{}') LOOP
    i := length(m) - 1 - (o - 1) / 8;
    m := set_byte(m, i, get_byte(m, i) | (1 << ((o - 1) % 8)));
  END LOOP;
  RETURN m;
END $f$;

CREATE OR REPLACE FUNCTION cdc.full_mask(inst text) RETURNS bytea LANGUAGE sql STABLE AS $f$
  SELECT cdc.mask_of(array_agg(cc.column_ordinal), count(*)::int)
  FROM cdc.captured_columns cc JOIN cdc.change_tables ct ON ct.object_id = cc.object_id
  WHERE ct.capture_instance = inst
$f$;

CREATE OR REPLACE FUNCTION cdc.update_mask(inst text, o jsonb, n jsonb) RETURNS bytea
LANGUAGE sql STABLE AS $f$
  SELECT cdc.mask_of(array_agg(cc.column_ordinal) FILTER (
           WHERE o -> cc.column_name IS DISTINCT FROM n -> cc.column_name), count(*)::int)
  FROM cdc.captured_columns cc JOIN cdc.change_tables ct ON ct.object_id = cc.object_id
  WHERE ct.capture_instance = inst
$f$;

CREATE OR REPLACE FUNCTION cdc.refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  RAISE EXCEPTION 'Cannot truncate table ''%'' because it is published for replication or '
                  'enabled for Change Data Capture.', TG_TABLE_NAME;
END $f$;

CREATE OR REPLACE FUNCTION sys.sp_cdc_enable_db() RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
  UPDATE sys.standin_info SET is_cdc_enabled = true;
END $f$;

CREATE OR REPLACE FUNCTION sys.sp_cdc_disable_db() RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
  UPDATE sys.standin_info SET is_cdc_enabled = false;
END $f$;

CREATE OR REPLACE FUNCTION sys.sp_cdc_enable_table(
  source_schema text, source_name text, role_name text, capture_instance text DEFAULT NULL,
  supports_net_changes int DEFAULT 0, captured_column_list text DEFAULT NULL,
  filegroup_name text DEFAULT NULL) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
  src oid := format('%I.%I', source_schema, source_name)::regclass;
  inst text := coalesce(capture_instance, source_schema || '_' || source_name);
  wanted text[] := CASE WHEN captured_column_list IS NULL THEN NULL
                   ELSE string_to_array(replace(captured_column_list, ' ', ''), ',') END;
  cols text;
  ct oid;
  lsn bytea;
BEGIN
  IF NOT (SELECT is_cdc_enabled FROM sys.databases) THEN
    RAISE EXCEPTION 'Database ''%'' is not enabled for Change Data Capture. Ensure that the '
                    'correct database context is set, and retry the operation.', current_database();
  END IF;
  IF (SELECT count(*) FROM cdc.change_tables WHERE source_object_id = src::int) >= 2 THEN
    RAISE EXCEPTION 'Could not create a capture instance because the capture instance limit '
                    '(2) for source table ''%.%'' is already reached.', source_schema, source_name;
  END IF;
  SELECT string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', '
                    ORDER BY a.attnum)
    INTO cols FROM pg_attribute a
   WHERE a.attrelid = src AND a.attnum > 0 AND NOT a.attisdropped
     AND (wanted IS NULL OR a.attname = ANY (wanted));
  EXECUTE format('CREATE TABLE cdc.%I ("__$start_lsn" bytea, "__$end_lsn" bytea, '
                 '"__$seqval" bytea NOT NULL, "__$operation" int NOT NULL, '
                 '"__$update_mask" bytea, %s, "__$command_id" int, "__$xid" bigint NOT NULL)',
                 inst || '_CT', cols);
  EXECUTE format('CREATE INDEX ON cdc.%I ("__$xid")', inst || '_CT');
  ct := format('cdc.%I', inst || '_CT')::regclass;
  lsn := sys.lsn_of(nextval('cdc.lsn_seq'));
  INSERT INTO cdc.change_tables (object_id, source_object_id, capture_instance, start_lsn,
                                 supports_net_changes, role_name, filegroup_name, index_name)
  VALUES (ct::int, src::int, inst, lsn, supports_net_changes <> 0, role_name, filegroup_name,
          (SELECT conname FROM pg_constraint WHERE conrelid = src AND contype = 'p'));
  INSERT INTO cdc.captured_columns (object_id, column_name, column_id, column_type,
                                    column_ordinal)
  SELECT ct::int, a.attname, a.attnum, sys.sqlserver_type(a.atttypid, a.atttypmod),
         row_number() OVER (ORDER BY a.attnum)
    FROM pg_attribute a
   WHERE a.attrelid = src AND a.attnum > 0 AND NOT a.attisdropped
     AND (wanted IS NULL OR a.attname = ANY (wanted));
  INSERT INTO cdc.index_columns (object_id, column_name, index_ordinal, column_id)
  SELECT ct::int, a.attname, k.ord, a.attnum
    FROM pg_constraint c, unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord), pg_attribute a
   WHERE c.conrelid = src AND c.contype = 'p' AND a.attrelid = src AND a.attnum = k.attnum;
  EXECUTE format(
    'CREATE FUNCTION cdc.%I(from_lsn bytea, to_lsn bytea, row_filter_option text) '
    'RETURNS TABLE ("__$start_lsn" bytea, "__$seqval" bytea, "__$operation" int, '
    '"__$update_mask" bytea, %s) LANGUAGE plpgsql STABLE AS $b$ BEGIN '
    'IF from_lsn IS NULL OR to_lsn IS NULL OR from_lsn < sys.fn_cdc_get_min_lsn(%L) '
    '   OR from_lsn > sys.fn_cdc_increment_lsn(coalesce(sys.fn_cdc_get_max_lsn(), from_lsn)) '
    '   OR to_lsn < from_lsn THEN '
    '  RAISE EXCEPTION ''An insufficient number of arguments were supplied for the procedure '
    'or function cdc.fn_cdc_get_all_changes_ ... .'' USING ERRCODE = ''22023''; END IF; '
    'RETURN QUERY SELECT m.start_lsn, c."__$seqval", c."__$operation", c."__$update_mask", %s '
    'FROM cdc.%I c JOIN cdc.lsn_time_mapping m ON m.xid = c."__$xid" '
    'WHERE m.start_lsn >= from_lsn AND m.start_lsn <= to_lsn '
    'AND (row_filter_option = ''all update old'' OR c."__$operation" <> 3); END $b$',
    'fn_cdc_get_all_changes_' || inst, cols, inst,
    (SELECT string_agg(format('c.%I', a.attname), ', ' ORDER BY a.attnum) FROM pg_attribute a
      WHERE a.attrelid = src AND a.attnum > 0 AND NOT a.attisdropped
        AND (wanted IS NULL OR a.attname = ANY (wanted))),
    inst || '_CT');
  EXECUTE format('CREATE TRIGGER %I AFTER INSERT OR UPDATE OR DELETE ON %I.%I '
                 'FOR EACH ROW EXECUTE FUNCTION cdc.capture_row(%L)',
                 'cdc_' || inst, source_schema, source_name, inst);
  EXECUTE format('CREATE OR REPLACE TRIGGER cdc_refuse_truncate BEFORE TRUNCATE ON %I.%I '
                 'FOR EACH STATEMENT EXECUTE FUNCTION cdc.refuse_truncate()',
                 source_schema, source_name);
END $f$;

CREATE OR REPLACE FUNCTION sys.sp_cdc_disable_table(
  source_schema text, source_name text, capture_instance text) RETURNS void
LANGUAGE plpgsql AS $f$
DECLARE ct int;
BEGIN
  SELECT object_id INTO ct FROM cdc.change_tables t WHERE t.capture_instance = $3;
  IF ct IS NULL THEN
    RAISE EXCEPTION 'The specified capture instance ''%'' does not exist.', $3;
  END IF;
  EXECUTE format('DROP TRIGGER IF EXISTS %I ON %I.%I', 'cdc_' || $3, source_schema, source_name);
  EXECUTE format('DROP FUNCTION IF EXISTS cdc.%I', 'fn_cdc_get_all_changes_' || $3);
  EXECUTE format('DROP TABLE IF EXISTS cdc.%I', $3 || '_CT');
  DELETE FROM cdc.captured_columns WHERE object_id = ct;
  DELETE FROM cdc.index_columns WHERE object_id = ct;
  DELETE FROM cdc.change_tables WHERE object_id = ct;
END $f$;

-- the cleanup job: change rows below the low water mark are gone, the minimum LSN moves up
CREATE OR REPLACE FUNCTION sys.sp_cdc_cleanup_change_table(
  capture_instance text, low_water_mark bytea) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
  EXECUTE format('DELETE FROM cdc.%I c USING cdc.lsn_time_mapping m '
                 'WHERE m.xid = c."__$xid" AND m.start_lsn < $1', $1 || '_CT')
    USING low_water_mark;
  UPDATE cdc.change_tables t SET start_lsn = low_water_mark WHERE t.capture_instance = $1;
END $f$;
"""


def install(conn: Any, *, enable_db: bool = True) -> None:
    """Install (or upgrade) the stand-in into the database ``conn`` (a psycopg connection in
    autocommit mode) is connected to; ``enable_db`` also runs ``sys.sp_cdc_enable_db()``."""
    conn.execute(STANDIN_SQL)
    row = conn.execute("SELECT version FROM sys.standin_info").fetchone()
    if row is None:
        conn.execute("INSERT INTO sys.standin_info VALUES (%s, false)", (VERSION,))
    else:
        conn.execute("UPDATE sys.standin_info SET version = %s", (VERSION,))
    if enable_db:
        conn.execute("SELECT sys.sp_cdc_enable_db()")


def odbc_driver() -> str:
    """The Debian PostgreSQL ODBC driver's name as unixODBC registers it."""
    return "PostgreSQL Unicode"


class SqlServerStandinService(Service):
    """``tidemark dev``'s ``sqlserver``: not a process of its own but the stand-in database in
    the local PostgreSQL (started first when needed). ``down`` leaves it (and PostgreSQL)
    running: the database is data, not a process."""

    name = "sqlserver"

    def __init__(self, home: Path, port: int) -> None:
        super().__init__(home, port)
        self.postgres = PostgresService(home, port)

    @classmethod
    def port_env_var(cls) -> str:
        # the stand-in lives in the local PostgreSQL: same port, same override
        return PostgresService.port_env_var()

    def prepare(self) -> None:
        """Nothing on disk: the stand-in is SQL installed by :meth:`after_start`."""

    def command(self) -> Sequence[str]:
        raise StackError("the SQL Server stand-in has no process of its own")

    def _connect(self, dbname: str) -> Any:
        import psycopg

        return psycopg.connect(
            host=self.host,
            port=self.port,
            user=USER,
            password=PASSWORD,
            dbname=dbname,
            autocommit=True,
            connect_timeout=10,
        )

    def installed(self) -> bool:
        try:
            with self._connect(DATABASE) as conn:
                row = conn.execute("SELECT version FROM sys.standin_info").fetchone()
        except Exception:
            return False
        return row is not None and row[0] == VERSION

    def running(self) -> bool:
        return self.postgres.running() and self.installed()

    def status(self) -> ServiceStatus:
        return ServiceStatus(
            self.name,
            self.running(),
            self.postgres.pid(),
            f"{self.host}:{self.port}/{DATABASE}",
            self.postgres.log_file,
        )

    def start(self) -> bool:
        if self.running():
            return False
        self.postgres.start()
        self.after_start()
        return True

    def after_start(self) -> None:
        with self._connect("postgres") as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
            ).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{DATABASE}"')
        with self._connect(DATABASE) as conn:
            install(conn)

    def stop(self, timeout: float = 30.0) -> bool:
        return False

    def env(self) -> dict[str, str]:
        return {
            "TIDEMARK_SQLSERVER_HOST": self.host,
            "TIDEMARK_SQLSERVER_PORT": str(self.port),
            "TIDEMARK_SQLSERVER_USER": USER,
            "TIDEMARK_SQLSERVER_PASSWORD": PASSWORD,
            "TIDEMARK_SQLSERVER_DBNAME": DATABASE,
            "TIDEMARK_SQLSERVER_DIALECT": "postgres-standin",
        }
