"""Kafka's built-in SMTs in tidemark produce the records the JVM implementations produce.

The same transform chain (Kafka Connect property names, written once in :data:`CHAIN`) runs in
the real Debezium Server 3.6, which ships Apache Kafka's ``connect-transforms-4.3.0.jar``, and
in tidemark, both capturing the same PostgreSQL database (three tables, one publication, a slot
each, topic prefixes ``dbz…`` and ``tm…``): a snapshot, then inserts, updates (some setting a
column to NULL, one transaction spanning all three tables) and deletes. Every topic of each
side is then compared record by record, in order: topic, key and value (JSON with schemas, as
Kafka's ``JsonConverter`` writes them; tombstones as None) and headers.

Normalized, because the tools legitimately differ there and the SMTs do not touch it:

* the topic prefix, in topic names and in every JSON string that starts with it (schema names
  such as ``<prefix>.public.smt_b.Key`` and InsertField's ``topic.field`` value);
* the top-level value fields named ``source*``, ``ts_*`` and ``transaction*``, in the schema
  and the payload: the source block (connector name and version, LSN, txId, timestamps,
  snapshot flags, sequence), the event timestamps and the transaction block; in smt_b's
  flattened value they are the ``source_*``, ``ts_ms``/``ts_us``/``ts_ns`` and
  ``transaction_*`` fields. smt_a and smt_c are unwrapped and have none.

Nothing else is normalized: any other difference fails the test, and the message shows the
first differing record of each side per topic.

Debezium Server is configured so that only the SMTs add headers: ``extended.headers.enabled``
is off (its four ``__debezium.context.*`` headers; tidemark writes none), and headers are
serialized by Kafka Connect's default ``SimpleHeaderConverter`` (``debezium.format.header=
clientprovided`` with ``debezium.format.header.class``) rather than Debezium Server's default
``JsonConverter``, which would write ``{"schema":…,"payload":"data"}`` for a string header.
Headers are compared as (name, UTF-8 text) pairs, a null header value as None. Debezium
Server's engine leaves out a header whose converted value is null (a Connect worker would
write it with a null value), so the data avoids a null in the HeaderFrom column ``label``.

Two settings beyond the plain chain keep the JVM side running (see the comments in
:data:`CHAIN`): MaskField's ``replacement=0.00`` (its default zero for a decimal has scale 0,
which JsonConverter refuses for ``numeric(10,2)``) and unwrapC's
``delete.tombstone.handling.mode=drop`` (Kafka's HeaderFrom fails on the null value that the
default mode makes of a delete).

The harness that runs both sides and compares them is ``smt_parity.py``. Never skipped: if
Debezium Server or its Java runtime cannot be resolved, the test fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import PgInfo
from tests.integration.smt_parity import Scenario, run_parity

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

#: the transform chain, with Kafka Connect's property names; Debezium Server gets each key
#: prefixed with ``debezium.``, tidemark gets it as is
CHAIN: dict[str, str] = {
    "predicates": "onA,onB,onC,tomb",
    "predicates.onA.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "predicates.onA.pattern": r".*\.smt_a",
    "predicates.onB.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "predicates.onB.pattern": r".*\.smt_b",
    "predicates.onC.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "predicates.onC.pattern": r".*\.smt_c",
    "predicates.tomb.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
    "transforms": "dropTombstones,unwrapA,replaceA,insertA,maskA,rekeyA,extractKeyA,"
    "flattenB,hoistKeyB,metaB,unwrapC,castC,atC,dayC,headerC,tierC,headerFromC,dropHeaderC",
    "transforms.dropTombstones.type": "org.apache.kafka.connect.transforms.Filter",
    "transforms.dropTombstones.predicate": "tomb",
    "transforms.unwrapA.type": "io.debezium.transforms.ExtractNewRecordState",
    "transforms.unwrapA.predicate": "onA",
    "transforms.unwrapA.delete.tombstone.handling.mode": "rewrite",
    "transforms.replaceA.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "transforms.replaceA.predicate": "onA",
    "transforms.replaceA.exclude": "secret",
    "transforms.replaceA.renames": "name:full_name,email:mail",
    "transforms.insertA.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.insertA.predicate": "onA",
    "transforms.insertA.static.field": "origin",
    "transforms.insertA.static.value": "pg",
    "transforms.insertA.topic.field": "src_topic",
    "transforms.maskA.type": "org.apache.kafka.connect.transforms.MaskField$Value",
    "transforms.maskA.predicate": "onA",
    "transforms.maskA.fields": "qty,price",
    # Without it Kafka's MaskField masks price with BigDecimal.ZERO (scale 0), which
    # JsonConverter refuses for a Decimal schema of scale 2 ("Decimal value has mismatching
    # scale"), stopping the connector; "0.00" gives int 0 for qty and 0.00 for price.
    "transforms.maskA.replacement": "0.00",
    "transforms.rekeyA.type": "org.apache.kafka.connect.transforms.ValueToKey",
    "transforms.rekeyA.predicate": "onA",
    "transforms.rekeyA.fields": "id,full_name",
    "transforms.extractKeyA.type": "org.apache.kafka.connect.transforms.ExtractField$Key",
    "transforms.extractKeyA.predicate": "onA",
    "transforms.extractKeyA.field": "full_name",
    "transforms.flattenB.type": "org.apache.kafka.connect.transforms.Flatten$Value",
    "transforms.flattenB.predicate": "onB",
    "transforms.flattenB.delimiter": "_",
    "transforms.hoistKeyB.type": "org.apache.kafka.connect.transforms.HoistField$Key",
    "transforms.hoistKeyB.predicate": "onB",
    "transforms.hoistKeyB.field": "pk",
    "transforms.metaB.type": "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value",
    "transforms.metaB.predicate": "onB",
    "transforms.metaB.schema.name": "smt.b.Flat",
    "transforms.metaB.schema.version": "3",
    "transforms.unwrapC.type": "io.debezium.transforms.ExtractNewRecordState",
    "transforms.unwrapC.predicate": "onC",
    # Without it (default "tombstone") a delete becomes a null-value record, and Kafka's
    # HeaderFrom fails the task on it ("Only Struct objects supported for [header copy],
    # found: null"); "drop" leaves smt_c's deletes out.
    "transforms.unwrapC.delete.tombstone.handling.mode": "drop",
    "transforms.castC.type": "org.apache.kafka.connect.transforms.Cast$Value",
    "transforms.castC.predicate": "onC",
    "transforms.castC.spec": "id:string,amount:int32,ratio:string",
    # Debezium writes a timestamp column as io.debezium.time.MicroTimestamp (int64 micros)
    "transforms.atC.type": "org.apache.kafka.connect.transforms.TimestampConverter$Value",
    "transforms.atC.predicate": "onC",
    "transforms.atC.field": "at",
    "transforms.atC.target.type": "string",
    "transforms.atC.format": "yyyy-MM-dd'T'HH:mm:ss.SSS EEE",
    "transforms.atC.unix.precision": "microseconds",
    "transforms.dayC.type": "org.apache.kafka.connect.transforms.TimestampConverter$Value",
    "transforms.dayC.predicate": "onC",
    "transforms.dayC.field": "day",
    "transforms.dayC.target.type": "Timestamp",
    "transforms.dayC.unix.precision": "microseconds",
    "transforms.headerC.type": "org.apache.kafka.connect.transforms.InsertHeader",
    "transforms.headerC.predicate": "onC",
    "transforms.headerC.header": "team",
    "transforms.headerC.value.literal": "data",
    "transforms.tierC.type": "org.apache.kafka.connect.transforms.InsertHeader",
    "transforms.tierC.predicate": "onC",
    "transforms.tierC.header": "tier",
    "transforms.tierC.value.literal": "gold",
    "transforms.headerFromC.type": "org.apache.kafka.connect.transforms.HeaderFrom$Value",
    "transforms.headerFromC.predicate": "onC",
    "transforms.headerFromC.fields": "label",
    "transforms.headerFromC.headers": "lbl",
    "transforms.headerFromC.operation": "copy",
    "transforms.dropHeaderC.type": "org.apache.kafka.connect.transforms.DropHeaders",
    "transforms.dropHeaderC.predicate": "onC",
    "transforms.dropHeaderC.headers": "tier",
}

TABLES: dict[str, str] = {
    "smt_a": "id int PRIMARY KEY, name text, email text, secret text, qty int, price numeric(10,2)",
    "smt_b": "id int PRIMARY KEY, code text, n bigint, flag boolean",
    "smt_c": "id int PRIMARY KEY, label text, amount double precision, at timestamp, "
    "day timestamp, ratio double precision",
}

SNAPSHOT_ROWS = 9  # three per table, inserted before the connectors start

BEFORE_START = [
    "INSERT INTO smt_a VALUES (1, 'alice', 'alice@example.com', 's1', 5, 10.50), "
    "(2, 'bob', 'bob@example.com', 's2', 7, 3.25), "
    "(3, 'carol', 'carol@example.com', 's3', 1, 99.99)",
    "INSERT INTO smt_b VALUES (1, 'x1', 100, true), (2, 'x2', -5, false), "
    "(3, 'x3', 9000000000, NULL)",
    "INSERT INTO smt_c VALUES "
    "(1, 'one', 1.5, '2024-01-05 10:20:30.123456', '2024-01-05', 1e10), "
    "(2, 'two', 2.75, '1969-12-31 23:59:59.9995', '1960-02-29 12:00', 0.0001), "
    "(3, 'three', -3.9, NULL, NULL, 2.5)",
]

#: the streamed changes, one transaction per inner list
CHANGES: list[list[str]] = [
    ["INSERT INTO smt_a VALUES (4, 'dave', 'dave@example.com', 's4', 2, 0.01)"],
    ["UPDATE smt_a SET email = NULL, qty = 8 WHERE id = 1"],
    ["UPDATE smt_a SET name = 'bobby', price = 1234.5 WHERE id = 2"],
    ["DELETE FROM smt_a WHERE id = 3"],
    ["INSERT INTO smt_b VALUES (4, 'x4', 4, true)"],
    ["UPDATE smt_b SET code = NULL WHERE id = 1"],
    ["UPDATE smt_b SET n = n + 1, flag = true WHERE id = 2"],
    ["DELETE FROM smt_b WHERE id = 3"],
    [
        "INSERT INTO smt_c VALUES "
        "(4, 'four', 4.4, '2000-02-29 00:00:00.5', '2000-02-29 23:59:59', -123456789.0)"
    ],
    ["UPDATE smt_c SET at = NULL, ratio = 100.0 WHERE id = 4"],
    ["UPDATE smt_c SET amount = NULL WHERE id = 1"],
    ["UPDATE smt_c SET label = 'deux', amount = 22.5 WHERE id = 2"],
    ["DELETE FROM smt_c WHERE id = 3"],
    [
        "UPDATE smt_a SET secret = 'changed', qty = NULL WHERE id = 4",
        "UPDATE smt_b SET flag = NULL WHERE id = 4",
        "UPDATE smt_c SET amount = -7.75 WHERE id = 4",
    ],
    # last in every table: the record each side's reader waits for (smt_a's key is the name)
    ["INSERT INTO smt_a VALUES (1000, 'sentinel', 'sentinel@example.com', 's', 0, 0)"],
    ["INSERT INTO smt_b VALUES (1000, 'sentinel', 0, false)"],
    ["INSERT INTO smt_c VALUES (1000, 'sentinel', 0)"],
]
SENTINELS = 3


def test_kafka_smts_match_the_jvm_implementations(
    postgres: PgInfo, kafka: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    scenario = Scenario(TABLES, BEFORE_START, CHANGES, SNAPSHOT_ROWS, SENTINELS)
    diffs = run_parity(postgres, kafka, tmp_path, request, CHAIN, scenario)
    assert not diffs, (
        "tidemark's records differ from Kafka Connect's SMTs in Debezium Server:\n\n"
        + "\n\n".join(diffs)
    )
