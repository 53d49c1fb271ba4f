"""One source event, several records: its offset is stored only with its last record.

A delete and its tombstone, a primary-key change (delete, tombstone, create), a truncate of
several tables (a record per table), a MySQL ``DROP TABLE`` of tables in several databases (a
schema change record per database) and a dead-letter record put before its event's own
records all share one source offset. Connectors read a stored offset as "this event was
delivered whole" (PostgreSQL skips the changes at or before it, MySQL counts the
transaction's row events and rows), and the queue cuts batches at ``max.batch.size``
wherever that falls. An offset stored after a batch that ends inside an event (at-least-once:
the flush-interval commit; exactly-once: the batch's transaction) followed by a crash lost
the rest of the event for good.

Each scenario runs the core's own parts (dispatcher, queue, delivery, offset writer, built
by ``assemble``) with a fake Kafka: a record is in Kafka once the producer is flushed
(at-least-once) or its transaction committed (exactly-once); a crash loses what was not. The
first run is killed after each batch in turn, right after the interval commit; the restart
resumes after the stored offset, as the connectors do. The user's check closes each
scenario: every topic applied in order (a truncate empties it) equals its table, a deleted
row's key ends with a tombstone (so compaction removes it), and the schema change topic has
the DROP of each database.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from cdc.assembly import EngineSettings, TaskParts, assemble
from cdc.offsets.memory import MemoryOffsetStore
from cdc.offsets.store import OffsetStore
from cdc.pipeline.reselect import RESELECT_CLASS, ReselectColumns, parse_settings
from cdc.spi import (
    UNAVAILABLE,
    Operation,
    RowChange,
    SchemaChange,
    SourceEvent,
    Table,
    TableTruncated,
    TransactionEnd,
)
from cdc.testing.memory import MemoryConnector, MemoryDatabase
from connectors.mysql.binlog import Resume
from tests.unit.fake_kafka import FakeKafkaOffsetStore, FakeSink, Kafka
from tests.unit.test_mysql_offsets import Binlog, run, state

DB = "event_offsets"
_db = MemoryDatabase(DB)
T = _db.create_table("t", [("id", "int"), ("v", "text")], ["id"])
U = _db.create_table("u", [("id", "int"), ("v", "text")], ["id"])
PLACEHOLDER = "__debezium_unavailable_value"
DLQ = "srv.dlq"

# -- the source: events at positions 1, 2, ...; a restart resumes after the stored one -------


def src(table: str, pos: int) -> dict[str, Any]:
    return {"ts_ms": 0, "snapshot": False, "db": DB, "table": table, "pos": pos, "txId": None}


def row(
    pos: int,
    op: Operation,
    table: Table,
    before: tuple[Any, ...] | None,
    after: tuple[Any, ...] | None,
    partial: bool = False,
) -> RowChange:
    return RowChange(
        op, table.id, before, after, src(table.id.table, pos), {"pos": pos}, None, partial
    )


def end(pos: int) -> TransactionEnd:
    return TransactionEnd(str(pos), src("", pos), {"pos": pos})


C, UPD, D = Operation.CREATE, Operation.UPDATE, Operation.DELETE


class Unserialisable:
    """A value the JSON converter cannot write: the record holding it fails in delivery."""


BAD = Unserialisable()


@dataclass
class Scenario:
    events: list[SourceEvent]
    #: each table's rows at the end (what its topic must converge to), by key
    tables: dict[str, dict[int, str]]
    config: dict[str, str] = field(default_factory=dict)
    #: set up the dispatcher (post processors, schema changes)
    setup: Callable[[TaskParts], None] = lambda p: None
    #: the databases whose DROP must be in the schema change topic
    dropped: set[str] = field(default_factory=set)


class DownReselector:
    """A reselect whose query always fails (the database went away)."""

    strict_placeholders = False

    def fetch(self, table: Any, key_columns: Any, keys: Any, columns: Any) -> Any:
        raise ConnectionError("server closed the connection")

    def close(self) -> None:
        pass


def reselect(p: TaskParts) -> None:
    settings, problems = parse_settings({"post.processors": "r", "r.type": RESELECT_CLASS})
    assert settings is not None and not problems
    d = p.dispatcher
    d.post_processor = ReselectColumns(settings, DownReselector(), d.failures, d.tables)


def schema_changes(p: TaskParts) -> None:
    p.dispatcher.include_schema_changes = True


def mysql_drop_events(pos: int) -> list[SchemaChange]:
    """What the MySQL binlog reader reports for ``DROP TABLE db.t, other.u``: one schema
    change per database, sharing the statement's offset (here replaced by ``{"pos": pos}``,
    the memory connector's)."""
    st = state()
    st.schema.apply_ddl("CREATE TABLE u (id int PRIMARY KEY)", "other")
    b = Binlog()
    ctx, _ = run(
        [b.gtid(standalone=True), b.query("DROP TABLE db.t, other.u")],
        st,
        Resume("mysql-bin.000003", 4, "0-1-10"),
    )
    changes = [e for e in ctx.events if isinstance(e, SchemaChange)]
    assert [c.database for c in changes] == ["db", "other"]
    assert changes[0].offset == changes[1].offset
    return [
        SchemaChange(
            c.database,
            None,
            c.ddl,
            [T.id],
            src("", pos),
            {"pos": pos},
            continued=c.continued,
        )
        for c in changes
    ]


SCENARIOS = {
    "primary key change, delete": Scenario(
        [
            row(1, C, T, None, (1, "a")),
            row(2, C, T, None, (2, "b")),
            row(3, UPD, T, (1, "a"), (10, "a")),  # key 1 -> 10: delete, tombstone, create
            end(4),
            row(5, D, T, (2, "b"), None),  # delete, tombstone
            row(6, C, T, None, (3, "c")),
        ],
        {"t": {10: "a", 3: "c"}},
    ),
    "truncate of two tables": Scenario(
        [
            row(1, C, T, None, (1, "a")),
            row(2, C, U, None, (1, "x")),
            row(3, C, U, None, (2, "y")),
            TableTruncated([T.id, U.id], src("", 4), {"pos": 4}),  # a record per table
            row(5, C, T, None, (2, "b")),
        ],
        {"t": {2: "b"}, "u": {}},
        {"skipped.operations": "none"},
    ),
    "drop of tables in two databases": Scenario(
        [
            row(1, C, T, None, (1, "a")),
            *mysql_drop_events(2),
            row(3, C, U, None, (1, "x")),
        ],
        {"t": {1: "a"}, "u": {1: "x"}},
        setup=schema_changes,
        dropped={"db", "other"},
    ),
    "primary key change whose delete Kafka cannot take, skipped": Scenario(
        [
            row(1, C, T, None, (1, "a")),
            row(2, UPD, T, (1, BAD), (10, "a")),  # the delete record fails to serialise
            row(3, C, T, None, (3, "c")),
        ],
        {"t": {10: "a", 3: "c"}},
        {"event.processing.failure.handling.mode": "skip"},
    ),
    "primary key change whose delete Kafka cannot take, dead-lettered": Scenario(
        [
            row(1, C, T, None, (1, "a")),
            row(2, UPD, T, (1, BAD), (10, "a")),
            row(3, C, T, None, (3, "c")),
        ],
        {"t": {10: "a", 3: "c"}},
        {
            "event.processing.failure.handling.mode": "dead-letter",
            "errors.deadletterqueue.topic.name": DLQ,
        },
    ),
    "reselect failure dead-lettered before its event": Scenario(
        [
            row(1, C, T, None, (1, "a")),
            row(2, UPD, T, (1, "a"), (1, UNAVAILABLE), partial=True),
            row(3, C, T, None, (3, "c")),
        ],
        {"t": {1: PLACEHOLDER, 3: "c"}},
        {
            "event.processing.failure.handling.mode": "dead-letter",
            "errors.deadletterqueue.topic.name": DLQ,
        },
        setup=reselect,
    ),
}


def parts(
    scenario: Scenario, store: OffsetStore, kafka: Kafka, **queue: str
) -> tuple[TaskParts, FakeSink]:
    raw = {
        "name": "c",
        "connector.class": "memory",
        "memory.database": DB,
        "database.server.name": "srv",
        "topic.prefix": "srv",
        "snapshot.mode": "never",
        **scenario.config,
        **queue,
    }
    conn = MemoryConnector(raw)
    sink = FakeSink(kafka, store)
    eos = isinstance(store, FakeKafkaOffsetStore)
    p = assemble(
        conn,
        conn.config,
        store,
        EngineSettings(producer={}, exactly_once=eos),
        sink=sink,  # type: ignore[arg-type]
    )
    for table in (T, U):
        p.dispatcher.register_table(table)
    scenario.setup(p)
    p.delivery.start()
    return p, sink


def stream(scenario: Scenario, p: TaskParts, store: OffsetStore) -> None:
    """The source: every event after the stored offset (the connectors' resume rule)."""
    stored = store.get("c", p.partition)
    after = -1 if stored is None else int(stored["pos"])
    for event in scenario.events:
        if int(event.offset["pos"]) > after:
            p.dispatcher.emit(event)


def killed_run(
    scenario: Scenario, store: OffsetStore, kafka: Kafka, batch_size: int, kill_after: int
) -> bool:
    """A task run whose queue hands out ``batch_size`` records at a time (as when more are
    queued), killed after batch ``kill_after``, right after its offsets were stored (the
    interval commit; exactly-once: the batch's transaction). False: it ended before."""
    p, _sink = parts(
        scenario, store, kafka, **{"max.batch.size": str(batch_size), "max.queue.size": "100"}
    )
    stream(scenario, p, store)
    batches = 0
    while batch := p.queue.poll(0):
        p.delivery.process(batch)
        p.delivery.commit()
        batches += 1
        if batches == kill_after:
            return True  # SIGKILL: what the producer still held is lost with the process
    return False


def restarted_run(scenario: Scenario, store: OffsetStore, kafka: Kafka) -> None:
    p, _sink = parts(scenario, store, kafka)
    stream(scenario, p, store)
    while batch := p.queue.poll(0):
        p.delivery.process(batch)
    p.delivery.commit()


def applied(kafka: Kafka, topic: str) -> dict[int, str]:
    """The topic applied in order, as the apply job does: a truncate empties the table, a
    delete or tombstone removes the key."""
    rows: dict[int, str] = {}
    for t, key, value in kafka:
        if t != topic:
            continue
        if value is None:
            rows.pop(json.loads(key)["payload"]["id"], None)
            continue
        payload = json.loads(value)["payload"]
        if payload["op"] == "t":
            rows.clear()
        elif payload["after"] is None:
            rows.pop(payload["before"]["id"], None)
        else:
            rows[payload["after"]["id"]] = payload["after"]["v"]
    return rows


def compacted_keys(kafka: Kafka, topic: str) -> set[int]:
    """The keys a compacted topic keeps: those whose last record is not a tombstone."""
    last: dict[int, Any] = {}
    for t, key, value in kafka:
        if t == topic and key is not None:
            last[json.loads(key)["payload"]["id"]] = value
    return {k for k, v in last.items() if v is not None}


def check(scenario: Scenario, kafka: Kafka) -> None:
    for name, rows in scenario.tables.items():
        topic = f"srv.{DB}.{name}"
        assert applied(kafka, topic) == rows, topic
        if "skipped.operations" not in scenario.config:  # no truncate: compaction alone
            assert compacted_keys(kafka, topic) == set(rows), topic
    if scenario.dropped:
        databases = {json.loads(k)["payload"]["databaseName"] for t, k, _ in kafka if t == "srv"}
        assert databases == scenario.dropped


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
@pytest.mark.parametrize("batch_size", [1, 2, 3])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_crash_after_any_batch_loses_no_part_of_an_event(
    name: str, batch_size: int, mode: str
) -> None:
    scenario = SCENARIOS[name]
    kill_after = 1
    while True:
        store: OffsetStore = (
            MemoryOffsetStore() if mode == "at-least-once" else (FakeKafkaOffsetStore())
        )
        kafka: Kafka = []
        killed = killed_run(scenario, store, kafka, batch_size, kill_after)
        restarted_run(scenario, store, kafka)
        check(scenario, kafka)
        if not killed:
            break
        kill_after += 1
    assert kill_after > 2  # the scenario spans several batches


def test_a_batch_ending_inside_an_event_stores_the_event_before() -> None:
    """The stored offsets themselves, batches of two records: create 1 | delete 1 (of the
    key change 1 -> 10) ... tombstone 1, create 10. After the first batch the create's
    position, not the key change's; after the second, the key change's. (Exactly-once sends
    the delete in the second transaction, with the rest of its event.)"""
    scenario = Scenario(
        [row(1, C, T, None, (1, "a")), row(2, UPD, T, (1, "a"), (10, "a"))],
        {"t": {10: "a"}},
    )
    for store in (MemoryOffsetStore(), FakeKafkaOffsetStore()):
        kafka: Kafka = []
        p, _ = parts(scenario, store, kafka, **{"max.batch.size": "2", "max.queue.size": "100"})
        stream(scenario, p, store)
        stored = []
        while batch := p.queue.poll(0):
            p.delivery.process(batch)
            p.delivery.commit()
            stored.append(store.get("c", p.partition))
        assert stored == [{"pos": 1}, {"pos": 2}], type(store).__name__
        check(scenario, kafka)


def test_mysql_drop_of_tables_in_two_databases_stores_its_offset_with_the_last_part() -> None:
    """The binlog reader marks every schema change of the statement but the last."""
    changes = mysql_drop_events(7)
    assert [c.continued for c in changes] == [True, False]


def test_dead_letter_records_skip_the_transforms() -> None:
    """As in Kafka Connect: a chain that drops every record (Kafka's Filter without a
    predicate) must not drop the dead-letter record, whose offset moves on all the same."""
    base = SCENARIOS["reselect failure dead-lettered before its event"]
    scenario = Scenario(
        base.events,
        base.tables,
        {
            **base.config,
            "transforms": "drop",
            "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
        },
        setup=base.setup,
    )
    store = MemoryOffsetStore()
    kafka: Kafka = []
    restarted_run(scenario, store, kafka)
    topics = [topic for topic, _, _ in kafka]
    assert topics == [DLQ], topics  # the data records were filtered, the dead letter was not
    assert store.get("c", {"server": "srv"}) is not None
