"""Binlog packet framing read off the socket (connectors/mysql/framing.py) against PyMySQL's
own ``_read_packet``: the same payloads from the same bytes, however the reads split them,
including payloads of 16 MiB and more (continuation frames) and lost connections."""

from __future__ import annotations

import io
import random
from collections.abc import Iterator

import pytest
from pymysql import err  # type: ignore[import-untyped]
from pymysql.connections import Connection  # type: ignore[import-untyped]

from connectors.mysql import framing


def wire(payloads: list[bytes], seq: int = 1) -> bytes:
    """The MySQL protocol frames of ``payloads`` (split at 16 MiB - 1, numbered from seq)."""
    out = bytearray()
    for p in payloads:
        rest = p
        while True:
            head, rest = rest[: framing.MAX_FRAME], rest[framing.MAX_FRAME :]
            out += len(head).to_bytes(3, "little") + bytes([seq])
            out += head
            seq = (seq + 1) & 0xFF
            if len(head) < framing.MAX_FRAME:
                break
    return bytes(out)


class Chopped(io.RawIOBase):
    """A socket that returns at most a few random bytes per read."""

    def __init__(self, data: bytes, most: int, rng: random.Random) -> None:
        self.data, self.pos, self.most, self.rng = data, 0, most, rng

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        n = min(len(b), self.rng.randint(1, self.most), len(self.data) - self.pos)
        b[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


def pymysql_payloads(data: bytes, count: int, seq: int = 1) -> list[bytes]:
    """What PyMySQL's ``_read_packet`` makes of the same bytes (the reference)."""
    conn = Connection.__new__(Connection)
    conn._rfile = io.BufferedReader(io.BytesIO(data))
    conn._sock = conn._result = None
    conn._current_timeout = conn._read_timeout = None
    conn._next_seq_id = seq
    conn.encoding = "utf8"
    return [conn._read_packet().get_all_data() for _ in range(count)]


def ours(data: bytes, count: int, most: int, seed: int, seq: int = 1) -> list[bytes]:
    reader = io.BufferedReader(Chopped(data, most, random.Random(seed)))
    batches: Iterator[list[bytes]] = framing.frames(reader.read1, seq, lambda: None)
    out: list[bytes] = []
    while len(out) < count:
        batch = next(batches)
        assert batch  # a batch holds at least one packet
        out += batch
    assert len(out) == count  # nothing beyond the data
    return out


def events(rng: random.Random, n: int, large: bool = True) -> list[bytes]:
    """Payloads as the binlog sends them (an OK byte, then the event), of awkward sizes."""
    sizes = [0, 2, 3, 4, 19, 20, 250, 8190, 8191, 8192] + ([70_000, 300_000] if large else [])
    return [b"\x00" + rng.randbytes(rng.choice(sizes)) for _ in range(n)]


@pytest.mark.parametrize("most", [1, 7, 4096, 1 << 20])
def test_payloads_equal_pymysqls_however_the_reads_split(most: int) -> None:
    rng = random.Random(most)
    payloads = events(rng, 200 if most > 1 else 60, large=most > 64)
    data = wire(payloads, seq=250)  # sequence numbers wrap at 256
    assert pymysql_payloads(data, len(payloads), 250) == payloads
    assert ours(data, len(payloads), most, seed=most, seq=250) == payloads


def test_payloads_of_16_mib_and_more_are_joined() -> None:
    rng = random.Random(5)
    big = [
        b"\x00" + rng.randbytes(framing.MAX_FRAME - 2),
        b"\x00" + rng.randbytes(framing.MAX_FRAME - 1),  # one full frame + an empty one
        b"\x00" + rng.randbytes(framing.MAX_FRAME * 2 + 17),
        b"\x00tail",
    ]
    data = wire(big)
    assert pymysql_payloads(data, len(big)) == big
    assert ours(data, len(big), 1 << 20, seed=1) == big


def test_lost_connection_and_bad_sequence_raise_as_pymysql() -> None:
    data = wire([b"\x00one", b"\x00two"])
    closed: list[bool] = []
    reader = io.BufferedReader(io.BytesIO(data[:-2]))  # cut inside the second packet
    frames = framing.frames(reader.read1, 1, lambda: closed.append(True))
    assert next(frames) == [b"\x00one"]  # what is complete comes before the failing read
    with pytest.raises(err.OperationalError) as lost:
        next(frames)
    assert lost.value.args[0] == 2013 and closed == [True]

    for seq, kind in ((0, err.OperationalError), (9, err.InternalError)):
        reader = io.BufferedReader(io.BytesIO(wire([b"\x00x"], seq=seq)))
        with pytest.raises(kind):
            next(framing.frames(reader.read1, 1, lambda: None))


def test_socket_errors_become_lost_connection() -> None:
    def broken(_n: int) -> bytes:
        raise TimeoutError("timed out")

    with pytest.raises(err.OperationalError, match="timed out") as lost:
        next(framing.frames(broken, 0, lambda: None))
    assert lost.value.args[0] == 2013
