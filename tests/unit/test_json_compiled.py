"""The compiled JSON payload writer (``cdc/converters/_json_c.c``) against its reference.

``JsonConverter.from_connect`` writes records with the compiled writer when it was built;
the reference is the same converter with the writer switched off (rewrite the value, then
orjson). Both must give the same bytes for every value and config, and the same error where
the reference raises. Where the compiled writer is expected to do the whole value itself, the
test also calls it directly, so a silent fallback to the reference cannot hide a difference.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import gc
import itertools
import math
import random
import struct as struct_mod
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest

from bench import envelope_bench
from cdc.converters import _json_c as writer  # built by the install
from cdc.converters import json as jc
from cdc.converters.json import JsonConverter
from cdc.pipeline.dispatcher import EventDispatcher
from cdc.pipeline.queue import ChangeEventQueue
from cdc.record import SourceRecord
from cdc.schema import logical as L
from cdc.schema.model import Schema, Type, array, map_of, primitive, struct
from cdc.spi import Column, Operation, RowChange, Table, TableId
from connectors.postgres import types as t
from connectors.postgres.connector import SOURCE_SCHEMA

D = decimal.Decimal

CONFIGS = [
    {"schemas.enable": se, "decimal.format": fmt, "replace.null.with.default": rn}
    for se, fmt, rn in itertools.product(
        ("true", "false"), ("BASE64", "NUMERIC"), ("true", "false")
    )
]


@pytest.fixture(autouse=True)
def _writer_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled writer, also under TIDEMARK_PURE_PYTHON=1 (which only says what the
    converter picks by default)."""
    writer.configure(
        functools.partial(orjson.dumps, default=jc._default), orjson.dumps, decimal.Decimal
    )
    monkeypatch.setattr(jc, "_c", writer)
    monkeypatch.setattr(jc, "_encode", writer.encode)


def reference(config: dict[str, Any], schema: Schema | None, value: Any) -> Any:
    """The reference's bytes, or the type and text of its error."""
    saved = jc._c
    jc._c = None  # plans compiled meanwhile are None: the converter keeps the reference
    try:
        return JsonConverter(config).from_connect("t", schema, value)
    except Exception as exc:
        return type(exc), str(exc)
    finally:
        jc._c = saved


def compiled(conv: JsonConverter, schema: Schema | None, value: Any) -> Any:
    try:
        return conv.from_connect("t", schema, value)
    except Exception as exc:
        return type(exc), str(exc)


def direct(conv: JsonConverter, schema: Schema, value: Any) -> bytes:
    """The compiled writer alone (no fallback), with the converter's cached plan."""
    conv.from_connect("t", schema, value)
    _, head, _, _, plan = conv._by_id[id(schema)]
    assert plan is not None, "no compiled plan for this schema"
    out: bytes = writer.encode(plan, value, head, conv._tail)
    return out


# -- generated schemas and values ------------------------------------------------------------
TEXTS = [
    "",
    "plain",
    'quote " backslash \\ slash /',
    "".join(map(chr, range(0x20))) + "\x7f",
    "héllo wörld ñ",
    "日本語テキスト",
    "astral 🦀🐘 \U0010ffff",
    "\u2028\u2029",
    "x" * 3000,
]
FLOATS = [0.0, -0.0, 1.5, 0.1, 1e16, 1e-7, 5e-324, 1.7976931348623157e308, -2.5e-300, 3.0]
NON_FINITE = [math.nan, math.inf, -math.inf]
INTS = [0, 1, -1, 127, -128, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)]


def _decimal(rng: random.Random, scale: int) -> Any:
    r = rng.random()
    if r < 0.1:
        return D(0).scaleb(-scale) if scale >= 0 else D(0)
    if r < 0.15:
        return D("-0." + "0" * max(scale, 1))
    digits = rng.choice([1, 3, 10, 18, 19, 20, 39, 60])
    unscaled = rng.randrange(10**digits) * rng.choice([1, -1])
    value = D(unscaled).scaleb(-scale)
    if r < 0.3:
        return value.normalize()  # other exponents, "1E+3" forms
    if r < 0.35:
        return D(unscaled).scaleb(-scale - 2)  # needs rounding
    if r < 0.38:
        return unscaled  # an int where a Decimal is expected
    return value


SCALES = [0, 2, 5, 10, 18, 30]


def _leaf_schemas() -> list[Schema]:
    out = [primitive(ty) for ty in (Type.INT8, Type.INT16, Type.INT32, Type.INT64)]
    out += [primitive(Type.FLOAT32), primitive(Type.FLOAT64), primitive(Type.BOOLEAN)]
    out += [primitive(Type.STRING), primitive(Type.BYTES)]
    out += [L.connect_decimal(s) for s in SCALES]
    out += [L.connect_date(), L.connect_time(), L.connect_timestamp()]
    out += [L.micro_time(), L.timestamp_millis()]
    return out


def _default_for(schema: Schema, rng: random.Random) -> Any:
    return _value(schema, rng, nulls=False)


def _schema(rng: random.Random, depth: int = 0) -> Schema:
    r = rng.random()
    if depth >= 3 or r < 0.55:
        s = rng.choice(_leaf_schemas())
    elif r < 0.75:
        n = rng.randrange(1, 6)
        s = struct([(f"f{i}_{'ü' if i == 3 else ''}", _schema(rng, depth + 1)) for i in range(n)])
    elif r < 0.85:
        s = array(_schema(rng, depth + 1))
    elif r < 0.93:
        s = map_of(primitive(Type.STRING), _schema(rng, depth + 1))
    else:
        s = map_of(rng.choice(_leaf_schemas()), _schema(rng, depth + 1))
    if rng.random() < 0.5:
        s = s.as_optional()
    if rng.random() < 0.25:
        s = s.with_(default=_default_for(s, rng))
    return s


def _value(schema: Schema, rng: random.Random, *, nulls: bool = True) -> Any:
    if nulls and rng.random() < 0.12:
        return None
    ty = schema.type
    if ty is Type.STRUCT:
        out = {f.name: _value(f.schema, rng) for f in schema.fields}
        if nulls and out and rng.random() < 0.15:
            del out[rng.choice(list(out))]  # a missing field
        if nulls and rng.random() < 0.1:
            out["extra"] = rng.choice([1.25, math.nan, D("1.5"), b"\x00", "x"])
        if rng.random() < 0.2:
            out = dict(reversed(list(out.items())))  # the dict's own order wins
        return out
    if ty is Type.ARRAY:
        assert schema.value_schema is not None
        items = [_value(schema.value_schema, rng) for _ in range(rng.randrange(4))]
        return tuple(items) if rng.random() < 0.2 else items
    if ty is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        return {
            _value(schema.key_schema, rng, nulls=False): _value(schema.value_schema, rng)
            for _ in range(rng.randrange(4))
        }
    name = schema.name or ""
    if name == L.CONNECT_DECIMAL:
        return _decimal(rng, int((schema.parameters or {})["scale"]))
    if name == L.CONNECT_DATE:
        return rng.choice([rng.randrange(-40000, 40000), dt.date(2024, 2, 29)])
    if name == L.CONNECT_TIME:
        return rng.choice([rng.randrange(86_400_000), dt.time(23, 59, 59, 999_999)])
    if name == L.CONNECT_TIMESTAMP:
        return rng.choice(
            [rng.randrange(-(2**50), 2**50), dt.datetime(2026, 11, 26, 7, 1, 2, 345_678)]
        )
    if ty is Type.FLOAT32 or ty is Type.FLOAT64:
        return rng.choice(FLOATS + NON_FINITE + [rng.uniform(-1e9, 1e9), 7])
    if ty in (Type.INT8, Type.INT16, Type.INT32, Type.INT64):
        return rng.choice([*INTS, rng.randrange(-(2**40), 2**40)])
    if ty is Type.BOOLEAN:
        return rng.random() < 0.5
    if ty is Type.STRING:
        return rng.choice(TEXTS)
    return rng.randbytes(rng.randrange(0, 20))


def test_generated_values_give_the_reference_bytes_in_every_config() -> None:
    rng = random.Random(18)
    cases = []
    for _ in range(300):
        schema = _schema(rng)
        cases.append((schema, [_value(schema, rng) for _ in range(8)]))
    for config in CONFIGS:
        conv = JsonConverter(config)
        for schema, values in cases:
            for value in values:
                assert compiled(conv, schema, value) == reference(config, schema, value), (
                    config,
                    schema,
                    value,
                )


ENVELOPE_ROW = struct(
    [
        ("id", primitive(Type.INT64)),
        ("price", L.connect_decimal(2).as_optional()),
        ("big", L.connect_decimal(0).as_optional()),
        ("tiny", L.connect_decimal(30).as_optional()),
        ("ratio", primitive(Type.FLOAT64, optional=True)),
        ("r32", primitive(Type.FLOAT32, optional=True)),
        ("name", primitive(Type.STRING, optional=True)),
        ("blob", primitive(Type.BYTES, optional=True)),
        ("day", L.connect_date().as_optional()),
        ("at", L.connect_timestamp().as_optional()),
        ("status", primitive(Type.STRING, optional=True, default="new")),
        ("qty", primitive(Type.INT32, optional=True, default=0)),
        ("tags", array(primitive(Type.STRING), optional=True)),
        ("attrs", map_of(primitive(Type.STRING), L.connect_decimal(1), optional=True)),
        ("by_id", map_of(primitive(Type.INT32), primitive(Type.FLOAT64), optional=True)),
    ],
    name="srv.public.items.Value",
    optional=True,
)
ENVELOPE = struct(
    [
        ("before", ENVELOPE_ROW),
        ("after", ENVELOPE_ROW),
        ("source", SOURCE_SCHEMA),
        ("op", primitive(Type.STRING)),
        ("ts_ms", primitive(Type.INT64, optional=True)),
    ],
    name="srv.public.items.Envelope",
)

DECIMALS_NATIVE = [
    D("0.00"),
    D("-0.00"),
    D("12.50"),
    D("-12.50"),
    D("1E+3"),
    D("-1.2E+5"),
    D("0.000001"),
    D("92233720368547758.07"),
    D("-92233720368547758.08"),
    D("127"),
    D("128"),
    D("-128"),
    D("-129"),
    D("255.5"),
]
DECIMALS_FALLBACK = [
    D("92233720368547758.08"),  # unscaled beyond 64 bits
    D("1" * 60),
    D("-" + "9" * 45 + ".99"),
    D("1.005"),  # needs rounding
    D("NaN"),  # the reference's error
    D("Infinity"),
    5,
    "12.5",
]


def _row(i: int, price: Any) -> dict[str, Any]:
    return {
        "id": i,
        "price": price,
        "big": D(i) * 10**30 if i % 3 == 0 else D(-i),
        "tiny": D(i).scaleb(-30),
        "ratio": [0.1, math.nan, math.inf, -math.inf, 1e300, None][i % 6],
        "r32": [1.5, 3.4028234663852886e38, -0.0][i % 3],
        "name": TEXTS[i % len(TEXTS)],
        "blob": bytes(range(i % 40)),
        "day": i * 100 - 20000,
        "at": dt.datetime(2026, 1, 2, 3, 4, 5, i) if i % 5 == 0 else 1_700_000_000_000 + i,
        "status": None if i % 2 else "done",
        "qty": None if i % 4 == 0 else i,
        "tags": ["a", "ü", "🦀"][: i % 4],
        "attrs": {"k": D("1.5"), "nil": None} if i % 2 else {},
        "by_id": {i: 0.5, -i: math.nan} if i % 3 else None,
    }


def _source(i: int) -> dict[str, Any]:
    src: dict[str, Any] = {
        "version": "2.4.0",
        "connector": "postgresql",
        "name": "srv",
        "ts_ms": 1_700_000_000_000 + i,
        "db": "db",
        "schema": "public",
        "table": "items",
        "txId": i,
        "lsn": 24023128 + i,
    }
    if i % 2:
        src["snapshot"] = None  # default "false" when replaced
    return src


def _envelope(i: int, price: Any) -> dict[str, Any]:
    return {
        "before": None if i % 3 else _row(i, price),
        "after": _row(i, price),
        "source": _source(i),
        "op": "u",
        "ts_ms": 1_700_000_000_123,
    }


def test_envelopes_are_written_natively_with_the_reference_bytes() -> None:
    for config in CONFIGS:
        conv = JsonConverter(config)
        for i, price in enumerate(DECIMALS_NATIVE * 3):
            value = _envelope(i, price)
            expected = reference(config, ENVELOPE, value)
            assert direct(conv, ENVELOPE, value) == expected, (config, i)


def test_decimals_the_writer_leaves_to_the_reference_fix() -> None:
    schema = struct([("d", L.connect_decimal(2).as_optional())])
    for config in CONFIGS:
        conv = JsonConverter(config)
        for value in DECIMALS_FALLBACK:
            got = compiled(conv, schema, {"d": value})
            assert got == reference(config, schema, {"d": value}), (config, value)
    wide = struct([("d", L.connect_decimal(2))])
    assert direct(JsonConverter({}), wide, {"d": D("1" * 60)}) == reference(
        {}, wide, {"d": D("1" * 60)}
    )


def test_odd_values_and_errors_match_the_reference() -> None:
    schema = struct([("d", L.connect_decimal(2).as_optional()), ("f", primitive(Type.FLOAT64))])
    required = struct([("d", L.connect_decimal(2))])
    optional = schema.as_optional()

    class Sub(dict[str, Any]):
        pass

    odd: list[tuple[Schema | None, Any]] = [
        (schema, {"d": D(1), "f": 1.0, 2: "non-str key"}),
        (schema, Sub(d=D("1.5"), f=2.0)),
        (schema, {"d": D(1), "f": 2**64}),
        (schema, {"d": D(1), "f": 1.0, "x": 2**64 - 1}),
        (schema, {"d": D(1), "f": 1.0, "x": "\ud800"}),  # lone surrogate: orjson's error
        (schema, {"d": D(1), "f": 1.0, "x": object()}),
        (schema, {"d": D(1), "f": 1.0, "x": [[[[]]]] * 3}),
        (schema, {"d": D(1), "f": 1.0, "x": dt.datetime(2026, 11, 26, 7, 0)}),
        (schema, {"d": D(1), "f": "not a float"}),
        (schema, None),  # required, no default: the reference's error
        (optional, None),
        (required, {}),  # missing required decimal: null in both
        (None, None),  # the tombstone
        (None, {"a": [1, 2.5, math.nan], 1: 2}),  # schemaless
        (array(L.connect_decimal(0)), (D(i) for i in range(3))),  # a generator
        (map_of(primitive(Type.INT32), L.connect_decimal(0)), {1: D(2), None: None}),
        (map_of(primitive(Type.STRING), L.connect_decimal(0)), {1: D(2)}),
    ]
    deep: Any = {"d": D(1), "f": 1.0}
    for _ in range(300):
        deep = {"x": deep}
    odd.append((schema, {"d": D(1), "f": 1.0, "deep": deep}))
    for config in CONFIGS:
        for schema_, value in odd:
            if hasattr(value, "__next__"):  # consumed once per run
                continue
            got = compiled(JsonConverter(config), schema_, value)
            assert got == reference(config, schema_, value), (config, schema_, value)
    gen_schema = array(L.connect_decimal(0))
    conv = JsonConverter({})
    assert compiled(conv, gen_schema, (D(i) for i in range(3))) == reference(
        {}, gen_schema, (D(i) for i in range(3))
    )


def test_string_escapes_are_orjsons() -> None:
    schema = struct([("s", primitive(Type.STRING)), ("d", L.connect_decimal(0))])
    conv = JsonConverter({"schemas.enable": "false"})
    for cp in itertools.chain(range(0x80), (0x2028, 0x2029, 0xFFFF, 0x1F600, 0x10FFFF)):
        value = {"s": f"a{chr(cp)}b", "d": D(cp)}
        assert direct(conv, schema, value) == reference({"schemas.enable": "false"}, schema, value)


def test_strings_of_every_length_with_escapes_anywhere() -> None:
    """The writer scans 8 bytes at a time; an escape must be found in any position."""
    rng = random.Random(7)
    alphabet = ["a", "Z", '"', "\\", "\n", "\x00", "\x1f", " ", "\x7f", "é", "日", "🦀", "~"]
    schema = struct([("s", primitive(Type.STRING)), ("d", L.connect_decimal(0))])
    config = {"schemas.enable": "false"}
    conv = JsonConverter(config)
    for n in range(60):
        for _ in range(20):
            value = {"s": "".join(rng.choice(alphabet) for _ in range(n)), "d": D(n)}
            assert direct(conv, schema, value) == reference(config, schema, value)


# -- envelopes from a real connector's schemas ------------------------------------------------
def _pg_dispatcher() -> tuple[EventDispatcher, ChangeEventQueue[SourceRecord], Table]:
    """The envelope bench's dispatcher (PostgreSQL converters, the real source block), with
    a table of most column types the connector maps."""
    cols = [
        ("id", t.INT4, -1, False),
        ("i2", t.INT2, -1, True),
        ("i8", t.INT8, -1, True),
        ("f4", t.FLOAT4, -1, True),
        ("f8", t.FLOAT8, -1, True),
        ("price", t.NUMERIC, ((12 << 16) | 2) + 4, True),
        ("wide", t.NUMERIC, ((38 << 16) | 10) + 4, True),
        ("cash", t.MONEY, -1, True),
        ("flag", t.BOOL, -1, True),
        ("txt", t.TEXT, -1, True),
        ("vc", t.VARCHAR, 259, True),
        ("raw", t.BYTEA, -1, True),
        ("day", t.DATE, -1, True),
        ("tod", t.TIME, -1, True),
        ("ts", t.TIMESTAMP, -1, True),
        ("tstz", t.TIMESTAMPTZ, -1, True),
        ("dur", t.INTERVAL, -1, True),
        ("uid", t.UUID, -1, True),
        ("doc", t.JSONB, -1, True),
    ]
    table = Table(
        TableId("db", "public", "every_type"),
        tuple(
            Column(name, i, "x", native_type=oid, optional=opt, type_modifier=mod)
            for i, (name, oid, mod, opt) in enumerate(cols)
        ),
        ("id",),
    )
    d, queue, _ = envelope_bench.setup()
    d.register_table(table)
    return d, queue, table


def _pg_rows(rng: random.Random) -> Iterator[tuple[str | None, ...]]:
    for i in range(200):
        yield (
            str(i),
            rng.choice([None, "-32768", "7"]),
            rng.choice([None, "9223372036854775807", "-9223372036854775808"]),
            rng.choice([None, "NaN", "Infinity", "-Infinity", "1.5", "3.4028235e+38"]),
            rng.choice([None, "NaN", "-Infinity", "0.1", "1e-300", "123456789.123"]),
            rng.choice([None, "0.00", "-0.01", "9999999999.99", "12.50"]),
            rng.choice([None, "0", "-1234567890123456789012345678.0123456789", "1e20"]),
            rng.choice([None, "$1,234.56", "-$0.01"]),
            rng.choice([None, "t", "f"]),
            rng.choice([None, *TEXTS]),
            rng.choice([None, "ü" * 3, "\x01\t"]),
            rng.choice([None, "\\x00ff10", "\\x"]),
            rng.choice([None, "2024-02-29", "infinity", "0001-01-01"]),
            rng.choice([None, "23:59:59.999999", "00:00:00"]),
            rng.choice([None, "2026-11-26 07:00:00.123456", "-infinity"]),
            rng.choice([None, "2026-11-26 07:00:00+02", "1970-01-01 00:00:00+00"]),
            rng.choice([None, "P1Y2M3DT4H5M6.7S", "PT0S"]),
            rng.choice([None, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"]),
            rng.choice([None, '{"a": [1, 2.5, "\\u00e9"]}', "{}"]),
        )


def test_postgres_envelopes_give_the_reference_bytes() -> None:
    d, queue, table = _pg_dispatcher()
    rng = random.Random(26)
    prev = None
    for i, row in enumerate(_pg_rows(rng)):
        op = Operation.CREATE if prev is None or i % 3 == 0 else Operation.UPDATE
        source = {"ts_ms": 1_700_000_000_000 + i, "txId": i, "lsn": 1000 + i}
        d.emit(RowChange(op, table.id, prev if op is Operation.UPDATE else None, row, source, {}))
        prev = row
    records = queue.poll(0)
    # each key change adds a delete and its tombstone
    assert len(records) == 200 + 2 * sum(rec.value is None for rec in records) > 200
    for config in CONFIGS:
        conv, key_conv = JsonConverter(config), JsonConverter(config, is_key=True)
        for rec in records:
            expected = reference(config, rec.value_schema, rec.value)
            if rec.value_schema is None or rec.value is None:
                assert compiled(conv, rec.value_schema, rec.value) == expected
            else:
                assert direct(conv, rec.value_schema, rec.value) == expected
            assert compiled(key_conv, rec.key_schema, rec.key) == reference(
                config, rec.key_schema, rec.key
            )


def test_encoding_keeps_no_references() -> None:
    """A million-event loop would show a leak as growth; here refcounts of what the writer
    touches are checked around a few thousand calls, fallbacks and errors included."""
    conv = JsonConverter({})
    values = [_envelope(i, p) for i, p in enumerate(DECIMALS_NATIVE + DECIMALS_FALLBACK[:4])]
    bad = _envelope(1, D("NaN"))
    for v in values:
        conv.from_connect("t", ENVELOPE, v)
    gc.collect()
    probes = [values[0]["after"]["name"], values[0]["after"]["price"], values[0]["after"]]
    before = [__import__("sys").getrefcount(p) for p in probes]
    for _ in range(300):
        for v in values:
            conv.from_connect("t", ENVELOPE, v)
        with pytest.raises(Exception, match="Decimal field cannot carry NaN"):
            conv.from_connect("t", ENVELOPE, bad)
    gc.collect()
    assert [__import__("sys").getrefcount(p) for p in probes] == before


def test_pure_python_keeps_the_reference() -> None:
    probe = "from cdc.converters import json as j; print(j._c, j._encode.__name__)"
    env = {"TIDEMARK_PURE_PYTHON": "1", "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert (run.returncode, run.stdout) == (0, "None _no_writer\n")


def test_threads_sharing_a_converter_get_their_own_bytes() -> None:
    """The writer keeps one scratch buffer; a thread switch inside a Python callback (a
    temporal fix, a float) hands a second thread its own."""
    conv = JsonConverter({})
    values = [_envelope(i, p) for i, p in enumerate(DECIMALS_NATIVE * 4)]
    expected = [reference({}, ENVELOPE, v) for v in values]
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(4) as pool:
            for _ in range(20):
                got = list(pool.map(lambda v: conv.from_connect("t", ENVELOPE, v), values))
                assert got == expected
    finally:
        sys.setswitchinterval(0.005)


def test_floats_of_every_exponent_are_written_as_orjson_writes_them() -> None:
    """Finite floats are written natively (repr's text) where that equals orjson's, and by
    orjson elsewhere: random bit patterns cover every exponent, float fields and arrays."""
    rng = random.Random(7)
    values = [x for x in FLOATS + NON_FINITE]
    while len(values) < 20_000:
        x = struct_mod.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        values.append(x)
    values += [1e-4, -1e-4, 0.00010000000000000002, 9.999999999999999e-05, 1e16, 1e15]
    schema = struct(
        [
            ("f", primitive(Type.FLOAT64).with_(optional=True)),
            ("a", array(primitive(Type.FLOAT64))),
        ]
    )
    for config in CONFIGS[:2]:
        conv = JsonConverter(config)
        for i in range(0, len(values), 10):
            for x in values[i : i + 10]:
                value = {"f": x, "a": values[i : i + 10]}
                assert direct(conv, schema, value) == reference(config, schema, value), x


def test_a_shared_source_block_is_written_again_whenever_it_changed() -> None:
    """Records of a batch share one source dict, whose JSON the writer keeps once it repeats
    (while the dict is unchanged). Every change must show: a value changed or added in
    place, the dict replaced by a new one (maybe at the freed one's address), a dict holding
    a list (never kept: the list could change without the dict knowing), and records whose
    blocks alternate."""
    for config in CONFIGS:
        conv = JsonConverter(config)

        def check(
            value: dict[str, Any], conv: JsonConverter = conv, config: dict[str, str] = config
        ) -> None:
            assert direct(conv, ENVELOPE, value) == reference(config, ENVELOPE, value)

        shared = _source(1)
        for i in range(4):
            check({**_envelope(i, D("1.50")), "source": shared})
        shared["lsn"] = 99
        check({**_envelope(5, D("1.50")), "source": shared})
        shared["sequence"] = '["1","2"]'
        check({**_envelope(6, D("1.50")), "source": shared})
        del shared["sequence"]
        shared["snapshot"] = "last"
        check({**_envelope(7, D("1.50")), "source": shared})
        for i in range(20):  # new dicts, often at an address just freed
            block = _source(i)
            check({**_envelope(i, D("2.25")), "source": block})
            check({**_envelope(i, D("2.25")), "source": block})
            del block
            gc.collect(0)  # a cycle holding it would be young; a full pass is slow here
        other = _source(2)
        for i in range(6):
            check({**_envelope(i, D("1.50")), "source": shared if i % 2 else other})
        listed = {**_source(3), "txId": [1]}
        for i in range(3):
            check({**_envelope(i, D("1.50")), "source": listed})
            listed["txId"].append(i)  # type: ignore[attr-defined]
