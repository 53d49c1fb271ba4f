"""The README's demo: the local stack up and a change-data pipeline run end to end on it.

Each step prints what it does and what it found, so a new user can follow along and see
where something went wrong. ``main()`` runs :data:`STEPS` in order; a later stage of the
pipeline (the Spark apply job) joins by appending its own ``(title, function)`` steps. Steps
share a :class:`Demo` that holds what earlier steps set up (connection settings, the worker
process, the topic and where its new events start).

The pipeline today: the stack up, the sample ``inventory`` database, a Kafka round trip, then
the worker (``tidemark run`` with ``examples/postgres.yaml``) snapshots
``inventory.customers`` and streams an insert, an update and a delete to Kafka, which the demo
reads back and prints; the same for MariaDB with a connector added over the REST API
(``examples/mysql.yaml``); then ``tidemark status`` and a graceful SIGTERM stop.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from worker.dev import Stack, StackError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "postgres.yaml"
OPS = {"r": "snapshot", "c": "insert", "u": "update", "d": "delete"}


class DemoError(Exception):
    """A step could not do its job; the message says what to look at."""


def step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def say(text: str) -> None:
    print(f"    {text}", flush=True)


@dataclass
class Demo:
    stack: Stack = field(default_factory=Stack)
    env: dict[str, str] = field(default_factory=dict)
    work: Path = ROOT / ".tidemark" / "demo"
    config_path: Path | None = None
    worker: subprocess.Popen[bytes] | None = None
    url: str = ""
    topic: str = ""
    start_offset: int = 0
    inserted_id: int | None = None
    mariadb_topic: str = ""
    mariadb_start: int = 0
    mariadb_id: int | None = None

    @property
    def log_path(self) -> Path:
        return self.work / "worker.log"

    def pg_dsn(self, dbname: str = "postgres") -> str:
        e = self.env
        return (
            f"host={e['TIDEMARK_PG_HOST']} port={e['TIDEMARK_PG_PORT']} "
            f"user={e['TIDEMARK_PG_USER']} password={e['TIDEMARK_PG_PASSWORD']} dbname={dbname}"
        )

    def client(self) -> Any:
        from worker.rest.client import Client

        return Client(self.url, timeout=15)

    def stop_worker(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            self.worker.kill()
            self.worker.wait(10)


# -- steps ----------------------------------------------------------------------------------------


#: the services the demo pipeline uses (the stack has more: Cassandra, the MongoDB and SQL
#: Server stand-ins, which the demo does not need to start)
DEMO_SERVICES = ("postgres", "mariadb", "kafka")


def start_stack(demo: Demo) -> None:
    for svc in demo.stack.select(DEMO_SERVICES):
        t0 = time.monotonic()
        started = svc.start()
        what = f"up in {time.monotonic() - t0:.1f} s" if started else "already running"
        say(f"{svc.name:<9} {what} on {svc.host}:{svc.port}  (log: {svc.log_file})")
    demo.env = demo.stack.env(DEMO_SERVICES)


def create_inventory_step(demo: Demo) -> None:
    create_inventory(demo.pg_dsn())


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
        # Full before-images in update and delete events (Debezium's tutorial shows them too).
        conn.execute("ALTER TABLE inventory.customers REPLICA IDENTITY FULL")
        conn.execute(
            "INSERT INTO inventory.customers (first_name, last_name, email) VALUES"
            " ('Sally', 'Thomas', 'sally.thomas@acme.com'),"
            " ('George', 'Bailey', 'gbailey@foobar.com'),"
            " ('Edward', 'Walker', 'ed@walker.com'),"
            " ('Anne', 'Kretchmar', 'annek@noanswer.org')"
            " ON CONFLICT (email) DO NOTHING"
        )
        count = conn.execute("SELECT count(*) FROM inventory.customers").fetchone()
        say(f"inventory.customers has {count[0] if count else 0} rows")


def kafka_round_trip_step(demo: Demo) -> None:
    kafka_round_trip(demo.env["TIDEMARK_KAFKA_BOOTSTRAP"])


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
                say(f"produced and consumed {msg.key()!r} -> {msg.value()!r} on {topic}")
                return
    finally:
        consumer.close()
    raise StackError("the demo message did not come back from Kafka within 30 s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_worker_config(demo: Demo) -> None:
    """examples/postgres.yaml, pointed at this stack, with a fresh state dir (so the demo
    always shows a snapshot) and a free REST port."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    w = doc["worker"]
    w["bootstrap.servers"] = demo.env["TIDEMARK_KAFKA_BOOTSTRAP"]
    w["rest.port"] = free_port()
    state = demo.work / "worker-state"
    shutil.rmtree(state, ignore_errors=True)
    w["state.dir"] = str(state)
    conn = doc["connectors"][0]["config"]
    # The slot of an earlier run belongs to the state just removed: left in place, the new
    # run's stream would start from its old position and read all WAL written since (minutes
    # on a box that ran benchmarks in between) before it reaches this run's changes.
    drop_stale_slot(demo.pg_dsn(), conn["slot.name"])
    conn["database.hostname"] = demo.env["TIDEMARK_PG_HOST"]
    conn["database.port"] = int(demo.env["TIDEMARK_PG_PORT"])
    conn["database.user"] = demo.env["TIDEMARK_PG_USER"]
    demo.topic = f"{conn['topic.prefix']}.inventory.customers"
    demo.url = f"http://127.0.0.1:{w['rest.port']}"
    demo.work.mkdir(parents=True, exist_ok=True)
    demo.config_path = demo.work / "worker.yaml"
    demo.config_path.write_text(
        f"# written by the demo from {EXAMPLE.relative_to(ROOT)}\n"
        + yaml.safe_dump(doc, sort_keys=False)
    )
    say(f"{demo.config_path.relative_to(ROOT)}: connector `inventory` -> topic {demo.topic}")
    say("database.password is ${env:TIDEMARK_PG_PASSWORD}: resolved at start, never stored")
    demo.start_offset = topic_end(demo.env["TIDEMARK_KAFKA_BOOTSTRAP"], demo.topic)
    if demo.start_offset:
        say(
            f"the topic already holds {demo.start_offset} events from earlier runs; "
            "showing only this run's"
        )


def drop_stale_slot(dsn: str, slot: str) -> None:
    """Drops replication slot ``slot`` if it exists and no process is streaming from it."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        dropped = conn.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            "WHERE slot_name = %s AND NOT active",
            (slot,),
        ).fetchall()
    if dropped:
        say(f"dropped the replication slot {slot} an earlier demo run left behind")


def topic_end(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    if topic not in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics:
        return 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"demo-{uuid.uuid4().hex}"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(high)
    finally:
        consumer.close()


def start_worker(demo: Demo) -> None:
    assert demo.config_path is not None
    tidemark = Path(sys.executable).parent / "tidemark"
    cmd = [str(tidemark), "run", str(demo.config_path)]
    env = {**os.environ, **demo.env}
    say(
        f"$ {tidemark.relative_to(ROOT) if tidemark.is_relative_to(ROOT) else tidemark} run "
        f"{demo.config_path.relative_to(ROOT)}   (log: {demo.log_path.relative_to(ROOT)})"
    )
    with open(demo.log_path, "wb") as log:
        demo.worker = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    client = demo.client()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if demo.worker.poll() is not None:
            raise DemoError(f"the worker exited with code {demo.worker.returncode}")
        with contextlib.suppress(Exception):
            if client.request("GET", "/health")[0] == 200:
                info = client.get("/")
                say(
                    f"worker pid {demo.worker.pid} healthy at {demo.url} "
                    f"(tidemark {info['version']}, Kafka cluster {info['kafka_cluster_id']})"
                )
                return
        time.sleep(0.3)
    raise DemoError("the worker did not become healthy within 60 s")


def wait_for_snapshot(demo: Demo) -> None:
    client = demo.client()
    deadline = time.monotonic() + 90
    last = ""
    while time.monotonic() < deadline:
        doc = client.get("/tidemark/status")["connectors"].get("inventory")
        if doc is None:
            raise DemoError("the worker has no `inventory` connector")
        task = (doc["status"]["tasks"] or [{}])[0]
        if task.get("state") == "FAILED":
            raise DemoError(f"the connector failed:\n{task.get('trace')}")
        detail = (doc["tasks"] or [{}])[0]
        snap, stream = detail.get("snapshot", {}), detail.get("streaming", {})
        rows = sum(t["rows"] for t in snap.get("tables", []))
        line = f"task {task.get('state', '?')}, {detail.get('phase') or '-'}, {rows} rows"
        if line != last:
            say(line)
            last = line
        if task.get("state") == "RUNNING" and snap.get("completed") and stream.get("connected"):
            say(f"snapshot done: {rows} rows in {snap.get('duration_s', 0)} s; now streaming")
            return
        time.sleep(0.3)
    raise DemoError("the snapshot did not finish within 90 s")


def make_changes(demo: Demo) -> None:
    import psycopg

    email = f"kenneth.{uuid.uuid4().hex[:6]}@example.com"
    with psycopg.connect(demo.pg_dsn("inventory"), autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO inventory.customers (first_name, last_name, email) "
            "VALUES ('Kenneth', 'Anderson', %s) RETURNING id",
            (email,),
        ).fetchone()
        assert row is not None
        demo.inserted_id = int(row[0])
        say(f"INSERT INTO inventory.customers ... 'Kenneth', 'Anderson', '{email}'  -> id {row[0]}")
        new_email = email.replace("kenneth.", "ken.")
        conn.execute(
            "UPDATE inventory.customers SET email = %s WHERE id = %s", (new_email, demo.inserted_id)
        )
        say(f"UPDATE inventory.customers SET email = '{new_email}' WHERE id = {demo.inserted_id}")
        conn.execute("DELETE FROM inventory.customers WHERE id = %s", (demo.inserted_id,))
        say(f"DELETE FROM inventory.customers WHERE id = {demo.inserted_id}")


def _payload(raw: bytes | None) -> Any:
    if raw is None:
        return None
    doc = orjson.loads(raw)
    return doc.get("payload", doc) if isinstance(doc, dict) else doc


def _lsn(value: Any) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}" if isinstance(value, int) else "-"


def _fields(row: dict[str, Any] | None) -> str:
    if not row:
        return "{}"
    return "{" + ", ".join(f"{k}: {v!r}" for k, v in row.items() if k != "id") + "}"


def describe(key: Any, value: Any) -> str:
    """One event on one line: operation, key, before -> after, source LSN."""
    ident = ", ".join(f"{k}={v}" for k, v in (key or {}).items())
    if value is None:
        return f"{'tombstone':<9} {ident:<8} (key only: lets compaction drop the row)"
    op = value.get("op")
    before, after = value.get("before"), value.get("after")
    if op == "u" and before and after:
        changes = ", ".join(
            f"{k}: {before.get(k)!r} -> {v!r}" for k, v in after.items() if before.get(k) != v
        )
        body = changes or "no column changed"
    elif op == "d":
        body = f"before {_fields(before)}"
    else:
        body = f"after  {_fields(after)}"
    return f"{OPS.get(op, op):<9} {ident:<8} {body}   {_position(value.get('source') or {})}"


def _position(source: dict[str, Any]) -> str:
    """Where the event is in the source's log: PostgreSQL LSN, or binlog file:pos."""
    if source.get("lsn") is not None:
        return f"lsn {_lsn(source['lsn'])}"
    if source.get("file"):
        return f"binlog {source['file']}:{source.get('pos')}"
    return ""


def show_events(demo: Demo) -> None:
    read_events(demo, demo.topic, demo.start_offset, demo.inserted_id)


def read_events(demo: Demo, topic: str, start_offset: int, inserted_id: int | None) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": demo.env["TIDEMARK_KAFKA_BOOTSTRAP"],
            "group.id": f"demo-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    seen = 0
    deleted = False
    try:
        consumer.assign([TopicPartition(topic, 0, start_offset)])
        deadline = time.monotonic() + 30
        say(f"reading {topic} from offset {start_offset}:")
        while time.monotonic() < deadline:
            msg = consumer.poll(0.3)
            if msg is None or msg.error() is not None:
                if deleted:
                    break
                continue
            key, value = _payload(msg.key()), _payload(msg.value())
            say(f"  #{msg.offset():<4} {describe(key, value)}")
            seen += 1
            if value is None and (key or {}).get("id") == inserted_id:
                deleted = True
    finally:
        consumer.close()
    if not deleted:
        raise DemoError(f"the delete of id {inserted_id} did not reach Kafka within 30 s")
    say(
        f"{seen} events: the snapshot (r), then the insert (c), update (u), delete (d) and its "
        "tombstone"
    )


MARIADB_EXAMPLE = ROOT / "examples" / "mysql.yaml"


def mariadb_conn(demo: Demo, database: str | None = None) -> Any:
    import pymysql  # type: ignore[import-untyped]

    e = demo.env
    return pymysql.connect(
        host=e["TIDEMARK_MYSQL_HOST"],
        port=int(e["TIDEMARK_MYSQL_PORT"]),
        user=e["TIDEMARK_MYSQL_USER"],
        password=e["TIDEMARK_MYSQL_PASSWORD"],
        database=database,
        autocommit=True,
    )


def create_mariadb_inventory(demo: Demo) -> None:
    conn = mariadb_conn(demo)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS inventory")
            cur.execute(
                "CREATE TABLE IF NOT EXISTS inventory.customers ("
                " id int AUTO_INCREMENT PRIMARY KEY, first_name varchar(255) NOT NULL,"
                " last_name varchar(255) NOT NULL, email varchar(255) NOT NULL UNIQUE)"
            )
            cur.execute(
                "INSERT IGNORE INTO inventory.customers (first_name, last_name, email) VALUES"
                " ('Sally', 'Thomas', 'sally.thomas@acme.com'),"
                " ('George', 'Bailey', 'gbailey@foobar.com')"
            )
            cur.execute("SELECT count(*) FROM inventory.customers")
            say(f"MariaDB inventory.customers has {cur.fetchone()[0]} rows")
    finally:
        conn.close()


def mariadb_connector(demo: Demo, state_dir: Path) -> tuple[str, dict[str, str]]:
    """The MariaDB connector the demo sends over REST: examples/mysql.yaml's, pointed at this
    stack. A config sent over REST may not read the worker's environment (docs/security.md),
    so the password goes into ``<state.dir>/secrets/``, the one place such configs may read
    when the worker declares no config providers."""
    doc = yaml.safe_load(MARIADB_EXAMPLE.read_text())
    spec = doc["connectors"][0]
    config = dict(spec["config"])
    config["database.hostname"] = demo.env["TIDEMARK_MYSQL_HOST"]
    config["database.port"] = demo.env["TIDEMARK_MYSQL_PORT"]
    config["database.user"] = demo.env["TIDEMARK_MYSQL_USER"]
    secrets = state_dir / "secrets"
    secrets.mkdir(mode=0o700, parents=True, exist_ok=True)
    secret = secrets / "mariadb-password"
    secret.write_text(demo.env["TIDEMARK_MYSQL_PASSWORD"])
    secret.chmod(0o600)
    config["database.password"] = f"${{dir:{secrets}:mariadb-password}}"
    return str(spec["name"]), {k: str(v) for k, v in config.items()}


def add_mariadb_connector(demo: Demo) -> None:
    """POST /connectors, as one would with Kafka Connect's REST API."""
    name, config = mariadb_connector(demo, demo.work / "worker-state")
    demo.mariadb_topic = f"{config['topic.prefix']}.inventory.customers"
    demo.mariadb_start = topic_end(demo.env["TIDEMARK_KAFKA_BOOTSTRAP"], demo.mariadb_topic)
    client = demo.client()
    status, body = client.request("POST", "/connectors", {"name": name, "config": config})
    if status == 409:
        say(f"connector `{name}` already exists")
    elif status != 201:
        raise DemoError(f"POST /connectors answered {status}: {body}")
    else:
        say(
            f'$ curl -X POST {demo.url}/connectors -d \'{{"name": "{name}", ...}}\'  -> 201 Created'
        )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        doc = client.get("/tidemark/status")["connectors"].get(name)
        task = ((doc or {}).get("status", {}).get("tasks") or [{}])[0]
        if task.get("state") == "FAILED":
            raise DemoError(f"the MariaDB connector failed:\n{task.get('trace')}")
        detail = ((doc or {}).get("tasks") or [{}])[0]
        if detail.get("snapshot", {}).get("completed") and detail.get("streaming", {}).get(
            "connected"
        ):
            rows = sum(t["rows"] for t in detail["snapshot"].get("tables", []))
            say(f"`{name}` RUNNING: snapshot of {rows} rows done, streaming the binlog")
            return
        time.sleep(0.3)
    raise DemoError("the MariaDB connector did not finish its snapshot within 90 s")


def make_mariadb_changes(demo: Demo) -> None:
    email = f"kim.{uuid.uuid4().hex[:6]}@example.com"
    conn = mariadb_conn(demo, "inventory")
    try:
        with conn.cursor() as cur:
            cur.execute(
                "INSERT INTO customers (first_name, last_name, email) VALUES ('Kim', 'Lee', %s)",
                (email,),
            )
            demo.mariadb_id = int(cur.lastrowid)
            say(
                f"INSERT INTO inventory.customers ... 'Kim', 'Lee', '{email}'  -> id "
                f"{demo.mariadb_id}"
            )
            cur.execute("UPDATE customers SET last_name = 'Li' WHERE id = %s", (demo.mariadb_id,))
            say(f"UPDATE inventory.customers SET last_name = 'Li' WHERE id = {demo.mariadb_id}")
            cur.execute("DELETE FROM customers WHERE id = %s", (demo.mariadb_id,))
            say(f"DELETE FROM inventory.customers WHERE id = {demo.mariadb_id}")
    finally:
        conn.close()


def show_mariadb_events(demo: Demo) -> None:
    read_events(demo, demo.mariadb_topic, demo.mariadb_start, demo.mariadb_id)


def apply_to_delta(demo: Demo) -> None:
    """The downstream half: the Spark apply job drains the PostgreSQL topic into a Delta
    table (available-now trigger), which must then equal the source table."""
    import psycopg

    from cdc.apply.cli import main as apply_main
    from cdc.apply.jars import JarsMissing, resolved_jars

    try:
        resolved_jars()
    except JarsMissing as exc:
        raise DemoError(str(exc)) from None
    lake = demo.work / "lake"
    shutil.rmtree(lake, ignore_errors=True)
    config = {
        "kafka": {
            "bootstrap.servers": demo.env["TIDEMARK_KAFKA_BOOTSTRAP"],
            "topic.pattern": demo.topic.replace(".", r"\."),
            "starting.offsets": "earliest",
        },
        "target": {"path": str(lake / "tables"), "table.name": "customers"},
        "checkpoint.location": str(lake / "_checkpoints"),
        "spark": {"master": "local[2]", "conf": {"spark.driver.memory": "1g"}},
    }
    path = demo.work / "apply.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    say(f"$ tidemark apply {path.relative_to(ROOT)} --trigger available-now")
    t0 = time.monotonic()
    code = apply_main([str(path), "--trigger", "available-now", "--log-level", "WARNING"])
    if code != 0:
        raise DemoError(f"the apply job exited with code {code}")
    say(f"applied {demo.topic} to Delta in {time.monotonic() - t0:.0f} s")
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    assert spark is not None
    try:
        delta = spark.read.format("delta").load(str(lake / "tables" / "customers"))
        rows = sorted(
            (r["id"], r["first_name"], r["last_name"], r["email"])
            for r in delta.select("id", "first_name", "last_name", "email").collect()
        )
    finally:
        spark.stop()
    say("Delta table customers:")
    for row in rows:
        say(f"  id={row[0]:<4} {row[1]:<8} {row[2]:<10} {row[3]}")
    with psycopg.connect(demo.pg_dsn("inventory")) as conn:
        source = sorted(
            tuple(r)
            for r in conn.execute(
                "SELECT id, first_name, last_name, email FROM inventory.customers"
            ).fetchall()
        )
    if rows != source:
        raise DemoError(f"the Delta table differs from PostgreSQL: {rows} != {source}")
    say(f"equal to PostgreSQL's inventory.customers, row for row ({len(rows)} rows)")


def show_status(demo: Demo) -> None:
    from worker.rest.status_view import render_status

    say(f"$ tidemark status --url {demo.url}")
    for line in render_status(demo.client()).splitlines():
        say(f"  {line}")


def stop_worker(demo: Demo) -> None:
    assert demo.worker is not None
    t0 = time.monotonic()
    demo.worker.send_signal(signal.SIGTERM)
    try:
        code = demo.worker.wait(40)
    except subprocess.TimeoutExpired:
        raise DemoError("the worker did not stop within 40 s after SIGTERM") from None
    took = time.monotonic() - t0
    if code != 0:
        raise DemoError(f"the worker exited with code {code} (see {demo.log_path})")
    say(
        f"SIGTERM: the worker drained its queue, flushed Kafka and committed offsets; "
        f"exit code 0 after {took:.1f} s"
    )
    assert demo.config_path is not None
    offsets = demo.work / "worker-state" / "offsets.json"
    if offsets.exists():
        for entry in orjson.loads(offsets.read_bytes())["offsets"]:
            off = entry["offset"]
            say(
                f"committed offset of `{entry['connector']}`: {_position(off)} "
                f"({offsets.relative_to(ROOT)}); the next start resumes there"
            )


Step = tuple[str, Callable[[Demo], None]]

STEPS: list[Step] = [
    ("starting the local stack (PostgreSQL, MariaDB, Kafka) on 127.0.0.1", start_stack),
    ("creating the sample `inventory` database in PostgreSQL", create_inventory_step),
    ("checking a Kafka round trip (idempotent producer -> consumer)", kafka_round_trip_step),
    ("writing the worker config from examples/postgres.yaml", write_worker_config),
    ("starting the worker: tidemark run", start_worker),
    ("waiting for the connector to snapshot inventory.customers", wait_for_snapshot),
    ("changing rows in inventory.customers", make_changes),
    ("reading the change events from Kafka", show_events),
    ("creating the sample `inventory` database in MariaDB", create_mariadb_inventory),
    ("adding a MariaDB connector over the REST API", add_mariadb_connector),
    ("changing rows in MariaDB's inventory.customers", make_mariadb_changes),
    ("reading the MariaDB change events from Kafka", show_mariadb_events),
    ("the worker's status", show_status),
    ("stopping the worker with SIGTERM", stop_worker),
    ("applying the PostgreSQL change events to a Delta Lake table (Spark)", apply_to_delta),
]


def main(steps: list[Step] | None = None) -> int:
    demo = Demo()
    try:
        for title, func in steps or STEPS:
            step(title)
            func(demo)
    except (StackError, DemoError) as exc:
        print(f"\ndemo failed: {exc}", file=sys.stderr)
        if demo.log_path.exists() and demo.worker is not None:
            tail = demo.log_path.read_text(errors="replace").splitlines()[-15:]
            print("last lines of the worker log:\n  " + "\n  ".join(tail), file=sys.stderr)
        return 1
    finally:
        demo.stop_worker()
    step("done. The stack keeps running; `.venv/bin/tidemark dev down` stops it.")
    say("Run the worker yourself:")
    say('  eval "$(.venv/bin/tidemark dev env)"; .venv/bin/tidemark run examples/postgres.yaml')
    say("and look at it with `.venv/bin/tidemark status` or curl localhost:8083/connectors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
