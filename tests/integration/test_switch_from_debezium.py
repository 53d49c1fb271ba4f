"""A connector moved from the real Debezium Server 3.6 to tidemark and back, on the same
slot/binlog, topics and schema history, with the offsets carried in Debezium Server's own
offset file (`tidemark offsets import|export`). Nothing is snapshotted again and nothing is
lost: each side delivers what the other had not, at most repeating the transaction the other
was in, and the topic's last event per key equals the table after each move. PostgreSQL with
Debezium's PostgreSQL connector, MariaDB with Debezium's MariaDB connector.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pymysql  # type: ignore[import-untyped]
import pytest

from bench.compare import debezium
from bench.compare.common import free_port, stop_process
from cdc.offsets.debezium_server_file import parse_offsets
from tests.integration import pg_cleanup
from tests.integration.conftest import MySqlInfo, PgInfo
from tests.integration.debezium_server import debezium_server
from tests.integration.pg_harness import Event, read_topic
from tests.integration.test_worker_rest import wait_for
from worker.rest.client import Client

TIDEMARK = str(Path(sys.executable).parent / "tidemark")


def changes(events: list[Event]) -> list[tuple[str | None, int]]:
    """(op, id) of each change event; tombstones and schema changes left out."""
    return [(e.op, int(e.key["id"])) for e in events if e.value is not None]


def last_per_key(events: list[Event]) -> dict[int, str | None]:
    out: dict[int, str | None] = {}
    for e in events:
        key = int(e.key["id"])
        if e.value is None or e.op == "d":
            out.pop(key, None)
        else:
            out[key] = e.after["v"]
    return out


def debezium_common(offsets: Path, http_port: int) -> dict[str, Any]:
    """Debezium Server's settings that are the same for both databases."""
    return {
        "snapshot_mode": "initial",
        "queue": {},
        "producer": {},
        "offsets_file": offsets,
        "offset_flush_ms": 500,
        "http_port": http_port,
    }


@dataclass
class Database:
    """What differs between the databases: how to write and read the table, and the two
    sides' configurations of the same connector."""

    topic: str
    server: str
    #: runs its statements as one transaction
    sql: Callable[..., None]
    table: Callable[[], dict[int, str | None]]
    #: Debezium Server's properties for (offset file, HTTP port)
    debezium_props: Callable[[Path, int], dict[str, str]]
    tidemark_config: dict[str, str]
    #: tidemark skips exactly what Debezium delivered of the transaction it stopped in
    #: (PostgreSQL); else that transaction comes again from its start (MySQL's event counts)
    exact_takeover: bool = False


@contextmanager
def tidemark_worker(
    kafka: str, tmp: Path, offsets_topic: str | None
) -> Iterator[tuple[Client, Callable[..., Any]]]:
    """`tidemark run` with no connectors, its REST client and the `tidemark offsets` CLI;
    offsets in a file, or in ``offsets_topic`` (Kafka Connect's layout)."""
    port = free_port()
    yaml = tmp / "worker.yaml"
    store = (
        f"  offset.storage: kafka\n  offset.storage.topic: {offsets_topic}\n"
        if offsets_topic
        else ""
    )
    yaml.write_text(
        "worker:\n"
        f"  bootstrap.servers: {kafka}\n"
        "  rest.host: 127.0.0.1\n"
        f"  rest.port: {port}\n"
        f"  state.dir: {tmp / 'state'}\n"
        f"  rest.allowed.paths: {tmp}\n"
        "  offset.flush.interval.ms: 200\n"
        f"{store}"
        "connectors: []\n"
    )
    url = f"http://127.0.0.1:{port}"
    client = Client(url, timeout=30)
    env = {**os.environ, "TIDEMARK_URL": url}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TIDEMARK, "offsets", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    log_path = tmp / "worker.log"
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [TIDEMARK, "run", str(yaml)], stdout=log, stderr=subprocess.STDOUT
        )
    try:

        def healthy() -> bool:
            assert worker.poll() is None, log_path.read_text()
            try:
                return client.request("GET", "/health")[0] == 200
            except Exception:
                return False

        wait_for(healthy, 60, "the worker")
        yield client, cli
    finally:
        worker.terminate()
        worker.wait(30)


def move_and_back(d: Database, kafka: str, tmp: Path, *, via_topic: bool = False) -> None:
    """Debezium → tidemark → Debezium. ``via_topic``: both keep their offsets in one Kafka
    topic in Kafka Connect's layout (as a Kafka Connect cluster does) and nothing is
    imported or exported: each side reads the other's offsets as they are."""
    home, java = debezium_server()
    offsets_topic = f"{d.server}-offsets" if via_topic else None

    def run_debezium(offsets: Path, name: str, until: int) -> list[Event]:
        props = d.debezium_props(offsets, free_port())
        if offsets_topic:
            props.pop("debezium.source.offset.storage.file.filename")
            props.update(
                {
                    "debezium.source.offset.storage": (
                        "org.apache.kafka.connect.storage.KafkaOffsetBackingStore"
                    ),
                    "debezium.source.offset.storage.topic": offsets_topic,
                    "debezium.source.offset.storage.partitions": "1",
                    "debezium.source.offset.storage.replication.factor": "1",
                    "debezium.source.bootstrap.servers": kafka,
                }
            )
        run = debezium.start(home, java, tmp / name, props)
        try:
            events = read_topic(kafka, d.topic, min_count=until, timeout=120, settle=2.0)
            assert len(events) >= until, run.log_tail()
            return events
        finally:
            assert stop_process(run.proc) is not None
            run.log.close()

    d.sql("INSERT INTO t VALUES (1, 'v1'), (2, 'v2'), (3, 'v3'), (4, 'v4'), (5, 'v5')")
    # 1. Debezium Server snapshots and streams; its last transaction has three changes
    dbz_offsets = tmp / "offsets.dat"
    run_debezium(dbz_offsets, "dbz1", until=5)
    d.sql("INSERT INTO t VALUES (6, 'six')")
    d.sql("UPDATE t SET v = 'two' WHERE id = 2")
    last_tx = (
        "DELETE FROM t WHERE id = 3",
        "INSERT INTO t VALUES (7, 'x')",
        "UPDATE t SET v = 'y' WHERE id = 4",
    )
    d.sql(*last_tx)
    before = run_debezium(dbz_offsets, "dbz2", until=5 + 6)
    assert changes(before)[5:] == [("c", 6), ("u", 2), ("d", 3), ("c", 7), ("u", 4)]
    if not via_topic:
        assert parse_offsets(dbz_offsets.read_bytes())[0].partition == {"server": d.server}

    # 2. changes while nothing captures, then tidemark takes over from Debezium's offsets
    d.sql("INSERT INTO t VALUES (8, 'eight')")
    d.sql("UPDATE t SET v = 'one' WHERE id = 1")
    d.sql("DELETE FROM t WHERE id = 5")
    d.sql(
        "INSERT INTO t VALUES (9, 'nine')",
        "UPDATE t SET v = 'z' WHERE id = 6",
        "DELETE FROM t WHERE id = 7",
    )
    # Debezium Server's offsets are named after its sink type
    name = "kafka" if via_topic else "mig"
    with tidemark_worker(kafka, tmp, offsets_topic) as (client, cli):
        state = "RUNNING" if via_topic else "STOPPED"
        body = {"name": name, "config": d.tidemark_config, "initial_state": state}
        status, doc = client.request("POST", "/connectors", body)
        assert status == 201, doc
        if not via_topic:
            done = cli("import", name, str(dbz_offsets))
            assert done.returncode == 0, done.stderr
            expected = "continues after them" if d.exact_takeover else "again from its start"
            assert expected in done.stdout, done.stdout
            assert client.request("PUT", f"/connectors/{name}/resume")[0] == 202
        wanted = [("c", 8), ("u", 1), ("d", 5), ("c", 9), ("u", 6), ("d", 7)]
        after = read_topic(kafka, d.topic, min_count=len(before) + 6, timeout=90, settle=2.0)
        taken = changes(after[len(before) :])
        # no snapshot; Debezium's last transaction again (it was inside it) unless the rest
        # of it can be told apart, then everything after it
        if d.exact_takeover:
            assert taken == wanted
        else:
            assert taken in (wanted, [("d", 3), ("c", 7), ("u", 4), *wanted]), taken
        assert last_per_key(after) == d.table()
        # a column added while tidemark captures: the schema history (MariaDB) gets tidemark's
        # record, which Debezium must read back after the next move
        d.sql("ALTER TABLE t ADD COLUMN w int")
        d.sql("INSERT INTO t VALUES (11, 'eleven', 5)")
        more = read_topic(kafka, d.topic, min_count=len(after) + 1, timeout=60, settle=2.0)
        assert changes(more[len(after) :]) == [("c", 11)] and more[-1].after["w"] == 5
        after = more

        # 3. and back: tidemark's offset handed to Debezium Server in its file
        assert client.request("PUT", f"/connectors/{name}/stop")[0] == 204
        back = tmp / "back.dat"
        if not via_topic:
            done = cli("export", name, str(back))
            assert done.returncode == 0, done.stderr
    d.sql("INSERT INTO t VALUES (10, 'ten', 7)")
    d.sql("UPDATE t SET v = 'nine!' WHERE id = 9")
    final = run_debezium(back, "dbz3", until=len(after) + 2)
    # tidemark stores no offset at a commit either: its last transaction may come again
    assert changes(final[len(after) :]) in ([("c", 10), ("u", 9)], [("c", 11), ("c", 10), ("u", 9)])
    assert [e.after["w"] for e in final[len(after) :] if e.op == "c"][-1] == 7
    assert last_per_key(final) == d.table()


@pytest.mark.postgres
@pytest.mark.kafka
@pytest.mark.parametrize("via_topic", [False, True], ids=["offset-file", "offsets-topic"])
def test_postgres_connector_moves_from_debezium_server_and_back(
    postgres: PgInfo, kafka: str, tmp_path: Path, via_topic: bool
) -> None:
    tag = uuid.uuid4().hex[:8]
    db, prefix = f"mig_{tag}", f"mig{tag}"
    slot, publication = f"slot_mig{tag}", f"pub_mig{tag}"
    pg_cleanup.create_database(postgres.dsn(), db)

    def sql(*statements: str) -> None:
        with psycopg.connect(postgres.dsn(db), autocommit=True) as c, c.transaction():
            for s in statements:
                c.execute(s)  # type: ignore[arg-type]

    def table() -> dict[int, str | None]:
        with psycopg.connect(postgres.dsn(db)) as c:
            return dict(c.execute("SELECT id, v FROM t").fetchall())

    env = {
        "TIDEMARK_KAFKA_BOOTSTRAP": kafka,
        "TIDEMARK_PG_HOST": postgres.host,
        "TIDEMARK_PG_PORT": str(postgres.port),
        "TIDEMARK_PG_USER": postgres.user,
        "TIDEMARK_PG_PASSWORD": postgres.password,
    }

    def debezium_props(offsets: Path, http_port: int) -> dict[str, str]:
        return debezium.properties(
            env=env,
            db=db,
            slot=slot,
            publication=publication,
            topic_prefix=prefix,
            **debezium_common(offsets, http_port),
        )

    config = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": postgres.host,
        "database.port": str(postgres.port),
        "database.user": postgres.user,
        "database.password": postgres.password,
        "database.dbname": db,
        "topic.prefix": prefix,
        "slot.name": slot,
        "publication.name": publication,
        "publication.autocreate.mode": "disabled",
        "snapshot.mode": "initial",
    }
    try:
        sql("CREATE TABLE t (id int PRIMARY KEY, v text)")
        sql(f"CREATE PUBLICATION {publication} FOR TABLE t")
        database = Database(
            f"{prefix}.public.t", prefix, sql, table, debezium_props, config, exact_takeover=True
        )
        move_and_back(database, kafka, tmp_path, via_topic=via_topic)
    finally:
        with psycopg.connect(postgres.dsn(), autocommit=True) as c:
            c.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s AND NOT active",
                (slot,),
            )
        pg_cleanup.drop_database(postgres.dsn(), db)


@pytest.mark.mariadb
@pytest.mark.kafka
@pytest.mark.parametrize("via_topic", [False, True], ids=["offset-file", "offsets-topic"])
def test_mariadb_connector_moves_from_debezium_server_and_back(
    mariadb: MySqlInfo, kafka: str, tmp_path: Path, via_topic: bool
) -> None:
    """Debezium's MariaDB connector and tidemark's share the binlog position (GTIDs) and the
    schema history file: tidemark recovers the table from the records Debezium wrote, and
    Debezium from the ones tidemark appended."""
    tag = uuid.uuid4().hex[:8]
    db, prefix = f"mig_{tag}", f"mig{tag}"
    history = tmp_path / "history.dat"

    def connect(database: str | None = None) -> Any:
        return pymysql.connect(**mariadb.settings(), database=database, autocommit=False)

    def sql(*statements: str) -> None:
        conn = connect(db)
        try:
            with conn.cursor() as cur:
                for s in statements:
                    cur.execute(s)
            conn.commit()
        finally:
            conn.close()

    def table() -> dict[int, str | None]:
        conn = connect(db)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT id, v FROM t")
                return {int(k): v for k, v in cur.fetchall()}
        finally:
            conn.close()

    env = {
        "TIDEMARK_KAFKA_BOOTSTRAP": kafka,
        "TIDEMARK_MYSQL_HOST": mariadb.host,
        "TIDEMARK_MYSQL_PORT": str(mariadb.port),
        "TIDEMARK_MYSQL_USER": mariadb.user,
        "TIDEMARK_MYSQL_PASSWORD": mariadb.password,
    }

    def debezium_props(offsets: Path, http_port: int) -> dict[str, str]:
        return debezium.mariadb_properties(
            env=env,
            db=db,
            server_id=random.randint(100_000, 900_000),
            history_file=history,
            topic_prefix=prefix,
            **debezium_common(offsets, http_port),
        )

    config = {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "database.hostname": mariadb.host,
        "database.port": str(mariadb.port),
        "database.user": mariadb.user,
        "database.password": mariadb.password,
        "database.server.id": str(random.randint(100_000, 900_000)),
        "database.include.list": db,
        "topic.prefix": prefix,
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(history),
        "include.schema.changes": "false",
        "snapshot.mode": "initial",
    }
    admin = connect()
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE {db}")
        sql("CREATE TABLE t (id int PRIMARY KEY, v varchar(40))")
        database = Database(f"{prefix}.{db}.t", prefix, sql, table, debezium_props, config)
        move_and_back(database, kafka, tmp_path, via_topic=via_topic)
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
        admin.close()
