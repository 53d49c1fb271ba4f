"""Everything that talks to the server: PyMySQL sessions and python-mysql-replication's reader.

This is the only module importing either library, so the rest of the connector deals in
plain values and the event classes re-exported here.

The binlog reader is used under three rules learned the hard way (building-blocks §2):

* it runs with ``blocking=True`` (non-blocking GTID mode re-delivers rows endlessly);
* it is always given an explicit position (MySQL 8.4 removed ``SHOW MASTER STATUS``, which the
  library falls back to otherwise);
* its silent reconnect is disabled: on a lost connection the library reconnects from the
  position it was *constructed* with, re-delivering or skipping events. The connection factory
  below refuses a second stream connection, so the loss surfaces as an exception and the
  connector rebuilds the reader from its own checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql  # type: ignore[import-untyped]
import pymysql.converters  # type: ignore[import-untyped]
import pymysql.cursors  # type: ignore[import-untyped]
from pymysql.constants import FIELD_TYPE  # type: ignore[import-untyped]
from pymysql.protocol import MysqlPacket  # type: ignore[import-untyped]
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    FormatDescriptionEvent,
    GtidEvent,
    HeartbeatLogEvent,
    MariadbAnnotateRowsEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    RowsQueryLogEvent,
    StopEvent,
    XAPrepareEvent,
    XidEvent,
)
from pymysqlreplication.json_binary import JsonDiff
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    PartialUpdateRowsEvent,
    RowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from cdc.config import Config
from cdc.spi.relational import Table
from connectors.mysql.config import initial_statements
from connectors.mysql.types import base_type, snapshot_timestamp_decoder

__all__ = [
    "BinlogReader",
    "DeleteRowsEvent",
    "FormatDescriptionEvent",
    "GtidEvent",
    "HeartbeatLogEvent",
    "JsonDiff",
    "MariadbAnnotateRowsEvent",
    "MariadbGtidEvent",
    "PartialUpdateRowsEvent",
    "QueryEvent",
    "ReplayConnection",
    "RotateEvent",
    "RowsEvent",
    "RowsQueryLogEvent",
    "StopEvent",
    "TableMapEvent",
    "UpdateRowsEvent",
    "WriteRowsEvent",
    "XAPrepareEvent",
    "XidEvent",
]

log = logging.getLogger("tidemark.mysql.connection")


class _NoSilentReconnectNotice(logging.Filter):
    """The library announces "Re-request the connection" before the reconnect this module
    refuses; the connector logs the real outcome itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Re-request the connection" not in record.getMessage()


logging.getLogger("pymysqlreplication").addFilter(_NoSilentReconnectNotice())

Connection = Any  # pymysql.connections.Connection (untyped library)

# The server's byte order for its UTF-16/32 and UCS-2 character sets. The library looks
# charset names up in PyMySQL's table, which has no entry for them, and falls back to Python
# codecs of the same name: ``utf16``/``utf32`` then decode big-endian text as little-endian
# (``ü`` as ``\ufc00``) and ``ucs2``/``utf16le`` are unknown (the raw bytes come back).
_BINLOG_ENCODINGS = {
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
    "ucs2": "utf-16-be",
    "eucjpms": "euc_jis_2004",
}
_library_encoding = RowsEvent.charset_to_encoding


def _charset_to_encoding(name: str) -> str:
    mapped = _BINLOG_ENCODINGS.get(name)
    return mapped if mapped is not None else str(_library_encoding(name))


RowsEvent.charset_to_encoding = staticmethod(_charset_to_encoding)

# MySQL/MariaDB error codes the connector reacts to.
ER_DBACCESS_DENIED = 1044
ER_ACCESS_DENIED = 1045
ER_TABLEACCESS_DENIED = 1142
ER_SPECIFIC_ACCESS_DENIED = 1227
ER_LOCK_WAIT_TIMEOUT = 1205
ER_MASTER_FATAL_READING_BINLOG = 1236
ER_PARSE_ERROR = 1064
CONNECTION_LOST = frozenset({2002, 2003, 2006, 2013, 2055})
ACCESS_DENIED = frozenset(
    {ER_DBACCESS_DENIED, ER_ACCESS_DENIED, ER_TABLEACCESS_DENIED, ER_SPECIFIC_ACCESS_DENIED}
)

STREAM_EVENTS = (
    RotateEvent,
    FormatDescriptionEvent,
    QueryEvent,
    XidEvent,
    GtidEvent,
    MariadbGtidEvent,
    MariadbAnnotateRowsEvent,
    RowsQueryLogEvent,
    WriteRowsEvent,
    UpdateRowsEvent,
    DeleteRowsEvent,
    PartialUpdateRowsEvent,
    HeartbeatLogEvent,
    XAPrepareEvent,
    StopEvent,
)


def error_code(exc: BaseException) -> int | None:
    if isinstance(exc, pymysql.err.MySQLError) and exc.args and isinstance(exc.args[0], int):
        return int(exc.args[0])
    return None


def is_connection_error(exc: BaseException) -> bool:
    if isinstance(exc, OSError | ReconnectRefused):
        return True
    if isinstance(exc, pymysql.err.InterfaceError):
        return True
    return isinstance(exc, pymysql.err.OperationalError) and error_code(exc) in CONNECTION_LOST


def is_mysql_error(exc: BaseException) -> bool:
    return isinstance(exc, pymysql.err.MySQLError)


# -- sessions -----------------------------------------------------------------------------------


def _ssl_options(cfg: Config) -> dict[str, Any] | None:
    mode = cfg["database.ssl.mode"]
    if mode == "disabled":
        # PyMySQL >= 2.2 negotiates TLS by default whenever the server offers it
        return {"ssl_disabled": True}
    if mode == "preferred":
        # PyMySQL's default: TLS when the server offers it (>= 2.2; older ones connect without)
        return None
    ctx = ssl.create_default_context(cafile=cfg.get("database.ssl.ca"))
    if cfg.get("database.ssl.cert"):
        ctx.load_cert_chain(cfg["database.ssl.cert"], cfg.get("database.ssl.key"))
    ctx.check_hostname = mode == "verify_identity"
    if mode == "required":
        ctx.verify_mode = ssl.CERT_NONE
    return {"ssl": ctx}


def connection_settings(cfg: Config) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "host": cfg["database.hostname"],
        "port": int(cfg["database.port"]),
        "user": cfg["database.user"],
        "password": cfg.get("database.password") or "",
        "connect_timeout": max(int(cfg["connect.timeout.ms"]) / 1000, 0.1),
    }
    tls = _ssl_options(cfg)
    if tls:
        settings.update(tls)
    return settings


#: types a snapshot session reads as the server's text (see :func:`connect`)
SNAPSHOT_TEXT_TYPES = (
    FIELD_TYPE.DATE,
    FIELD_TYPE.NEWDATE,
    FIELD_TYPE.DATETIME,
    FIELD_TYPE.DECIMAL,
    FIELD_TYPE.NEWDECIMAL,
)


def key_marks(table: Table, names: Sequence[str]) -> list[str]:
    """The query placeholder of each key column for a key value a snapshot session read.

    DECIMAL comes as text (:data:`SNAPSHOT_TEXT_TYPES`). MySQL's documented rule compares a
    DECIMAL column with a string as two doubles, so past 15 significant digits a resume or
    chunk boundary could skip or repeat rows; MariaDB 10.11 converts the string to the
    column's DECIMAL (checked by the integration test), MySQL was not run here. The text is
    cast back to the column's own DECIMAL(M,D), exact on both, and the range on the key stays
    a range scan. DATE and DATETIME text compares as a date already."""
    marks = []
    for name in names:
        column = table.column(name)
        if column is not None and base_type(column)[0] in ("DECIMAL", "NUMERIC"):
            marks.append(f"CAST(%s AS DECIMAL({column.length or 65},{column.scale or 0}))")
        else:
            marks.append("%s")
    return marks


def connect(
    cfg: Config,
    *,
    autocommit: bool = True,
    read_timeout: float | None = None,
    snapshot: bool = False,
) -> Any:
    """A session for metadata and snapshots: UTC session time zone (so TIMESTAMP values come
    back in UTC, whatever the server's zone), then ``database.initial.statements``. A
    ``snapshot`` session marks its TIMESTAMP values as read by the snapshot
    (:class:`~connectors.mysql.types.SnapshotTimestamp`) and returns DATE, DATETIME and
    DECIMAL values as the server's text, which the columns' converters read (a key value
    read so goes back into a query through :func:`key_marks`)."""
    conn = pymysql.connect(
        **connection_settings(cfg),
        charset="utf8mb4",
        autocommit=autocommit,
        read_timeout=read_timeout,
    )
    if snapshot:
        conn.decoders = snapshot_decoders(conn.decoders)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            for statement in initial_statements(cfg):
                cur.execute(statement)
        if snapshot:
            _widen_read_buffer(conn)
    except BaseException:
        conn.close()
        raise
    return conn


#: the read buffer of a snapshot session: the compiled packet reader (text_rows.py) takes the
#: rows of one buffer fill at a time, and hands the one cut off at its end to PyMySQL
SNAPSHOT_READ_BUFFER = 256 * 1024


def _widen_read_buffer(conn: Any) -> None:
    """Replaces PyMySQL's 8 KiB buffered reader of the socket with a wider one: between
    statements nothing is buffered (every reply was read whole), so no byte is lost."""
    sock, old = getattr(conn, "_sock", None), getattr(conn, "_rfile", None)
    if sock is None or old is None or not callable(getattr(sock, "makefile", None)):
        return
    conn._rfile = sock.makefile("rb", buffering=SNAPSHOT_READ_BUFFER)
    old.close()  # the reader only: the socket stays open for the new one


def snapshot_decoders(decoders: dict[int, Any]) -> dict[int, Any]:
    """A snapshot session's decoders (see :func:`connect`) from PyMySQL's."""
    ts = FIELD_TYPE.TIMESTAMP
    return {
        **decoders,
        ts: snapshot_timestamp_decoder(decoders[ts]),
        # as text: the columns' converters read it (natively in the compiled row function)
        # instead of PyMySQL building a date, datetime or Decimal that is converted again
        **dict.fromkeys(SNAPSHOT_TEXT_TYPES, pymysql.converters.through),
    }


def query(conn: Any, sql: str, args: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def execute(conn: Any, sql: str, args: Sequence[Any] | None = None) -> None:
    with conn.cursor() as cur:
        cur.execute(sql, args)


def cursor(conn: Any, *, unbuffered: bool) -> Any:
    """A result cursor; unbuffered (server-side streaming) for tables too large to hold in
    memory (``min.row.count.to.stream.results``)."""
    return conn.cursor(pymysql.cursors.SSCursor if unbuffered else pymysql.cursors.Cursor)


def query_one(conn: Any, sql: str, args: Sequence[Any] | None = None) -> tuple[Any, ...] | None:
    rows = query(conn, sql, args)
    return rows[0] if rows else None


@dataclass(frozen=True)
class ServerInfo:
    version: str
    is_mariadb: bool
    server_id: int
    log_bin: bool
    binlog_format: str
    row_image: str
    row_metadata: str | None
    gtid_mode: bool
    rows_query_log_events: bool


def _variables(conn: Any, names: Sequence[str]) -> dict[str, str]:
    rows = query(conn, "SHOW GLOBAL VARIABLES WHERE Variable_name IN %s", (tuple(names),))
    return {str(k).lower(): str(v) for k, v in rows}


def server_info(conn: Any) -> ServerInfo:
    row = query_one(conn, "SELECT VERSION()")
    version = str(row[0]) if row else ""
    v = _variables(
        conn,
        [
            "server_id",
            "log_bin",
            "binlog_format",
            "binlog_row_image",
            "binlog_row_metadata",
            "gtid_mode",
            "binlog_rows_query_log_events",
            "binlog_annotate_row_events",
        ],
    )
    mariadb = "mariadb" in version.lower()
    return ServerInfo(
        version=version,
        is_mariadb=mariadb,
        server_id=int(v.get("server_id", "0") or 0),
        log_bin=v.get("log_bin", "OFF").upper() == "ON",
        binlog_format=v.get("binlog_format", "").upper(),
        row_image=v.get("binlog_row_image", "").upper(),
        row_metadata=v.get("binlog_row_metadata", "").upper() or None,
        # MariaDB always tracks GTIDs; MySQL only with gtid_mode=ON
        gtid_mode=mariadb or v.get("gtid_mode", "OFF").upper() == "ON",
        rows_query_log_events=(
            v.get(
                "binlog_annotate_row_events" if mariadb else "binlog_rows_query_log_events", ""
            ).upper()
            == "ON"
        ),
    )


def binlog_status(conn: Any, info: ServerInfo) -> tuple[str, int, str | None]:
    """(file, position, executed GTIDs) now. Consistent only while writes are blocked (or, on
    MariaDB, see :func:`consistent_snapshot_position`)."""
    row = None
    for statement in ("SHOW BINARY LOG STATUS", "SHOW BINLOG STATUS", "SHOW MASTER STATUS"):
        try:
            row = query_one(conn, statement)
            break
        except pymysql.err.ProgrammingError as exc:
            if error_code(exc) != ER_PARSE_ERROR:
                raise
    if row is None:
        raise RuntimeError("the server has no binary log (log_bin is OFF)")
    file, pos = str(row[0]), int(row[1])
    gtids: str | None = None
    if info.is_mariadb:
        g = query_one(conn, "SELECT @@GLOBAL.gtid_binlog_pos")
        gtids = str(g[0]) if g and g[0] else None
    elif info.gtid_mode and len(row) > 4:
        gtids = str(row[4]).replace("\n", "") or None
    return file, pos, gtids


def consistent_snapshot_position(conn: Any) -> tuple[str, int] | None:
    """MariaDB reports the binlog position matching the open consistent-snapshot transaction,
    so a snapshot without any lock still knows exactly where to stream from."""
    rows = dict(query(conn, "SHOW STATUS LIKE 'binlog_snapshot_%'"))
    file = rows.get("Binlog_snapshot_file")
    pos = rows.get("Binlog_snapshot_position")
    if not file or pos is None:
        return None
    return str(file), int(pos)


def mariadb_gtid_at(conn: Any, file: str, pos: int) -> str | None:
    row = query_one(conn, "SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
    return str(row[0]) if row and row[0] is not None else None


def binlog_files(conn: Any) -> list[str]:
    return [str(r[0]) for r in query(conn, "SHOW BINARY LOGS")]


def gtid_sets(conn: Any, info: ServerInfo) -> tuple[str, str]:
    """(available, purged) GTIDs. For MariaDB "purged" is the GTID position at the start of
    the oldest binlog file still present."""
    if info.is_mariadb:
        row = query_one(conn, "SELECT @@GLOBAL.gtid_binlog_pos")
        available = str(row[0]) if row and row[0] else ""
        files = binlog_files(conn)
        purged = (mariadb_gtid_at(conn, files[0], 4) or "") if files else ""
        return available, purged
    row = query_one(conn, "SELECT @@GLOBAL.gtid_executed, @@GLOBAL.gtid_purged")
    if row is None:
        return "", ""
    return str(row[0] or "").replace("\n", ""), str(row[1] or "").replace("\n", "")


# -- binlog reader ------------------------------------------------------------------------------


class ReconnectRefused(ConnectionError):
    """Raised instead of letting the library reconnect silently from a stale position."""


TABLE_MAP_EVENT = 19
ROTATE_EVENT = 4


class _TableMapDedup:
    """Wraps the stream connection and drops a TABLE_MAP event whose bytes (table id, names,
    column types and metadata) equal one already delivered since the last rotation.

    MySQL writes a TABLE_MAP before every row event group, so a stream of small transactions
    repeats the same one endlessly, and decoding it (optional metadata, column objects) is
    about 40% of the library's time per transaction. Equal bytes decode to the same table
    map, which the library still holds under that table id, so skipping the packet changes
    nothing else; a rotation clears the library's table maps, and this cache with them."""

    def __init__(self, conn: Any) -> None:
        object.__setattr__(self, "_conn", conn)
        object.__setattr__(self, "_seen", set())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._conn, name, value)

    def _read_packet(self, *args: Any) -> Any:
        read, seen = self._conn._read_packet, self._seen
        while True:
            pkt = read(*args)
            data = pkt.get_all_data()
            if len(data) < 24 or data[0] != 0:
                return pkt
            kind = data[5]
            if kind == TABLE_MAP_EVENT:
                body = bytes(data[20:-4])  # without header and checksum
                if body in seen:
                    continue
                seen.add(body)
            elif kind == ROTATE_EVENT:
                seen.clear()
            return pkt


class _GuardedFactory:
    """Connection factory for ``BinLogStreamReader``: the first stream connection is made,
    any later one (the library's silent reconnect) is refused."""

    def __init__(self, connect: Callable[..., Any]) -> None:
        self._connect = connect
        self.stream: Any = None

    def __call__(self, **settings: Any) -> Any:
        is_ctl = "cursorclass" in settings
        if "db" in settings:  # the library still passes PyMySQL's deprecated alias
            settings["database"] = settings.pop("db")
        if not is_ctl:
            if self.stream is not None:
                raise ReconnectRefused("binlog connection lost")
            self.stream = _TableMapDedup(self._connect(**settings))
            return self.stream
        return self._connect(**settings)


class BinlogReader:
    """One binlog dump session from an explicit position."""

    def __init__(
        self,
        cfg: Config,
        server_id: int,
        *,
        mariadb: bool,
        log_file: str | None = None,
        log_pos: int | None = None,
        gtids: str | None = None,
        use_gtids: bool = False,
        heartbeat_s: float = 1.0,
        annotate_rows: bool = True,
        connect: Callable[..., Any] | None = None,
    ) -> None:
        settings = connection_settings(cfg)
        settings["read_timeout"] = max(heartbeat_s * 10, 30.0)
        self._factory = _GuardedFactory(connect or pymysql.connect)
        kwargs: dict[str, Any] = {
            "connection_settings": settings,
            "server_id": int(server_id),
            "blocking": True,
            "only_events": list(STREAM_EVENTS),
            "freeze_schema": False,
            "slave_heartbeat": heartbeat_s,
            "pymysql_wrapper": self._factory,
            "enable_logging": False,
            "report_slave": None,
        }
        if mariadb:
            kwargs["is_mariadb"] = True
            # Annotate_rows events cost a decode per transaction; only include.query needs them
            kwargs["annotate_rows_event"] = annotate_rows
            # None streams from the first binlog file (snapshot.mode=never on a new server)
            kwargs["auto_position"] = gtids or None
        elif use_gtids and gtids is not None:
            kwargs["auto_position"] = gtids
        else:
            if log_file is None:
                raise ValueError("a file/position reader needs a binlog file")
            kwargs.update(log_file=log_file, log_pos=int(log_pos or 4), resume_stream=True)
        self._reader = BinLogStreamReader(**kwargs)

    def __iter__(self) -> Iterator[Any]:
        reader = self._reader
        while True:
            event = reader.fetchone()
            if event is None:
                return
            yield event

    def interrupt(self) -> None:
        """Unblock a read waiting in another thread (used on stop)."""
        stream = self._factory.stream
        sock = getattr(stream, "_sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._reader.close()


# -- recorded binlogs -------------------------------------------------------------------------


class ReplayConnection:
    """Stands in for both of the reader's connections and plays back recorded packets.

    Fixture files hold the raw packets a real server sent (``tests/fixtures/mysql``); feeding
    them through the unchanged library and connector exercises exactly the production decoding
    path without a server. ``server_version`` decides the dialect, ``checksum`` whether events
    carry CRC32 trailers."""

    def __init__(
        self,
        packets: Sequence[bytes],
        *,
        server_version: str,
        checksum: bool = True,
        written: list[bytes] | None = None,
    ) -> None:
        self._packets = list(packets)
        self.written = written if written is not None else []
        self.server_version = server_version
        self.checksum = checksum
        self.charset = "utf8mb4"
        self.encoding = "utf8"
        self._next_seq_id = 0
        self.closed = False

    # what BinLogStreamReader calls
    def cursor(self, *args: Any) -> _ReplayCursor:
        return _ReplayCursor(self)

    def get_server_info(self) -> str:
        return self.server_version

    def _write_bytes(self, data: bytes) -> None:
        self.written.append(bytes(data))  # e.g. the COM_BINLOG_DUMP(_GTID) request

    def _read_packet(self) -> Any:
        if self._packets:
            return MysqlPacket(self._packets.pop(0), self.encoding)
        return MysqlPacket(b"\xfe\x00\x00\x02\x00", self.encoding)  # EOF: end of the recording

    def close(self) -> None:
        self.closed = True


class _ReplayCursor:
    def __init__(self, conn: ReplayConnection) -> None:
        self.conn = conn
        self._row: Any = None

    def execute(self, sql: str, args: Any = None) -> None:
        text = sql.upper()
        if "BINLOG_CHECKSUM" in text:
            self._row = ("binlog_checksum", "CRC32" if self.conn.checksum else "NONE")
        elif "BINLOG_ROW_METADATA" in text:
            self._row = {"Variable_name": "binlog_row_metadata", "Value": "FULL"}
        else:
            self._row = None

    def fetchone(self) -> Any:
        return self._row

    def close(self) -> None:
        return None


def replay_factory(
    packets: Sequence[bytes],
    *,
    server_version: str,
    checksum: bool = True,
    written: list[bytes] | None = None,
) -> Callable[..., Any]:
    """A ``connect`` callable for :class:`BinlogReader` that serves a recording; what the
    reader sends to the "server" is appended to ``written``."""

    def connect(**settings: Any) -> ReplayConnection:
        if "cursorclass" in settings:
            return ReplayConnection([], server_version=server_version, checksum=checksum)
        return ReplayConnection(
            packets, server_version=server_version, checksum=checksum, written=written
        )

    return connect


class RecordingConnection:
    """Wraps a real PyMySQL connection and keeps every binlog packet read (fixture capture)."""

    def __init__(self, conn: Any, sink: list[bytes]) -> None:
        self._conn = conn
        self._sink = sink

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("_conn", "_sink"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._conn, name, value)

    def _read_packet(self, *args: Any) -> Any:
        pkt = self._conn._read_packet(*args)
        data = pkt.get_all_data()
        if data[:1] == b"\x00" and len(data) > 20:
            self._sink.append(bytes(data))
        return pkt


def recording_factory(sink: list[bytes]) -> Callable[..., Any]:
    def connect(**settings: Any) -> Any:
        conn = pymysql.connect(**settings)
        return conn if "cursorclass" in settings else RecordingConnection(conn, sink)

    return connect
