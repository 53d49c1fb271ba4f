"""Kafka Connect's security settings reach every Kafka client, in librdkafka's terms."""

from __future__ import annotations

import pytest

from cdc.kafka_security import KafkaSecurityError, librdkafka_config
from worker.config import WorkerConfigError, parse_config
from worker.registry import Registry
from worker.worker import Worker

JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="p\\"w";'
)


def test_java_names_become_librdkafka_names() -> None:
    out = librdkafka_config(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": JAAS,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/tls/ca.crt",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/tls/client.pem",
            "ssl.endpoint.identification.algorithm": "",
            "linger.ms": 5,
        }
    )
    assert out == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": 'p"w',
        "ssl.ca.location": "/tls/ca.crt",
        "ssl.certificate.location": "/tls/client.pem",
        "ssl.key.location": "/tls/client.pem",
        "ssl.endpoint.identification.algorithm": "none",
        "linger.ms": 5,
    }


def test_inline_pem_stores_become_librdkafka_pem_settings() -> None:
    out = librdkafka_config(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----ca",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----k",
            "ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----c",
        }
    )
    assert out == {
        "security.protocol": "SSL",
        "ssl.ca.pem": "-----BEGIN CERTIFICATE-----ca",
        "ssl.key.pem": "-----BEGIN PRIVATE KEY-----k",
        "ssl.certificate.pem": "-----BEGIN CERTIFICATE-----c",
    }


def test_librdkafka_names_pass_through_and_win() -> None:
    conf = {"sasl.username": "bob", "sasl.password": "x", "ssl.ca.location": "/ca.pem"}
    assert librdkafka_config(conf) == conf
    assert librdkafka_config({**conf, "sasl.jaas.config": JAAS})["sasl.username"] == "bob"


@pytest.mark.parametrize(
    ("conf", "key"),
    [
        (
            {"ssl.truststore.location": "/ts.jks", "ssl.truststore.type": "JKS"},
            "ssl.truststore.type",
        ),
        ({"ssl.keystore.location": "/ks.jks", "ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
        (
            {"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"},
            "sasl.jaas.config",
        ),
        ({"sasl.jaas.config": 'x.PlainLoginModule required username="u";'}, "sasl.jaas.config"),
    ],
)
def test_what_librdkafka_cannot_read_is_refused_naming_the_key(
    conf: dict[str, str], key: str
) -> None:
    with pytest.raises(KafkaSecurityError) as info:
        librdkafka_config(conf)
    assert info.value.problems[0][0] == key


WORKER = """
worker:
  bootstrap.servers: 127.0.0.1:9094
  offset.storage: kafka
  security.protocol: SASL_SSL
  sasl.mechanism: SCRAM-SHA-512
  sasl.username: tidemark
  sasl.password: secret
  ssl.ca.location: /tls/ca.crt
  producer.linger.ms: 7
  consumer:
    ssl.ca.location: /tls/other-ca.crt
"""


def test_worker_level_security_reaches_every_client_with_client_overrides() -> None:
    w = parse_config(WORKER).worker
    common = {
        "bootstrap.servers": "127.0.0.1:9094",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "tidemark",
        "sasl.password": "secret",
        "ssl.ca.location": "/tls/ca.crt",
    }
    assert w.client_config("producer") == {**common, "linger.ms": 7}
    assert w.client_config("consumer") == {**common, "ssl.ca.location": "/tls/other-ca.crt"}
    assert w.client_config("admin") == common
    del common["bootstrap.servers"]
    assert w.internal_client_security() == common


def test_a_worker_kafka_schema_history_gets_the_worker_security() -> None:
    settings = parse_config(WORKER).worker
    worker = Worker(settings, store=None, worker_id="w")  # type: ignore[arg-type]
    plugin = Registry().resolve("mysql")
    out = worker.with_defaults(plugin, {"name": "inv", "connector.class": "mysql"})
    assert out["schema.history.internal"] == "kafka"
    assert out["schema.history.internal.kafka.bootstrap.servers"] == "127.0.0.1:9094"
    assert out["schema.history.internal.producer.sasl.password"] == "secret"
    assert out["schema.history.internal.producer.security.protocol"] == "SASL_SSL"
    assert out["schema.history.internal.consumer.ssl.ca.location"] == "/tls/other-ca.crt"


def test_unusable_worker_security_is_a_config_error_naming_the_key() -> None:
    text = "worker:\n  ssl.truststore.location: /ts.jks\n  ssl.truststore.type: JKS\n"
    with pytest.raises(WorkerConfigError) as info:
        parse_config(text)
    assert "ssl.truststore.type: JKS is not readable" in str(info.value)
