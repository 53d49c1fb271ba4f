"""The Kafka side: a confluent-kafka producer configured so nothing is dropped.

Defaults follow Kafka Connect's source-task producer: ``acks=all``, idempotence on, and an
unbounded delivery timeout, so a Kafka outage turns into buffering and then backpressure
(``produce`` blocks once librdkafka's bounded buffer is full) instead of lost records.
``transactional.id`` switches on the exactly-once mode used by the engine.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from cdc.kafka_client_log import LoggedAdminClient, logged
from cdc.kafka_security import SECURITY_PREFIXES, librdkafka_config
from cdc.sinks import allocator

log = logging.getLogger("tidemark.sink")

DEFAULT_PRODUCER = {
    "acks": "all",
    "enable.idempotence": True,
    "message.timeout.ms": 0,  # infinite: retry until Kafka is back, never drop
    "linger.ms": 5,
    "batch.num.messages": 10000,
    "queue.buffering.max.messages": 200000,
    "queue.buffering.max.kbytes": 262144,
    "compression.type": "lz4",
    "max.in.flight.requests.per.connection": 5,
    # Java's default partitioner (murmur2 of the key bytes), as Debezium's producer uses:
    # librdkafka's own default (CRC32) would put a key in another partition of the same
    # topic, so a switch from Debezium to tidemark would break per-key order downstream.
    "partitioner": "murmur2_random",
}


#: What raises Kafka's size limits, for every error about a record that is too large.
SIZE_ADVICE = (
    "raise the producer's limit (max.request.size, librdkafka's message.max.bytes; "
    "producer.override.max.request.size per connector) and the topic's max.message.bytes "
    "(broker default message.max.bytes), or truncate or drop the column "
    "(column.truncate.to.<n>.chars, column.exclude.list)"
)
#: Bytes a record needs beyond its key, value and headers inside a record batch (batch
#: header, record framing): a record within this much of a topic's limit is still rejected.
RECORD_OVERHEAD = 128


class SinkError(RuntimeError):
    pass


#: librdkafka's own names of settings that have a Java name too: its errors use them
_NATIVE_NAMES = {
    "queue.buffering.max.ms": "linger.ms",
    "compression.codec": "compression.type",
    "request.required.acks": "acks",
    "message.send.max.retries": "retries",
    "max.in.flight.requests.per.connection": "max.in.flight",
    "message.max.bytes": "max.request.size",
}
#: settings a trial producer must not be given: they read files, load code or carry
#: credentials (the REST rules decide about those, and a trial must not act on them)
_NOT_TRIED = (".location", ".file", ".keytab", ".cmd", ".providers", ".paths", ".pem")
_PROPERTY = re.compile(r'property:? "([^"]+)"')


def producer_problems(settings: Mapping[str, Any], prefix: str) -> list[tuple[str, str]]:
    """What librdkafka refuses among producer settings (a misspelt name, a bad value), found
    by making a producer with them and the task's defaults, so that validation names the key
    instead of the task failing at its start. The producer opens nothing before it is used
    but a connection attempt to an address that refuses it."""
    tried = {
        k: v
        for k, v in settings.items()
        if not k.startswith(SECURITY_PREFIXES) and not k.endswith(_NOT_TRIED)
        and k not in ("bootstrap.servers", "metadata.broker.list")
    }  # fmt: skip
    if not tried:
        return []
    conf = {**DEFAULT_PRODUCER, **tried}
    if "max.request.size" in conf:
        conf.setdefault("message.max.bytes", conf.pop("max.request.size"))
    conf.update({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    try:
        producer = Producer(conf)
    except KafkaException as exc:
        error = exc.args[0]
        text = error.str() if isinstance(error, KafkaError) else str(error)
        found = _PROPERTY.search(text)
        name = found.group(1) if found else ""
        key = next((k for k in (name, _NATIVE_NAMES.get(name, "")) if k in tried), None)
        if key and key != name:
            text += f" (librdkafka's name for {key})"
        return [
            (prefix + key if key else prefix.rstrip("."), f"the Kafka client refuses it: {text}")
        ]
    except (TypeError, ValueError) as exc:
        return [(prefix.rstrip("."), str(exc))]
    producer.flush(0)
    return []


class KafkaSink:
    def __init__(
        self,
        producer_config: Mapping[str, Any],
        *,
        transactional_id: str | None = None,
        topic_defaults: Mapping[str, Any] | None = None,
        create_topics: bool = True,
        reserved_topics: frozenset[str] = frozenset(),
    ) -> None:
        conf = librdkafka_config({**DEFAULT_PRODUCER, **dict(producer_config)})
        if "max.request.size" in conf:  # Kafka Connect's name for librdkafka's limit
            conf.setdefault("message.max.bytes", conf.pop("max.request.size"))
        #: librdkafka refuses a larger record in produce() (MSG_SIZE_TOO_LARGE), at once
        self.max_message_bytes = int(conf.get("message.max.bytes", 1_000_000))
        if transactional_id:
            conf["transactional.id"] = transactional_id
            conf["enable.idempotence"] = True
            if "message.timeout.ms" not in producer_config:
                # librdkafka requires message.timeout.ms <= transaction.timeout.ms
                conf["message.timeout.ms"] = int(conf.get("transaction.timeout.ms", 60000))
        self.bootstrap = str(conf["bootstrap.servers"])
        self.transactional = bool(transactional_id)
        # One producer-wide callback, called only for failures: per-record success callbacks
        # cost more than the rest of the produce path; acknowledgement is established by
        # flushing before offsets are stored (see cdc.offsets.writer).
        self.error: str | None = None
        conf["delivery.report.only.error"] = True
        conf["on_delivery"] = self._on_delivery_error
        allocator.tune_for_producer()
        conf = logged(conf)
        self.producer = Producer(conf)
        self._admin_conf = {
            k: v
            for k, v in conf.items()
            if k.startswith(("bootstrap.servers", "client.id", *SECURITY_PREFIXES))
        }
        self._admin: AdminClient | None = None
        self.create_topics = create_topics
        self.topic_defaults = dict(topic_defaults or {})
        self.reserved_topics = reserved_topics
        self.known_topics: set[str] = set()
        #: topics whose max.message.bytes is below the producer's limit: their records are
        #: checked before producing, so the broker never rejects one after later ones went out
        self.topic_limits: dict[str, int] = {}
        #: known topics without such a limit: records for them may go straight to the producer
        self.fast_topics: set[str] = set()
        self._in_txn = False
        self._caught_up = time.monotonic()
        self._released = False

    # -- topics -----------------------------------------------------------------------------
    def ensure_topics(
        self, topics: Iterable[str], overrides: Mapping[str, Mapping[str, Any]] | None = None
    ) -> None:
        """Create missing topics once (Kafka Connect's ``topic.creation.*``)."""
        new = [t for t in topics if t and t not in self.known_topics]
        if not new:
            return
        reserved = sorted(set(new) & self.reserved_topics)
        if reserved:
            raise SinkError(
                f"a record is routed to {', '.join(reserved)}, the worker's own internal "
                "topic; a connector may not write there (check the topic prefix and the "
                "transforms that route records)"
            )
        if self._admin is None:
            self._admin = LoggedAdminClient(self._admin_conf)
        if not self.create_topics:
            self._learn_limits(new)
            return
        existing = set(self._admin.list_topics(timeout=30).topics)
        to_create = []
        for t in new:
            if t in existing:
                continue
            spec = {**self.topic_defaults, **dict((overrides or {}).get(t, {}))}
            partitions = int(spec.pop("partitions", 1))
            replication = int(spec.pop("replication.factor", 1))
            config = {k: str(v) for k, v in spec.items()}
            to_create.append(NewTopic(t, partitions, replication, config=config))
        if to_create:
            for topic, fut in self._admin.create_topics(to_create, request_timeout=30).items():
                try:
                    fut.result()
                    log.info("created topic %s", topic)
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        raise SinkError(f"cannot create topic {topic}: {exc}") from exc
        self._learn_limits(new)

    def existing_topics(self, prefix: str, timeout: float = 10.0) -> list[str]:
        """Topics on the cluster whose names start with ``prefix`` (empty when the cluster
        cannot say in time: this only decides how loudly a full snapshot is announced)."""
        try:
            if self._admin is None:
                self._admin = LoggedAdminClient(self._admin_conf)
            names = self._admin.list_topics(timeout=timeout).topics
        except Exception:
            return []
        return sorted(n for n in names if n.startswith(prefix))

    def _learn_limits(self, topics: list[str]) -> None:
        """Note the topics' ``max.message.bytes`` where it is below the producer's limit (a
        topic that cannot be described keeps the producer's limit), then mark them known."""
        assert self._admin is not None
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
        try:
            futures = self._admin.describe_configs(resources, request_timeout=30)
        except KafkaException as exc:
            log.warning("cannot read the size limits of topics %s: %s", topics, exc)
            futures = {}
        for resource, future in futures.items():
            try:
                entry = future.result(30).get("max.message.bytes")
                limit = int(entry.value) if entry is not None and entry.value else None
            except (KafkaException, ValueError) as exc:
                log.warning("cannot read max.message.bytes of topic %s: %s", resource.name, exc)
                continue
            if limit is not None and limit < self.max_message_bytes:
                self.topic_limits[resource.name] = limit
        self.known_topics.update(topics)
        self.fast_topics.update(t for t in topics if t not in self.topic_limits)

    def limit_for(self, topic: str) -> int:
        """The largest record (key, value and headers) ``topic`` accepts from this producer."""
        topic_limit = self.topic_limits.get(topic)
        if topic_limit is None:
            return self.max_message_bytes
        return min(self.max_message_bytes, topic_limit - RECORD_OVERHEAD)

    # -- producing --------------------------------------------------------------------------
    def _on_delivery_error(self, err: Any, msg: Any) -> None:
        if err is not None and self.error is None:
            self.error = f"{err} (topic {msg.topic()}, partition {msg.partition()})"
            if err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                # The broker rejected a record (or a whole batch) after the producer accepted
                # it: the topic's limit changed, or batches outgrow it. Nothing after it is
                # stored as an offset; a restart re-reads the topic's limit.
                self.error += (
                    f": a record of {len(msg)} bytes, or the batch it was in, is over the "
                    f"topic's max.message.bytes; {SIZE_ADVICE}; keep the producer's batch.size "
                    f"below the smallest topic limit"
                )

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
        partition: int | None = None,
    ) -> None:
        """Hand one record to librdkafka; blocks (serving callbacks) while its buffer is full."""
        produce = self.producer.produce
        while True:
            try:
                if partition is not None:
                    produce(topic, value, key, partition=partition, headers=headers)
                elif headers:
                    produce(topic, value, key, headers=headers)
                else:
                    produce(topic, value, key)
                return
            except BufferError:
                # Backpressure: Kafka is slow or down. Serve callbacks and try again.
                self.producer.poll(0.1)

    def deliver_alone(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
        partition: int | None,
        stopping: Callable[[], bool],
    ) -> KafkaError | None:
        """Send one record in a batch of its own, after every earlier record is acknowledged,
        and wait for its outcome: None when Kafka has it, else the broker's error. Used for a
        record that the broker may reject (over a topic's limit before compression), so that
        nothing after it is sent before that is known."""
        self._flush_all(stopping)
        outcome: list[KafkaError] = []

        def delivered(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                outcome.append(err)

        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": delivered}
        if headers:
            kwargs["headers"] = headers
        if partition is not None:
            kwargs["partition"] = partition
        try:
            self.producer.produce(topic, **kwargs)
        except KafkaException as exc:  # refused at once (over the producer's own limit too)
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError):
                return error
            raise
        self._flush_all(stopping)
        return outcome[0] if outcome else None

    def _flush_all(self, stopping: Callable[[], bool]) -> None:
        while self.flush(1.0):
            if stopping():
                raise SinkError("stopped while waiting for Kafka to acknowledge earlier records")
        if self.error is not None:
            raise SinkError(f"Kafka rejected a record: {self.error}")

    def poll(self, timeout: float = 0.0) -> int:
        served = int(self.producer.poll(timeout))
        if not len(self.producer):
            self._caught_up = time.monotonic()
        return served

    def flush(self, timeout: float) -> int:
        """Wait for outstanding deliveries; returns how many are still outstanding."""
        remaining = int(self.producer.flush(timeout))
        if not remaining:
            self._caught_up = time.monotonic()
        return remaining

    def delivery_lag(self) -> tuple[int, float]:
        """``(records not yet acknowledged, seconds since everything sent was acknowledged)``.
        Thread-safe: read by status requests and metric scrapes while the task thread may be
        blocked on a full producer buffer (Kafka down)."""
        pending = len(self.producer)
        now = time.monotonic()
        if not pending:
            self._caught_up = now
        return pending, now - self._caught_up

    def outstanding(self) -> int:
        return len(self.producer)

    # -- transactions (exactly-once mode) ---------------------------------------------------
    def init_transactions(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.producer.init_transactions(min(10.0, max(deadline - time.monotonic(), 1)))
                return
            except KafkaException as exc:
                if time.monotonic() > deadline or not exc.args[0].retriable():
                    raise SinkError(f"cannot initialise Kafka transactions: {exc}") from exc

    def begin(self) -> None:
        self.producer.begin_transaction()
        self._in_txn = True

    def commit(self, timeout: float = 60.0) -> None:
        self.producer.commit_transaction(timeout)
        self._in_txn = False

    def abort(self, timeout: float = 30.0) -> None:
        if self._in_txn:
            try:
                self.producer.abort_transaction(timeout)
            finally:
                self._in_txn = False

    def close(self, timeout: float = 30.0) -> int:
        if self._in_txn:
            self.abort()
        return self.flush(timeout)

    def release(self) -> None:
        """Free librdkafka's client: its threads, broker connections and buffers. Without it
        they live until Python collects the sink, which the delivery callback holds in a
        reference cycle, so each task restart of a long-running worker used to leave one
        producer behind (three threads, five descriptors). Records still outstanding are
        purged first: :meth:`close` has reported them, their offsets are not stored and they
        are sent again on the next start, whereas ``Producer.close()`` would wait for them up
        to ``message.timeout.ms``. Called once the engine needs the producer no more; a later
        ``len()`` (a status request) reads 0."""
        if self._released:
            return
        self._released = True
        self._admin = None
        try:
            if len(self.producer):
                self.producer.purge()
            self.producer.close()
        except Exception as exc:  # freeing must not turn a clean stop into a failure
            log.warning("closing the Kafka producer failed: %s", exc)
