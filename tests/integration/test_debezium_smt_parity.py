"""Debezium's own SMTs in tidemark produce the records Debezium Server 3.6's produce.

Same harness as the Kafka transforms' parity test (``smt_parity.py``): one chain, written once
with Debezium's property names, runs in the real Debezium Server and in tidemark over the same
PostgreSQL tables (snapshot, then inserts, updates, a primary key change and deletes); every
topic is compared record by record, partition by partition.

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

import pytest

from tests.integration.conftest import PgInfo
from tests.integration.smt_parity import Scenario, run_parity

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

_TOPIC_MATCHES = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"

CHAIN: dict[str, str] = {
    "predicates": "onP,onM,tomb",
    "predicates.onP.type": _TOPIC_MATCHES,
    "predicates.onP.pattern": r".*\.dz_p",
    "predicates.onM.type": _TOPIC_MATCHES,
    "predicates.onM.pattern": r".*\.dz_m",
    "predicates.tomb.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
    "transforms": "dropTombstones,routeJava,routeMurmur",
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
}

TABLES: dict[str, str] = {
    "dz_p": "id int PRIMARY KEY, customer text NOT NULL, amount numeric(10,2), note text",
    "dz_m": "id int PRIMARY KEY, n bigint, label text",
}

_CUSTOMERS = ["acme", "globex", "initech", "umbrella", "héllo wörld", "日本", "x" * 40, ""]

BEFORE_START = [
    "INSERT INTO dz_p SELECT i, (ARRAY['acme','globex','initech','umbrella'])[1 + i % 4], "
    "i * 1.25, 'n' || i FROM generate_series(1, 12) i",
    "INSERT INTO dz_m SELECT i, i * 1000000007::bigint - 5000000000, 'l' || i "
    "FROM generate_series(1, 12) i",
]
SNAPSHOT_ROWS = 24

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
    # the records each side's reader waits for: one per table
    ["INSERT INTO dz_p VALUES (9999, 'sentinel', 0, 'sentinel')"],
    ["INSERT INTO dz_m VALUES (9999, 9999, 'sentinel')"],
]
SENTINELS = 2


def test_debezium_smts_match_debezium_server(
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
        "tidemark's records differ from Debezium's SMTs in Debezium Server:\n\n"
        + "\n\n".join(diffs)
    )
