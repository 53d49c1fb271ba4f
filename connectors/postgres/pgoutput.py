"""pgoutput, the logical replication protocol of PostgreSQL (versions 1 and 2), decoded.

Pure functions from the bytes of one CopyData payload to a message object; no I/O, so the
decoder is tested from recorded bytes. Protocol reference: PostgreSQL's "Logical Replication
Message Formats". Values arrive in text form (the server's output functions), which the
type mapping in ``types.py`` converts.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cdc import compiled
from cdc.spi import UNAVAILABLE

_I8 = struct.Struct("!b")
_U8 = struct.Struct("!B")
_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_U32 = struct.Struct("!I")
_I64 = struct.Struct("!q")
_U64 = struct.Struct("!Q")
_BEGIN = struct.Struct("!QqI")  # final LSN, commit ts, xid
_COMMIT = struct.Struct("!BQQq")  # flags, commit LSN, end LSN, commit ts
_XLOG = struct.Struct("!QQq")  # 'w': data start, wal end, server clock
_KEEPALIVE = struct.Struct("!QqB")  # 'k': wal end, server clock, reply requested

PG_EPOCH_OFFSET_US = 946_684_800 * 1_000_000  # 2000-01-01 in Unix microseconds


class PgOutputError(ValueError):
    """The bytes are not a pgoutput message this decoder understands."""


def lsn_to_str(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def str_to_lsn(text: str) -> int:
    hi, sep, lo = text.partition("/")
    if not sep:
        raise ValueError(f"not an LSN: {text!r}")
    return (int(hi, 16) << 32) | int(lo, 16)


def pg_ts_to_unix_us(pg_us: int) -> int:
    return pg_us + PG_EPOCH_OFFSET_US


# -- messages ----------------------------------------------------------------------------------
@dataclass(slots=True)
class Begin:
    final_lsn: int
    commit_ts_us: int  # Unix epoch microseconds
    xid: int


@dataclass(slots=True)
class Commit:
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts_us: int


@dataclass(slots=True)
class Origin:
    lsn: int
    name: str


@dataclass(slots=True)
class RelationColumn:
    is_key: bool
    name: str
    type_oid: int
    type_modifier: int


@dataclass(slots=True)
class Relation:
    xid: int | None
    oid: int
    namespace: str
    name: str
    replica_identity: str  # d(efault), n(othing), f(ull), i(ndex)
    columns: list[RelationColumn]


@dataclass(slots=True)
class TypeMsg:
    xid: int | None
    oid: int
    namespace: str
    name: str


# Tuple values: None = SQL NULL, UNCHANGED_TOAST = unchanged TOASTed value, str = text, bytes
# = binary. A tuple is a list in relation column order.
UNCHANGED_TOAST: Any = UNAVAILABLE


@dataclass(slots=True)
class Insert:
    xid: int | None
    relation_oid: int
    new: list[Any]


@dataclass(slots=True)
class Update:
    xid: int | None
    relation_oid: int
    old: list[Any] | None  # the whole old row ('O', REPLICA IDENTITY FULL)
    key: list[Any] | None  # old key columns only ('K'); other positions None
    new: list[Any]


@dataclass(slots=True)
class Delete:
    xid: int | None
    relation_oid: int
    old: list[Any] | None
    key: list[Any] | None


@dataclass(slots=True)
class Truncate:
    xid: int | None
    options: int  # 1 = CASCADE, 2 = RESTART IDENTITY
    relation_oids: list[int]


@dataclass(slots=True)
class Message:
    xid: int | None
    transactional: bool
    lsn: int
    prefix: str
    content: bytes


@dataclass(slots=True)
class StreamStart:
    xid: int
    first_segment: bool


@dataclass(slots=True)
class StreamStop:
    pass


@dataclass(slots=True)
class StreamCommit:
    xid: int
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts_us: int


@dataclass(slots=True)
class StreamAbort:
    xid: int
    sub_xid: int


PgOutputMessage = (
    Begin
    | Commit
    | Origin
    | Relation
    | TypeMsg
    | Insert
    | Update
    | Delete
    | Truncate
    | Message
    | StreamStart
    | StreamStop
    | StreamCommit
    | StreamAbort
)


# -- decoding ------------------------------------------------------------------------------------
# Every decoder takes the buffer and the offset of the message's tag byte, so a message is
# decoded where it lies inside its CopyData payload (no copy of the tail per message); byte
# positions in error messages stay relative to the message.
def _cstring(buf: bytes, pos: int) -> tuple[str, int]:
    end = buf.index(b"\x00", pos)
    return buf[pos:end].decode(), end + 1


_i16 = _I16.unpack_from
_i32 = _I32.unpack_from


def _tuple_py(buf: bytes, pos: int, start: int = 0) -> tuple[list[Any], int]:
    """One TupleData: the reference of the compiled ``_pgoutput_c.tuple_at``."""
    (n,) = _i16(buf, pos)
    pos += 2
    values: list[Any] = []
    append = values.append
    i32 = _i32
    for _ in range(n):
        kind = buf[pos]
        if kind == 0x74:  # 't' text
            (length,) = i32(buf, pos + 1)
            pos += 5
            append(str(buf[pos : pos + length], "utf-8"))  # bytes or a memoryview
            pos += length
        elif kind == 0x6E:  # 'n' null
            append(None)
            pos += 1
        elif kind == 0x75:  # 'u' unchanged toast
            append(UNCHANGED_TOAST)
            pos += 1
        elif kind == 0x62:  # 'b' binary
            (length,) = i32(buf, pos + 1)
            pos += 5
            append(bytes(buf[pos : pos + length]))
            pos += length
        else:
            raise PgOutputError(f"unknown tuple data kind {chr(kind)!r} at byte {pos - start}")
    return values, pos


_compiled = compiled.load("connectors.postgres._pgoutput_c")
if _compiled is not None:
    _compiled.configure(UNCHANGED_TOAST, PgOutputError)
    _tuple: Callable[..., tuple[list[Any], int]] = _compiled.tuple_at
else:
    _tuple = _tuple_py

#: the tuple decoder, for the stream loop's inlined Insert path (``insert_at`` without a call)
tuple_at = _tuple
U32_AT = _U32.unpack_from


def decode(buf: bytes, *, streaming: bool = False) -> PgOutputMessage:
    """Decode one pgoutput message. ``streaming`` is True between Stream Start and Stream
    Stop, when data messages carry the (sub)transaction id."""
    return decode_at(buf, 0, streaming)


def decode_at(buf: bytes, start: int, streaming: bool = False) -> PgOutputMessage:
    """``decode(buf[start:])`` without copying: the message that begins at ``start`` and runs
    to the end of ``buf`` (an XLogData payload is one message after its 25-byte header)."""
    if len(buf) <= start:
        raise PgOutputError("empty pgoutput message")
    tag = buf[start]
    try:
        msg: PgOutputMessage = _DECODERS[tag](buf, start, streaming)
        return msg
    except KeyError:
        raise PgOutputError(f"unknown pgoutput message type {chr(tag)!r}") from None
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, PgOutputError):
            raise
        raise PgOutputError(f"truncated or malformed {chr(tag)!r} message: {exc}") from exc


def insert_at(buf: bytes, start: int) -> tuple[int, list[Any]]:
    """The relation OID and new tuple of the (non-streaming) Insert at ``start``: what
    ``decode_at`` gives, without building the message object (one per captured insert).
    Malformed input goes through ``decode_at``, so it fails exactly as there."""
    try:
        (oid,) = _U32.unpack_from(buf, start + 1)
        if buf[start + 5] == 0x4E:  # 'N'
            return oid, _tuple(buf, start + 6, start)[0]
    except Exception:
        pass
    msg = decode_at(buf, start)
    if not isinstance(msg, Insert):
        raise PgOutputError(f"not an insert message: {type(msg).__name__}")
    return msg.relation_oid, msg.new


def _xid(buf: bytes, pos: int, streaming: bool) -> tuple[int | None, int]:
    if streaming:
        return _U32.unpack_from(buf, pos)[0], pos + 4
    return None, pos


def _begin(buf: bytes, start: int, streaming: bool) -> Begin:
    final_lsn, ts, xid = _BEGIN.unpack_from(buf, start + 1)
    return Begin(final_lsn, ts + PG_EPOCH_OFFSET_US, xid)


def _commit(buf: bytes, start: int, streaming: bool) -> Commit:
    flags, commit_lsn, end_lsn, ts = _COMMIT.unpack_from(buf, start + 1)
    return Commit(flags, commit_lsn, end_lsn, ts + PG_EPOCH_OFFSET_US)


def _origin(buf: bytes, start: int, streaming: bool) -> Origin:
    (lsn,) = _U64.unpack_from(buf, start + 1)
    name, _ = _cstring(buf, start + 9)
    return Origin(lsn, name)


def _relation(buf: bytes, start: int, streaming: bool) -> Relation:
    xid, pos = _xid(buf, start + 1, streaming)
    (oid,) = _U32.unpack_from(buf, pos)
    namespace, pos = _cstring(buf, pos + 4)
    name, pos = _cstring(buf, pos)
    identity = chr(buf[pos])
    (ncols,) = _I16.unpack_from(buf, pos + 1)
    pos += 3
    cols = []
    for _ in range(ncols):
        flags = buf[pos]
        cname, pos = _cstring(buf, pos + 1)
        type_oid, typmod = struct.unpack_from("!Ii", buf, pos)
        pos += 8
        cols.append(RelationColumn(bool(flags & 1), cname, type_oid, typmod))
    return Relation(xid, oid, namespace or "pg_catalog", name, identity, cols)


def _type(buf: bytes, start: int, streaming: bool) -> TypeMsg:
    xid, pos = _xid(buf, start + 1, streaming)
    (oid,) = _U32.unpack_from(buf, pos)
    namespace, pos = _cstring(buf, pos + 4)
    name, _ = _cstring(buf, pos)
    return TypeMsg(xid, oid, namespace, name)


def _insert(buf: bytes, start: int, streaming: bool) -> Insert:
    xid, pos = _xid(buf, start + 1, streaming)
    (oid,) = _U32.unpack_from(buf, pos)
    if buf[pos + 4] != 0x4E:  # 'N'
        raise PgOutputError("insert message without a new tuple")
    new, _ = _tuple(buf, pos + 5, start)
    return Insert(xid, oid, new)


def _update(buf: bytes, start: int, streaming: bool) -> Update:
    xid, pos = _xid(buf, start + 1, streaming)
    (oid,) = _U32.unpack_from(buf, pos)
    pos += 4
    old = key = None
    kind = buf[pos]
    if kind == 0x4F:  # 'O'
        old, pos = _tuple(buf, pos + 1, start)
    elif kind == 0x4B:  # 'K'
        key, pos = _tuple(buf, pos + 1, start)
    if buf[pos] != 0x4E:
        raise PgOutputError("update message without a new tuple")
    new, _ = _tuple(buf, pos + 1, start)
    return Update(xid, oid, old, key, new)


def _delete(buf: bytes, start: int, streaming: bool) -> Delete:
    xid, pos = _xid(buf, start + 1, streaming)
    (oid,) = _U32.unpack_from(buf, pos)
    pos += 4
    kind = buf[pos]
    values, _ = _tuple(buf, pos + 1, start)
    if kind == 0x4F:
        return Delete(xid, oid, values, None)
    if kind == 0x4B:
        return Delete(xid, oid, None, values)
    raise PgOutputError(f"delete message with tuple kind {chr(kind)!r}")


def _truncate(buf: bytes, start: int, streaming: bool) -> Truncate:
    xid, pos = _xid(buf, start + 1, streaming)
    (n,) = _U32.unpack_from(buf, pos)
    options = buf[pos + 4]
    oids = list(struct.unpack_from(f"!{n}I", buf, pos + 5))
    return Truncate(xid, options, oids)


def _message(buf: bytes, start: int, streaming: bool) -> Message:
    xid, pos = _xid(buf, start + 1, streaming)
    flags = buf[pos]
    (lsn,) = _U64.unpack_from(buf, pos + 1)
    prefix, pos = _cstring(buf, pos + 9)
    (length,) = _U32.unpack_from(buf, pos)
    content = bytes(buf[pos + 4 : pos + 4 + length])
    return Message(xid, bool(flags & 1), lsn, prefix, content)


def _stream_start(buf: bytes, start: int, streaming: bool) -> StreamStart:
    (xid,) = _U32.unpack_from(buf, start + 1)
    return StreamStart(xid, buf[start + 5] == 1)


def _stream_stop(buf: bytes, start: int, streaming: bool) -> StreamStop:
    return StreamStop()


def _stream_commit(buf: bytes, start: int, streaming: bool) -> StreamCommit:
    (xid,) = _U32.unpack_from(buf, start + 1)
    flags, commit_lsn, end_lsn, ts = _COMMIT.unpack_from(buf, start + 5)
    return StreamCommit(xid, flags, commit_lsn, end_lsn, pg_ts_to_unix_us(ts))


def _stream_abort(buf: bytes, start: int, streaming: bool) -> StreamAbort:
    xid, sub = struct.unpack_from("!II", buf, start + 1)
    return StreamAbort(xid, sub)


_DECODERS: dict[int, Any] = {
    ord("B"): _begin,
    ord("C"): _commit,
    ord("O"): _origin,
    ord("R"): _relation,
    ord("Y"): _type,
    ord("I"): _insert,
    ord("U"): _update,
    ord("D"): _delete,
    ord("T"): _truncate,
    ord("M"): _message,
    ord("S"): _stream_start,
    ord("E"): _stream_stop,
    ord("c"): _stream_commit,
    ord("A"): _stream_abort,
}


# -- the replication envelope (CopyData payloads) ------------------------------------------------
@dataclass(slots=True)
class XLogData:
    data_start: int
    wal_end: int
    server_clock_us: int
    payload: bytes


@dataclass(slots=True)
class Keepalive:
    wal_end: int
    server_clock_us: int
    reply_requested: bool


def decode_copy_data(buf: bytes) -> XLogData | Keepalive:
    tag = buf[:1]
    if tag == b"w":
        start, end, clock = _XLOG.unpack_from(buf, 1)
        return XLogData(start, end, pg_ts_to_unix_us(clock), buf[25:])
    if tag == b"k":
        end, clock, reply = _KEEPALIVE.unpack_from(buf, 1)
        return Keepalive(end, pg_ts_to_unix_us(clock), bool(reply))
    raise PgOutputError(f"unknown replication message {tag!r}")


def standby_status(
    write_lsn: int, flush_lsn: int, apply_lsn: int, now_unix_us: int, reply: bool = False
) -> bytes:
    """The 'r' Standby Status Update that confirms positions to the server."""
    return b"r" + struct.pack(
        "!QQQqB", write_lsn, flush_lsn, apply_lsn, now_unix_us - PG_EPOCH_OFFSET_US, int(reply)
    )
