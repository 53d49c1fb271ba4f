"""The compiled text-row walk (``connectors/mysql/_textrow_c.c``) against its reference,
PyMySQL's own ``_read_row_from_packet``, on a real MariaDB: the same query read through a
streaming cursor both ways must give equal rows, value types included, for every column type
and edge value a snapshot meets (NULLs, zero dates, negative times, multi-byte and latin1
text, long values whose length takes 2 and 3 bytes, binary, JSON, geometry)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import connectors.mysql._textrow_c  # noqa: F401  built by the install; not skipped when missing
import pymysql
import pymysql.cursors
import pytest

from connectors.mysql import connection as myconn
from connectors.mysql.text_rows import read_rows_compiled
from tests.integration.conftest import MySqlInfo

pytestmark = [pytest.mark.mariadb]

DDL = """CREATE TABLE t (
    id int PRIMARY KEY, ti tinyint, tu tinyint unsigned, si smallint, mi mediumint,
    iu int unsigned, bi bigint, bu bigint unsigned, de decimal(10,3), dw decimal(65,30),
    fl float, db double, bo boolean, b1 bit(1), b12 bit(12), ch char(3), vc varchar(20),
    l1 varchar(20) CHARACTER SET latin1, tx text, mt mediumtext, bl blob, mb mediumblob,
    bn binary(4), vb varbinary(8), da date, tm time(3), dtm datetime, dt6 datetime(6),
    tsp timestamp(3) NULL, yr year, en enum('sad','ok','happy'), st set('a','b','c'),
    js json, uu uuid, pt point)"""

ROWS = [
    "1, -128, 255, -32768, -8388608, 4294967295, -9223372036854775808, 18446744073709551615,"
    " -1234567.891, 12345678901234567890123456789012345.123456789012345678901234567891,"
    " 1.5, -2.2250738585072014e-308, true, b'1', b'101010101010', 'abc', 'héllo 🦀',"
    " 'façade', 'text', REPEAT('x', 70000), UNHEX('00FF10'), REPEAT(UNHEX('AB'), 300),"
    " UNHEX('01020304'), UNHEX('FF'), '2024-02-29', '-838:59:59.999', '9999-12-31 23:59:59',"
    " '1970-01-01 00:00:00.000001', '2038-01-19 03:14:07.499', 2155, 'happy', 'a,c',"
    " '{\"k\": [1, \"two\", null]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', POINT(1.5, -2)",
    "2, " + ", ".join(["NULL"] * 34),
    "3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, b'0', b'0', '', '', '', '', '', '', '',"
    " UNHEX('00000000'), '', '0000-00-00', '00:00:00', '0000-00-00 00:00:00',"
    " '0000-00-00 00:00:00.000000', '1970-01-01 00:00:01', 0, 'sad', '', '[]',"
    " '00000000-0000-0000-0000-000000000000', POINT(0, 0)",
]


@pytest.fixture(scope="module")
def conn(mariadb: MySqlInfo) -> Iterator[Any]:
    name = f"ttr_{uuid.uuid4().hex[:8]}"
    admin = pymysql.connect(**mariadb.settings(), autocommit=True)  # type: ignore[arg-type]
    admin.cursor().execute(f"CREATE DATABASE {name}")
    c = pymysql.connect(**mariadb.settings(), database=name, autocommit=True)  # type: ignore[arg-type]
    try:
        cur = c.cursor()
        cur.execute("SET SESSION sql_mode = ''")  # zero dates, as old tables hold them
        cur.execute(DDL)
        for row in ROWS:
            cur.execute(f"INSERT INTO t VALUES ({row})")
        cur.execute(
            "INSERT INTO t SELECT seq + 10, seq % 100, seq % 200, seq, seq, seq, seq * 1000,"
            " seq, seq / 7, seq / 3, seq / 9, seq / 11, seq % 2, seq % 2, seq % 4096,"
            " 'xyz', CONCAT('v', seq), 'ü', REPEAT('t', seq % 300), NULL, NULL, NULL,"
            " NULL, NULL, DATE'2024-01-01' + INTERVAL seq DAY, SEC_TO_TIME(seq),"
            " TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq SECOND,"
            " TIMESTAMP'2024-01-01 00:00:00.5' + INTERVAL seq SECOND, NULL, 2000 + seq % 100,"
            " 'ok', 'b', JSON_OBJECT('k', seq), UUID(), NULL FROM seq_1_to_2000"
        )
        yield c
    finally:
        c.close()
        admin.cursor().execute(f"DROP DATABASE {name}")
        admin.close()


def _rows(conn: Any, mode: str, query: str, fetch_size: int = 500) -> list[tuple[Any, ...]]:
    """``reference``: PyMySQL alone; ``walk``: PyMySQL's fetchmany with the compiled row walk;
    ``buffered``: the compiled packet reader (``fetch_rows``); ``buffered-small``: the same
    over a read buffer of 61 bytes, so most packets are cut off by its end and the reader
    hands over to PyMySQL and back again all the time."""
    cur = conn.cursor(pymysql.cursors.SSCursor)
    rfile = conn._rfile
    try:
        if mode == "buffered-small":
            conn._rfile = conn._sock.makefile("rb", buffering=61)
        cur.execute(query)
        fetch = cur.fetchmany
        by_pymysql = 0
        read_next = cur.read_next

        def counted() -> Any:
            nonlocal by_pymysql
            by_pymysql += 1
            return read_next()

        cur.read_next = counted
        if mode != "reference":
            compiled = read_rows_compiled(cur)
            assert compiled is not None
            if mode.startswith("buffered"):
                fetch = compiled
        out: list[tuple[Any, ...]] = []
        while batch := fetch(fetch_size):
            assert len(batch) <= fetch_size
            out.extend(batch)
        assert not cur._result.unbuffered_active  # the end of the result was read
        if mode == "buffered":  # most rows were taken from the read buffer, not by PyMySQL
            assert by_pymysql < len(out) / 5, (by_pymysql, len(out))
        cur.execute("SELECT 1")  # and the connection is in step with the server
        assert list(cur.fetchall()) == [(1,)]
        return out
    finally:
        cur.close()
        if conn._rfile is not rfile:
            conn._rfile.close()
            conn._rfile = rfile


def _typed(rows: list[tuple[Any, ...]]) -> list[list[tuple[type, Any]]]:
    return [[(type(v), v) for v in row] for row in rows]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM t ORDER BY id",
        "SELECT id, tx, CAST(bl AS CHAR CHARACTER SET latin1), l1, dtm FROM t ORDER BY id",
    ],
)
@pytest.mark.parametrize("mode", ["walk", "buffered", "buffered-small"])
@pytest.mark.parametrize("session", ["plain", "snapshot"])
def test_rows_equal_pymysqls_own(conn: Any, query: str, mode: str, session: str) -> None:
    """``snapshot``: with a snapshot session's decoders (DATE, DATETIME and DECIMAL as text,
    TIMESTAMP as SnapshotTimestamp, which the walk makes itself from canonical text)."""
    plain = conn.decoders
    if session == "snapshot":
        conn.decoders = myconn.snapshot_decoders(plain)
    try:
        want = _rows(conn, "reference", query)
        got = _rows(conn, mode, query, fetch_size=7 if mode == "buffered-small" else 500)
    finally:
        conn.decoders = plain
    assert len(want) == 2003
    assert _typed(got) == _typed(want)
    first = got[0]
    if query.startswith("SELECT *"):
        assert len(first[19]) == 70_000 and len(first[21]) == 300  # 3- and 2-byte lengths
        assert first[16] == "héllo 🦀" and first[17] == "façade"
        assert got[1][1:] == (None,) * 34


def test_a_packet_the_walk_does_not_take_goes_to_the_reference() -> None:
    from connectors.mysql import _textrow_c

    specs = ((None, None), ("utf8", None), ("utf8", int))
    assert _textrow_c.read_row(b"\x02ab\x03h\xc3\xa9\x0212", 0, specs) == (b"ab", "hé", 12)
    assert _textrow_c.read_row(b"\xfb\xfc\x01\x00x", 0, specs[:2]) == (None, "x")
    assert _textrow_c.read_row(b"\x01a", 0, specs) == (b"a",)  # a short row ends there
    assert _textrow_c.read_row(b"\x05ab", 0, specs) is None  # cut short: PyMySQL decides
    assert _textrow_c.read_row(b"\xff", 0, specs) is None  # PyMySQL reads 0xff as NULL
    with pytest.raises(UnicodeDecodeError):
        _textrow_c.read_row(b"\x01\xff\x01\xff", 0, specs)
    with pytest.raises(ValueError):
        _textrow_c.read_row(b"\x01a\x01a\x01x", 0, specs)  # int("x"), as PyMySQL would raise


def test_the_packet_reader_stops_before_what_pymysql_must_read() -> None:
    from connectors.mysql import _textrow_c

    specs = (("utf8", None), ("utf8", int))

    def packet(seq: int, payload: bytes) -> bytes:
        return len(payload).to_bytes(3, "little") + bytes([seq]) + payload

    a, b = packet(5, b"\x01a\x0212"), packet(6, b"\x01b\x013")
    rows: list[Any] = []
    assert _textrow_c.read_packets(a + b, 5, 10, specs, rows) == (len(a + b), 7)
    assert rows == [("a", 12), ("b", 3)]
    eof = packet(7, b"\xfe\x00\x00\x02\x00")
    error = packet(7, b"\xff\x15\x04#28000denied")
    huge = b"\xff\xff\xff\x07" + b"\x00" * 10  # 16 MB: split over packets
    empty = packet(7, b"")
    for after in (eof, error, huge, empty, b"\x05\x00\x00", b + b"", packet(8, b"\x01c\x011")):
        rows = []
        # b again is out of sequence (6, not 7); the cut-off header and the rest wait for more
        assert _textrow_c.read_packets(a + b + after, 5, 10, specs, rows) == (len(a + b), 7)
        assert len(rows) == 2
    rows = []
    assert _textrow_c.read_packets(a + b, 5, 1, specs, rows) == (len(a), 6)  # the limit
    assert rows == [("a", 12)]
    rows = []
    bad = packet(7, b"\x01c\x01x")  # int("x") raises: PyMySQL reads it again and raises
    assert _textrow_c.read_packets(a + b + bad, 5, 10, specs, rows) == (len(a + b), 7)

    def interrupt(text: str) -> Any:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # not swallowed like a converter's error
        _textrow_c.read_packets(a, 5, 10, (("utf8", None), ("utf8", interrupt)), [])
    wrapped = packet(255, b"\x01z\x010") + packet(0, b"\x01y\x011")  # 255 -> 0
    rows = []
    assert _textrow_c.read_packets(wrapped, 255, 10, specs, rows) == (len(wrapped), 1)
    assert rows == [("z", 0), ("y", 1)]
