"""Debezium's PartitionRouting and the JVM hashes it routes by.

The hash values below are the JVM's, worked out from the Java definitions (``String.hashCode``
is documented as s[0]*31^(n-1) + ... ; ``BigDecimal`` as 31*unscaled.hashCode() + scale);
``tests/integration/test_java_hash_jvm.py`` checks many more against a running JVM, and
``tests/integration/test_debezium_smt_parity.py`` the whole transform against Debezium's.
"""

from __future__ import annotations

import decimal

import pytest

from cdc.record import SourceRecord
from cdc.schema import logical
from cdc.schema.model import (
    BOOLEAN,
    BYTES,
    FLOAT64,
    INT32,
    INT64,
    STRING,
    Schema,
    array,
    struct,
)
from cdc.transforms import TransformConfigError, TransformError, build_chain
from cdc.transforms.java_hash import java_hash, murmur_hash
from cdc.transforms.partition_routing import PartitionRouting


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [
        (STRING, "", 0),
        (STRING, "a", 97),
        (STRING, "hello", 99162322),
        (STRING, "😀", 0xD83D * 31 + 0xDE00),  # two UTF-16 units
        (INT32, -7, -7),
        (INT64, 1 << 32, 1),
        (INT64, -1, 0),
        (BOOLEAN, True, 1231),
        (BOOLEAN, False, 1237),
        (FLOAT64, 1.0, 1072693248),
        (logical.connect_decimal(2), decimal.Decimal("10.50"), 31 * 1050 + 2),
        (logical.connect_decimal(2), decimal.Decimal("-10.5"), 31 * -1050 + 2),
        (BYTES, b"\x01\x02", 1024),  # ByteBuffer: ((1*31)+2)*31+1
        (logical.connect_timestamp(), 1 << 32, 1),
        (array(INT32), [1, 2], (31 + 1) * 31 + 2),
    ],
)
def test_java_hash_is_the_jvm_hash_code(schema: Schema, value: object, expected: int) -> None:
    assert java_hash(schema, value) == expected


def test_a_decimal_hashes_at_the_schema_scale() -> None:
    """Debezium's BigDecimal carries the column's scale, so 10.5 in numeric(10,2) is 1050/2."""
    assert java_hash(logical.connect_decimal(2), decimal.Decimal("10.5")) == 31 * 1050 + 2


def test_murmur_hashes_strings_by_bytes_and_the_rest_by_java_hash() -> None:
    assert murmur_hash(STRING, "abc") != murmur_hash(STRING, "abd")
    assert murmur_hash(INT32, 97) == murmur_hash(INT64, 97)  # both hashCode 97
    assert murmur_hash(STRING, "a") != murmur_hash(INT32, 97)  # a String is hashed by bytes


def test_a_struct_has_no_stable_java_hash() -> None:
    with pytest.raises(ValueError, match="no Java hash"):
        java_hash(struct([("a", INT32)]), {"a": 1})


ROW = struct([("id", INT32), ("customer", STRING.as_optional())], name="db.public.orders.Value")
SOURCE = struct([("table", STRING)], name="io.debezium.connector.postgresql.Source")
ENVELOPE = struct(
    [
        ("before", ROW.as_optional()),
        ("after", ROW.as_optional()),
        ("source", SOURCE),
        ("op", STRING),
    ],
    name="db.public.orders.Envelope",
)


def change(
    op: str, before: dict[str, object] | None, after: dict[str, object] | None
) -> SourceRecord:
    return SourceRecord(
        "db.public.orders",
        None,
        None,
        ENVELOPE,
        {"before": before, "after": after, "source": {"table": "orders"}, "op": op},
        {},
        {},
    )


def routing(**config: str) -> PartitionRouting:
    t = PartitionRouting()
    t.configure({"partition.topic.num": "4", **config})
    return t


def test_the_partition_is_the_sum_of_hashes_mod_the_partition_count() -> None:
    t = routing(**{"partition.payload.fields": "change.customer,source.table"})
    out = t.apply(change("c", None, {"id": 1, "customer": "hello"}))
    assert out.kafka_partition == ((99162322 + java_hash(STRING, "orders")) & 0x7FFFFFFF) % 4


def test_change_reads_before_for_a_delete_and_after_otherwise() -> None:
    t = routing(**{"partition.payload.fields": "change.customer"})
    row_a, row_b = {"id": 1, "customer": "a"}, {"id": 1, "customer": "b"}
    assert t.apply(change("u", row_b, row_a)).kafka_partition == 97 % 4
    assert t.apply(change("d", row_a, None)).kafka_partition == 97 % 4
    assert t.apply(change("d", row_b, None)).kafka_partition == 98 % 4


def test_missing_or_null_fields_are_left_out_and_no_field_keeps_the_partition() -> None:
    t = routing(**{"partition.payload.fields": "after.nope,change.customer"})
    assert t.apply(change("c", None, {"id": 1, "customer": "a"})).kafka_partition == 97 % 4
    record = change("c", None, {"id": 1, "customer": None})
    assert t.apply(record) is record


def test_a_path_through_a_null_struct_fails_naming_the_field() -> None:
    t = routing(**{"partition.payload.fields": "before.customer"})
    with pytest.raises(TransformError, match=r"before\.customer passes through before"):
        t.apply(change("c", None, {"id": 1, "customer": "a"}))


def test_a_missing_field_behind_a_null_struct_still_fails_as_in_debezium() -> None:
    """Debezium walks the structs before it looks for the field: ``after.nope`` is skipped
    while ``after`` is set and fails the task on a delete."""
    t = routing(**{"partition.payload.fields": "after.nope,source.nope,op"})
    assert t.apply(change("c", None, {"id": 1, "customer": "a"})).kafka_partition == 99 % 4
    with pytest.raises(TransformError, match=r"after\.nope passes through after"):
        t.apply(change("d", {"id": 1, "customer": "a"}, None))


def test_tombstones_truncates_and_other_records_pass_unchanged() -> None:
    t = routing(**{"partition.payload.fields": "op"})
    tombstone = change("d", None, None).with_(value=None)
    truncate = change("t", None, None)
    plain = SourceRecord("x", None, None, INT64, 5, {}, {})
    for record in (tombstone, truncate, plain):
        assert t.apply(record) is record


def test_the_input_record_is_not_changed() -> None:
    t = routing(**{"partition.payload.fields": "op"})
    record = change("c", None, {"id": 1, "customer": "a"})
    out = t.apply(record)
    assert record.kafka_partition is None and out.kafka_partition is not None


def test_config_errors_name_their_keys() -> None:
    with pytest.raises(TransformConfigError) as info:
        build_chain(
            {
                "transforms": "p",
                "transforms.p.type": "io.debezium.transforms.partitions.PartitionRouting",
                "transforms.p.partition.payload.fields": "after.id,,op",
                "transforms.p.partition.topic.num": "0",
                "transforms.p.partition.hash.function": "crc32",
            }
        )
    keys = {key for key, _ in info.value.errors}
    assert keys == {
        "transforms.p.partition.payload.fields",
        "transforms.p.partition.topic.num",
        "transforms.p.partition.hash.function",
    }
