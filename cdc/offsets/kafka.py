"""Offsets in a compacted Kafka topic, readable and writable by Kafka Connect itself.

Records use Connect's layout (``KafkaOffsetBackingStore`` with the JSON converter, schemas
off): key ``["<connector>",{partition}]``, value the offset as JSON, a null value deleting it.
They are produced with Java's default partitioner (murmur2 on the key bytes), so a key always
lands in the partition Connect would pick: compaction only merges records of one partition,
and an update in another partition would leave the old offset alive next to the new one.

On start the whole topic is read up to each partition's end offset, taken from the partition
watermarks, because "no record for a while" cannot tell a slow broker from the end of the topic.
The read uses ``isolation.level=read_committed``: exactly-once sinks write offset records in
the same transaction as the data (:meth:`KafkaOffsetStore.offset_record`), and an aborted
transaction's offsets must never be resumed from. The last stable offset lags a commit: a
committed transaction's markers land after ``commit_transaction`` returns, so an exactly-once
task reads its offsets *settled* (``start(settle=True)``), after fencing its previous producer,
waiting for every transaction open at that moment to be decided.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in __all__
    AdminClient,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from cdc.errors import CDCError, OffsetError
from cdc.kafka_client_log import LoggedAdminClient, logged
from cdc.kafka_security import librdkafka_config
from cdc.offsets.store import (
    Offset,
    OffsetItem,
    OffsetStore,
    OffsetTable,
    Partition,
    normalise,
    offset_key,
    offset_value,
    parse_offset_key,
    parse_offset_value,
)

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "connect-offsets"
DEFAULT_PARTITIONS = 25

# -- helpers shared with the Kafka schema history ---------------------------------------------


def topic_partitions(
    admin: AdminClient, topic: str, timeout_s: float, error: type[CDCError]
) -> int | None:
    """Partition count, or None if the topic does not exist. Asks for all topics' metadata:
    asking for one topic by name can auto-create it with the broker's defaults."""
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise error(f"cannot reach Kafka to look up topic {topic!r}: {exc}") from exc
    info = metadata.topics.get(topic)
    if info is None:
        return None
    if info.error is not None:
        raise error(f"topic {topic!r} metadata error: {info.error}")
    return len(info.partitions)


def create_topic(
    admin: AdminClient,
    topic: str,
    partitions: int,
    replication_factor: int,
    config: Mapping[str, str],
    timeout_s: float,
    error: type[CDCError],
) -> int:
    """Create the topic (losing a creation race is fine) and wait until its metadata is
    visible, so the first read right after sees every partition. Returns the partition count."""
    new = NewTopic(
        topic,
        num_partitions=partitions,
        replication_factor=replication_factor,
        config=dict(config),
    )
    futures = admin.create_topics([new], operation_timeout=timeout_s, request_timeout=timeout_s)
    try:
        futures[topic].result(timeout=timeout_s)
        log.info("created topic %s (%d partitions, config %s)", topic, partitions, dict(config))
    except KafkaException as exc:
        kerr = exc.args[0] if exc.args else None
        if not (isinstance(kerr, KafkaError) and kerr.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise error(f"cannot create topic {topic!r}: {exc}") from exc
    deadline = time.monotonic() + timeout_s
    while True:
        info = admin.list_topics(timeout=timeout_s).topics.get(topic)
        if (
            info is not None
            and info.partitions
            and all(p.leader >= 0 for p in info.partitions.values())
        ):
            return len(info.partitions)
        if time.monotonic() > deadline:
            raise error(f"topic {topic!r} was created but its partitions have no leader yet")
        time.sleep(0.05)


def ensure_compacted(
    admin: AdminClient,
    topic: str,
    partitions: int,
    replication_factor: int,
    timeout_s: float,
    error: type[CDCError],
) -> tuple[int, str | None]:
    """Create ``topic`` compacted unless it exists; its partition count and the
    ``cleanup.policy`` it has (an existing topic may have been created otherwise)."""
    count = topic_partitions(admin, topic, timeout_s, error)
    if count is None:
        count = create_topic(
            admin,
            topic,
            partitions,
            replication_factor,
            {"cleanup.policy": "compact"},
            timeout_s,
            error,
        )
    return count, topic_config(admin, topic, timeout_s, error).get("cleanup.policy")


def topic_config(
    admin: AdminClient, topic: str, timeout_s: float, error: type[CDCError]
) -> dict[str, str | None]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    try:
        entries = admin.describe_configs([resource], request_timeout=timeout_s)[resource].result(
            timeout=timeout_s
        )
    except KafkaException as exc:
        raise error(f"cannot read the configuration of topic {topic!r}: {exc}") from exc
    return {name: entry.value for name, entry in entries.items()}


_LEADER_MOVING = (
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    # a topic created a moment ago: the broker's metadata lags the leader epoch the client
    # already saw ("Leader epoch is newer than broker epoch"; seen failing a worker's start)
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.OFFSET_NOT_AVAILABLE,
)


def _worth_retrying(exc: KafkaException) -> bool:
    """Leadership still settling (just after creation) or a transient failure."""
    kerr = exc.args[0] if exc.args else None
    return isinstance(kerr, KafkaError) and (kerr.retriable() or kerr.code() in _LEADER_MOVING)


def watermarks(
    consumer: Consumer, topic: str, partition: int, timeout_s: float, error: type[CDCError]
) -> tuple[int, int]:
    """Low and high watermark of one partition. Ask before assigning: an assigned consumer's
    fetches delay the query."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            result = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout_s, cached=False
            )
        except KafkaException as exc:
            if not _worth_retrying(exc) or time.monotonic() > deadline:
                raise error(f"cannot read the end offsets of {topic}[{partition}]: {exc}") from exc
            time.sleep(0.1)
            continue
        if result is None:
            raise error(f"cannot read the end offsets of {topic}[{partition}]: no answer")
        return int(result[0]), int(result[1])


def end_offsets(
    admin: AdminClient,
    topic: str,
    partitions: Iterable[int],
    timeout_s: float,
    error: type[CDCError],
) -> dict[int, tuple[int, int]]:
    """First and end offset of every partition, in two batched requests. The end is the last
    stable offset (``read_committed``): an open transaction's records cannot be read yet,
    so reading up to the high watermark would wait for it to finish."""
    parts = list(partitions)
    first = _list_offsets(admin, topic, parts, "earliest", timeout_s, error)
    last = _list_offsets(admin, topic, parts, "stable", timeout_s, error)
    return {p: (first[p], last[p]) for p in parts}


def settled_end_offsets(
    admin: AdminClient,
    topic: str,
    partitions: Iterable[int],
    timeout_s: float,
    error: type[CDCError],
) -> dict[int, tuple[int, int]]:
    """Like :func:`end_offsets`, but first wait until the last stable offset of every
    partition reached the high watermark seen now: every transaction open at this moment is
    decided and its markers are written. ``commit_transaction`` returns once the commit is
    decided, before its markers land, so a read to the stable offset right after a commit
    (or right after fencing the previous producer) can miss the committed records."""
    parts = list(partitions)
    high = _list_offsets(admin, topic, parts, "high", timeout_s, error)
    deadline = time.monotonic() + timeout_s
    while True:
        ends = end_offsets(admin, topic, parts, timeout_s, error)
        open_parts = {p: (ends[p][1], high[p]) for p in parts if ends[p][1] < high[p]}
        if not open_parts:
            return ends
        if time.monotonic() > deadline:
            raise error(
                f"transactions in {topic} stayed undecided for {timeout_s:g} s (partition: "
                f"(last stable offset, high watermark) {open_parts}); a producer that died "
                f"mid-transaction holds them until its transaction.timeout.ms expires"
            )
        time.sleep(0.05)


def _list_offsets(
    admin: AdminClient,
    topic: str,
    parts: list[int],
    which: str,
    timeout_s: float,
    error: type[CDCError],
) -> dict[int, int]:
    """``earliest``, ``stable`` (last stable offset) or ``high`` (high watermark) offsets."""
    spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()  # type: ignore[no-untyped-call]
    isolation = (
        IsolationLevel.READ_UNCOMMITTED if which == "high" else IsolationLevel.READ_COMMITTED
    )
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            futures = admin.list_offsets(
                {TopicPartition(topic, p): spec for p in parts},
                isolation_level=isolation,
                request_timeout=timeout_s,
            )
            return {tp.partition: int(f.result(timeout_s).offset) for tp, f in futures.items()}
        except KafkaException as exc:
            if not _worth_retrying(exc) or time.monotonic() > deadline:
                raise error(f"cannot read the end offsets of {topic}: {exc}") from exc
            time.sleep(0.1)


def read_to_end(
    consumer: Consumer,
    topic: str,
    positions: dict[int, int],
    ends: Mapping[int, tuple[int, int]],
    handle: Callable[[Message], None],
    *,
    error: type[CDCError],
    poll_interval_s: float = 0.1,
    max_empty_polls: int | None = None,
    timeout_s: float | None = None,
) -> None:
    """Consume the assigned partitions of ``topic`` up to ``ends`` (partition -> (first, end)
    offsets, taken before the read started).

    ``positions`` maps each partition to the next offset to read and is updated. A partition
    is done when a message at ``end - 1`` arrives or when the consumer reports it reached the
    end (partition EOF): the last offsets may hold no message for us (transaction markers,
    aborted or compacted records). ``max_empty_polls`` consecutive polls without progress, or
    ``timeout_s`` overall, raise ``error``."""
    targets = {p: high for p, (low, high) in ends.items() if high > max(positions.get(p, 0), low)}
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    empty = 0
    while targets:
        msg = consumer.poll(poll_interval_s)
        if msg is None:
            empty += 1
            if max_empty_polls is not None and empty >= max_empty_polls:
                raise error(
                    f"reading {topic} stopped short of its end offsets {targets} after "
                    f"{empty} polls of {poll_interval_s * 1000:.0f} ms without data"
                )
            if deadline is not None and time.monotonic() > deadline:
                raise error(f"reading {topic} did not reach its end offsets {targets} in time")
            continue
        empty = 0
        part, off, kerr = msg.partition(), msg.offset(), msg.error()
        if kerr is not None and kerr.code() != KafkaError._PARTITION_EOF:
            if kerr.retriable() or kerr.code() in (
                KafkaError._TRANSPORT,
                KafkaError._ALL_BROKERS_DOWN,
            ):
                log.warning("transient error while reading %s: %s", topic, kerr)
                continue
            raise error(f"error while reading {topic}: {kerr}")
        if part is None or off is None or msg.topic() != topic:
            continue
        if kerr is None:
            handle(msg)
            off += 1
        # A partition EOF event carries the end offset: the next one to read.
        positions[part] = max(positions.get(part, 0), off)
        if part in targets and off >= targets[part]:
            del targets[part]


def produce_all(
    producer: Producer,
    records: Iterable[tuple[str, bytes | None, bytes | None, int | None]],
    *,
    timeout_s: float,
) -> tuple[list[Message], str | None]:
    """Produce ``(topic, key, value, partition)`` records and flush. Returns the acknowledged
    messages and, unless every record was acknowledged, why not."""
    ok: list[Message] = []
    failed: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failed.append(err)
        else:
            ok.append(msg)

    count = 0
    deadline = time.monotonic() + timeout_s
    for topic, key, value, partition in records:
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                if time.monotonic() > deadline:
                    producer.flush(0)
                    return ok, f"the producer queue to {topic} stayed full"
                producer.poll(0.05)
            except KafkaException as exc:
                producer.flush(max(deadline - time.monotonic(), 0.0))
                return ok, f"cannot produce to {topic}: {exc}"
        count += 1
    remaining = producer.flush(max(deadline - time.monotonic(), 0.0))
    if len(ok) == count:
        return ok, None
    reasons = "; ".join(sorted({str(e) for e in failed}))
    if remaining:
        reasons = "; ".join(
            filter(None, [reasons, f"{remaining} unacknowledged after {timeout_s:g}s"])
        )
    return ok, f"{count - len(ok)} of {count} writes failed: {reasons}"


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The partition Java's default partitioner picks for a keyed record (Kafka's
    ``Utils.murmur2``), for producers that cannot be configured with ``murmur2_random``."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(key)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(key[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail, rest = length & ~3, length % 4
    if rest == 3:
        h ^= key[tail + 2] << 16
    if rest >= 2:
        h ^= key[tail + 1] << 8
    if rest >= 1:
        h ^= key[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


# -- the store --------------------------------------------------------------------------------


class KafkaOffsetStore(OffsetStore):
    def __init__(
        self,
        bootstrap_servers: str,
        topic: str = DEFAULT_TOPIC,
        *,
        partitions: int = DEFAULT_PARTITIONS,
        replication_factor: int = 1,
        client_config: Mapping[str, Any] | None = None,
        producer_config: Mapping[str, Any] | None = None,
        consumer_config: Mapping[str, Any] | None = None,
        timeout_s: float = 30.0,
        read_timeout_s: float = 120.0,
    ) -> None:
        """``client_config`` goes to every client (security settings); the producer and
        consumer maps override it for one client."""
        self.topic = topic
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.timeout_s = timeout_s
        self.read_timeout_s = read_timeout_s
        self._common = logged(
            librdkafka_config({"bootstrap.servers": bootstrap_servers, **(client_config or {})})
        )
        self._producer_config = librdkafka_config(producer_config or {})
        self._consumer_config = librdkafka_config(consumer_config or {})
        self._lock = threading.Lock()
        self._table = OffsetTable()
        # Key bytes as found in the topic: Connect does not sort partition keys, and a
        # tombstone or update must reuse the exact bytes to replace the record on compaction.
        self._raw_keys: dict[bytes, bytes] = {}
        self._positions: dict[int, int] = {}
        self._admin: AdminClient | None = None
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def start(self, *, settle: bool = False) -> None:
        """Read the whole topic. With ``settle``, first wait until every transaction open at
        this moment is decided and its markers are written (see :func:`settled_end_offsets`):
        an exactly-once task calls it right after fencing the previous instance of its
        producer, whose last committed offset record may still lack its commit marker. On a
        started store, ``settle`` reads on from where the last read stopped."""
        with self._lock:
            if self._consumer is not None:
                if settle:
                    self._read(settle=True)
                return
            try:
                self._start(settle)
            except KafkaException as exc:
                self._close_clients()
                raise OffsetError(f"cannot start the offset store on {self.topic}: {exc}") from exc
            except BaseException:
                self._close_clients()
                raise
            log.info(
                "read %d offsets from %s (%d partitions)",
                len(self._table.entries),
                self.topic,
                len(self._positions),
            )

    def _start(self, settle: bool) -> None:
        # A restarted instance reads everything again; entries whose tombstones compaction has
        # since removed must not survive from the previous run.
        self._table, self._raw_keys = OffsetTable(), {}
        admin = self._admin = LoggedAdminClient(self._common)
        count = self._ensure_topic(admin)
        self._producer = Producer(
            {
                **self._common,
                "acks": "all",
                "enable.idempotence": True,
                "partitioner": "murmur2_random",
                **self._producer_config,
            }
        )
        consumer = self._consumer = Consumer(
            {
                **self._common,
                "group.id": "tidemark-offset-store",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                # The reader knows where the end is; it need not let the broker wait for
                # data on partitions that are already read.
                "fetch.wait.max.ms": 20,
                **self._consumer_config,
            }
        )
        read_ends = settled_end_offsets if settle else end_offsets
        ends = read_ends(admin, self.topic, range(count), self._settle_timeout(settle), OffsetError)
        # Explicit first offsets, not OFFSET_BEGINNING: librdkafka resolves that with a
        # delayed offset query that costs half a second per start.
        self._positions = {p: low for p, (low, _) in ends.items()}
        consumer.assign([TopicPartition(self.topic, p, o) for p, o in self._positions.items()])
        self._read(ends)

    def close(self) -> None:
        with self._lock:
            self._close_clients()

    def refresh(self, *, settle: bool = False) -> None:
        """Read what others wrote since (another worker, or an exactly-once sink that wrote
        :meth:`offset_record` in its own transaction). With ``settle``, transactions
        committed (or still open) before this call are waited for, as in :meth:`start`."""
        with self._lock:
            self._started()
            self._read(settle=settle)

    # -- reads and writes ----------------------------------------------------------------

    def get(self, connector: str, partition: Mapping[str, Any]) -> Offset | None:
        with self._lock:
            self._started()
            return self._table.get(connector, partition)

    def all(self, connector: str) -> list[tuple[Partition, Offset]]:
        with self._lock:
            self._started()
            return self._table.all(connector)

    def put_many(self, items: Iterable[OffsetItem]) -> None:
        batch = normalise(items)
        with self._lock:
            producer = self._started()
            records = [
                (self.topic, self._raw_keys.get(key, key), offset_value(offset), None)
                for key, _, _, offset in batch
            ]
            delivered, failure = produce_all(producer, records, timeout_s=self.timeout_s)
            # Whatever Kafka acknowledged is what a restart will read: mirror exactly that.
            acked = {(m.key(), m.value()) for m in delivered}
            for (key, connector, partition, offset), rec in zip(batch, records, strict=True):
                if (rec[1], rec[2]) in acked:
                    self._table.apply(key, connector, partition, offset)
            if failure is not None:
                raise OffsetError(f"storing offsets in {self.topic} failed: {failure}")

    def offset_record(
        self, connector: str, partition: Mapping[str, Any], offset: Mapping[str, Any] | None
    ) -> tuple[str, bytes, bytes | None]:
        """``(topic, key, value)`` of the record that stores this offset, for a producer that
        writes it inside its own transaction. Produce it with the ``murmur2_random``
        partitioner (Java's default) or to the partition :meth:`partition_for` returns."""
        key = offset_key(connector, partition)
        with self._lock:
            raw = self._raw_keys.get(key, key)
        return self.topic, raw, offset_value(offset)

    def partition_for(self, key: bytes) -> int:
        """The topic partition Connect would write ``key`` to."""
        with self._lock:
            self._started()
            return murmur2_partition(key, len(self._positions))

    # -- internals -----------------------------------------------------------------------

    def _started(self) -> Producer:
        if self._producer is None or self._consumer is None:
            raise OffsetError(f"offset store on {self.topic} is not started; call start() first")
        return self._producer

    def _ensure_topic(self, admin: AdminClient) -> int:
        count, policy = ensure_compacted(
            admin, self.topic, self.partitions, self.replication_factor, self.timeout_s, OffsetError
        )
        if policy != "compact":
            # Connect's own check: with deletion, offsets of an idle connector expire and it
            # would restart from scratch.
            raise OffsetError(
                f"offsets topic {self.topic!r} has cleanup.policy={policy}; it must be "
                f"'compact' only, or offsets of quiet connectors are deleted by retention"
            )
        return count

    def _read(
        self, ends: Mapping[int, tuple[int, int]] | None = None, *, settle: bool = False
    ) -> None:
        assert self._consumer is not None and self._admin is not None
        if ends is None:
            read_ends = settled_end_offsets if settle else end_offsets
            ends = read_ends(
                self._admin,
                self.topic,
                self._positions,
                self._settle_timeout(settle),
                OffsetError,
            )
        read_to_end(
            self._consumer,
            self.topic,
            self._positions,
            ends,
            self._apply_message,
            error=OffsetError,
            timeout_s=self.read_timeout_s,
        )

    def _settle_timeout(self, settle: bool) -> float:
        """A transaction left open by a producer that died is aborted by the coordinator only
        after its ``transaction.timeout.ms`` (60 s by default): a settled read waits that
        long, up to ``read_timeout_s``."""
        return max(self.read_timeout_s, self.timeout_s) if settle else self.timeout_s

    def _apply_message(self, msg: Message) -> None:
        raw_key = msg.key()
        if raw_key is None:
            log.warning("ignoring a record without key in %s at %s", self.topic, msg.offset())
            return
        try:
            connector, partition = parse_offset_key(raw_key)
            offset = parse_offset_value(msg.value())
        except OffsetError as exc:
            # Connect skips records it cannot parse too; they are not ours to interpret.
            log.warning(
                "ignoring record %s[%s]@%s: %s", self.topic, msg.partition(), msg.offset(), exc
            )
            return
        key = offset_key(connector, partition)
        self._raw_keys[key] = raw_key
        self._table.apply(key, connector, partition, offset)

    def _close_clients(self) -> None:
        producer, consumer = self._producer, self._consumer
        self._producer = self._consumer = None
        self._admin = None
        if producer is not None:
            remaining = producer.flush(self.timeout_s)
            if remaining:
                log.warning("%d offset writes to %s were not acknowledged", remaining, self.topic)
        if consumer is not None:
            consumer.close()
