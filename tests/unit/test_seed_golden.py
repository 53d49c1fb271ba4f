"""Byte-level agreement with the seed: the PostgreSQL create event of Debezium 1.2's user
guide (§3.3.2, the `customers` table) reproduced through the real dispatcher and converter."""

from __future__ import annotations

import json
from pathlib import Path

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

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "seed" / "pg_customers_create_event.json"


def test_postgres_create_event_matches_the_seed_example() -> None:
    seed = json.loads(SEED.read_text())
    table = Table(
        TableId("postgres", "inventory", "customers"),
        (
            Column("id", 0, "int4", native_type=t.INT4, optional=False),
            Column(
                "first_name", 1, "varchar", native_type=t.VARCHAR, optional=False, type_modifier=259
            ),
            Column(
                "last_name", 2, "varchar", native_type=t.VARCHAR, optional=False, type_modifier=259
            ),
            Column("email", 3, "varchar", native_type=t.VARCHAR, optional=False, type_modifier=259),
        ),
        ("id",),
    )
    namer = TopicNamer("PostgreSQL_server")
    metrics = TaskMetrics("postgres", "PostgreSQL_server", "seed")
    queue: ChangeEventQueue[SourceRecord] = ChangeEventQueue(10, 5, 10)
    d = EventDispatcher(
        connector_type="postgresql",
        server_name="PostgreSQL_server",
        source_partition={"server": "PostgreSQL_server"},
        source_schema=SOURCE_SCHEMA,
        schema_builder=TableSchemaBuilder(PostgresValueConverters(TypeRegistry(Modes())), namer),
        table_filter=TableFilter(),
        queue=queue,
        metrics=metrics,
        namer=namer,
        failures=FailureHandler("fail", metrics),
    )
    d.register_table(table)
    seed_source = seed["payload"]["source"]
    source = {k: v for k, v in seed_source.items() if k not in ("version", "connector", "name")}
    d.emit(
        RowChange(
            Operation.CREATE,
            table.id,
            None,
            ("1", "Anne", "Kretchmar", "annek@noanswer.org"),
            source,
            {"lsn": 24023128},
        )
    )
    [rec] = queue.poll(0)
    value = converter_from_config({}, is_key=False).from_connect(
        rec.topic, rec.value_schema, rec.value
    )
    ours = json.loads(value or b"")
    # The schema is identical, key order included.
    assert json.dumps(ours["schema"]) == json.dumps(seed["schema"])
    # The payload is identical but for our version string and our processing time.
    ours["payload"]["source"]["version"] = seed_source["version"]
    ours["payload"]["ts_ms"] = seed["payload"]["ts_ms"]
    assert json.dumps(ours["payload"]) == json.dumps(seed["payload"])
    key = json.loads(
        converter_from_config({}, is_key=True).from_connect(rec.topic, rec.key_schema, rec.key)
        or b""
    )
    assert key == {
        "schema": {
            "type": "struct",
            "fields": [{"type": "int32", "optional": False, "field": "id"}],
            "optional": False,
            "name": "PostgreSQL_server.inventory.customers.Key",
        },
        "payload": {"id": 1},
    }
