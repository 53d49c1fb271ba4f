"""The README's demo: the local stack up and a change-data pipeline run end to end on it.

Each step prints what it does and what it found, so a new user can follow along and see
where something went wrong. The pipeline grows with the project: today it brings the stack
up, creates the sample `inventory` database and checks a Kafka round trip.
"""

from __future__ import annotations

import sys
import time
import uuid

from worker.dev import Stack, StackError


def step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def kafka_round_trip(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer

    topic = f"tidemark-demo-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.produce(topic, key=b"hello", value=b"tidemark")
    if producer.flush(30) != 0:
        raise StackError("Kafka did not acknowledge the demo message within 30 s")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": topic,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                print(f"    produced and consumed {msg.key()!r} -> {msg.value()!r} on {topic}")
                return
    finally:
        consumer.close()
    raise StackError("the demo message did not come back from Kafka within 30 s")


def create_inventory(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = 'inventory'").fetchone()
        if not exists:
            conn.execute("CREATE DATABASE inventory")
    with psycopg.connect(dsn.replace("dbname=postgres", "dbname=inventory")) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS inventory")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS inventory.customers ("
            " id serial PRIMARY KEY, first_name text NOT NULL, last_name text NOT NULL,"
            " email text UNIQUE NOT NULL)"
        )
        conn.execute(
            "INSERT INTO inventory.customers (first_name, last_name, email) VALUES"
            " ('Sally', 'Thomas', 'sally.thomas@acme.com'),"
            " ('George', 'Bailey', 'gbailey@foobar.com'),"
            " ('Edward', 'Walker', 'ed@walker.com'),"
            " ('Anne', 'Kretchmar', 'annek@noanswer.org')"
            " ON CONFLICT (email) DO NOTHING"
        )
        count = conn.execute("SELECT count(*) FROM inventory.customers").fetchone()
        print(f"    inventory.customers has {count[0] if count else 0} rows")


def main() -> int:
    stack = Stack()
    try:
        step("starting the local stack (PostgreSQL, MariaDB, Kafka) on 127.0.0.1")
        for svc in stack.select(None):
            t0 = time.monotonic()
            started = svc.start()
            what = f"up in {time.monotonic() - t0:.1f} s" if started else "already running"
            print(f"    {svc.name:<9} {what} on {svc.host}:{svc.port}  (log: {svc.log_file})")
        env = stack.env()
        step("creating the sample `inventory` database in PostgreSQL")
        create_inventory(
            f"host={env['TIDEMARK_PG_HOST']} port={env['TIDEMARK_PG_PORT']} "
            f"user={env['TIDEMARK_PG_USER']} password={env['TIDEMARK_PG_PASSWORD']} "
            "dbname=postgres"
        )
        step("checking a Kafka round trip (idempotent producer -> consumer)")
        kafka_round_trip(env["TIDEMARK_KAFKA_BOOTSTRAP"])
    except StackError as exc:
        print(f"\ndemo failed: {exc}", file=sys.stderr)
        return 1
    step("done. The stack keeps running; `.venv/bin/tidemark dev down` stops it.")
    print(
        "    This demo does not capture changes yet: the PostgreSQL connector and the worker\n"
        "    are still being built (see docs/index.md for what exists today)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
