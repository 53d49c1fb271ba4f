"""A table's structure as the commit log decoder needs it: its id, key columns in order and
every column's type, from ``system_schema.tables``/``columns`` rows (plain dicts, so the
decoder and its tests need no driver)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from connectors.cassandra.cqltypes import CqlType, UserTypes, parse_type, value_decoder

PARTITION_KEY = "partition_key"
CLUSTERING = "clustering"
REGULAR = "regular"
STATIC = "static"
#: a dropped column (system_schema.dropped_columns): decoded, never emitted
DROPPED = "dropped"


@dataclass(frozen=True)
class ColumnDef:
    name: str
    kind: str
    position: int
    type: CqlType
    type_text: str
    descending: bool = False
    #: bytes of a value on disk (-1: vint-length-prefixed) and the value decoder, computed
    #: once: the decoder's per-cell path uses them directly
    fixed: int = field(default=-1, compare=False, repr=False)
    decode: Callable[[bytes], Any] = field(default=bytes, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fixed", self.type.fixed_length)
        object.__setattr__(self, "decode", value_decoder(self.type))


@dataclass(frozen=True)
class TableDef:
    keyspace: str
    name: str
    id: uuid.UUID
    columns: tuple[ColumnDef, ...]
    cdc: bool = False
    by_name: dict[str, ColumnDef] = field(default_factory=dict, compare=False, repr=False)
    #: the column lists, computed once (the decoder asks for them per mutation)
    partition_key: list[ColumnDef] = field(default_factory=list, compare=False, repr=False)
    clustering: list[ColumnDef] = field(default_factory=list, compare=False, repr=False)
    #: regular columns in Cassandra's order (by name), the order of the value fields
    regular: list[ColumnDef] = field(default_factory=list, compare=False, repr=False)
    #: column names as the commit log spells them (UTF-8 bytes)
    by_raw_name: dict[bytes, ColumnDef] = field(default_factory=dict, compare=False, repr=False)
    #: the commit log decoder's readers compiled for this definition (filled on first use by
    #: :mod:`connectors.cassandra.mutation`; a new definition starts empty)
    compiled: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.by_name.update({c.name: c for c in self.columns})
        self.by_raw_name.update({c.name.encode(): c for c in self.columns})
        cols = self.columns
        self.partition_key[:] = sorted((c for c in cols if c.kind == PARTITION_KEY), key=_pos)
        self.clustering[:] = sorted((c for c in cols if c.kind == CLUSTERING), key=_pos)
        self.regular[:] = sorted((c for c in cols if c.kind == REGULAR), key=lambda c: c.name)

    @property
    def primary_key(self) -> list[ColumnDef]:
        return self.partition_key + self.clustering

    @property
    def qualified(self) -> str:
        return f"{self.keyspace}.{self.name}"

    def to_json(self) -> dict[str, Any]:
        """The form stored next to golden commit log fixtures."""
        return {
            "keyspace": self.keyspace,
            "table": self.name,
            "id": str(self.id),
            "cdc": self.cdc,
            "columns": [
                {
                    "name": c.name,
                    "kind": c.kind,
                    "position": c.position,
                    "type": c.type_text,
                    "clustering_order": "desc" if c.descending else "asc",
                }
                for c in self.columns
            ],
        }


def _pos(c: ColumnDef) -> int:
    return c.position


def table_from_rows(
    table_row: Mapping[str, Any],
    column_rows: Iterable[Mapping[str, Any]],
    user_types: UserTypes | None = None,
) -> TableDef:
    """Build from one ``system_schema.tables`` row and its ``system_schema.columns`` rows
    (driver rows as dicts, or the fixture JSON). A column of a user-defined type (from
    ``system_schema.types``) gets its type text spelled inline with the type's fields, so the
    column's type can be parsed again anywhere without the definitions."""
    keyspace = str(table_row.get("keyspace_name", table_row.get("keyspace")))
    cols = tuple(_column(r, keyspace, user_types) for r in column_rows)
    return TableDef(
        keyspace=keyspace,
        name=str(table_row.get("table_name", table_row.get("table"))),
        id=uuid.UUID(str(table_row["id"])),
        columns=cols,
        cdc=bool(table_row.get("cdc")),
    )


def _column(r: Mapping[str, Any], keyspace: str, user_types: UserTypes | None) -> ColumnDef:
    text = str(r["type"])
    t = parse_type(text, keyspace, user_types)
    return ColumnDef(
        name=str(r["column_name"] if "column_name" in r else r["name"]),
        kind=str(r["kind"]),
        position=int(r["position"]),
        type=t,
        type_text=str(t) if "udt<" in str(t) else text,
        descending=str(r.get("clustering_order", "")) == "desc",
    )


def tables_by_raw_id(tables: Iterable[TableDef]) -> dict[bytes, TableDef]:
    """Tables by the 16 bytes of their id, the commit log's spelling of a table."""
    return {t.id.bytes: t for t in tables}


def table_from_json(doc: Mapping[str, Any]) -> TableDef:
    return table_from_rows(doc, doc["columns"])
