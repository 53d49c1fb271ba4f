"""µs per event for envelope build + JSON conversion (key and value, schemas enabled) of a
10-column row, against the same work done with the standard library's ``json`` (baseline).

    .venv/bin/python -m bench.envelope_bench [--events N]

The tidemark path is the production one: the dispatcher builds the record (table schema row
functions, source block, envelope) and the JSON converter serialises key and value. The
baseline builds the same envelope dict and serialises it with ``json.dumps`` including the
schema document, as a straightforward implementation would.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import decimal
import json
import time
from typing import Any

from cdc.converters import converter_from_config
from cdc.filters import TableFilter
from cdc.metrics import TaskMetrics
from cdc.pipeline.dispatcher import EventDispatcher
from cdc.pipeline.failures import FailureHandler
from cdc.pipeline.queue import ChangeEventQueue
from cdc.record import SourceRecord
from cdc.schema.table_schema import TableSchemaBuilder
from cdc.spi import Column, Operation, RowChange, Table, TableId
from cdc.topics import TopicNamer
from connectors.postgres import types as t
from connectors.postgres.connector import SOURCE_SCHEMA
from connectors.postgres.types import Modes, PostgresValueConverters, TypeRegistry

COLUMNS = [
    ("id", t.INT4, -1),
    ("first_name", t.TEXT, -1),
    ("last_name", t.TEXT, -1),
    ("email", t.VARCHAR, 259),
    ("price", t.NUMERIC, (10 << 16 | 2) + 4),
    ("qty", t.INT8, -1),
    ("active", t.BOOL, -1),
    ("created", t.TIMESTAMP, -1),
    ("updated", t.TIMESTAMPTZ, -1),
    ("ratio", t.FLOAT8, -1),
]
ROW = (
    "42",
    "Anne",
    "Kretchmar",
    "annek@noanswer.org",
    "12.34",
    "1000",
    "t",
    "2018-06-20 15:13:16.945104",
    "2018-06-20 15:13:16.945104+00",
    "0.25",
)


def setup() -> tuple[EventDispatcher, ChangeEventQueue[SourceRecord], Table]:
    table = Table(
        TableId("inventory", "public", "customers"),
        tuple(
            Column(n, i, str(oid), native_type=oid, optional=i > 0, type_modifier=tm)
            for i, (n, oid, tm) in enumerate(COLUMNS)
        ),
        ("id",),
    )
    namer = TopicNamer("dbserver1")
    queue: ChangeEventQueue[SourceRecord] = ChangeEventQueue(1_000_000, 1000, 1000)
    metrics = TaskMetrics("postgres", "dbserver1", "bench")
    d = EventDispatcher(
        connector_type="postgresql",
        server_name="dbserver1",
        source_partition={"server": "dbserver1"},
        source_schema=SOURCE_SCHEMA,
        schema_builder=TableSchemaBuilder(PostgresValueConverters(TypeRegistry(Modes())), namer),
        table_filter=TableFilter(),
        queue=queue,
        metrics=metrics,
        namer=namer,
        failures=FailureHandler("fail", metrics),
    )
    d.register_table(table)
    return d, queue, table


def source(lsn: int) -> dict[str, Any]:
    return {
        "ts_ms": 1529507596945,
        "snapshot": False,
        "db": "inventory",
        "schema": "public",
        "table": "customers",
        "txId": 555,
        "lsn": lsn,
        "xmin": None,
    }


def run_tidemark(n: int) -> float:
    d, _queue, table = setup()
    ts = d.schemas[table.id]
    key_conv = converter_from_config({}, is_key=True)
    value_conv = converter_from_config({}, is_key=False)
    events = [
        RowChange(Operation.CREATE, table.id, None, ROW, source(i), {"lsn": i}) for i in range(n)
    ]
    t0 = time.perf_counter()
    for ev in events:
        for rec in d._row_records(ev, ts, "c"):
            key_conv.from_connect(rec.topic, rec.key_schema, rec.key, is_key=True)
            value_conv.from_connect(rec.topic, rec.value_schema, rec.value, is_key=False)
    return (time.perf_counter() - t0) / n * 1e6


def run_stdlib(n: int) -> float:
    """The same envelope and conversion, written plainly with the standard library."""
    d, _, table = setup()
    ts = d.schemas[table.id]
    conv = converter_from_config({}, is_key=False)
    [rec] = d._row_records(
        RowChange(Operation.CREATE, table.id, None, ROW, source(0), {"lsn": 0}), ts, "c"
    )
    key_schema_doc = json.loads(conv.from_connect("t", rec.key_schema, rec.key) or b"")["schema"]
    value_schema_doc = json.loads(conv.from_connect("t", rec.value_schema, rec.value) or b"")[
        "schema"
    ]

    def convert_row(row: tuple[str, ...]) -> dict[str, Any]:
        price = decimal.Decimal(row[4]).quantize(decimal.Decimal("0.01"))
        unscaled = int(price.scaleb(2))
        created = dt.datetime.fromisoformat(row[7])
        updated = dt.datetime.fromisoformat(row[8] + ":00")
        return {
            "id": int(row[0]),
            "first_name": row[1],
            "last_name": row[2],
            "email": row[3],
            "price": base64.b64encode(
                unscaled.to_bytes(8, "big", signed=True).lstrip(b"\0")
            ).decode(),
            "qty": int(row[5]),
            "active": row[6] == "t",
            "created": int((created - dt.datetime(1970, 1, 1)).total_seconds() * 1e6),
            "updated": updated.astimezone(dt.UTC).isoformat().replace("+00:00", "Z"),
            "ratio": float(row[9]),
        }

    t0 = time.perf_counter()
    for i in range(n):
        after = convert_row(ROW)
        value = {
            "before": None,
            "after": after,
            "source": {
                "version": "0.1.0",
                "connector": "postgresql",
                "name": "dbserver1",
                **source(i),
            },
            "op": "c",
            "ts_ms": int(time.time() * 1000),
        }
        json.dumps({"schema": key_schema_doc, "payload": {"id": after["id"]}}).encode()
        json.dumps({"schema": value_schema_doc, "payload": value}).encode()
    return (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    run_tidemark(1000), run_stdlib(1000)  # warm-up
    ours = min(run_tidemark(args.events) for _ in range(args.repeat))
    base = min(run_stdlib(args.events) for _ in range(args.repeat))
    print(f"events per run      : {args.events} (best of {args.repeat})")
    print(f"tidemark            : {ours:6.2f} µs/event  (target ≤ 10 µs)")
    print(f"stdlib json baseline: {base:6.2f} µs/event")
    print(f"ratio tidemark/baseline: {ours / base:.2f}x  (speed-up {base / ours:.1f}x)")


if __name__ == "__main__":
    main()
