"""Schema history in a Kafka topic (Debezium's ``KafkaSchemaHistory``), for distributed mode.

Debezium's rules, and why:
- exactly one partition: replay must see DDL in the order it happened, and Kafka orders only
  within a partition. ``start`` refuses a topic with more.
- infinite retention, delete policy (``retention.ms=-1``, ``retention.bytes=-1``): every DDL since
  the first snapshot is needed to rebuild the schema; compaction would keep one record per key
  and all records have a null key.
- synchronous writes: the connector stores an offset only after the DDL before it is in the
  history.
- recovery reads from the beginning to the end offset it sees when it starts (watermarks), and
  gives up after ``recovery.attempts`` polls of ``recovery.poll.interval.ms`` that bring
  nothing, rather than hanging on an unreachable broker.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from cdc.errors import SchemaError
from cdc.history.store import HistoryRecord, SchemaHistory
from cdc.kafka_client_log import LoggedAdminClient, logged
from cdc.kafka_security import librdkafka_config, security_settings
from cdc.offsets.kafka import (
    create_topic,
    produce_all,
    read_to_end,
    topic_config,
    topic_partitions,
    watermarks,
)

log = logging.getLogger(__name__)

TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}
_JAVA_ONLY = {"key.serializer", "value.serializer", "key.deserializer", "value.deserializer"}


def _client_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """Pass-through ``*.producer.*``/``*.consumer.*`` settings minus Java-only keys, which
    librdkafka rejects and which make no sense here; Kafka Connect's security names are
    translated (:mod:`cdc.kafka_security`)."""
    return librdkafka_config({k: v for k, v in (settings or {}).items() if k not in _JAVA_ONLY})


class KafkaSchemaHistory(SchemaHistory):
    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        *,
        recovery_poll_interval_ms: int = 100,
        recovery_attempts: int = 4,
        replication_factor: int | None = None,
        query_timeout_ms: int = 3000,
        create_timeout_ms: int = 30000,
        write_timeout_ms: int = 30000,
        client_config: Mapping[str, Any] | None = None,
        producer_config: Mapping[str, Any] | None = None,
        consumer_config: Mapping[str, Any] | None = None,
        **flags: bool,
    ) -> None:
        """``replication_factor`` None uses the broker's ``default.replication.factor``."""
        super().__init__(**flags)
        if not topic:
            raise SchemaError("the schema history topic name is empty")
        self.topic = topic
        self.recovery_poll_interval_ms = recovery_poll_interval_ms
        self.recovery_attempts = recovery_attempts
        self.replication_factor = replication_factor
        self.query_timeout_s = query_timeout_ms / 1000
        self.create_timeout_s = create_timeout_ms / 1000
        self.write_timeout_s = write_timeout_ms / 1000
        self._producer_config = _client_settings(producer_config)
        self._consumer_config = _client_settings(consumer_config)
        # Debezium has no common client settings: security goes in the producer and consumer
        # maps. The admin client (topic checks, creation) needs it too; it takes the
        # consumer's, then the producer's.
        self._common = logged(
            {
                "bootstrap.servers": bootstrap_servers,
                **security_settings(self._producer_config),
                **security_settings(self._consumer_config),
                **_client_settings(client_config),
            }
        )
        self._lock = threading.Lock()
        self._producer: Producer | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._producer is not None:
                return
            admin = LoggedAdminClient(self._common)
            count = topic_partitions(admin, self.topic, self.query_timeout_s, SchemaError)
            if count is None:
                create_topic(
                    admin,
                    self.topic,
                    1,
                    -1 if self.replication_factor is None else self.replication_factor,
                    TOPIC_CONFIG,
                    self.create_timeout_s,
                    SchemaError,
                )
            else:
                self._check_topic(admin, count)
            try:
                self._producer = Producer(
                    {
                        **self._common,
                        "acks": "all",
                        "enable.idempotence": True,
                        "linger.ms": 0,
                        **self._producer_config,
                    }
                )
            except KafkaException as exc:
                raise SchemaError(f"cannot create the schema history producer: {exc}") from exc

    def stop(self) -> None:
        with self._lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            remaining = producer.flush(self.write_timeout_s)
            if remaining:
                log.warning(
                    "%d schema history writes to %s not acknowledged", remaining, self.topic
                )

    # -- history -------------------------------------------------------------------------

    def exists(self) -> bool:
        admin = LoggedAdminClient(self._common)
        if topic_partitions(admin, self.topic, self.query_timeout_s, SchemaError) is None:
            return False
        consumer = self._consumer()
        try:
            low, high = watermarks(consumer, self.topic, 0, self.query_timeout_s, SchemaError)
        finally:
            consumer.close()
        return high > low

    def store_record(self, record: HistoryRecord) -> None:
        with self._lock:
            if self._producer is None:
                raise SchemaError(f"schema history {self.topic} is not started; call start()")
            _, failure = produce_all(
                self._producer,
                [(self.topic, None, record.to_json(), 0)],
                timeout_s=self.write_timeout_s,
            )
        if failure is not None:
            raise SchemaError(f"storing DDL in schema history {self.topic} failed: {failure}")

    def all_records(self) -> Iterator[HistoryRecord]:
        records: list[HistoryRecord] = []

        def collect(msg: Message) -> None:
            value = msg.value()
            if value is None:
                log.warning(
                    "skipping a null record in schema history %s at %d", self.topic, msg.offset()
                )
                return
            try:
                records.append(HistoryRecord.from_json(value))
            except SchemaError as exc:
                raise SchemaError(
                    f"schema history {self.topic} offset {msg.offset()}: {exc}"
                ) from exc

        consumer = self._consumer()
        try:
            low, high = watermarks(consumer, self.topic, 0, self.query_timeout_s, SchemaError)
            if low > 0:
                log.warning(
                    "schema history %s starts at offset %d: earlier DDL was deleted (retention?); "
                    "the recovered schema may be incomplete",
                    self.topic,
                    low,
                )
            consumer.assign([KafkaTopicPartition(self.topic, 0, low)])
            read_to_end(
                consumer,
                self.topic,
                {0: low},
                {0: (low, high)},
                collect,
                error=SchemaError,
                poll_interval_s=self.recovery_poll_interval_ms / 1000,
                max_empty_polls=self.recovery_attempts,
            )
        except KafkaException as exc:
            raise SchemaError(f"cannot read schema history {self.topic}: {exc}") from exc
        finally:
            consumer.close()
        log.info("read %d schema history records from %s", len(records), self.topic)
        return iter(records)

    # -- internals -----------------------------------------------------------------------

    def _consumer(self) -> Consumer:
        try:
            return Consumer(
                {
                    **self._common,
                    "group.id": f"{self.topic}-dbhistory",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "auto.offset.reset": "earliest",
                    "isolation.level": "read_committed",
                    **self._consumer_config,
                }
            )
        except KafkaException as exc:
            raise SchemaError(f"cannot create the schema history consumer: {exc}") from exc

    def _check_topic(self, admin: AdminClient, partitions: int) -> None:
        if partitions != 1:
            raise SchemaError(
                f"schema history topic {self.topic!r} has {partitions} partitions; it must have "
                f"exactly 1, because DDL must be replayed in the order it was recorded and Kafka "
                f"orders records only within a partition. Use a new topic with one partition "
                f"(and snapshot.mode=schema_only_recovery to rebuild it)."
            )
        config = topic_config(admin, self.topic, self.query_timeout_s, SchemaError)
        for name, wanted in TOPIC_CONFIG.items():
            actual = config.get(name)
            if name == "retention.ms" and actual is not None and int(actual) >= 2**62:
                continue  # Long.MAX_VALUE, as Debezium sets it, is infinite too
            if actual != wanted:
                log.warning(
                    "schema history topic %s has %s=%s; it should be %s, or DDL the connector "
                    "needs to restart may be deleted",
                    self.topic,
                    name,
                    actual,
                    wanted,
                )
