"""The dispatcher turns connector facts into Debezium records: envelope, keys, tombstones,
PK changes, transaction metadata, filters, column controls, failure modes."""

from __future__ import annotations

import contextlib
import hashlib
import logging
from typing import Any

import orjson
import pytest

from cdc.column_mappers import ColumnMappers, KeyColumns
from cdc.common_config import common_def
from cdc.errors import ConfigError, ConversionError
from cdc.filters import ColumnFilter, TableFilter
from cdc.metrics import TaskMetrics
from cdc.pipeline.dispatcher import EventDispatcher
from cdc.pipeline.failures import FailureHandler
from cdc.pipeline.queue import ChangeEventQueue
from cdc.record import SourceRecord
from cdc.schema.table_schema import TableSchemaBuilder
from cdc.spi import (
    UNAVAILABLE,
    Operation,
    PositionReached,
    RowChange,
    Table,
    TableId,
    TransactionBegin,
    TransactionEnd,
)
from cdc.testing.memory import SOURCE_SCHEMA, MemoryConverters, MemoryDatabase
from cdc.topics import TopicNamer


def make_dispatcher(
    raw: dict[str, Any] | None = None, failure_mode: str = "fail"
) -> tuple[EventDispatcher, ChangeEventQueue[SourceRecord], Table]:
    db = MemoryDatabase("db")
    table = db.create_table(
        "customers",
        [("id", "int"), ("first_name", "text"), ("last_name", "text"), ("email", "text")],
        ["id"],
    )
    raw = {"database.server.name": "dbserver1", **(raw or {})}
    cfg = common_def().parse(raw)
    namer = TopicNamer("dbserver1")
    builder = TableSchemaBuilder(
        MemoryConverters(),
        namer,
        column_filter=ColumnFilter(cfg["column.include.list"], cfg["column.exclude.list"]),
        mappers=ColumnMappers(raw),
        key_columns=KeyColumns(cfg.get("message.key.columns")),
    )
    queue: ChangeEventQueue[SourceRecord] = ChangeEventQueue(100, 10, 10)
    metrics = TaskMetrics("memory", "dbserver1", "test")
    d = EventDispatcher(
        connector_type="memory",
        server_name="dbserver1",
        source_partition={"server": "dbserver1"},
        source_schema=SOURCE_SCHEMA,
        schema_builder=builder,
        table_filter=TableFilter(
            table_include=cfg["table.include.list"], table_exclude=cfg["table.exclude.list"]
        ),
        queue=queue,
        metrics=metrics,
        namer=namer,
        failures=FailureHandler(
            failure_mode, metrics, cfg.get("errors.deadletterqueue.topic.name")
        ),
        tombstones_on_delete=cfg["tombstones.on.delete"],
        provide_transaction_metadata=cfg["provide.transaction.metadata"],
        skipped_operations=frozenset(cfg["skipped.operations"]),
    )
    d.register_table(table)
    return d, queue, table


def src(pos: int) -> dict[str, Any]:
    return {"ts_ms": 1, "snapshot": False, "db": "db", "table": "customers", "pos": pos, "txId": 7}


ROW1 = (1, "Anne", "Kretchmar", "annek@noanswer.org")
ROW1B = (1, "Anne Marie", "Kretchmar", "annek@noanswer.org")


def drain(q: ChangeEventQueue[SourceRecord]) -> list[SourceRecord]:
    out: list[SourceRecord] = []
    while batch := q.poll(0):
        out.extend(batch)
    return out


def test_create_event_has_debezium_envelope() -> None:
    d, q, t = make_dispatcher()
    d.emit(RowChange(Operation.CREATE, t.id, None, ROW1, src(1), {"pos": 1}))
    [rec] = drain(q)
    assert rec.topic == "dbserver1.db.customers"
    assert rec.key == {"id": 1}
    assert rec.key_schema is not None and rec.key_schema.name == "dbserver1.db.customers.Key"
    assert not rec.key_schema.optional
    assert rec.value_schema is not None
    assert rec.value_schema.name == "dbserver1.db.customers.Envelope"
    assert rec.value_schema.field_names() == ["before", "after", "source", "op", "ts_ms"]
    v = rec.value
    assert v["before"] is None
    assert v["after"] == {
        "id": 1,
        "first_name": "Anne",
        "last_name": "Kretchmar",
        "email": "annek@noanswer.org",
    }
    assert list(v["source"])[:5] == ["version", "connector", "name", "ts_ms", "snapshot"]
    assert v["source"]["connector"] == "memory" and v["source"]["name"] == "dbserver1"
    assert v["op"] == "c" and isinstance(v["ts_ms"], int)
    assert rec.source_offset == {"pos": 1} and rec.source_partition == {"server": "dbserver1"}


def test_delete_then_tombstone_unless_disabled() -> None:
    d, q, t = make_dispatcher()
    d.emit(RowChange(Operation.DELETE, t.id, ROW1, None, src(2), {"pos": 2}))
    delete, tomb = drain(q)
    assert delete.value["op"] == "d" and delete.value["before"]["id"] == 1
    assert delete.value["after"] is None
    assert tomb.key == {"id": 1} and tomb.value is None and tomb.value_schema is None

    d, q, t = make_dispatcher({"tombstones.on.delete": "false"})
    d.emit(RowChange(Operation.DELETE, t.id, ROW1, None, src(2), {"pos": 2}))
    assert [r.value["op"] for r in drain(q)] == ["d"]


def test_primary_key_change_is_delete_tombstone_create_with_headers() -> None:
    d, q, t = make_dispatcher()
    new = (2, *ROW1[1:])
    d.emit(RowChange(Operation.UPDATE, t.id, ROW1, new, src(3), {"pos": 3}))
    delete, tomb, create = drain(q)
    assert delete.key == {"id": 1} and delete.value["op"] == "d"
    assert dict(delete.headers)["__debezium.newkey"] == b'{"id":2}'
    assert tomb.key == {"id": 1} and tomb.value is None
    assert create.key == {"id": 2} and create.value["op"] == "c"
    assert create.value["after"]["id"] == 2
    assert dict(create.headers)["__debezium.oldkey"] == b'{"id":1}'


def test_plain_update_keeps_before_and_after() -> None:
    d, q, t = make_dispatcher()
    d.emit(RowChange(Operation.UPDATE, t.id, ROW1, ROW1B, src(3), {"pos": 3}))
    [rec] = drain(q)
    assert rec.value["op"] == "u"
    assert rec.value["before"]["first_name"] == "Anne"
    assert rec.value["after"]["first_name"] == "Anne Marie"


def test_transaction_metadata_orders_and_counts() -> None:
    d, q, t = make_dispatcher({"provide.transaction.metadata": "true"})
    d.emit(TransactionBegin("571", src(1), {"pos": 1}))
    d.emit(RowChange(Operation.CREATE, t.id, None, ROW1, src(2), {"pos": 2}, "571"))
    d.emit(RowChange(Operation.UPDATE, t.id, ROW1, ROW1B, src(3), {"pos": 3}, "571"))
    d.emit(TransactionEnd("571", src(4), {"pos": 4}))
    begin, c, u, end = drain(q)
    assert begin.topic == "dbserver1.transaction"
    assert begin.value["status"] == "BEGIN" and begin.value["event_count"] is None
    assert c.value["transaction"] == {"id": "571", "total_order": 1, "data_collection_order": 1}
    assert u.value["transaction"]["total_order"] == 2
    assert end.value["status"] == "END" and end.value["event_count"] == 2
    assert end.value["data_collections"] == [{"data_collection": t.id.identifier, "event_count": 2}]
    assert c.value_schema is not None and "transaction" in c.value_schema.field_names()


def test_filters_skip_tables_and_operations() -> None:
    d, q, t = make_dispatcher({"table.exclude.list": ".*customers"})
    d.emit(RowChange(Operation.CREATE, t.id, None, ROW1, src(1), {"pos": 1}))
    assert drain(q) == []
    assert d.metrics.streaming.events_filtered == 1

    d, q, t = make_dispatcher({"skipped.operations": "u,d"})
    d.emit(RowChange(Operation.UPDATE, t.id, ROW1, ROW1B, src(1), {"pos": 1}))
    d.emit(RowChange(Operation.CREATE, t.id, None, ROW1, src(2), {"pos": 2}))
    assert [r.value["op"] for r in drain(q)] == ["c"]


def test_column_exclusion_masking_truncation_and_hashing() -> None:
    d, q, t = make_dispatcher(
        {
            "column.exclude.list": r"db\.customers\.last_name",
            "column.truncate.to.3.chars": r"db\.customers\.first_name",
            "column.mask.with.5.chars": r"db\.customers\.email",
        }
    )
    d.emit(RowChange(Operation.CREATE, t.id, None, ROW1, src(1), {"pos": 1}))
    [rec] = drain(q)
    assert rec.value["after"] == {"id": 1, "first_name": "Ann", "email": "*****"}

    d, q, t = make_dispatcher({"column.mask.hash.v2.SHA-256.with.salt.CzQMA0cB5K": r".*\.email"})
    d.emit(RowChange(Operation.CREATE, t.id, None, ROW1, src(1), {"pos": 1}))
    [rec] = drain(q)
    want = hashlib.sha256(b"CzQMA0cB5K" + ROW1[3].encode()).hexdigest()
    assert rec.value["after"]["email"] == want


def test_message_key_columns_override_the_primary_key() -> None:
    d, q, t = make_dispatcher({"message.key.columns": r"db.customers:email"})
    d.emit(RowChange(Operation.CREATE, t.id, None, ROW1, src(1), {"pos": 1}))
    [rec] = drain(q)
    assert rec.key == {"email": "annek@noanswer.org"}


def test_unavailable_values_become_the_placeholder() -> None:
    d, q, t = make_dispatcher()
    row = (1, "Anne", UNAVAILABLE, "x")
    d.emit(RowChange(Operation.UPDATE, t.id, None, row, src(1), {"pos": 1}, partial=True))
    [rec] = drain(q)
    assert rec.value["after"]["last_name"] == "__debezium_unavailable_value"


def _explode_on_boom(d: EventDispatcher, t: Table) -> None:
    """A converter that blows up on one value (first_name "boom"), as a corrupt value would."""
    ts = d.schemas[t.id]
    good = ts.value_from_row

    def explode(row: Any) -> Any:
        if row[1] == "boom":
            raise ValueError("cannot decode value")
        return good(row)

    ts.value_from_row = explode


def _bad_row(d: EventDispatcher, t: Table) -> None:
    _explode_on_boom(d, t)
    d.emit(RowChange(Operation.CREATE, t.id, None, (9, "boom", "x", "y"), src(5), {"pos": 5}))


def test_failure_mode_fail_stops_at_the_event() -> None:
    d, q, t = make_dispatcher()
    with pytest.raises(ConversionError) as err:
        _bad_row(d, t)
    assert err.value.position == {"pos": 5}
    assert "{'pos': 5}" in str(err.value)
    assert drain(q) == []


def test_failure_modes_warn_skip_and_dead_letter(caplog: pytest.LogCaptureFixture) -> None:
    d, q, t = make_dispatcher(failure_mode="warn")
    with caplog.at_level(logging.WARNING, "tidemark.failures"):
        _bad_row(d, t)
    [marker] = drain(q)
    assert marker.is_marker and marker.source_offset == {"pos": 5}
    assert "{'pos': 5}" in caplog.text

    d, q, t = make_dispatcher(
        {
            "event.processing.failure.handling.mode": "dead-letter",
            "errors.deadletterqueue.topic.name": "dlq",
        },
        failure_mode="dead-letter",
    )
    d.failures.topic = "dlq"
    _bad_row(d, t)
    [dead] = drain(q)
    assert dead.topic == "dlq" and dead.raw and dead.source_offset == {"pos": 5}
    body = orjson.loads(dead.value)
    assert body["position"] == {"pos": 5} and "cannot decode value" in body["error"]
    assert body["event"]["after"] == [9, "boom", "x", "y"]


def test_a_source_built_with_the_prefix_gives_the_same_records() -> None:
    """A connector may put ``source_prefix`` in front of its row sources itself (PostgreSQL
    does, once per transaction): the records are the same as from a plain source, and an
    event handed to the dead-letter topic still carries the connector's source only."""
    plain, q1, t = make_dispatcher()
    plain.emit_row(Operation.CREATE, t.id, None, ROW1, src(1), {"pos": 1}, "7")
    built, q2, _ = make_dispatcher()
    assert built.source_prefix is not None
    built.emit_row(
        Operation.CREATE, t.id, None, ROW1, {**built.source_prefix, **src(1)}, {"pos": 1}, "7"
    )
    [a], [b] = drain(q1), drain(q2)
    a.value["ts_ms"] = b.value["ts_ms"] = 0
    assert orjson.dumps(b.value) == orjson.dumps(a.value)
    assert (b.key, b.topic, b.source_offset) == (a.key, a.topic, a.source_offset)

    d, q, t = make_dispatcher(
        {
            "event.processing.failure.handling.mode": "dead-letter",
            "errors.deadletterqueue.topic.name": "dlq",
        },
        failure_mode="dead-letter",
    )
    d.failures.topic = "dlq"
    ts = d.schemas[t.id]

    def explode(row: Any) -> Any:
        raise ValueError("cannot decode value")

    ts.value_from_row = explode
    assert d.source_prefix is not None
    d.emit_row(Operation.CREATE, t.id, None, ROW1, {**d.source_prefix, **src(5)}, {"pos": 5})
    [dead] = drain(q)
    assert orjson.loads(dead.value)["event"]["source"] == src(5)


def test_config_reports_every_problem_at_once() -> None:
    with pytest.raises(ConfigError) as err:
        common_def().parse(
            {
                "table.include.list": "a",
                "table.blacklist": "b",
                "max.queue.size": "ten",
                "event.processing.failure.handling.mode": "explode",
            }
        )
    keys = {k for k, _ in err.value.problems}
    assert keys == {
        "database.server.name",
        "table.blacklist",  # as the config names it
        "max.queue.size",
        "event.processing.failure.handling.mode",
    }


def test_old_and_new_filter_names_are_aliases() -> None:
    cfg = common_def().parse({"database.server.name": "s", "table.whitelist": "a.b"})
    assert cfg["table.include.list"] == ["a.b"]
    cfg = common_def().parse({"topic.prefix": "s"})
    assert cfg["database.server.name"] == "s"


def test_schema_names_are_sanitised() -> None:
    """Debezium's adjuster on ``<topic>.Value`` (checked on a JVM): the table's own ``.``
    stays, as in Debezium (tidemark wrote ``tab_le`` before)."""
    namer = TopicNamer("1-server")
    tid = TableId("my-db", None, "tab.le")
    assert namer.schema_name(tid, "Value") == "_1_server.my_db.tab.le.Value"
    unicode = TopicNamer("prod.db1", schema_name_mode="avro_unicode")
    assert unicode.schema_name(TableId("x", "public", "order_items"), "Key") == (
        "prod.db1.public.order_u005fitems.Key"
    )
    raw = TopicNamer("my-server", schema_name_mode="none")
    assert raw.schema_name(TableId("x", "dbo", "Order Details"), "Envelope") == (
        "my-server.dbo.Order_Details.Envelope"  # the topic's name, as Kafka takes it
    )


def test_schema_name_adjustment_mode_is_a_setting_not_an_unsupported_key() -> None:
    cfg = common_def().parse({"topic.prefix": "s", "schema.name.adjustment.mode": "AVRO_UNICODE"})
    assert cfg["schema.name.adjustment.mode"] == "avro_unicode"
    assert common_def().parse({"topic.prefix": "s"})["schema.name.adjustment.mode"] == "avro"
    assert "schema.name.adjustment.mode" not in common_def().unsupported
    with pytest.raises(ConfigError, match=r"schema\.name\.adjustment\.mode"):
        common_def().parse({"topic.prefix": "s", "schema.name.adjustment.mode": "avro2"})


def test_schema_change_record_uses_the_connector_namespace() -> None:
    """AC-45's shape: key {databaseName}, value {databaseName, schemaName, ddl, tableChanges,
    source}, named after the connector's namespace (io.debezium.connector.mysql.SchemaChangeValue
    for MySQL)."""
    from cdc.spi import SchemaChange

    d, q, t = make_dispatcher()
    d.include_schema_changes = True
    d.emit(SchemaChange("inventory", None, "ALTER TABLE t ADD c int", [t.id], src(9), {"pos": 9}))
    [rec] = drain(q)
    assert rec.topic == "dbserver1"
    assert rec.key == {"databaseName": "inventory"}
    assert rec.key_schema is not None and rec.value_schema is not None
    assert rec.key_schema.name == "io.tidemark.connector.memory.SchemaChangeKey"
    assert rec.value_schema.name == "io.tidemark.connector.memory.SchemaChangeValue"
    assert rec.value_schema.field_names() == [
        "databaseName",
        "schemaName",
        "ddl",
        "tableChanges",
        "source",
    ]
    assert rec.value["ddl"] == "ALTER TABLE t ADD c int"
    # an event without ``changes``: its tables count as ALTERed to their registered structure
    [change] = rec.value["tableChanges"]
    assert change["type"] == "ALTER" and change["id"] == '"db"."customers"'
    assert [c["name"] for c in change["table"]["columns"]] == [
        "id",
        "first_name",
        "last_name",
        "email",
    ]
    assert rec.value["source"]["pos"] == 9 and rec.value["source"]["connector"] == "memory"


def test_batched_hand_off_keeps_order_and_delivers_the_rest_on_exit_or_error() -> None:
    d, q, t = make_dispatcher()
    with d.batched(limit=4) as flush:
        d.emit(RowChange(Operation.CREATE, t.id, None, ROW1, src(1), {"pos": 1}))
        d.emit_row(Operation.DELETE, t.id, ROW1, None, src(2), {"pos": 2})  # + tombstone
        assert q.size == 0  # held until the limit or a flush
        d.emit(PositionReached({"pos": 3}))
        assert q.size == 4  # the limit was reached: everything so far went over at once
        d.emit_row(Operation.CREATE, t.id, None, ROW1B, src(4), {"pos": 4})
        d.emit_row(Operation.CREATE, t.id, None, ROW1, src(5), {"pos": 5})
        assert q.size == 4
        flush()
        assert q.size == 6
        d.emit_row(Operation.CREATE, t.id, None, ROW1, src(6), {"pos": 6})
    out = drain(q)
    assert [(r.source_offset["pos"], r.value is None, r.topic == "") for r in out] == [
        (1, False, False),
        (2, False, False),
        (2, True, False),
        (3, True, True),
        (4, False, False),
        (5, False, False),
        (6, False, False),
    ]
    assert out[1].value["op"] == "d" and out[4].value["after"]["first_name"] == "Anne Marie"
    with pytest.raises(RuntimeError, match="source broke"), d.batched() as _flush:
        d.emit_row(Operation.CREATE, t.id, None, ROW1, src(7), {"pos": 7})
        raise RuntimeError("source broke")
    assert [r.source_offset["pos"] for r in drain(q)] == [7]  # emitted before the failure
    d.emit_row(Operation.CREATE, t.id, None, ROW1, src(8), {"pos": 8})  # unbuffered again
    assert q.size == 1


def test_emit_row_equals_emit_of_a_row_change_and_reports_the_event_on_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    d1, q1, t = make_dispatcher()
    d2, q2, _ = make_dispatcher()
    d1.emit(RowChange(Operation.UPDATE, t.id, ROW1, ROW1B, src(1), {"pos": 1}, "7"))
    d2.emit_row(Operation.UPDATE, t.id, ROW1, ROW1B, src(1), {"pos": 1}, "7")
    [a], [b] = drain(q1), drain(q2)
    a.value["ts_ms"] = b.value["ts_ms"] = 0
    assert a == b
    d3, q3, _ = make_dispatcher(failure_mode="warn")
    ts = d3.schemas[t.id]

    def explode(row: Any) -> Any:
        raise ValueError("cannot decode value")

    ts.value_from_row = explode
    with caplog.at_level(logging.WARNING, "tidemark.failures"):
        d3.emit_row(Operation.CREATE, t.id, None, ROW1, src(2), {"pos": 2}, "7")
    [marker] = drain(q3)  # skipped: only its position moves on
    assert marker.is_marker and marker.source_offset == {"pos": 2}
    assert "'transaction_id': '7'" in caplog.text  # the event, rebuilt for the report


def test_emit_rows_equals_emit_row_per_row_with_failures_in_order() -> None:
    """A snapshot batch emitted at once: the same records, in the same order, as row by row,
    including a row that cannot be converted (dead-lettered where it was) and a hand-off
    limit crossed in the middle; outside ``batched`` and for a filtered table it falls back
    to ``emit_row``."""
    rows = [(i, "boom" if i == 3 else f"n{i}", "x", "y") for i in range(1, 8)]
    dlq = {
        "event.processing.failure.handling.mode": "dead-letter",
        "errors.deadletterqueue.topic.name": "dlq",
    }

    def run(at_once: bool, batched: bool) -> list[tuple[Any, ...]]:
        d, q, t = make_dispatcher(dlq, failure_mode="dead-letter")
        d.failures.topic = "dlq"
        _explode_on_boom(d, t)
        with contextlib.ExitStack() as stack:
            if batched:
                stack.enter_context(d.batched(limit=3))
            if at_once:
                d.emit_rows(Operation.READ, t.id, rows, src(5), {"pos": 5})
            else:
                for row in rows:
                    d.emit_row(Operation.READ, t.id, None, row, src(5), {"pos": 5})
        out = []
        for r in drain(q):
            value = r.value
            if isinstance(value, dict):
                value = {**value, "ts_ms": 0}
            else:
                body = orjson.loads(value)
                value = (body["event"]["after"], body["position"])
            out.append((r.topic, r.key, value, r.source_offset))
        assert d.metrics.streaming.total_events_seen == 6
        return out

    want = run(at_once=False, batched=True)
    assert [r[0] for r in want] == ["dbserver1.db.customers"] * 2 + ["dlq"] + [
        "dbserver1.db.customers"
    ] * 4
    assert want[2][2] == ([3, "boom", "x", "y"], {"pos": 5})
    assert run(at_once=True, batched=True) == want
    assert run(at_once=True, batched=False) == want

    d, q, t = make_dispatcher({"table.exclude.list": "db.customers"})
    with d.batched():
        d.emit_rows(Operation.READ, t.id, rows, src(5), {"pos": 5})
    assert drain(q) == []


def test_heartbeat_action_runs_only_while_streaming() -> None:
    """As Debezium: during a snapshot the action would run on the snapshot's thread, and a
    write to a table the snapshot locks would wait for the snapshot to end (a hang)."""
    d, q, _ = make_dispatcher()
    ran: list[str] = []
    d._heartbeat_s = 0.001
    d._heartbeat_action = lambda: ran.append(d.phase.__class__.__name__)
    d.phase = d.metrics.snapshot
    d._next_heartbeat = 0.0
    d.emit(PositionReached({"pos": 1}))
    assert ran == []
    heartbeats = [r for r in drain(q) if r.topic.startswith("__debezium-heartbeat")]
    assert len(heartbeats) == 1  # the heartbeat record itself still goes out
    d.phase = d.metrics.streaming
    d._next_heartbeat = 0.0
    d.emit(PositionReached({"pos": 2}))
    assert len(ran) == 1


def test_a_table_name_that_is_no_python_identifier_still_gets_its_row_functions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The generated row functions are named after the table: a name such as ``prix_¼``
    (alphanumeric to ``str.isalnum``, yet no identifier character) must not break them."""
    from cdc.schema import table_schema

    monkeypatch.setattr(table_schema, "_native_row_fn", lambda cols: None)  # generated code
    db = MemoryDatabase("db")
    table = db.create_table("prix_¼", [("id", "int"), ("note", "text")], ["id"])
    builder = TableSchemaBuilder(MemoryConverters(), TopicNamer("dbserver1"))
    schema = builder.build(table)
    assert schema.value_from_row((1, "a")) == {"id": 1, "note": "a"}
    assert schema.key_from_row((1, "a")) == {"id": 1}
