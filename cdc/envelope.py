"""Debezium's change event envelope: ``before``, ``after``, ``source``, ``op``, ``ts_ms``
(and ``transaction`` when transaction metadata is on). Schemas here are built once per table."""

from __future__ import annotations

from cdc.schema.model import INT64, OPTIONAL_BOOLEAN, OPTIONAL_INT64, STRING, Schema, struct

BEFORE = "before"
AFTER = "after"
SOURCE = "source"
OP = "op"
TS_MS = "ts_ms"
TRANSACTION = "transaction"

TRANSACTION_BLOCK = struct(
    [("id", STRING), ("total_order", INT64), ("data_collection_order", INT64)],
    optional=True,
)


def envelope_schema(
    name: str, value_schema: Schema, source_schema: Schema, *, with_transaction: bool = False
) -> Schema:
    fields: list[tuple[str, Schema]] = [
        (BEFORE, value_schema.as_optional()),
        (AFTER, value_schema.as_optional()),
        (SOURCE, source_schema),
        (OP, STRING),
        (TS_MS, OPTIONAL_INT64),
    ]
    if with_transaction:
        fields.append((TRANSACTION, TRANSACTION_BLOCK))
    return struct(fields, name=name)


def source_block_schema(name: str, connector_fields: list[tuple[str, Schema]]) -> Schema:
    """The fields every connector shares, then its own (the seed's order: version, connector,
    name, ts_ms, snapshot, then db/table/positions)."""
    common: list[tuple[str, Schema]] = [
        ("version", STRING),
        ("connector", STRING),
        ("name", STRING),
        ("ts_ms", INT64),
        ("snapshot", OPTIONAL_BOOLEAN.with_(default=False)),
    ]
    return struct([*common, *connector_fields], name=name)
