"""MySQL/MariaDB DDL → statement objects describing what changes in which table.

The binlog carries DDL as text, so knowing a table's columns at a given binlog position means
parsing it (seed §2.1.1). The parser covers the statements that change table structure —
CREATE/ALTER/DROP/RENAME/TRUNCATE TABLE, CREATE/DROP INDEX, CREATE/ALTER/DROP DATABASE, USE —
in the forms the servers write them to the binlog and print from ``SHOW CREATE TABLE``
(including executable comments, ``ALTER ... CONVERT TO CHARACTER SET``, ``RENAME TABLE a TO b,
c TO d``, partition clauses, MySQL 8 expression defaults and MariaDB's ``CHECK (json_valid())``
JSON columns). Everything else (GRANT, CREATE VIEW/PROCEDURE/TRIGGER, FLUSH, ...) is recognised
as not touching tables and ignored. A table statement that does not parse raises
:class:`DdlParseError`; the caller applies ``skip.unparseable.ddl``.

Why not sqlglot: 30.30 (the version pinned here) raises ParseError on the spatial column types
(POINT, LINESTRING, ...), on ``NATIONAL VARCHAR`` and on ``ADD COLUMN (a int, b int)``, and
turns RENAME TABLE / CONVERT TO / partition DDL into an opaque ``exp.Command``. Column
definitions are the heart of schema tracking, so one parser that handles all of MySQL's forms
is simpler and more predictable than sqlglot plus a second parser for its gaps.
"""

from __future__ import annotations

from typing import Any

from connectors.mysql.ddl_lexer import BITS, HEX, ID, NUM, QID, STR, VAR, LexError, Token
from connectors.mysql.ddl_lexer import split_statements as _split
from connectors.mysql.ddl_model import (
    AddColumns,
    AddKey,
    AlterAction,
    AlterDatabase,
    AlterDefault,
    AlterTable,
    Charset,
    ColumnSpec,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    Default,
    DropColumn,
    DropDatabase,
    DropIndex,
    DropIndexOn,
    DropPrimaryKey,
    DropTables,
    ModifyColumn,
    Name,
    NotTableDdl,
    Position,
    RenameColumn,
    RenameTables,
    RenameTo,
    Statement,
    TableComment,
    TruncateTable,
    UseDatabase,
)


class DdlParseError(ValueError):
    pass


# -- types -----------------------------------------------------------------------------------

_TYPE_ALIASES = {
    "INTEGER": "INT",
    "INT1": "TINYINT",
    "INT2": "SMALLINT",
    "INT3": "MEDIUMINT",
    "INT4": "INT",
    "INT8": "BIGINT",
    "MIDDLEINT": "MEDIUMINT",
    "BOOL": "BOOLEAN",
    "DEC": "DECIMAL",
    "FIXED": "DECIMAL",
    "FLOAT4": "FLOAT",
    "FLOAT8": "DOUBLE",
    "CHARACTER": "CHAR",
    "NCHAR": "CHAR",
    "NVARCHAR": "VARCHAR",
    "VARCHAR2": "VARCHAR",
    "VARCHARACTER": "VARCHAR",
    "GEOMCOLLECTION": "GEOMETRYCOLLECTION",
    "LONG": "MEDIUMTEXT",
}

KNOWN_TYPES = frozenset(
    (
        "TINYINT",
        "SMALLINT",
        "MEDIUMINT",
        "INT",
        "BIGINT",
        "BOOLEAN",
        "BIT",
        "FLOAT",
        "DOUBLE",
        "REAL",
        "DECIMAL",
        "NUMERIC",
        "CHAR",
        "VARCHAR",
        "TINYTEXT",
        "TEXT",
        "MEDIUMTEXT",
        "LONGTEXT",
        "BINARY",
        "VARBINARY",
        "TINYBLOB",
        "BLOB",
        "MEDIUMBLOB",
        "LONGBLOB",
        "JSON",
        "ENUM",
        "SET",
        "DATE",
        "TIME",
        "DATETIME",
        "TIMESTAMP",
        "YEAR",
        "GEOMETRY",
        "POINT",
        "LINESTRING",
        "POLYGON",
        "MULTIPOINT",
        "MULTILINESTRING",
        "MULTIPOLYGON",
        "GEOMETRYCOLLECTION",
        "SERIAL",
        "UUID",
        "INET4",
        "INET6",
    )
)
_TEXT_TO_BLOB = {
    "CHAR": "BINARY",
    "VARCHAR": "VARBINARY",
    "TINYTEXT": "TINYBLOB",
    "TEXT": "BLOB",
    "MEDIUMTEXT": "MEDIUMBLOB",
    "LONGTEXT": "LONGBLOB",
}
CHARACTER_TYPES = frozenset(
    {"CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "ENUM", "SET", "JSON"}
)

_DATABASE_OPTIONS = tuple(
    ["DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "UPGRADE", "READ", "ENCRYPTION", "COMMENT"]
)
_TABLE_START = ("CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE", "USE")
_PARTITION_OPS = tuple(
    (
        "REMOVE",
        "ANALYZE",
        "CHECK",
        "OPTIMIZE",
        "REBUILD",
        "REPAIR",
        "COALESCE",
        "REORGANIZE",
        "EXCHANGE",
        "TRUNCATE",
        "DISCARD",
        "IMPORT",
    )
)


# -- parser ----------------------------------------------------------------------------------


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.toks = tokens
        self.i = 0

    # token helpers
    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def at_end(self) -> bool:
        return self.i >= len(self.toks)

    def next(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise DdlParseError("unexpected end of statement")
        self.i += 1
        return tok

    def word(self, *words: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.is_word(*words):
            self.i += 1
            return True
        return False

    def words(self, *seq: str) -> bool:
        for k, w in enumerate(seq):
            tok = self.peek(k)
            if tok is None or not tok.is_word(w):
                return False
        self.i += len(seq)
        return True

    def expect_word(self, *words: str) -> str:
        tok = self.next()
        if not tok.is_word(*words):
            raise DdlParseError(f"expected {' or '.join(words)}, found {tok.value!r}")
        return tok.upper

    def op(self, op: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.is_op(op):
            self.i += 1
            return True
        return False

    def expect_op(self, op: str) -> None:
        tok = self.next()
        if not tok.is_op(op):
            raise DdlParseError(f"expected {op!r}, found {tok.value!r}")

    def ident(self) -> str:
        tok = self.next()
        if tok.kind in (ID, QID) or tok.kind == STR:
            return tok.value
        raise DdlParseError(f"expected a name, found {tok.value!r}")

    def name(self) -> Name:
        first = self.ident()
        if self.op("."):
            return Name(first, self.ident())
        return Name(None, first)

    def string_or_ident(self) -> str:
        return self.ident()

    def if_exists(self) -> bool:
        return self.words("IF", "EXISTS")

    def if_not_exists(self) -> bool:
        return self.words("IF", "NOT", "EXISTS")

    def skip_parens(self) -> list[Token]:
        """Consume a balanced ( ... ) group; return the tokens inside."""
        self.expect_op("(")
        depth, start = 1, self.i
        while depth:
            tok = self.next()
            if tok.is_op("("):
                depth += 1
            elif tok.is_op(")"):
                depth -= 1
        return self.toks[start : self.i - 1]

    def skip_to_separator(self) -> None:
        """Skip to the next top-level ',' or ')' (not consumed) or the end."""
        depth = 0
        while not self.at_end():
            tok = self.peek()
            assert tok is not None
            if tok.is_op("("):
                depth += 1
            elif tok.is_op(")"):
                if depth == 0:
                    return
                depth -= 1
            elif tok.is_op(",") and depth == 0:
                return
            self.i += 1

    def option_value(self) -> str:
        self.op("=")
        tok = self.next()
        return tok.value

    # -- statements --------------------------------------------------------------------------
    def statement(self) -> Statement:
        tok = self.peek()
        if tok is None:
            return NotTableDdl("")
        kw = tok.upper
        if kw == "CREATE":
            return self.create()
        if kw == "ALTER":
            return self.alter()
        if kw == "DROP":
            return self.drop()
        if kw == "RENAME":
            return self.rename()
        if kw == "TRUNCATE":
            self.next()
            self.word("TABLE")
            return TruncateTable(self.name())
        if kw == "USE":
            self.next()
            return UseDatabase(self.ident())
        return NotTableDdl(kw or tok.value)

    def create(self) -> Statement:
        self.expect_word("CREATE")
        replace = self.words("OR", "REPLACE")
        while self.word("ONLINE", "OFFLINE"):
            pass
        temporary = self.word("TEMPORARY")
        tok = self.peek()
        if tok is None:
            raise DdlParseError("CREATE without object")
        kw = tok.upper
        if kw == "TABLE":
            self.next()
            return self.create_table(replace, temporary)
        if kw in ("DATABASE", "SCHEMA"):
            self.next()
            ine = self.if_not_exists()
            name = self.ident()
            charset, collation = self.database_options()
            return CreateDatabase(name, charset, collation, ine)
        if kw in ("UNIQUE", "FULLTEXT", "SPATIAL", "INDEX"):
            unique = self.word("UNIQUE")
            self.word("FULLTEXT", "SPATIAL")
            self.expect_word("INDEX")
            self.if_not_exists()
            tok = self.peek()
            index_name = None if tok is not None and tok.is_word("ON") else self.ident()
            if self.word("USING"):
                self.next()
            self.expect_word("ON")
            table = self.name()
            columns = self.key_parts()
            return CreateIndex(table, index_name, columns, unique)
        return NotTableDdl(f"CREATE {kw}")

    def database_options(self) -> tuple[str | None, str | None]:
        charset = collation = None
        while not self.at_end():
            self.word("DEFAULT")
            if self.words("CHARACTER", "SET") or self.word("CHARSET"):
                charset = self.option_value().lower()
            elif self.word("COLLATE"):
                collation = self.option_value().lower()
            else:
                self.next()
        return charset, collation

    def create_table(self, replace: bool, temporary: bool) -> CreateTable:
        ine = self.if_not_exists()
        stmt = CreateTable(self.name(), if_not_exists=ine, replace=replace, temporary=temporary)
        if self.word("LIKE"):
            stmt.like = self.name()
            return stmt
        tok = self.peek()
        if tok is not None and tok.is_op("(") and (nxt := self.peek(1)) is not None:
            if nxt.is_word("LIKE"):
                self.next()
                self.next()
                stmt.like = self.name()
                self.expect_op(")")
                return stmt
            if nxt.is_word("SELECT"):
                raise DdlParseError("CREATE TABLE ... (SELECT) without column definitions")
            self.expect_op("(")
            self.table_elements(stmt)
            self.expect_op(")")
        elif tok is None or tok.is_word("SELECT", "AS", "IGNORE", "REPLACE"):
            raise DdlParseError("CREATE TABLE ... SELECT without column definitions")
        self.table_options(stmt)
        return stmt

    def table_elements(self, stmt: CreateTable) -> None:
        while True:
            self.table_element(stmt)
            if not self.op(","):
                return

    def table_element(self, stmt: CreateTable) -> None:
        action = self.key_definition()
        if action is not None:
            if action.primary:
                stmt.primary_key = action.columns
            elif action.unique:
                stmt.unique_keys.append(action.columns)
            if action.json_check_column:
                stmt.json_checks.add(action.json_check_column)
            return
        tok, nxt = self.peek(), self.peek(1)
        if tok is not None and tok.is_word("PERIOD") and nxt is not None and nxt.is_word("FOR"):
            self.skip_to_separator()
            return
        col = self.column_definition()
        stmt.columns.append(col)

    def key_definition(self) -> AddKey | None:
        """PRIMARY KEY / UNIQUE / INDEX / KEY / FULLTEXT / SPATIAL / FOREIGN KEY / CHECK,
        optionally after CONSTRAINT [name]. None when the element is a column."""
        start = self.i
        tok = self.peek()
        if tok is None:
            return None
        constraint_name = None
        if tok.is_word("CONSTRAINT"):
            self.next()
            nxt = self.peek()
            if nxt is not None and not nxt.is_word("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
                constraint_name = self.ident()
            tok = self.peek()
            if tok is None:
                raise DdlParseError("CONSTRAINT without definition")
        kw = tok.upper
        if kw == "PRIMARY":
            self.next()
            self.expect_word("KEY")
            self.index_name_and_type()
            cols = self.key_parts()
            self.skip_to_separator()
            return AddKey(cols, primary=True, name=constraint_name)
        if kw == "UNIQUE":
            self.next()
            self.word("INDEX", "KEY")
            name = self.index_name_and_type()
            cols = self.key_parts()
            self.skip_to_separator()
            return AddKey(cols, unique=True, name=name or constraint_name)
        if kw in ("INDEX", "KEY", "FULLTEXT", "SPATIAL"):
            # Reserved words: a column with such a name is always `quoted` (a QID token).
            if self.i != start:
                raise DdlParseError(f"CONSTRAINT cannot name {kw}")
            self.next()
            self.word("INDEX", "KEY")
            name = self.index_name_and_type()
            self.key_parts()
            self.skip_to_separator()
            return AddKey([], name=name)
        if kw == "FOREIGN":
            self.next()
            self.expect_word("KEY")
            self.skip_to_separator()
            return AddKey([], name=constraint_name)
        if kw == "CHECK":
            self.next()
            inner = self.skip_parens()
            self.skip_to_separator()
            return AddKey([], name=constraint_name, json_check_column=_json_valid_column(inner))
        if self.i != start:
            raise DdlParseError(f"unexpected {tok.value!r} after CONSTRAINT")
        return None

    def index_name_and_type(self) -> str | None:
        name = None
        tok = self.peek()
        if tok is not None and not tok.is_op("(") and not tok.is_word("USING"):
            name = self.ident()
        if self.word("USING"):
            self.next()
        return name

    def key_parts(self) -> list[str]:
        self.expect_op("(")
        cols: list[str] = []
        while True:
            tok = self.peek()
            if tok is not None and tok.is_op("("):
                self.skip_parens()  # functional key part
            else:
                cols.append(self.ident())
                if (t := self.peek()) is not None and t.is_op("("):
                    self.skip_parens()  # prefix length
            self.word("ASC", "DESC")
            if self.op(")"):
                return cols
            self.expect_op(",")

    def table_options(self, stmt: CreateTable) -> None:
        while not self.at_end():
            if self.op(","):
                continue
            tok = self.peek()
            assert tok is not None
            if tok.is_word("PARTITION") or tok.is_word("SELECT", "AS", "IGNORE", "REPLACE"):
                return  # partitioning, or the SELECT of CREATE ... SELECT: nothing structural
            if tok.is_op("("):
                return
            self.word("DEFAULT")
            if self.words("CHARACTER", "SET") or self.word("CHARSET"):
                stmt.charset = self.option_value().lower()
            elif self.word("COLLATE"):
                stmt.collation = self.option_value().lower()
            elif self.word("COMMENT"):
                stmt.comment = self.option_value()
            elif self.word("UNION"):
                self.op("=")
                self.skip_parens()
            else:
                self.next()
                if self.op("="):
                    if (t := self.peek()) is not None and t.is_op("("):
                        self.skip_parens()
                    else:
                        self.next()

    # -- columns ------------------------------------------------------------------------------
    def column_definition(self) -> ColumnSpec:
        name = self.ident()
        col = self.data_type(name)
        self.column_attributes(col)
        return col

    def data_type(self, name: str) -> ColumnSpec:
        tok = self.next()
        if tok.kind != ID:
            raise DdlParseError(f"expected a type for column {name!r}, found {tok.value!r}")
        base = tok.upper
        if base == "NATIONAL":
            base = self.expect_word("CHAR", "CHARACTER", "VARCHAR")
            if self.word("VARYING"):
                base = "VARCHAR"
        elif base == "DOUBLE":
            self.word("PRECISION")
        elif base in ("CHAR", "CHARACTER", "NCHAR") and self.word("VARYING"):
            base = "VARCHAR"
        elif base == "LONG":
            if self.word("VARBINARY"):
                base = "MEDIUMBLOB"
            else:
                self.word("VARCHAR", "VARCHARACTER")
                base = "MEDIUMTEXT"
        base = _TYPE_ALIASES.get(base, base)
        if base not in KNOWN_TYPES:
            raise DdlParseError(f"unknown type {tok.value!r} of column {name!r}")
        col = ColumnSpec(name, base)
        if base == "SERIAL":
            col.type_name, col.unsigned, col.nullable = "BIGINT", True, False
            col.auto_increment, col.unique = True, True
        if base in ("ENUM", "SET"):
            self.expect_op("(")
            values: list[str] = []
            while True:
                values.append(self.literal_text())
                if self.op(")"):
                    break
                self.expect_op(",")
            col.enum_values = tuple(values)
        elif (t := self.peek()) is not None and t.is_op("("):
            params = self.skip_parens()
            nums = [int(p.value) for p in params if p.kind == NUM and p.value.isdigit()]
            if nums:
                col.length = nums[0]
            if len(nums) > 1:
                col.scale = nums[1]
        if base == "FLOAT" and col.length is not None and col.scale is None:
            if col.length > 24:  # FLOAT(p): p > 24 is a DOUBLE
                col.type_name = "DOUBLE"
            col.length = None
        if base == "BOOLEAN":
            col.length = 1
        if base in ("DECIMAL", "NUMERIC"):
            col.length = 10 if col.length is None else col.length
            col.scale = 0 if col.scale is None else col.scale
        if base == "CHAR" and self.word("BYTE"):
            col.type_name = "BINARY"
        # type modifiers, in any order
        while True:
            if self.word("UNSIGNED"):
                col.unsigned = True
            elif self.word("SIGNED", "ZEROFILL"):
                pass
            elif self.word("BINARY"):
                pass  # binary collation of the column's character set, not binary data
            elif self.word("ASCII"):
                col.charset = "latin1"
            elif self.word("UNICODE"):
                col.charset = "ucs2"
            elif self.words("CHARACTER", "SET") or self.word("CHARSET"):
                col.charset = self.ident().lower()
            elif self.word("COLLATE"):
                col.collation = self.ident().lower()
            else:
                break
        if col.charset == "binary" and col.type_name in _TEXT_TO_BLOB:
            col.type_name = _TEXT_TO_BLOB[col.type_name]
            col.charset = None
        return col

    def literal_text(self) -> str:
        tok = self.next()
        if tok.kind == ID and (tok.value.startswith("_") or tok.upper == "N"):
            nxt = self.peek()
            if nxt is not None and nxt.kind in (STR, HEX, BITS):
                tok = self.next()  # charset introducer
        if tok.kind == STR:
            return tok.value
        if tok.kind == HEX:
            try:
                return bytes.fromhex(tok.value).decode("utf-8", "replace")
            except ValueError:
                return tok.value
        return tok.value

    def column_attributes(self, col: ColumnSpec) -> None:
        while not self.at_end():
            tok = self.peek()
            assert tok is not None
            if tok.is_op(",") or tok.is_op(")"):
                break
            if self.words("NOT", "NULL"):
                col.nullable = False
            elif self.word("NULL"):
                col.nullable = True
            elif self.word("DEFAULT"):
                col.default = self.default_value()
            elif self.word("AUTO_INCREMENT"):
                col.auto_increment = True
            elif self.words("PRIMARY", "KEY"):
                col.primary = True
            elif self.word("UNIQUE"):
                col.unique = True
                self.word("KEY")
            elif self.word("KEY"):
                col.primary = True  # a bare KEY in a column definition means PRIMARY KEY
            elif self.word("COMMENT"):
                col.comment = self.literal_text()
            elif self.words("CHARACTER", "SET") or self.word("CHARSET"):
                col.charset = self.ident().lower()
            elif self.word("COLLATE"):
                col.collation = self.ident().lower()
            elif self.words("ON", "UPDATE"):
                self.expression()
            elif self.words("GENERATED", "ALWAYS") or tok.is_word("AS"):
                self.word("AS")
                self.skip_parens()
                col.generated = True
                self.word("VIRTUAL", "STORED", "PERSISTENT")
            elif self.word("CONSTRAINT"):
                if (t := self.peek()) is not None and not t.is_word("CHECK"):
                    self.ident()
            elif self.word("CHECK"):
                inner = self.skip_parens()
                if _json_valid_column(inner) == col.name:
                    col.json_check = True
                self.word("NOT")
                self.word("ENFORCED")
            elif self.word("REFERENCES"):
                self.name()
                if (t := self.peek()) is not None and t.is_op("("):
                    self.skip_parens()
                self.reference_options()
            elif self.words("SERIAL", "DEFAULT", "VALUE"):
                col.nullable, col.auto_increment, col.unique = False, True, True
            elif self.word(
                "COLUMN_FORMAT",
                "STORAGE",
                "SRID",
                "REF_SYSTEM_ID",
                "ENGINE_ATTRIBUTE",
                "SECONDARY_ENGINE_ATTRIBUTE",
            ):
                self.op("=")
                self.next()
            elif self.word("INVISIBLE", "VISIBLE", "COMPRESSED", "ENFORCED"):
                self.op("=")
                if (t := self.peek()) is not None and t.kind == ID and t.upper in ("ZLIB",):
                    self.next()
            elif self.words("WITH", "SYSTEM", "VERSIONING") or self.words(
                "WITHOUT", "SYSTEM", "VERSIONING"
            ):
                pass
            elif tok.is_word("FIRST", "AFTER"):
                break  # a position: the ALTER parser reads it
            else:
                raise DdlParseError(f"unexpected {tok.value!r} in column {col.name!r}")
        if col.type_name == "LONGTEXT" and col.json_check:
            col.type_name = "JSON"

    def reference_options(self) -> None:
        while True:
            if self.word("MATCH"):
                self.next()
            elif self.words("ON", "DELETE") or self.words("ON", "UPDATE"):
                if not (
                    self.word("RESTRICT", "CASCADE")
                    or self.words("SET", "NULL")
                    or self.words("SET", "DEFAULT")
                    or self.words("NO", "ACTION")
                ):
                    raise DdlParseError("bad reference option")
            else:
                return

    def default_value(self) -> Default:
        tok = self.peek()
        if tok is None:
            raise DdlParseError("DEFAULT without value")
        if tok.is_op("("):
            inner = self.skip_parens()
            return Default("(" + " ".join(t.sql() for t in inner) + ")", is_expression=True)
        if tok.is_word("NULL"):
            self.next()
            return Default(None, is_null=True)
        if tok.is_op("-") or tok.is_op("+"):
            self.next()
            num = self.next()
            return Default(("-" if tok.value == "-" else "") + num.value)
        if tok.kind == ID and (tok.value.startswith("_") or tok.upper == "N"):
            nxt = self.peek(1)
            if nxt is not None and nxt.kind in (STR, HEX, BITS):
                self.next()
                tok = self.peek()
                assert tok is not None
        if tok.kind == STR:
            self.next()
            return Default(tok.value)
        if tok.kind == NUM:
            self.next()
            return Default(tok.value)
        if tok.kind in (HEX, BITS):
            self.next()
            return Default(tok.sql(), is_expression=False)
        if tok.kind == ID:
            self.next()
            if tok.upper in ("TRUE", "FALSE"):
                return Default("1" if tok.upper == "TRUE" else "0")
            text = tok.value
            if (t := self.peek()) is not None and t.is_op("("):
                inner = self.skip_parens()
                text += "(" + " ".join(t.sql() for t in inner) + ")"
            return Default(text, is_expression=True)
        if tok.kind == VAR:
            self.next()
            return Default(tok.value, is_expression=True)
        raise DdlParseError(f"unexpected default {tok.value!r}")

    def expression(self) -> None:
        tok = self.next()
        if (t := self.peek()) is not None and t.is_op("(") and tok.kind == ID:
            self.skip_parens()

    def position(self) -> Position:
        if self.word("FIRST"):
            return Position(first=True)
        if self.word("AFTER"):
            return Position(after=self.ident())
        return Position()

    # -- ALTER ---------------------------------------------------------------------------------
    def alter(self) -> Statement:
        self.expect_word("ALTER")
        while self.word("ONLINE", "OFFLINE", "IGNORE"):
            pass
        tok = self.peek()
        if tok is None:
            raise DdlParseError("ALTER without object")
        if tok.is_word("TABLE"):
            self.next()
            if_exists = self.if_exists()
            stmt = AlterTable(self.name(), if_exists=if_exists)
            self.alter_specs(stmt)
            return stmt
        if tok.is_word("DATABASE", "SCHEMA"):
            self.next()
            name = None
            nxt = self.peek()
            if nxt is not None and not nxt.is_word(*_DATABASE_OPTIONS):
                name = self.ident()
            charset, collation = self.database_options()
            return AlterDatabase(name, charset, collation)
        return NotTableDdl(f"ALTER {tok.upper}")

    def alter_specs(self, stmt: AlterTable) -> None:
        while not self.at_end():
            if self.partition_clause():
                return  # partitioning and tablespace operations change no column
            action = self.alter_spec()
            if action is not None:
                stmt.actions.append(action)
            if self.op(","):
                continue
            if not self.at_end() and not self.partition_clause():
                tok = self.peek()
                raise DdlParseError(f"unexpected {tok.value if tok else ''!r} in ALTER TABLE")
            return

    def partition_clause(self) -> bool:
        tok, nxt = self.peek(), self.peek(1)
        if tok is None:
            return False
        if tok.is_word("PARTITION"):
            return True
        return (
            tok.is_word(*_PARTITION_OPS)
            and nxt is not None
            and nxt.is_word("PARTITION", "PARTITIONING", "TABLESPACE")
        )

    def alter_spec(self) -> AlterAction | None:
        if self.word("ADD"):
            return self.alter_add()
        if self.word("DROP"):
            return self.alter_drop()
        if self.word("MODIFY"):
            self.word("COLUMN")
            if_exists = self.if_exists()
            col = self.column_definition()
            return ModifyColumn(col, col.name, self.position(), if_exists)
        if self.word("CHANGE"):
            self.word("COLUMN")
            if_exists = self.if_exists()
            old = self.ident()
            col = self.column_definition()
            return ModifyColumn(col, old, self.position(), if_exists)
        if self.word("RENAME"):
            if self.word("COLUMN"):
                old = self.ident()
                self.expect_word("TO")
                return RenameColumn(old, self.ident())
            if self.word("INDEX", "KEY"):
                self.ident()
                self.expect_word("TO")
                self.ident()
                return None
            self.word("TO", "AS")
            return RenameTo(self.name())
        if self.word("ALTER"):
            if self.word("INDEX", "KEY", "CHECK", "CONSTRAINT"):
                self.skip_to_separator()
                return None
            self.word("COLUMN")
            if_exists = self.if_exists()
            del if_exists
            column = self.ident()
            if self.words("SET", "DEFAULT"):
                return AlterDefault(column, self.default_value())
            if self.words("DROP", "DEFAULT"):
                return AlterDefault(column, None)
            self.skip_to_separator()  # SET VISIBLE / INVISIBLE
            return None
        if self.word("CONVERT"):
            self.expect_word("TO")
            if not (self.words("CHARACTER", "SET") or self.word("CHARSET")):
                raise DdlParseError("expected CHARACTER SET after CONVERT TO")
            charset = self.ident().lower()
            collation = self.ident().lower() if self.word("COLLATE") else None
            return Charset(None if charset == "default" else charset, collation, convert=True)
        tok = self.peek()
        assert tok is not None
        save = self.i
        self.word("DEFAULT")
        if self.words("CHARACTER", "SET") or self.word("CHARSET"):
            charset = self.option_value().lower()
            collation = self.option_value().lower() if self.word("COLLATE") else None
            return Charset(charset, collation, convert=False)
        if self.word("COLLATE"):
            return Charset(None, self.option_value().lower(), convert=False)
        self.i = save
        if self.word("COMMENT"):
            return TableComment(self.option_value())
        # ALGORITHM=, LOCK=, ENGINE=, AUTO_INCREMENT=, FORCE, ENABLE/DISABLE KEYS, ORDER BY ...
        self.skip_alter_option()
        return None

    def skip_alter_option(self) -> None:
        depth = 0
        while not self.at_end():
            tok = self.peek()
            assert tok is not None
            if tok.is_op("("):
                depth += 1
            elif tok.is_op(")"):
                depth -= 1
            elif depth == 0 and (tok.is_op(",") or tok.is_word("PARTITION")):
                return
            self.i += 1

    def alter_add(self) -> AlterAction | None:
        tok = self.peek()
        if tok is None:
            raise DdlParseError("ADD without definition")
        if tok.is_word("PARTITION"):
            self.skip_to_separator()
            return None
        if not tok.is_word("COLUMN"):
            key = self.key_definition()
            if key is not None:
                return key
        self.word("COLUMN")
        ine = self.if_not_exists()
        if (t := self.peek()) is not None and t.is_op("("):
            self.next()
            cols = [self.column_definition()]
            while self.op(","):
                cols.append(self.column_definition())
            self.expect_op(")")
            return AddColumns(cols, Position(), ine)
        col = self.column_definition()
        return AddColumns([col], self.position(), ine)

    def alter_drop(self) -> AlterAction | None:
        if self.words("PRIMARY", "KEY"):
            return DropPrimaryKey()
        if self.word("INDEX", "KEY"):
            self.if_exists()
            return DropIndex(self.ident())
        if self.words("FOREIGN", "KEY") or self.word("CHECK", "CONSTRAINT"):
            self.if_exists()
            self.ident()
            return None
        if self.word("PARTITION"):
            self.skip_to_separator()
            return None
        self.word("COLUMN")
        if_exists = self.if_exists()
        name = self.ident()
        self.word("RESTRICT", "CASCADE")
        return DropColumn(name, if_exists)

    # -- DROP / RENAME -------------------------------------------------------------------------
    def drop(self) -> Statement:
        self.expect_word("DROP")
        temporary = self.word("TEMPORARY")
        tok = self.peek()
        if tok is None:
            raise DdlParseError("DROP without object")
        if tok.is_word("TABLE", "TABLES"):
            self.next()
            if_exists = self.if_exists()
            names = [self.name()]
            while self.op(","):
                names.append(self.name())
            return DropTables(names, if_exists, temporary)
        if tok.is_word("DATABASE", "SCHEMA"):
            self.next()
            if_exists = self.if_exists()
            return DropDatabase(self.ident(), if_exists)
        if tok.is_word("INDEX"):
            self.next()
            self.word("ONLINE", "OFFLINE")
            self.if_exists()
            name = self.ident()
            self.expect_word("ON")
            return DropIndexOn(self.name(), name)
        return NotTableDdl(f"DROP {tok.upper}")

    def rename(self) -> Statement:
        self.expect_word("RENAME")
        if not self.word("TABLE", "TABLES"):
            tok = self.peek()
            return NotTableDdl(f"RENAME {tok.upper if tok else ''}")
        self.if_exists()
        pairs = []
        while True:
            old = self.name()
            self.expect_word("TO")
            pairs.append((old, self.name()))
            if not self.op(","):
                return RenameTables(pairs)
            self.if_exists()


def _json_valid_column(tokens: list[Token]) -> str | None:
    """``json_valid(`c`)`` → ``c`` (MariaDB's JSON columns are LONGTEXT with this check)."""
    if (
        len(tokens) == 4
        and tokens[0].is_word("JSON_VALID")
        and tokens[1].is_op("(")
        and tokens[2].kind in (ID, QID)
        and tokens[3].is_op(")")
    ):
        return tokens[2].value
    return None


def parse(sql: str) -> list[Statement]:
    """Every statement in ``sql``. Table DDL that cannot be read raises ``DdlParseError``."""
    try:
        statements = _split(sql)
    except LexError as exc:
        raise DdlParseError(str(exc)) from exc
    out: list[Statement] = []
    for tokens in statements:
        parser = _Parser(tokens)
        first = tokens[0]
        if not first.is_word(*_TABLE_START):
            out.append(NotTableDdl(first.upper or first.value))
            continue
        try:
            stmt = parser.statement()
        except (DdlParseError, IndexError, ValueError) as exc:
            raise DdlParseError(str(exc)) from exc
        out.append(stmt)
    return out


def literal_default(default: Default | None) -> Any:
    """The default's text for literal defaults; None for NULL and expressions."""
    if default is None or default.is_null or default.is_expression:
        return None
    return default.text
