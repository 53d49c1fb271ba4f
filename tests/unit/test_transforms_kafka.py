"""Kafka Connect's built-in SMTs (``org.apache.kafka.connect.transforms.*``) on Debezium change
events, after ``ExtractNewRecordState`` as users chain them. The same chain runs against
Kafka's own classes in tests/integration/test_kafka_smt_parity.py; these pin the details."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from cdc.record import SourceRecord
from cdc.schema import logical
from cdc.schema.model import FLOAT64, INT32, OPTIONAL_STRING, STRING, Schema, Type, struct
from cdc.transforms import TransformConfigError, TransformError, build_chain
from cdc.transforms.java_text import java_float_text
from tests.unit.test_transforms import KEY, ROW, SALLY, TOPIC, change, tombstone

KAFKA = "org.apache.kafka.connect.transforms."


def run(config: dict[str, str], record: SourceRecord) -> SourceRecord | None:
    return build_chain(config).apply(record)


def unwrapped(**transforms: dict[str, str]) -> dict[str, str]:
    """``unwrap`` then the given transforms, in order."""
    config = {
        "transforms": ",".join(["unwrap", *transforms]),
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
    }
    for alias, settings in transforms.items():
        config.update({f"transforms.{alias}.{k}": v for k, v in settings.items()})
    return config


def fields(schema: Schema | None) -> list[tuple[str, str, bool]]:
    assert schema is not None
    return [(f.name, f.schema.type.value, f.schema.optional) for f in schema.fields]


def test_filter_with_a_predicate_drops_only_tombstones() -> None:
    config = {
        "transforms": "dropTombstones",
        "transforms.dropTombstones.type": KAFKA + "Filter",
        "transforms.dropTombstones.predicate": "isTombstone",
        "predicates": "isTombstone",
        "predicates.isTombstone.type": KAFKA + "predicates.RecordIsTombstone",
    }
    chain = build_chain(config)
    assert chain.apply(tombstone()) is None
    kept = change("c", None, SALLY)
    assert chain.apply(kept) is kept


def test_insert_field_adds_static_topic_and_partition_fields_after_the_row() -> None:
    config = unwrapped(
        insert={
            "type": KAFKA + "InsertField$Value",
            "static.field": "origin",
            "static.value": "pg",
            "topic.field": "src_topic!",
            "partition.field": "part",
        }
    )
    out = run(config, change("c", None, SALLY))
    assert out is not None and out.value_schema is not None
    assert out.value == {**SALLY, "origin": "pg", "src_topic": TOPIC, "part": None}
    assert fields(out.value_schema)[-3:] == [
        ("src_topic", "string", False),
        ("part", "int32", True),
        ("origin", "string", True),
    ]
    # Connect copies name, version and doc of the row schema, not its optionality
    assert out.value_schema.name == ROW.name and not out.value_schema.optional
    assert run(config, tombstone()) is None  # unwrap drops it; InsertField would pass it


def test_insert_field_refuses_the_offset_a_source_record_does_not_have() -> None:
    with pytest.raises(TransformConfigError, match=r"transforms\.i\.offset\.field"):
        build_chain({"transforms": "i", "transforms.i.type": KAFKA + "InsertField$Value",
                     "transforms.i.offset.field": "off"})  # fmt: skip


def test_replace_field_excludes_renames_and_keeps_the_order() -> None:
    config = unwrapped(
        replace={
            "type": KAFKA + "ReplaceField$Value",
            "exclude": "email",
            "renames": "first_name:given,last_name:family",
        }
    )
    out = run(config, change("u", SALLY, SALLY))
    assert out is not None
    assert out.value == {"id": 1001, "given": "Sally", "family": "Thomas"}
    assert [f[0] for f in fields(out.value_schema)] == ["id", "given", "family"]
    include = unwrapped(r={"type": KAFKA + "ReplaceField$Value", "include": "id,email"})
    kept = run(include, change("c", None, SALLY))
    assert kept is not None and kept.value == {"id": 1001, "email": "sally@example.com"}


def test_replace_field_names_a_bad_rename() -> None:
    with pytest.raises(TransformConfigError, match=r"transforms.r.renames: Invalid rename"):
        build_chain(unwrapped(r={"type": KAFKA + "ReplaceField$Value", "renames": "a:b:c"}))


def test_mask_field_zeroes_by_type_or_uses_the_replacement() -> None:
    row = struct(
        [("id", INT32), ("name", OPTIONAL_STRING), ("price", _decimal(2)), ("score", FLOAT64)],
        name="t.Value",
    )
    record = SourceRecord(
        "t", KEY, {"id": 1}, row,
        {"id": 7, "name": "x", "price": Decimal("9.99"), "score": 1.5}, {}, {},
    )  # fmt: skip
    zeros = run({"transforms": "m", "transforms.m.type": KAFKA + "MaskField$Value",
                 "transforms.m.fields": "id,name,price,score"}, record)  # fmt: skip
    assert zeros is not None
    assert zeros.value == {"id": 0, "name": "", "price": Decimal("0.00"), "score": 0.0}
    assert str(zeros.value["price"]) == "0.00"  # at the column's scale
    masked = run({"transforms": "m", "transforms.m.type": KAFKA + "MaskField$Value",
                  "transforms.m.fields": "name,id",
                  "transforms.m.replacement": "42"}, record)  # fmt: skip
    assert masked is not None and masked.value["name"] == "42" and masked.value["id"] == 42
    for replacement, number in (("0.00", 0), ("1.5", 1), ("-2.9", -2), ("1e2", 100)):
        config = {"transforms": "m", "transforms.m.type": KAFKA + "MaskField$Value",
                  "transforms.m.fields": "id", "transforms.m.replacement": replacement}  # fmt: skip
        out = run(config, record)
        assert out is not None and out.value["id"] == number, replacement
    with pytest.raises(TransformError, match=r"Unable to convert 'abc' .* field 'id'"):
        run({"transforms": "m", "transforms.m.type": KAFKA + "MaskField$Value",
             "transforms.m.fields": "id", "transforms.m.replacement": "abc"}, record)  # fmt: skip


def _decimal(scale: int) -> Schema:
    return logical.connect_decimal(scale)


def test_value_to_key_then_extract_field_rekeys_by_one_column() -> None:
    config = unwrapped(
        rekey={"type": KAFKA + "ValueToKey", "fields": "id,email"},
        extract={"type": KAFKA + "ExtractField$Key", "field": "email"},
    )
    out = run(config, change("c", None, SALLY))
    assert out is not None
    assert out.key == "sally@example.com"
    assert out.key_schema is not None and out.key_schema.type is Type.STRING
    both = run(unwrapped(rekey={"type": KAFKA + "ValueToKey", "fields": "id,email"}),
               change("c", None, SALLY))  # fmt: skip
    assert both is not None and both.key == {"id": 1001, "email": "sally@example.com"}
    assert both.key_schema is not None and both.key_schema.name is None
    with pytest.raises(TransformError, match="Field does not exist: nope"):
        run(unwrapped(k={"type": KAFKA + "ValueToKey", "fields": "nope"}), change("c", None, SALLY))


def test_hoist_field_wraps_the_key_and_flatten_joins_nested_names() -> None:
    config = {
        "transforms": "hoist,flat",
        "transforms.hoist.type": KAFKA + "HoistField$Key",
        "transforms.hoist.field": "pk",
        "transforms.flat.type": KAFKA + "Flatten$Value",
        "transforms.flat.delimiter": "_",
    }
    out = run(config, change("c", None, SALLY))
    assert out is not None
    assert out.key == {"pk": {"id": 1001}}
    assert out.key_schema is not None and out.key_schema.fields[0].schema is KEY
    assert out.value["before_id"] is None and out.value["after_email"] == "sally@example.com"
    assert out.value["source_lsn"] == 33_227_720 and out.value["op"] == "c"
    assert out.value["transaction_id"] is None
    flat = dict((name, optional) for name, _, optional in fields(out.value_schema))
    # a field under an optional struct is optional; under a required one it keeps its own
    assert flat["after_id"] is True and flat["source_db"] is False and flat["op"] is False


def test_cast_follows_java_numbers_and_keeps_optionality() -> None:
    row = struct(
        [("id", INT32), ("amount", FLOAT64.as_optional()), ("big", FLOAT64)], name="t.Value"
    )
    record = SourceRecord("t", KEY, {"id": 1}, row, {"id": 5, "amount": -2.9, "big": 1e10}, {}, {})
    out = run({"transforms": "c", "transforms.c.type": KAFKA + "Cast$Value",
               "transforms.c.spec": "id:string,amount:int32,big:string"}, record)  # fmt: skip
    assert out is not None
    assert out.value == {"id": "5", "amount": -2, "big": "1.0E10"}
    assert fields(out.value_schema) == [
        ("id", "string", False),
        ("amount", "int32", True),
        ("big", "string", False),
    ]
    saturated = run({"transforms": "c", "transforms.c.type": KAFKA + "Cast$Value",
                     "transforms.c.spec": "big:int32"}, record)  # fmt: skip
    assert saturated is not None and saturated.value["big"] == 2_147_483_647
    huge = SourceRecord("t", KEY, {"id": 1}, row, {"id": 5, "amount": -1e300, "big": 1e300}, {}, {})
    narrowed = run({"transforms": "c", "transforms.c.type": KAFKA + "Cast$Value",
                    "transforms.c.spec": "amount:float32,big:float32"}, huge)  # fmt: skip
    assert narrowed is not None
    assert narrowed.value["amount"] == float("-inf") and narrowed.value["big"] == float("inf")


@pytest.mark.parametrize(
    ("value", "text"),
    [(2.5, "2.5"), (100.0, "100.0"), (1e7, "1.0E7"), (1e-4, "1.0E-4"), (0.001, "0.001"),
     (-0.0, "-0.0"), (123456789.0, "1.23456789E8"), (float("nan"), "NaN")],
)  # fmt: skip
def test_doubles_are_written_as_java_writes_them(value: float, text: str) -> None:
    assert java_float_text(value) == text


def test_cast_config_errors_name_the_entry() -> None:
    with pytest.raises(TransformConfigError, match=r"invalid cast type 'decimal' in 'x:decimal'"):
        build_chain({"transforms": "c", "transforms.c.type": KAFKA + "Cast$Value",
                     "transforms.c.spec": "x:decimal"})  # fmt: skip


def test_set_schema_metadata_renames_only_the_schema() -> None:
    config = {"transforms": "m", "transforms.m.type": KAFKA + "SetSchemaMetadata$Value",
              "transforms.m.schema.name": "x.Flat", "transforms.m.schema.version": "3"}  # fmt: skip
    record = change("c", None, SALLY)
    out = run(config, record)
    assert out is not None and out.value is record.value
    assert out.value_schema is not None and record.value_schema is not None
    assert (out.value_schema.name, out.value_schema.version) == ("x.Flat", 3)
    assert out.value_schema.fields == record.value_schema.fields


def test_header_transforms_insert_copy_move_and_drop() -> None:
    config = unwrapped(
        team={"type": KAFKA + "InsertHeader", "header": "team", "value.literal": "data"},
        tier={"type": KAFKA + "InsertHeader", "header": "tier", "value.literal": "gold"},
        copy={"type": KAFKA + "HeaderFrom$Value", "fields": "first_name,id",
              "headers": "fn,key_id", "operation": "copy"},
        move={"type": KAFKA + "HeaderFrom$Value", "fields": "email", "headers": "mail",
              "operation": "move"},
        drop={"type": KAFKA + "DropHeaders", "headers": "tier"},
    )  # fmt: skip
    out = run(config, change("c", None, SALLY))
    assert out is not None
    assert out.headers == [
        ("team", b"data"),
        ("fn", b"Sally"),
        ("key_id", b"1001"),
        ("mail", b"sally@example.com"),
    ]
    assert "email" not in out.value and out.value["first_name"] == "Sally"
    assert [f[0] for f in fields(out.value_schema)] == ["id", "first_name", "last_name"]


def test_header_from_needs_as_many_headers_as_fields() -> None:
    with pytest.raises(TransformConfigError, match=r"transforms\.h\.headers: must list as many"):
        build_chain({"transforms": "h", "transforms.h.type": KAFKA + "HeaderFrom$Value",
                     "transforms.h.fields": "a,b", "transforms.h.headers": "x",
                     "transforms.h.operation": "copy"})  # fmt: skip


def test_schemaless_values_are_handled_as_maps() -> None:
    record = SourceRecord("t", None, None, None, {"a": {"b": 1}, "c": 2.0}, {}, {})
    config: dict[str, Any] = {
        "transforms": "f,r,c",
        "transforms.f.type": KAFKA + "Flatten$Value",
        "transforms.r.type": KAFKA + "ReplaceField$Value",
        "transforms.r.renames": "a.b:ab",
        "transforms.c.type": KAFKA + "Cast$Value",
        "transforms.c.spec": "c:string",
    }
    out = run(config, record)
    assert out is not None and out.value == {"ab": 1, "c": "2.0"}
    assert STRING.type is Type.STRING  # the schemaless path never invents a schema
    assert out.value_schema is None


def _micros_row(micros: int | None) -> SourceRecord:
    row = struct([("id", INT32), ("at", logical.micro_timestamp().as_optional())], name="t.Value")
    return SourceRecord("t", KEY, {"id": 1}, row, {"id": 1, "at": micros}, {}, {})


def _converter(**settings: str) -> dict[str, str]:
    config = {"transforms": "t", "transforms.t.type": KAFKA + "TimestampConverter$Value"}
    config.update({f"transforms.t.{k.replace('_', '.')}": v for k, v in settings.items()})
    return config


def test_timestamp_converter_formats_debezium_micros_in_utc() -> None:
    config = _converter(
        field="at", target_type="string", format="yyyy-MM-dd'T'HH:mm:ss.SSS'Z' EEE",
        unix_precision="microseconds",
    )  # fmt: skip
    out = run(config, _micros_row(1_704_450_030_123_456))
    assert out is not None and out.value["at"] == "2024-01-05T10:20:30.123Z Fri"
    assert fields(out.value_schema) == [("id", "int32", False), ("at", "string", True)]
    # Java's TimeUnit truncates toward zero: -500 µs is the epoch's millisecond
    before = run(config, _micros_row(-500))
    assert before is not None and before.value["at"] == "1970-01-01T00:00:00.000Z Thu"
    null = run(config, _micros_row(None))
    assert null is not None and null.value["at"] is None


def test_timestamp_converter_writes_any_instant_a_database_can_hold() -> None:
    """PostgreSQL's ``infinity`` arrives as Debezium's sentinel (year 294247), past what
    Python's datetime holds; before 1582-10-15 Java's calendar is Julian."""
    config = _converter(field="at", target_type="string", format="yyyy-MM-dd HH:mm EEE",
                        unix_precision="microseconds")  # fmt: skip
    for micros, text in (
        (9_223_372_036_825_200_000, "294247-01-10 04:00 Sun"),  # 'infinity'
        (-12_219_292_800_000_000, "1582-10-15 00:00 Fri"),  # the first Gregorian day
        (-12_219_292_800_000_000 - 1000, "1582-10-04 23:59 Thu"),  # the Julian day before
    ):
        out = run(config, _micros_row(micros))
        assert out is not None and out.value["at"] == text


def test_timestamp_converter_to_connect_types_and_back_from_text() -> None:
    ts = run(_converter(field="at", target_type="Timestamp", unix_precision="microseconds"),
             _micros_row(1_704_450_030_123_456))  # fmt: skip
    assert ts is not None and ts.value["at"] == 1_704_450_030_123
    assert ts.value_schema is not None
    at = ts.value_schema.field("at")
    assert at is not None and at.schema.name == logical.CONNECT_TIMESTAMP
    day = run(_converter(field="at", target_type="Date", unix_precision="microseconds"),
              _micros_row(-1000))  # fmt: skip
    assert day is not None and day.value["at"] == -1  # 1969-12-31, a millisecond before
    text_row = struct([("when", STRING)], name="s.Value")
    record = SourceRecord("s", None, None, text_row, {"when": "05/01/2024 22:13"}, {}, {})
    parsed = run(_converter(field="when", target_type="unix", format="dd/MM/yyyy HH:mm",
                            unix_precision="seconds"), record)  # fmt: skip
    assert parsed is not None and parsed.value["when"] == 1_704_492_780
    with pytest.raises(TransformError, match="Could not parse timestamp"):
        run(_converter(field="when", target_type="unix", format="yyyy"), record)


def test_timestamp_converter_config_errors() -> None:
    with pytest.raises(TransformConfigError) as caught:
        build_chain(_converter(target_type="string", format="yyyy-MM-dd QQ"))
    assert "transforms.t.format" in dict(caught.value.errors)
    with pytest.raises(TransformConfigError, match="requires format"):
        build_chain(_converter(target_type="string"))
    with pytest.raises(TransformConfigError, match=r"transforms\.t\.target\.type"):
        build_chain(_converter(target_type="instant"))
