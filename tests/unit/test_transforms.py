"""SMTs on realistic Debezium change events of a PostgreSQL ``inventory.customers`` table."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from cdc.record import SourceRecord
from cdc.schema import logical
from cdc.schema.model import (
    INT32,
    INT64,
    OPTIONAL_INT64,
    OPTIONAL_STRING,
    STRING,
    Schema,
    Type,
    primitive,
    struct,
)
from cdc.transforms import (
    Predicate,
    Transformation,
    TransformChain,
    TransformConfigError,
    TransformError,
    build_chain,
)
from cdc.transforms.base import compile_java_regex, header_bytes
from cdc.transforms.router import JavaReplacement

TOPIC = "dbserver1.inventory.customers"

ROW = struct(
    [("id", INT32), ("first_name", STRING), ("last_name", STRING), ("email", STRING)],
    name=f"{TOPIC}.Value",
    optional=True,
)
KEY = struct([("id", INT32)], name=f"{TOPIC}.Key")
SOURCE = struct(
    [
        ("version", STRING),
        ("connector", STRING),
        ("name", STRING),
        ("ts_ms", INT64),
        ("snapshot", logical.enum(["true", "last", "false"]).with_(optional=True, default="false")),
        ("db", STRING),
        ("schema", STRING),
        ("table", STRING),
        ("txId", OPTIONAL_INT64),
        ("lsn", OPTIONAL_INT64),
        ("xmin", OPTIONAL_INT64),
    ],
    name="io.debezium.connector.postgresql.Source",
)
TRANSACTION = struct(
    [("id", STRING), ("total_order", INT64), ("data_collection_order", INT64)],
    optional=True,
)


def envelope_schema(row: Schema = ROW, name: str = f"{TOPIC}.Envelope") -> Schema:
    return struct(
        [
            ("before", row),
            ("after", row),
            ("source", SOURCE),
            ("op", STRING),
            ("ts_ms", OPTIONAL_INT64),
            ("transaction", TRANSACTION),
        ],
        name=name,
    )


ENVELOPE = envelope_schema()

SALLY = {"id": 1001, "first_name": "Sally", "last_name": "Thomas", "email": "sally@example.com"}
SALLY_NEW = {**SALLY, "email": "sally.thomas@example.com"}


def source(lsn: int = 33_227_720) -> dict[str, Any]:
    return {
        "version": "1.2.4.Final",
        "connector": "postgresql",
        "name": "dbserver1",
        "ts_ms": 1_559_033_904_863,
        "snapshot": "false",
        "db": "postgres",
        "schema": "inventory",
        "table": "customers",
        "txId": 556,
        "lsn": lsn,
        "xmin": None,
    }


def change(
    op: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    *,
    topic: str = TOPIC,
    schema: Schema = ENVELOPE,
    transaction: dict[str, Any] | None = None,
    headers: list[tuple[str, bytes]] | None = None,
) -> SourceRecord:
    row = after if after is not None else before
    assert row is not None
    value = {
        "before": before,
        "after": after,
        "source": source(),
        "op": op,
        "ts_ms": 1_559_033_904_900,
        "transaction": transaction,
    }
    return SourceRecord(
        topic,
        KEY,
        {"id": row["id"]},
        schema,
        value,
        {"server": "dbserver1"},
        {"lsn": 33_227_720, "txId": 556},
        headers=list(headers or []),
        timestamp_ms=1_559_033_904_900,
    )


def tombstone(key_id: int = 1001, topic: str = TOPIC) -> SourceRecord:
    return SourceRecord(topic, KEY, {"id": key_id}, None, None, {}, {"lsn": 1})


def chain(config: Mapping[str, Any]) -> TransformChain:
    return build_chain(config)


def unwrap(**props: str) -> TransformChain:
    config = {"transforms": "unwrap", "transforms.unwrap.type": "unwrap"}
    config.update({f"transforms.unwrap.{k.replace('_', '.')}": v for k, v in props.items()})
    return chain(config)


def applied(transforms: TransformChain, record: SourceRecord) -> SourceRecord:
    result = transforms.apply(record)
    assert result is not None
    return result


# -- ExtractNewRecordState ---------------------------------------------------------------------


def test_unwrap_create_and_update_emit_the_after_row() -> None:
    smt = chain(
        {
            "transforms": "unwrap",
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        }
    )
    created = applied(smt, change("c", None, SALLY))
    assert created.value == SALLY
    assert created.topic == TOPIC
    assert created.key == {"id": 1001} and created.key_schema is KEY
    assert created.value_schema is not None
    assert created.value_schema.name == f"{TOPIC}.Value"
    assert created.value_schema.optional is False  # Debezium rebuilds it as required
    assert created.value_schema.field_names() == ["id", "first_name", "last_name", "email"]
    assert created.source_offset == {"lsn": 33_227_720, "txId": 556}
    assert created.timestamp_ms == 1_559_033_904_900

    updated = applied(smt, change("u", SALLY, SALLY_NEW))
    assert updated.value == SALLY_NEW
    assert updated.value_schema is created.value_schema  # derived once per envelope schema

    snapshot_read = applied(smt, change("r", None, SALLY))
    assert snapshot_read.value == SALLY


def test_unwrap_default_drops_deletes_and_tombstones() -> None:
    smt = unwrap()
    assert smt.apply(change("d", SALLY, None)) is None
    assert smt.apply(tombstone()) is None


@pytest.mark.parametrize("version", ["3", " 3 "])
def test_unwrap_default_under_debezium_3_turns_a_delete_into_a_null_value(version: str) -> None:
    """Debezium 3.x's default ``delete.tombstone.handling.mode=tombstone``: the delete is a
    null value (with the row schema), which the JDBC sink applies as a delete; the tombstone
    after it is dropped. Without it, a 3.x pipeline would lose every delete downstream."""
    smt = build_chain(
        {
            "envelope.version": version,
            "transforms": "unwrap",
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        }
    )
    deleted = applied(smt, change("d", SALLY, None))
    assert deleted.value is None and deleted.value_schema is ROW
    assert smt.apply(tombstone()) is None
    # the 1.x keys still decide when set
    legacy = build_chain(
        {
            "envelope.version": "3",
            "transforms": "unwrap",
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            "transforms.unwrap.delete.handling.mode": "drop",
        }
    )
    assert legacy.apply(change("d", SALLY, None)) is None


def test_unwrap_keeps_tombstones_when_asked() -> None:
    smt = unwrap(drop_tombstones="false")
    record = tombstone()
    assert smt.apply(record) is record
    assert smt.apply(change("d", SALLY, None)) is None


def test_unwrap_delete_mode_none_emits_null_value_with_row_schema() -> None:
    smt = unwrap(**{"delete_handling_mode": "none", "drop_tombstones": "false"})
    deleted = applied(smt, change("d", SALLY, None))
    assert deleted.value is None
    assert deleted.value_schema is ROW
    assert deleted.key == {"id": 1001}
    assert applied(smt, tombstone()).value is None


def test_unwrap_delete_mode_rewrite_marks_rows_deleted() -> None:
    smt = unwrap(delete_handling_mode="rewrite")
    created = applied(smt, change("c", None, SALLY))
    assert created.value == {**SALLY, "__deleted": "false"}
    deleted = applied(smt, change("d", SALLY, None))
    assert deleted.value == {**SALLY, "__deleted": "true"}
    assert deleted.value_schema is created.value_schema
    schema = created.value_schema
    assert schema is not None
    assert schema.field_names()[-1] == "__deleted"
    deleted_field = schema.field("__deleted")
    assert deleted_field is not None and deleted_field.schema == OPTIONAL_STRING
    assert smt.apply(tombstone()) is None  # drop.tombstones still defaults to true
    assert SALLY == {
        "id": 1001,
        "first_name": "Sally",
        "last_name": "Thomas",
        "email": "sally@example.com",
    }  # the envelope's row is copied, never modified


def test_unwrap_newer_delete_tombstone_handling_mode_is_mapped() -> None:
    smt = unwrap(**{"delete_tombstone_handling_mode": "rewrite-with-tombstone"})
    assert applied(smt, change("d", SALLY, None)).value == {**SALLY, "__deleted": "true"}
    assert smt.apply(tombstone()) is not None

    to_tombstone = unwrap(**{"delete_tombstone_handling_mode": "delete-to-tombstone"})
    deleted = applied(to_tombstone, change("d", SALLY, None))
    assert deleted.value is None and deleted.value_schema is None
    assert to_tombstone.apply(tombstone()) is None


def test_unwrap_add_fields_appends_optional_metadata_fields() -> None:
    smt = unwrap(add_fields="op,table,lsn,source.ts_ms,ts_ms", delete_handling_mode="rewrite")
    created = applied(smt, change("c", None, SALLY))
    assert created.value == {
        **SALLY,
        "__op": "c",
        "__table": "customers",
        "__lsn": 33_227_720,
        "__source_ts_ms": 1_559_033_904_863,
        "__ts_ms": 1_559_033_904_900,
        "__deleted": "false",
    }
    schema = created.value_schema
    assert schema is not None
    assert schema.field_names() == [
        "id",
        "first_name",
        "last_name",
        "email",
        "__op",
        "__table",
        "__lsn",
        "__source_ts_ms",
        "__ts_ms",
        "__deleted",
    ]
    for name, type_ in [
        ("__op", Type.STRING),
        ("__lsn", Type.INT64),
        ("__source_ts_ms", Type.INT64),
    ]:
        field = schema.field(name)
        assert field is not None
        assert field.schema.type is type_ and field.schema.optional

    deleted = applied(smt, change("d", SALLY, None))
    assert deleted.value is not None
    assert deleted.value["__op"] == "d" and deleted.value["__deleted"] == "true"


def test_unwrap_add_fields_prefix_rename_and_transaction_fields() -> None:
    smt = unwrap(add_fields="source.ts_ms:event_ts,id,total_order", add_fields_prefix="cdc_")
    tx = {"id": "556", "total_order": 3, "data_collection_order": 1}
    created = applied(smt, change("c", None, SALLY, transaction=tx))
    assert created.value == {
        **SALLY,
        "cdc_event_ts": 1_559_033_904_863,
        "cdc_id": "556",
        "cdc_total_order": 3,
    }
    # Snapshot events carry no transaction block: the fields are present and null.
    read = applied(smt, change("r", None, SALLY))
    assert read.value is not None
    assert read.value["cdc_id"] is None and read.value["cdc_total_order"] is None


def test_unwrap_unknown_add_field_is_skipped_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    smt = unwrap(add_fields="op,source.gtid")
    with caplog.at_level(logging.WARNING, logger="tidemark.transforms"):
        first = applied(smt, change("c", None, SALLY))
        applied(smt, change("u", SALLY, SALLY_NEW))
    assert first.value == {**SALLY, "__op": "c"}
    warnings = [r for r in caplog.records if "source.gtid" in r.getMessage()]
    assert len(warnings) == 1


def test_unwrap_add_headers() -> None:
    smt = unwrap(add_headers="op,db,source.ts_ms,lsn", drop_tombstones="false")
    original = change("c", None, SALLY, headers=[("trace", b"abc")])
    created = applied(smt, original)
    assert created.headers == [
        ("trace", b"abc"),
        ("__op", b"c"),
        ("__db", b"postgres"),
        ("__source_ts_ms", b"1559033904863"),
        ("__lsn", b"33227720"),
    ]
    assert original.headers == [("trace", b"abc")]  # the input record is not mutated
    assert created.value == SALLY  # headers do not change the value
    # A kept tombstone gets the delete marker only.
    assert applied(smt, tombstone()).headers == [("__op", b"d")]

    prefixed = unwrap(add_headers="op", add_headers_prefix="dbz.")
    assert applied(prefixed, change("u", SALLY, SALLY_NEW)).headers == [("dbz.op", b"u")]


def test_unwrap_route_by_field_uses_after_or_before() -> None:
    smt = unwrap(route_by_field="last_name", delete_handling_mode="rewrite")
    assert applied(smt, change("c", None, SALLY)).topic == "Thomas"
    assert applied(smt, change("d", SALLY, None)).topic == "Thomas"


def test_unwrap_passes_non_envelopes_and_drops_truncates() -> None:
    smt = unwrap()
    heartbeat_schema = struct([("ts_ms", INT64)], name="io.debezium.connector.common.Heartbeat")
    heartbeat = SourceRecord(
        "__debezium-heartbeat.dbserver1", None, None, heartbeat_schema, {"ts_ms": 1}, {}, {}
    )
    assert smt.apply(heartbeat) is heartbeat
    truncate = change("t", None, SALLY)
    assert truncate.value is not None
    truncate.value["after"] = None
    assert smt.apply(truncate) is None


# -- RegexRouter -------------------------------------------------------------------------------


def regex_router(regex: str, replacement: str) -> TransformChain:
    return chain(
        {
            "transforms": "route",
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": regex,
            "transforms.route.replacement": replacement,
        }
    )


def test_regex_router_rewrites_whole_topic_matches() -> None:
    smt = regex_router(r"([^.]+)\.([^.]+)\.([^.]+)", "$3")
    record = change("c", None, SALLY)
    routed = applied(smt, record)
    assert routed.topic == "customers"
    assert routed.value is record.value and routed.key is record.key
    other = change("c", None, SALLY, topic="heartbeats")
    assert smt.apply(other) is other  # no full match: untouched


def test_regex_router_java_replacement_syntax() -> None:
    assert applied(
        regex_router(r"(?<server>[^.]+)\..*", r"${server}-\$all"), change("c", None, SALLY)
    ).topic == ("dbserver1-$all")
    # Java's replaceFirst after matches(): the first find() wins, the rest is kept.
    assert applied(
        regex_router("dbserver1|dbserver1.inventory.customers", "x"), change("c", None, SALLY)
    ).topic == ("x.inventory.customers")


def test_java_replacement_group_numbers_take_digits_while_groups_exist() -> None:
    pattern = compile_java_regex("(a)(b)")
    match = pattern.fullmatch("ab")
    assert match is not None
    assert JavaReplacement("$21", pattern)(match) == "b1"
    assert JavaReplacement("$1$2", pattern)(match) == "ab"
    with pytest.raises(ValueError, match="no group 3"):
        JavaReplacement("$3", pattern)
    with pytest.raises(ValueError, match="illegal group reference"):
        JavaReplacement("$x", pattern)


def test_compile_java_regex_named_groups_and_backrefs() -> None:
    pattern = compile_java_regex(r"(?<word>\w+)-\k<word>(?<=o)[(?<]")
    assert pattern.fullmatch("foo-foo<") is not None
    assert pattern.groupindex == {"word": 1}


# -- ByLogicalTableRouter ----------------------------------------------------------------------


def shard_router(**props: str) -> TransformChain:
    config = {
        "transforms": "reroute",
        "transforms.reroute.type": "io.debezium.transforms.ByLogicalTableRouter",
        "transforms.reroute.topic.regex": r"(.*)customers_shard(.*)",
        "transforms.reroute.topic.replacement": "$1customers_all_shards",
    }
    config.update({f"transforms.reroute.{k}": v for k, v in props.items()})
    return chain(config)


def shard_schema(shard: int) -> Schema:
    row = ROW.with_(name=f"dbserver1.inventory.customers_shard{shard}.Value")
    return envelope_schema(row, f"dbserver1.inventory.customers_shard{shard}.Envelope")


def test_by_logical_table_router_merges_shards_with_unique_keys() -> None:
    smt = shard_router()
    merged = "dbserver1.inventory.customers_all_shards"
    records = [
        change(
            "c",
            None,
            SALLY,
            topic=f"dbserver1.inventory.customers_shard{n}",
            schema=shard_schema(n),
        )
        for n in (1, 2)
    ]
    out = [applied(smt, r) for r in records]
    assert [r.topic for r in out] == [merged, merged]
    assert out[0].key == {
        "id": 1001,
        "__dbz__physicalTableIdentifier": "dbserver1.inventory.customers_shard1",
    }
    assert out[1].key == {
        "id": 1001,
        "__dbz__physicalTableIdentifier": "dbserver1.inventory.customers_shard2",
    }
    key_schema = out[0].key_schema
    assert key_schema is not None and key_schema.name == f"{merged}.Key"
    assert key_schema.field_names() == ["id", "__dbz__physicalTableIdentifier"]
    assert out[1].key_schema is key_schema  # cached per (schema, topic)
    value_schema = out[0].value_schema
    assert value_schema is not None and value_schema.name == f"{merged}.Envelope"
    for image in ("before", "after"):
        field = value_schema.field(image)
        assert field is not None
        assert field.schema.name == f"{merged}.Value" and field.schema.optional
    assert out[0].value is records[0].value  # values are dicts: nothing to copy
    assert records[0].key == {"id": 1001}

    deleted_tombstone = applied(smt, tombstone(topic="dbserver1.inventory.customers_shard2"))
    assert deleted_tombstone.topic == merged and deleted_tombstone.value is None
    assert deleted_tombstone.key == {
        "id": 1001,
        "__dbz__physicalTableIdentifier": "dbserver1.inventory.customers_shard2",
    }

    elsewhere = change("c", None, SALLY)
    assert smt.apply(elsewhere) is elsewhere


def test_by_logical_table_router_key_options() -> None:
    plain = shard_router(**{"key.enforce.uniqueness": "false"})
    routed = applied(
        plain,
        change(
            "c", None, SALLY, topic="dbserver1.inventory.customers_shard1", schema=shard_schema(1)
        ),
    )
    assert routed.key == {"id": 1001}
    assert routed.key_schema is not None and routed.key_schema.field_names() == ["id"]

    custom = shard_router(
        **{
            "key.field.name": "shard",
            "key.field.regex": r".*customers_shard(\d+)",
            "key.field.replacement": "$1",
        }
    )
    routed = applied(
        custom,
        change(
            "c", None, SALLY, topic="dbserver1.inventory.customers_shard7", schema=shard_schema(7)
        ),
    )
    assert routed.key == {"id": 1001, "shard": "7"}


# -- Filter ------------------------------------------------------------------------------------


def content_filter(condition: str, **props: str) -> TransformChain:
    config = {
        "transforms": "filter",
        "transforms.filter.type": "io.debezium.transforms.Filter",
        "transforms.filter.language": "python",
        "transforms.filter.condition": condition,
    }
    config.update({f"transforms.filter.{k}": v for k, v in props.items()})
    return chain(config)


def test_filter_keeps_records_whose_condition_is_true() -> None:
    smt = content_filter("value['op'] == 'u' and value['after']['email'].endswith('@example.com')")
    update = change("u", SALLY, SALLY_NEW)
    assert smt.apply(update) is update
    assert smt.apply(change("c", None, SALLY)) is None
    other = change("u", SALLY, {**SALLY, "email": "sally@elsewhere.org"})
    assert smt.apply(other) is None


def test_filter_sees_key_topic_schemas_and_headers() -> None:
    smt = content_filter(
        "key['id'] > 1000 and topic.endswith('customers') and valueSchema.name.endswith('Envelope')"
        " and keySchema.name.endswith('.Key') and headers.get('tenant') == 'acme'"
    )
    assert smt.apply(change("c", None, SALLY, headers=[("tenant", b"acme")])) is not None
    assert smt.apply(change("c", None, SALLY, headers=[("tenant", b"other")])) is None


def test_filter_topic_regex_and_null_handling() -> None:
    only_customers = content_filter("False", **{"topic.regex": r".*\.orders"})
    record = change("c", None, SALLY)
    assert only_customers.apply(record) is record  # topic not selected: untouched

    keep = content_filter("value['op'] == 'c'")
    assert keep.apply(tombstone()) is not None
    drop = content_filter("True", **{"null.handling.mode": "drop"})
    assert drop.apply(tombstone()) is None
    evaluate = content_filter(
        "value is None and key['id'] == 1001", **{"null.handling.mode": "evaluate"}
    )
    assert evaluate.apply(tombstone()) is not None
    assert evaluate.apply(tombstone(key_id=7)) is None


def test_filter_runtime_errors_fail_loudly() -> None:
    with pytest.raises(TransformError, match="must return True or False"):
        content_filter("value['op']").apply(change("c", None, SALLY))
    with pytest.raises(TransformError, match="KeyError"):
        content_filter("value['nope'] == 1").apply(change("c", None, SALLY))
    with pytest.raises(TransformError, match="NameError"):
        content_filter("open('/etc/passwd') is None").apply(change("c", None, SALLY))


def test_filter_config_errors() -> None:
    with pytest.raises(
        TransformConfigError,
        match=r"transforms\.filter\.language: 'jsr223\.groovy' is not supported",
    ):
        chain(
            {
                "transforms": "filter",
                "transforms.filter.type": "filter",
                "transforms.filter.language": "jsr223.groovy",
                "transforms.filter.condition": "value.op == 'u'",
            }
        )
    with pytest.raises(
        TransformConfigError, match=r"transforms\.filter\.condition: names starting with '_'"
    ):
        content_filter("().__class__.__bases__ is None")
    # the ways around that rule: str.format reads attributes named in its format string,
    # generators and frames reach other modules' globals
    for escape, attr in (
        ('"{0.field.__globals__}".format(valueSchema) == ""', "format"),
        ('"{0.field}".format_map({"0": valueSchema}) == ""', "format_map"),
        ("[g.gi_frame for g in [(x for x in [1])]] == []", "gi_frame"),
        ("key.mro() == []", "mro"),
    ):
        with pytest.raises(TransformConfigError, match=f"the attribute '{attr}' is not allowed"):
            content_filter(escape)
    with pytest.raises(
        TransformConfigError, match=r"transforms\.filter\.condition: not a Python expression"
    ):
        content_filter("value.op ==")


# -- outbox EventRouter ------------------------------------------------------------------------

OUTBOX_TOPIC = "dbserver1.public.outboxevent"
OUTBOX_ROW = struct(
    [
        ("id", logical.uuid()),
        ("aggregatetype", STRING),
        ("aggregateid", STRING),
        ("type", STRING),
        ("tenant", primitive(Type.STRING, optional=True)),
        ("created_at", logical.micro_timestamp()),
        ("payload", logical.json().as_optional()),
    ],
    name=f"{OUTBOX_TOPIC}.Value",
    optional=True,
)
OUTBOX_ENVELOPE = envelope_schema(OUTBOX_ROW, f"{OUTBOX_TOPIC}.Envelope")
EVENT_ID = "406c07f3-26f0-4eea-a50c-109940064b8f"
ORDER_PAYLOAD = (
    '{"id": 1, "customerId": 1001, "lines": [{"item": "Debezium in Action", "qty": 2}],'
    ' "total": 39.9}'
)


def outbox_row(**overrides: Any) -> dict[str, Any]:
    row = {
        "id": EVENT_ID,
        "aggregatetype": "Order",
        "aggregateid": "1",
        "type": "OrderCreated",
        "tenant": "acme",
        "created_at": 1_559_033_904_123_456,
        "payload": ORDER_PAYLOAD,
    }
    row.update(overrides)
    return row


def outbox_change(op: str, row: dict[str, Any] | None = None) -> SourceRecord:
    row = row if row is not None else outbox_row()
    before, after = (row, None) if op == "d" else (None, row)
    return SourceRecord(
        OUTBOX_TOPIC,
        struct([("id", logical.uuid())], name=f"{OUTBOX_TOPIC}.Key"),
        {"id": row["id"]},
        OUTBOX_ENVELOPE,
        {
            "before": before,
            "after": after,
            "source": source(),
            "op": op,
            "ts_ms": 1_559_033_905_000,
            "transaction": None,
        },
        {"server": "dbserver1"},
        {"lsn": 42},
    )


def outbox(**props: str) -> TransformChain:
    config = {
        "transforms": "outbox",
        "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
    }
    config.update({f"transforms.outbox.{k}": v for k, v in props.items()})
    return chain(config)


def test_outbox_routes_inserts_as_events() -> None:
    event = applied(outbox(), outbox_change("c"))
    assert event.topic == "outbox.event.Order"
    assert event.key == "1" and event.key_schema == STRING
    assert event.value == ORDER_PAYLOAD
    assert event.value_schema == logical.json().as_optional()
    assert event.headers == [("id", EVENT_ID.encode())]
    assert event.timestamp_ms == 1_559_033_905_000
    assert event.source_offset == {"lsn": 42}
    assert applied(outbox(), outbox_change("r")).topic == "outbox.event.Order"


def test_outbox_additional_placement_header_envelope_and_timestamp() -> None:
    smt = outbox(
        **{
            "table.fields.additional.placement": (
                "type:header:eventType,tenant:envelope,aggregateid:envelope:aggregate"
            ),
            "table.field.event.timestamp": "created_at",
            "route.topic.replacement": "${routedByValue}.events",
        }
    )
    event = applied(smt, outbox_change("c"))
    assert event.topic == "Order.events"
    assert event.headers == [("id", EVENT_ID.encode()), ("eventType", b"OrderCreated")]
    assert event.value == {"payload": ORDER_PAYLOAD, "tenant": "acme", "aggregate": "1"}
    schema = event.value_schema
    assert schema is not None
    assert schema.name == "dbserver1.public.outboxevent.Order.Value"
    assert schema.field_names() == ["payload", "tenant", "aggregate"]
    assert event.timestamp_ms == 1_559_033_904_123  # MicroTimestamp column, in ms
    assert applied(smt, outbox_change("c")).value_schema is schema


def test_outbox_ignores_deletes_and_reports_updates(caplog: pytest.LogCaptureFixture) -> None:
    smt = outbox()
    with caplog.at_level(logging.DEBUG, logger="tidemark.transforms"):
        assert smt.apply(outbox_change("d")) is None
        assert smt.apply(tombstone(topic=OUTBOX_TOPIC)) is None
        assert smt.apply(outbox_change("u")) is None
    levels = {r.levelno for r in caplog.records if "update" in r.getMessage()}
    assert levels == {logging.WARNING}
    with pytest.raises(TransformError, match="unexpected update"):
        outbox(**{"debezium.op.invalid.behavior": "fatal"}).apply(outbox_change("u"))


def test_outbox_tombstone_on_empty_payload_and_json_expansion() -> None:
    smt = outbox(**{"route.tombstone.on.empty.payload": "true"})
    tomb = applied(smt, outbox_change("c", outbox_row(payload=None)))
    assert tomb.value is None and tomb.value_schema is None and tomb.key == "1"

    expanded = applied(outbox(**{"table.expand.json.payload": "true"}), outbox_change("c"))
    assert expanded.value == {
        "id": 1,
        "customerId": 1001,
        "lines": [{"item": "Debezium in Action", "qty": 2}],
        "total": 39.9,
    }
    schema = expanded.value_schema
    assert schema is not None and schema.type is Type.STRUCT and schema.name == "payload"
    lines = schema.field("lines")
    assert lines is not None and lines.schema.value_schema is not None
    assert lines.schema.value_schema.field_names() == ["item", "qty"]

    not_json = applied(
        outbox(**{"table.expand.json.payload": "true"}),
        outbox_change("c", outbox_row(payload="plain")),
    )
    assert not_json.value == "plain"


def test_outbox_missing_column_fails_with_its_name() -> None:
    with pytest.raises(TransformError, match="no payload column 'body'"):
        outbox(**{"table.field.event.payload": "body"}).apply(outbox_change("c"))


# -- predicates --------------------------------------------------------------------------------


def test_predicates_gate_transforms_and_negate() -> None:
    config = {
        "transforms": "unwrap,route",
        "transforms.unwrap.type": "unwrap",
        "transforms.unwrap.drop.tombstones": "false",
        "transforms.unwrap.predicate": "isOutbox",
        "transforms.unwrap.negate": "true",
        "transforms.route.type": "route",
        "transforms.route.regex": ".*",
        "transforms.route.replacement": "tombstones",
        "transforms.route.predicate": "isTombstone",
        "predicates": "isOutbox,isTombstone",
        "predicates.isOutbox.type": (
            "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"
        ),
        "predicates.isOutbox.pattern": r".*\.outboxevent",
        "predicates.isTombstone.type": "record_is_tombstone",
    }
    smt = chain(config)
    assert smt.aliases == ("unwrap", "route")
    assert applied(smt, change("c", None, SALLY)).value == SALLY  # unwrapped
    raw = outbox_change("c")
    assert smt.apply(raw) is raw  # predicate true, negated: not unwrapped
    assert applied(smt, tombstone()).topic == "tombstones"


def test_has_header_key_predicate() -> None:
    smt = chain(
        {
            "transforms": "drop",
            "transforms.drop.type": "filter",
            "transforms.drop.language": "python",
            "transforms.drop.condition": "False",
            "transforms.drop.predicate": "replayed",
            "predicates": "replayed",
            "predicates.replayed.type": "has_header_key",
            "predicates.replayed.name": "replay",
        }
    )
    assert smt.apply(change("c", None, SALLY, headers=[("replay", b"")])) is None
    assert smt.apply(change("c", None, SALLY)) is not None


# -- chain and configuration -------------------------------------------------------------------


def test_chain_without_transforms_returns_the_same_record() -> None:
    record = change("c", None, SALLY)
    for config in ({}, {"transforms": ""}, {"connector.class": "postgres", "transforms": " "}):
        smt = build_chain(config)
        assert len(smt) == 0
        assert smt.apply(record) is record
    assert build_chain({}).apply_all([record]) == [record]


class Spy(Transformation):
    """A user-written transform, loaded by ``module:Class`` path."""

    calls: list[str] = []

    def configure(self, config: Mapping[str, str]) -> None:
        Spy.calls.append(f"configure {dict(config)}")

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        Spy.calls.append(record.topic)
        return record


def test_chain_stops_at_the_first_drop_and_loads_user_transforms() -> None:
    Spy.calls = []
    spy_chain = chain(
        {
            "transforms": "unwrap,spy",
            "transforms.unwrap.type": "unwrap",
            "transforms.spy.type": f"{__name__}:Spy",
            "transforms.spy.level": "3",
        }
    )
    out = spy_chain.apply_all([tombstone(), change("c", None, SALLY)])
    assert [r.value for r in out] == [SALLY]
    assert Spy.calls == [f"configure {{'type': '{__name__}:Spy', 'level': '3'}}", TOPIC]


def test_config_errors_name_every_full_key_at_once() -> None:
    with pytest.raises(TransformConfigError) as caught:
        chain(
            {
                "transforms": "unwrap,route,mystery,filter",
                "transforms.unwrap.type": "unwrap",
                "transforms.unwrap.delete.handling.mode": "bogus",
                "transforms.unwrap.drop.tombstones": "maybe",
                "transforms.route.type": "route",
                "transforms.route.regex": "([a-z]+",
                "transforms.mystery.type": "com.example.smt.Mystery",
                "transforms.filter.type": "filter",
                "transforms.filter.language": "python",
                "transforms.filter.negate": "true",
            }
        )
    errors = dict(caught.value.errors)
    assert errors["transforms.unwrap.delete.handling.mode"] == "must be one of drop, rewrite, none"
    assert errors["transforms.unwrap.drop.tombstones"].startswith("must be true or false")
    assert errors["transforms.route.regex"].startswith("invalid regular expression")
    assert errors["transforms.route.replacement"] == "missing required configuration"
    assert errors["transforms.mystery.type"].startswith("unknown transformation type")
    assert errors["transforms.filter.condition"] == "missing required configuration"
    assert "no transforms.filter.predicate" in errors["transforms.filter.negate"]
    message = str(caught.value)
    assert "transforms.unwrap.delete.handling.mode: must be one of drop, rewrite, none" in message
    assert isinstance(caught.value, ValueError)


def test_config_errors_for_predicates_and_aliases() -> None:
    with pytest.raises(TransformConfigError) as caught:
        chain(
            {
                "transforms": "a,a",
                "transforms.a.type": "unwrap",
                "transforms.a.predicate": "missing",
                "predicates": "p",
                "predicates.p.type": "topic_name_matches",
            }
        )
    errors = dict(caught.value.errors)
    assert errors["transforms"] == "duplicate alias a"
    assert "unknown predicate 'missing'" in errors["transforms.a.predicate"]
    assert errors["predicates.p.pattern"] == "missing required configuration"

    with pytest.raises(
        TransformConfigError, match=r"^transforms\.x\.type: missing required configuration$"
    ):
        chain({"transforms": "x"})
    with pytest.raises(
        TransformConfigError, match=r"transforms\.route\.replacement: invalid replacement"
    ):
        regex_router("(a)", "$2")
    with pytest.raises(
        TransformConfigError, match=r"transforms\.unwrap\.add\.fields: unexpected field name"
    ):
        unwrap(add_fields="source.ts_ms.extra")
    with pytest.raises(
        TransformConfigError, match=r"transforms\.outbox\.table\.fields\.additional\.placement"
    ):
        outbox(**{"table.fields.additional.placement": "type:body"})


def test_predicate_and_transformation_are_abstract() -> None:
    with pytest.raises(TypeError):
        Predicate()  # type: ignore[abstract]
    with pytest.raises(TypeError):
        Transformation()  # type: ignore[abstract]


def test_header_bytes_follow_simple_header_converter() -> None:
    assert header_bytes("c") == b"c"
    assert header_bytes(12) == b"12"
    assert header_bytes(True) == b"true"
    assert header_bytes(None) == b""
    assert header_bytes({"a": [1, 2]}) == b'{"a":[1,2]}'
    assert header_bytes(b"\x00\x01") == b"\x00\x01"
    # Double.toString, as SimpleHeaderConverter writes a FLOAT64 header
    assert header_bytes(1e10) == b"1.0E10"
    assert header_bytes(2.5) == b"2.5"
    assert header_bytes(0.0001) == b"1.0E-4"


def test_unwrap_field_name_collision_fails_with_the_schema_name() -> None:
    row = struct([("id", INT32), ("__op", STRING)], name=f"{TOPIC}.Value", optional=True)
    record = change("c", None, {"id": 1, "__op": "x"}, schema=envelope_schema(row))
    with pytest.raises(TransformError, match=rf"cannot unwrap {TOPIC}\.Envelope"):
        unwrap(add_fields="op").apply(record)


def test_by_logical_table_router_adjusts_schema_names_for_avro() -> None:
    config = {
        "transforms": "reroute",
        "transforms.reroute.type": "reroute",
        "transforms.reroute.topic.regex": ".*",
        "transforms.reroute.topic.replacement": "all-customers",
    }
    routed = applied(chain(config), change("c", None, SALLY))
    assert routed.topic == "all-customers"
    assert routed.key_schema is not None and routed.key_schema.name == "all_customers.Key"
    assert routed.value_schema is not None
    assert routed.value_schema.name == "all_customers.Envelope"

    config["transforms.reroute.schema.name.adjustment.mode"] = "none"
    routed = applied(chain(config), change("c", None, SALLY))
    assert routed.key_schema is not None and routed.key_schema.name == "all-customers.Key"


def test_outbox_partition_placement_schema_version_and_error_behaviour(
    caplog: pytest.LogCaptureFixture,
) -> None:
    row_schema = struct(
        [
            ("id", STRING),
            ("aggregatetype", STRING),
            ("aggregateid", STRING),
            ("payload", STRING),
            ("shard", INT32),
            ("version", INT32),
        ],
        name=f"{OUTBOX_TOPIC}.Value",
        optional=True,
    )
    row = {
        "id": "e1",
        "aggregatetype": "Customer",
        "aggregateid": "1001",
        "payload": "{}",
        "shard": 3,
        "version": 2,
    }
    record = SourceRecord(
        OUTBOX_TOPIC,
        None,
        None,
        envelope_schema(row_schema, f"{OUTBOX_TOPIC}.Envelope"),
        {"before": None, "after": row, "source": source(), "op": "c", "ts_ms": 5},
        {},
        {},
    )
    smt = outbox(
        **{
            "table.fields.additional.placement": "shard:partition,version:envelope",
            "table.field.event.schema.version": "version",
            "table.op.invalid.behavior": "error",
        }
    )
    event = applied(smt, record)
    assert event.kafka_partition == 3
    assert event.topic == "outbox.event.Customer"
    assert event.value == {"payload": "{}", "version": 2}
    assert event.value_schema is not None and event.value_schema.version == 2
    assert event.value_schema.name == f"{OUTBOX_TOPIC}.Customer.Value"

    assert record.value is not None
    update = record.with_(value={**record.value, "op": "u", "before": row})
    with caplog.at_level(logging.WARNING, logger="tidemark.transforms"):
        assert smt.apply(update) is None
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
