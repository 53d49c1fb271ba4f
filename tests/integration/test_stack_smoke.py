"""The local stack works the way the connectors will use it."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from tests.integration.conftest import MySqlInfo, PgInfo


def _consume_all(bootstrap: str, topic: str, expect: int, isolation: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"smoke-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    idle_after_expected = None
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                if len(got) >= expect:
                    idle_after_expected = idle_after_expected or time.monotonic()
                    if time.monotonic() - idle_after_expected > 2:
                        break
                continue
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    finally:
        consumer.close()
    return got


@pytest.mark.kafka
def test_kafka_idempotent_round_trip(kafka: str) -> None:
    topic = f"smoke-idem-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": kafka, "enable.idempotence": True, "acks": "all"})
    acked: list[int] = []
    for i in range(100):
        producer.produce(
            topic,
            value=f"v{i}".encode(),
            key=str(i).encode(),
            on_delivery=lambda err, msg: acked.append(msg.offset()) if err is None else None,
        )
    assert producer.flush(30) == 0
    assert sorted(acked) == list(range(100))
    assert _consume_all(kafka, topic, 100, "read_uncommitted") == [
        f"v{i}".encode() for i in range(100)
    ]


@pytest.mark.kafka
def test_kafka_transactions_commit_and_abort(kafka: str) -> None:
    topic = f"smoke-txn-{uuid.uuid4().hex[:8]}"
    producer = Producer(
        {"bootstrap.servers": kafka, "transactional.id": f"smoke-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"committed-{i}".encode())
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"aborted-{i}".encode())
    assert producer.flush(30) == 0  # written to the log, so the abort has something to undo
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"committed-last")
    producer.commit_transaction(30)

    committed = _consume_all(kafka, topic, 6, "read_committed")
    assert committed == [f"committed-{i}".encode() for i in range(5)] + [b"committed-last"]
    everything = _consume_all(kafka, topic, 11, "read_uncommitted")
    assert sum(v.startswith(b"aborted") for v in everything) == 5


@pytest.mark.postgres
def test_postgres_logical_slot_created_and_read(postgres: PgInfo) -> None:
    import psycopg

    from tests.integration import pg_cleanup

    slot = pg_cleanup.own_slot(f"smoke_{uuid.uuid4().hex[:8]}")
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        assert conn.execute("SHOW wal_level").fetchone() == ("logical",)
        conn.execute("DROP TABLE IF EXISTS smoke_t")
        conn.execute("CREATE TABLE smoke_t (id int primary key, v text)")
        conn.execute("DROP PUBLICATION IF EXISTS smoke_pub")
        conn.execute("CREATE PUBLICATION smoke_pub FOR TABLE smoke_t")
        with psycopg.connect(postgres.dsn(), autocommit=True, replication="database") as repl:
            row = repl.execute(f"CREATE_REPLICATION_SLOT {slot} LOGICAL pgoutput").fetchone()
            assert row is not None and row[0] == slot
        try:
            conn.execute("INSERT INTO smoke_t VALUES (1, 'a'), (2, 'b')")
            changes = conn.execute(
                "SELECT data FROM pg_logical_slot_get_binary_changes(%s, NULL, NULL, "
                "'proto_version', '1', 'publication_names', 'smoke_pub')",
                (slot,),
            ).fetchall()
            kinds = [bytes(r[0])[:1] for r in changes]
            assert kinds == [b"B", b"R", b"I", b"I", b"C"]
            assert b"smoke_t" in bytes(changes[1][0])
        finally:
            pg_cleanup.drop_slot(postgres.dsn(), slot)


@pytest.mark.mariadb
def test_mariadb_gtid_position_read_from_binlog(mariadb: MySqlInfo) -> None:
    import pymysql
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import MariadbGtidEvent
    from pymysqlreplication.row_event import WriteRowsEvent

    conn = pymysql.connect(**mariadb.settings(), autocommit=True)  # type: ignore[arg-type]
    with conn.cursor() as cur:
        for var, want in (("binlog_format", "ROW"), ("binlog_row_image", "FULL")):
            cur.execute(f"SHOW VARIABLES LIKE '{var}'")
            assert cur.fetchone() == (var, want)
        cur.execute("CREATE DATABASE IF NOT EXISTS smoke")
        cur.execute("CREATE TABLE IF NOT EXISTS smoke.t (id int primary key, v varchar(20))")
        cur.execute("SELECT @@gtid_binlog_pos")
        start = cur.fetchone()[0]
        cur.execute("INSERT INTO smoke.t VALUES (%s, 'x')", (int(time.time() * 1000) % 2**31,))
        cur.execute("SELECT @@gtid_binlog_pos")
        after = cur.fetchone()[0]
    conn.close()
    assert after != start

    reader = BinLogStreamReader(
        connection_settings=mariadb.settings(),
        server_id=mariadb.server_id + 100,
        blocking=False,
        is_mariadb=True,
        auto_position=start,
        only_events=[MariadbGtidEvent, WriteRowsEvent],
    )
    seen_gtids: list[str] = []
    rows = 0
    try:
        for event in reader:
            if isinstance(event, MariadbGtidEvent):
                seen_gtids.append(event.gtid)
            elif isinstance(event, WriteRowsEvent) and event.table == "t":
                rows += len(event.rows)
    finally:
        reader.close()
    assert seen_gtids[-1] == after
    assert rows == 1
