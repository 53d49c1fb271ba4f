"""Debezium's own SMTs in tidemark produce the records Debezium 3.6's produce.

Same harness as the Kafka transforms' parity test (``smt_parity.py``): one chain, written once
with Debezium's property names, runs in Debezium's PostgreSQL connector inside a real Kafka
Connect 4.1.1 worker (Debezium Server's Kafka sink would drop the partition PartitionRouting
chooses) and in tidemark over the same PostgreSQL tables (snapshot, then inserts, updates, a
primary key change and deletes); every topic is compared record by record, partition by
partition.

* ``PartitionRouting`` (``dz_p``, ``java`` hash over a text, the table name and a decimal;
  ``dz_m``, ``murmur`` over an int, a bigint and ``op``): three-partition topics, so each
  record must land in the partition Debezium put it in. Tombstones are filtered out first:
  PartitionRouting leaves them to the producer, which partitions by the key's bytes, and the
  two sides' keys differ in their schema name (the topic prefix).
* ``TimezoneConverter`` (``dz_t``: every time-based column type PostgreSQL gives, converted
  to America/New_York, with values in its spring-forward gap and autumn overlap and
  ``infinity``; ``dz_i``: an ``include.list`` of two fields of one table, to ``+05:30``).

Never skipped: if Debezium Server or its Java runtime cannot be resolved, the test fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import PgInfo
from tests.integration.smt_parity import Scenario, run_parity

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

_TOPIC_MATCHES = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"

CHAIN: dict[str, str] = {
    "predicates": "onP,onM,onT,onI,tomb",
    "predicates.onP.type": _TOPIC_MATCHES,
    "predicates.onP.pattern": r".*\.dz_p",
    "predicates.onM.type": _TOPIC_MATCHES,
    "predicates.onM.pattern": r".*\.dz_m",
    "predicates.onT.type": _TOPIC_MATCHES,
    "predicates.onT.pattern": r".*\.dz_t",
    "predicates.onI.type": _TOPIC_MATCHES,
    "predicates.onI.pattern": r".*\.dz_i",
    "predicates.tomb.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
    "transforms": "dropTombstones,routeJava,routeMurmur,tzAll,tzInc",
    "transforms.dropTombstones.type": "org.apache.kafka.connect.transforms.Filter",
    "transforms.dropTombstones.predicate": "tomb",
    "transforms.routeJava.type": "io.debezium.transforms.partitions.PartitionRouting",
    "transforms.routeJava.predicate": "onP",
    "transforms.routeJava.partition.payload.fields": "change.customer,source.table,change.amount",
    "transforms.routeJava.partition.topic.num": "3",
    "transforms.routeMurmur.type": "io.debezium.transforms.partitions.PartitionRouting",
    "transforms.routeMurmur.predicate": "onM",
    "transforms.routeMurmur.partition.payload.fields": "change.id,change.n,op,source.missing",
    "transforms.routeMurmur.partition.topic.num": "3",
    "transforms.routeMurmur.partition.hash.function": "murmur",
    "transforms.tzAll.type": "io.debezium.transforms.TimezoneConverter",
    "transforms.tzAll.predicate": "onT",
    "transforms.tzAll.converted.timezone": "America/New_York",
    "transforms.tzInc.type": "io.debezium.transforms.TimezoneConverter",
    "transforms.tzInc.predicate": "onI",
    "transforms.tzInc.converted.timezone": "+05:30",
    # Debezium's list syntax: a rule without a prefix takes the one before it
    "transforms.tzInc.include.list": "source:dz_i:at,dz_i:atz",
}

TABLES: dict[str, str] = {
    "dz_p": "id int PRIMARY KEY, customer text NOT NULL, amount numeric(10,2), note text",
    "dz_m": "id int PRIMARY KEY, n bigint, label text",
    "dz_t": "id int PRIMARY KEY, at timestamp, at3 timestamp(3), atz timestamptz, "
    "ttz timetz, d date, t time, label text",
    "dz_i": "id int PRIMARY KEY, at timestamp, atz timestamptz, other timestamp, label text",
}

_CUSTOMERS = ["acme", "globex", "initech", "umbrella", "héllo wörld", "日本", "x" * 40, ""]

BEFORE_START = [
    "INSERT INTO dz_p SELECT i, (ARRAY['acme','globex','initech','umbrella'])[1 + i % 4], "
    "i * 1.25, 'n' || i FROM generate_series(1, 12) i",
    "INSERT INTO dz_m SELECT i, i * 1000000007::bigint - 5000000000, 'l' || i "
    "FROM generate_series(1, 12) i",
    # New York's spring-forward gap (02:30 does not exist), its autumn overlap (01:30 twice),
    # before 1970, before New York's standard time (local mean time, -04:56:02), infinity
    "INSERT INTO dz_t VALUES "
    "(1, '2024-03-10 02:30:00', '2024-03-10 02:30:00.123', '2024-03-10 07:30:00+00', "
    "'10:20:30.123+02', '2024-03-10', '02:30', 'gap'), "
    "(2, '2024-11-03 01:30:00.5', '2024-11-03 01:30:00', '2024-11-03 05:30:00.5+00', "
    "'23:59:59+00', '2024-11-03', '01:30', 'overlap'), "
    "(3, '1969-12-31 23:59:59.9995', NULL, '1880-06-01 12:00:00+00', NULL, NULL, NULL, 'old'), "
    "(4, 'infinity', '-infinity', '2024-07-01 12:00:00.000001+00', '00:00:00-05:30', "
    "'2024-07-01', '23:59:59.999999', 'edges')",
    "INSERT INTO dz_i VALUES (1, '2024-01-05 10:20:30.123456', '2024-01-05 10:20:30+00', "
    "'2024-01-05 10:20:30', 'a'), (2, NULL, NULL, NULL, 'b')",
]
SNAPSHOT_ROWS = 30

CHANGES: list[list[str]] = [
    *(
        [f"INSERT INTO dz_p VALUES ({100 + i}, '{c}', {i}.{i}{i}, NULL)"]
        for i, c in enumerate(_CUSTOMERS)
    ),
    ["INSERT INTO dz_p VALUES (200, 'acme', NULL, 'no amount')"],
    ["INSERT INTO dz_p VALUES (201, 'acme', -99999999.99, 'negative')"],
    ["UPDATE dz_p SET customer = 'globex' WHERE id = 1"],
    ["UPDATE dz_p SET amount = amount + 1 WHERE id < 5"],
    ["UPDATE dz_p SET id = 300 WHERE id = 6"],  # a key change: delete + create
    ["DELETE FROM dz_p WHERE id IN (2, 3)"],
    ["INSERT INTO dz_m VALUES (100, NULL, 'no n'), (101, -1, 'minus'), (102, 0, 'zero')"],
    ["UPDATE dz_m SET n = n * 2 WHERE id % 3 = 0"],
    ["UPDATE dz_m SET id = id + 1000 WHERE id = 5"],
    ["DELETE FROM dz_m WHERE id IN (7, 8, 100)"],
    ["UPDATE dz_t SET at = at + interval '1 hour', atz = atz + interval '1 day' WHERE id < 3"],
    ["UPDATE dz_t SET at = '2000-02-29 12:00', ttz = '12:00:00+14' WHERE id = 4"],
    ["DELETE FROM dz_t WHERE id = 3"],
    ["UPDATE dz_i SET at = '1999-12-31 23:59:59', atz = now(), other = now() WHERE id = 2"],
    ["DELETE FROM dz_i WHERE id = 1"],
    # the records each side's reader waits for: one per table
    ["INSERT INTO dz_p VALUES (9999, 'sentinel', 0, 'sentinel')"],
    ["INSERT INTO dz_m VALUES (9999, 9999, 'sentinel')"],
    ["INSERT INTO dz_t (id, label) VALUES (9999, 'sentinel')"],
    ["INSERT INTO dz_i (id, label) VALUES (9999, 'sentinel')"],
]
SENTINELS = 4


def test_debezium_smts_match_debezium_in_kafka_connect(
    postgres: PgInfo, kafka: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    scenario = Scenario(
        TABLES,
        BEFORE_START,
        CHANGES,
        SNAPSHOT_ROWS,
        SENTINELS,
        partitions={"dz_p": 3, "dz_m": 3},
        tidemark_config={"envelope.version": "3"},
    )
    diffs = run_parity(postgres, kafka, tmp_path, request, CHAIN, scenario, jvm="kafka-connect")
    assert not diffs, (
        "tidemark's records differ from Debezium's SMTs in Kafka Connect:\n\n" + "\n\n".join(diffs)
    )


UNWRAP_CHAIN = {
    "transforms": "unwrap",
    "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
    "transforms.unwrap.add.fields": "op,table,lsn,source.ts_ms,db,schema,txId",
    "transforms.unwrap.add.headers": "op,table",
    # not rewrite-with-tombstone: Debezium's tombstone then also carries the headers added
    # to the delete before it (the two records share one header list), which tidemark does
    # not copy (docs/transforms.md)
    "transforms.unwrap.delete.tombstone.handling.mode": "rewrite",
}

#: added fields a snapshot read takes from its own run (each side snapshots at its own time)
_RUN_FIELDS = ("__lsn", "__source_ts_ms", "__txId")


def _snapshot_run_fields(topic: str, doc: Any) -> Any:
    payload = doc.get("payload") if isinstance(doc, dict) else None
    if not isinstance(payload, dict) or payload.get("__op") != "r":
        return doc
    kept = {k: v for k, v in payload.items() if k not in _RUN_FIELDS}
    return {**doc, "payload": kept}


def test_unwrap_with_added_fields_matches_debezium_in_kafka_connect(
    postgres: PgInfo, kafka: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """ExtractNewRecordState with ``add.fields`` (op, table, lsn, source.ts_ms, db, schema,
    txId), ``add.headers`` and ``rewrite``, under ``envelope.version=3``:
    Debezium 3.x places ``__deleted`` before the added fields. Streamed events are compared
    whole; a snapshot read's LSN, commit time and transaction id are each side's own."""
    scenario = Scenario(
        {"uw": "id int PRIMARY KEY, v text, n int"},
        ["INSERT INTO uw VALUES (1, 'a', 1), (2, 'b', 2)"],
        [
            ["UPDATE uw SET v = 'z' WHERE id = 1"],
            ["DELETE FROM uw WHERE id = 2"],
            ["UPDATE uw SET id = 10 WHERE id = 1"],
            ["INSERT INTO uw VALUES (9999, 'sentinel', 0)"],
        ],
        2,
        1,
        tidemark_config={"envelope.version": "3"},
        normalize=_snapshot_run_fields,
    )
    diffs = run_parity(
        postgres, kafka, tmp_path, request, UNWRAP_CHAIN, scenario, jvm="kafka-connect"
    )
    assert not diffs, "unwrapped records differ:\n\n" + "\n\n".join(diffs)
