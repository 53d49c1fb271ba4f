"""The table structures in force at the connector's binlog position.

Row events name a table but not its columns' meaning, so every row is decoded with the
``Table`` this module holds for it. The state changes only through DDL — parsed from the
binlog, read with ``SHOW CREATE TABLE`` during a snapshot, or replayed from the schema history
on restart — and each change is reported as Debezium ``TableChange`` records, which is what
the history stores. Replaying those records (full table documents, not DDL text) is
idempotent, so a DDL recorded twice around a crash does no harm.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from cdc.history import TableChange, TableChangeType
from cdc.history.store import DEFAULT_CHARSET
from cdc.spi import Column, Table, TableId
from connectors.mysql import ddl
from connectors.mysql.ddl_model import (
    AddColumns,
    AddKey,
    AlterDatabase,
    AlterDefault,
    AlterTable,
    Charset,
    ColumnSpec,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    DropColumn,
    DropDatabase,
    DropIndex,
    DropIndexOn,
    DropPrimaryKey,
    DropTables,
    ModifyColumn,
    Name,
    Position,
    RenameColumn,
    RenameTables,
    RenameTo,
    Statement,
    TableComment,
    TruncateTable,
    UseDatabase,
)

log = logging.getLogger("tidemark.mysql.schema")

_NUMERIC = frozenset(
    {"TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "REAL", "DECIMAL"}
    | {"NUMERIC"}
)
_UNIQUE_KEYS = "unique_keys"  # Table.extra: [(index name or None, [columns])]
_PK_FROM = "pk_from_unique"  # Table.extra: name of the unique index standing in for the PK


@dataclass
class Applied:
    """What one statement did: the changes for the history, and for the schema change topic
    the database it belongs to and the tables it touched."""

    statement: Statement
    database: str | None
    changes: list[TableChange] = field(default_factory=list)
    touches_tables: bool = False

    @property
    def table_ids(self) -> list[TableId]:
        return [c.table.id for c in self.changes]


#: Debezium's MySQL/MariaDB DDL parsers' ``java.sql.Types`` where they differ from the type
#: name's usual code (``cdc.history.store.jdbc_type_for``)
_JDBC_TYPES = {
    "TINYINT": 5,  # SMALLINT
    "INT1": 5,
    "INT3": 4,
    "MIDDLEINT": 4,
    "SERIAL": -5,  # BIGINT
    "FLOAT4": 6,  # FLOAT
    "DEC": 3,
    "FIXED": 3,
    "TIMESTAMP": 2014,  # TIMESTAMP_WITH_TIMEZONE: MySQL's TIMESTAMP is an instant
}


def column_from_spec(
    spec: ColumnSpec, position: int, table_charset: str | None, primary: bool
) -> Column:
    base = spec.type_name
    type_name = f"{base} UNSIGNED" if spec.unsigned and base in _NUMERIC else base
    default = spec.default
    charset = None
    # JSON is not a character type to Debezium's parser: it has no charset there
    if base in ddl.CHARACTER_TYPES and base != "JSON":
        charset = spec.charset or table_charset
    optional = spec.nullable if spec.nullable is not None else True
    if primary or spec.primary:
        optional = False
    length = spec.length
    if base == "ENUM":
        length = 1  # Debezium's: one option
    elif base == "SET" and spec.enum_values is not None:
        length = max(0, len(spec.enum_values) * 2 - 1)  # Debezium's: options and commas
    return Column(
        name=spec.name,
        position=position,
        type_name=type_name,
        length=length,
        scale=spec.scale,
        optional=optional,
        default=None if default is None or default.is_null else default.text,
        has_default=default is not None,
        auto_increment=spec.auto_increment,
        enum_values=spec.enum_values,
        charset=charset,
        jdbc_type=_JDBC_TYPES.get(base),
        generated=spec.auto_increment,
        comment=spec.comment,
    )


def _renumber(columns: Iterable[Column]) -> tuple[Column, ...]:
    return tuple(replace(c, position=i) if c.position != i else c for i, c in enumerate(columns))


class MySqlSchema:
    def __init__(self, default_charset: str = "utf8mb4") -> None:
        self.tables: dict[TableId, Table] = {}
        self.db_charsets: dict[str, str] = {}
        self.default_charset = default_charset
        #: objects that look like tables in the binlog but are not tracked (MariaDB sequences)
        self.version = 0

    # -- reading --------------------------------------------------------------------------------
    def table(self, table_id: TableId) -> Table | None:
        return self.tables.get(table_id)

    def table_ids(self) -> list[TableId]:
        return list(self.tables)

    # -- history ------------------------------------------------------------------------------
    def apply_changes(self, changes: Iterable[TableChange]) -> None:
        for change in changes:
            tid = change.table.id
            if change.type is TableChangeType.DROP:
                self.tables.pop(tid, None)
            else:
                self.tables[tid] = change.table
        self.version += 1

    def reset(self) -> None:
        self.tables.clear()
        self.db_charsets.clear()
        self.version += 1

    # -- DDL ------------------------------------------------------------------------------------
    def apply_ddl(self, sql: str, current_db: str | None) -> list[Applied]:
        """Parse and apply every statement of ``sql``; raises ``ddl.DdlParseError``."""
        out = []
        db = current_db or None
        for stmt in ddl.parse(sql):
            if isinstance(stmt, UseDatabase):
                db = stmt.name
                out.append(Applied(stmt, db))
                continue
            out.append(self.apply(stmt, db))
        return out

    def apply(self, stmt: Statement, current_db: str | None) -> Applied:
        self.version += 1
        if isinstance(stmt, CreateTable):
            return self._create(stmt, current_db)
        if isinstance(stmt, AlterTable):
            return self._alter(stmt, current_db)
        if isinstance(stmt, DropTables):
            return self._drop(stmt, current_db)
        if isinstance(stmt, RenameTables):
            return self._rename(stmt, current_db)
        if isinstance(stmt, TruncateTable):
            tid = self._id(stmt.name, current_db)
            return Applied(stmt, tid.catalog, touches_tables=True)
        if isinstance(stmt, CreateIndex):
            return self._alter(
                AlterTable(stmt.table, [AddKey(stmt.columns, unique=stmt.unique, name=stmt.name)]),
                current_db,
                stmt,
            )
        if isinstance(stmt, DropIndexOn):
            return self._alter(AlterTable(stmt.table, [DropIndex(stmt.name)]), current_db, stmt)
        if isinstance(stmt, CreateDatabase):
            if stmt.charset:
                self.db_charsets[stmt.name] = stmt.charset
            return Applied(stmt, stmt.name)
        if isinstance(stmt, AlterDatabase):
            name = stmt.name or current_db
            if name and stmt.charset:
                self.db_charsets[name] = stmt.charset
            return Applied(stmt, name)
        if isinstance(stmt, DropDatabase):
            dropped = [t for t in self.tables.values() if t.id.catalog == stmt.name]
            for t in dropped:
                del self.tables[t.id]
            self.db_charsets.pop(stmt.name, None)
            changes = [TableChange(TableChangeType.DROP, Table(t.id, ())) for t in dropped]
            return Applied(stmt, stmt.name, changes, touches_tables=bool(dropped))
        return Applied(stmt, current_db)

    def _id(self, name: Name, current_db: str | None) -> TableId:
        return TableId(name.db or current_db, None, name.table)

    def known_id(self, name: Name, current_db: str | None) -> TableId:
        """The id of a table a statement names, spelled as the table is registered when
        only the case differs (a statement may write a name in any case where the server
        compares names without it)."""
        tid = self._id(name, current_db)
        if tid in self.tables:
            return tid
        folded = ((tid.catalog or "").lower(), tid.table.lower())
        for known in self.tables:
            if ((known.catalog or "").lower(), known.table.lower()) == folded:
                return known
        return tid

    def _charset_for(self, db: str | None, explicit: str | None) -> str:
        return explicit or (self.db_charsets.get(db or "") or self.default_charset)

    def _create(self, stmt: CreateTable, current_db: str | None) -> Applied:
        tid = self._id(stmt.name, current_db)
        if stmt.temporary:
            return Applied(stmt, tid.catalog)
        if stmt.if_not_exists and tid in self.tables:
            return Applied(stmt, tid.catalog, touches_tables=True)
        if stmt.like is not None:
            source = self.tables.get(self._id(stmt.like, current_db))
            if source is None:
                raise ddl.DdlParseError(f"CREATE TABLE {tid} LIKE an unknown table {stmt.like}")
            # the copy's comment is left unset, as Debezium's parser leaves it
            table = Table(tid, source.columns, source.primary_key, None, dict(source.extra))
        else:
            charset = self._charset_for(tid.catalog, stmt.charset)
            pk = list(stmt.primary_key) or [c.name for c in stmt.columns if c.primary]
            columns = [
                column_from_spec(spec, i, charset, spec.name in pk)
                for i, spec in enumerate(stmt.columns)
            ]
            for name in stmt.json_checks:
                columns = [_as_json(c) if c.name == name else c for c in columns]
            uniques: list[tuple[str | None, list[str]]] = [(None, u) for u in stmt.unique_keys]
            uniques += [(c.name, [c.name]) for c in stmt.columns if c.unique]
            table = Table(
                tid,
                tuple(columns),
                tuple(pk),
                stmt.comment,
                {DEFAULT_CHARSET: charset, _UNIQUE_KEYS: uniques},
            )
            table = _derive_key(table)
        existed = tid in self.tables
        self.tables[tid] = table
        kind = TableChangeType.ALTER if existed and stmt.replace else TableChangeType.CREATE
        return Applied(stmt, tid.catalog, [TableChange(kind, table)], touches_tables=True)

    def _drop(self, stmt: DropTables, current_db: str | None) -> Applied:
        changes = []
        db = None
        for name in stmt.names:
            tid = self._id(name, current_db)
            db = db or tid.catalog
            if stmt.temporary:
                continue
            if self.tables.pop(tid, None) is not None or not stmt.if_exists:
                changes.append(TableChange(TableChangeType.DROP, Table(tid, ())))
        return Applied(stmt, db or current_db, changes, touches_tables=True)

    def _rename(self, stmt: RenameTables, current_db: str | None) -> Applied:
        changes = []
        db = None
        for old, new in stmt.pairs:
            old_id, new_id = self._id(old, current_db), self._id(new, current_db)
            db = db or old_id.catalog
            table = self.tables.pop(old_id, None)
            if table is None:
                continue
            moved = Table(
                new_id, table.columns, table.primary_key, table.comment, dict(table.extra)
            )
            self.tables[new_id] = moved
            changes.append(TableChange(TableChangeType.DROP, Table(old_id, ())))
            changes.append(TableChange(TableChangeType.CREATE, moved))
        return Applied(stmt, db or current_db, changes, touches_tables=True)

    def _alter(
        self, stmt: AlterTable, current_db: str | None, original: Statement | None = None
    ) -> Applied:
        tid = self._id(stmt.name, current_db)
        applied_to: Statement = original or stmt
        table = self.tables.get(tid)
        if table is None:
            # A table the history never saw (created before the history started and never
            # snapshotted, e.g. in an excluded database): nothing to change.
            log.debug("ALTER of unknown table %s ignored", tid)
            return Applied(applied_to, tid.catalog, touches_tables=True)
        changes: list[TableChange] = []
        for action in stmt.actions:
            if isinstance(action, RenameTo):
                new_id = self._id(action.name, tid.catalog)
                del self.tables[tid]
                changes.append(TableChange(TableChangeType.DROP, Table(tid, ())))
                tid = new_id
                table = Table(
                    tid, table.columns, table.primary_key, table.comment, dict(table.extra)
                )
                self.tables[tid] = table
                continue
            table = _alter_table(table, action)
        self.tables[tid] = table
        kind = TableChangeType.CREATE if changes else TableChangeType.ALTER
        changes.append(TableChange(kind, table))
        return Applied(applied_to, tid.catalog, changes, touches_tables=True)


# -- ALTER actions ----------------------------------------------------------------------------


def _alter_table(table: Table, action: object) -> Table:
    cols = list(table.columns)
    pk = list(table.primary_key)
    extra = dict(table.extra)
    charset = extra.get(DEFAULT_CHARSET)
    names = [c.name for c in cols]
    if isinstance(action, AddColumns):
        insert_at = _insert_index(names, action.position)
        for spec in action.columns:
            if spec.name in names:
                if action.if_not_exists:
                    continue
                raise ddl.DdlParseError(f"column {spec.name!r} already exists in {table.id}")
            cols.insert(insert_at, column_from_spec(spec, 0, charset, spec.primary))
            names.insert(insert_at, spec.name)
            insert_at += 1
            if spec.primary:
                pk = [spec.name]
            if spec.unique:
                extra[_UNIQUE_KEYS] = [*extra.get(_UNIQUE_KEYS, []), (spec.name, [spec.name])]
    elif isinstance(action, DropColumn):
        if action.name not in names:
            if action.if_exists:
                return table
            raise ddl.DdlParseError(f"no column {action.name!r} in {table.id}")
        del cols[names.index(action.name)]
        pk = [p for p in pk if p != action.name]
        extra[_UNIQUE_KEYS] = [
            (n, [c for c in u if c != action.name]) for n, u in extra.get(_UNIQUE_KEYS, [])
        ]
    elif isinstance(action, ModifyColumn):
        if action.old_name not in names:
            if action.if_exists:
                return table
            raise ddl.DdlParseError(f"no column {action.old_name!r} in {table.id}")
        idx = names.index(action.old_name)
        new_name = action.column.name
        in_pk = action.old_name in pk
        col = column_from_spec(action.column, idx, charset, in_pk or action.column.primary)
        del cols[idx]
        names.pop(idx)
        if action.position.first or action.position.after:
            idx = _insert_index(names, action.position)
        cols.insert(idx, col)
        pk = [new_name if p == action.old_name else p for p in pk]
        if action.column.primary:
            pk = [new_name]
        extra[_UNIQUE_KEYS] = _rename_in_keys(
            extra.get(_UNIQUE_KEYS, []), action.old_name, new_name
        )
    elif isinstance(action, RenameColumn):
        if action.old not in names:
            raise ddl.DdlParseError(f"no column {action.old!r} in {table.id}")
        idx = names.index(action.old)
        cols[idx] = replace(cols[idx], name=action.new)
        pk = [action.new if p == action.old else p for p in pk]
        extra[_UNIQUE_KEYS] = _rename_in_keys(extra.get(_UNIQUE_KEYS, []), action.old, action.new)
    elif isinstance(action, AlterDefault):
        if action.column in names:
            idx = names.index(action.column)
            d = action.default
            cols[idx] = replace(
                cols[idx],
                default=None if d is None or d.is_null else d.text,
                has_default=d is not None,
            )
    elif isinstance(action, AddKey):
        if action.json_check_column and action.json_check_column in names:
            idx = names.index(action.json_check_column)
            cols[idx] = _as_json(cols[idx])
        if action.primary:
            pk = list(action.columns)
            extra.pop(_PK_FROM, None)
            cols = [replace(c, optional=False) if c.name in pk else c for c in cols]
        elif action.unique:
            extra[_UNIQUE_KEYS] = [*extra.get(_UNIQUE_KEYS, []), (action.name, action.columns)]
    elif isinstance(action, DropPrimaryKey):
        pk = []
        extra.pop(_PK_FROM, None)
    elif isinstance(action, DropIndex):
        extra[_UNIQUE_KEYS] = [
            (n, u) for n, u in extra.get(_UNIQUE_KEYS, []) if n is None or n != action.name
        ]
        if extra.get(_PK_FROM) == action.name:
            pk = []
            extra.pop(_PK_FROM, None)
    elif isinstance(action, Charset):
        if action.charset:
            extra[DEFAULT_CHARSET] = action.charset
            if action.convert:
                cols = [
                    replace(c, charset=action.charset) if c.charset is not None else c for c in cols
                ]
    elif isinstance(action, TableComment):
        return _derive_key(Table(table.id, _renumber(cols), tuple(pk), action.comment, extra))
    return _derive_key(Table(table.id, _renumber(cols), tuple(pk), table.comment, extra))


def _insert_index(names: list[str], position: Position) -> int:
    if position.first:
        return 0
    if position.after is not None:
        if position.after not in names:
            raise ddl.DdlParseError(f"AFTER an unknown column {position.after!r}")
        return names.index(position.after) + 1
    return len(names)


def _rename_in_keys(
    keys: list[tuple[str | None, list[str]]], old: str, new: str
) -> list[tuple[str | None, list[str]]]:
    return [(n, [new if c == old else c for c in u]) for n, u in keys]


def _as_json(col: Column) -> Column:
    if col.type_name in ("LONGTEXT", "TEXT", "MEDIUMTEXT"):
        return replace(col, type_name="JSON")
    return col


def _derive_key(table: Table) -> Table:
    """Without a primary key, the first unique key over NOT NULL columns identifies rows
    (InnoDB's own rule, and Debezium's): it becomes the event key."""
    if table.primary_key and _PK_FROM not in table.extra:
        return table
    by_name = {c.name: c for c in table.columns}
    for name, cols in table.extra.get(_UNIQUE_KEYS, []):
        if cols and all(c in by_name and not by_name[c].optional for c in cols):
            extra = dict(table.extra)
            extra[_PK_FROM] = name or ",".join(cols)
            return Table(table.id, table.columns, tuple(cols), table.comment, extra)
    if _PK_FROM in table.extra:
        extra = dict(table.extra)
        extra.pop(_PK_FROM)
        return Table(table.id, table.columns, (), table.comment, extra)
    return table
