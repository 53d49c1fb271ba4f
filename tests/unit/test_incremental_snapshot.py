"""The watermark algorithm of cdc.snapshot.incremental, with a fake database whose log the
test feeds to the context the way a streaming source would: the seed's figure with a read
dropped from the buffer, chunk bounds, offsets, resume, and the signal actions."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from cdc.errors import FatalError
from cdc.record import SourceRecord
from cdc.signals import model
from cdc.signals.model import SignalError
from cdc.signals.notifications import Notifier
from cdc.snapshot.incremental import IncrementalSnapshot, SignalledContext
from cdc.snapshot.incremental_state import SnapshotContext, decode_key, encode_key
from cdc.spi import Column, Operation, Table, TableId
from cdc.spi.chunks import Key
from tests.unit.test_dispatcher import drain, make_dispatcher

SIGNAL = Table(
    TableId("db", None, "dbz_signal"),
    (Column("id", 0, "text"), Column("type", 1, "text"), Column("data", 2, "text")),
)
K = Table(TableId("db", None, "k"), (Column("id", 0, "int"), Column("v", 1, "text")), ("id",))
NOPK = Table(TableId("db", None, "nopk"), (Column("a", 0, "int"), Column("b", 1, "text")))

Event = tuple[Operation, TableId, Any, Any]


class FakeDb:
    """Tables as dicts, a log of committed changes, and a ChunkReader over them."""

    def __init__(self) -> None:
        self.rows: dict[TableId, dict[int, tuple[Any, ...]]] = {K.id: {}, NOPK.id: {}}
        self.log: list[Event] = []
        self.queries: list[tuple[Key | None, Key]] = []
        self.after_open: list[Callable[[], None]] = []
        self.after_read: list[Callable[[], None]] = []

    def insert(self, row: tuple[Any, ...], table: Table = K) -> None:
        self.rows[table.id][row[0]] = row
        self.log.append((Operation.CREATE, table.id, None, row))

    def update(self, row: tuple[Any, ...]) -> None:
        before = self.rows[K.id][row[0]]
        self.rows[K.id][row[0]] = row
        self.log.append((Operation.UPDATE, K.id, before, row))

    def delete(self, key: int) -> None:
        before = self.rows[K.id].pop(key)
        self.log.append((Operation.DELETE, K.id, before, None))

    def signal(self, kind: str, data: Any, signal_id: str = "s1") -> None:
        text = data if isinstance(data, str) else json.dumps(data)
        self.log.append((Operation.CREATE, SIGNAL.id, None, (signal_id, kind, text)))

    # -- ChunkReader ----------------------------------------------------------------------------
    def tables(self) -> list[TableId]:
        return [SIGNAL.id, K.id, NOPK.id]

    def describe(self, table_id: TableId) -> Table | None:
        return None

    def max_key(
        self, table: Table, key_columns: Sequence[str], condition: str | None
    ) -> Key | None:
        if condition == "bad sql":
            raise RuntimeError("syntax error at or near bad")
        keys = sorted(self.rows[table.id])
        return (keys[-1],) if keys else None

    def read_chunk(
        self,
        table: Table,
        key_columns: Sequence[str],
        after: Key | None,
        upto: Key,
        limit: int,
        condition: str | None,
    ) -> list[Sequence[Any]]:
        self.queries.append((after, upto))
        keys = [k for k in sorted(self.rows[table.id]) if (after is None or k > after[0])]
        rows: list[Sequence[Any]] = [self.rows[table.id][k] for k in keys if k <= upto[0]]
        if self.after_read:
            self.after_read.pop(0)()
        return rows[:limit]

    def estimate_rows(self, table: Table) -> int | None:
        return len(self.rows[table.id])

    def write_watermark(self, signal_table: TableId, signal_id: str, kind: str) -> None:
        self.log.append((Operation.CREATE, signal_table, None, (signal_id, kind, None)))
        if kind == model.WINDOW_OPEN and self.after_open:
            self.after_open.pop(0)()

    def close(self) -> None:
        pass


class Harness:
    def __init__(
        self,
        chunk_size: int = 1024,
        offset: dict[str, Any] | None = None,
        rows: dict[int, tuple[Any, ...]] | None = None,
        notify: set[str] | None = None,
    ) -> None:
        self.d, self.queue, _ = make_dispatcher()
        for table in (SIGNAL, K, NOPK):
            self.d.register_table(table)
        self.db = FakeDb()
        self.db.rows[K.id].update(rows or {})
        notifier = Notifier(self.d, connector="t", channels=notify or set(), topic="t.notes")
        self.inc = IncrementalSnapshot(
            self.d,
            self.db,
            name="t",
            signal_table="db.dbz_signal",
            chunk_size=chunk_size,
            notifier=notifier,
        )
        self.ctx = SignalledContext(self.d, self.inc)
        self.inc.check_signal_table()
        self.inc.restore(offset)
        self.inc.start()
        self.position = 0
        self.records: list[SourceRecord] = []

    def pump(self) -> None:
        """Stream the log, as a connector would, until it is empty."""
        while self.db.log:
            op, tid, before, after = self.db.log.pop(0)
            self.position += 1
            source = {"ts_ms": 1, "db": "db", "table": tid.table, "pos": self.position}
            self.ctx.emit_row(op, tid, before, after, source, {"pos": self.position})
            self.records += drain(self.queue)

    def events(self, table: str = "k") -> list[tuple[str, Any]]:
        """``(op, first column)`` of each event of ``table``, tombstones left out."""
        return [
            (
                r.value["op"],
                (r.value["after"] or r.value["before"])[K.columns[0].name if table == "k" else "a"],
            )
            for r in self.records
            if r.topic.endswith("." + table) and r.value is not None
        ]


def test_figure_2_read_in_the_buffer_dropped_by_streamed_events() -> None:
    """AC-74 with K5 in the buffer, as the figure shows it: K2, K3, K4 exist; K1 inserted,
    K2 updated, K3 deleted before the window; the chunk holds K1, K2, K4 and K5 (inserted
    after the open watermark, below the maximum); K4 deleted and K6 inserted inside the
    window. Reads of K4 and K5 are dropped; K1 and K2 are read at the close."""
    h = Harness()
    for row in ((20, "K2"), (30, "K3"), (40, "K4")):
        h.db.rows[K.id][row[0]] = row
    h.db.insert((10, "K1"))
    h.db.update((20, "K2'"))
    h.db.delete(30)
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]})
    h.db.after_open.append(lambda: h.db.insert((35, "K5")))

    def inside_window() -> None:
        h.db.delete(40)
        h.db.insert((60, "K6"))

    h.db.after_read.append(inside_window)
    h.pump()
    assert h.events() == [
        ("c", 10),
        ("u", 20),
        ("d", 30),
        ("c", 35),
        ("d", 40),
        ("c", 60),
        ("r", 10),
        ("r", 20),
    ]
    assert h.db.queries == [(None, (40,))]
    assert not h.inc.active


def test_chunks_bounded_by_the_maximum_and_offsets_carry_the_context() -> None:
    """AC-73: 5 rows in chunks of 2 are 3 queries up to the maximum read at the start; a row
    above it arrives only by streaming; each read's offset names its own key, streamed
    events meanwhile carry the context, and offsets after the snapshot do not."""
    h = Harness(chunk_size=2)
    for i in range(1, 6):
        h.db.rows[K.id][i] = (i, f"v{i}")
    h.db.signal("execute-snapshot", {"data-collections": ["db\\.k"]})  # a regex
    h.db.after_read.append(lambda: h.db.insert((6, "late")))
    h.pump()
    assert h.db.queries == [(None, (5,)), ((2,), (5,)), ((4,), (5,))]
    assert sorted(k for op, k in h.events() if op == "r") == [1, 2, 3, 4, 5]
    assert [op for op, k in h.events() if k == 6] == ["c"]
    reads = [r for r in h.records if r.value is not None and r.value["op"] == "r"]
    assert [json.loads(r.source_offset["incremental_snapshot_primary_key"]) for r in reads] == [
        [1],
        [2],
        [3],
        [4],
        [5],
    ]
    assert all(r.source_offset["incremental_snapshot_maximum_key"] == "[5]" for r in reads)
    assert reads[0].value["source"]["table"] == "k"
    assert reads[0].value["source"]["snapshot"] is True
    late = next(r for r in h.records if r.value is not None and r.key == {"id": 6})
    assert "incremental_snapshot_collections" in late.source_offset
    h.db.insert((7, "after"))
    h.pump()
    assert "incremental_snapshot_collections" not in h.records[-1].source_offset


def test_resume_from_a_stored_context_starts_after_the_last_key() -> None:
    """AC-75: the offset's tables, maximum and last key are enough to go on."""
    stored = SnapshotContext(maximum_key=(5,), last_key=(3,), signal_id="s1")
    stored.collections.append(model.snapshot_request(_sig(["db.k"])).collections[0])
    rows = {i: (i, f"v{i}") for i in range(1, 7)}
    h = Harness(chunk_size=2, offset={"pos": 9, **stored.to_offset()}, rows=rows)
    h.pump()
    assert h.db.queries == [((3,), (5,))]
    assert h.events() == [("r", 4), ("r", 5)]
    assert not h.inc.active


def test_table_without_key_is_rejected_with_a_notice_and_a_surrogate_key_reads_it() -> None:
    """AC-76."""
    h = Harness()
    h.db.rows[NOPK.id] = {1: (1, "x"), 2: (2, "y")}
    h.db.signal("execute-snapshot", {"data-collections": ["db.nopk"]})
    h.pump()
    assert "no primary key" in h.d.metrics.notices[-1]
    assert h.events("nopk") == [] and not h.inc.active
    h.db.signal("execute-snapshot", {"data-collections": ["db.nopk"], "surrogate-key": "a"})
    h.pump()
    assert h.events("nopk") == [("r", 1), ("r", 2)]


def test_pause_resume_and_stop() -> None:
    """pause-snapshot holds the next chunk (streaming goes on), resume-snapshot reads it,
    stop-snapshot aborts the snapshot: its context leaves the offsets."""
    h = Harness(chunk_size=1)
    for i in range(1, 6):
        h.db.rows[K.id][i] = (i, "v")
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]})
    h.db.after_read.append(lambda: h.db.signal("pause-snapshot", None, "p"))
    h.pump()
    assert [k for op, k in h.events() if op == "r"] == [1]
    assert h.inc.active and h.inc.paused
    h.db.signal("resume-snapshot", None, "r")
    h.db.after_read += [lambda: None, lambda: h.db.signal("stop-snapshot", {}, "x")]
    h.pump()
    # the stop came inside the third chunk's window: its reads are dropped with it
    assert [k for op, k in h.events() if op == "r"] == [1, 2]
    assert not h.inc.active
    assert h.records[-1].source_offset.get("incremental_snapshot_collections") is None


@pytest.mark.parametrize(
    ("kind", "data", "reason"),
    [
        ("execute-snapshot", "{not json", "not JSON"),
        ("execute-snapshot", {"data-collections": "db.k"}, "must be a list"),
        ("execute-snapshot", {"data-collections": ["db.nothing"]}, "match no captured table"),
        ("execute-snapshot", {"data-collections": ["db.k"], "type": "full"}, "incremental or"),
        ("bogus", {}, "unknown signal type"),
    ],
)
def test_malformed_signals_are_skipped_with_the_reason(kind: str, data: Any, reason: str) -> None:
    h = Harness()
    h.db.rows[K.id][1] = (1, "v")
    h.db.signal(kind, data)
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]}, "good")
    h.pump()
    assert reason in h.d.metrics.notices[0]
    assert h.events() == [("r", 1)]


def test_signal_from_another_channel_runs_with_the_next_event() -> None:
    """A signal submitted by another thread (Kafka topic, REST) runs on the streaming thread
    when the source next reports an event."""
    h = Harness()
    h.db.rows[K.id][1] = (1, "v")
    h.inc.submit(model.parse("rest-1", "execute-snapshot", {"data-collections": ["db.k"]}, "rest"))
    h.db.insert((2, "w"))
    h.pump()
    assert h.events() == [("c", 2), ("r", 1), ("r", 2)]


def test_signal_table_must_be_captured() -> None:
    d, _, _ = make_dispatcher({"table.include.list": "db.customers"})
    inc = IncrementalSnapshot(d, FakeDb(), name="t", signal_table="db.dbz_signal")
    with pytest.raises(FatalError, match=r"table\.include\.list"):
        inc.check_signal_table()
    missing = IncrementalSnapshot(d, FakeDb(), name="t", signal_table="db.nothing")
    with pytest.raises(FatalError, match="no such table"):
        missing.check_signal_table()


def test_key_values_survive_the_offset() -> None:
    key = (1, "a", Decimal("1.50"), dt.datetime(2024, 1, 2, 3, 4, 5), dt.date(2024, 1, 2), b"\x00")
    assert decode_key(encode_key(key)) == key
    with pytest.raises(ValueError, match="not readable"):
        decode_key("[", "incremental_snapshot_primary_key")


def test_additional_conditions_both_spellings() -> None:
    new = model.snapshot_request(
        _sig(["a.b"], **{"additional-conditions": [{"data-collection": "a.b", "filter": "x>1"}]})
    )
    old = model.snapshot_request(_sig(["a.b"], **{"additional-condition": "x>1"}))
    assert new.collections[0].condition == old.collections[0].condition == "x>1"
    with pytest.raises(SignalError, match="data-collection"):
        model.snapshot_request(_sig(["a.b"], **{"additional-conditions": ["x>1"]}))


def _sig(names: list[str], **extra: Any) -> model.Signal:
    return model.parse("s", "execute-snapshot", {"data-collections": names, **extra})


def test_notifications_metrics_and_their_place_in_the_stream() -> None:
    """Progress notifications go to the sink topic in order with the events (a record's
    offset never runs ahead of records before it) and into the snapshot metrics."""
    h = Harness(chunk_size=2, rows={i: (i, "v") for i in range(1, 4)}, notify={"sink", "log"})
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]})
    h.pump()
    notes = [r for r in h.records if r.topic == "t.notes"]
    assert [n.value["type"] for n in notes] == [
        "STARTED",
        "IN_PROGRESS",
        "IN_PROGRESS",
        "TABLE_SCAN_COMPLETED",
        "COMPLETED",
    ]
    assert notes[1].value["additional_data"]["last_processed_key"] == "[2]"
    assert notes[3].value["additional_data"]["total_rows_scanned"] == "3"
    order = [r.topic for r in h.records if r.value is not None]
    first_read = next(i for i, r in enumerate(h.records) if r.value and r.value.get("op") == "r")
    assert order.index("t.notes") < first_read  # STARTED before the reads
    positions = [r.source_offset["pos"] for r in h.records]
    assert positions == sorted(positions)
    snap = h.d.metrics.snapshot
    assert snap.completed and snap.rows_scanned["db.k"] == 3 and snap.remaining_table_count == 0


def test_file_channel_reads_each_signal_once(tmp_path: Any) -> None:
    from cdc.signals.file_channel import FileSignalChannel

    path = tmp_path / "signals.txt"
    got: list[model.Signal] = []
    channel = FileSignalChannel(str(path), got.append, 1.0)
    assert channel.poll() == 0  # no file yet
    signals = (
        '{"id": "f1", "type": "execute-snapshot", "data": {"data-collections": ["db.k"]}}\n'
        '{"type": "pause-snapshot"}\n'
    )
    # a line that is not a signal: the file is left alone and none of it runs (unlike
    # Debezium, which empties any file; see cdc/signals/file_channel.py)
    path.write_text(signals + "not json\n")
    assert channel.poll() == 0 and got == [] and path.read_text().endswith("not json\n")
    path.write_text(signals)
    assert channel.poll() == 2
    assert [(s.id, s.type, s.channel) for s in got] == [
        ("f1", "execute-snapshot", "file"),
        ("file-2", "pause-snapshot", "file"),
    ]
    assert path.read_text() == "" and channel.poll() == 0


def test_a_failing_additional_condition_skips_the_table_not_the_connector() -> None:
    h = Harness(rows={1: (1, "v")})
    h.db.signal(
        "execute-snapshot", {"data-collections": ["db.k"], "additional-condition": "bad sql"}
    )
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]}, "good")
    h.pump()
    assert "additional condition 'bad sql' fails: syntax error" in h.d.metrics.notices[0]
    assert h.events() == [("r", 1)]


def test_progress_reaches_the_status_view() -> None:
    """What ``tidemark status`` and ``GET /connectors/{name}/status`` show while an
    incremental snapshot runs: the table, rows done and expected."""
    from worker.herder import task_progress

    h = Harness(chunk_size=2, rows={i: (i, "v") for i in range(1, 6)})
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]})
    h.db.after_read += [lambda: None, lambda: h.db.signal("pause-snapshot", None, "p")]
    h.pump()
    snap = task_progress(h.d.metrics)["snapshot"]
    assert snap["running"] and snap["remaining_tables"] == 1
    assert snap["tables"] == [{"table": "db.k", "rows": 4, "expected": 5}]


def test_blocking_snapshot_reads_while_the_stream_waits() -> None:
    """``type: blocking``: no watermarks; the chunks go downstream at once, and changes made
    meanwhile come after them from the stream, so the last event of each key is the row."""
    h = Harness(chunk_size=2, rows={i: (i, "v") for i in range(1, 6)})
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"], "type": "blocking"})
    h.db.after_read.append(lambda: h.db.update((1, "w")))
    h.pump()
    assert h.events() == [("r", 1), ("r", 2), ("r", 3), ("r", 4), ("r", 5), ("u", 1)]
    watermarks = [r for r in h.records if r.topic.endswith(".dbz_signal") and r.value["op"] == "c"]
    assert len(watermarks) == 1  # the signal itself, no window rows
    assert not h.inc.active and not h.inc.blocking
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]}, "incr")
    h.db.after_read.append(
        lambda: h.db.signal("execute-snapshot", {"data-collections": ["db.k"], "type": "blocking"})
    )
    h.pump()
    assert "cannot start while an incremental snapshot runs" in h.d.metrics.notices[-1]


def test_operators_offset_edits_keep_the_snapshot_context() -> None:
    """``PATCH /connectors/{name}/offsets`` with an offset read back during a snapshot."""
    from connectors.mysql.offsets import validate_offset as mysql_validate
    from connectors.postgres.offsets import validate_offset as pg_validate

    context = SnapshotContext(maximum_key=(5,), last_key=(3,), signal_id="s").to_offset()
    part = {"server": "s"}
    pg = {"lsn": 10, "lsn_commit": 10, "seq": 0, "complete": True, "flush_lsn": 10}
    assert pg_validate(part, {**pg, **context})[1] == []
    binlog = {"file": "mysql-bin.000003", "pos": 4, "event": 0, "row": 0, "ts_sec": 0}
    assert mysql_validate(part, {**binlog, "server_id": 1, **context})[1] == []
    assert (
        pg_validate(part, {**pg, "bogus": 1})[1] and mysql_validate(part, {**binlog, "bogus": 1})[1]
    )


def test_blocking_signal_from_a_channel_waits_for_a_row_event() -> None:
    """Its reads take a row event's source block: a blocking signal drained at a position
    event with no row event seen yet waits for the next row event."""
    from cdc.spi import PositionReached

    h = Harness(rows={1: (1, "v")})
    signal = {"data-collections": ["db.k"], "type": "blocking"}
    h.inc.submit(model.parse("b", "execute-snapshot", signal, "rest"), wake=False)
    h.ctx.emit(PositionReached({"pos": 0}))
    assert h.inc.pending and not h.inc.active
    h.db.insert((2, "w"))
    h.pump()
    assert h.events() == [("c", 2), ("r", 1), ("r", 2)]
    assert not h.inc.pending and not h.inc.active


def test_pause_and_type_survive_in_the_offset() -> None:
    """A paused snapshot stays paused after a restart (its offset says so) until
    resume-snapshot; a blocking one restarts blocking (no watermarks) once a row event came."""
    from cdc.snapshot.incremental_state import PAUSED, TYPE

    h = Harness(chunk_size=1, rows={i: (i, "v") for i in range(1, 4)})
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]})
    h.db.after_read.append(lambda: h.db.signal("pause-snapshot", None, "p"))
    h.pump()
    stored = h.records[-1].source_offset  # the wake-up row written after the pause
    assert stored[PAUSED] is True and stored[TYPE] == "INCREMENTAL"
    again = Harness(chunk_size=1, rows={i: (i, "v") for i in range(1, 4)}, offset=stored)
    again.db.insert((9, "x"))
    again.pump()
    assert again.inc.active and again.inc.paused and again.db.queries == []
    again.db.signal("resume-snapshot", None, "r")
    again.pump()
    assert [k for op, k in again.events() if op == "r"] == [2, 3]
    assert not again.inc.active

    ctx = SnapshotContext(maximum_key=(3,), last_key=(1,), signal_id="b", blocking=True)
    from cdc.snapshot.incremental_state import Collection

    ctx.collections = [Collection("db.k")]
    blocking = Harness(
        chunk_size=1, rows={i: (i, "v") for i in range(1, 4)}, offset={"pos": 0, **ctx.to_offset()}
    )
    assert blocking.inc.blocking and blocking.inc.waiting and blocking.db.queries == []
    blocking.pump()  # the wake-up row written at start: the reads follow it, no window rows
    assert [k for op, k in blocking.events() if op == "r"] == [2, 3]
    kinds = [r.value["after"]["type"] for r in blocking.records if r.topic.endswith("dbz_signal")]
    assert kinds == [model.WAKE]
    assert not blocking.inc.active


def test_offset_keys_read_back_and_bad_values_named() -> None:
    from cdc.snapshot.incremental_state import PAUSED, SIGNAL_OFFSET, TYPE, signal_offset

    ctx = SnapshotContext(maximum_key=(5,), paused=True, blocking=True)
    back = SnapshotContext.from_offset(
        {**ctx.to_offset(), "incremental_snapshot_collections": "[]"}
    )
    assert back is not None and back.paused and back.blocking
    assert signal_offset({SIGNAL_OFFSET: 41}) == 41 and signal_offset({}) is None
    for key, value in ((PAUSED, "maybe"), (TYPE, "sideways")):
        with pytest.raises(ValueError, match=key):
            SnapshotContext.from_offset({**ctx.to_offset(), key: value})
    with pytest.raises(ValueError, match=SIGNAL_OFFSET):
        signal_offset({SIGNAL_OFFSET: "x"})


def test_kafka_signal_position_kept_until_its_consumer_offset_is_committed() -> None:
    """A Kafka signal's position enters the offsets once it ran; a stored offset holding it
    tells the channel to commit; after the commit the key leaves the offsets. Read again
    after a restart, an execute-snapshot under way is not started twice."""
    from cdc.snapshot.incremental_state import SIGNAL_OFFSET

    h = Harness(chunk_size=2, rows={i: (i, "v") for i in range(1, 6)})
    durable: list[int] = []
    h.inc.on_signal_durable = durable.append
    signal = model.parse("go", "execute-snapshot", {"data-collections": ["db.k"]}, "kafka")
    h.inc.submit(replace(signal, position=7))
    h.db.after_read.append(lambda: None)
    h.pump()
    assert h.inc.signal_position == 7
    offsets = [r.source_offset for r in h.records if r.source_offset.get(SIGNAL_OFFSET) is not None]
    assert offsets and all(o[SIGNAL_OFFSET] == 7 for o in offsets)
    mid = next(o for o in offsets if o.get("incremental_snapshot_primary_key"))
    h.inc.stored(mid)
    assert durable == [7]
    # a restart from the stored offset mid-snapshot; the channel reads signal 7 again
    again = Harness(chunk_size=2, rows={i: (i, "v") for i in range(1, 6)}, offset=mid)
    assert again.inc.signal_position == 7
    again.inc.submit(replace(signal, position=7))
    again.pump()
    reads = [k for op, k in again.events() if op == "r"]
    assert reads == sorted(set(reads)) and 1 not in reads  # resumed, not started again
    assert again.d.metrics.notices == []
    assert not again.inc.active
    off = Harness(chunk_size=2, rows={i: (i, "v") for i in range(1, 6)}, offset=mid)
    off.inc.forget_signal_position()  # no Kafka channel any more
    assert SIGNAL_OFFSET not in (off.inc.extra or {}) and off.inc.active
    again.inc.signal_committed_at(7)
    again.db.insert((8, "x"))  # the streaming thread drops the key at this event
    again.db.insert((9, "x"))
    again.pump()
    assert SIGNAL_OFFSET not in again.records[-1].source_offset


def test_execute_snapshot_of_tables_under_way_is_no_error() -> None:
    """A second execute-snapshot (another id) for a table already being snapshotted, e.g. a
    signal read again after a restart, is logged, not reported as a bad signal."""
    h = Harness(chunk_size=2, rows={i: (i, "v") for i in range(1, 4)})
    data = {"data-collections": ["db.k"]}
    h.inc.submit(model.parse("a", "execute-snapshot", data, "kafka"), wake=False)
    h.inc.submit(model.parse("b", "execute-snapshot", data, "kafka"), wake=False)
    h.db.insert((9, "x"))
    h.pump()
    assert [k for op, k in h.events() if op == "r"] == [1, 2, 3, 9]  # once each
    assert h.d.metrics.notices == [] and not h.inc.active


def test_a_skipped_operation_does_not_take_the_chunk_row_of_its_key() -> None:
    """With skipped.operations=u an update inside the window is not emitted; it used to take
    the row read for its key out of the buffer all the same, so the row never reached the
    topic although it exists."""
    import tests.unit.test_incremental_snapshot as this

    original = this.make_dispatcher
    this.make_dispatcher = lambda: original({"skipped.operations": "u"})  # type: ignore[assignment,misc]
    try:
        h = Harness(rows={1: (1, "a"), 2: (2, "b")})
    finally:
        this.make_dispatcher = original
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]})
    h.db.after_read.append(lambda: h.db.update((1, "a2")))
    h.pump()
    assert sorted(h.events()) == [("r", 1), ("r", 2)]


def test_a_table_change_inside_the_window_reads_the_chunk_again() -> None:
    """A column dropped between a chunk's read and its close watermark: the rows read under
    the old layout went downstream under the new one, each value shifted into the next
    column's field (b got a's value), and nothing corrected them."""
    wide = Table(
        K.id, (Column("id", 0, "int"), Column("a", 1, "text"), Column("b", 2, "text")), ("id",)
    )
    narrow = Table(K.id, (Column("id", 0, "int"), Column("b", 1, "text")), ("id",))
    h = Harness()
    h.d.register_table(wide)
    h.db.rows[K.id].update({1: (1, "A1", "B1"), 2: (2, "A2", "B2")})
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"]})

    def drop_column_a() -> None:  # ALTER TABLE k DROP COLUMN a; UPDATE k SET b = 'B2x' ...
        h.db.rows[K.id] = {k: (r[0], r[2]) for k, r in h.db.rows[K.id].items()}
        h.db.log.append(("DDL", narrow.id, narrow, None))  # type: ignore[arg-type]
        h.db.update((2, "B2x"))

    h.db.after_read.append(drop_column_a)
    while h.db.log:
        op, tid, before, after = h.db.log.pop(0)
        h.position += 1
        if op == "DDL":
            h.ctx.register_table(before)  # what the stream does with the new relation
            continue
        source = {"ts_ms": 1, "db": "db", "table": tid.table, "pos": h.position}
        h.ctx.emit_row(op, tid, before, after, source, {"pos": h.position})
        h.records += drain(h.queue)
    last = {
        r.key["id"]: r.value["after"]
        for r in h.records
        if r.topic.endswith(".k") and r.value is not None
    }
    assert last == {1: {"id": 1, "b": "B1"}, 2: {"id": 2, "b": "B2x"}}


def _sql_chunks(db: FakeDb, collate: str = "BINARY") -> None:
    """The chunk queries as the databases run them (row-value comparison, ORDER BY the
    chunk key, LIMIT), in SQLite over the fake table, for keys that may repeat."""
    import sqlite3

    def rows_db(table: Table) -> sqlite3.Connection:
        c = sqlite3.connect(":memory:")
        c.execute(f"CREATE TABLE t (id INT PRIMARY KEY, v TEXT COLLATE {collate})")
        c.executemany("INSERT INTO t VALUES (?,?)", list(db.rows[table.id].values()))
        return c

    def max_key(table: Table, cols: Sequence[str], cond: str | None) -> Key | None:
        order = ",".join(c + " DESC" for c in cols)
        r = rows_db(table).execute(f"SELECT {','.join(cols)} FROM t ORDER BY {order}").fetchone()
        return tuple(r) if r else None

    def read_chunk(
        table: Table,
        cols: Sequence[str],
        after: Key | None,
        upto: Key,
        limit: int,
        cond: str | None,
    ) -> list[Sequence[Any]]:
        db.queries.append((after, upto))
        k, m = "(" + ",".join(cols) + ")", "(" + ",".join("?" * len(cols)) + ")"
        where, args = [f"{k} <= {m}"], list(upto)
        if after is not None:
            where, args = [f"{k} > {m}", *where], [*after, *upto]
        order = ",".join([*cols, "id"])
        sql = f"SELECT * FROM t WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ?"
        return [tuple(r) for r in rows_db(table).execute(sql, [*args, min(limit, 2**62)])]

    db.max_key, db.read_chunk = max_key, read_chunk  # type: ignore[method-assign]


@pytest.mark.parametrize("rows", [4, 5, 6])
def test_a_surrogate_key_that_repeats_past_a_chunk_loses_no_row(rows: int) -> None:
    """Chunks continue after the last key read: rows sharing it beyond the LIMIT were never
    read (ids 1-3 share 'a', chunks of 2: id 3 was skipped)."""
    h = Harness(chunk_size=2)
    _sql_chunks(h.db)
    values = ["a", "a", "a", "b", "b", "c"][:rows]
    h.db.rows[K.id].update({i + 1: (i + 1, v) for i, v in enumerate(values)})
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"], "surrogate-key": "v"})
    h.pump()
    assert sorted(k for op, k in h.events() if op == "r") == list(range(1, rows + 1))


def test_rows_of_a_table_without_key_that_share_the_surrogate_key_all_go() -> None:
    h = Harness(chunk_size=100)
    h.db.rows[NOPK.id] = {"r1": (1, "x"), "r2": (1, "y"), "r3": (2, "z")}  # type: ignore[dict-item]
    h.db.read_chunk = lambda table, cols, after, upto, limit, cond: sorted(  # type: ignore[method-assign]
        h.db.rows[table.id].values()
    )
    h.db.max_key = lambda table, cols, cond: (2,)  # type: ignore[method-assign]
    h.db.signal("execute-snapshot", {"data-collections": ["db.nopk"], "surrogate-key": "a"})
    h.pump()
    reads = [
        (r.value["after"]["a"], r.value["after"]["b"])
        for r in h.records
        if r.topic.endswith(".nopk") and r.value
    ]
    assert reads == [(1, "x"), (1, "y"), (2, "z")]


def test_a_repeating_key_is_compared_by_the_databases_collation() -> None:
    """Under a case-insensitive collation 'a' and 'A' are one key: telling them apart in
    Python left 'A' to a next chunk that starts after 'a', and skipped it."""
    h = Harness(chunk_size=2)
    _sql_chunks(h.db, "NOCASE")
    h.db.rows[K.id].update({1: (1, "a"), 2: (2, "A"), 3: (3, "b")})
    h.db.signal("execute-snapshot", {"data-collections": ["db.k"], "surrogate-key": "v"})
    h.pump()
    assert sorted(k for op, k in h.events() if op == "r") == [1, 2, 3]
