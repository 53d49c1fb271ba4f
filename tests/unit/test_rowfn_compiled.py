"""The compiled row function (``cdc/schema/_rowfn_c.c``) against its reference, the generated
Python of ``table_schema._generated_row_fn``: the same dict (values, their types and the key
order) or the same exception, on generated rows of every converter kind it knows natively,
the converters it only calls, NULLs in optional and required columns, and odd text."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import cdc.schema._rowfn_c  # noqa: F401  built by the install; not skipped when missing
import pytest

from cdc import compiled
from cdc.schema import logical
from cdc.schema.model import BOOLEAN, FLOAT64, INT32, INT64, STRING, Schema, array
from cdc.schema.table_schema import _Col, _compile_row_fn, _generated_row_fn, _native_row_fn
from cdc.spi.events import UNAVAILABLE
from connectors.postgres import types as pgt

_INTS = ["0", "-1", "9223372036854775807", "-9223372036854775808", "123456789012345678901234",
         " 12 ", "1_000", "\u0661\u0662", "", "x", "1.5", "-"]  # fmt: skip
_BOOLS = ["t", "f", "", "true", "T", "tt"]
_TSTZ = [
    "2018-06-20 15:13:16.945104+00", "2018-06-20 15:13:16+00", "2018-06-20 15:13:16.1+00",
    "0001-01-01 00:00:00+00 BC", "infinity", "-infinity", "2018-06-20 17:13:16.5+02",
    "2018-06-20 15:13:16-03:30", "12345-01-01 00:00:00+00", "2018-06-20 15:13:16.945104+00:00",
    "2018-06-20 15:13:16+01", "2018-06-20X15:13:16.945104+00", "2018-06-2é 15:13:16.945104+00",
    "2018-0.-20 15:13:16.945104+00", "2018-06-20 15:13:16.+00", "2018-06-20 15:13:16.1234567+00",
]  # fmt: skip
_NUMS = ["0", "-0", "12.50", "-12.50", "1.5", "12.500", "1e5", "1E5", "NaN", "Infinity",
         "-Infinity", "1.2.3", ".50", "-.50", "", "-", "+1.00", " 1.00", "99999999999999999.99",
         "\u0661.\u0660\u0660", "100", "-100", "12.5\u0660"]  # fmt: skip
_TEXTS = ["", "a", "héllo 🦀", "t"]
_FLOATS = ["1.5", "NaN", "-Infinity", "x", "1e308", "1e309", "-0", " 2 ", "inf", "1_0", "0x10"]
_DATES = ["2024-02-29", "2023-02-29", "1970-01-01", "0001-01-01", "9999-12-31", "0000-01-01",
          "2024-13-01", "2024-00-10", "2024-04-31", "infinity", "-infinity", "20240101",
          "2024-W01-1", "1900-02-29", "2000-02-29", "12345-01-01", "0044-03-15 BC", "2024-1-01",
          "1969-12-31", "1600-03-01"]  # fmt: skip


_TIMESTAMPS = ["2018-06-20 15:13:16.945104", "2018-06-20 15:13:16", "2018-06-20 15:13:16.1",
               "1969-12-31 23:59:59.999999", "0001-01-01 00:00:00", "9999-12-31 23:59:59.999999",
               "1900-02-29 00:00:00", "2024-02-29 12:00:00", "2023-02-29 12:00:00", "infinity",
               "-infinity", "0044-03-15 12:00:00 BC", "2018-06-20 24:00:00", "2018-06-20 23:60:00",
               "2018-06-20 23:59:60", "2018-06-20 15:13:16.", "2018-06-20 15:13:16.1234567",
               "2018-06-20T15:13:16", "2018-06-20 15:13", "12345-06-20 15:13:16",
               "0000-01-01 00:00:00", "2018-6-20 15:13:16", "2018-06-20 15:13:1a",
               "2018-06-20 15:13:16+00"]  # fmt: skip
_TIMES = ["15:13:16.945104", "00:00:00", "24:00:00", "23:59:59.999999", "15:13:16.1", "15:13",
          "15:13:16.", "15:13:16.1234567", "1:13:16", "15:13:16+00", "99:99:99", "15:1a:16",
          "15:13:16.12a"]  # fmt: skip


def _col(i: int, name: str, schema: Schema, fn: Any) -> _Col:
    return _Col(name, i, schema, fn, "__unavailable")


def _tstz() -> Schema:
    return logical.zoned_timestamp().with_(optional=True)


def _padded(digits: int) -> Any:
    """The envelope-3 timestamptz(p) converter, as types.py builds it."""
    mapped = pgt._temporal(pgt.TIMESTAMPTZ, digits, pgt.Modes(envelope="3"))
    assert mapped is not None and mapped[1].__tidemark_native__ == (6, digits)
    return mapped[1]


def _variable() -> Any:
    """The unconstrained numeric converter, as types.py builds it."""
    _schema, conv = pgt._decimal(pgt.Modes(), -1)
    assert conv.__tidemark_native__ == (9, None)
    return conv


_VARNUMS = [*_NUMS, "127", "128", "-128", "-129", "255", "-256", "32768", "0.000", "-0.001",
                    "9" * 38, "-" + "9" * 38, "1" + "0" * 38, "0." + "0" * 37 + "1",
                    "1" * 39, "12345678901234567890.123456789012345678", "5.", "1..2", "--1",
                    "1-", "0" * 40 + "1.5", "1" * 5000, "1." + "2" * 4100]  # fmt: skip


def _dec(scale: int, optional: bool) -> Schema:
    return logical.connect_decimal(scale).with_(optional=optional)


# (column, the texts its values are drawn from)
COLUMNS: list[tuple[_Col, list[str]]] = [
    (_col(0, "id", INT64, int), _INTS),
    (_col(1, "opt_int", INT32.with_(optional=True), int), _INTS),
    (_col(2, "flag", BOOLEAN, pgt._bool), _BOOLS),
    (_col(3, "at", logical.zoned_timestamp().with_(optional=True), pgt._timestamptz), _TSTZ),
    (_col(4, "price", _dec(2, True), pgt._fixed_decimal(2, None)), _NUMS),
    (_col(5, "whole", _dec(0, False), pgt._fixed_decimal(0, None)), _NUMS),
    (_col(6, "neg", _dec(-2, True), pgt._fixed_decimal(-2, None)), _NUMS),
    (_col(7, "lenient", _dec(3, True), pgt._fixed_decimal(3, lambda v: "special " + v)), _NUMS),
    (_col(13, "at6", _tstz(), _padded(6)), _TSTZ),
    (_col(14, "at1", _tstz(), _padded(1)), _TSTZ),
    (_col(15, "at3", _tstz(), _padded(3)), _TSTZ),
    (_col(8, "f", FLOAT64.with_(optional=True), pgt._float), _FLOATS),
    (_col(16, "d", INT32.with_(optional=True), pgt._date_days), _DATES),
    (_col(17, "v", logical.variable_scale_decimal().with_(optional=True), _variable()), _VARNUMS),
    (_col(18, "ts", INT64.with_(optional=True), pgt._timestamp_micros), _TIMESTAMPS),
    (_col(19, "ts_ms", INT64.with_(optional=True), pgt._timestamp_millis), _TIMESTAMPS),
    (_col(20, "tm", INT64.with_(optional=True), pgt._time_micros), _TIMES),
    (_col(21, "tm_ms", INT32.with_(optional=True), pgt._time_millis), _TIMES),
    (_col(9, "plain", STRING.with_(optional=True), None), _TEXTS),
    (_col(10, "required_plain", STRING, None), _TEXTS),
    (_col(11, "tags", array(STRING), None), _TEXTS),
    (_col(12, "dflt", STRING.with_(default="dv"), str.upper), _TEXTS),
]  # fmt: skip


def _outcome(fn: Any, row: list[Any]) -> Any:
    try:
        out = fn(row)
    except Exception as exc:
        return ("raised", type(exc), str(exc))
    return [(k, type(v), repr(v)) for k, v in out.items()]  # repr: NaN != NaN


def test_generated_rows_give_identical_dicts_or_errors() -> None:
    rng = random.Random(18)
    checked = raised = 0
    for _ in range(300):
        picked = rng.sample(COLUMNS, rng.randrange(1, len(COLUMNS) + 1))
        cols = [c for c, _ in picked]
        native, reference = _native_row_fn(cols), _generated_row_fn(cols, "value_t")
        assert native is not None
        for _ in range(40):
            row: list[Any] = [None] * len(COLUMNS)
            for c, texts in picked:
                row[c.index] = None if rng.random() < 0.15 else rng.choice(texts)
            want = _outcome(reference, row)
            assert _outcome(native, row) == want, row
            assert _outcome(native, tuple(row)) == want
            checked += 1
            raised += want[0] == "raised"
    assert checked == 12_000 and 1000 < raised < 11_000


def test_the_common_values_take_the_native_path_and_keep_their_types() -> None:
    cols = [c for c, _ in COLUMNS]
    native = _native_row_fn(cols)
    assert native is not None
    row = ["7", "8", "t", "2018-06-20 15:13:16.945104+00", "12.50", "3", "-100", "1.500",
           "1.5", "p", None, None, "x", "2018-06-20 15:13:16.9+00", "2018-06-20 15:13:16+00",
           "2018-06-20 15:13:16.945104+00", "2024-02-29", "-1234.5678", "1969-12-31 23:59:59.9995",
           "1969-12-31 23:59:59.9995", "15:13:16.945104", "15:13:16.945104"]  # fmt: skip
    out = native(row)
    assert out == _generated_row_fn(cols, "value_t")(row)
    assert out["id"] == 7 and out["flag"] is True and out["at"] == "2018-06-20T15:13:16.945104Z"
    assert str(out["price"]) == "12.50" and out["required_plain"] == "" and out["tags"] == []
    assert out["dflt"] == "X" and out["at6"] == "2018-06-20T15:13:16.900000Z"
    assert out["at1"] == "2018-06-20T15:13:16.0Z" and out["at3"] == "2018-06-20T15:13:16.945Z"
    assert out["d"] == 19782 and out["f"] == 1.5
    assert out["v"] == {"scale": 4, "value": (-12345678).to_bytes(4, "big", signed=True)}
    assert out["ts"] == -500 and out["ts_ms"] == -1  # floor division before the epoch
    assert out["tm"] == 54_796_945_104 and out["tm_ms"] == 54_796_945


def test_the_unavailable_twin_and_short_rows() -> None:
    cols = [c for c, _ in COLUMNS[:4]]
    fast, partial = _compile_row_fn(cols, "value_t")
    assert partial(["1", UNAVAILABLE, "f", None]) == {
        "id": 1, "opt_int": "__unavailable", "flag": False, "at": None
    }  # fmt: skip
    with pytest.raises(IndexError):
        fast(["1", "2"])
    with pytest.raises(IndexError):
        _generated_row_fn(cols, "value_t")(["1", "2"])


def test_dates_across_the_whole_range_give_the_references_days() -> None:
    cols = [_col(0, "d", INT32, pgt._date_days)]
    native, reference = _native_row_fn(cols), _generated_row_fn(cols, "value_t")
    assert native is not None
    for ordinal in range(1, dt.date.max.toordinal() + 1, 37):
        row = [dt.date.fromordinal(ordinal).isoformat()]
        assert native(row) == reference(row), row


def test_unconstrained_numerics_give_the_decimal_paths_struct() -> None:
    """The converter reads numeric text without a Decimal; native and converter agree with
    the Decimal path (``logical.variable_scale_value`` of the value without trailing zeros,
    as Debezium strips them) on every value it accepts."""
    import decimal

    conv = _variable()
    cols = [_col(0, "v", logical.variable_scale_decimal(), conv)]
    native, reference = _native_row_fn(cols), _generated_row_fn(cols, "value_t")
    assert native is not None
    rng = random.Random(9)
    texts = list(_VARNUMS)
    for _ in range(20_000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 45)))
        if rng.random() < 0.7 and len(digits) > 1:
            cut = rng.randrange(1, len(digits))
            digits = digits[:cut].lstrip("0").rjust(1, "0") + "." + digits[cut:]
        texts.append(("-" if rng.random() < 0.5 else "") + digits)
    for text in texts:
        try:
            # Debezium's stripTrailingZeros, then a scale of at least 0 (1.50 -> 1.5)
            exact = decimal.Context(prec=10_000)
            stripped = decimal.Decimal(text).normalize(exact)
            exponent = stripped.as_tuple().exponent
            if isinstance(exponent, int) and exponent > 0:
                stripped = stripped.quantize(decimal.Decimal(1), context=exact)
            want = logical.variable_scale_value(stripped)
        except (ArithmeticError, ValueError):  # NaN, infinities, not a number
            want = None
        if text in pgt.SPECIAL_NUMERIC or want is None:
            assert _outcome(native, [text]) == _outcome(reference, [text]), text
            assert _outcome(reference, [text])[0] == "raised", text
            continue
        assert conv(text) == want, text
        assert native([text]) == reference([text]) == {"v": want}, text


def test_timestamps_and_times_across_the_range_give_the_references_values() -> None:
    cols = [
        _col(0, "ts", INT64, pgt._timestamp_micros),
        _col(1, "ts_ms", INT64, pgt._timestamp_millis),
        _col(2, "tm", INT64, pgt._time_micros),
        _col(3, "tm_ms", INT32, pgt._time_millis),
    ]
    native, reference = _native_row_fn(cols), _generated_row_fn(cols, "value_t")
    assert native is not None
    rng = random.Random(10)
    lo, hi = dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    span = int((hi - lo).total_seconds())
    for _ in range(20_000):
        at = lo + dt.timedelta(seconds=rng.randrange(span), microseconds=rng.randrange(10**6))
        text = at.isoformat(" ")
        if at.microsecond and rng.random() < 0.5:  # PostgreSQL drops trailing zeros
            text = text.rstrip("0")
        row = [text, text, text[11:], text[11:]]
        assert native(row) == reference(row), row


def test_mysql_date_and_datetime_text_give_the_references_values() -> None:
    """A MySQL/MariaDB snapshot reads DATE and DATETIME as the server's text; the compiled
    row function converts valid values itself and must agree with the connector's own
    converters everywhere: every year (below 100 only when two-digit years are not
    adjusted), zero and invalid dates, fractions of every length, milliseconds floored."""
    from connectors.mysql import types as myt

    rng = random.Random(1000)
    lo, hi = dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    span = int((hi - lo).total_seconds())
    odd = ["0000-00-00", "0000-00-00 00:00:00", "2024-02-30", "2023-02-29 00:00:00",
           "2024-00-10 10:00:00", "2024-01-01 24:00:00", "0099-12-31", "0070-06-01 12:00:00.5",
           "0001-01-01 00:00:00.000001", "1969-12-31 23:59:59.9995", "2024-01-01",
           "2024-01-01 00:00:00.1234567"]  # fmt: skip
    for adjust in (True, False):
        cols = [
            _col(0, "d", INT32, myt._date_conv(None, adjust)),
            _col(1, "ts_ms", INT64, myt._datetime_conv(None, adjust, 1000)),
            _col(2, "ts", INT64, myt._datetime_conv(0, adjust, 1)),
        ]
        native, reference = _native_row_fn(cols), _generated_row_fn(cols, "value_t")
        assert native is not None
        texts = odd[:]
        for _ in range(20_000):
            at = lo + dt.timedelta(seconds=rng.randrange(span), microseconds=rng.randrange(10**6))
            if rng.random() < 0.05:
                at = at.replace(year=rng.randrange(1, 200))
            fsp = rng.randrange(0, 7)
            text = at.isoformat(" ", "seconds")
            if fsp:
                text += "." + f"{at.microsecond:06d}"[:fsp]
            texts.append(text)
        for text in texts:
            row = [text[:10], text, text]
            assert native(row) == reference(row), (adjust, row)
        assert native(["0050-03-01", "0050-03-01 00:00:00", None])["d"] == (
            (dt.date(2050 if adjust else 50, 3, 1) - dt.date(1970, 1, 1)).days
        )


def test_mysql_decimal_text_gives_the_references_decimals() -> None:
    """A snapshot reads DECIMAL(p,s) as text with exactly s decimals, made a Decimal by the
    compiled row function; any other value (fewer or more decimals, an int of BIGINT
    UNSIGNED, a Decimal from the binlog, odd text) goes through the converter, and both must
    give the same Decimal, exponent included."""
    import decimal

    from connectors.mysql import types as myt

    rng = random.Random(65)
    for scale in (0, 1, 2, 4, 10, 30):
        cols = [_col(0, "n", STRING, myt._decimal_precise(scale))]
        native, reference = _native_row_fn(cols), _generated_row_fn(cols, "value_t")
        assert native is not None
        values: list[Any] = ["0", "-0", "1.5", "12", "1e3", "-", "", " 1.00", 7, 2**64 - 1]
        values.append(decimal.Decimal("3.14159"))
        for _ in range(3000):
            digits = rng.randrange(1, 66 - scale) if scale < 65 else 1
            whole = str(rng.randrange(10**digits)) if rng.random() < 0.9 else "0"
            frac = "".join(rng.choice("0123456789") for _ in range(scale))
            sign = "-" if rng.random() < 0.3 else ""
            values.append(sign + whole + ("." + frac if scale else ""))
        for value in values:
            want, got = _outcome(reference, [value]), _outcome(native, [value])
            assert got == want, (scale, value)


def test_mysql_snapshot_timestamps_give_the_references_text() -> None:
    """A snapshot's TIMESTAMP values (``SnapshotTimestamp``) are written as ZonedTimestamp
    text by the compiled row function, for every converter variant (1.2, and 3.x at every
    fsp, which pads binlog values but not the snapshot's); the epoch (the zero value), binlog
    datetimes, aware values and zero-date text stay with the converter, and both agree."""
    from connectors.mysql import types as myt

    rng = random.Random(2038)
    lo, hi = dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    span = int((hi - lo).total_seconds())
    values: list[Any] = [myt.SnapshotTimestamp(1970, 1, 1), dt.datetime(1970, 1, 1),
                         "0000-00-00 00:00:00", "2024-02-30 00:00:00",
                         dt.datetime(2024, 5, 1, 12, tzinfo=dt.UTC),
                         myt.SnapshotTimestamp(2024, 5, 1, 12, tzinfo=dt.UTC),
                         myt.SnapshotTimestamp(1970, 1, 1, 0, 0, 0, 1)]  # fmt: skip
    for _ in range(20_000):
        at = lo + dt.timedelta(seconds=rng.randrange(span), microseconds=rng.randrange(10**6))
        if rng.random() < 0.3:
            at = at.replace(microsecond=rng.choice([0, 500000, 120000, 1]))
        kind = myt.SnapshotTimestamp if rng.random() < 0.8 else dt.datetime
        values.append(kind.combine(at.date(), at.time()))
    for zero in ("1970-01-01T00:00:00Z", None):
        convs = [myt._timestamp_conv(zero)]
        convs += [myt._timestamp_v3(myt._timestamp_conv(zero), fsp) for fsp in range(7)]
        assert {compiled.native_kind(conv) for conv in convs} == {
            (compiled.NATIVE_KINDS["naive_zoned"], myt.SnapshotTimestamp)
        }
        cols = [_col(i, f"ts{i}", STRING, conv) for i, conv in enumerate(convs)]
        native, reference = _native_row_fn(cols), _generated_row_fn(cols, "value_t")
        assert native is not None
        for value in values:
            row = [value] * len(cols)
            assert _outcome(native, row) == _outcome(reference, row), value
    out = native([myt.SnapshotTimestamp(999, 1, 2, 3, 4, 5, 120000)] * len(cols))
    assert set(out.values()) == {"0999-01-02T03:04:05.12Z"}


def test_mysql_text_json_and_boolean_values_give_the_references_values() -> None:
    """MySQL's text, enum and JSON converters hand a str back unchanged, and its BOOLEAN
    converter is ``bool`` of an int: the compiled row function does those cases itself. Every
    other value (bytes of a binlog text column, a str subclass, JSON the binlog decoded into
    Python values, text of a boolean, a bool) still goes through the converter, and both paths
    give the same value of the same type, the str itself included."""
    from connectors.mysql import types as myt

    class Text(str):
        pass

    kinds = {compiled.native_kind(fn) for fn in (myt._text, myt._json_conv)}
    assert kinds == {(compiled.NATIVE_KINDS["str_pass"], None)}
    assert compiled.native_kind(myt._boolean) == (compiled.NATIVE_KINDS["bool_int"], None)
    texts: list[Any] = ["", "a", "héllo 🦀", '{"k": 1}', Text("sub"), b"bytes", bytearray(b"ba"),
                        b"\xff\xfe", {"k": [1, 2]}, [1, "x"], 12, None]  # fmt: skip
    bools: list[Any] = [0, 1, -1, 2, 255, 2**70, True, False, "0", "1", "", " 0 ", "false",
                        "FALSE", "true", None]  # fmt: skip
    cols = [_col(0, "t", STRING.with_(optional=True), myt._text),
            _col(1, "j", STRING.with_(optional=True), myt._json_conv),
            _col(2, "b", BOOLEAN.with_(optional=True), myt._boolean)]  # fmt: skip
    native, reference = _native_row_fn(cols), _generated_row_fn(cols, "value_t")
    assert native is not None
    for text in texts:
        for flag in bools:
            row = [text, text, flag]
            assert _outcome(native, row) == _outcome(reference, row), row
    row = ["same", "same", 3]
    out = native(row)
    assert out["t"] is row[0] and out["j"] is row[1] and out["b"] is True
