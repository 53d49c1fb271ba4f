"""PostgreSQL → Avro (Confluent wire format) → Kafka, with schemas registered in the
Confluent-compatible registry stand-in (no real Confluent Schema Registry or Apicurio can be
installed here). Records are decoded independently of tidemark's converter: magic byte,
schema id, the schema fetched over the registry's REST API, fastavro."""

from __future__ import annotations

import io
import struct
import uuid
from collections.abc import Iterator

import fastavro
import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition

from cdc.converters.registry_server import RegistryServer
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    with PgHarness(postgres, kafka, f"ta_{uuid.uuid4().hex[:8]}") as harness:
        yield harness


def decode(registry: str, raw: bytes) -> tuple[int, dict[str, object]]:
    assert raw[0] == 0, "Confluent wire format starts with magic byte 0"
    (schema_id,) = struct.unpack(">I", raw[1:5])
    doc = httpx.get(f"{registry}/schemas/ids/{schema_id}", timeout=10).json()
    schema = fastavro.parse_schema(__import__("json").loads(doc["schema"]))
    return schema_id, fastavro.schemaless_reader(io.BytesIO(raw[5:]), schema)  # type: ignore[return-value]


def avro_converters(registry_url: str) -> dict[str, str]:
    """A connector's keys and values through the Avro converter and the registry at the URL."""
    avro = "io.confluent.connect.avro.AvroConverter"
    return {
        "key.converter": avro,
        "value.converter": avro,
        "key.converter.schema.registry.url": registry_url,
        "value.converter.schema.registry.url": registry_url,
    }


def test_avro_events_decode_with_the_registered_schema(h: PgHarness) -> None:
    h.sql(
        "CREATE TABLE av (id int PRIMARY KEY, name text NOT NULL, price numeric(8,2), "
        'ts timestamp, "weird-col" int)',
        "INSERT INTO av VALUES (1, 'a', 12.34, '2018-06-20 15:13:16.945104', 5)",
    )
    registry = RegistryServer().start()
    try:
        cfg = h.config(table_include_list="public.av", snapshot_mode="initial")
        cfg.update(avro_converters(registry.url))
        topic = h.topic(cfg, "av")
        with h.running(cfg) as run:
            h.wait_streaming(run)
            h.sql("UPDATE av SET name = 'b' WHERE id = 1", "DELETE FROM av WHERE id = 1")
            consumer = Consumer({"bootstrap.servers": h.kafka, "group.id": uuid.uuid4().hex})
            consumer.assign([TopicPartition(topic, 0, 0)])
            msgs = []
            while len(msgs) < 4:
                m = consumer.poll(15)
                assert m is not None, f"only {len(msgs)} records"
                msgs.append(m)
            consumer.close()
        subjects = httpx.get(f"{registry.url}/subjects", timeout=10).json()
        assert sorted(subjects) == [f"{topic}-key", f"{topic}-value"]
        values = [decode(registry.url, m.value()) if m.value() else None for m in msgs]
        keys = [decode(registry.url, m.key())[1] for m in msgs]
    finally:
        registry.close()
    assert keys == [{"id": 1}] * 4
    (sid, snap), (_, upd), (_, dele), tomb = values  # type: ignore[misc]
    assert values[1] and values[1][0] == sid  # same schema id for every event of the table
    assert snap["op"] == "r" and upd["op"] == "u" and dele["op"] == "d" and tomb is None
    after = snap["after"]
    from decimal import Decimal

    assert after["price"] == Decimal("12.34")
    assert after["ts"] == 1529507596945104
    assert after["weird_col"] == 5  # sanitize.field.names defaults to true with Avro
    assert upd["after"]["name"] == "b" and dele["before"]["id"] == 1
    assert snap["source"]["connector"] == "postgresql"
