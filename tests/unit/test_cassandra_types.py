"""CQL type strings from system_schema and the values they decode to."""

from __future__ import annotations

import decimal
import struct
from typing import Any

import pytest

from cdc.spi import Column, Table, TableId
from connectors.cassandra.cqltypes import CqlTypeError, decode_value, parse_type
from connectors.cassandra.types import CassandraValueConverters, NumberModes
from connectors.cassandra.vint import read_signed_vint, read_unsigned_vint


def test_parse_types() -> None:
    t = parse_type("map<text, frozen<list<int>>>")
    assert t.name == "map" and t.multi_cell and not t.frozen
    assert t.params[1].name == "list" and t.params[1].frozen and not t.params[1].multi_cell
    assert parse_type("frozen<set<uuid>>").frozen
    assert parse_type("int").fixed_length == 4
    assert parse_type("text").fixed_length == -1
    assert parse_type("tuple<int, text>").frozen
    with pytest.raises(CqlTypeError, match="vector"):
        parse_type("vector<float, 3>")
    with pytest.raises(CqlTypeError, match="user-defined or counter"):
        parse_type("frozen<address>")
    with pytest.raises(CqlTypeError, match="user-defined or counter"):
        parse_type("counter")
    with pytest.raises(CqlTypeError, match="cannot parse"):
        parse_type("map<text,")


def test_values() -> None:
    assert decode_value(parse_type("int"), struct.pack(">i", -5)) == -5
    assert decode_value(parse_type("date"), struct.pack(">I", (1 << 31) + 1)) == 1
    assert decode_value(parse_type("varint"), b"\xff") == "-1"
    assert decode_value(parse_type("decimal"), struct.pack(">i", 2) + b"\x04\xd2") == "12.34"
    assert decode_value(parse_type("inet"), b"\x7f\x00\x00\x01") == "127.0.0.1"
    frozen_map = struct.pack(">i", 1) + struct.pack(">i", 1) + b"k" + struct.pack(">ii", 4, 7)
    assert decode_value(parse_type("frozen<map<text, int>>"), frozen_map) == {"k": 7}
    tup = struct.pack(">i", 4) + struct.pack(">i", 3) + struct.pack(">i", -1)
    assert decode_value(parse_type("tuple<int, text>"), tup) == [3, None]


def test_vints() -> None:
    assert read_unsigned_vint(b"\x05", 0) == (5, 1)
    assert read_unsigned_vint(b"\x81\x00", 0) == (256, 2)
    assert read_unsigned_vint(b"\xff" + b"\x00" * 7 + b"\x01", 0) == (1, 9)
    assert read_signed_vint(b"\x03", 0) == (-2, 1)


def _convert(type_text: str, modes: NumberModes, value: Any, key: bool = False) -> Any:
    column = Column("c", 0, type_text, optional=True, native_type=0 if key else 1)
    table = Table(TableId(None, "ks", "t"), (column,), ())
    conv = CassandraValueConverters(modes).converter_for(table, column)
    assert conv is not None
    out = conv(value if key else (value, None, True))
    return out if key else out["value"]


def test_decimal_and_varint_modes_convert_the_decoders_text() -> None:
    text = NumberModes()
    assert _convert("decimal", text, "1E-3") == "0.001"  # Java's toPlainString
    assert _convert("decimal", text, "1E+3", key=True) == "1000"
    assert _convert("decimal", NumberModes(decimal="double"), "-12.345") == -12.345
    assert _convert("decimal", NumberModes(decimal="precise"), "2.50") == {
        "scale": 2,
        "value": b"\x00\xfa",
    }
    assert _convert("varint", text, "123456789012345678901234") == "123456789012345678901234"
    assert _convert("varint", NumberModes(varint="precise"), "-7") == decimal.Decimal(-7)
    assert _convert("varint", NumberModes(varint="long"), str(-(2**63))) == -(2**63)
    with pytest.raises(ValueError, match=r"does not fit varint\.handling\.mode=long"):
        _convert("varint", NumberModes(varint="long"), str(2**63))
    # inside collections; map keys stay text, a decimal key in its plain form in every mode
    double = NumberModes(decimal="double")
    assert _convert("list<decimal>", double, ["1E-3", None]) == [0.001, None]
    assert _convert("map<decimal, decimal>", double, {"1E-3": "2"}) == {"0.001": 2.0}
    assert _convert("map<varint, text>", NumberModes(varint="long"), {"5": "x"}) == {"5": "x"}


def test_element_wise_writes_of_sets_and_maps_convert_their_removed_elements() -> None:
    """A set's removed elements convert as its elements do, a map's removed keys as its keys
    (text, a decimal key in its plain form); a whole write (and a snapshot read, which has no
    fourth member) has ``removed`` null; lists and frozen sets have no such field."""
    double = NumberModes(decimal="double")
    modes = CassandraValueConverters(double)

    def cell(type_text: str, value: Any) -> Any:
        column = Column("c", 0, type_text, optional=True, native_type=1)
        table = Table(TableId(None, "ks", "t"), (column,), ())
        conv = modes.converter_for(table, column)
        assert conv is not None
        fields = [f.name for f in modes.schema_for(table, column).fields]  # type: ignore[union-attr]
        return conv(value), fields

    out, fields = cell("set<decimal>", (["1E-3"], None, True, ["2", "1E+1"]))
    assert out["value"] == [0.001] and out["removed"] == [2.0, 10.0]
    assert fields == ["value", "deletion_ts", "set", "removed"]
    out, _ = cell("map<decimal, int>", ({"1E-3": 1}, None, True, ["1E+1"]))
    assert out["value"] == {"0.001": 1} and out["removed"] == ["10"]
    out, _ = cell("map<int, text>", ({}, None, True, [5]))
    assert out["removed"] == ["5"]
    out, _ = cell("set<int>", ([1, 2], 1_000_000, True, None))
    assert out["removed"] is None and out["deletion_ts"] == 1_000_000
    out, _ = cell("set<int>", ([1, 2], None, True))  # a snapshot read
    assert out["removed"] is None
    for whole in ("list<int>", "frozen<set<int>>"):
        out, fields = cell(whole, ([1], None, True))
        assert "removed" not in out and fields == ["value", "deletion_ts", "set"]


USER_TYPES = {
    ("ks", "address"): (["street", 'Odd "name"'], ["text", "frozen<list<int>>"]),
    ("ks", "person"): (["name", "addr"], ["text", "frozen<address>"]),
    ("other", "tag"): (["v"], ["int"]),
}


def test_user_defined_types_resolve_and_spell_themselves_inline() -> None:
    """A UDT name is looked up in system_schema.types (of the column's keyspace, or the one
    it names); the parsed type prints as inline text that parses back without the
    definitions, quoting odd field names; a non-frozen UDT column is refused, named."""
    t = parse_type("frozen<person>", "ks", USER_TYPES)
    assert t.name == "udt" and t.frozen and t.udt == "ks.person" and t.fields == ("name", "addr")
    assert t.params[1].fields == ("street", 'Odd "name"')
    assert parse_type(str(t)) == t
    assert 'udt<ks.address, street:text, "Odd ""name""":frozen<list<int>>>' in str(t)
    listed = parse_type("list<frozen<other.tag>>", "ks", USER_TYPES)
    assert listed.params[0].udt == "other.tag" and parse_type(str(listed)) == listed
    with pytest.raises(CqlTypeError, match="non-frozen user-defined type"):
        parse_type("address", "ks", USER_TYPES)
    with pytest.raises(CqlTypeError, match="user-defined or counter"):
        parse_type("frozen<unknown>", "ks", USER_TYPES)


def test_user_defined_type_values_decode_to_fields_and_convert_as_their_types() -> None:
    t = parse_type("frozen<person>", "ks", USER_TYPES)
    addr = struct.pack(">i", 1) + b"s" + struct.pack(">i", -1)  # the list field null
    raw = struct.pack(">i", 3) + b"ann" + struct.pack(">i", len(addr)) + addr
    assert decode_value(t, raw) == {"name": "ann", "addr": {"street": "s", 'Odd "name"': None}}
    # fields added to the type after the value was written read as null
    assert decode_value(t, struct.pack(">i", 3) + b"bob") == {"name": "bob", "addr": None}
    modes = CassandraValueConverters(NumberModes(decimal="double"))
    column = Column(
        "c",
        0,
        str(parse_type("frozen<dec>", "ks", {("ks", "dec"): (["d"], ["decimal"])})),
        optional=True,
        native_type=1,
    )
    table = Table(TableId(None, "ks", "t"), (column,), ())
    conv = modes.converter_for(table, column)
    assert conv is not None and conv(({"d": "1E-3"}, None, True))["value"] == {"d": 0.001}
    schema = modes.schema_for(table, column)
    assert schema is not None and schema.fields[0].schema.name == "ks.dec"  # type: ignore[union-attr]
