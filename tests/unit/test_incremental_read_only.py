"""Read-only watermarks (``read.only=true``): the core's window with a fake database whose
positions are log indexes, and the PostgreSQL and MySQL/MariaDB windows' rules (which
streamed transactions are older than a chunk read, and when the stream has passed it)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cdc.signals import model
from cdc.snapshot.incremental import IncrementalSnapshot, SignalledContext
from cdc.snapshot.incremental_state import SIGNAL_OFFSET
from connectors.mysql.chunks import MySqlReadWindow
from connectors.mysql.config import CONFIG_DEF as MYSQL_DEF
from connectors.mysql.gtid import parse_gtid_set
from connectors.postgres.chunks import PgReadWindow, PgSnapshot
from connectors.postgres.config import CONFIG_DEF as PG_DEF
from tests.unit.test_config_unknown_keys import PG_CONFIG
from tests.unit.test_incremental_snapshot import NOPK, FakeDb, Harness, K


class Window:
    """Positions are log indexes: the read saw entries up to ``low``; ``high`` had been
    committed when it ended."""

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high

    def older(self, source: Any, offset: Any, transaction_id: Any) -> bool:
        return bool(offset["pos"] <= self.low)

    def passed(self, source: Any, offset: Any, transaction_id: Any) -> bool:
        return bool(offset["pos"] >= self.high)


class ReadOnlyDb(FakeDb):
    """A :class:`FakeDb` that reads chunks without watermark rows."""

    def __init__(self, h: Harness) -> None:
        super().__init__()
        self.h = h
        self.written: list[str] = []
        #: how many reads see the database as it was this many entries ago (a commit not yet
        #: visible to the read)
        self.lagging_reads: list[int] = []
        self.low = 0

    def committed(self) -> int:
        return self.h.position + len(self.log)

    def write_watermark(self, signal_table: Any, signal_id: str, kind: str) -> None:
        self.written.append(kind)
        super().write_watermark(signal_table, signal_id, kind)

    def begin_chunk_read(self) -> None:
        self.low = self.committed() - (self.lagging_reads.pop(0) if self.lagging_reads else 0)

    def end_chunk_read(self) -> Window:
        return Window(self.low, self.committed())


def read_only_harness(chunk_size: int = 1024) -> tuple[Harness, ReadOnlyDb]:
    h = Harness()
    db = ReadOnlyDb(h)
    h.db = db
    h.inc = IncrementalSnapshot(
        h.d, db, name="t", signal_table=None, chunk_size=chunk_size, read_only=True
    )
    h.ctx = SignalledContext(h.d, h.inc)
    return h, db


def snapshot_signal() -> model.Signal:
    return model.parse("rest-1", "execute-snapshot", {"data-collections": ["db.k"]}, "rest")


def test_figure_2_with_the_stream_behind_the_read() -> None:
    """AC-74 read-only, the stream lagging: K1 inserted, K2 updated, K3 deleted before the
    read (the read sees them; only the insert was streamed yet); K4 deleted, K5 and K6
    inserted after it. The older changes streamed after the read do not drop reads, the newer
    ones do; the window closes after the last change the read's end had seen."""
    h, db = read_only_harness()
    for row in ((20, "K2"), (30, "K3"), (40, "K4")):
        db.rows[K.id][row[0]] = row
    db.insert((10, "K1"))
    db.update((20, "K2'"))
    db.delete(30)
    h.inc.submit(snapshot_signal())

    def after_the_read() -> None:
        db.delete(40)
        db.insert((35, "K5"))
        db.insert((60, "K6"))

    db.after_read.append(after_the_read)
    h.pump()
    assert " ".join(f"{op}{k}" for op, k in h.events()) == "c10 u20 d30 d40 c35 c60 r10 r20"
    assert db.written == [] and not h.inc.active


def test_idle_database_chunks_close_at_once_without_writes() -> None:
    """Nothing streamed after the read: the last event had passed the high watermark, so each
    chunk goes out at once, one after the other; a signal from another channel writes no
    wake-up row (it runs with the next event)."""
    h, db = read_only_harness(chunk_size=1)
    for key in (1, 2, 3):
        db.rows[K.id][key] = (key, f"v{key}")
    h.inc.submit(snapshot_signal())
    assert db.log == []  # no wake-up row
    db.insert((7, "x"), NOPK)
    h.pump()
    assert h.events() == [("r", 1), ("r", 2), ("r", 3)]
    assert len(db.queries) == 3 and db.written == [] and not h.inc.active


def test_reads_sent_at_once_carry_the_kafka_signals_position() -> None:
    """A Kafka signal whose reads go out before it returns (an idle database): their offsets
    already hold its topic position, so a restart after them does not run it again."""
    h, db = read_only_harness()
    db.rows[K.id][1] = (1, "v")
    h.inc.submit(replace(snapshot_signal(), position=5))
    db.insert((7, "x"), NOPK)
    h.pump()
    reads = [r for r in h.records if r.value is not None and r.value["op"] == "r"]
    assert [r.source_offset[SIGNAL_OFFSET] for r in reads] == [5]


def test_a_streamed_transaction_the_read_does_not_see_makes_it_read_again() -> None:
    """A change already streamed but not yet visible to the read (PostgreSQL writes the
    commit record before the transaction leaves the running set) would leave the read older
    than an event sent before it: the chunk is read again."""
    h, db = read_only_harness()
    db.rows[K.id][1] = (1, "old")
    h.inc.submit(snapshot_signal())
    db.lagging_reads.append(1)
    db.update((1, "new"))
    h.pump()
    assert h.events() == [("u", 1), ("r", 1)]
    assert len(db.queries) == 2


def test_read_only_config_rejects_the_source_channel() -> None:
    base = PG_CONFIG
    for cdef in (PG_DEF, MYSQL_DEF):
        assert "read.only" not in cdef.unsupported
        _, problems = cdef.validate({**base, "read.only": "true"})
        assert [k for k, _ in problems] == ["read.only"]
        assert "source" in problems[0][1] and "signal.enabled.channels" in problems[0][1]
        _, problems = cdef.validate(
            {**base, "read.only": "true", "signal.enabled.channels": "source,rest"}
        )
        assert [k for k, _ in problems] == ["read.only"]
        _, problems = cdef.validate(
            {**base, "read.only": "true", "signal.enabled.channels": "kafka,rest"}
        )
        assert not [k for k, _ in problems if k == "read.only"]


def test_postgres_window_by_snapshot_and_wal_position() -> None:
    low = PgSnapshot.parse("100:105:101,103")
    high = PgSnapshot.parse("104:110:107")
    w = PgReadWindow(low, high, high_lsn=5000)
    row = {"lsn": 10, "complete": False, "flush_lsn": 10}
    older = [x for x in (99, 100, 101, 102, 103, 104, 105) if w.older({}, {**row, "txId": x}, "")]
    assert older == [99, 100, 102, 104]  # ended before, or not running at the read
    passed = [x for x in (104, 106, 107, 110) if w.passed({}, {**row, "txId": x}, "")]
    assert passed == [107, 110]  # the high snapshot did not see them
    assert w.passed({}, {"lsn": 10, "flush_lsn": 5000, "txId": 104}, None)
    assert w.passed({}, {"lsn": 5001, "complete": True, "flush_lsn": 10, "txId": 1}, None)
    assert not w.passed({}, {"lsn": 5001, "complete": False, "flush_lsn": 10, "txId": 1}, None)
    assert w.older({}, {"lsn": 1}, None) is None  # no transaction: counts as newer


def test_postgres_32_bit_ids_from_the_stream_take_the_snapshots_epoch() -> None:
    epoch = 3 << 32
    snap = PgSnapshot(epoch + 10, epoch + 20, frozenset())
    assert snap.widen(15) == epoch + 15
    assert snap.widen(0xFFFFFFF0) == epoch - 16  # just before the wrap: previous epoch
    wrapped = PgSnapshot(epoch - 5, epoch + 5, frozenset())
    assert wrapped.visible(wrapped.widen(0xFFFFFFF0)) and not wrapped.visible(wrapped.widen(5))


def test_mariadb_window_by_gtid_positions() -> None:
    w = MySqlReadWindow(parse_gtid_set("0-1-10,1-1-5"), parse_gtid_set("0-1-13,1-1-5"))
    assert w.older({"gtid": "0-1-10"}, {}, None) and not w.older({"gtid": "0-1-11"}, {}, None)
    assert w.older({"gtid": None}, {}, None) is None
    assert not w.passed({}, {"gtids": "0-1-12,1-1-5"}, None)
    assert w.passed({}, {"gtids": "0-1-13,1-1-5"}, None)
    assert w.passed({}, {"gtids": "0-1-13"}, None)  # a domain the stream does not track


def test_mysql_window_by_gtid_sets() -> None:
    a, b = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4e11fa47-71ca-11e1-9e33-c80aa9429562"
    w = MySqlReadWindow(parse_gtid_set(f"{a}:1-10"), parse_gtid_set(f"{a}:1-12,{b}:1-3"))
    assert w.older({"gtid": f"{a}:7"}, {}, None) and not w.older({"gtid": f"{a}:11"}, {}, None)
    assert not w.passed({}, {"gtids": f"{a}:1-11,{b}:1-3"}, None)
    assert w.passed({}, {"gtids": f"{a}:1-12,{b}:1-3"}, None)
    assert w.passed({}, {"gtids": f"{a}:1-12"}, None)  # source b is not tracked (excluded)
