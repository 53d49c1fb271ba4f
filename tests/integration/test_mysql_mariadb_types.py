"""MariaDB-native types and edge values against the real MariaDB: every value must reach Kafka
identically whether the snapshot (text protocol) or the binlog (binary row images) read it.

Each check writes the same rows twice: once before the connector starts (read by the
snapshot) and once while it streams, then compares the two events per row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from tests.integration.conftest import MySqlInfo
from tests.integration.mysql_harness import MySqlHarness, module_harness

pytestmark = [pytest.mark.mariadb, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(
    mariadb: MySqlInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MySqlHarness]:
    yield from module_harness(mariadb, kafka, tmp_path_factory, "tt")


def snapshot_and_stream(
    h: MySqlHarness,
    table: str,
    ddl: str,
    rows: Sequence[str],
    *,
    sql_mode: str | None = None,
    **overrides: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(snapshot rows, streamed rows), in insertion order; ``rows`` are value lists without
    the leading id, inserted with ids 1.. before the start and n+1.. while streaming."""
    h.sql(f"CREATE TABLE {table} (id int PRIMARY KEY, {ddl})")
    mode = [f"SET sql_mode = '{sql_mode}'"] if sql_mode is not None else []

    def insert(first: int) -> None:
        for i, values in enumerate(rows):
            h.sql(*mode, f"INSERT INTO {table} VALUES ({first + i}, {values})")

    insert(1)
    # read through the streaming cursor (and so the compiled row walk) as large tables are
    cfg = h.config(
        table_include_list=rf"{h.dbname}\.{table}",
        min_row_count_to_stream_results="0",
        **overrides,
    )
    n = len(rows)
    with h.running(cfg) as run:
        h.wait_streaming(run)
        insert(n + 1)
        events = h.read(cfg, table, min_count=2 * n, settle=0.5)
        assert not run.errors, run.errors
    by_id = {e.after["id"]: e for e in events}
    assert sorted(by_id) == list(range(1, 2 * n + 1))
    assert all(by_id[i].op == "r" for i in range(1, n + 1))
    assert all(by_id[i].op == "c" for i in range(n + 1, 2 * n + 1))

    def strip(i: int) -> dict[str, Any]:
        after = dict(by_id[i].after)
        after.pop("id")
        return after

    return [strip(i) for i in range(1, n + 1)], [strip(i) for i in range(n + 1, 2 * n + 1)]


UUIDS = [
    "fc1a4092-1b2c-11ef-8a3b-0242ac120002",  # version 1 (MariaDB may store it swapped)
    "123e4567-e89b-42d3-a456-426614174000",  # ends in a zero byte
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "01000000-0000-0000-0000-000000000100",
]
INET4 = ["192.168.0.1", "0.0.0.0", "10.0.0.0", "255.255.255.255", "1.0.0.0"]
# (written, MariaDB's text): a single zero group is compressed too, IPv4 tails stay dotted
INET6 = [
    ("2001:db8::ff00:42:8329", "2001:db8::ff00:42:8329"),
    ("::", "::"),
    ("::1", "::1"),
    ("::ffff:192.0.2.128", "::ffff:192.0.2.128"),  # IPv4-mapped
    ("::192.0.2.128", "::192.0.2.128"),  # IPv4-compatible
    ("::0.0.1.0", "::100"),
    ("2001:db8::", "2001:db8::"),
    ("1:0:0:1:0:0:0:1", "1:0:0:1::1"),  # the longest zero run
    ("1:0:1:0:1:0:1:0", "1::1:0:1:0:1:0"),  # the first of equal runs
    ("fe80::1:0:0:0", "fe80::1:0:0:0"),
    ("2001:db8:0:1:1:1:1:1", "2001:db8::1:1:1:1:1"),
    ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
]


def test_uuid_inet4_inet6_streamed_as_the_snapshot_text(h: MySqlHarness) -> None:
    """Issue 20.7: the binlog carries these as 16/4 raw bytes (trailing zero bytes stripped by
    the decoder); streamed events must carry the same text as the snapshot's."""
    rows = [
        f"'{UUIDS[i % len(UUIDS)]}', '{INET4[i % len(INET4)]}', '{v6}', NULL"
        for i, (v6, _) in enumerate(INET6)
    ]
    snap, stream = snapshot_and_stream(
        h, "netids", "u uuid, i4 inet4, i6 inet6 NOT NULL, nu uuid NULL", rows
    )
    assert stream == snap
    assert [r["u"] for r in snap] == [UUIDS[i % len(UUIDS)] for i in range(len(INET6))]
    assert [r["i4"] for r in snap] == [INET4[i % len(INET4)] for i in range(len(INET6))]
    assert [r["i6"] for r in snap] == [text for _, text in INET6]
    assert all(r["nu"] is None for r in stream)


SWEEP_DDL = """bt1 bit(1), bt64 bit(64), e enum('', 'a', 'ü'),
 s set('a','b','c','d','e','f','g','h','i'), y year, t0 time, t6 time(6), dt6 datetime(6),
 ts6 timestamp(6) NULL, j json,
 g geometry, pg polygon, c5 char(5), vc varchar(10), l1 varchar(10) CHARACTER SET latin1,
 u16 char(4) CHARACTER SET utf16, cb char(4) BINARY, tx text CHARACTER SET latin1,
 mu mediumint unsigned, ti1 tinyint(1), db double, fl float, nc char(3) NOT NULL,
 u32 varchar(4) CHARACTER SET utf32, uc varchar(4) CHARACTER SET ucs2,
 ule varchar(4) CHARACTER SET utf16le, ujis varchar(4) CHARACTER SET ujis"""
SWEEP_ROWS = [
    "b'1', b'1111111111111111111111111111111111111111111111111111111111111111', 'ü', "
    "'a,b,c,d,e,f,g,h,i', 2155, '838:59:59', '-838:59:59.000000', "
    "'9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999999', "
    """'{"ü": "\\\\u00e9 ✓", "n": 1.5e300, "big": 18446744073709551616, "a": [true, null]}', """
    "ST_GeomFromText('GEOMETRYCOLLECTION EMPTY'), "
    "ST_GeomFromText('POLYGON((0 0,10 0,10 10,0 10,0 0))', 3857), 'a  ', 'b  ', 'é€'"
    ", 'ü', 'ab', 'é ü', 16777215, 2, 1.7976931348623157e308, -3.4e38, '', "
    "'😀ü', 'ü€', '😀€', 'é日本'",
    "b'0', b'0', '', '', 1901, '00:00:00', '00:00:00.000001', "
    "'1000-01-01 00:00:00.000000', '1970-01-01 00:00:01.000000', '[]', "
    "POINT(0, 0), NULL, '', '', '', '', '', '', 0, -128, -0.0, 1e-38, 'x', '', '', '', ''",
]


def test_native_types_sweep_streamed_as_snapshotted(h: MySqlHarness) -> None:
    """Issue 20.7's sweep: MariaDB types whose binlog form differs from their text form
    (bits, sets/enums, years, fractional times, JSON, geometry, padded and non-UTF-8 text,
    binary-collated CHAR, float extremes) reach Kafka identically from both paths."""
    snap, stream = snapshot_and_stream(h, "sweep", SWEEP_DDL, SWEEP_ROWS)
    for a, b in zip(snap, stream, strict=True):
        assert b == a, {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)}
    first, second = snap
    assert first["e"] == "ü" and first["s"] == "a,b,c,d,e,f,g,h,i" and first["y"] == 2155
    assert first["t6"] == -(838 * 3600 + 59 * 60 + 59) * 1_000_000
    assert first["c5"] == "a" and first["vc"] == "b  "  # CHAR drops trailing spaces
    assert first["l1"] == "é€" and first["u16"] == "ü" and first["tx"] == "é ü"
    assert (first["u32"], first["uc"], first["ule"]) == ("😀ü", "ü€", "😀€")
    assert second["e"] == "" and second["s"] == "" and second["t6"] == 1


EDGE_DDL = """nd date NULL, ndd date NOT NULL DEFAULT '2000-01-01', nn date NOT NULL,
 dt datetime(6) NULL, dtn datetime NOT NULL, ts timestamp NULL, tsn timestamp NOT NULL DEFAULT 0,
 y year NULL, yn year NOT NULL, dmax decimal(65,30) NOT NULL, dmin decimal(65,30),
 d0 decimal(65,0) NOT NULL, bu bigint unsigned NOT NULL, bs bigint NOT NULL,
 tm time(6) NOT NULL, f double NOT NULL"""
EDGE_ROWS = [
    # zero dates and a zero month/day (sql_mode without NO_ZERO_DATE/NO_ZERO_IN_DATE/STRICT)
    "'0000-00-00', '0000-00-00', '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', "
    "'0000-00-00 00:00:00', '0000-00-00 00:00:00', '0000', '0000', "
    "'99999999999999999999999999999999999.999999999999999999999999999999', "
    "'-99999999999999999999999999999999999.999999999999999999999999999999', "
    "'99999999999999999999999999999999999999999999999999999999999999999', "
    "18446744073709551615, -9223372036854775808, '838:59:59.000000', 1.7976931348623157e308",
    "'2020-00-00', '2020-01-00', '2020-00-15', '2020-00-00 10:00:00', '2020-01-00 00:00:00', "
    "NULL, '1970-01-01 00:00:01', 1901, 2155, "
    "'0.000000000000000000000000000001', '-0.000000000000000000000000000001', "
    "'-99999999999999999999999999999999999999999999999999999999999999999', "
    "0, 9223372036854775807, '-838:59:59.000000', -2.2250738585072014e-308",
]


def test_edge_values_never_stop_capture_nor_break_the_schema(h: MySqlHarness) -> None:
    """Issue 12.6 (MariaDB): zero dates, zero months/days, DECIMAL(65,30) extremes, max
    unsigned BIGINT, TIME and YEAR limits: captured by both paths alike under the default
    modes, and no NOT NULL field is null (Debezium: a zero date in a NOT NULL column becomes
    the column's default, else the epoch)."""
    snap, stream = snapshot_and_stream(h, "edges", EDGE_DDL, EDGE_ROWS, sql_mode="")
    for a, b in zip(snap, stream, strict=True):
        assert b == a, {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)}
    not_null = ("ndd", "nn", "dtn", "tsn", "yn", "dmax", "d0", "bu", "bs", "tm", "f")
    assert all(r[k] is not None for r in snap + stream for k in not_null)
    zero, odd = snap
    assert (zero["nd"], zero["dt"], zero["ts"]) == (None, None, None)
    assert zero["ndd"] == 10957  # the default 2000-01-01, as Debezium
    assert (zero["nn"], zero["dtn"], zero["tsn"]) == (0, 0, "1970-01-01T00:00:00Z")
    assert (zero["y"], zero["yn"]) == (0, 0)
    assert (odd["nd"], odd["ndd"], odd["nn"], odd["dt"], odd["dtn"]) == (None, 10957, 0, None, 0)
    assert zero["bu"] == -1 and odd["bs"] == 2**63 - 1


TS_DDL = "t6 timestamp(6) NULL, t3 timestamp(3) NULL, t0 timestamp NULL"
TS_ROWS = [
    "'2024-01-01 00:00:08', '2024-02-29 13:45:59.100', '2024-01-01 00:00:08'",
    "'1999-12-31 23:59:59.999999', '1970-01-01 00:00:01.000', NULL",
]


def test_v3_timestamp_fraction_padded_when_streamed_not_when_snapshotted(
    h: MySqlHarness,
) -> None:
    """Issue 12.4: Debezium 3.6 pads a TIMESTAMP(n) fraction to n digits in streamed events
    (binlog values) but writes snapshot events (JDBC values) in the unpadded ISO form; under
    ``envelope.version=3`` tidemark does the same, under 1.2 neither path pads."""
    snap, stream = snapshot_and_stream(h, "ts3", TS_DDL, TS_ROWS, envelope_version="3")
    assert snap == [
        {
            "t6": "2024-01-01T00:00:08Z",
            "t3": "2024-02-29T13:45:59.1Z",
            "t0": "2024-01-01T00:00:08Z",
        },
        {"t6": "1999-12-31T23:59:59.999999Z", "t3": "1970-01-01T00:00:01Z", "t0": None},
    ]
    assert stream == [
        {
            "t6": "2024-01-01T00:00:08.000000Z",
            "t3": "2024-02-29T13:45:59.100Z",
            "t0": "2024-01-01T00:00:08Z",
        },
        {"t6": "1999-12-31T23:59:59.999999Z", "t3": "1970-01-01T00:00:01.000Z", "t0": None},
    ]
    snap12, stream12 = snapshot_and_stream(h, "ts12", TS_DDL, TS_ROWS)
    assert snap12 == stream12 == snap


GEO_DDL = (
    "p point, ps point, l linestring, pg polygon, g geometry, mp multipoint, gc geometrycollection"
)
GEO_ROWS = [
    "ST_GeomFromText('POINT(1.5 -2.25)'), ST_GeomFromText('POINT(13.4 52.5)', 4326), "
    "ST_GeomFromText('LINESTRING(0 0, 1 1)'), "
    "ST_GeomFromText('POLYGON((0 0, 1 0, 1 1, 0 0))', 3857), ST_GeomFromText('POINT(7 8)'), "
    "ST_GeomFromText('MULTIPOINT(1 2, 3 4)'), ST_GeomFromText('GEOMETRYCOLLECTION EMPTY')",
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL",
]


def test_spatial_types_as_debezium_writes_them(h: MySqlHarness) -> None:
    """Issue 25.3: POINT as io.debezium.data.geometry.Point with x, y, wkb and srid, the other
    spatial types as Geometry {wkb, srid}; SRID 0 (none given) is null, as Debezium writes
    it (1.2 and 3.6 alike); snapshot and binlog give the same values."""
    import base64
    import struct

    def wkb(text: str) -> bytes:
        return bytes(h.sql(f"SELECT ST_AsBinary(ST_GeomFromText('{text}'))")[0][0])

    def b64(text: str) -> str:
        return base64.b64encode(wkb(text)).decode()

    for envelope in ("1.2", "3"):
        table = f"geo{envelope.replace('.', '')}"
        snap, stream = snapshot_and_stream(h, table, GEO_DDL, GEO_ROWS, envelope_version=envelope)
        assert snap == stream
        row, nulls = snap
        assert row["p"] == {"x": 1.5, "y": -2.25, "wkb": b64("POINT(1.5 -2.25)"), "srid": None}
        assert row["ps"] == {"x": 13.4, "y": 52.5, "wkb": b64("POINT(13.4 52.5)"), "srid": 4326}
        assert row["l"] == {"wkb": b64("LINESTRING(0 0, 1 1)"), "srid": None}
        assert row["pg"] == {"wkb": b64("POLYGON((0 0, 1 0, 1 1, 0 0))"), "srid": 3857}
        assert row["g"] == {"wkb": b64("POINT(7 8)"), "srid": None}  # GEOMETRY: no x, y
        assert row["mp"] == {"wkb": b64("MULTIPOINT(1 2, 3 4)"), "srid": None}
        assert base64.b64decode(row["gc"]["wkb"]) == b"\x01" + struct.pack("<II", 7, 0)
        assert set(nulls.values()) == {None}


def test_latin1_bytes_python_cp1252_has_no_character_for(h: MySqlHarness) -> None:
    """MariaDB's latin1 is Windows-1252 with its five unassigned bytes (0x81, 0x8D, 0x8F, 0x90,
    0x9D) kept as the C1 controls U+0081…: Python's cp1252 codec rejects them, so a binlog row
    holding one must not stop capture; snapshot and stream give the server's characters."""
    snap, streamed = snapshot_and_stream(
        h,
        "l1odd",
        "l1 varchar(10) CHARACTER SET latin1, tx text CHARACTER SET latin1",
        ["X'818D8F909DE980', X'4181'"],
    )
    expected = {"l1": "\x81\x8d\x8f\x90\x9dé€", "tx": "A\x81"}
    assert snap == streamed == [expected]
