"""CQL type strings from system_schema and the values they decode to."""

from __future__ import annotations

import struct

import pytest

from connectors.cassandra.cqltypes import CqlTypeError, decode_value, parse_type
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
