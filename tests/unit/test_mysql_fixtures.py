"""Recorded binlogs replayed through python-mysql-replication and the connector's processor.

``mariadb-10.11-workload.json`` holds real packets from the local MariaDB (record_mariadb.py);
``mysql-8.0-gtid-json.json`` is hand-built from MySQL's documented event formats
(build_mysql8.py) for the paths only MySQL 8 has: UUID GTIDs, binary JSON, partial JSON updates.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import struct
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from cdc.metrics import TaskMetrics
from cdc.spi import RowChange, SchemaChange, SourceEvent, Table, TableId, TransactionEnd
from connectors.mysql.binlog import BinlogProcessor, Resume
from connectors.mysql.config import parse_config
from connectors.mysql.connection import BinlogReader, replay_factory
from connectors.mysql.errors import EventDeserializationFailed
from connectors.mysql.gtid import GtidSet, MariaDbGtidSet, MySqlGtidSet
from connectors.mysql.state import MySqlMetrics, TaskState
from connectors.mysql.types import Modes, MySqlValueConverters

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mysql"
MARIADB = json.loads((FIXTURES / "mariadb-10.11-workload.json").read_text())
MYSQL8 = json.loads((FIXTURES / "mysql-8.0-gtid-json.json").read_text())
MARIADB_GTID_EVENT = 0xA2
WRITE_ROWS_V1 = 23


class Ctx:
    def __init__(self) -> None:
        self.events: list[SourceEvent] = []
        self.stop_event = threading.Event()
        self.metrics = TaskMetrics("mysql", "fx", "fx")
        self.tables: dict[TableId, Table] = {}
        #: the table registered when each row was emitted (rows decode with that version)
        self.table_of: dict[int, Table] = {}

    def emit(self, event: SourceEvent) -> None:
        self.events.append(event)
        if isinstance(event, RowChange):
            self.table_of[id(event)] = self.tables[event.table_id]

    def register_table(self, table: Table) -> None:
        self.tables[table.id] = table

    def is_included(self, table_id: TableId) -> bool:
        return table_id.table != "fx_isam"

    def snapshot_progress(self, table_id: TableId, rows: int, total: int | None) -> None:
        return None

    def snapshot_chunk_done(self) -> None:
        return None

    def rows(self) -> list[RowChange]:
        return [e for e in self.events if isinstance(e, RowChange)]


def new_state(**cfg: str) -> TaskState:
    raw = {
        "database.server.name": "fx",
        "database.hostname": "h",
        "database.user": "u",
        "schema.history.internal": "memory",
        **{k.replace("_", "."): v for k, v in cfg.items()},
    }
    return TaskState(parse_config(raw), {"server": "fx"}, MySqlMetrics())


def replay(
    recording: dict[str, Any],
    packets: list[bytes] | None = None,
    *,
    st: TaskState | None = None,
    resume: Resume | None = None,
    gtids: GtidSet | None = None,
) -> tuple[Ctx, TaskState, BinlogProcessor]:
    st = st or new_state()
    ctx = Ctx()
    mariadb = "MariaDB" in recording["server_version"]
    start = recording.get("start_gtid") or ""
    if gtids is None:
        gtids = MariaDbGtidSet(start) if mariadb else MySqlGtidSet("")
    st.register_all(ctx)  # as the streaming source does before the first event
    processor = BinlogProcessor(st, ctx, resume or Resume(None, 4, start or None), gtids)
    data = packets if packets is not None else [bytes.fromhex(p) for p in recording["packets"]]
    reader = BinlogReader(
        st.cfg,
        6000,
        mariadb=mariadb,
        gtids=start or None,
        log_file="binlog.000001",
        log_pos=4,
        connect=replay_factory(data, server_version=recording["server_version"]),
    )
    for event in reader:
        processor.handle(event)
    return ctx, st, processor


def values(ctx: Ctx, change: RowChange, image: str = "after") -> dict[str, Any]:
    table = ctx.table_of[id(change)]
    row = change.after if image == "after" else change.before
    assert row is not None
    conv = MySqlValueConverters(Modes())
    out = {}
    for c, v in zip(table.columns, row, strict=True):
        fn = conv.converter_for(table, c)
        out[c.name] = v if v is None or fn is None else fn(v)
    return out


def test_mariadb_recording_decodes_into_events_and_offsets() -> None:
    ctx, st, p = replay(MARIADB)
    rows = ctx.rows()
    assert st.schema.table(TableId("fixture_db", None, "fx")) is not None
    first = values(ctx, rows[0])
    assert first == {
        "id": 1,
        "name": "one",
        "price": decimal.Decimal("1.50"),
        "born": (dt.date(2020, 1, 2) - dt.date(1970, 1, 1)).days,
        "ts": "2020-01-02T03:04:05.678Z",
        "tags": "a,c",
        "mood": "y",
        "doc": '{"k": 1}',
        "bits": b"\x0a",
        "f": 1.1,
        "bn": b"ab\x00\x00",
    }
    assert values(ctx, rows[1])["name"] is None
    bulk = [r for r in rows if r.source["gtid"] == rows[2].source["gtid"]]
    assert len(bulk) == 991  # INSERT ... SELECT seq_10_to_1000: one transaction
    events = sorted({r.offset["event"] for r in bulk})
    assert len(events) > 1 and events == list(range(len(events)))  # several row events
    assert all(r.offset["row"] == r.source["row"] + 1 for r in bulk)
    assert len({r.offset["gtids"] for r in bulk}) == 1
    update = next(r for r in rows if r.before is not None and r.after is not None)
    assert values(ctx, update, "before")["tags"] == "a,c" and values(ctx, update)["tags"] == ""
    delete = next(r for r in rows if r.after is None)
    assert delete.before is not None and delete.before[0] == 2
    after_alter = next(r for r in rows if r.after is not None and r.after[0] == 3)
    assert values(ctx, after_alter)["extra"] == 33
    ids = [r.after[0] for r in rows if r.after is not None]
    assert 5 in ids  # rolled back to a savepoint, but emitted: no binlog.buffer.size
    zero = next(r for r in rows if r.after is not None and r.after[0] == 6)
    assert values(ctx, zero)["born"] is None  # nullable zero date
    ddl = [e for e in ctx.events if isinstance(e, SchemaChange)]
    assert any("ADD COLUMN extra" in e.ddl for e in ddl)
    assert isinstance(p.gtids, MariaDbGtidSet) and p.offset()["gtids"] == str(p.gtids)


def test_mariadb_recording_with_buffer_drops_the_rolled_back_row() -> None:
    ctx, st, _ = replay(MARIADB, st=new_state(binlog_buffer_size="100"))
    ids = [r.after[0] for r in ctx.rows() if r.after is not None]
    assert 4 in ids and 5 not in ids
    assert st.metrics.rolled_back_transactions == 1


def _header(packet: bytes) -> tuple[int, int]:
    """(event type, next position) from the OK byte + common header."""
    _ts, type_code, _server, _size, log_pos, _flags = struct.unpack("<IBIIIH", packet[1:20])
    return type_code, log_pos


def test_mariadb_resume_inside_the_bulk_transaction() -> None:
    ctx, _, _ = replay(MARIADB)
    rows = ctx.rows()
    bulk = [r for r in rows if r.source["gtid"] == rows[2].source["gtid"]]
    cut = bulk[400]
    seq = int(cut.source["gtid"].split("-")[2])
    packets = [bytes.fromhex(p) for p in MARIADB["packets"]]
    idx = next(
        i
        for i, pk in enumerate(packets)
        if _header(pk)[0] == MARIADB_GTID_EVENT and struct.unpack("<Q", pk[20:28])[0] == seq
    )
    st = new_state()
    st.schema.apply_ddl(
        "CREATE TABLE fx (id int PRIMARY KEY, name varchar(20), "
        "price decimal(10,2), born date, ts timestamp(3) NULL, "
        "tags set('a','b','c'), mood enum('x','y'), doc json, bits bit(4), "
        "f float, bn binary(4))",
        "fixture_db",
    )
    resume = Resume(None, 4, cut.offset["gtids"], cut.offset["event"], cut.offset["row"])
    ctx2, _, _ = replay(
        MARIADB,
        packets[:3] + packets[idx:],
        st=st,
        resume=resume,
        gtids=MariaDbGtidSet(cut.offset["gtids"]),
    )
    again = [r.after[0] for r in ctx2.rows() if r.source["gtid"] == cut.source["gtid"]]
    assert again == [r.after[0] for r in bulk[401:] if r.after is not None]


@pytest.mark.parametrize("mode", ["fail", "warn", "skip"])
def test_corrupt_row_event(mode: str) -> None:
    """AC-48 for undecodable events: fail names the position; warn/skip skip the event."""
    packets = [bytes.fromhex(p) for p in MARIADB["packets"]]
    first_rows = next(i for i, pk in enumerate(packets) if _header(pk)[0] in (WRITE_ROWS_V1, 30))
    bad = packets[first_rows]
    packets[first_rows] = bad[:-30] + bad[-4:]  # rows cut short, checksum kept
    st = new_state(event_deserialization_failure_handling_mode=mode)
    if mode == "fail":
        with pytest.raises(EventDeserializationFailed, match=r"mariadb-bin\.\d+:\d+"):
            replay(MARIADB, packets, st=st)
        return
    ctx, st, _ = replay(MARIADB, packets, st=st)
    inserted = [r.after[0] for r in ctx.rows() if r.after is not None and r.before is None]
    assert 1 not in inserted and 2 in inserted
    assert st.metrics.skipped_events == 1


# -- MySQL 8 (hand-built) -----------------------------------------------------------------


def test_mysql8_fixture_is_reproducible() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_mysql8", FIXTURES / "build_mysql8.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert [p.hex() for p in module.build()] == MYSQL8["packets"]


def test_mysql8_uuid_gtids_binary_json_and_partial_update() -> None:
    ctx, st, p = replay(MYSQL8)
    sid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    insert, update = ctx.rows()
    assert values(ctx, insert) == {"id": 1, "name": "first", "doc": '{"a": 1, "b": "x"}'}
    assert values(ctx, update, "before")["doc"] == '{"a": 1, "b": "x"}'
    assert values(ctx, update)["doc"] == '{"a": 2, "b": "x"}'  # the logged diff, applied
    assert insert.source["gtid"] == f"{sid}:2" and insert.source["file"] == "binlog.000007"
    assert insert.source["thread"] == 12 and insert.offset["gtids"] == f"{sid}:1"
    ends = [e for e in ctx.events if isinstance(e, TransactionEnd)]
    assert [e.offset["gtids"] for e in ends] == [f"{sid}:1-2", f"{sid}:1-3"]
    assert p.offset()["gtids"] == f"{sid}:1-3"
    table = st.schema.table(TableId("app", None, "docs"))
    assert table is not None and [c.type_name for c in table.columns] == ["INT", "VARCHAR", "JSON"]


def test_mysql_gtid_dump_request_encodes_the_restart_set() -> None:
    """COM_BINLOG_DUMP_GTID carries the GTID set as (sid, intervals [start, end+1))."""
    a, b = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "19d69c1e-ae97-4b8c-a1ef-9e12ba966457"
    written: list[bytes] = []
    st = new_state()
    reader = BinlogReader(
        st.cfg,
        6001,
        mariadb=False,
        gtids=f"{a}:1-3:7,{b}:5",
        use_gtids=True,
        connect=replay_factory([], server_version="8.0.36", written=written),
    )
    list(reader)
    request = written[-1]
    assert request[4] == 0x1E  # COM_BINLOG_DUMP_GTID
    flags, server_id, name_len = struct.unpack("<HII", request[5:15])
    assert server_id == 6001 and flags & 0x04  # BINLOG_THROUGH_GTID
    data = request[15 + name_len + 8 + 4 :]
    (n_sids,) = struct.unpack("<Q", data[:8])
    pos, decoded = 8, {}
    for _ in range(n_sids):
        sid = str(uuid.UUID(bytes=data[pos : pos + 16]))
        (n,) = struct.unpack("<Q", data[pos + 16 : pos + 24])
        pos += 24
        ranges = []
        for _ in range(n):
            start, stop = struct.unpack("<QQ", data[pos : pos + 16])
            ranges.append((start, stop - 1))
            pos += 16
        decoded[sid] = ranges
    assert decoded == {a: [(1, 3), (7, 7)], b: [(5, 5)]}


def test_binary_json_fixture_bytes_are_documented_format() -> None:
    """The insert's JSON column: small object (0x00), 2 members, inline int16, string by
    offset (json_binary.h)."""
    packets = [bytes.fromhex(p) for p in MYSQL8["packets"]]
    write = next(pk for pk in packets if _header(pk)[0] == 30)
    doc_start = write.index(b"first") + 5 + 4
    doc = write[doc_start:-4]
    assert doc[0] == 0x00 and struct.unpack("<HH", doc[1:5]) == (2, len(doc) - 1)
    assert base64.b64encode(doc).decode()  # printable for the docs
