"""The apply job reading Avro records (Confluent wire format) through a schema registry.

The registry is tidemark's in-process Confluent-compatible stand-in (no Confluent Schema
Registry can be installed here). Records are made the way a connector writes them: the JSON
record is read back into Connect data and written with the Avro converter, so each Avro record
has a JSON twin and the parser must see the same change in both.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from cdc.apply.config import ConfigError, from_mapping
from cdc.apply.events import BadEvent, Change, Parser, ParseSettings, Skipped
from cdc.apply.synthetic import SyntheticTable, col, decimal_col, pg
from cdc.converters.avro import AvroConverter
from cdc.converters.avro_json import RegistrySettings, close_decoders, decoder
from cdc.converters.json import JsonConverter
from cdc.converters.registry_server import RegistryServer
from cdc.converters.schema_registry import SchemaRegistryClient

PH = "__debezium_unavailable_value"
TABLE = SyntheticTable(
    "customers",
    [
        ("id", col("int32", optional=False)),
        ("name", col("string")),
        ("doc", col("string")),
        ("blob", col("bytes")),
        ("price", decimal_col(10, 2)),
        ("born", col("int32", name="io.debezium.time.Date")),
        ("seen", col("int64", name="io.debezium.time.MicroTimestamp")),
    ],
    ["id"],
)
ROW = {
    "id": 7,
    "name": "Anne",
    "doc": "x" * 10,
    "blob": "AQI=",
    "price": "BNI=",
    "born": 18262,
    "seen": 1529507596945104,
}


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryServer]:
    with RegistryServer() as server:
        yield server


def to_avro(
    registry: RegistryServer, topic: str, key: bytes, value: bytes | None
) -> tuple[bytes, bytes | None]:
    """The JSON record re-serialised by the Avro converter, as a connector configured with
    ``value.converter=io.confluent.connect.avro.AvroConverter`` would have written it."""
    reader = JsonConverter({"schemas.enable": True})
    out = []
    with SchemaRegistryClient(registry.url) as client:
        for raw, is_key in ((key, True), (value, False)):
            schema, data = reader.to_connect(topic, raw)
            out.append(AvroConverter(client, is_key=is_key).from_connect(topic, schema, data))
    akey, avalue = out
    assert akey is not None and akey[0] == 0
    return akey, avalue


def settings(registry: RegistryServer, **kw: object) -> ParseSettings:
    return ParseSettings(registry=RegistrySettings(registry.url), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("op", ["r", "c", "u", "d"])
def test_avro_record_parses_to_the_same_change_as_its_json_twin(
    registry: RegistryServer, op: str
) -> None:
    key, value = TABLE.record(op, ROW, pg(900, tx=12), before=ROW if op in "ud" else None)
    akey, avalue = to_avro(registry, TABLE.topic, key, value)
    from_json = Parser(ParseSettings()).parse(TABLE.topic, 0, 5, key, value)
    from_avro = Parser(settings(registry)).parse(TABLE.topic, 0, 5, akey, avalue)
    assert isinstance(from_json, Change), from_json
    assert isinstance(from_avro, Change), from_avro
    for attr in ("table", "op", "key", "row", "pos", "tx_id", "snapshot", "position"):
        assert getattr(from_avro, attr) == getattr(from_json, attr), attr
    assert from_avro.shape.types == from_json.shape.types
    assert from_avro.row["price"] == "12.34" and from_avro.row["born"] == "2020-01-01"
    assert from_avro.shape.types["seen"] == "timestamp_ntz"


def test_avro_toast_placeholder_is_recognised(registry: RegistryServer) -> None:
    key, value = TABLE.record("u", {**ROW, "doc": PH}, pg(901))
    akey, avalue = to_avro(registry, TABLE.topic, key, value)
    ch = Parser(settings(registry)).parse(TABLE.topic, 0, 1, akey, avalue)
    assert isinstance(ch, Change) and ch.unavailable == frozenset({"doc"})


def test_avro_tombstone_is_skipped(registry: RegistryServer) -> None:
    key, _ = TABLE.record("d", ROW, pg(902))
    akey, _ = to_avro(registry, TABLE.topic, key, None)
    assert isinstance(Parser(settings(registry)).parse(TABLE.topic, 0, 2, akey, None), Skipped)


def test_avro_without_registry_is_bad_input_naming_the_setting(registry: RegistryServer) -> None:
    key, value = TABLE.record("c", ROW, pg(903))
    akey, avalue = to_avro(registry, TABLE.topic, key, value)
    bad = Parser(ParseSettings()).parse(TABLE.topic, 3, 44, akey, avalue)
    assert isinstance(bad, BadEvent)
    assert "schema.registry.url is not set" in bad.error and "schema id" in bad.error
    assert bad.describe().startswith(f"{TABLE.topic}[3]@44")


def test_unknown_schema_id_and_corrupt_body_are_bad_input(registry: RegistryServer) -> None:
    key, value = TABLE.record("c", ROW, pg(904))
    akey, avalue = to_avro(registry, TABLE.topic, key, value)
    assert avalue is not None
    parser = Parser(settings(registry))
    unknown = parser.parse(TABLE.topic, 0, 1, akey, b"\x00\x00\x0f\x42\x40" + avalue[5:])
    assert isinstance(unknown, BadEvent) and "schema id 1000000" in unknown.error
    corrupt = parser.parse(TABLE.topic, 0, 2, akey, avalue[:9])
    assert isinstance(corrupt, BadEvent) and "not readable as Avro" in corrupt.error


def test_json_record_under_input_format_avro_is_bad_input(registry: RegistryServer) -> None:
    key, value = TABLE.record("c", ROW, pg(905))
    bad = Parser(settings(registry, input_format="avro")).parse(TABLE.topic, 0, 1, key, value)
    assert isinstance(bad, BadEvent) and "input.format is avro" in bad.error
    # auto (the default) reads both formats from one topic
    assert isinstance(Parser(settings(registry)).parse(TABLE.topic, 0, 1, key, value), Change)


def test_unreachable_registry_fails_instead_of_quarantining() -> None:
    """A registry outage is not bad data: the batch must fail (Spark retries it) rather than
    send every record of the batch to quarantine."""
    key, value = TABLE.record("c", ROW, pg(906))
    with RegistryServer() as server:
        akey, avalue = to_avro(server, TABLE.topic, key, value)
        url = server.url
    parser = Parser(ParseSettings(registry=RegistrySettings(url, timeout_s=2)))
    with pytest.raises(ConnectionError):
        parser.parse(TABLE.topic, 0, 1, akey, avalue)


def test_config_keys_for_avro_are_validated() -> None:
    base = {
        "kafka": {"bootstrap.servers": "b:9092", "topics": ["t"]},
        "target.path": "/tmp/x",
        "checkpoint.location": "/tmp/c",
    }
    with pytest.raises(ConfigError, match=r"schema\.registry\.url is not set"):
        from_mapping({**base, "input.format": "avro"})
    with pytest.raises(ConfigError, match=r"input\.format must be one of"):
        from_mapping({**base, "input.format": "protobuf"})
    with pytest.raises(ConfigError, match="user:password"):
        from_mapping(
            {
                **base,
                "schema.registry.url": "http://r",
                "schema.registry.basic.auth.user.info": "nopassword",
            }
        )
    cfg = from_mapping({**base, "input.format": "avro", "schema.registry.url": "http://r:8081"})
    assert cfg.input_format == "avro" and cfg.registry_url == "http://r:8081"


# A process that decoded Avro and exits: the process-wide decoder's registry connection must be
# closed at exit, not reported unclosed (it was, at the end of every full test run).
EXITING_CHILD = """
from cdc.converters.avro_json import RegistrySettings, close_decoders, decoder
from cdc.converters.registry_server import RegistryServer
from tests.unit.test_apply_avro_input import ROW, TABLE, pg, to_avro

with RegistryServer() as server:
    key, value = TABLE.record("c", ROW, pg(1))
    akey, _ = to_avro(server, TABLE.topic, key, value)
    decoder(RegistrySettings(server.url)).to_json(TABLE.topic, akey, is_key=True)
    print("decoded", flush=True)
"""


def _exit_after_decoding(extra: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", EXITING_CHILD + extra],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_decoder_closes_its_registry_connection_at_exit() -> None:
    clean = _exit_after_decoding()
    assert clean.returncode == 0 and clean.stdout == "decoded\n", clean.stderr
    assert "ResourceWarning" not in clean.stderr, clean.stderr
    # the check sees the leak when the decoders are not closed at exit
    leaked = _exit_after_decoding("import atexit; atexit.unregister(close_decoders)\n")
    assert "ResourceWarning: unclosed <socket.socket" in leaked.stderr, leaked.stderr


def test_closed_decoders_are_replaced_on_next_use(registry: RegistryServer) -> None:
    key, value = TABLE.record("c", ROW, pg(907))
    akey, _ = to_avro(registry, TABLE.topic, key, value)
    first = decoder(RegistrySettings(registry.url))
    close_decoders()
    second = decoder(RegistrySettings(registry.url))
    assert second is not first
    assert orjson.loads(second.to_json(TABLE.topic, akey, is_key=True))["payload"] == {"id": 7}
