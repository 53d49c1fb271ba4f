"""The PostgreSQL type mapping from the server's text form (seed §3.4)."""

from __future__ import annotations

import decimal

import pytest

from cdc.schema import logical
from connectors.postgres import types as t


def conv(oid: int, typmod: int = -1, modes: t.Modes | None = None, info: dict | None = None):  # type: ignore[no-untyped-def,type-arg]
    res = t.TypeRegistry(modes or t.Modes(), info or {}).resolve(oid, typmod)
    assert res is not None
    schema, fn = res
    return schema, (fn or (lambda v: v))


def test_timestamps_are_utc_whatever_the_process_zone() -> None:
    schema, fn = conv(t.TIMESTAMP)
    assert schema.name == logical.DBZ_MICRO_TIMESTAMP
    assert fn("2018-06-20 15:13:16.945104") == 1529507596945104  # AC-16
    schema, fn = conv(t.TIMESTAMP, 3)
    assert schema.name == logical.DBZ_TIMESTAMP and fn("2018-06-20 15:13:16.945") == 1529507596945
    schema, fn = conv(t.TIMESTAMP, modes=t.Modes(time_precision="connect"))
    assert schema.name == logical.CONNECT_TIMESTAMP
    _, fn = conv(t.TIMESTAMPTZ)
    assert fn("2018-06-20 15:13:16.945104+02") == "2018-06-20T13:13:16.945104Z"
    assert fn("2018-06-20 15:13:16+05:30") == "2018-06-20T09:43:16Z"
    _, fn = conv(t.TIMETZ)
    assert fn("04:05:06.5-01") == "05:05:06.5Z"


def test_time_and_date() -> None:
    schema, fn = conv(t.TIME, 3)
    assert schema.name == logical.DBZ_TIME and fn("04:05:06.789") == 14706789
    schema, fn = conv(t.TIME, 3, t.Modes(time_precision="adaptive_time_microseconds"))
    assert schema.name == logical.DBZ_MICRO_TIME and fn("04:05:06.789") == 14706789000
    schema, fn = conv(t.DATE)
    assert schema.name == logical.DBZ_DATE and fn("1970-01-02") == 1 and fn("1969-12-31") == -1


def test_numeric_modes() -> None:
    typmod = (10 << 16 | 2) + 4
    schema, fn = conv(t.NUMERIC, typmod)
    assert schema.name == logical.CONNECT_DECIMAL and schema.parameters == {
        "scale": "2",
        "connect.decimal.precision": "10",
    }
    assert fn("12.34") == decimal.Decimal("12.34")
    schema, fn = conv(t.NUMERIC)
    assert schema.name == logical.DBZ_VARIABLE_SCALE_DECIMAL
    assert fn("12.3456") == {"scale": 4, "value": (123456).to_bytes(3, "big")}
    _, fn = conv(t.NUMERIC, typmod, t.Modes(decimal="double"))
    assert fn("12.34") == 12.34 and fn("NaN") != fn("NaN")  # AC-20: NaN
    _, fn = conv(t.NUMERIC, typmod, t.Modes(decimal="string"))
    assert fn("12.34") == "12.34" and fn("NaN") == "NAN"


def test_interval_modes() -> None:
    _, fn = conv(t.INTERVAL, modes=t.Modes(interval="string"))
    assert fn("P1Y2M3DT4H5M6.78S") == "P1Y2M3DT4H5M6.78S"  # AC-22
    assert fn("PT-1M") == "P0Y0M0DT0H-1M0S"
    _, fn = conv(t.INTERVAL)
    assert fn("P1M") == round(365.25 / 12 * 86400e6)
    with pytest.raises(ValueError, match="iso_8601"):
        fn("1 mon")


def test_binary_bits_and_misc() -> None:
    _, fn = conv(t.BYTEA)
    assert fn("\\x01ff") == b"\x01\xff"
    _, fn = conv(t.BYTEA, modes=t.Modes(binary="base64"))
    assert fn("\\x01ff") == "Af8="
    _, fn = conv(t.BYTEA, modes=t.Modes(binary="hex"))
    assert fn("\\x01ff") == "01ff"
    schema, fn = conv(t.BIT, 10)
    assert schema.parameters == {"length": "10"}
    assert fn("1010000001") == (0b1010000001).to_bytes(2, "little")  # AC-21
    schema, fn = conv(t.BIT, 1)
    assert fn("1") is True
    _, fn = conv(t.POINT)
    assert fn("(1.5,-2)")["x"] == 1.5 and fn("(1.5,-2)")["y"] == -2.0
    _, fn = conv(t.MONEY)
    assert fn("$1,234.56") == decimal.Decimal("1234.56") and fn("-$1.00") == decimal.Decimal("-1")


def test_arrays_enums_hstore_domains_unknown() -> None:
    info = {
        1007: t.TypeInfo(1007, "_int4", "A", element_oid=t.INT4),
        1009: t.TypeInfo(1009, "_text", "A", element_oid=t.TEXT),
        9000: t.TypeInfo(9000, "mood", "E", enum_labels=("sad", "happy")),
        9001: t.TypeInfo(9001, "hstore", "U"),
        9002: t.TypeInfo(9002, "posint", "d", base_oid=t.INT4),
        9003: t.TypeInfo(9003, "mystery", "U"),
    }
    _, fn = conv(1007, info=info)
    assert fn("{1,NULL,3}") == [1, None, 3] and fn("{{1,2},{3,4}}") == [[1, 2], [3, 4]]
    _, fn = conv(1009, info=info)
    assert fn('{"a b","c\\"d",NULL}') == ["a b", 'c"d', None]
    schema, _ = conv(9000, info=info)
    assert schema.name == logical.DBZ_ENUM and schema.parameters == {"allowed": "sad,happy"}
    _, fn = conv(9001, modes=t.Modes(hstore="map"), info=info)
    assert fn('"a"=>"1", "b"=>NULL') == {"a": "1", "b": None}  # AC-23
    _, fn = conv(9001, info=info)  # json by default, as Debezium (the seed contradicts itself)
    assert fn('"a"=>"1"') == '{"a":"1"}'
    schema, fn = conv(9002, info=info)
    assert schema.type.value == "int32" and fn("5") == 5
    assert t.TypeRegistry(t.Modes(), info).resolve(9003, -1) is None
    schema, fn = conv(9003, modes=t.Modes(include_unknown=True), info=info)
    assert fn("abc") == b"abc"
