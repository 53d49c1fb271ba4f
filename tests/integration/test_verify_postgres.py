"""`tidemark verify` against real PostgreSQL and Kafka: a captured table compares equal (also
while capture runs), then hand-made faults are named by key: a Kafka event for a key that
does not exist (extra), a row deleted while capture was stopped (extra), an older version
produced after the newest (stale), a tombstone for a live row (missing)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from confluent_kafka import Producer

from cdc.verify.compare import Options
from cdc.verify.kafka_target import KafkaTarget
from connectors.postgres.verify import verify_side
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness, read_topic
from worker.cli import main
from worker.verify_cli import verify

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

DDL = """CREATE TABLE vt (
    id int PRIMARY KEY, name text, code char(4), price numeric(10,2), amount numeric,
    flag boolean, ts timestamp, ts3 timestamp(3), tsz timestamptz, d date, t time, b bytea,
    f float8, r real, j jsonb, big bigint, tags int[])"""
ROWS = """INSERT INTO vt SELECT g, 'name ' || g || ' é', 'c' || (g % 10), g * 1.25, g / 7.0,
    g % 2 = 0, timestamp '2024-01-01' + g * interval '61.123456 s',
    timestamp '2024-01-01' + g * interval '1.5 s', timestamptz '2024-01-01 10:00+02' + g *
    interval '1.000001 s', date '2024-01-01' + g, time '01:02:03.456789' + g * interval '1 s',
    decode(md5(g::text), 'hex'), g / 3.0, g / 3.0, jsonb_build_object('g', g, 'a', 'x'),
    g * 10000000000, ARRAY[g] FROM generate_series(1, 200) g"""


def pg_harness(postgres: PgInfo, kafka: str, prefix: str) -> Iterator[PgHarness]:
    """A database of its own for a test module; dropped with its slots afterwards."""
    with PgHarness(postgres, kafka, f"{prefix}_{uuid.uuid4().hex[:8]}") as harness:
        yield harness


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    yield from pg_harness(postgres, kafka, "tmv")


def worker_yaml(tmp_path: Path, kafka: str, cfg: dict[str, Any]) -> str:
    path = tmp_path / "worker.yaml"
    doc = {
        "worker": {"bootstrap.servers": kafka, "offset.storage": "memory"},
        "connectors": [{"name": cfg["name"], "config": cfg}],
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def produce(kafka: str, topic: str, key: dict[str, Any], value: dict[str, Any] | None) -> None:
    producer = Producer({"bootstrap.servers": kafka})
    producer.produce(
        topic, key=orjson.dumps(key), value=None if value is None else orjson.dumps(value)
    )
    assert producer.flush(30) == 0


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    code = main(["verify", *args, "--recheck-rounds", "1", "--recheck-wait", "0.5", "--json"])
    out = capsys.readouterr().out
    return code, orjson.loads(out)


def test_verify_postgres_equal_then_faults_named_by_key(
    h: PgHarness, kafka: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h.sql(DDL, ROWS, "INSERT INTO vt (id) VALUES (201)")
    cfg = h.config(table_include_list="public.vt", snapshot_mode="initial")
    topic = h.topic(cfg, "vt")
    options = Options(chunk_rows=37, recheck_rounds=20, recheck_wait=0.5)
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql(
            "UPDATE vt SET name = 'renamed', price = 0.01 WHERE id IN (5, 6)",
            "DELETE FROM vt WHERE id = 3",
            "UPDATE vt SET id = 1004 WHERE id = 4",
            "INSERT INTO vt (id, name, b) VALUES (300, 'new', '\\x00ff')",
        )
        # while capture runs: the differing chunks are re-checked until the topic caught up
        source = verify_side(cfg)
        target = KafkaTarget({"bootstrap.servers": kafka})
        try:
            (result,) = verify(source, target, ["public.vt"], options)
        finally:
            target.close()
            source.close()
        assert result.error is None
        assert result.equal, (result.missing, result.extra, result.stale)
        assert result.source_rows == result.target_rows == 201
        assert result.skipped_columns == [("tags", "integer")]
        assert result.chunks == 6

    path = worker_yaml(tmp_path, kafka, cfg)
    metrics = tmp_path / "verify.prom"
    code, doc = run_cli(
        capsys, path, "--connector", cfg["name"], "--metrics-textfile", str(metrics)
    )
    assert code == 0, doc
    assert doc["equal"] is True
    assert doc["tables"][0]["source_rows"] == 201
    labels = f'connector="{cfg["name"]}",table="public.vt",target="kafka"'
    assert f"tidemark_verify_equal{{{labels}}} 1.0" in metrics.read_text()

    # faults, capture stopped
    snapshot_5 = next(e.value for e in read_topic(kafka, topic) if e.key == {"id": 5})
    assert snapshot_5["op"] == "r"
    produce(kafka, topic, {"id": 5}, snapshot_5)  # stale: an older version after the newest
    produce(kafka, topic, {"id": 100000}, {"op": "c", "after": {"id": 100000, "name": "x"}})
    produce(kafka, topic, {"id": 7}, None)  # a tombstone for a live row: missing downstream
    h.sql("DELETE FROM vt WHERE id = 9")  # gone at the source, alive downstream: extra

    code, doc = run_cli(capsys, path, "--connector", cfg["name"], "--table", "public.vt")
    assert code == 1, doc["tables"][0]["error"]
    (table,) = doc["tables"]
    assert table["missing"] == [["7"]]
    assert table["extra"] == [["9"], ["100000"]]
    assert table["stale"] == [["5"]]
    assert table["equal"] is False

    code = main(["verify", path, "--connector", cfg["name"], "--table", "public.nope"])
    assert code == 2
    assert "--table public.nope: not a table the connector captures" in capsys.readouterr().err


def test_verify_reads_avro_topics_through_the_schema_registry(
    h: PgHarness, kafka: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A connector writing Avro (Confluent's framing, the in-process registry stand-in): the
    same comparison as for JSON, with a column whose name Avro sanitizes (``weird-col``)."""
    from confluent_kafka import Consumer, TopicPartition

    from cdc.converters.registry_server import RegistryServer
    from tests.integration.test_avro_pipeline import avro_converters

    h.sql(
        "CREATE TABLE va (id int PRIMARY KEY, name text, price numeric(8,2), ts timestamp, "
        '"weird-col" int)',
        "INSERT INTO va SELECT g, 'n' || g, g * 1.5, timestamp '2024-01-01' + g * interval "
        "'1.5 s', g FROM generate_series(1, 50) g",
    )
    registry = RegistryServer().start()
    try:
        cfg = h.config(table_include_list="public.va", snapshot_mode="initial")
        cfg.update(avro_converters(registry.url))
        topic = h.topic(cfg, "va")
        with h.running(cfg) as run:
            h.wait_streaming(run)
            h.sql("UPDATE va SET name = 'renamed', \"weird-col\" = 0 WHERE id = 5")
            h.sql("DELETE FROM va WHERE id = 6")
            path = worker_yaml(tmp_path, kafka, cfg)
            code, doc = run_cli(capsys, path, "--connector", cfg["name"])
            assert code == 0, doc
            assert doc["equal"] is True and doc["tables"][0]["source_rows"] == 49

        # capture stopped: a row gone at the source, and a tombstone for a live row
        h.sql("DELETE FROM va WHERE id = 9", "UPDATE va SET price = 0 WHERE id = 10")
        consumer = Consumer({"bootstrap.servers": kafka, "group.id": uuid.uuid4().hex})
        consumer.assign([TopicPartition(topic, 0, 0)])
        first = consumer.poll(15)
        consumer.close()
        assert first is not None and first.key()[:1] == b"\0"  # Avro-framed key of id 1
        producer = Producer({"bootstrap.servers": kafka})
        producer.produce(topic, key=first.key(), value=None)
        assert producer.flush(30) == 0
        code, doc = run_cli(capsys, path, "--connector", cfg["name"])
        assert code == 1, doc
        (table,) = doc["tables"]
        assert (table["missing"], table["extra"], table["stale"]) == ([["1"]], [["9"]], [["10"]])

        # without the registry's address the events cannot be read: said, exit code 2
        del cfg["key.converter.schema.registry.url"], cfg["value.converter.schema.registry.url"]
        cfg["key.converter"] = cfg["value.converter"] = (
            "org.apache.kafka.connect.json.JsonConverter"
        )
        path = worker_yaml(tmp_path, kafka, cfg)
        code, doc = run_cli(capsys, path, "--connector", cfg["name"])
        assert code == 2
        assert "are Avro (schema id" in doc["tables"][0]["error"]
    finally:
        registry.close()


def test_verify_follows_a_regex_router(
    h: PgHarness, kafka: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The connector routes its topics (Kafka's RegexRouter): verify compares the table with
    the routed topic, where the events are, not the one the connector names first."""
    h.sql(
        "CREATE TABLE vr (id int PRIMARY KEY, name text)",
        "INSERT INTO vr SELECT g, 'n' || g FROM generate_series(1, 30) g",
    )
    cfg = h.config(table_include_list="public.vr", snapshot_mode="initial")
    routed_topic = f"routed_{cfg['database.server.name']}_vr"
    cfg.update(
        {
            "transforms": "route",
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": r"[^.]+\.public\.(.*)",
            "transforms.route.replacement": f"routed_{cfg['database.server.name']}_$1",
        }
    )
    with h.running(cfg) as run:
        h.wait_streaming(run)
        h.sql("UPDATE vr SET name = 'renamed' WHERE id = 3", "DELETE FROM vr WHERE id = 4")
        assert len(read_topic(kafka, routed_topic, min_count=32)) >= 32
    path = worker_yaml(tmp_path, kafka, cfg)
    code, doc = run_cli(capsys, path, "--connector", cfg["name"])
    assert code == 0, doc
    (table,) = doc["tables"]
    assert table["topic"] == routed_topic and table["source_rows"] == 29
    h.sql("DELETE FROM vr WHERE id = 5")  # capture stopped: alive downstream only
    code, doc = run_cli(capsys, path, "--connector", cfg["name"])
    assert code == 1 and doc["tables"][0]["extra"] == [["5"]]
