"""Kafka's plain converters in tidemark write the bytes Kafka Connect's write.

Each run sets ``key.converter``/``value.converter`` to Kafka's own classes on both sides:
Debezium's PostgreSQL connector inside a real Kafka Connect 4.1.1 worker, and tidemark, over
the same tables (``smt_parity.py``: snapshot, inserts, updates to and from NULL, a primary
key change, deletes; rows inserted in key order, the order both snapshots read them in).
Records that are not JSON are compared as their text or their hex
bytes, so every byte counts.

* ``StringConverter`` for keys (Connect's ``Struct{id=1}``) and for unwrapped rows with every
  kind of value Java prints differently from Python: decimals (``BigDecimal.toString``,
  scientific below 1e-6), doubles and reals (``Double``/``Float.toString``), booleans, bytes
  (a ``ByteBuffer``'s description, not its content), arrays, text beyond the BMP, nulls left
  out of a struct. (Not a ``numeric`` without scale: Debezium's ``VariableScaleDecimal`` holds
  a ``byte[]``, which Java prints with its identity hash, different in every run.)
* ``LongConverter`` keys (``ExtractField$Key`` of a bigint) with ``ByteArrayConverter``
  values (``ExtractField$Value`` of a bytea).
* ``IntegerConverter`` keys with ``DoubleConverter`` values.

Never skipped: if Kafka Connect or its Java runtime cannot be resolved, the test fails.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.integration.conftest import PgInfo
from tests.integration.smt_parity import Scenario, run_parity

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

_CONVERTERS = "org.apache.kafka.connect.converters."
_STRING = "org.apache.kafka.connect.storage.StringConverter"
_UNWRAP = "io.debezium.transforms.ExtractNewRecordState"
#: Debezium 3.x's event shape (its ZonedTimestamp fraction digits show in the text)
V3 = {"envelope.version": "3"}

STRING_TABLES = {
    "cv_s": "id int PRIMARY KEY, txt text, n bigint, s smallint, d numeric(12,4), "
    "v numeric(40,7), f double precision, r real, b boolean, raw bytea, at timestamp, "
    "atz timestamptz, day date, ints int[], tags text[]",
}
STRING_ROWS = [
    "INSERT INTO cv_s VALUES "
    "(1, 'héllo 😀', 9000000000, -7, 12.5, 0.0000001, 1e10, 2.5, true, '\\x00ff10', "
    "'2024-01-05 10:20:30.123456', '2024-01-05 10:20:30+00', '2024-01-05', "
    "'{1,2,3}', '{a,\"b c\"}'), "
    "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), "
    "(3, '', 0, 0, -0.0001, 123456789012345678901234567890.5, 0.1, -1.25, false, '', "
    "'1969-12-31 23:59:59.9995', '1900-01-01 00:00:00+00', '1960-02-29', '{}', '{}')",
]
STRING_CHANGES: list[list[str]] = [
    ["UPDATE cv_s SET txt = 'x', d = 99999999.9999, f = -0.0, r = 3.4e38 WHERE id = 2"],
    ["UPDATE cv_s SET txt = NULL, raw = NULL, ints = '{NULL,5}' WHERE id = 1"],
    ["UPDATE cv_s SET id = 30 WHERE id = 3"],
    ["DELETE FROM cv_s WHERE id = 2"],
    ["INSERT INTO cv_s (id, txt) VALUES (9999, 'sentinel')"],
]

STRING_CHAIN = {
    "key.converter": _STRING,
    "value.converter": _STRING,
    "transforms": "unwrap",
    "transforms.unwrap.type": _UNWRAP,
    "transforms.unwrap.delete.tombstone.handling.mode": "rewrite",
}


def test_string_converter_writes_what_kafka_connect_writes(
    postgres: PgInfo, kafka: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    scenario = Scenario(
        STRING_TABLES,
        STRING_ROWS,
        STRING_CHANGES,
        3,
        1,
        tidemark_config=V3,
        sentinel=b"txt=sentinel",
    )
    diffs = run_parity(
        postgres, kafka, tmp_path, request, STRING_CHAIN, scenario, jvm="kafka-connect"
    )
    assert not diffs, "StringConverter records differ:\n\n" + "\n\n".join(diffs)


NUMBER_TABLES = {
    "cv_n": "id bigint PRIMARY KEY, payload bytea, label text",
    "cv_i": "id int PRIMARY KEY, amount double precision, label text",
}


def _number_chain(key: str, value: str, field: str) -> dict[str, str]:
    return {
        "key.converter": _CONVERTERS + key,
        "value.converter": _CONVERTERS + value,
        "transforms": "unwrap,key,value",
        "transforms.unwrap.type": _UNWRAP,
        "transforms.key.type": "org.apache.kafka.connect.transforms.ExtractField$Key",
        "transforms.key.field": "id",
        "transforms.value.type": "org.apache.kafka.connect.transforms.ExtractField$Value",
        "transforms.value.field": field,
    }


@pytest.mark.parametrize(
    ("table", "key", "value", "field", "rows", "changes", "sentinel"),
    [
        (
            "cv_n",
            "LongConverter",
            "ByteArrayConverter",
            "payload",
            [
                "INSERT INTO cv_n VALUES (-5000000000, '\\xdeadbeef', 'b'), (1, '\\x00', 'a'), "
                "(9223372036854775807, '', 'c')"
            ],
            [
                ["UPDATE cv_n SET payload = '\\x0102' WHERE id = 1"],
                ["UPDATE cv_n SET payload = NULL WHERE id = -5000000000"],
                ["DELETE FROM cv_n WHERE id = 9223372036854775807"],
                ["INSERT INTO cv_n VALUES (9999, 'sentinel', 'sentinel')"],
            ],
            b"sentinel",
        ),
        (
            "cv_i",
            "IntegerConverter",
            "DoubleConverter",
            "amount",
            ["INSERT INTO cv_i VALUES (-2147483648, -0.0, 'b'), (1, 1.5, 'a'), (3, 1e300, 'c')"],
            [
                ["UPDATE cv_i SET amount = 'NaN' WHERE id = 1"],
                ["UPDATE cv_i SET amount = NULL WHERE id = 3"],
                ["DELETE FROM cv_i WHERE id = -2147483648"],
                ["INSERT INTO cv_i VALUES (9999, 9999.5, 'sentinel')"],
            ],
            struct.pack(">d", 9999.5),
        ),
    ],
)
def test_number_and_byte_array_converters_write_what_kafka_connect_writes(
    postgres: PgInfo,
    kafka: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    table: str,
    key: str,
    value: str,
    field: str,
    rows: list[str],
    changes: list[list[str]],
    sentinel: bytes,
) -> None:
    scenario = Scenario(
        {table: NUMBER_TABLES[table]}, rows, changes, 3, 1, tidemark_config=V3, sentinel=sentinel
    )
    diffs = run_parity(
        postgres,
        kafka,
        tmp_path,
        request,
        _number_chain(key, value, field),
        scenario,
        jvm="kafka-connect",
    )
    assert not diffs, f"{key}/{value} records differ:\n\n" + "\n\n".join(diffs)
