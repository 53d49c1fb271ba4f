"""The Spark apply job reads Kafka through the broker's SASL_SSL (SCRAM-SHA-512) listener, then
resumes from its checkpoint through the mutual-TLS listener.

The job's Kafka source is Spark's own Java client, so it gets the Java names: the settings a user
writes under ``kafka.options`` in the job's YAML (``security.protocol``, ``sasl.mechanism``,
``sasl.jaas.config``, PEM trust and key stores given as files or inline) must reach it as
``kafka.``-prefixed source options. The records themselves are read by the workers' librdkafka
consumers (``kafka.reader: auto``, the first run) with the same settings translated, or by
Spark's client (``kafka.reader: spark``, the second run). The bootstrap address is
a secured listener only, so a setting that is dropped on the way leaves the job unable to read a
single record; a wrong password or a CA that did not sign the broker's certificate must fail the
job with Kafka's error instead of retrying forever.

Runs against the local stack's SASL_SSL listener (``tidemark dev up kafka``). To run it beside a
shared Kafka started before the stack served TLS, give it a private stack:
``TIDEMARK_DEV_HOME=$(mktemp -d) TIDEMARK_KAFKA_PORT=<free port, +1..+3 free too> pytest ...``;
the session fixture starts (and stops) that broker with its own CA.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from cdc.apply.config import load
from cdc.apply.job import ApplyJob
from cdc.apply.synthetic import SyntheticTable, pg
from tests.integration.test_apply_acceptance import data_rows, items
from tests.integration.test_tls_kafka import tls_kafka
from worker.dev import Stack
from worker.dev.kafka import SASL_MECHANISM, SASL_PASSWORD, SASL_USER, KafkaService
from worker.dev.tls import ensure_tls

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def jaas(password: str) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{SASL_USER}" password="{password}";'
    )


def job_yaml(
    base: Path,
    bootstrap: str,
    topic: str,
    options: dict[str, str],
    name: str = "job",
    reader: str = "auto",
) -> Path:
    """The job's YAML as a user writes it; JSON is YAML, and keeps the JAAS quotes intact."""
    doc = {
        "kafka": {
            "bootstrap.servers": bootstrap,
            "topics": [topic],
            "options": options,
            "reader": reader,
        },
        "target.path": str(base / "lake"),
        "checkpoint.location": str(base / "checkpoint"),
        "trigger": "available-now",
    }
    path = base / f"{name}.yaml"
    path.write_text(json.dumps(doc, indent=2))
    return path


def produce(svc: KafkaService, t: SyntheticTable, *events: tuple[str, dict[str, Any], int]) -> None:
    """Debezium JSON records written over the SASL_SSL listener as well."""
    producer = Producer({**svc.sasl_ssl_client(), "linger.ms": 0})
    for op, row, lsn in events:
        key, value = t.record(op, row, pg(lsn))
        producer.produce(t.topic, key=key, value=value)
    assert producer.flush(30) == 0, "records not acknowledged by the SASL_SSL listener"


def test_apply_job_reads_kafka_over_sasl_ssl_scram_then_mtls(
    stack: Stack, spark: Any, tmp_path: Path
) -> None:
    svc = tls_kafka(stack)
    t = items("sasl")
    produce(
        svc,
        t,
        ("c", {"id": 1, "name": "one", "qty": 1}, 100),
        ("c", {"id": 2, "name": "two", "qty": 2}, 110),
        ("c", {"id": 3, "name": "three", "qty": 3}, 120),
        ("u", {"id": 2, "name": "two+", "qty": 20}, 130),
    )
    ca = svc.tls.ca_cert
    # First run: the truststore as a PEM file; names without the `kafka.` prefix.
    first = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SASL_MECHANISM,
        "sasl.jaas.config": jaas(SASL_PASSWORD),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca),
    }
    job = ApplyJob(spark, load(job_yaml(tmp_path, svc.sasl_ssl_bootstrap, t.topic, first)))
    job.run(timeout=120)
    table = job.cfg.table_location(t.topic.replace(".", "_"))
    assert data_rows(spark.read.format("delta").load(table)) == [
        {"id": 1, "name": "one", "qty": 1},
        {"id": 2, "name": "two+", "qty": 20},
        {"id": 3, "name": "three", "qty": 3},
    ]
    assert sum(r.events for r in job.reports) == 4
    # kafka.reader auto: the workers read the batch themselves, with the Java settings
    # translated for librdkafka (SCRAM credentials from the JAAS line, the PEM CA file)
    assert {r.reader for r in job.reports} == {"direct"}

    # Then from the same checkpoint, through the mutual-TLS listener: CA, client key and
    # certificate inline (no file to ship to executors), names written with the `kafka.` prefix
    # as Spark's own documentation spells them. Read first by Spark's Java client (kafka.reader:
    # spark), then by the workers' librdkafka consumers (direct: the inline CA, key and chain
    # translated to ssl.ca.pem, ssl.key.pem and ssl.certificate.pem).
    second = {
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.certificates": ca.read_text(),
        "kafka.ssl.keystore.type": "PEM",
        "kafka.ssl.keystore.key": svc.tls.client_key.read_text(),
        "kafka.ssl.keystore.certificate.chain": svc.tls.client_cert.read_text(),
    }
    Event = tuple[str, dict[str, Any], int]
    runs: list[tuple[str, list[Event], list[tuple[int, str | None, int]]]] = [
        (
            "spark",
            [("d", {"id": 1, "name": "one", "qty": 1}, 200), ("c", {"id": 4, "qty": 4}, 210)],
            [(2, "two+", 20), (3, "three", 3), (4, None, 4)],
        ),
        (
            "direct",
            [("u", {"id": 3, "name": "3+", "qty": 30}, 300), ("c", {"id": 5, "qty": 5}, 310)],
            [(2, "two+", 20), (3, "3+", 30), (4, None, 4), (5, None, 5)],
        ),
    ]
    for reader, events, expected in runs:
        produce(svc, t, *events)
        path = job_yaml(tmp_path, svc.mtls_bootstrap, t.topic, second, reader, reader=reader)
        job = ApplyJob(spark, load(path))
        job.run(timeout=120)
        assert {r.reader for r in job.reports} == {reader}
        assert data_rows(spark.read.format("delta").load(table)) == [
            {"id": i, "name": n, "qty": q} for i, n, q in expected
        ]
        assert sum(r.events for r in job.reports) == 2  # resumed, nothing read twice


@pytest.mark.parametrize(
    ("case", "error"),
    [
        ("password", r"SaslAuthenticationException: Authentication failed .*invalid credentials"),
        ("ca", r"SslAuthenticationException: SSL handshake failed"),
    ],
    ids=["wrong-password", "foreign-ca"],
)
def test_apply_job_fails_fast_on_a_wrong_password_or_a_foreign_ca(
    stack: Stack, spark: Any, tmp_path: Path, case: str, error: str
) -> None:
    """Kafka's own error ends the query (no endless retry) and nothing is written."""
    svc = tls_kafka(stack)
    t = items(f"saslbad{case}")
    produce(svc, t, ("c", {"id": 1, "name": "one", "qty": 1}, 100))
    # A CA of its own, that did not sign the broker's certificate.
    foreign_ca = ensure_tls(tmp_path / "other-ca").ca_cert
    options = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SASL_MECHANISM,
        "sasl.jaas.config": jaas("not-the-password" if case == "password" else SASL_PASSWORD),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(foreign_ca if case == "ca" else svc.tls.ca_cert),
    }
    job = ApplyJob(spark, load(job_yaml(tmp_path, svc.sasl_ssl_bootstrap, t.topic, options)))
    with pytest.raises(Exception, match=error) as info:
        job.run(timeout=120)
    assert SASL_PASSWORD not in str(info.value)
    assert not (tmp_path / "lake").exists()
    assert not list((tmp_path / "checkpoint" / "offsets").glob("[0-9]*"))  # no batch planned
