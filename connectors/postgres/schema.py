"""The connector's view of table structure: catalog metadata merged with Relation messages.

Column names, order and types come from the stream's Relation messages (they describe the
rows that follow, even after later DDL); nullability, defaults and the primary key come from
the catalog, which the replication stream does not carry (the seed's "JDBC side channel").
"""

from __future__ import annotations

from typing import Any

from cdc.spi import Column, Table, TableId
from connectors.postgres import connection as pgconn
from connectors.postgres.pgoutput import Relation
from connectors.postgres.types import PostgresValueConverters, TypeRegistry


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
        """The table as the Relation message describes it, enriched from the catalog."""
        table_id = TableId(self.dbname, rel.namespace, rel.name)
        catalog = pgconn.load_table(self.conn, table_id, rel.oid)
        by_name = {c.name: c for c in catalog.columns}
        cols = []
        for i, rc in enumerate(rel.columns):
            known = by_name.get(rc.name)
            cols.append(
                Column(
                    name=rc.name,
                    position=i,
                    type_name=known.type_name if known else str(rc.type_oid),
                    native_type=rc.type_oid,
                    length=known.length if known else None,
                    scale=known.scale if known else None,
                    optional=known.optional if known else True,
                    default=known.default if known else None,
                    has_default=known.has_default if known else False,
                    auto_increment=known.auto_increment if known else False,
                    dimensions=known.dimensions if known else 0,
                    type_modifier=rc.type_modifier,
                )
            )
        names = {c.name for c in cols}
        pk = tuple(n for n in catalog.primary_key if n in names)
        if not pk and rel.replica_identity == "i":
            # REPLICA IDENTITY USING INDEX without a primary key: the index columns are the key
            pk = tuple(rc.name for rc in rel.columns if rc.is_key)
        table = Table(
            table_id,
            tuple(cols),
            pk,
            extra={"oid": rel.oid, "replica_identity": rel.replica_identity},
        )
        self._ensure_types([c.native_type or 0 for c in cols])
        self.by_oid[rel.oid] = table
        return table
