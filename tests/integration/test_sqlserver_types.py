"""SQL Server's types through the stand-in and pyodbc (Debezium's mapping table): a row read
by the snapshot and the same row streamed from the change table give the same values."""

from __future__ import annotations

import base64

import pytest

from tests.integration.conftest import SqlServerInfo
from tests.integration.sqlserver_harness import SqlServerHarness

pytestmark = [pytest.mark.sqlserver, pytest.mark.kafka]

COLUMNS = """id int PRIMARY KEY, b sys.tinyint, s smallint, g bigint, f boolean, r real,
 dbl float8, dec numeric(10, 3), m sys.money, sm sys.smallmoney, nv varchar(30),
 t text, u sys.uniqueidentifier, vb bytea, x xml, d date, tm time(3), dt sys.datetime,
 sdt sys.smalldatetime, dt2 timestamp(6), dto timestamptz"""
ROW = """(%s, 255, -32768, 9007199254740993, true, 1.5, 2.25, 1234.567, 922337203685477.5807,
 -214748.3648, 'héllo', 'long text', 'ce83f479-0576-467b-9b21-c98dcb2c4f63', '\\x01ff',
 '<a>1</a>', '2020-02-29', '13:14:15.678', '2020-01-01 10:00:00.123',
 '2020-01-01 10:00:00', '2020-01-01 10:00:00.123456', '2020-01-01 12:00:00.5+02')"""

EXPECTED = {
    "b": 255,
    "s": -32768,
    "g": 9007199254740993,
    "f": True,
    "r": 1.5,
    "dbl": 2.25,
    "nv": "héllo",
    "t": "long text",
    "u": "CE83F479-0576-467B-9B21-C98DCB2C4F63",
    "vb": base64.b64encode(b"\x01\xff").decode(),
    "x": "<a>1</a>",
    "d": 18321,
    "tm": 47655678,
    "dt": 1577872800123,
    "sdt": 1577872800000,
    "dt2": 1577872800123456,
    "dto": "2020-01-01T10:00:00.5Z",  # Java's ISO formatter: no trailing zeros
}


def test_types_match_between_snapshot_and_stream(sqlserver: SqlServerInfo, kafka: str) -> None:
    h = SqlServerHarness(sqlserver, kafka)
    try:
        t = h.create_table("types", COLUMNS)
        h.sql(f'INSERT INTO dbo."{t}" VALUES {ROW}', params=(1,))
        cfg = h.config("types", **{"decimal.handling.mode": "string"})
        with h.running(cfg):
            h.sql(f'INSERT INTO dbo."{t}" VALUES {ROW}', params=(2,))
            r, c = h.read(cfg, "types", min_count=2)
        assert (r.op, c.op) == ("r", "c")
        snap, streamed = dict(r.after), dict(c.after)
        assert snap.pop("id") == 1 and streamed.pop("id") == 2
        assert snap == streamed
        for name, value in EXPECTED.items():
            assert snap[name] == value, name
        assert (snap["dec"], snap["m"], snap["sm"]) == (
            "1234.567",
            "922337203685477.5807",
            "-214748.3648",
        )
    finally:
        h.drop()
