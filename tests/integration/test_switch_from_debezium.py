"""A PostgreSQL connector moved from the real Debezium Server 3.6 to tidemark and back, on the
same slot, publication and topics, with the offsets carried in Debezium Server's own offset
file (`tidemark offsets import|export`). Nothing is snapshotted again and nothing is lost:
each side delivers what the other had not, at most repeating the transaction the other was
in, and the topic's last event per key equals the table after each move.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from bench.compare import debezium
from bench.compare.common import free_port, stop_process
from cdc.offsets.debezium_server_file import parse_offsets
from tests.integration import pg_cleanup
from tests.integration.conftest import PgInfo
from tests.integration.debezium_server import debezium_server
from tests.integration.pg_harness import Event, read_topic
from tests.integration.test_worker_rest import wait_for
from worker.rest.client import Client

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

TIDEMARK = str(Path(sys.executable).parent / "tidemark")


def changes(events: list[Event]) -> list[tuple[str | None, int]]:
    """(op, id) of each change event; tombstones left out."""
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


def test_postgres_connector_moves_from_debezium_server_and_back(
    postgres: PgInfo, kafka: str, tmp_path: Path
) -> None:
    home, java = debezium_server()
    tag = uuid.uuid4().hex[:8]
    db, prefix = f"mig_{tag}", f"mig{tag}"
    slot, publication = f"slot_mig{tag}", f"pub_mig{tag}"
    topic = f"{prefix}.public.t"
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

    def run_debezium(offsets: Path, workdir: Path, until: int) -> list[Event]:
        props = debezium.properties(
            env=env,
            db=db,
            slot=slot,
            publication=publication,
            topic_prefix=prefix,
            snapshot_mode="initial",
            queue={},
            producer={},
            offsets_file=offsets,
            offset_flush_ms=500,
            http_port=free_port(),
        )
        run = debezium.start(home, java, workdir, props)
        try:
            events = read_topic(kafka, topic, min_count=until, timeout=120, settle=2.0)
            assert len(events) >= until, run.log_tail()
            return events
        finally:
            assert stop_process(run.proc) is not None
            run.log.close()

    try:
        sql("CREATE TABLE t (id int PRIMARY KEY, v text)")
        sql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 5) g")
        sql(f"CREATE PUBLICATION {publication} FOR TABLE t")
        # 1. Debezium Server snapshots and streams; its last transaction has three changes
        dbz_offsets = tmp_path / "offsets.dat"
        run_debezium(dbz_offsets, tmp_path / "dbz1", until=5)
        sql("INSERT INTO t VALUES (6, 'six')")
        sql("UPDATE t SET v = 'two' WHERE id = 2")
        sql(
            "DELETE FROM t WHERE id = 3",
            "INSERT INTO t VALUES (7, 'seven')",
            "UPDATE t SET v = 'four' WHERE id = 4",
        )
        before = run_debezium(dbz_offsets, tmp_path / "dbz2", until=5 + 6)
        assert changes(before)[5:] == [("c", 6), ("u", 2), ("d", 3), ("c", 7), ("u", 4)]
        assert parse_offsets(dbz_offsets.read_bytes())[0].partition == {"server": prefix}

        # 2. changes while nothing captures, then tidemark takes over from Debezium's offsets
        sql("INSERT INTO t VALUES (8, 'eight')")
        sql("UPDATE t SET v = 'one' WHERE id = 1")
        sql("DELETE FROM t WHERE id = 5")
        sql(
            "INSERT INTO t VALUES (9, 'nine')",
            "UPDATE t SET v = 'six!' WHERE id = 6",
            "DELETE FROM t WHERE id = 7",
        )
        port = free_port()
        yaml = tmp_path / "worker.yaml"
        yaml.write_text(
            "worker:\n"
            f"  bootstrap.servers: {kafka}\n"
            "  rest.host: 127.0.0.1\n"
            f"  rest.port: {port}\n"
            f"  state.dir: {tmp_path / 'state'}\n"
            "  offset.flush.interval.ms: 200\n"
            "connectors: []\n"
        )
        url = f"http://127.0.0.1:{port}"
        client = Client(url, timeout=30)
        cli_env = {**os.environ, "TIDEMARK_URL": url}

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [TIDEMARK, "offsets", *args],
                env=cli_env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
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
        log_path = tmp_path / "worker.log"
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
            status, doc = client.request(
                "POST", "/connectors", {"name": "pg", "config": config, "initial_state": "STOPPED"}
            )
            assert status == 201, doc
            done = cli("import", "pg", str(dbz_offsets))
            assert done.returncode == 0, done.stderr
            assert "delivered again from its start" in done.stdout
            assert client.request("PUT", "/connectors/pg/resume")[0] == 202
            wanted = [("c", 8), ("u", 1), ("d", 5), ("c", 9), ("u", 6), ("d", 7)]
            after = read_topic(kafka, topic, min_count=len(before) + 6, timeout=90, settle=2.0)
            taken = changes(after[len(before) :])
            # no snapshot; Debezium's last transaction again (it was inside it), then the rest
            assert taken in (wanted, [("d", 3), ("c", 7), ("u", 4), *wanted]), taken
            assert last_per_key(after) == table()

            # 3. and back: tidemark's offset handed to Debezium Server in its file
            assert client.request("PUT", "/connectors/pg/stop")[0] == 204
            back = tmp_path / "back.dat"
            done = cli("export", "pg", str(back))
            assert done.returncode == 0, done.stderr
        finally:
            worker.terminate()
            worker.wait(30)
        sql("INSERT INTO t VALUES (10, 'ten')")
        sql("UPDATE t SET v = 'nine!' WHERE id = 9")
        final = run_debezium(back, tmp_path / "dbz3", until=len(after) + 2)
        # tidemark stores no offset at a commit either: its last transaction may come again
        assert changes(final[len(after) :]) in (
            [("c", 10), ("u", 9)],
            [("c", 9), ("u", 6), ("d", 7), ("c", 10), ("u", 9)],
        )
        assert last_per_key(final) == table()
    finally:
        with psycopg.connect(postgres.dsn(), autocommit=True) as c:
            c.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s AND NOT active",
                (slot,),
            )
        pg_cleanup.drop_database(postgres.dsn(), db)
