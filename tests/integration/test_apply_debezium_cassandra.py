"""The apply job on topics written by Debezium's own Cassandra connector, not by tidemark.

A user who keeps Debezium's Cassandra agent on the nodes and moves only the lake side to
tidemark: the real agent (``debezium-connector-cassandra-5`` 3.4.0.Final, see
bench/debezium_cassandra.py) snapshots a table of the test node and streams the writes to it; the
apply job merges its records into Delta, and the table must then equal ``SELECT *``. What its
records have that tidemark's do not (recorded in tests/fixtures/cassandra/debezium): ``op`` ``i``
for inserts and snapshot reads, key columns as cells, no ``before``, range bounds in every
``after``, ``date`` as Cassandra's biased days, ``decimal`` as a double, and ``r`` meaning a
range delete, which the job must apply as one, never as a row.

Two apply runs, as in test_apply_cassandra.py: the snapshot with inserts and partial updates,
then partial writes of stored rows, a cell deletion, an ``INSERT`` over a row, an ``UPDATE`` of
a missing row, a row delete, a partition delete and a write after it. Then a range delete
(its bounds as Debezium's text values) with a write in its range after it, and range deletes
over a second table clustered on every type whose bound Debezium writes as Cassandra's text
(``timestamp`` descending, ``date``, ``time``, ``blob``, ``decimal``, ``varint``, ``inet``),
each with the columns before it as equalities.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from bench.debezium_cassandra import AgentError, debezium_cassandra
from cdc.apply.job import ApplyJob
from cdc.testing.kafka_reader import Event, read_topic
from tests.integration.cassandra_harness import CassandraHarness, module_harness
from tests.integration.conftest import CassandraInfo
from tests.integration.test_apply_acceptance import job_config
from tests.integration.test_apply_cassandra import lake as cassandra_lake

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.cassandra]

COLUMNS = ("id", "line", "item", "qty", "price", "at", "tags", "day", "amount")


@pytest.fixture(scope="module")
def h(
    cassandra: CassandraInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CassandraHarness]:
    yield from module_harness(cassandra, kafka, tmp_path_factory, "dbzcsapply")


def lake(spark: Any, job: ApplyJob, table: str) -> dict[tuple[int, int], dict[str, Any]]:
    return cassandra_lake(spark, job, table, COLUMNS)


def source(h: CassandraHarness) -> dict[tuple[int, int], dict[str, Any]]:
    """The table as the lake holds it: Debezium sends a ``decimal`` as a double."""
    out = {}
    for r in h.cql(f"SELECT {', '.join(COLUMNS)} FROM {h.keyspace}.orders"):
        row = dict(zip(COLUMNS, r, strict=True))
        row["tags"] = list(row["tags"]) if row["tags"] is not None else None
        row["day"] = row["day"].date() if row["day"] is not None else None
        row["amount"] = float(row["amount"]) if row["amount"] is not None else None
        out[(r.id, r.line)] = row
    return out


def wait_events(
    kafka: str, topic: str, done: Callable[[list[Event]], bool], timeout: float = 90.0
) -> list[Event]:
    deadline = time.monotonic() + timeout
    while True:
        events = read_topic(kafka, topic, timeout=5, settle=0.5)
        if done(events):
            return events
        if time.monotonic() > deadline:
            ops = [(e.op, e.key) for e in events]
            raise AssertionError(f"Debezium's records did not arrive in time: {ops}")
        time.sleep(0.5)


@contextmanager
def _agent(node: CassandraInfo, kafka: str, prefix: str, workdir: Path) -> Iterator[None]:
    """Debezium's agent beside the test node; the test fails (never skips) if it cannot run."""
    try:
        with debezium_cassandra(node.host, node.port, node.config, kafka, prefix, workdir):
            yield
    except AgentError as exc:
        pytest.fail(str(exc))


def has(key: dict[str, Any], op: str) -> Callable[[list[Event]], bool]:
    return lambda events: any(e.key == key and e.op == op for e in events)


def test_debeziums_cassandra_records_apply_into_delta(
    spark: Any, h: CassandraHarness, cassandra: CassandraInfo, kafka: str, tmp_path: Path
) -> None:
    ks = h.keyspace
    h.cql(
        f"CREATE TABLE {ks}.orders (id int, line int, item text, qty int, price double, "
        "at timestamp, tags frozen<list<text>>, day date, amount decimal, "
        "PRIMARY KEY (id, line)) WITH cdc = true"
    )
    at = dt.datetime(2026, 11, 25, 12, 30, 15, 123000)
    day = dt.date(2024, 5, 6)
    insert = f"INSERT INTO {ks}.orders (id, line, item, qty, price, at, tags, day, amount) VALUES "
    h.cql(insert + "(1, 1, 'pen', 2, 1.5, %s, ['a', 'b'], %s, 12.5)", (at, day))
    h.cql(insert + "(1, 2, 'ink', 1, 4.25, %s, ['c'], '1969-12-31', 0.25)", (at,))
    h.cql(insert + "(2, 1, 'pad', 5, 2.0, null, null, null, null)")
    _create_kinds(h)
    prefix = "dbz" + uuid.uuid4().hex[:8]
    topic = f"{prefix}.{ks}.orders"
    table = topic.replace(".", "_")
    kinds = f"{prefix}.{ks}.kinds"
    with _agent(cassandra, kafka, prefix, tmp_path / "agent"):
        # the snapshot: three reads, op "i" with source.snapshot "true"
        first = wait_events(
            kafka,
            topic,
            lambda ev: (
                sum(e.op == "i" and e.value["source"]["snapshot"] == "true" for e in ev) == 3
            ),
        )
        assert all(e.value["after"]["id"]["set"] for e in first)  # key columns are cells
        job = ApplyJob(spark, job_config(kafka, tmp_path, [topic, kinds]))

        # batch 1: a new row with some columns, partial updates (one of that new row)
        h.cql(f"INSERT INTO {ks}.orders (id, line, item, qty) VALUES (3, 1, 'cup', 1)")
        h.cql(f"UPDATE {ks}.orders SET qty = 3 WHERE id = 1 AND line = 1")
        h.cql(f"UPDATE {ks}.orders SET price = 9.5, tags = ['x'] WHERE id = 3 AND line = 1")
        h.cql(insert + "(4, 1, 'gone', 1, 1.0, null, null, '2000-02-29', null)")
        h.cql(insert + "(4, 2, 'gone', 2, 2.0, null, null, null, null)")
        wait_events(kafka, topic, has({"id": 4, "line": 2}, "i"))
        job.run(timeout=240)
        rows = lake(spark, job, table)
        assert rows == source(h)
        assert rows[(1, 1)]["day"] == day and rows[(1, 2)]["day"] == dt.date(1969, 12, 31)
        assert rows[(3, 1)] == dict.fromkeys(COLUMNS) | {
            "id": 3,
            "line": 1,
            "item": "cup",
            "qty": 1,
            "price": 9.5,
            "tags": ["x"],
        }

        # batch 2: only writes to stored rows and deletes
        h.cql(f"UPDATE {ks}.orders SET item = 'PEN' WHERE id = 1 AND line = 1")
        h.cql(f"DELETE price FROM {ks}.orders WHERE id = 1 AND line = 1")  # a cell deletion
        h.cql(f"INSERT INTO {ks}.orders (id, line, qty) VALUES (1, 2, 10)")  # upsert
        h.cql(f"UPDATE {ks}.orders SET qty = 7 WHERE id = 5 AND line = 1")  # a missing row
        h.cql(f"DELETE FROM {ks}.orders WHERE id = 2 AND line = 1")  # a row
        h.cql(insert + "(4, 3, 'gone too', 3, 3.0, null, null, null, null)")
        h.cql(f"DELETE FROM {ks}.orders WHERE id = 4")  # the partition
        h.cql(f"INSERT INTO {ks}.orders (id, line, item) VALUES (4, 9, 'after')")
        wait_events(kafka, topic, has({"id": 4, "line": 9}, "i"))
        job.run(timeout=240)
        rows = lake(spark, job, table)
        assert rows == source(h)
        assert set(rows) == {(1, 1), (1, 2), (3, 1), (4, 9), (5, 1)}
        assert rows[(1, 1)] == {
            "id": 1,
            "line": 1,
            "item": "PEN",
            "qty": 3,
            "price": None,
            "at": at,
            "tags": ["a", "b"],
            "day": day,
            "amount": 12.5,
        }
        assert rows[(5, 1)] == dict.fromkeys(COLUMNS) | {"id": 5, "line": 1, "qty": 7}

        # a range delete: Debezium's op "r", which is not a snapshot read
        h.cql(insert + "(1, 3, 'three', 3, 3.0, null, null, null, null)")
        h.cql(f"DELETE FROM {ks}.orders WHERE id = 1 AND line > 1")
        h.cql(f"UPDATE {ks}.orders SET qty = 4 WHERE id = 3 AND line = 1")
        h.cql(f"UPDATE {ks}.orders SET qty = 8 WHERE id = 1 AND line = 5")  # after it, in it
        for where in _KINDS_DELETES:  # ranges over each clustering type, from Debezium's text
            h.cql(f"DELETE FROM {ks}.kinds WHERE {where}")
        wait_events(kafka, topic, lambda ev: ev[-1].key == {"id": 1, "line": 5})
        wait_events(kafka, kinds, lambda ev: sum(e.op == "r" for e in ev) == len(_KINDS_DELETES))
        job.run(timeout=240)
    rows = lake(spark, job, table)
    assert rows == source(h)
    assert set(rows) == {(1, 1), (1, 5), (3, 1), (4, 9), (5, 1)}
    kept = spark.read.format("delta").load(job.cfg.table_location(kinds.replace(".", "_")))
    survivors = sorted(r.v for r in h.cql(f"SELECT v FROM {ks}.kinds"))
    assert sorted(r["v"] for r in kept.collect()) == survivors
    for k, (_, values, _) in enumerate(_KINDS, start=1):  # each range deleted some, not all
        assert 0 < sum(v.startswith(f"{k}-") for v in survivors) < len(values)


#: the clustering columns of ``kinds`` in key order: (column, CQL type, values in Cassandra's
#: order as CQL literals), and the range each partition's delete takes on its column
_KINDS = [
    (
        "ts",
        "timestamp",
        [
            *("'1960-01-02 03:04:05+0000'", "'2024-01-02 03:04:05.677+0000'"),
            *("'2024-01-02 03:04:05.678+0000'", "'2024-01-02 03:04:05.679+0000'"),
            "'2030-01-01 00:00:00+0000'",
        ],
    ),
    ("d", "date", ["'1900-05-06'", "'2024-05-05'", "'2024-05-06'", "'2024-05-07'", "'2100-01-01'"]),
    (
        "tm",
        "time",
        ["'00:00:00.000000001'", "'12:34:56.789'", "'12:34:56.789000001'", "'23:59:59.999999999'"],
    ),
    ("b", "blob", ["0x00", "0x7f", "0x80", "0xcafe", "0xff", "0xff00"]),  # unsigned bytes
    ("dec", "decimal", ["-1.55", "-1.5", "0", "1.5", "2.25", "100"]),
    ("vi", "varint", ["-100", "-3", "0", "5", "40", "99"]),
    (  # by the bytes: 2001:db8::1 between two IPv4 addresses
        "ip",
        "inet",
        ["'::1'", "'9.255.255.255'", "'10.0.0.1'", "'2001:db8::1'", "'192.168.0.1'", "'fe80::1'"],
    ),
]
_KINDS_RANGES = [
    "ts > {1} AND ts <= {3}",  # ts is DESC: Debezium's ReversedType
    "d >= {1} AND d < {4}",
    "tm > {0} AND tm < {3}",
    "b > {1} AND b <= {4}",
    "dec > {0} AND dec < {4}",
    "vi >= {1} AND vi < {4}",
    "ip > {1} AND ip <= {4}",
]


def _base(k: int) -> list[str]:
    """Partition ``k``'s fixed values of the columns before its ranged column."""
    return [f"{col} = {values[2]}" for col, _, values in _KINDS[: k - 1]]


_KINDS_DELETES = [
    " AND ".join([f"id = {k}", *_base(k), rng.format(*_KINDS[k - 1][2])])
    for k, rng in enumerate(_KINDS_RANGES, start=1)
]


def _create_kinds(h: CassandraHarness) -> None:
    """A table clustered on every type Debezium writes range bounds of as text; partition
    ``k`` holds rows varying on clustering column ``k`` (the others fixed, so its range delete
    has the columns before it as equalities), each row's ``v`` naming it."""
    cols = ", ".join(f"{c} {t}" for c, t, _ in _KINDS)
    keys = ", ".join(c for c, _, _ in _KINDS)
    h.cql(
        f"CREATE TABLE {h.keyspace}.kinds (id int, {cols}, v text, PRIMARY KEY (id, {keys})) "
        "WITH CLUSTERING ORDER BY (ts DESC) AND cdc = true"
    )
    for k, (_, _, values) in enumerate(_KINDS, start=1):
        for i, value in enumerate(values):
            row = [v[2] for _, _, v in _KINDS]
            row[k - 1] = value
            h.cql(
                f"INSERT INTO {h.keyspace}.kinds (id, {keys}, v) "
                f"VALUES ({k}, {', '.join(row)}, '{k}-{i}')"
            )
