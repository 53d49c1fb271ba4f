"""envelope.version: the seed's Debezium 1.2 shape (default) and Debezium 3.x's, schema and
value, through the real dispatcher and JSON converter (what a consumer reads)."""

from __future__ import annotations

import datetime
import json
import random
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from cdc.config import ConfigError
from cdc.converters import converter_from_config
from cdc.filters import TableFilter
from cdc.metrics import TaskMetrics
from cdc.pipeline.dispatcher import EventDispatcher
from cdc.pipeline.failures import FailureHandler
from cdc.pipeline.queue import ChangeEventQueue
from cdc.pipeline.snapshot_marks import SnapshotMarks
from cdc.record import SourceRecord
from cdc.schema.table_schema import TableSchemaBuilder
from cdc.snapshot.driver import TableScan
from cdc.spi import Column, Operation, PositionReached, RowChange, Table, TableId
from cdc.topics import TopicNamer
from connectors.mysql.connector import MySqlConnector
from connectors.postgres import types as t
from connectors.postgres.connector import (
    SOURCE_SCHEMA,
    SOURCE_SCHEMA_V3,
    PostgresConnector,
    source_derive_v3,
)
from connectors.postgres.types import Modes, PostgresValueConverters, TypeRegistry

TABLE = Table(
    TableId("inv", "public", "t"),
    (Column("id", 0, "int4", native_type=t.INT4, optional=False),),
    ("id",),
)
T2 = Table(TableId("inv", "public", "u"), TABLE.columns, ("id",))
T3 = Table(TableId("inv", "public", "v"), TABLE.columns, ("id",))
SOURCE = {
    "ts_ms": 1700000000123,
    "snapshot": False,
    "db": "inv",
    "schema": "public",
    "table": "t",
    "txId": 7,
    "lsn": 500,
    "xmin": None,
}
OFFSET = {"lsn": 500, "ts_usec": 1700000000123456, "flush_lsn": 400}
V3_FIELDS = ["before", "after", "source", "transaction", "op", "ts_ms", "ts_us", "ts_ns"]


def dispatcher(version: str) -> tuple[EventDispatcher, ChangeEventQueue[SourceRecord]]:
    namer = TopicNamer("srv")
    metrics = TaskMetrics("postgres", "srv", "t")
    queue: ChangeEventQueue[SourceRecord] = ChangeEventQueue(200, 100, 100)
    d = EventDispatcher(
        connector_type="postgresql",
        server_name="srv",
        source_partition={"server": "srv"},
        source_schema=SOURCE_SCHEMA_V3 if version == "3" else SOURCE_SCHEMA,
        schema_builder=TableSchemaBuilder(PostgresValueConverters(TypeRegistry(Modes())), namer),
        table_filter=TableFilter(),
        queue=queue,
        metrics=metrics,
        namer=namer,
        failures=FailureHandler("fail", metrics),
        envelope_version=version,
        source_derive=source_derive_v3 if version == "3" else None,
    )
    for table in (TABLE, T2, T3):
        d.register_table(table)
    return d, queue


def as_json(rec: SourceRecord) -> dict[str, Any]:
    conv = converter_from_config({}, is_key=False)
    return dict(json.loads(conv.from_connect(rec.topic, rec.value_schema, rec.value) or b""))


def fields(schema_doc: dict[str, Any]) -> list[str]:
    return [f["field"] for f in schema_doc["fields"]]


def emitted(queue: ChangeEventQueue[SourceRecord]) -> list[SourceRecord]:
    return [r for r in queue.poll(0) if r.topic]


def test_v3_schema_is_debezium_3s() -> None:
    d, queue = dispatcher("3")
    d.emit(RowChange(Operation.CREATE, TABLE.id, None, ("1",), SOURCE, OFFSET))
    doc = as_json(emitted(queue)[0])["schema"]
    assert doc["version"] == 2 and doc["name"] == "srv.public.t.Envelope"
    assert fields(doc) == V3_FIELDS
    by = {f["field"]: f for f in doc["fields"]}
    assert by["transaction"] == {
        "type": "struct",
        "fields": [
            {"type": "string", "optional": False, "field": "id"},
            {"type": "int64", "optional": False, "field": "total_order"},
            {"type": "int64", "optional": False, "field": "data_collection_order"},
        ],
        "optional": True,
        "name": "event.block",
        "version": 1,
        "field": "transaction",
    }
    source = by["source"]
    assert source["name"] == "io.debezium.connector.postgresql.Source"
    assert source["version"] == 1
    assert fields(source) == [
        "version",
        "connector",
        "name",
        "ts_ms",
        "snapshot",
        "db",
        "sequence",
        "ts_us",
        "ts_ns",
        "schema",
        "table",
        "txId",
        "lsn",
        "xmin",
        "origin",
        "origin_lsn",
    ]
    assert source["fields"][4] == {
        "type": "string",
        "optional": True,
        "name": "io.debezium.data.Enum",
        "version": 1,
        "parameters": {
            "allowed": "true,first,first_in_data_collection,last_in_data_collection,last,"
            "false,incremental"
        },
        "default": "false",
        "field": "snapshot",
    }


def test_v3_value_is_debezium_3s() -> None:
    d, queue = dispatcher("3")
    d.emit(RowChange(Operation.CREATE, TABLE.id, None, ("1",), SOURCE, OFFSET))
    payload = as_json(emitted(queue)[0])["payload"]
    assert list(payload) == V3_FIELDS
    assert payload["ts_us"] // 1000 == payload["ts_ms"]
    assert payload["ts_ns"] // 1000 == payload["ts_us"]
    assert payload["transaction"] is None
    source = payload["source"]
    source.pop("version")
    assert source == {
        "connector": "postgresql",
        "name": "srv",
        "ts_ms": 1700000000123,
        "snapshot": "false",
        "db": "inv",
        "sequence": '["400","500"]',
        "ts_us": 1700000000123456,
        "ts_ns": 1700000000123456000,
        "schema": "public",
        "table": "t",
        "txId": 7,
        "lsn": 500,
        "xmin": None,
        "origin": None,
        "origin_lsn": None,
    }


def test_v1_2_shape_is_unchanged_by_default() -> None:
    d, queue = dispatcher("1.2")
    d.emit(RowChange(Operation.CREATE, TABLE.id, None, ("1",), SOURCE, OFFSET))
    doc = as_json(emitted(queue)[0])
    assert "version" not in doc["schema"]
    assert fields(doc["schema"]) == ["before", "after", "source", "op", "ts_ms"]
    assert list(doc["payload"]) == ["before", "after", "source", "op", "ts_ms"]
    assert doc["payload"]["source"]["snapshot"] is False
    assert "sequence" not in doc["payload"]["source"]


def _snapshot_markers(
    d: EventDispatcher, queue: ChangeEventQueue[SourceRecord], rows: dict[Table, int]
) -> list[tuple[str, int, str]]:
    d.snapshot_started([t.id for t in rows])
    snap = {**SOURCE, "snapshot": True}
    for table, n in rows.items():
        for i in range(n):
            d.emit(RowChange(Operation.READ, table.id, None, (str(i),), snap, {"lsn": 9}))
        d.snapshot_table_completed(table.id, n)
    d.emit(PositionReached({"lsn": 8}))  # a position while the snapshot runs ends nothing
    d.snapshot_completed()
    d.emit(PositionReached({"lsn": 9}))
    return [
        (r.topic.rsplit(".", 1)[1], r.value["after"]["id"], r.value["source"]["snapshot"])
        for r in emitted(queue)
    ]


def test_v3_snapshot_markers_follow_debezium() -> None:
    d, queue = dispatcher("3")
    assert _snapshot_markers(d, queue, {TABLE: 3, T2: 1, T3: 2}) == [
        ("t", 0, "first"),
        ("t", 1, "true"),
        ("t", 2, "last_in_data_collection"),
        ("u", 0, "last_in_data_collection"),  # last wins over first in the table
        ("v", 0, "first_in_data_collection"),
        ("v", 1, "last"),
    ]


def test_v3_snapshot_ending_with_empty_tables_still_ends_with_last() -> None:
    d, queue = dispatcher("3")
    # An empty first table: no record is "first" (as in Debezium).
    assert _snapshot_markers(d, queue, {T3: 0, TABLE: 2, T2: 0}) == [
        ("t", 0, "first_in_data_collection"),
        ("t", 1, "last"),
    ]


def test_v1_2_snapshot_rows_keep_the_boolean() -> None:
    d, queue = dispatcher("1.2")
    assert [m for *_, m in _snapshot_markers(d, queue, {TABLE: 2})] == [True, True]


def test_v3_key_change_and_truncate_carry_the_v3_fields() -> None:
    d, queue = dispatcher("3")
    d.emit(RowChange(Operation.UPDATE, TABLE.id, ("1",), ("2",), SOURCE, OFFSET))
    delete, _tombstone, create = emitted(queue)
    assert (delete.value["op"], create.value["op"]) == ("d", "c")
    for rec in (delete, create):
        assert list(rec.value) == V3_FIELDS
    assert delete.value["after"] is None and create.value["before"] is None


def test_connectors_choose_the_shape_from_envelope_version() -> None:
    pg = {
        "name": "c",
        "topic.prefix": "srv",
        "database.hostname": "h",
        "database.user": "u",
        "database.dbname": "d",
    }
    assert PostgresConnector(pg).source_schema() is SOURCE_SCHEMA
    v3 = PostgresConnector({**pg, "envelope.version": 3})  # a YAML number is accepted
    assert v3.source_schema() is SOURCE_SCHEMA_V3 and v3.source_derive() is source_derive_v3
    with pytest.raises(ConfigError, match=r"envelope\.version"):
        PostgresConnector({**pg, "envelope.version": "2"})
    maria = {
        "name": "m",
        "topic.prefix": "srv",
        "database.hostname": "h",
        "database.user": "u",
        "database.server.id": "5",
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
    }
    assert MySqlConnector(maria).source_connector_name() == "mysql"
    m3 = MySqlConnector({**maria, "envelope.version": "3"})
    assert m3.source_connector_name() == "mariadb"
    assert m3.source_schema().name == "io.debezium.connector.mariadb.Source"
    assert MySqlConnector({**maria, "envelope.version": "3", "connector.class": "mysql"})
    assert m3.modes.envelope == "3"


def test_v3_zoned_timestamps_carry_the_columns_fraction_digits() -> None:
    from connectors.postgres.types import TIMESTAMPTZ, _temporal

    v3 = _temporal(TIMESTAMPTZ, -1, Modes(envelope="3"))
    v3_ms = _temporal(TIMESTAMPTZ, 3, Modes(envelope="3"))
    v1 = _temporal(TIMESTAMPTZ, -1, Modes())
    assert v3 is not None and v3_ms is not None and v1 is not None
    assert v3[1]("2024-02-29 11:45:59.1+00") == "2024-02-29T11:45:59.100000Z"
    assert v3[1]("1970-01-01 00:00:00+00") == "1970-01-01T00:00:00.000000Z"
    assert v3[1]("infinity") == "infinity"
    assert v3_ms[1]("2024-02-29 13:45:59.1+02") == "2024-02-29T11:45:59.100Z"
    assert v1[1]("2024-02-29 11:45:59.1+00") == "2024-02-29T11:45:59.1Z"


def test_v3_mysql_timestamp_fraction_has_the_columns_fsp() -> None:
    from connectors.mysql.types import Modes as MyModes
    from connectors.mysql.types import MySqlValueConverters

    table = Table(TableId("db", None, "t"), (), ())

    def resolve(type_name: str, length: int | None, envelope: str) -> Any:
        col = Column("c", 0, type_name, optional=True, length=length)
        return MySqlValueConverters(MyModes(envelope=envelope)).resolve(table, col)

    def convert(type_name: str, length: int | None, envelope: str, value: Any) -> Any:
        schema, fn = resolve(type_name, length, envelope)
        assert schema.name == "io.debezium.time.ZonedTimestamp"
        return fn(value)

    ts = datetime.datetime(2024, 2, 29, 13, 45, 59, 100000)
    assert convert("TIMESTAMP", 3, "3", ts) == "2024-02-29T13:45:59.100Z"
    assert convert("TIMESTAMP", 6, "3", ts.replace(microsecond=0)) == "2024-02-29T13:45:59.000000Z"
    assert convert("TIMESTAMP", None, "3", ts) == "2024-02-29T13:45:59.1Z"
    assert convert("TIMESTAMP", 3, "1.2", ts) == "2024-02-29T13:45:59.1Z"
    assert resolve("FLOAT", None, "3")[0].type == "float32"
    assert resolve("FLOAT", None, "1.2")[0].type == "float64"


def test_v3_snapshot_batches_shaped_once_give_the_same_records() -> None:
    """A snapshot batch's source block is shaped once by the driver under the 3.x envelope
    (the dispatcher offers ``shape_source``); records must equal those of a context that
    does not offer it (shaped per row by the dispatcher), markers included; so must those
    of a batch's rows emitted at once (``emit_rows``, one shared source block whose markers
    are copied per marked record, not written into the shared block)."""

    def run(offer_shape: bool, offer_rows: bool = False) -> list[tuple[Any, ...]]:
        d, queue = dispatcher("3")
        ctx = SimpleNamespace(
            emit_row=d.emit_row,
            snapshot_chunk_done=lambda: None,
            snapshot_progress=lambda *a: None,
            stop_event=threading.Event(),
        )
        if offer_shape:
            ctx.shape_source = d.shape_source
        if offer_rows:
            ctx.emit_rows = d.emit_rows
        d.snapshot_started([TABLE.id, T2.id])
        with d.batched(5):
            for table in (TABLE, T2):
                scan = TableScan(
                    table, {**SOURCE, "snapshot": True}, {"lsn": 9}, None, key_of=lambda r: [r[0]]
                )
                batches = ([("1",), ("2",), ("3",), ("4",), ("5",)], [("6",)], [("7",), ("8",)])
                for batch in batches:
                    scan.emit(ctx, batch)  # type: ignore[arg-type]
                d.snapshot_table_completed(table.id, scan.rows)
        d.snapshot_completed()
        d.emit(PositionReached({"lsn": 9}))
        return [
            (
                r.topic,
                r.key,
                r.value["after"],
                dict(r.value["source"]),
                r.source_offset,
                list(r.value),
                r.value["op"],
                r.value["ts_ns"] // 1000 == r.value["ts_us"],
            )
            for r in emitted(queue)
        ]

    shaped, plain, at_once = run(True), run(False), run(True, True)
    assert len(plain) == 16 and shaped == plain and at_once == plain
    assert plain[0][5] == V3_FIELDS and plain[0][6:] == ("r", True)
    assert [r[3]["snapshot"] for r in plain][:2] == ["first", "true"]
    assert plain[-1][3]["snapshot"] == "last"


def test_snapshot_marks_push_many_equals_push_per_record() -> None:
    """``push_many`` (a batch of one table at once) hands over the same records in the same
    order with the same markers as ``push`` per record, for batches of every size, tables
    interleaved, empty and non-empty ones, with shared and own source blocks."""
    rng = random.Random(18)
    plan = [(rng.choice([TABLE.id, T2.id, T3.id]), rng.randrange(0, 7)) for _ in range(60)]

    def run(at_once: bool) -> list[tuple[int, str]]:
        marks = SnapshotMarks([TABLE.id, T2.id, T3.id])
        out: list[SourceRecord] = []
        n = 0
        for table_id, size in plan:
            shared = {"snapshot": "true", "table": table_id.table}
            records = []
            for _ in range(size):
                source = shared if n % 5 else {"snapshot": "true", "own": n}
                records.append(
                    SourceRecord("t", None, None, None, {"source": source, "n": n}, {}, {})
                )
                n += 1
            if at_once:
                out += marks.push_many(table_id, records)
            else:
                for record in records:
                    out += marks.push(table_id, record)
        for table_id in (T2.id, TABLE.id):
            out += marks.table_completed(table_id)
        out += marks.finish()
        assert shared["snapshot"] == "true"  # a shared block is never written into
        return [(r.value["n"], r.value["source"]["snapshot"]) for r in out]

    want = run(False)
    assert sorted(n for n, _ in want) == list(range(sum(size for _, size in plan)))
    assert run(True) == want
    assert {m for _, m in want} == {
        "first",
        "true",
        "first_in_data_collection",
        "last_in_data_collection",
        "last",
    }


def test_v3_snapshot_batch_with_a_row_that_fails_goes_row_by_row() -> None:
    """A snapshot batch built at once falls back to row by row when a row cannot be
    converted: the failure is handled where the row was (here: warn and skip) and the
    records around it, markers included, equal those of one ``emit_row`` per row."""

    def run(at_once: bool) -> list[tuple[Any, ...]]:
        d, queue = dispatcher("3")
        d.failures = FailureHandler("warn", d.metrics)
        ts = d.schemas[TABLE.id]
        good = ts.value_from_row

        def explode(row: Any) -> Any:
            if row[0] == "3":
                raise ValueError("cannot decode value")
            return good(row)

        ts.value_from_row = explode  # type: ignore[method-assign]
        d.snapshot_started([TABLE.id])
        source = d.shape_source({**SOURCE, "snapshot": True}, OFFSET)  # type: ignore[misc]
        rows = [(str(i),) for i in range(1, 7)]
        with d.batched(100):
            if at_once:
                d.emit_rows(Operation.READ, TABLE.id, rows, source, OFFSET)
            else:
                for row in rows:
                    d.emit_row(Operation.READ, TABLE.id, None, row, source, OFFSET)
            d.snapshot_table_completed(TABLE.id, 6)
        d.snapshot_completed()
        d.emit(PositionReached(OFFSET))
        return [
            (r.key, r.value["after"], r.value["source"]["snapshot"], list(r.value))
            for r in emitted(queue)
        ]

    want = run(False)
    assert [k["id"] for k, *_ in want] == [1, 2, 4, 5, 6]
    assert [m for _, _, m, _ in want] == ["first", "true", "true", "true", "last"]
    assert run(True) == want


@pytest.mark.parametrize("mode", ["skip", "warn", "dead-letter"])
def test_v3_records_that_overtake_held_snapshot_rows_do_not_store_their_offset(
    mode: str,
) -> None:
    """The markers hold a table's latest row back; a heartbeat or a failed row's marker (or
    dead letter) went into the queue ahead of it with an offset counting it as read. Stored
    once acknowledged, then a crash: the held row was never sent and the resumed snapshot
    started after it."""
    d, queue = dispatcher("3")
    metrics = TaskMetrics("postgres", "srv", "t")
    d.failures = FailureHandler(mode, metrics, "dlq")
    d._heartbeat_s = 0.001
    d.snapshot_started([TABLE.id])
    snap = {**SOURCE, "snapshot": True}
    for i in range(6):
        value = "not a number" if i == 3 else str(i)
        d._next_heartbeat = 0.0  # a heartbeat is due after every row
        d.emit(RowChange(Operation.READ, TABLE.id, None, (value,), snap, {"after": i}))
    records = queue.poll(0)
    overtaking = [r for r in records if r.topic != "srv.public.t"]
    assert overtaking, "the test needs heartbeats and failure records"
    for n, record in enumerate(records):
        if record.continued or not record.source_offset:
            continue
        read = record.source_offset["after"]
        later_rows = [r for r in records[n + 1 :] if r.topic == "srv.public.t"]
        # a record whose offset may be stored comes after every row that offset counts
        assert all(r.source_offset["after"] > read for r in later_rows), (record, later_rows)
