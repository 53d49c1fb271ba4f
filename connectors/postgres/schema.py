"""The connector's view of table structure: the Relation message first, the catalog second.

A Relation message describes the rows that follow it *as they were written*, even when the
connector reads them long after later DDL (stopped, restarting, catching up). So everything
it carries comes from it: column names, order, types and type modifiers, and the key — each
column's "part of the replica identity" flag, which under ``REPLICA IDENTITY DEFAULT`` is the
primary key in force at that position, and under ``USING INDEX`` the identity index.

The catalog is read at decode time, so it is *today's* table: only what the message lacks
comes from it (nullability, defaults), and never in a way that invents a value:

- Replica identity key columns are NOT NULL at that position (PostgreSQL requires it of a
  primary key and an identity index): required, whatever the catalog says now.
- Other columns take the catalog's nullability, but a NULL in a column the catalog calls
  NOT NULL (it was set after the row was written) is emitted as NULL: the table is registered
  again with that column optional, for the rest of that relation version (``RowGuard``).
  Debezium (and tidemark before) emitted the type's zero value instead.
- Defaults are taken only when the catalog column still has the message's type.
- An enum label missing from the cached labels (``ALTER TYPE ... ADD VALUE`` sends no
  Relation message) reloads the type before the event is converted (``RowGuard``).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from cdc.spi import UNAVAILABLE, Column, Table, TableId
from connectors.postgres import connection as pgconn
from connectors.postgres.pgoutput import Relation
from connectors.postgres.types import PostgresValueConverters, TypeRegistry, parse_array

log = logging.getLogger("tidemark.postgres.schema")

#: identities whose key flags name NOT NULL columns that identify the row (pgoutput flags
#: every column under FULL and none under NOTHING)
_KEYED_IDENTITIES = ("d", "i")

_FORMAT_SQL = "SELECT format_type(t, m) FROM unnest(%s::oid[], %s::int4[]) AS u(t, m)"


class PgSchema:
    def __init__(self, conn: Any, dbname: str, registry: TypeRegistry) -> None:
        self.conn = conn
        self.dbname = dbname
        self.registry = registry
        self.converters = PostgresValueConverters(registry)
        self.by_oid: dict[int, Table] = {}

    def _ensure_types(self, oids: list[int]) -> None:
        missing = [o for o in oids if o not in self.registry.catalog]
        if missing:
            self.registry.catalog.update(pgconn.load_types(self.conn, missing))

    def load(self, table_id: TableId, oid: int) -> Table:
        table = pgconn.load_table(self.conn, table_id, oid)
        self._ensure_types([c.native_type or 0 for c in table.columns])
        self.by_oid[oid] = table
        return table

    def from_relation(self, rel: Relation) -> Table:
        """The table as the Relation message describes it (see the module docstring)."""
        table_id = TableId(self.dbname, rel.namespace, rel.name)
        catalog = pgconn.load_table(self.conn, table_id, rel.oid)
        self._ensure_types([rc.type_oid for rc in rel.columns])
        by_name = {c.name: c for c in catalog.columns}
        formatted = self._format_types(rel)
        keyed = rel.replica_identity in _KEYED_IDENTITIES
        cols = []
        for i, rc in enumerate(rel.columns):
            known = by_name.get(rc.name)
            same_type = (
                known is not None
                and known.native_type == rc.type_oid
                and known.type_modifier == rc.type_modifier
            )
            name, length, scale = _type_name(formatted[i])
            cols.append(
                Column(
                    name=rc.name,
                    position=i,
                    type_name=name,
                    native_type=rc.type_oid,
                    length=length,
                    scale=scale,
                    optional=not (keyed and rc.is_key) and (known is None or known.optional),
                    default=known.default if known is not None and same_type else None,
                    has_default=bool(known is not None and same_type and known.has_default),
                    auto_increment=known.auto_increment if known is not None else False,
                    enum_values=self._enum_labels(rc.type_oid),
                    dimensions=known.dimensions if known is not None else 0,
                    type_modifier=rc.type_modifier,
                )
            )
        table = Table(
            table_id,
            tuple(cols),
            relation_key(rel, catalog.primary_key),
            extra={
                "oid": rel.oid,
                "replica_identity": rel.replica_identity,
                **pgconn.data_collection(table_id),
            },
        )
        self.by_oid[rel.oid] = table
        return table

    def _format_types(self, rel: Relation) -> list[str]:
        """``format_type`` of each column's type *as in the message*: an ALTER COLUMN TYPE
        after the row does not rename the type its values were written with."""
        rows = self.conn.execute(
            _FORMAT_SQL,
            ([rc.type_oid for rc in rel.columns], [rc.type_modifier for rc in rel.columns]),
        ).fetchall()
        return [r[0] or str(rel.columns[i].type_oid) for i, r in enumerate(rows)]

    def _enum_labels(self, oid: int) -> tuple[str, ...] | None:
        found = enum_type(self.registry, oid)
        return None if found is None else self.registry.catalog[found[0]].enum_labels

    def guard(self, rel: Relation, table: Table) -> RowGuard | None:
        """What the rows of this relation version must be checked for, or None when nothing
        (no catalog-only NOT NULL column, no enum column)."""
        keyed = rel.replica_identity in _KEYED_IDENTITIES
        required = tuple(
            c.position
            for c, rc in zip(table.columns, rel.columns, strict=True)
            if not c.optional and not (keyed and rc.is_key)
        )
        enums = []
        for c in table.columns:
            found = enum_type(self.registry, c.native_type or 0)
            if found is not None:
                enums.append((c.position, found[0], found[1]))
        if not required and not enums:
            return None
        return RowGuard(self, table, required, enums)

    def reload_enum(self, oid: int) -> tuple[str, ...]:
        """The labels of enum ``oid`` as the catalog has them now."""
        self.registry.catalog.update(pgconn.load_types(self.conn, [oid]))
        return self.registry.catalog[oid].enum_labels


def relation_key(rel: Relation, catalog_pk: tuple[str, ...]) -> tuple[str, ...]:
    """The key columns of the rows after ``rel``.

    ``DEFAULT``: the flagged columns, i.e. the primary key when the row was written (none if
    the table had none), never today's. ``USING INDEX``: today's primary key only if the
    identity index carries all of it (a delete carries only the index columns, so any other
    key column would be a value the row did not have), else the index columns. ``FULL`` and
    ``NOTHING`` flag no usable key: today's primary key, limited to the message's columns
    (FULL images hold every value, NOTHING publishes no update or delete).
    """
    names = [rc.name for rc in rel.columns]
    flagged = tuple(rc.name for rc in rel.columns if rc.is_key)
    if rel.replica_identity == "d":
        return flagged
    pk = tuple(n for n in catalog_pk if n in names)
    if rel.replica_identity == "i" and not (pk and set(pk) <= set(flagged)):
        return flagged
    return pk


def enum_type(registry: TypeRegistry, oid: int) -> tuple[int, bool] | None:
    """The enum type behind a column type (itself, a domain over it, an array of either) and
    whether values are arrays; None when the type is no enum."""
    array = False
    for _ in range(8):
        info = registry.catalog.get(oid)
        if info is None:
            return None
        if info.base_oid:  # a domain: its typcategory is its base type's ("E" over an enum)
            oid = info.base_oid
        elif info.category == "E":
            return oid, array
        elif info.element_oid and info.category == "A":
            array, oid = True, info.element_oid
        else:
            return None
    return None


def _type_name(formatted: str) -> tuple[str, int | None, int | None]:
    """``numeric(10,2)`` → ("numeric", 10, 2), as ``load_table`` splits the catalog's."""
    base = formatted.split("(")[0].replace("[]", "")
    length, scale = pgconn._length_scale(formatted)
    return base, length, scale


class RowGuard:
    """Checks the rows of one relation version before they are converted, and gives the table
    to register again when one carries what its schema cannot: a NULL in a column only
    today's catalog calls NOT NULL (the column becomes optional), or an enum label added since
    the labels were read (the type is reloaded). Rows need no check after that."""

    __slots__ = ("enums", "required", "schema", "table", "warned")

    def __init__(
        self,
        schema: PgSchema,
        table: Table,
        required: tuple[int, ...],
        enums: list[tuple[int, int, bool]],
    ) -> None:
        self.schema = schema
        self.table = table
        self.required = required
        #: (position, enum type OID, values are arrays)
        self.enums = enums
        self.warned: set[int] = set()

    def admit(self, values: list[Any]) -> Table | None:
        """None when the registered table fits ``values``, else the table to register."""
        if not self.enums and (not self.required or None not in values):
            return None  # the common case, once per row: nothing to look at
        nulls: list[int] = []
        if self.required and None in values:
            nulls = [i for i in self.required if values[i] is None]
        stale = [
            (oid, values[i])
            for i, oid, array in self.enums
            if not self._known(oid, array, values[i])
        ]
        if not nulls and not stale:
            return None
        table = self.table
        cols = list(table.columns)
        if nulls:
            log.info(
                "%s: NULL in column(s) %s, NOT NULL in the catalog now (set after this row was "
                "written): emitted as NULL, the field(s) optional from here on",
                table.id,
                ", ".join(cols[i].name for i in nulls),
            )
            for i in nulls:
                cols[i] = replace(cols[i], optional=True)
            self.required = tuple(i for i in self.required if i not in nulls)
        for oid, value in stale:
            labels = self.schema.reload_enum(oid)
            if value not in labels and oid not in self.warned:
                self.warned.add(oid)
                log.warning("%s: enum value %r is not a label of its type", table.id, value)
            for i, c in enumerate(cols):
                found = enum_type(self.schema.registry, c.native_type or 0)
                if found is not None and found[0] == oid:
                    cols[i] = replace(c, enum_values=labels)
        self.table = replace(table, columns=tuple(cols))
        return self.table

    def _known(self, oid: int, array: bool, value: Any) -> bool:
        if value is None or value is UNAVAILABLE or oid in self.warned:
            return True
        labels = self.schema.registry.catalog[oid].enum_labels
        if not array:
            return value in labels
        return all(v is None or v in labels for v in _flat(parse_array(value, str)))


def _flat(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, list):
            out.extend(_flat(item))
        else:
            out.append(item)
    return out
