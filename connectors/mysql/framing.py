"""MySQL protocol packets of the binlog stream, read from the socket in large pieces.

PyMySQL's ``Connection._read_packet`` reads each packet with two buffered reads of an 8 KiB
``BufferedReader`` (header, then body) and wraps it in a ``MysqlPacket``: about an eighth of
the binlog drain, and every 8 KiB refill releases and re-takes the GIL, which on a busy
machine means waiting for the other threads (the engine's JSON and producer thread) each time.
:func:`payloads` keeps PyMySQL for the handshake and the dump request and then reads the same
socket itself, in reads of up to :data:`READ_SIZE` bytes, slicing the packets out of them.

It does what ``_read_packet`` does: the sequence number checked, packets of 16 MiB - 1 bytes
or more joined with their continuation frames, a short read or socket error closes the
connection and raises ``OperationalError`` (``CR_SERVER_LOST``), as does a sequence number 0
(MariaDB's error packet on shutdown). ERR/EOF packets are the caller's, as payloads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pymysql import err  # type: ignore[import-untyped]
from pymysql.constants import CR  # type: ignore[import-untyped]

#: the most one socket read asks for
READ_SIZE = 1 << 18
#: a frame of this length continues in the next one (payloads of 16 MiB and more)
MAX_FRAME = 0xFFFFFF


def payloads(conn: Any) -> Iterator[list[bytes]]:
    """The payloads of ``conn``'s (a PyMySQL connection) next packets, forever, a list per
    socket read (see :func:`frames`)."""
    if conn._current_timeout != conn._read_timeout:
        conn._sock.settimeout(conn._read_timeout)
        conn._current_timeout = conn._read_timeout
    return frames(conn._rfile.read1, conn._next_seq_id, conn._force_close)


def frames(
    read1: Callable[[int], bytes], seq: int, close: Callable[[], None]
) -> Iterator[list[bytes]]:
    """Packet payloads from ``read1`` (``BufferedReader.read1``: what is buffered, else one
    raw read of up to n bytes), the first packet numbered ``seq``; ``close`` on a lost
    connection. Each list holds the packets complete after a read, so the consumer resumes
    this generator once per read, not per packet; a read waits only when no complete
    packet is left."""
    buf = b""
    pos = 0
    parts: list[bytes] = []  # the frames so far of a payload of 16 MiB or more
    while True:
        out: list[bytes] = []
        size = len(buf)
        need = 4
        while size - pos >= 4:
            length = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
            end = pos + 4 + length
            if end > size:
                need = 4 + length
                break
            if buf[pos + 3] != seq:
                _bad_sequence(close, buf[pos + 3], seq)
            seq = (seq + 1) & 0xFF
            payload = buf[pos + 4 : end]
            pos = end
            if length == MAX_FRAME:
                parts.append(payload)
                continue
            if parts:
                parts.append(payload)
                payload = b"".join(parts)
                parts = []
            out.append(payload)
        if out:
            yield out
        buf, pos = _fill(read1, close, buf, pos, need)


def _fill(
    read1: Callable[[int], bytes], close: Callable[[], None], buf: bytes, pos: int, need: int
) -> tuple[bytes, int]:
    """``buf[pos:]`` followed by reads until it holds at least ``need`` bytes."""
    chunks = [buf[pos:]]
    have = len(chunks[0])
    while have < need:
        try:
            chunk = read1(READ_SIZE)
        except OSError as exc:
            close()
            raise err.OperationalError(
                CR.CR_SERVER_LOST, f"Lost connection to MySQL server during query ({exc})"
            ) from exc
        if not chunk:
            close()
            raise err.OperationalError(
                CR.CR_SERVER_LOST, "Lost connection to MySQL server during query"
            )
        chunks.append(chunk)
        have += len(chunk)
    return b"".join(chunks), 0


def _bad_sequence(close: Callable[[], None], got: int, expected: int) -> None:
    close()
    if got == 0:  # MariaDB sends an error packet numbered 0 when it shuts down
        raise err.OperationalError(
            CR.CR_SERVER_LOST, "Lost connection to MySQL server during query"
        )
    raise err.InternalError(f"Packet sequence number wrong - got {got} expected {expected}")
