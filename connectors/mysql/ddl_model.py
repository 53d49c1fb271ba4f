"""The statements the DDL parser produces: what changes, in which table or database.

Plain data, so the schema module can apply them and tests can compare them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# -- statement model ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Name:
    db: str | None
    table: str


@dataclass
class Default:
    """A DEFAULT clause: ``text`` is the literal's value as text (unquoted for strings) or the
    expression's SQL; ``is_null`` for DEFAULT NULL; ``is_expression`` for functions and
    parenthesised expressions (CURRENT_TIMESTAMP, (uuid()))."""

    text: str | None
    is_null: bool = False
    is_expression: bool = False


@dataclass
class ColumnSpec:
    name: str
    type_name: str
    length: int | None = None
    scale: int | None = None
    unsigned: bool = False
    nullable: bool | None = None
    default: Default | None = None
    auto_increment: bool = False
    enum_values: tuple[str, ...] | None = None
    charset: str | None = None
    collation: str | None = None
    primary: bool = False
    unique: bool = False
    generated: bool = False
    json_check: bool = False
    comment: str | None = None


@dataclass
class Position:
    first: bool = False
    after: str | None = None


@dataclass
class CreateTable:
    name: Name
    columns: list[ColumnSpec] = field(default_factory=list)
    primary_key: list[str] = field(default_factory=list)
    unique_keys: list[list[str]] = field(default_factory=list)
    json_checks: set[str] = field(default_factory=set)
    charset: str | None = None
    collation: str | None = None
    comment: str | None = None
    if_not_exists: bool = False
    replace: bool = False
    temporary: bool = False
    like: Name | None = None


@dataclass
class AddColumns:
    columns: list[ColumnSpec]
    position: Position = field(default_factory=Position)
    if_not_exists: bool = False


@dataclass
class DropColumn:
    name: str
    if_exists: bool = False


@dataclass
class ModifyColumn:
    column: ColumnSpec
    old_name: str  # == column.name for MODIFY
    position: Position = field(default_factory=Position)
    if_exists: bool = False


@dataclass
class RenameColumn:
    old: str
    new: str


@dataclass
class AlterDefault:
    column: str
    default: Default | None  # None: DROP DEFAULT


@dataclass
class AddKey:
    columns: list[str]
    primary: bool = False
    unique: bool = False
    name: str | None = None
    json_check_column: str | None = None


@dataclass
class DropPrimaryKey:
    pass


@dataclass
class DropIndex:
    name: str


@dataclass
class RenameTo:
    name: Name


@dataclass
class Charset:
    charset: str | None
    collation: str | None
    convert: bool  # CONVERT TO CHARACTER SET rewrites every character column


@dataclass
class TableComment:
    comment: str


AlterAction = (
    AddColumns
    | DropColumn
    | ModifyColumn
    | RenameColumn
    | AlterDefault
    | AddKey
    | DropPrimaryKey
    | DropIndex
    | RenameTo
    | Charset
    | TableComment
)


@dataclass
class AlterTable:
    name: Name
    actions: list[AlterAction] = field(default_factory=list)
    if_exists: bool = False


@dataclass
class DropTables:
    names: list[Name]
    if_exists: bool = False
    temporary: bool = False


@dataclass
class RenameTables:
    pairs: list[tuple[Name, Name]]


@dataclass
class TruncateTable:
    name: Name


@dataclass
class CreateIndex:
    table: Name
    name: str | None
    columns: list[str]
    unique: bool


@dataclass
class DropIndexOn:
    table: Name
    name: str


@dataclass
class CreateDatabase:
    name: str
    charset: str | None = None
    collation: str | None = None
    if_not_exists: bool = False


@dataclass
class AlterDatabase:
    name: str | None
    charset: str | None = None
    collation: str | None = None


@dataclass
class DropDatabase:
    name: str
    if_exists: bool = False


@dataclass
class UseDatabase:
    name: str


@dataclass
class NotTableDdl:
    """A statement that does not change any table's structure."""

    keyword: str


Statement = (
    CreateTable
    | AlterTable
    | DropTables
    | RenameTables
    | TruncateTable
    | CreateIndex
    | DropIndexOn
    | CreateDatabase
    | AlterDatabase
    | DropDatabase
    | UseDatabase
    | NotTableDdl
)
