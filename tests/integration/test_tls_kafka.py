"""A worker whose every Kafka client goes through the broker's SASL_SSL (SCRAM-SHA-512) listener,
with one connector's producer on the mutual-TLS listener, capturing PostgreSQL
(``sslmode=verify-full``) and MariaDB (``database.ssl.mode=verify_identity``) end to end.

Settings are written the way Kafka Connect users write them (worker-level ``security.protocol``,
``sasl.jaas.config``, PEM trust/key stores, ``producer.override.*``): a client that forgets them
(the schema history's admin client, the offsets store, the heartbeat producer)
cannot reach this broker at all, so its topic stays empty and the test fails.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pymysql  # type: ignore[import-untyped]
import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.integration import pg_cleanup
from tests.integration.conftest import MySqlInfo, PgInfo
from tests.integration.test_worker_rest import free_port, wait_for
from worker.dev import Stack
from worker.dev.kafka import SASL_PASSWORD, SASL_USER, KafkaService
from worker.dev.service import port_open
from worker.rest.client import ApiError, Client

pytestmark = [pytest.mark.kafka, pytest.mark.postgres, pytest.mark.mariadb]

TIDEMARK = str(Path(sys.executable).parent / "tidemark")


def tls_kafka(stack: Stack) -> KafkaService:
    svc = stack["kafka"]
    assert isinstance(svc, KafkaService)
    for port in (svc.sasl_ssl_port, svc.mtls_port):
        assert port_open(svc.host, port), (
            f"Kafka has no TLS listener on {svc.host}:{port}: it was started before the local "
            f"stack served TLS. Restart it: tidemark dev down kafka && tidemark dev up kafka"
        )
    return svc


def topic_values(conf: dict[str, str], topic: str) -> list[bytes | None]:
    """Every record value of partition 0, read over the given (secured) listener."""
    consumer = Consumer(
        {
            **conf,
            "group.id": uuid.uuid4().hex,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        if high <= low:
            return []
        consumer.assign([TopicPartition(topic, 0, low)])
        out: list[bytes | None] = []
        deadline = time.monotonic() + 20
        while len(out) < high - low and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    out.append(m.value())
        return out
    finally:
        consumer.close()


def topic_size(conf: dict[str, str], topic: str) -> int:
    consumer = Consumer({**conf, "group.id": uuid.uuid4().hex})
    try:
        md = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return 0
        total = 0
        for p in md.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def dbs(postgres: PgInfo, mariadb: MySqlInfo) -> Iterator[str]:
    tag = uuid.uuid4().hex[:8]
    name = f"tls_{tag}"
    pg_cleanup.create_database(postgres.dsn(), name)
    with psycopg.connect(postgres.dsn(name), autocommit=True) as c:
        c.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
        c.execute("INSERT INTO items VALUES (1, 'pg-one'), (2, 'pg-two')")
    my = pymysql.connect(**mariadb.settings(), autocommit=True)
    with my.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
        cur.execute(f"CREATE TABLE {name}.items (id int PRIMARY KEY, name varchar(20))")
        cur.execute(f"INSERT INTO {name}.items VALUES (1, 'my-one'), (2, 'my-two')")
    yield name
    with my.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {name}")
    my.close()
    pg_cleanup.drop_database(postgres.dsn(), name)


def worker_yaml(
    tmp: Path, kafka: KafkaService, pg: PgInfo, my: MySqlInfo, db: str, port: int
) -> tuple[Path, dict[str, str]]:
    tls = kafka.tls
    keystore = tmp / "client-keystore.pem"  # Kafka's PEM keystore: key and chain in one file
    keystore.write_bytes(tls.client_key.read_bytes() + tls.client_cert.read_bytes())
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username=\\"{SASL_USER}\\" password=\\"{SASL_PASSWORD}\\";'
    )
    names = {
        "offsets": f"{db}-offsets",
        "my": f"{db}-my",
        "pg": f"{db}-pg",
        "connector_my": f"my-{db}",
        "connector_pg": f"pg-{db}",
    }
    worker = {
        "bootstrap.servers": kafka.sasl_ssl_bootstrap,
        "rest.port": str(port),
        "state.dir": str(tmp / "state"),
        "offset.storage": "kafka",
        "offset.storage.topic": names["offsets"],
        "offset.storage.partitions": "1",
        "offset.flush.interval.ms": "300",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": jaas,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca_cert),
    }
    mysql = {
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "database.hostname": my.host,
        "database.port": str(my.port),
        "database.user": my.user,
        "database.password": my.password,
        "database.server.id": str(random.randint(100_000, 900_000)),
        "database.ssl.mode": "verify_identity",
        "database.ssl.ca": str(tls.ca_cert),
        "database.include.list": db,
        "topic.prefix": names["my"],
        "heartbeat.interval.ms": "300",
        "poll.interval.ms": "100",
    }
    postgres = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": pg.host,
        "database.port": str(pg.port),
        "database.user": pg.user,
        "database.password": pg.password,
        "database.dbname": db,
        "database.sslmode": "verify-full",
        "database.sslrootcert": str(tls.ca_cert),
        "topic.prefix": names["pg"],
        "slot.name": f"slot_{db}",
        "publication.name": f"pub_{db}",
        "publication.autocreate.mode": "filtered",
        "table.include.list": "public.items",
        "poll.interval.ms": "100",
        # This connector's records go through the mutual-TLS listener instead.
        "producer.override.bootstrap.servers": kafka.mtls_bootstrap,
        "producer.override.security.protocol": "SSL",
        "producer.override.ssl.keystore.type": "PEM",
        "producer.override.ssl.keystore.location": str(keystore),
    }

    def block(cfg: dict[str, str], indent: str) -> list[str]:
        return [f'{indent}{k}: "{v}"' for k, v in cfg.items()]

    lines = [
        "worker:",
        *block(worker, "  "),
        "connectors:",
        f"  - name: {names['connector_my']}",
        "    config:",
        *block(mysql, "      "),
        f"  - name: {names['connector_pg']}",
        "    config:",
        *block(postgres, "      "),
    ]
    path = tmp / "worker.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path, names


def test_capture_end_to_end_over_sasl_ssl_and_mtls_with_verified_database_tls(
    stack: Stack,
    postgres: PgInfo,
    mariadb: MySqlInfo,
    kafka: str,
    dbs: str,
    tmp_path: Path,
) -> None:
    svc = tls_kafka(stack)
    port = free_port()
    yaml, names = worker_yaml(tmp_path, svc, postgres, mariadb, dbs, port)
    sasl = svc.sasl_ssl_client()
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [TIDEMARK, "run", str(yaml)], stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ)
        )
    client = Client(f"http://127.0.0.1:{port}", timeout=30)

    def log_text() -> str:
        return log_path.read_text(errors="replace")

    def status(name: str) -> dict[str, Any]:
        assert proc.poll() is None, f"worker exited:\n{log_text()}"
        try:
            code, body = client.request("GET", f"/connectors/{name}/status")
        except ApiError:
            return {}  # not listening yet
        return body if code == 200 and isinstance(body, dict) else {}

    try:
        for name in (names["connector_my"], names["connector_pg"]):
            wait_for(
                lambda n=name: (
                    bool(status(n).get("tasks"))  # type: ignore[misc]
                    and status(n)["tasks"][0]["state"] in ("RUNNING", "FAILED")
                ),
                60,
                f"{name} task",
            )
            task = status(name)["tasks"][0]
            assert task["state"] == "RUNNING", task.get("trace", "") + log_text()[-3000:]
        my_topic = f"{names['my']}.{dbs}.items"
        wait_for(lambda: topic_size(sasl, my_topic) >= 2, 60, "MariaDB snapshot events")
        my = pymysql.connect(**mariadb.settings(), autocommit=True)
        with my.cursor() as cur:
            cur.execute(f"INSERT INTO {dbs}.items VALUES (3, 'my-three')")
        my.close()
        with psycopg.connect(postgres.dsn(dbs), autocommit=True) as c:
            c.execute("INSERT INTO items VALUES (3, 'pg-three')")
        wait_for(lambda: topic_size(sasl, my_topic) >= 3, 60, "MariaDB streamed event")
        pg_topic = f"{names['pg']}.public.items"
        wait_for(lambda: topic_size(sasl, pg_topic) >= 3, 60, "PostgreSQL events")
        wait_for(
            lambda: topic_size(sasl, f"__debezium-heartbeat.{names['my']}") >= 1, 30, "heartbeat"
        )
        # Offsets are written (and read back at start) over SASL_SSL.
        wait_for(lambda: topic_size(sasl, names["offsets"]) >= 2, 30, "stored offsets")
        # Every MariaDB row arrived, snapshot and streaming.
        values = [v for v in topic_values(sasl, my_topic) if v is not None]
        assert all(b"my-" in v for v in values)
        for row in (b"my-one", b"my-two", b"my-three"):
            assert any(row in v for v in values), row
        # PostgreSQL's records went through the mTLS listener (read back over it too).
        pg_values = [v or b"" for v in topic_values(svc.mtls_client(), pg_topic)]
        for row in (b"pg-one", b"pg-two", b"pg-three"):
            assert any(row in v for v in pg_values), row
        # The schema history (MariaDB) was created and written over SASL_SSL by default.
        assert topic_size(sasl, f"{names['connector_my']}-schema-history") >= 1
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    assert "Kafka rejected" not in log_text()
