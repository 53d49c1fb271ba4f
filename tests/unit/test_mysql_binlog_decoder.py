"""tidemark's binlog decoder against python-mysql-replication on recorded streams.

Each recording is replayed twice through the same processor: once with the library's own
loop and event classes (the reference, ``BinlogReader``), once with the raw-packet decoder
(``RawBinlogReader``). Every emitted event must be identical, value types included.
"""

from __future__ import annotations

import decimal
import json
import random
import struct
from pathlib import Path
from typing import Any

import pytest

from cdc.spi import RowChange
from connectors.mysql.binlog import BinlogProcessor, Resume
from connectors.mysql.binlog_decoder import RawBinlogReader
from connectors.mysql.connection import BinlogReader, replay_factory
from connectors.mysql.errors import EventDeserializationFailed
from connectors.mysql.gtid import MariaDbGtidSet, MySqlGtidSet
from connectors.mysql.rows_decoder import TableDecoder, _decimal_reader
from tests.unit.test_mysql_fixtures import Ctx, new_state

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mysql"
RECORDINGS = {
    name: json.loads((FIXTURES / name).read_text())
    for name in ("mariadb-10.11-workload.json", "mysql-8.0-gtid-json.json")
}


def typed(value: Any) -> Any:
    """The value with its exact type, recursively (1 == 1.0 == True must not pass)."""
    if isinstance(value, dict):
        return ("dict", {k: typed(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return (type(value).__name__, [typed(v) for v in value])
    if isinstance(value, set | frozenset):
        return ("set", sorted(typed(v) for v in value))
    return (type(value).__name__, repr(value))


def describe(event: Any) -> Any:
    fields = {k: v for k, v in vars(event).items()} if hasattr(event, "__dict__") else event
    return (type(event).__name__, typed(fields))


def replay_with(
    reader_class: type[BinlogReader],
    recording: dict[str, Any],
    packets: list[bytes] | None = None,
    resume: Resume | None = None,
    ddl: str | None = None,
    **cfg: str,
) -> list[Any]:
    st = new_state(**cfg)
    if ddl is not None:
        st.schema.apply_ddl(ddl, "fixture_db")
    ctx = Ctx()
    mariadb = "MariaDB" in recording["server_version"]
    start = recording.get("start_gtid") or ""
    if resume is not None and resume.gtids:
        start = resume.gtids
    gtids = MariaDbGtidSet(start) if mariadb else MySqlGtidSet("")
    st.register_all(ctx)
    processor = BinlogProcessor(st, ctx, resume or Resume(None, 4, start or None), gtids)
    data = packets if packets is not None else [bytes.fromhex(p) for p in recording["packets"]]
    reader = reader_class(
        st.cfg,
        6000,
        mariadb=mariadb,
        gtids=start or None,
        log_file="binlog.000001",
        log_pos=4,
        connect=replay_factory(
            data, server_version=recording["server_version"], checksum=recording["checksum"]
        ),
    )
    for event in reader:
        processor.handle(event)
    return ctx.events


def assert_same(library: list[Any], ours: list[Any]) -> None:
    assert len(ours) == len(library)
    for a, b in zip(library, ours, strict=True):
        if isinstance(a, RowChange) and isinstance(b, RowChange):
            assert typed(b.before) == typed(a.before), (a.table_id, a.before, b.before)
            assert typed(b.after) == typed(a.after), (a.table_id, a.after, b.after)
        assert describe(b) == describe(a)


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_recorded_streams_decode_identically(name: str) -> None:
    recording = RECORDINGS[name]
    library = replay_with(BinlogReader, recording)
    assert sum(isinstance(e, RowChange) for e in library) >= 2
    assert_same(library, replay_with(RawBinlogReader, recording))


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_buffered_and_queried_streams_decode_identically(name: str) -> None:
    recording = RECORDINGS[name]
    cfg = {"binlog_buffer_size": "100", "include_query": "true"}
    library = replay_with(BinlogReader, recording, **cfg)
    assert_same(library, replay_with(RawBinlogReader, recording, **cfg))


def test_mid_transaction_resume_skips_the_same_rows() -> None:
    recording = RECORDINGS["mariadb-10.11-workload.json"]
    full = [e for e in replay_with(BinlogReader, recording) if isinstance(e, RowChange)]
    bulk = [r for r in full if r.source["gtid"] == full[2].source["gtid"]]
    cut = bulk[len(bulk) // 2]
    seq = int(cut.source["gtid"].split("-")[2])
    packets = [bytes.fromhex(p) for p in recording["packets"]]
    idx = next(
        i
        for i, pk in enumerate(packets)
        if pk[5] == 162 and struct.unpack("<Q", pk[20:28])[0] == seq
    )
    packets = packets[:3] + packets[idx:]
    resume = Resume(None, 4, cut.offset["gtids"], cut.offset["event"], cut.offset["row"])
    ddl = (
        "CREATE TABLE fx (id int PRIMARY KEY, name varchar(20), price decimal(10,2), born date, "
        "ts timestamp(3) NULL, tags set('a','b','c'), mood enum('x','y'), doc json, "
        "bits bit(4), f float, bn binary(4))"
    )
    library = replay_with(BinlogReader, recording, packets, resume=resume, ddl=ddl)
    ours = replay_with(RawBinlogReader, recording, packets, resume=resume, ddl=ddl)
    assert_same(library, ours)
    rows = [e for e in ours if isinstance(e, RowChange) and e.source["gtid"] == cut.source["gtid"]]
    assert [r.after[0] for r in rows if r.after] == [r.after[0] for r in bulk if r.after][
        len(bulk) // 2 + 1 :
    ]


def test_corrupt_rows_event_is_reported_as_by_the_library() -> None:
    recording = RECORDINGS["mariadb-10.11-workload.json"]
    packets = [bytes.fromhex(p) for p in recording["packets"]]
    i = next(i for i, pk in enumerate(packets) if pk[5] in (23, 30))
    packets[i] = packets[i][:-30] + packets[i][-4:]  # rows cut short, checksum kept
    for reader in (BinlogReader, RawBinlogReader):
        with pytest.raises(EventDeserializationFailed, match="cannot decode"):
            replay_with(reader, recording, packets)
    library = replay_with(
        BinlogReader, recording, packets, event_deserialization_failure_handling_mode="warn"
    )
    ours = replay_with(
        RawBinlogReader, recording, packets, event_deserialization_failure_handling_mode="warn"
    )
    assert_same(library, ours)


# -- value forms not in the recordings, against the library's own formulas -----------------------


def test_decimal_values_keep_sign_and_scale() -> None:
    read = _decimal_reader(12, 4)  # 8 integral digits: 4 bytes; 4 fraction digits: 2 bytes
    positive = ((12345678) ^ 0).to_bytes(4, "big") + (42).to_bytes(2, "big")
    data = bytes([positive[0] | 0x80]) + positive[1:]
    assert str(read(data, 0)[0]) == "12345678.0042"
    negative = bytes(b ^ 0xFF for b in data)
    assert str(read(negative, 0)[0]) == "-12345678.0042"


def test_absent_columns_are_marked() -> None:
    class Col:
        type = 3
        unsigned = False

    decoder = TableDecoder([Col(), Col()])
    image = decoder.image(b"\x01")
    assert decoder.partial(b"\x01") and not decoder.partial(b"\x03")
    values, end = image(b"\x00" + struct.pack("<i", -7), 0)
    assert values[0] == -7 and repr(values[1]) == "ABSENT" and end == 5


_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def _mysql_decimal(negative: bool, whole: str, fraction: str, precision: int, scale: int) -> bytes:
    """MySQL's decimal2bin of ``whole.fraction`` (digit strings) for DECIMAL(precision, scale)."""
    intg = precision - scale
    whole, fraction = whole.rjust(intg, "0"), fraction.ljust(scale, "0")
    out = bytearray()
    lead = intg % 9
    if lead:
        out += int(whole[:lead]).to_bytes(_DIG2BYTES[lead], "big")
    for i in range(lead, intg, 9):
        out += int(whole[i : i + 9]).to_bytes(4, "big")
    full = scale // 9 * 9
    for i in range(0, full, 9):
        out += int(fraction[i : i + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(fraction[full:]).to_bytes(_DIG2BYTES[scale % 9], "big")
    if negative:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return bytes(out)


def test_decimal_reader_on_every_precision_and_scale() -> None:
    """The unscaled-integer reader gives the Decimal of the digits the bytes hold: same digits,
    sign (negative zero included) and exponent -scale, as the library's text reading does;
    up to DECIMAL(65,30), at an offset, followed by other bytes."""
    rng = random.Random(18)
    cases = 0
    for precision in range(1, 66):
        for scale in {0, 1, precision // 2, min(precision, 30), min(precision - 1, 9), 8, 10}:
            if not 0 <= scale <= min(precision, 30):
                continue
            read = _decimal_reader(precision, scale)
            intg = precision - scale
            for _ in range(12):
                negative = rng.random() < 0.5
                kind = rng.randrange(4)
                if kind == 0:  # zero (a negative zero too)
                    whole, fraction = "0" * intg, "0" * scale
                elif kind == 1:  # all nines: the largest magnitude
                    whole, fraction = "9" * intg, "9" * scale
                else:
                    whole = "".join(rng.choice("0123456789") for _ in range(intg))
                    fraction = "".join(rng.choice("0123456789") for _ in range(scale))
                data = _mysql_decimal(negative, whole, fraction, precision, scale)
                value, end = read(b"xy" + data + b"\xff\x00", 2)
                text = (
                    ("-" if negative else "") + (whole or "0") + ("." + fraction if scale else "")
                )
                expected = decimal.Decimal(text)
                assert end == 2 + len(data)
                assert value.as_tuple() == expected.as_tuple(), (precision, scale, text)
                cases += 1
    assert cases > 3000


def test_inline_timestamp2_and_date_equal_their_helpers() -> None:
    """TIMESTAMP(0-6) and DATE are read by statements inside the image function; they must
    give what the helpers ``_timestamp2``/``_date`` (the library's formulas) give: epoch,
    2038, fractions at every precision (odd ones rounded as the library does), zero and
    partly-zero dates, NULLs in between."""
    from connectors.mysql.rows_decoder import _date, _timestamp2

    class Col:
        def __init__(self, type_: int, fsp: int = 0) -> None:
            self.type, self.fsp, self.unsigned = type_, fsp, False

    columns = [Col(17, fsp) for fsp in range(7)] + [Col(10)]
    decoder = TableDecoder(columns)
    image = decoder.image(b"\xff")
    rng = random.Random(7)
    seconds = [0, 1, 59, 86_399, 1_700_000_000, 2_147_483_647]
    dates = [0, (2024 << 9) | (2 << 5) | 29, (2024 << 9) | 1, (1 << 9) | (1 << 5) | 1, 0x7FFFFF]
    dates += [(9999 << 9) | (12 << 5) | 31, (2024 << 9) | (13 << 5) | 1]  # month 13 is 0 mod 16
    for case in range(400):
        nulls = rng.randrange(256) if case % 4 == 0 else 0
        body = b""
        expected: list[Any] = []
        for k, col in enumerate(columns):
            if nulls >> k & 1:
                expected.append(None)
                continue
            if col.type == 17:
                size = (col.fsp + 1) // 2
                valid = rng.randrange(10**col.fsp) * (10 if col.fsp % 2 else 1)
                fraction = rng.choice([0, valid, valid, (1 << (8 * size)) - 1]) if size else 0
                raw = struct.pack(">I", rng.choice(seconds)) + fraction.to_bytes(size, "big")
                expected.append(_timestamp2(raw, 0, col.fsp)[0])  # all ones: negative
            else:
                value = rng.choice(dates)
                raw = value.to_bytes(3, "little")
                try:
                    expected.append(_date(raw, 0)[0])
                except ValueError:
                    continue  # an invalid day: both raise
            body += raw
        if len(expected) != len(columns):
            continue
        data = bytes([nulls]) + body
        values, end = image(data, 0)
        assert values == expected and [type(v) for v in values] == [type(v) for v in expected]
        assert end == len(data)


def test_tinyint_and_string_lengths_read_inline() -> None:
    """TINYINT (signed and unsigned, every byte) and 1/2-byte string lengths read without
    struct calls give the struct readings."""

    class Col:
        def __init__(self, type_: int, unsigned: bool = False, max_length: int = 0) -> None:
            self.type, self.unsigned, self.max_length = type_, unsigned, max_length
            self.character_set_name = "utf8mb4"

    decoder = TableDecoder([Col(1), Col(1, True), Col(15, max_length=10), Col(15, max_length=300)])
    image = decoder.image(b"\x0f")
    for byte in range(256):
        text = "é" * byte
        raw = text.encode()
        data = bytes([0, byte, byte]) + bytes([len(raw) % 256]) + raw[: len(raw) % 256]
        data += struct.pack("<H", len(raw)) + raw
        values, end = image(data, 0)
        signed = struct.unpack("<b", bytes([byte]))[0]
        assert values == [signed, byte, raw[: len(raw) % 256].decode(), text]
        assert end == len(data)


def test_error_packet_mid_stream_raises_the_servers_error() -> None:
    """An ERR packet in the binlog stream (e.g. 1236, the position is gone) raises the
    server's error with its code, after the events before it were handled."""
    import pymysql  # type: ignore[import-untyped]

    recording = RECORDINGS["mariadb-10.11-workload.json"]
    packets = [bytes.fromhex(p) for p in recording["packets"]]
    message = b"Could not find GTID state requested by slave in any binlog files"
    error = b"\xff" + struct.pack("<H", 1236) + b"#HY000" + message
    with pytest.raises(pymysql.err.OperationalError) as info:
        replay_with(RawBinlogReader, recording, [*packets[:40], error, *packets[40:]])
    assert info.value.args[0] == 1236 and "GTID state" in info.value.args[1]
