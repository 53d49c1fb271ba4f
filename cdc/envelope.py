"""Debezium's change event envelope: ``before``, ``after``, ``source``, ``op``, ``ts_ms``
(and ``transaction`` when transaction metadata is on). Schemas here are built once per table.

Two generations of the envelope exist, chosen per connector by ``envelope.version``:

* ``1.2`` (the default): the seed's contract, Debezium 1.2's user guide field for field.
* ``3``: what Debezium 3.x writes (checked field by field against Debezium Server 3.6): the
  envelope carries ``ts_us``/``ts_ns`` and always declares ``transaction``; the source block
  gains ``sequence``, ``ts_us``, ``ts_ns``, moves ``db`` into the common part and declares
  ``snapshot`` as an ``io.debezium.data.Enum`` string; the envelope is schema version 2 and
  the source struct version 1.

Everything generation-specific is decided here once (schemas, and the function that shapes a
connector's ``source`` values), so the per-event path does not test the generation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cdc.schema.model import (
    INT64,
    OPTIONAL_BOOLEAN,
    OPTIONAL_INT64,
    OPTIONAL_STRING,
    STRING,
    Schema,
    Type,
    primitive,
    struct,
)

BEFORE = "before"
AFTER = "after"
SOURCE = "source"
OP = "op"
TS_MS = "ts_ms"
TS_US = "ts_us"
TS_NS = "ts_ns"
TRANSACTION = "transaction"

#: ``envelope.version`` values: the seed's Debezium 1.2 shape, and Debezium 3.x's.
V1_2 = "1.2"
V3 = "3"
VERSIONS = (V1_2, V3)

TRANSACTION_BLOCK = struct(
    [("id", STRING), ("total_order", INT64), ("data_collection_order", INT64)],
    optional=True,
)
#: Debezium 3.x names and versions the block (SchemaFactory.transactionBlockSchema).
TRANSACTION_BLOCK_V3 = struct(
    [("id", STRING), ("total_order", INT64), ("data_collection_order", INT64)],
    optional=True,
    name="event.block",
    version=1,
)

#: Debezium 3.x's SnapshotRecord values, in its declaration order (the Enum's ``allowed``).
SNAPSHOT_VALUES = (
    "true",
    "first",
    "first_in_data_collection",
    "last_in_data_collection",
    "last",
    "false",
    "incremental",
)
SNAPSHOT_ENUM = primitive(
    Type.STRING,
    optional=True,
    name="io.debezium.data.Enum",
    version=1,
    parameters={"allowed": ",".join(SNAPSHOT_VALUES)},
    default="false",
)


def envelope_schema(
    name: str,
    value_schema: Schema,
    source_schema: Schema,
    *,
    with_transaction: bool = False,
    version: str = V1_2,
    flat: bool = False,
) -> Schema:
    """``flat``: the value's own fields stand in the envelope in place of ``before`` and
    ``after`` (a document table: MongoDB's ``after``/``patch``/``filter`` JSON strings)."""
    fields: list[tuple[str, Schema]]
    if flat:
        fields = [(f.name, f.schema.as_optional()) for f in value_schema.fields]
        fields.append((SOURCE, source_schema))
    else:
        fields = [
            (BEFORE, value_schema.as_optional()),
            (AFTER, value_schema.as_optional()),
            (SOURCE, source_schema),
        ]
    if version == V3:
        # Debezium 3.x declares the transaction block right after source.
        fields += [
            (TRANSACTION, TRANSACTION_BLOCK_V3),
            (OP, STRING),
            (TS_MS, OPTIONAL_INT64),
            (TS_US, OPTIONAL_INT64),
            (TS_NS, OPTIONAL_INT64),
        ]
        return struct(fields, name=name, version=2)
    fields += [(OP, STRING), (TS_MS, OPTIONAL_INT64)]
    if with_transaction:
        fields.append((TRANSACTION, TRANSACTION_BLOCK))
    return struct(fields, name=name)


def source_block_schema(
    name: str, connector_fields: list[tuple[str, Schema]], *, version: str = V1_2
) -> Schema:
    """The fields every connector shares, then its own (the seed's order: version, connector,
    name, ts_ms, snapshot, then db/table/positions). With ``version="3"``, Debezium 3.x's
    common part: version, connector, name, ts_ms, snapshot (an Enum string), db, sequence,
    ts_us, ts_ns; ``db`` is taken out of ``connector_fields`` for it."""
    if version == V3:
        own = [(n, s) for n, s in connector_fields if n != "db"]
        common = [
            ("version", STRING),
            ("connector", STRING),
            ("name", STRING),
            ("ts_ms", INT64),
            ("snapshot", SNAPSHOT_ENUM),
            ("db", STRING),
            ("sequence", OPTIONAL_STRING),
            ("ts_us", OPTIONAL_INT64),
            ("ts_ns", OPTIONAL_INT64),
        ]
        return struct([*common, *own], name=name, version=1)
    common = [
        ("version", STRING),
        ("connector", STRING),
        ("name", STRING),
        ("ts_ms", INT64),
        ("snapshot", OPTIONAL_BOOLEAN.with_(default=False)),
    ]
    return struct([*common, *connector_fields], name=name)


SourceShaper = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]
"""``shape(connector_source, offset)`` → the ``source`` value in schema field order."""

_SNAPSHOT_TEXT: dict[Any, str] = {True: "true", False: "false", None: "false"}


def snapshot_text(flag: Any) -> str:
    """A connector's snapshot flag as Debezium 3.x's enum value: booleans become
    ``"true"``/``"false"``, the enum strings stay as they are."""
    return flag if isinstance(flag, str) else _SNAPSHOT_TEXT[bool(flag)]


def source_shaper(
    source_schema: Schema,
    prefix: dict[str, Any],
    derive: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None,
) -> SourceShaper:
    """The function that turns a connector's ``source`` dict (the 1.2 fields) into a
    Debezium 3.x source value for ``source_schema``, generated as straight-line code once per
    connector: the prefix (version, connector, name) as constants, ``snapshot`` as its enum
    text, ``ts_us``/``ts_ns`` from the connector's ``ts_us`` when it has one (microsecond
    commit times) else from ``ts_ms``, and ``derive(source, offset)`` for values a connector
    keeps in its offset rather than its source block (PostgreSQL's ``sequence``)."""
    ns: dict[str, Any] = {"snap": snapshot_text, "derive": derive}
    lines = ["def shape(s, offset):", "    get = s.get", "    ms = s['ts_ms']"]
    if derive is not None:
        lines.append("    extra = derive(s, offset)")
        lines.append("    us = extra.get('ts_us')")
        lines.append("    xget = extra.get")
    else:
        lines.append("    us = None")
    lines.append("    if us is None:")
    lines.append("        us = get('ts_us')")
    lines.append("        if us is None:")
    lines.append("            us = ms * 1000")
    items = []
    for i, name in enumerate(source_schema.field_names()):
        if name in prefix:
            ns[f"c{i}"] = prefix[name]
            items.append(f"{name!r}: c{i}")
        elif name == "ts_ms":
            items.append("'ts_ms': ms")
        elif name == "ts_us":
            items.append("'ts_us': us")
        elif name == "ts_ns":
            items.append("'ts_ns': us * 1000")
        elif name == "snapshot":
            items.append("'snapshot': snap(get('snapshot'))")
        elif derive is not None:
            items.append(f"{name!r}: xget({name!r}, get({name!r}))")
        else:
            items.append(f"{name!r}: get({name!r})")
    lines.append("    return {" + ", ".join(items) + "}")
    exec(compile("\n".join(lines) + "\n", "<tidemark:source-shaper>", "exec"), ns)
    fn: SourceShaper = ns["shape"]
    return fn
