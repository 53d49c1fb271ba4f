"""Connect -> Spark types, value rewrites, and the schema evolution policy (no Spark)."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pytest

from cdc.apply import sparktypes as st
from cdc.apply.policy import (
    RESERVED,
    Descriptor,
    TableState,
    plan_table,
    state_from_schema,
)

DECIMAL = "org.apache.kafka.connect.data.Decimal"
LAYOUT = "v1:postgresql:before-stream:offset"


@pytest.mark.parametrize(
    ("schema", "spark"),
    [
        ({"type": "int8"}, "byte"),
        ({"type": "int16"}, "short"),
        ({"type": "int32"}, "integer"),
        ({"type": "int64"}, "long"),
        ({"type": "float32"}, "float"),
        ({"type": "float64"}, "double"),
        ({"type": "boolean"}, "boolean"),
        ({"type": "string"}, "string"),
        ({"type": "bytes"}, "binary"),
        ({"type": "string", "name": "io.debezium.data.Json"}, "string"),
        ({"type": "bytes", "name": DECIMAL, "parameters": {"scale": "2"}}, "decimal(38,2)"),
        (
            {
                "type": "bytes",
                "name": DECIMAL,
                "parameters": {"scale": "2", "connect.decimal.precision": "10"},
            },
            "decimal(10,2)",
        ),
        (
            {
                "type": "bytes",
                "name": DECIMAL,
                "parameters": {"scale": "0", "connect.decimal.precision": "50"},
            },
            "string",
        ),
        ({"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"}, "string"),
        ({"type": "int32", "name": "io.debezium.time.Date"}, "date"),
        ({"type": "int64", "name": "io.debezium.time.Timestamp"}, "timestamp_ntz"),
        ({"type": "int64", "name": "io.debezium.time.MicroTimestamp"}, "timestamp_ntz"),
        ({"type": "int64", "name": "io.debezium.time.NanoTimestamp"}, "timestamp_ntz"),
        ({"type": "string", "name": "io.debezium.time.ZonedTimestamp"}, "timestamp"),
        ({"type": "int64", "name": "io.debezium.time.MicroTime"}, "long"),
    ],
)
def test_connect_to_spark_types(schema: dict[str, object], spark: str) -> None:
    assert st.spark_type(schema) == spark


def test_nested_types() -> None:
    arr = {"type": "array", "items": {"type": "int32"}}
    assert st.spark_type(arr) == st.array_of("integer")
    smap = {"type": "map", "keys": {"type": "string"}, "values": {"type": "int64"}}
    assert st.spark_type(smap) == st.map_of("string", "long")
    imap = {"type": "map", "keys": {"type": "int32"}, "values": {"type": "string"}}
    assert st.spark_type(imap) == st.array_of(
        st.struct_of([("key", "integer"), ("value", "string")])
    )
    struct = {"type": "struct", "fields": [{"type": "double", "field": "x"}]}
    assert st.spark_type({**struct, "fields": [{"type": "float64", "field": "x"}]}) == (
        st.struct_of([("x", "double")])
    )


def test_value_rewrites() -> None:
    dec = st.normalizer({"type": "bytes", "name": DECIMAL, "parameters": {"scale": "3"}})
    assert dec is not None
    assert dec("/9w=") == "-0.036"  # 0xffdc = -36
    # decimal.format=NUMERIC: the number's text when the parser kept it, an integer as is; a
    # binary float asks the parser to read the record again keeping the text
    assert dec(st.ExactNumber("12.500")) == "12.500" and dec(12) == 12
    with pytest.raises(st.InexactNumber):
        dec(12.5)
    # NUMERIC(38,0) and (38,10): every digit kept (Decimal's default context kept 28)
    n38 = 10**38 - 1
    raw = base64.b64encode(n38.to_bytes(17, "big", signed=True)).decode()
    whole = st.normalizer({"type": "bytes", "name": DECIMAL, "parameters": {"scale": "0"}})
    tenths = st.normalizer({"type": "bytes", "name": DECIMAL, "parameters": {"scale": "10"}})
    assert whole is not None and whole(raw) == "9" * 38
    assert tenths is not None and tenths(raw) == "9" * 28 + "." + "9" * 10
    small = base64.b64encode((-5).to_bytes(1, "big", signed=True)).decode()
    assert tenths(small) == "-0.0000000005"  # plain text, never 5E-10
    date = st.normalizer({"type": "int32", "name": "io.debezium.time.Date"})
    assert date is not None and date(-1) == "1969-12-31"
    nano = st.normalizer({"type": "int64", "name": "io.debezium.time.NanoTimestamp"})
    assert nano is not None and nano(1_500_000_001) == "1970-01-01T00:00:01.500000"
    ms = st.normalizer({"type": "int64", "name": "io.debezium.time.Timestamp"})
    assert ms is not None and ms(86_400_000) == "1970-01-02T00:00:00.000000"
    assert st.normalizer({"type": "string"}) is None
    vsd = st.normalizer({"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"})
    assert vsd is not None and vsd({"scale": 1, "value": "AQ=="}) == "0.1"
    imap = st.normalizer({"type": "map", "keys": {"type": "int32"}, "values": {"type": "string"}})
    assert imap is not None and imap([[1, "a"]]) == [{"key": 1, "value": "a"}]
    with pytest.raises(st.TypeMappingError):
        date(10**9)


def test_fits_and_widening() -> None:
    assert st.fits("long", "integer") and not st.fits("integer", "long")
    assert st.fits("double", "float") and st.fits("string", "long")
    assert not st.fits("string", "binary")
    assert st.fits("decimal(12,2)", "decimal(10,2)") and not st.fits(
        "decimal(10,2)", "decimal(10,3)"
    )
    assert st.widened("integer", "long") == "long"
    assert st.widened("float", "double") == "double"
    assert st.widened("decimal(10,2)", "decimal(10,4)") == "decimal(12,4)"
    assert st.widened("integer", "decimal(5,2)") == "decimal(12,2)"
    assert st.widened("long", "double") is None  # Delta cannot widen bigint to double
    assert st.widened("string", "long") is None


def test_ddl_quotes_names() -> None:
    t = st.struct_of([("a b", "long"), ("c`d", st.array_of("string"))])
    assert st.ddl(t) == "STRUCT<`a b`: BIGINT, `c``d`: ARRAY<STRING>>"
    assert st.ddl("decimal(5,1)") == "DECIMAL(5,1)"


def desc(
    cols: Mapping[str, object], key: tuple[str, ...] = ("id",), did: str = "", layout: str = LAYOUT
) -> Descriptor:
    return Descriptor(did or repr(sorted(cols.items())), "t", tuple(cols.items()), key, layout)


BASE = {"id": "integer", "name": "string", "qty": "integer"}


def test_first_descriptor_creates_the_table() -> None:
    plan = plan_table("t", None, [desc(BASE)], "evolve")
    assert plan.create and plan.columns == BASE and plan.key == ("id",) and not plan.rejected


def test_added_columns_are_added_under_every_policy() -> None:
    for policy in ("evolve", "fail", "ignore"):
        plan = plan_table("t", None, [desc(BASE), desc({**BASE, "email": "string"})], policy)
        assert plan.columns["email"] == "string" and not plan.rejected
    state = TableState(tuple(BASE.items()), ("id",), LAYOUT)
    plan = plan_table("t", state, [desc({**BASE, "email": "string"})], "fail")
    assert plan.add == [("`email`", "string")]


def test_evolve_widens_and_keeps_removed_columns() -> None:
    state = TableState(tuple(BASE.items()), ("id",), LAYOUT)
    plan = plan_table(
        "t", state, [desc({"id": "integer", "name": "string", "qty": "long"})], "evolve"
    )
    assert plan.widen == [("qty", "long")] and plan.columns["qty"] == "long"
    plan = plan_table("t", state, [desc({"id": "integer", "qty": "integer"})], "evolve")
    assert not plan.rejected and "name" in plan.columns  # kept, written as NULL
    plan = plan_table(
        "t", state, [desc({"id": "integer", "name": "long", "qty": "integer"})], "evolve"
    )
    assert not plan.rejected and not plan.widen  # a long is stored exactly as string text
    plan = plan_table(
        "t", state, [desc({"id": "integer", "name": "string", "qty": "string"})], "evolve"
    )
    (reason,) = plan.rejected.values()
    assert "cannot widen" in reason


def test_fail_rejects_type_changes_and_removed_columns() -> None:
    state = TableState(tuple(BASE.items()), ("id",), LAYOUT)
    plan = plan_table("t", state, [desc({**BASE, "qty": "long"})], "fail")
    assert "type of column 'qty' changed from INT to BIGINT" in next(iter(plan.rejected.values()))
    plan = plan_table("t", state, [desc({"id": "integer", "qty": "integer"})], "fail")
    assert "name removed" in next(iter(plan.rejected.values()))


def test_ignore_casts_and_keeps_absent_columns() -> None:
    state = TableState(tuple(BASE.items()), ("id",), LAYOUT)
    d = desc({"id": "integer", "qty": "string"}, did="d1")
    plan = plan_table("t", state, [d], "ignore")
    assert not plan.rejected and plan.cast == {"qty"} and plan.keep_absent == {"d1": {"name"}}
    assert plan.read_types()["qty"] == "string" and plan.columns["qty"] == "integer"


def test_previously_accepted_descriptor_is_accepted_again() -> None:
    """Replays and late events under an old source schema never fail."""
    state = TableState(
        (("id", "integer"), ("name", "string"), ("qty", "long")),
        ("id",),
        LAYOUT,
        frozenset({"old"}),
    )
    plan = plan_table("t", state, [desc({"id": "integer", "qty": "long"}, did="old")], "fail")
    assert not plan.rejected


def test_key_mismatch_and_layout_change_are_rejected_under_every_policy() -> None:
    state = TableState(tuple(BASE.items()), ("id",), LAYOUT)
    for policy in ("evolve", "fail", "ignore"):
        plan = plan_table("t", state, [desc(BASE, key=("name",))], policy)
        assert "does not match the table's key (id)" in next(iter(plan.rejected.values()))
        plan = plan_table(
            "t", state, [desc(BASE, layout="v1:postgresql:by-position:offset")], policy
        )
        assert "ordering layout" in next(iter(plan.rejected.values()))


def test_nested_struct_fields_are_added() -> None:
    state = TableState(
        (("id", "integer"), ("addr", st.struct_of([("city", "string")]))), ("id",), LAYOUT
    )
    incoming = {"id": "integer", "addr": st.struct_of([("city", "string"), ("zip", "string")])}
    plan = plan_table("t", state, [desc(incoming)], "fail")
    assert not plan.rejected
    assert plan.add == [("`addr`.`zip`", "string")]
    assert plan.columns["addr"] == incoming["addr"]


def test_meta_column_names_are_reserved() -> None:
    plan = plan_table("t", None, [desc({**BASE, "__op": "string"})], "evolve", RESERVED)
    assert "collides" in next(iter(plan.rejected.values()))


def test_schemaless_null_columns_wait_for_a_value() -> None:
    plan = plan_table("t", None, [desc({"id": "long", "maybe": None})], "evolve")
    assert plan.columns == {"id": "long"}


def test_state_from_a_delta_schema_and_properties() -> None:
    fields: list[dict[str, Any]] = [
        {"name": "id", "type": "integer"},
        {"name": "__op", "type": "string"},
        {"name": "__pos", "type": st.array_of("long")},
    ]
    props = {"tidemark.key": "id", "tidemark.ordering": LAYOUT, "tidemark.schemas": "a,b"}
    s = state_from_schema(fields, props)
    assert s.columns == (("id", "integer"),)
    assert s.key == ("id",) and s.accepted == frozenset({"a", "b"})


@pytest.mark.parametrize(("kind", "spark"), [("FLOAT32", "float"), ("FLOAT64", "double")])
def test_float_columns_as_the_json_converter_names_them(kind: str, spark: str) -> None:
    """Kafka's JsonConverter (and so tidemark's) writes float32/float64 as "float"/"double":
    the apply job must take them, or every event of a table with a float column fails."""
    from cdc.converters.json import schema_to_json
    from cdc.schema.model import Type, primitive

    schema = schema_to_json(primitive(Type[kind]))
    assert schema["type"] == spark
    assert st.spark_type(schema) == spark
