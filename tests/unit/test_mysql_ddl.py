"""DDL parsing and its effect on the in-memory schema (connectors/mysql/ddl.py, schema.py)."""

from __future__ import annotations

import pytest

from cdc.history import TableChangeType
from cdc.spi import TableId
from connectors.mysql import ddl
from connectors.mysql.ddl_model import CreateTable, DropTables, NotTableDdl, RenameTables
from connectors.mysql.schema import MySqlSchema

T = TableId("db", None, "t")


def schema_with(*statements: str) -> MySqlSchema:
    s = MySqlSchema()
    for sql in statements:
        s.apply_ddl(sql, "db")
    return s


def cols(s: MySqlSchema, table: str = "t") -> list[tuple[str, str]]:
    t = s.table(TableId("db", None, table))
    assert t is not None
    return [(c.name, c.type_name) for c in t.columns]


def test_create_table_with_every_column_form() -> None:
    s = schema_with(
        """CREATE TABLE t (
          id int unsigned NOT NULL AUTO_INCREMENT,
          b bool, ti tinyint(1) DEFAULT '1', bt bit(10) DEFAULT b'101',
          v varchar(10) CHARACTER SET latin1 NOT NULL DEFAULT 'x' COMMENT 'a ''quoted'' one',
          nv national varchar(3), vb varchar(4) CHARACTER SET binary,
          d decimal(10,2) unsigned zerofill, n numeric(5), r real, f float(10,2), f53 float(53),
          dp double precision, e enum('a','b') DEFAULT 'a', s set('x','y'),
          ts timestamp(3) NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
          dt datetime(6), j json, g geometry, p point, ls linestring, pg polygon, mp multipoint,
          ml multilinestring, mpg multipolygon, gc geometrycollection, y year(4),
          gen int GENERATED ALWAYS AS (id + 1) VIRTUAL, x int AS (id) STORED INVISIBLE,
          ser serial, `key` int, `weird name` text,
          PRIMARY KEY (id), UNIQUE KEY uk (v), KEY k1 (d), FULLTEXT KEY ft (v),
          CONSTRAINT fk FOREIGN KEY (id) REFERENCES other (id) ON DELETE CASCADE,
          CONSTRAINT chk CHECK (id > 0)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci COMMENT='tbl'
        /*!50100 PARTITION BY HASH (id) PARTITIONS 4 */"""
    )
    t = s.table(T)
    assert t is not None
    by = {c.name: c for c in t.columns}
    assert t.primary_key == ("id",)
    assert by["id"].type_name == "INT UNSIGNED" and not by["id"].optional
    assert by["id"].auto_increment
    assert by["b"].type_name == "BOOLEAN" and by["b"].length == 1
    assert by["ti"].type_name == "TINYINT" and by["ti"].length == 1 and by["ti"].default == "1"
    assert by["bt"].length == 10 and by["bt"].default == "b'101'"
    assert by["v"].charset == "latin1" and not by["v"].optional and by["v"].default == "x"
    assert by["nv"].type_name == "VARCHAR" and by["nv"].charset == "utf8mb4"
    assert by["vb"].type_name == "VARBINARY" and by["vb"].charset is None
    assert (by["d"].type_name, by["d"].length, by["d"].scale) == ("DECIMAL UNSIGNED", 10, 2)
    assert (by["n"].length, by["n"].scale) == (5, 0)
    assert by["r"].type_name == "REAL" and by["f"].type_name == "FLOAT"
    assert by["f53"].type_name == "DOUBLE" and by["dp"].type_name == "DOUBLE"
    assert by["e"].enum_values == ("a", "b") and by["s"].enum_values == ("x", "y")
    assert by["ts"].length == 3 and by["ts"].default == "CURRENT_TIMESTAMP(3)"
    assert by["dt"].length == 6 and by["j"].type_name == "JSON"
    assert [by[n].type_name for n in ("g", "p", "ls", "pg", "mp", "ml", "mpg", "gc")] == [
        "GEOMETRY",
        "POINT",
        "LINESTRING",
        "POLYGON",
        "MULTIPOINT",
        "MULTILINESTRING",
        "MULTIPOLYGON",
        "GEOMETRYCOLLECTION",
    ]
    assert by["ser"].type_name == "BIGINT UNSIGNED" and not by["ser"].optional
    assert "key" in by and "weird name" in by and "gen" in by and "x" in by
    assert [c.position for c in t.columns] == list(range(len(t.columns)))
    assert t.comment == "tbl"


def test_show_create_table_forms_of_both_servers() -> None:
    s = schema_with(
        # MariaDB: JSON is LONGTEXT with a json_valid() check
        "CREATE TABLE `m` (\n  `id` int(11) NOT NULL,\n  `j` longtext CHARACTER SET utf8mb4 "
        "COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`j`)),\n  `k` longtext DEFAULT NULL,"
        "\n  PRIMARY KEY (`id`),\n  CONSTRAINT `CONSTRAINT_1` CHECK (json_valid(`k`))\n) "
        "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
        # MySQL 8: quoted numeric defaults, SRID and INVISIBLE in executable comments
        "CREATE TABLE `q` (\n  `id` int NOT NULL,\n  `g` point /*!80003 SRID 4326 */ DEFAULT "
        "NULL,\n  `n` int DEFAULT '0',\n  `u` varchar(36) DEFAULT (uuid()),\n  PRIMARY KEY "
        "(`id`),\n  KEY `idx` (`n`) /*!80000 INVISIBLE */\n) ENGINE=InnoDB DEFAULT "
        "CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci",
    )
    assert cols(s, "m") == [("id", "INT"), ("j", "JSON"), ("k", "JSON")]
    q = s.table(TableId("db", None, "q"))
    assert q is not None and [c.type_name for c in q.columns] == ["INT", "POINT", "INT", "VARCHAR"]
    assert q.columns[2].default == "0" and q.columns[3].default == "(uuid ( ))"


def test_alter_table_actions() -> None:
    s = schema_with(
        "CREATE TABLE t (id int PRIMARY KEY, a int, b varchar(5), c int)",
        "ALTER TABLE t ADD COLUMN x int AFTER id, ADD y int FIRST, DROP COLUMN c, "
        "MODIFY COLUMN b varchar(50) NOT NULL, CHANGE COLUMN a a2 bigint, "
        "ALGORITHM=INPLACE, LOCK=NONE",
    )
    assert cols(s) == [
        ("y", "INT"),
        ("id", "INT"),
        ("x", "INT"),
        ("a2", "BIGINT"),
        ("b", "VARCHAR"),
    ]
    t = s.table(T)
    assert t is not None and not t.columns[4].optional and t.columns[4].length == 50
    s.apply_ddl("ALTER TABLE t ADD COLUMN (p int, q int), RENAME COLUMN p TO p2", "db")
    s.apply_ddl("ALTER TABLE t MODIFY y int AFTER q, ALTER COLUMN x SET DEFAULT 5", "db")
    assert [c for c, _ in cols(s)] == ["id", "x", "a2", "b", "p2", "q", "y"]
    t = s.table(T)
    assert t is not None and t.columns[1].default == "5" and t.columns[1].has_default
    s.apply_ddl("ALTER TABLE t ALTER COLUMN x DROP DEFAULT", "db")
    t = s.table(T)
    assert t is not None and not t.columns[1].has_default


def test_primary_key_changes_and_unique_key_fallback() -> None:
    s = schema_with("CREATE TABLE t (a int NOT NULL, b int NOT NULL, c int, UNIQUE KEY u1 (c))")
    t = s.table(T)
    assert t is not None and t.primary_key == ()  # c is nullable: not a key
    s.apply_ddl("ALTER TABLE t ADD UNIQUE KEY u2 (a, b)", "db")
    t = s.table(T)
    assert t is not None and t.primary_key == ("a", "b")
    s.apply_ddl("ALTER TABLE t ADD PRIMARY KEY (b)", "db")
    t = s.table(T)
    assert t is not None and t.primary_key == ("b",)
    s.apply_ddl("ALTER TABLE t DROP PRIMARY KEY", "db")
    t = s.table(T)
    assert t is not None and t.primary_key == ("a", "b")  # back to the unique key
    s.apply_ddl("DROP INDEX u2 ON t", "db")
    t = s.table(T)
    assert t is not None and t.primary_key == ()


def test_table_level_ddl() -> None:
    s = schema_with("CREATE TABLE t (id int PRIMARY KEY)", "CREATE TABLE t2 LIKE t")
    assert s.table(TableId("db", None, "t2")) is not None
    applied = s.apply_ddl("RENAME TABLE t TO t3, t2 TO other.t4", "db")
    assert isinstance(applied[0].statement, RenameTables)
    kinds = [(c.type, c.table.id.identifier) for c in applied[0].changes]
    assert kinds == [
        (TableChangeType.DROP, "db.t"),
        (TableChangeType.CREATE, "db.t3"),
        (TableChangeType.DROP, "db.t2"),
        (TableChangeType.CREATE, "other.t4"),
    ]
    s.apply_ddl("ALTER TABLE t3 RENAME TO t5", "db")
    assert s.table(TableId("db", None, "t5")) is not None
    s.apply_ddl("ALTER TABLE t5 CONVERT TO CHARACTER SET latin1 COLLATE latin1_bin", "db")
    s.apply_ddl("ALTER TABLE t5 PARTITION BY HASH(id) PARTITIONS 4", "db")
    s.apply_ddl("ALTER TABLE t5 COALESCE PARTITION 2", "db")
    s.apply_ddl("TRUNCATE TABLE t5", "db")
    applied = s.apply_ddl("DROP TABLE IF EXISTS t5, other.t4, nosuch", "db")
    assert isinstance(applied[0].statement, DropTables)
    assert [c.table.id.identifier for c in applied[0].changes] == ["db.t5", "other.t4"]
    assert s.tables == {}


def test_database_statements_and_charsets() -> None:
    s = MySqlSchema()
    s.apply_ddl("CREATE DATABASE d2 CHARACTER SET latin1", None)
    s.apply_ddl("CREATE TABLE d2.t (v varchar(3), w varchar(3) CHARSET utf8mb4)", None)
    t = s.table(TableId("d2", None, "t"))
    assert t is not None and [c.charset for c in t.columns] == ["latin1", "utf8mb4"]
    s.apply_ddl("ALTER TABLE d2.t CONVERT TO CHARACTER SET utf8mb4", None)
    t = s.table(TableId("d2", None, "t"))
    assert t is not None and [c.charset for c in t.columns] == ["utf8mb4", "utf8mb4"]
    applied = s.apply_ddl("DROP DATABASE d2", None)
    assert [c.type for c in applied[0].changes] == [TableChangeType.DROP]
    assert s.tables == {}


def test_statements_that_do_not_change_tables() -> None:
    for sql in (
        "GRANT ALL ON *.* TO x",
        "CREATE USER a IDENTIFIED BY 'b'",
        "CREATE DEFINER=`root`@`localhost` VIEW v AS SELECT 1",
        "DROP VIEW v",
        "FLUSH PRIVILEGES",
        "CREATE PROCEDURE p() BEGIN SELECT 1; END",
        "ANALYZE TABLE t",
        "SET PASSWORD = 'x'",
    ):
        assert all(isinstance(s, NotTableDdl) for s in ddl.parse(sql)), sql
    # temporary tables are not replicated in row format
    s = schema_with("CREATE TEMPORARY TABLE tmp (id int)", "DROP TEMPORARY TABLE IF EXISTS tmp")
    assert s.tables == {}


def test_multi_statement_text_and_comments() -> None:
    stmts = ddl.parse(
        "USE db; -- comment\nCREATE TABLE a (id int) /* c */; # tail\nCREATE TABLE `b``c` (x int)"
    )
    assert [type(s).__name__ for s in stmts] == ["UseDatabase", "CreateTable", "CreateTable"]
    last = stmts[2]
    assert isinstance(last, CreateTable) and last.name.table == "b`c"


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE t (id int, v frobnicate)",
        "CREATE TABLE t (id int",
        "ALTER TABLE t ADD COLUMN",
        "CREATE TABLE t AS SELECT 1",
        "CREATE TABLE t (a int 'oops')",
    ],
)
def test_unparseable_table_ddl_raises(sql: str) -> None:
    with pytest.raises(ddl.DdlParseError):
        MySqlSchema().apply_ddl(sql, "db")


def test_alter_of_an_unknown_column_raises() -> None:
    s = schema_with("CREATE TABLE t (id int)")
    with pytest.raises(ddl.DdlParseError):
        s.apply_ddl("ALTER TABLE t DROP COLUMN nope", "db")
    s.apply_ddl("ALTER TABLE t DROP COLUMN IF EXISTS nope", "db")
