"""Parsing and flattening Debezium records for the apply job (no Spark)."""

from __future__ import annotations

import base64
from collections.abc import Mapping

import orjson
import pytest

from cdc.apply.events import BadEvent, Change, Parser, ParseSettings, Skipped, key_json
from cdc.apply.ordering import OrderingRules
from cdc.apply.synthetic import SyntheticTable, col, decimal_col, mysql, pg

PH = "__debezium_unavailable_value"


def table(**kw: object) -> SyntheticTable:
    return SyntheticTable(
        "customers",
        [
            ("id", col("int32", optional=False)),
            ("name", col("string")),
            ("doc", col("string")),
            ("blob", col("bytes")),
            ("tags", {"type": "array", "items": col("string"), "optional": True}),
            ("price", decimal_col(10, 2)),
            ("born", col("int32", name="io.debezium.time.Date")),
            ("seen", col("int64", name="io.debezium.time.MicroTimestamp")),
            ("at", col("string", name="io.debezium.time.ZonedTimestamp")),
        ],
        ["id"],
        **kw,  # type: ignore[arg-type]
    )


ROW = {
    "id": 1,
    "name": "Anne",
    "doc": "x" * 10,
    "blob": "AQI=",
    "tags": ["a"],
    "price": "BNI=",  # 1234 unscaled -> 12.34
    "born": 18262,  # 2020-01-01
    "seen": 1529507596945104,
    "at": "2026-11-22T05:02:42.05973Z",
}


def parse(
    t: SyntheticTable,
    op: str,
    row: Mapping[str, object],
    pos: Mapping[str, object],
    offset: int = 0,
    parser: Parser | None = None,
    **kw: object,
) -> object:
    key, value = t.record(op, row, pos, **kw)
    return (parser or Parser(ParseSettings())).parse(t.topic, 0, offset, key, value)


def test_create_is_flattened_from_after_with_meta_and_position() -> None:
    t = table()
    ch = parse(t, "c", ROW, pg(500, tx=77), offset=9)
    assert isinstance(ch, Change)
    assert ch.table == "srv_public_customers"
    assert ch.op == "c" and ch.key == {"id": 1} and ch.key_fields == ("id",)
    assert ch.pos == (1, 500, 9)
    assert ch.tx_id == "77" and ch.snapshot is False and ch.position == "lsn=500"
    assert ch.source_ts_ms == 1_700_000_000_000 and ch.ts_ms == 1_700_000_000_001
    assert ch.layout == "v1:postgresql:before-stream:offset"
    # values rewritten for Spark's from_json
    assert ch.row["price"] == "12.34"
    assert ch.row["born"] == "2020-01-01"
    assert ch.row["seen"] == "2018-06-20T15:13:16.945104"
    assert ch.row["at"] == ROW["at"]
    assert ch.row["blob"] == "AQI="  # base64 is what from_json reads for BINARY
    assert ch.shape.types["price"] == "decimal(10,2)"
    assert ch.shape.types["seen"] == "timestamp_ntz"
    assert ch.unavailable == frozenset()


def test_delete_takes_values_from_before_and_the_key_from_the_kafka_key() -> None:
    t = table()
    before = {**{k: None for k in ROW}, "id": 1, "name": ""}  # replica identity DEFAULT
    ch = parse(t, "d", before, pg(600))
    assert isinstance(ch, Change)
    assert ch.op == "d" and ch.row["id"] == 1 and ch.key == {"id": 1}


def test_snapshot_read_is_flagged_and_ordered_before_stream() -> None:
    ch = parse(table(), "r", ROW, pg(100))
    assert isinstance(ch, Change)
    assert ch.snapshot is True and ch.pos[0] == 0


def test_placeholders_are_detected_for_strings_bytes_and_arrays() -> None:
    row = {
        **ROW,
        "doc": PH,
        "blob": base64.b64encode(PH.encode()).decode(),
        "tags": [PH],
    }
    ch = parse(table(), "u", row, pg(700))
    assert isinstance(ch, Change)
    assert ch.unavailable == frozenset({"doc", "blob", "tags"})


def test_configured_placeholder() -> None:
    parser = Parser(ParseSettings(placeholders=("<toasted>",)))
    ch = parse(table(), "u", {**ROW, "doc": "<toasted>", "name": PH}, pg(1), parser=parser)
    assert isinstance(ch, Change)
    assert ch.unavailable == frozenset({"doc"})


def test_schema_part_is_cached_and_only_the_payload_parsed_again() -> None:
    t = table()
    parser = Parser(ParseSettings())
    first = parse(t, "c", ROW, pg(1), parser=parser)
    second = parse(t, "u", {**ROW, "name": "B"}, pg(2), parser=parser)
    assert isinstance(first, Change) and isinstance(second, Change)
    assert len(parser._shapes) == 1
    assert first.shape is second.shape
    assert second.row["name"] == "B"
    # the key's schema part too: later keys parse their payload only, to the same key
    assert len(parser._key_schemas) == 1
    third = parse(t, "u", {**ROW, "id": 7}, pg(3), parser=parser)
    assert isinstance(third, Change) and third.key == {"id": 7} and third.key_json == '{"id":7}'
    assert Parser(ParseSettings())._key(t.key_bytes({"id": 7})) == parser._key(
        t.key_bytes({"id": 7})
    )


def test_records_of_two_tables_interleaved_each_get_their_own_shape() -> None:
    """The parser takes a record sharing the last matched schema part by a prefix comparison;
    a record of another table, or another version of the table, must not be taken for it."""
    a = table()
    # as long as a's schema part (so a cut at a's length lands on b's payload), other types
    b = SyntheticTable("customerz", [("id", col("int64", optional=False)), *a.columns[1:]], ["id"])
    wider = SyntheticTable(a.table, [*a.columns, ("extra", col("string"))], ["id"])
    parser = Parser(ParseSettings())
    seen: list[Change] = []
    for t, row in [
        (a, ROW),
        (b, ROW),
        (b, ROW),
        (a, ROW),
        (wider, {**ROW, "extra": "x"}),
        (a, ROW),
    ]:
        ch = parse(t, "c", row, pg(len(seen) + 1), parser=parser)
        assert isinstance(ch, Change), ch
        seen.append(ch)
    assert [c.table.rsplit("_", 1)[-1] for c in seen] == ["customers", "customerz", "customerz"] + [
        "customers"
    ] * 3
    assert seen[0].shape is seen[3].shape is seen[5].shape
    assert seen[1].shape is seen[2].shape is not seen[0].shape
    assert seen[1].shape.types["id"] != seen[0].shape.types["id"]
    assert "extra" in seen[4].shape.columns and "extra" not in seen[5].shape.columns
    assert len(parser._shapes) == 3
    # the same schema part with a broken payload is bad input, not a cache hit
    good = a.value_bytes("c", ROW, pg(9))
    broken = parser.parse(a.topic, 0, 9, a.key_bytes(ROW), good[:-2] + b"}")
    assert isinstance(broken, BadEvent) and "not valid JSON" in broken.error


def test_payload_key_inside_schema_parameters_does_not_confuse_the_cache() -> None:
    t = SyntheticTable(
        "odd",
        [("id", col("int32", optional=False)), ("v", col("string", x="1", payload="2"))],
        ["id"],
    )
    parser = Parser(ParseSettings())
    for lsn in (1, 2):
        ch = parse(t, "c", {"id": lsn, "v": "ok"}, pg(lsn), parser=parser)
        assert isinstance(ch, Change) and ch.row == {"id": lsn, "v": "ok"}
    # the schema part is not cut at the ',"payload":' inside it: no such head is kept
    assert all(head.endswith(b"}") for head in parser._shapes)


def test_schemaless_json_infers_types() -> None:
    t = table(with_schemas=False)
    ch = parse(t, "c", {"id": 1, "name": "a", "n": 1.5, "flag": True, "gone": None}, pg(5))
    assert isinstance(ch, Change)
    assert ch.shape.inferred
    assert ch.shape.types == {
        "id": "long",
        "name": "string",
        "n": "double",
        "flag": "boolean",
        "gone": None,
    }


def test_schemaless_placeholder_is_detected_and_not_used_for_type_inference() -> None:
    t = table(with_schemas=False)
    ch = parse(t, "u", {"id": 1, "doc": PH}, pg(5))
    assert isinstance(ch, Change)
    assert ch.unavailable == frozenset({"doc"}) and ch.shape.types["doc"] is None


def test_schemas_true_rejects_schemaless_records() -> None:
    t = table(with_schemas=False)
    bad = parse(t, "c", ROW, pg(1), parser=Parser(ParseSettings(schemas="true")))
    assert isinstance(bad, BadEvent) and "schema" in bad.error


def test_tombstones_and_messages_are_skipped_not_errors() -> None:
    parser = Parser(ParseSettings())
    assert isinstance(parser.parse("t", 0, 1, b'{"id":1}', None), Skipped)
    msg = orjson.dumps({"op": "m", "source": {"connector": "postgresql", "lsn": 1}})
    assert isinstance(parser.parse("t", 0, 2, None, msg), Skipped)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (b'{"id":1}', b"not json", "not valid JSON"),
        (b'{"id":1}', b"[1,2]", "not a JSON object"),
        (b'{"id":1}', b'{"after":{"id":1}}', "no 'op' field"),
        (b'{"id":1}', b'{"op":"x","source":{}}', "op is 'x'"),
        (b'{"id":1}', b'{"op":"c","after":{"id":1}}', "'source' is missing"),
        (
            b'{"id":1}',
            b'{"op":"c","after":{"id":1},"source":{"connector":"postgresql"}}',
            "source.lsn is missing",
        ),
        (None, b'{"op":"c","after":{"id":1},"source":{"lsn":1}}', "key is null"),
        (b"[1]", b'{"op":"c","after":{"id":1},"source":{"lsn":1}}', "key is not a JSON object"),
        (b'{"id":1}', b'{"op":"c","after":null,"source":{"lsn":1}}', "without 'after'"),
    ],
)
def test_bad_input_names_topic_partition_offset(
    key: bytes | None, value: bytes, message: str
) -> None:
    parsed = Parser(ParseSettings()).parse("srv.public.t", 3, 42, key, value)
    assert isinstance(parsed, BadEvent)
    assert message in parsed.error
    assert parsed.describe().startswith("srv.public.t[3]@42: ")


def test_key_field_that_is_not_a_column_is_bad_input() -> None:
    t = table()
    key = orjson.dumps({"id": 1, "tenant": 5})
    _, value = t.record("c", ROW, pg(1))
    parsed = Parser(ParseSettings()).parse(t.topic, 0, 0, key, value)
    assert isinstance(parsed, BadEvent) and "tenant" in parsed.error


def test_value_that_does_not_fit_its_type_is_bad_input() -> None:
    parsed = parse(table(), "c", {**ROW, "price": "%%%"}, pg(1))
    assert isinstance(parsed, BadEvent) and "base64" in parsed.error


def test_mysql_positions_and_gtid_transaction_id() -> None:
    t = SyntheticTable(
        "orders",
        [("id", col("int64", optional=False)), ("qty", col("int32"))],
        ["id"],
        connector="mysql",
        db="shop",
    )
    ch = parse(t, "u", {"id": 5, "qty": 2}, mysql(3, 154, 1, gtid="u:9"), offset=4)
    assert isinstance(ch, Change)
    assert ch.pos == (1, 3, 154, 1, 4)
    assert ch.tx_id == "u:9"
    assert ch.table == "srv_shop_orders"
    gtid = Parser(ParseSettings(ordering=OrderingRules(mysql="gtid")))
    ch2 = parse(t, "u", {"id": 5, "qty": 2}, mysql(3, 154, 1, gtid="u:9"), offset=4, parser=gtid)
    assert isinstance(ch2, Change) and ch2.pos == (1, 9, 154, 1, 4)


def test_table_name_template_and_overrides() -> None:
    t = table()
    key, value = t.record("c", ROW, pg(1))
    by_source = Parser(ParseSettings(table_name="{db}.{table}"))
    ch = by_source.parse(t.topic, 0, 0, key, value)
    assert isinstance(ch, Change) and ch.table == "appdb_customers"
    override = Parser(ParseSettings(tables=((t.topic, "crm"),)))
    ch2 = override.parse(t.topic, 0, 0, key, value)
    assert isinstance(ch2, Change) and ch2.table == "crm"


def test_mongodb_document_text_becomes_a_document_column() -> None:
    key_schema = {
        "type": "struct",
        "fields": [{"type": "string", "optional": False, "field": "id"}],
    }
    key = orjson.dumps({"schema": key_schema, "payload": {"id": "42"}})
    schema = {
        "type": "struct",
        "fields": [
            {"type": "string", "optional": True, "name": "io.debezium.data.Json", "field": "after"},
            {"type": "string", "optional": True, "field": "before"},
            {"type": "struct", "fields": [], "optional": False, "field": "source"},
            {"type": "string", "optional": False, "field": "op"},
        ],
    }
    payload = {
        "after": '{"_id": "42", "n": 1}',
        "source": {"connector": "mongodb", "sec": 100, "ord": 2},
        "op": "c",
    }
    value = orjson.dumps({"schema": schema, "payload": payload})
    ch = Parser(ParseSettings()).parse("m.db.c", 0, 0, key, value)
    assert isinstance(ch, Change)
    assert ch.row == {"id": "42", "document": '{"_id": "42", "n": 1}'}
    assert ch.pos == (1, 100, 2, 0)
    assert ch.shape.types == {"id": "string", "document": "string"}


def test_key_change_headers_name_the_other_key() -> None:
    """Debezium's ``__debezium.oldkey`` (on the new key's create) and ``__debezium.newkey`` (on
    the old key's delete), as plain JSON or with the JSON converter's schema wrapper."""
    t = table()
    parser = Parser(ParseSettings())
    ck, cv = t.record("c", {"id": 2, "name": "x"}, pg(10))
    wrapped = b'{"schema":{"type":"struct"},"payload":{"id":1}}'
    create = parser.parse(t.topic, 0, 1, ck, cv, [("__debezium.oldkey", wrapped)])
    assert isinstance(create, Change) and create.old_key == '{"id":1}' and create.new_key is None
    dk, dv = t.record("d", {"id": 1}, pg(10))
    deleted = parser.parse(t.topic, 0, 0, dk, dv, [("__debezium.newkey", b'{"id":2}')])
    assert isinstance(deleted, Change) and deleted.new_key == '{"id":2}'
    plain = parser.parse(t.topic, 0, 2, ck, cv, [("other", b"x")])
    assert isinstance(plain, Change) and plain.old_key is None
    bad = parser.parse(t.topic, 0, 3, ck, cv, [("__debezium.oldkey", b"Struct{id=1}")])
    assert isinstance(bad, BadEvent) and "__debezium.oldkey" in bad.error and "JSON" in bad.error


def test_a_decimal_written_as_a_json_number_keeps_every_digit() -> None:
    """decimal.format=NUMERIC writes a decimal as a JSON number; the fast parser read it as a
    binary float, so NUMERIC(38,10) 1234567890123456789.0123456789 reached the table as
    1234567890123456800."""
    table = SyntheticTable(
        "acct",
        [
            ("id", decimal_col(20, 2)),
            ("amount", decimal_col(38, 10)),
            ("rate", col("double")),
        ],
        ["id"],
    )
    key, value = table.record("c", {"id": 0, "amount": 0, "rate": 0.5}, pg(100))
    exact = "1234567890123456789.0123456789"
    value = value.replace(b'"amount":0', b'"amount":' + exact.encode())
    key = key.replace(b'"id":0', b'"id":12345678901234567.25')
    value = value.replace(b'"id":0', b'"id":12345678901234567.25')
    parser = Parser(ParseSettings())
    for _ in range(2):  # and again once the record's schema is cached
        ch = parser.parse(table.topic, 0, 0, key, value)
        assert isinstance(ch, Change), ch
        assert ch.row["amount"] == exact and ch.row["id"] == "12345678901234567.25"
        assert ch.row["rate"] == 0.5 and type(ch.row["rate"]) is float
        orjson.dumps(ch.row)  # what goes to from_json: plain JSON types only
        orjson.dumps(ch.key)
    # two keys one binary float apart stay two keys
    other = parser.parse(
        table.topic,
        0,
        1,
        key.replace(b"12345678901234567.25", b"12345678901234567.5"),
        value.replace(b"12345678901234567.25", b"12345678901234567.5"),
    )
    assert isinstance(other, Change) and isinstance(ch, Change)
    assert key_json(other.key) != key_json(ch.key)
