"""Keyed records land in the partition Java's default partitioner picks (murmur2 of the key
bytes), the one Debezium's producer would pick: a topic written first by Debezium and then
by tidemark keeps each key in one partition, so per-key order holds across the switch."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cdc.offsets.kafka import murmur2_partition
from cdc.sinks.kafka import KafkaSink

PARTITIONS = 5


def test_keyed_records_go_to_the_java_partitioners_partition(kafka: str) -> None:
    topic = f"tm_partitioning_{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[
        topic
    ].result(30)
    try:
        sink = KafkaSink({"bootstrap.servers": kafka}, create_topics=False)
        keys = [
            b'{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,'
            + b'"field":"id"}],"optional":false,"name":"srv.public.t.Key"},"payload":{"id":'
            + str(i).encode()
            + b"}}"
            for i in range(200)
        ]
        for key in keys:
            sink.send(topic, key, b"{}", None)
        assert sink.flush(30) == 0 and sink.error is None

        consumer = Consumer(
            {
                "bootstrap.servers": kafka,
                "group.id": f"tm-partitioning-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        seen: dict[bytes, int] = {}
        try:
            for _ in range(600):
                if len(seen) == len(keys):
                    break
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                seen[msg.key()] = msg.partition()
        finally:
            consumer.close()
        assert len(seen) == len(keys)
        assert {k: murmur2_partition(k, PARTITIONS) for k in keys} == seen
        assert len(set(seen.values())) == PARTITIONS  # the keys spread over every partition
    finally:
        admin.delete_topics([topic])
