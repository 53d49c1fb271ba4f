"""Which reader a job uses, and the batch ranges it takes from Spark's offset log (the files as
Spark 4.2 writes them; the reading itself is tested against Kafka in
tests/integration/test_apply_direct_reader.py)."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.apply.config import ConfigError, from_mapping
from cdc.apply.direct_reader import DirectSettings
from cdc.apply.offset_log import EARLIEST, OffsetRange, batch_ranges

BASE = {
    "kafka.bootstrap.servers": "k:9092",
    "kafka.topics": ["a"],
    "target.path": "/lake",
    "checkpoint.location": "/ck",
}
META = (
    '{"batchWatermarkMs":0,"batchTimestampMs":1795788524522,'
    '"conf":{"spark.sql.shuffle.partitions":"2"}}'
)


def batch_file(offsets: str) -> str:
    return f"v1\n{META}\n{offsets}"


def log_of(files: dict[str, str]) -> Any:
    return lambda path: files.get(path)


def test_first_batch_starts_at_the_initial_offsets() -> None:
    files = {
        "/ck/sources/0/0": '\x00v1\n{"t":{"0":0,"1":7}}',
        "/ck/offsets/0": batch_file('{"t":{"0":50,"1":49}}'),
    }
    assert batch_ranges(log_of(files), "/ck/", 0) == [
        OffsetRange("t", 0, 0, 50),
        OffsetRange("t", 1, 7, 49),
    ]


def test_later_batches_start_where_the_previous_ended() -> None:
    files = {
        "/ck/offsets/4": batch_file('{"t":{"0":50,"1":49},"u":{"0":3}}'),
        "/ck/offsets/5": batch_file('{"t":{"0":80,"1":49,"2":5},"u":{"0":9},"v":{"0":2}}'),
    }
    # unchanged partitions are left out; partitions and topics new in the batch read from
    # their earliest offset, as Spark's source does
    assert batch_ranges(log_of(files), "/ck", 5) == [
        OffsetRange("t", 0, 50, 80),
        OffsetRange("t", 2, EARLIEST, 5),
        OffsetRange("u", 0, 3, 9),
        OffsetRange("v", 0, EARLIEST, 2),
    ]


@pytest.mark.parametrize(
    "files",
    [
        {},  # no log at all (a batch of another query)
        {"/ck/offsets/5": batch_file('{"t":{"0":80}}')},  # the start is missing
        {  # a log version this code does not know
            "/ck/offsets/4": batch_file('{"t":{"0":50}}'),
            "/ck/offsets/5": f'v2\n{META}\n{{"t":{{"0":80}}}}',
        },
        {  # two sources
            "/ck/offsets/4": batch_file('{"t":{"0":50}}'),
            "/ck/offsets/5": batch_file('{"t":{"0":80}}\n{"t":{"0":80}}'),
        },
        {  # not a Kafka offset
            "/ck/offsets/4": batch_file('{"t":{"0":50}}'),
            "/ck/offsets/5": batch_file('{"logOffset":3}'),
        },
        {  # offsets went back (a topic re-created): Spark's source decides what that means
            "/ck/offsets/4": batch_file('{"t":{"0":50}}'),
            "/ck/offsets/5": batch_file('{"t":{"0":20}}'),
        },
    ],
)
def test_a_log_it_cannot_read_leaves_the_batch_to_spark(files: dict[str, str]) -> None:
    assert batch_ranges(log_of(files), "/ck", 5) is None


def test_readers_chosen_by_the_config() -> None:
    assert from_mapping(BASE).direct_options() == ()
    portable = {"client.id": "apply", "kafka.isolation.level": "read_committed"}
    assert from_mapping({**BASE, "kafka.options": portable}).direct_options() == (
        ("client.id", "apply"),
        ("isolation.level", "read_committed"),
    )
    assert from_mapping({**BASE, "kafka.reader": "spark"}).direct_options() is None
    # the Java security names the worker translates for librdkafka are translated here too
    scram = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'x.ScramLoginModule required username="u" password="p";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.crt",
    }
    assert from_mapping({**BASE, "kafka.options": scram}).direct_options() == (
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.password", "p"),
        ("sasl.username", "u"),
        ("security.protocol", "SASL_SSL"),
        ("ssl.ca.location", "/ca.crt"),
    )
    # auto: Spark's own client reads what librdkafka has no equivalent of
    kerberos = {"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"}
    callback = {"sasl.login.callback.handler.class": "com.example.Handler"}
    for java_only in (kerberos, callback):
        assert from_mapping({**BASE, "kafka.options": java_only}).direct_options() is None
    # ... unless the librdkafka settings are given as well
    both = from_mapping(
        {
            **BASE,
            "kafka": {
                "options": kerberos,
                "direct.options": {"security.protocol": "SASL_SSL", "sasl.username": "u"},
            },
        }
    )
    assert both.direct_options() == (("sasl.username", "u"), ("security.protocol", "SASL_SSL"))
    with pytest.raises(ConfigError, match=r"kafka\.reader is direct but kafka\.options sets"):
        from_mapping({**BASE, "kafka.reader": "direct", "kafka.options": callback})
    with pytest.raises(ConfigError, match=r"kafka\.reader must be one of auto, spark, direct"):
        from_mapping({**BASE, "kafka.reader": "jvm"})


def test_direct_consumers_read_uncommitted_by_default_as_spark_does() -> None:
    conf = DirectSettings("k:9092").consumer_config()
    assert conf["isolation.level"] == "read_uncommitted"
    assert conf["enable.auto.commit"] is False and conf["auto.offset.reset"] == "error"
    conf = DirectSettings("k:9092", (("isolation.level", "read_committed"),)).consumer_config()
    assert conf["isolation.level"] == "read_committed"


def test_the_direct_settings_do_not_show_their_secrets() -> None:
    settings = DirectSettings("k:9092", (("sasl.password", "s3cret"),))
    assert "s3cret" not in repr(settings) and "s3cret" not in str(settings)
    assert settings.consumer_config()["sasl.password"] == "s3cret"
    cfg = from_mapping(
        {
            **BASE,
            "kafka.options": {"sasl.jaas.config": 'x.PlainLoginModule required password="s3cret";'},
            "kafka.direct.options": {"sasl.password": "s3cret"},
            "schema.registry.url": "http://r",
            "schema.registry.basic.auth.user.info": "u:s3cret",
        }
    )
    assert "s3cret" not in repr(cfg)
