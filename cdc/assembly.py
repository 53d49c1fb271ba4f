"""Wiring one connector task: the composition root.

:func:`assemble` builds every part a task runs with (metrics, queue, dispatcher, failure
handler, transforms, converters, sink, offset writer and the delivery mode) from the
connector, its configuration and the worker's settings. The engine only runs them, so a test
or an embedding application can hand it a different sink, and nothing in the run loop decides
how a part is built.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cdc.column_mappers import ColumnMappers, KeyColumns
from cdc.config import Config
from cdc.converters import Converter, converter_from_config
from cdc.errors import ConfigError
from cdc.filters import ColumnFilter, TableFilter
from cdc.metrics import TaskMetrics
from cdc.offsets.kafka import KafkaOffsetStore
from cdc.offsets.store import OffsetStore
from cdc.offsets.writer import OffsetWriter
from cdc.pipeline import reselect
from cdc.pipeline.delivery import AtLeastOnceDelivery, Delivery, ExactlyOnceDelivery
from cdc.pipeline.dispatcher import EventDispatcher
from cdc.pipeline.failures import FailureHandler
from cdc.pipeline.queue import ChangeEventQueue
from cdc.record import SourceRecord
from cdc.schema.table_schema import TableSchemaBuilder
from cdc.sinks.kafka import KafkaSink
from cdc.spi import Connector
from cdc.topics import TopicNamer, unicode_field_name
from cdc.transforms import TransformChain, build_chain


@dataclass
class EngineSettings:
    """Worker-level settings for one task (the connector's own keys live in its config)."""

    producer: dict[str, Any]
    offset_flush_interval_ms: int = 5000
    offset_flush_timeout_ms: int = 5000
    exactly_once: bool = False
    transactional_id: str | None = None
    shutdown_timeout_ms: int = 30000
    task_id: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    #: the worker's own topics (offsets, configs, status, assignments): a connector's
    #: records may not go there, whatever a transform routes them to
    reserved_topics: frozenset[str] = frozenset()


@dataclass
class TaskParts:
    """Everything one task runs with, built by :func:`assemble`."""

    name: str
    server: str
    partition: dict[str, Any]
    metrics: TaskMetrics
    queue: ChangeEventQueue[SourceRecord]
    failures: FailureHandler
    dispatcher: EventDispatcher
    transforms: TransformChain
    key_converter: Converter
    value_converter: Converter
    sink: KafkaSink
    writer: OffsetWriter
    delivery: Delivery
    #: set when the task is asked to stop (the source stops, the send loop drains)
    stopping: threading.Event


def assemble(
    connector: Connector,
    config: Config,
    store: OffsetStore,
    settings: EngineSettings,
    *,
    sink: KafkaSink | None = None,
) -> TaskParts:
    """Build one task's parts; ``sink`` defaults to a Kafka producer from ``settings``."""
    name = str(config.get("name") or config["database.server.name"])
    server = str(config["database.server.name"])
    partition = connector.source_partition()
    if settings.exactly_once and not isinstance(store, KafkaOffsetStore):
        raise ConfigError(
            [
                (
                    "exactly.once.source.support",
                    "requires the Kafka offset store (offset.storage=kafka)",
                )
            ]
        )
    metrics = TaskMetrics(
        plugin=_plugin_name(connector.type_name),
        server=server,
        connector=name,
        task=settings.task_id,
    )
    queue: ChangeEventQueue[SourceRecord] = ChangeEventQueue(
        max_size=config["max.queue.size"],
        max_batch_size=config["max.batch.size"],
        poll_interval_ms=config["poll.interval.ms"],
        max_bytes=config["max.queue.size.in.bytes"],
        size_of=_approx_size,
    )
    metrics.queue = queue
    raw = config.raw
    failures = FailureHandler(
        config["event.processing.failure.handling.mode"],
        metrics,
        config.get("errors.deadletterqueue.topic.name"),
    )
    dispatcher = build_dispatcher(connector, config, server, partition, queue, metrics, failures)
    reselect.attach(dispatcher, connector, raw)  # post.processors, if configured
    transforms = build_chain(raw)
    key_converter = converter_from_config(raw, is_key=True)
    value_converter = converter_from_config(raw, is_key=False)
    if sink is None:
        sink = build_sink(config, settings)
    metrics.delivery = sink.delivery_lag
    # Healthy under load, everything is acknowledged at each offset commit at the latest.
    metrics.ack_alarm_s = (
        settings.offset_flush_interval_ms + settings.offset_flush_timeout_ms
    ) / 1000
    writer = OffsetWriter(store, name, partition)
    stopping = threading.Event()
    parts: dict[str, Any] = {
        "sink": sink,
        "writer": writer,
        "transforms": transforms,
        "key_converter": key_converter,
        "value_converter": value_converter,
        "failures": failures,
        "metrics": metrics,
        "partition": partition,
        "stopping": stopping.is_set,
        "flush_timeout_s": settings.offset_flush_timeout_ms / 1000,
    }
    delivery: Delivery
    if isinstance(store, KafkaOffsetStore) and settings.exactly_once:
        delivery = ExactlyOnceDelivery(store=store, **parts)
    else:
        delivery = AtLeastOnceDelivery(store=store, **parts)
    return TaskParts(
        name=name,
        server=server,
        partition=partition,
        metrics=metrics,
        queue=queue,
        failures=failures,
        dispatcher=dispatcher,
        transforms=transforms,
        key_converter=key_converter,
        value_converter=value_converter,
        sink=sink,
        writer=writer,
        delivery=delivery,
        stopping=stopping,
    )


def build_sink(config: Config, settings: EngineSettings) -> KafkaSink:
    """The Kafka producer of a task: transactional in exactly-once mode."""
    return KafkaSink(
        settings.producer,
        transactional_id=settings.transactional_id if settings.exactly_once else None,
        topic_defaults={
            "partitions": config.get("topic.creation.default.partitions", 1),
            "replication.factor": config.get("topic.creation.default.replication.factor", 1),
            "cleanup.policy": config.get("topic.creation.default.cleanup.policy", "delete"),
        },
        create_topics=bool(config.get("topic.creation.enable", True)),
        reserved_topics=settings.reserved_topics,
    )


def build_dispatcher(
    conn: Connector,
    cfg: Config,
    server: str,
    partition: dict[str, Any],
    queue: ChangeEventQueue[SourceRecord],
    metrics: TaskMetrics,
    failures: FailureHandler,
) -> EventDispatcher:
    """The dispatcher with the connector's table schemas, filters and topic names."""
    raw = cfg.raw
    namer = TopicNamer(
        server,
        cfg["heartbeat.topics.prefix"],
        # a connector may qualify topics by database (SQL Server with several databases)
        include_catalog=bool(getattr(conn, "topics_include_database", False)),
        schema_name_mode=cfg.get("schema.name.adjustment.mode") or "avro",
    )
    mappers = ColumnMappers(raw)
    problems = list(mappers.problems)
    try:
        key_columns = KeyColumns(cfg.get("message.key.columns"))
    except ValueError as exc:
        problems.append(("message.key.columns", str(exc)))
    if problems:
        raise ConfigError(problems)
    sanitize: bool | Callable[[str], str] | None = cfg.get("sanitize.field.names")
    adjustment = cfg.get("field.name.adjustment.mode")  # Debezium 2.x+'s name for it
    if adjustment == "avro_unicode":
        sanitize = unicode_field_name
    elif adjustment is not None:
        sanitize = adjustment == "avro"
    elif sanitize is None:
        sanitize = "avro" in str(raw.get("value.converter", "")).lower()
    builder = TableSchemaBuilder(
        conn.value_converters(),
        namer,
        column_filter=ColumnFilter(cfg["column.include.list"], cfg["column.exclude.list"]),
        mappers=mappers,
        key_columns=key_columns,
        sanitize_field_names=sanitize if callable(sanitize) else bool(sanitize),
        propagate_source_type=cfg["column.propagate.source.type"],
        propagate_source_datatype=cfg["datatype.propagate.source.type"],
        debezium_3=str(cfg.get("envelope.version")) == "3",
        unavailable_placeholder=str(
            cfg.get("toasted.value.placeholder")
            or cfg.get("unavailable.value.placeholder")
            or "__debezium_unavailable_value"
        ),
    )
    return EventDispatcher(
        connector_type=conn.source_connector_name(),
        server_name=server,
        source_partition=partition,
        source_schema=conn.source_schema(),
        schema_builder=builder,
        table_filter=table_filter_from_config(cfg, conn.system_schemas),
        queue=queue,
        metrics=metrics,
        namer=namer,
        failures=failures,
        tombstones_on_delete=cfg["tombstones.on.delete"],
        provide_transaction_metadata=cfg["provide.transaction.metadata"],
        skipped_operations=frozenset("c" if op == "i" else op for op in cfg["skipped.operations"])
        - {"none"},
        heartbeat_interval_ms=cfg["heartbeat.interval.ms"],
        heartbeat_action=conn.heartbeat_action(),
        include_schema_changes=bool(cfg.get("include.schema.changes", False)),
        envelope_version=cfg.get("envelope.version", "1.2"),
        source_derive=conn.source_derive(),
    )


def table_filter_from_config(cfg: Config, system: frozenset[str]) -> TableFilter:
    return TableFilter(
        database_include=cfg.get("database.include.list", []),
        database_exclude=cfg.get("database.exclude.list", []),
        schema_include=cfg.get("schema.include.list", []),
        schema_exclude=cfg.get("schema.exclude.list", []),
        table_include=cfg["table.include.list"],
        table_exclude=cfg["table.exclude.list"],
        system=system,
    )


def _approx_size(rec: SourceRecord) -> int:
    """Cheap size estimate for ``max.queue.size.in.bytes`` (exact sizes would cost a
    serialisation per event)."""
    value = rec.value
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, dict):
        after = value.get("after") or value.get("before") or {}
        return 200 + 40 * len(after) if isinstance(after, dict) else 200
    return 100


def _plugin_name(type_name: str) -> str:
    return {"postgresql": "postgres", "sqlserver": "sql_server"}.get(type_name, type_name)
