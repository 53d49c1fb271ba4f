"""The binlog stream decoded by tidemark: raw packets → the few event forms the processor needs.

python-mysql-replication still opens the stream (handshake, checksum negotiation, MariaDB
GTID settings, COM_BINLOG_DUMP(_GTID)) and still parses the rare events: FORMAT_DESCRIPTION,
ROTATE, TABLE_MAP (deduplicated, see ``connection._TableMapDedup``), MySQL GTIDs, XA,
heartbeats, MySQL 8's partial JSON updates. The events every transaction carries — MariaDB
GTID, XID, QUERY (``BEGIN``/``COMMIT``/DDL), Annotate_rows and the rows events — are read here
straight from the packet bytes, and rows events carry a per-TABLE_MAP compiled decoder
(rows_decoder.py) instead of the library's per-column interpretation.

The event objects offer the attributes the processor reads of the library's events
(``timestamp``, ``packet.log_pos``/``event_size``/``server_id``, ``gtid``, ``query``, ...),
and :class:`LibraryBinlogReader` (the library's own loop) stays available as the reference the
equivalence tests compare against.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import Any

from pymysql.connections import Connection  # type: ignore[import-untyped]
from pymysql.protocol import MysqlPacket  # type: ignore[import-untyped]
from pymysqlreplication.packet import BinLogPacketWrapper

from connectors.mysql import framing
from connectors.mysql.connection import BinlogReader, _TableMapDedup
from connectors.mysql.rows_decoder import TableDecoder, read_rows

_HEADER = struct.Struct("<IBIII")  # timestamp, type, server id, event size, log pos
_QUERY = struct.Struct("<IIBHH")  # thread id, exec time, schema length, error, status length
_MARIADB_GTID = struct.Struct("<QIB")  # sequence number, domain id, flags

QUERY_EVENT = 2
ROTATE_EVENT = 4
FORMAT_DESCRIPTION_EVENT = 15
XID_EVENT = 16
TABLE_MAP_EVENT = 19
WRITE_V1, UPDATE_V1, DELETE_V1 = 23, 24, 25
WRITE_V2, UPDATE_V2, DELETE_V2 = 30, 31, 32
MARIADB_ANNOTATE_ROWS_EVENT = 160
MARIADB_GTID_EVENT = 162
_ROWS = {
    WRITE_V1: ("c", 8),
    UPDATE_V1: ("u", 8),
    DELETE_V1: ("d", 8),
    WRITE_V2: ("c", 10),
    UPDATE_V2: ("u", 10),
    DELETE_V2: ("d", 10),
}


def decoder_enabled() -> bool:
    """tidemark's decoder streams unless ``TIDEMARK_BINLOG_DECODER=library`` asks for the
    library's own loop (the reference, kept for comparison and as a fallback)."""
    return os.environ.get("TIDEMARK_BINLOG_DECODER", "tidemark").strip().lower() != "library"


class Event:
    """The common header; ``packet`` is the event itself (the library's events keep these
    fields on their packet wrapper)."""

    __slots__ = ("event_size", "log_pos", "server_id", "timestamp")

    def __init__(self, timestamp: int, server_id: int, event_size: int, log_pos: int) -> None:
        self.timestamp = timestamp
        self.server_id = server_id
        self.event_size = event_size
        self.log_pos = log_pos

    @property
    def packet(self) -> Event:
        return self


class MariadbGtid(Event):
    __slots__ = ("flags", "gtid", "parts")
    flags: int
    gtid: str
    #: (domain, server id, sequence number): ``gtid`` unparsed
    parts: tuple[int, int, int]


class Xid(Event):
    __slots__ = ()


class Query(Event):
    __slots__ = ("query", "schema", "slave_proxy_id")
    query: str
    schema: bytes
    slave_proxy_id: int


class Annotate(Event):
    __slots__ = ("sql_statement",)
    sql_statement: bytes


class Rows(Event):
    """A rows event of a mapped table; its rows are decoded on demand (:meth:`images`)."""

    __slots__ = (
        "_data",
        "_end",
        "_start",  # post-header bytes declared beyond the known ones
        "columns",
        "decoder",
        "kind",
        "op",
        "partial",
        "schema",
        "table",
        "table_id",
    )
    _data: bytes
    _end: int
    _start: int
    columns: list[Any]
    decoder: TableDecoder
    kind: int
    op: str
    partial: bool
    schema: str
    table: str
    table_id: int

    def images(self) -> list[tuple[list[Any], list[Any] | None]]:
        """(image, after image of an UPDATE or None) per row, in the event's order."""
        d, p = self._data, 28  # after the table id and the flags
        if self.kind >= WRITE_V2:
            extra = d[p] | d[p + 1] << 8  # the extra-data length, its own two bytes included
            p += 2 + self._start + extra - 2
        else:
            p += self._start
        count, p = _lenenc(d, p)
        width = (count + 7) // 8
        present = d[p : p + width]
        p += width
        present2 = None
        if self.op == "u":
            present2 = d[p : p + width]
            p += width
        decoder = self.decoder
        self.partial = decoder.partial(present) or (
            present2 is not None and decoder.partial(present2)
        )
        return read_rows(decoder, d, p, self._end, present, present2)


def _lenenc(d: bytes, p: int) -> tuple[int, int]:
    c = d[p]
    if c < 251:
        return c, p + 1
    if c == 252:
        return d[p + 1] | d[p + 2] << 8, p + 3
    if c == 253:
        return int.from_bytes(d[p + 1 : p + 4], "little"), p + 4
    return int.from_bytes(d[p + 1 : p + 9], "little"), p + 9


class RawBinlogReader(BinlogReader):
    """:class:`BinlogReader` whose loop reads the packets itself (see the module docstring)."""

    def __iter__(self) -> Iterator[Any]:
        r = self._reader
        name = "_BinLogStreamReader__"
        if not getattr(r, name + "connected_stream"):
            getattr(r, name + "connect_to_stream")()
        if not getattr(r, name + "connected_ctl"):
            getattr(r, name + "connect_to_ctl")()
        checksum = 4 if getattr(r, name + "use_checksum") else 0
        allowed = getattr(r, name + "allowed_events")
        in_packet = getattr(r, name + "allowed_events_in_packet")
        decoders: dict[int, tuple[Any, TableDecoder]] = {}
        post_header: list[int] | None = None
        unpack_header = _HEADER.unpack_from
        stream = r._stream_connection
        encoding = getattr(stream, "encoding", "utf8")
        packets = _payloads(stream)
        seen: set[bytes] = set()  # TABLE_MAP bodies since the last rotation (_TableMapDedup)

        def library_event(d: bytes) -> Any:
            return BinLogPacketWrapper(
                MysqlPacket(d, encoding),
                r.table_map,
                r._ctl_connection,
                r.mysql_version,
                bool(checksum),
                in_packet,
                None,
                None,
                None,
                None,
                False,
                False,
                False,
                getattr(r, name + "optional_meta_data"),
                False,
                False,
                post_header,
            )

        for batch in packets:
            for d in batch:
                first = d[0]
                if first:
                    if first == 0xFE and len(d) < 9:  # EOF: the server ended the stream
                        r.close()
                        return
                    if first == 0xFF:
                        MysqlPacket(d, encoding).raise_for_error()
                    continue
                if len(d) < 20:
                    continue
                timestamp, kind, server_id, size, log_pos = unpack_header(d, 1)
                end = 1 + size - checksum
                rows = _ROWS.get(kind)
                if rows is not None:
                    table_id = int.from_bytes(d[20:26], "little")
                    mapped = decoders.get(table_id)
                    table = r.table_map.get(table_id)
                    if table is None:
                        continue  # as the library: rows of a table it has no map for
                    if mapped is None or mapped[0] is not table:
                        mapped = decoders[table_id] = (table, TableDecoder(table.columns))
                    event = Rows(timestamp, server_id, size, log_pos)
                    event.op, known = rows
                    event.kind = kind
                    event.table_id = table_id
                    event.schema = table.schema
                    event.table = table.table
                    event.columns = table.columns
                    event.decoder = mapped[1]
                    event._data = d
                    event._start = _extra(post_header, kind, known)
                    event._end = end
                    yield event
                elif kind == MARIADB_GTID_EVENT:
                    seq, domain, flags = _MARIADB_GTID.unpack_from(d, 20)
                    gtid = MariadbGtid(timestamp, server_id, size, log_pos)
                    gtid.flags = flags
                    gtid.gtid = f"{domain}-{server_id}-{seq}"
                    gtid.parts = (domain, server_id, seq)
                    yield gtid
                elif kind == XID_EVENT:
                    yield Xid(timestamp, server_id, size, log_pos)
                elif kind == QUERY_EVENT:
                    yield _query(d, end, timestamp, server_id, size, log_pos, post_header)
                elif kind == MARIADB_ANNOTATE_ROWS_EVENT:
                    note = Annotate(timestamp, server_id, size, log_pos)
                    note.sql_statement = bytes(d[20:end])
                    yield note
                else:
                    if kind == TABLE_MAP_EVENT:
                        body = d[20:end]  # equal bytes: the map the library already holds
                        if body in seen:
                            continue
                        seen.add(body)
                    elif kind == ROTATE_EVENT:
                        seen.clear()
                    event = library_event(d).event
                    if kind == ROTATE_EVENT and timestamp != 0:
                        r.table_map = {}
                        decoders.clear()
                    elif kind == FORMAT_DESCRIPTION_EVENT and event is not None:
                        r.mysql_version = event.mysql_version
                        post_header = event.post_header_len
                    elif kind == TABLE_MAP_EVENT and event is not None:
                        r.table_map[event.table_id] = event.get_table()
                    if event is not None and event.__class__ in allowed:
                        yield event


def _payloads(stream: Any) -> Iterator[list[bytes]]:
    """The stream connection's packet payloads: read off the socket by :mod:`framing` for a
    PyMySQL connection, else through its ``_read_packet`` (recorded streams in the tests,
    fixture capture)."""
    if isinstance(stream, _TableMapDedup) and type(stream._conn) is Connection:
        return framing.payloads(stream._conn)
    return _read_packets(stream._read_packet)


def _read_packets(read_packet: Any) -> Iterator[list[bytes]]:
    while True:
        yield [read_packet().get_all_data()]


def _extra(post_header: list[int] | None, kind: int, known: int) -> int:
    """Bytes a FORMAT_DESCRIPTION declares beyond the post-header this decoder reads."""
    if not post_header or kind - 1 >= len(post_header):
        return 0
    declared = post_header[kind - 1]
    if declared < known:
        raise ValueError(
            f"event type {kind} declares a post-header of {declared} bytes, fewer than {known}"
        )
    return declared - known


def _query(
    d: bytes,
    end: int,
    timestamp: int,
    server_id: int,
    size: int,
    log_pos: int,
    post_header: list[int] | None,
) -> Query:
    thread, _elapsed, schema_length, _error, status_length = _QUERY.unpack_from(d, 20)
    p = 20 + 13 + _extra(post_header, QUERY_EVENT, 13) + status_length
    event = Query(timestamp, server_id, size, log_pos)
    event.slave_proxy_id = thread
    event.schema = bytes(d[p : p + schema_length])
    event.query = d[p + schema_length + 1 : end].decode("utf-8", errors="backslashreplace")
    return event
