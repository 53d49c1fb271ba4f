"""Queue, offset writer, snapshot policies, filters, column mappers and the metrics exporter."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cdc.column_mappers import ColumnMappers, KeyColumns, java_serialized_string
from cdc.filters import ColumnFilter, TableFilter
from cdc.metrics import TaskMetrics, _Collector
from cdc.offsets.memory import MemoryOffsetStore
from cdc.offsets.writer import OffsetWriter
from cdc.pipeline.queue import ChangeEventQueue, QueueClosed
from cdc.snapshot_modes import MODES, WhenNeeded
from cdc.spi import Column, TableId


# -- queue ---------------------------------------------------------------------------------------
def test_queue_blocks_producer_when_full_and_batches_for_consumer() -> None:
    q: ChangeEventQueue[int] = ChangeEventQueue(max_size=5, max_batch_size=3, poll_interval_ms=50)
    done = threading.Event()

    def produce() -> None:
        for i in range(10):
            q.put(i)
        done.set()

    t = threading.Thread(target=produce)
    t.start()
    time.sleep(0.2)
    assert not done.is_set() and q.size == 5 and q.remaining_capacity == 0  # backpressure
    got: list[int] = []
    while len(got) < 10:
        batch = q.poll()
        assert len(batch) <= 3
        got.extend(batch)
    t.join(5)
    assert got == list(range(10)) and q.blocked_seconds > 0


def test_queue_put_many_keeps_order_and_the_exact_count_bound() -> None:
    q: ChangeEventQueue[int] = ChangeEventQueue(max_size=5, max_batch_size=3, poll_interval_ms=50)
    q.put(0)
    done = threading.Event()

    def produce() -> None:
        q.put_many([1, 2])
        q.put_many(list(range(3, 12)))  # more than fits: fills the room, then waits
        done.set()

    t = threading.Thread(target=produce)
    t.start()
    time.sleep(0.2)
    assert not done.is_set() and q.size == 5 and q.remaining_capacity == 0
    got: list[int] = []
    while len(got) < 12:
        batch = q.poll()
        assert len(batch) <= 3
        got.extend(batch)
    t.join(5)
    assert done.is_set() and got == list(range(12)) and q.blocked_seconds > 0
    sized: ChangeEventQueue[bytes] = ChangeEventQueue(100, 10, 50, max_bytes=10, size_of=len)
    sized.put_many([b"12", b"345"])
    assert sized.current_bytes == 5 and sized.poll() == [b"12", b"345"]
    assert sized.current_bytes == 0
    q.close()
    with pytest.raises(QueueClosed):
        q.put_many([1])


def test_queue_byte_bound_and_empty_poll_waits_at_most_the_interval() -> None:
    q: ChangeEventQueue[bytes] = ChangeEventQueue(100, 10, 50, max_bytes=10, size_of=len)
    q.put(b"12345678")
    blocked = threading.Event()

    def put_more() -> None:
        q.put(b"123")  # would exceed 10 bytes: blocks until the first item is taken
        blocked.set()

    t = threading.Thread(target=put_more)
    t.start()
    time.sleep(0.1)
    assert not blocked.is_set() and q.current_bytes == 8
    assert q.poll() == [b"12345678"]
    t.join(5)
    assert blocked.is_set() and q.poll() == [b"123"]
    t0 = time.monotonic()
    assert q.poll() == []
    assert time.monotonic() - t0 < 0.5


def test_queue_rejects_bad_sizes_and_reraises_source_errors_after_items() -> None:
    with pytest.raises(ValueError, match=r"larger than max\.batch\.size"):
        ChangeEventQueue(10, 10)
    q: ChangeEventQueue[int] = ChangeEventQueue(10, 5, 10)
    q.put(1)
    q.fail(RuntimeError("source broke"))
    assert q.poll() == [1]  # what came before the failure is delivered first
    with pytest.raises(RuntimeError, match="source broke"):
        q.poll()
    q.close()
    with pytest.raises(QueueClosed):
        q.put(2)


# -- offset writer -------------------------------------------------------------------------------
def test_offsets_stored_only_when_the_flush_leaves_nothing_outstanding() -> None:
    store = MemoryOffsetStore()
    told: list[dict[str, Any]] = []
    w = OffsetWriter(store, "c", {"server": "s"}, on_committed=told.append)
    assert w.commit(lambda t: 0, 1.0) is None  # nothing sent yet
    w.track({"pos": 1})
    assert w.commit(lambda t: 3, 1.0) is None  # Kafka has not acknowledged everything
    assert store.get("c", {"server": "s"}) is None and told == []
    assert w.commit(lambda t: 0, 1.0) == {"pos": 1}
    assert store.get("c", {"server": "s"}) == {"pos": 1} and told == [{"pos": 1}]
    assert w.commit(lambda t: 0, 1.0) is None  # unchanged: no second write


def test_offsets_not_stored_when_the_flush_reports_a_failure() -> None:
    store = MemoryOffsetStore()
    w = OffsetWriter(store, "c", {"server": "s"})
    w.track({"pos": 9})

    def failing_flush(timeout: float) -> int:
        raise RuntimeError("Kafka rejected a record")

    with pytest.raises(RuntimeError):
        w.commit(failing_flush, 1.0)
    assert store.get("c", {"server": "s"}) is None


# -- snapshot policies ---------------------------------------------------------------------------
def test_snapshot_modes() -> None:
    done = {"lsn": 5}
    unfinished = {"lsn": 5, "snapshot": True}
    assert MODES["initial"]().should_snapshot(None)
    assert MODES["initial"]().should_snapshot(unfinished)  # interrupted → start over
    assert not MODES["initial"]().should_snapshot(done)
    assert MODES["always"]().should_snapshot(done)
    assert not MODES["never"]().should_snapshot(None)
    assert not MODES["initial_only"]().should_stream()
    assert not MODES["no_data"]().include_data()
    assert WhenNeeded(lambda o: False).should_snapshot(done)
    assert not WhenNeeded(lambda o: True).should_snapshot(done)


# -- filters and column controls -----------------------------------------------------------------
def test_table_filter_levels_and_system_schemas() -> None:
    f = TableFilter(
        schema_include=["inventory"],
        table_exclude=[r"inventory\.audit.*"],
        system=frozenset({"pg_catalog"}),
    )
    assert f.is_included(TableId("db", "inventory", "customers"))
    assert not f.is_included(TableId("db", "inventory", "audit_log"))
    assert not f.is_included(TableId("db", "public", "customers"))
    system_only = TableFilter(system=frozenset({"pg_catalog"}))
    assert not system_only.is_included(TableId("db", "pg_catalog", "pg_class"))
    assert system_only.is_included(TableId("db", "public", "anything"))
    c = ColumnFilter(exclude=[r"inventory\.customers\.(ssn|dob)"])
    assert not c.is_included(TableId("db", "inventory", "customers"), "ssn")
    assert c.is_included(TableId("db", "inventory", "customers"), "name")


def test_column_mappers_as_the_seed_describes() -> None:
    """AC-67."""
    tid = TableId("db", "inventory", "customers")
    col = Column("name", 1, "varchar", length=64)
    for key, want in (
        ("column.truncate.to.5.chars", "Kretc"),
        ("column.mask.with.3.chars", "***"),
        ("column.mask.with.0.chars", ""),
    ):
        fn = ColumnMappers({key: r"inventory\.customers\.name"}).for_column(tid, col)
        assert fn is not None and fn("Kretchmar") == want
    hashed = ColumnMappers({"column.mask.hash.SHA-256.with.salt.X": r".*\.name"})
    fn = hashed.for_column(tid, Column("name", 1, "varchar", length=10))
    assert fn is not None and fn("Kretchmar") == fn("Kretchmar") != fn("Other")
    assert len(fn("Kretchmar")) == 10  # shortened to the column length
    bad = ColumnMappers(
        {
            "column.truncate.to.0.chars": "x",
            "column.mask.hash.NOPE.with.salt.s": "x",
            # misspelt or malformed: these left the column unmasked without a word
            "column.mask.with.12.char": "x",
            "column.mask.with.-1.chars": "x",
            "column.truncate.to.x.chars": "x",
            "column.mask.with.3.chars": "inventory.(customers",
            "column.include.list": "not a mapper",
        }
    )
    assert dict(bad.problems).keys() == {
        "column.truncate.to.0.chars",
        "column.mask.hash.NOPE.with.salt.s",
        "column.mask.with.12.char",
        "column.mask.with.-1.chars",
        "column.truncate.to.x.chars",
        "column.mask.with.3.chars",
    }
    assert "column.mask.with.<n>.chars" in dict(bad.problems)["column.mask.with.12.char"]
    assert "regular expression" in dict(bad.problems)["column.mask.with.3.chars"]


@pytest.mark.parametrize(
    ("key", "value", "want"),
    [
        # Debezium's own MaskStringsTest values, computed by the JVM: v1 (the default, and the
        # only form in 1.2) digests the Java-serialized string, v2 its bytes
        (
            "column.mask.hash.SHA-256.with.salt.salt",
            "hello",
            "af5843a0f0e728ab0332c8888b6e1190bfb79e584f0d40538de8f10df6ef29c6",
        ),
        ("column.mask.hash.MD5.with.salt.salt", "world", "030f632140d9c9591b0d8c21098024b8"),
        (
            "column.mask.hash.v2.SHA-256.with.salt.salt",
            "hello",
            "cd31b3b98ece60cb739c0bf770b2de892ae0ad133f645513c3d83f08757a843a",
        ),
        ("column.mask.hash.v2.MD5.with.salt.salt", "world", "172c8e95398cc72ab5358ead6981e7e5"),
    ],
)
def test_hash_pseudonyms_equal_debeziums(key: str, value: str, want: str) -> None:
    """A migrated pipeline must keep its pseudonyms: downstream joins use them."""
    fn = ColumnMappers({key: r".*\.name"}).for_column(
        TableId("db", "inventory", "customers"), Column("name", 1, "varchar")
    )
    assert fn is not None and fn(value) == want


def test_java_serialized_string_uses_modified_utf8() -> None:
    assert java_serialized_string("a\x00é😀") == (
        b"\xac\xed\x00\x05\x74\x00\x0b" + b"a\xc0\x80\xc3\xa9\xed\xa0\xbd\xed\xb8\x80"
    )
    long = java_serialized_string("x" * 70000)
    assert long[:13] == b"\xac\xed\x00\x05\x7c" + (70000).to_bytes(8, "big")


def test_message_key_columns() -> None:
    k = KeyColumns("inventory.orders:customer_id;inventory.items:a.*")
    assert k.for_table(TableId("db", "inventory", "orders"), ["id", "customer_id"]) == [
        "customer_id"
    ]
    assert k.for_table(TableId("db", "inventory", "items"), ["id", "ab", "ac"]) == ["ab", "ac"]
    assert k.for_table(TableId("db", "inventory", "other"), ["id"]) is None
    with pytest.raises(ValueError, match="must look like"):
        KeyColumns("nonsense")


# -- metrics -------------------------------------------------------------------------------------
def test_metrics_export_debezium_names_with_labels() -> None:
    collector = _Collector()
    registry = CollectorRegistry()
    registry.register(collector)
    m = TaskMetrics("postgres", "dbserver1", "inventory")
    m.snapshot.start(["inventory.customers"])
    m.snapshot.rows_scanned["inventory.customers"] = 42
    m.streaming.connected = True
    m.streaming.total_events_seen = 7
    collector.register(m)
    families = {
        f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())
    }
    seen = families["debezium_metrics_TotalNumberOfEventsSeen"].samples
    streaming = next(s for s in seen if s.labels["context"] == "streaming")
    assert streaming.value == 7
    assert streaming.labels == {
        "plugin": "postgres",
        "name": "dbserver1",
        "context": "streaming",
        "connector": "inventory",
        "task": "0",
    }
    assert families["debezium_metrics_SnapshotRunning"].samples[0].value == 1
    rows = families["debezium_metrics_RowsScanned"].samples[0]
    assert rows.value == 42 and rows.labels["table"] == "inventory.customers"
    assert families["debezium_metrics_Connected"].samples[0].value == 1


def test_metrics_contexts_and_text_attributes() -> None:
    """MySQL's streaming context is ``binlog``; HoldingGlobalLock is a snapshot attribute;
    text attributes (BinlogFilename) are exported as a value label."""
    collector = _Collector()
    registry = CollectorRegistry()
    registry.register(collector)
    m = TaskMetrics("mysql", "mysql-server-1", "inv")
    m.streaming_context = "binlog"
    m.extra["HoldingGlobalLock"] = lambda: 1.0
    m.extra_contexts["HoldingGlobalLock"] = "snapshot"
    m.extra_text["BinlogFilename"] = lambda: "mariadb-bin.000003"
    collector.register(m)
    families = {
        f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())
    }
    [lock] = families["debezium_metrics_HoldingGlobalLock"].samples
    assert lock.labels["context"] == "snapshot" and lock.value == 1
    [binlog] = families["debezium_metrics_BinlogFilename"].samples
    assert binlog.labels["context"] == "binlog" and binlog.labels["value"] == "mariadb-bin.000003"
    contexts = {s.labels["context"] for s in families["debezium_metrics_Connected"].samples}
    assert contexts == {"binlog"}


def test_source_event_position_and_last_transaction_id_are_exported() -> None:
    """Debezium's two text-valued streaming attributes, as labels of gauges of 1."""
    collector = _Collector()
    registry = CollectorRegistry()
    registry.register(collector)
    m = TaskMetrics("sqlserver", "srv", "inv")
    collector.register(m)
    text = generate_latest(registry).decode()
    assert "SourceEventPosition" not in text and "LastTransactionId" not in text  # none yet
    m.streaming.source_event_position = {"commit_lsn": "00000027:00000758:0005", "db": "inv"}
    m.streaming.last_transaction_id = "00000027:00000758:0003"
    families = {
        f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())
    }
    position = {
        s.labels["key"]: s.labels["value"]
        for s in families["debezium_metrics_SourceEventPosition"].samples
    }
    assert position == {"commit_lsn": "00000027:00000758:0005", "db": "inv"}
    [tx] = families["debezium_metrics_LastTransactionId"].samples
    assert tx.labels["value"] == "00000027:00000758:0003" and tx.labels["context"] == "streaming"
