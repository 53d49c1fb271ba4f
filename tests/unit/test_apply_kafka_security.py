"""The apply job's Kafka source (Spark's Java client) gets the security settings of
``kafka.options`` as ``kafka.``-prefixed options, Java names unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.apply.config import ConfigError, from_mapping
from cdc.apply.job import ApplyJob

JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="tidemark" password="s3cret";'
)


class FakeReader:
    """Records the options a streaming Kafka source is built with."""

    def __init__(self) -> None:
        self.options: dict[str, str] = {}
        self.readStream = self

    def format(self, name: str) -> FakeReader:
        assert name == "kafka"
        return self

    def option(self, key: str, value: str) -> FakeReader:
        self.options[key] = value
        return self

    def load(self) -> Any:
        return self

    def select(self, *columns: Any) -> Any:
        return self


def test_security_options_reach_the_kafka_source() -> None:
    cfg = from_mapping(
        {
            "kafka": {
                "bootstrap.servers": "127.0.0.1:19094",
                "topics": ["a.b.c"],
                "topics.exclude": "",
                "options": {
                    "security.protocol": "SASL_SSL",
                    "sasl.mechanism": "SCRAM-SHA-512",
                    "sasl.jaas.config": JAAS,
                    "ssl.truststore.type": "PEM",
                    "kafka.ssl.truststore.location": "/tls/ca.crt",
                },
            },
            "target.path": "/lake",
            "checkpoint.location": "/ckpt",
        }
    )
    spark = FakeReader()
    ApplyJob(spark, cfg).source()
    assert {k: v for k, v in spark.options.items() if k.startswith("kafka.")} == {
        "kafka.bootstrap.servers": "127.0.0.1:19094",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": JAAS,
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/tls/ca.crt",
    }


def test_an_option_given_with_and_without_the_prefix_is_refused() -> None:
    doc = {
        "kafka": {
            "bootstrap.servers": "127.0.0.1:19094",
            "topics": ["a.b.c"],
            "options": {
                "sasl.jaas.config": JAAS,
                "kafka.sasl.jaas.config": JAAS.replace("s3cret", "other"),
            },
        },
        "target.path": "/lake",
        "checkpoint.location": "/ckpt",
    }
    with pytest.raises(ConfigError, match=r"kafka\.options sets 'sasl\.jaas\.config' twice"):
        from_mapping(doc)
