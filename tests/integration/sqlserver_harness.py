"""Running the real SQL Server connector against the SQL Server stand-in and Kafka, in-process.

The stand-in (worker/dev/sqlserver_standin.py) is a PostgreSQL database with SQL Server's CDC
catalog and functions; writers change it with psycopg (PostgreSQL DDL, SQL Server's
``sys.sp_cdc_enable_table`` called as a function), the connector reads it through pyodbc and
the PostgreSQL ODBC driver. Tables get a per-harness suffix so concurrent runs never meet;
every connector run gets its own ``database.server.name`` (topic prefix).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from cdc.engine import Engine, EngineSettings
from cdc.offsets.memory import MemoryOffsetStore
from cdc.offsets.store import OffsetStore
from cdc.testing.kafka_reader import Event, read_topic
from connectors.sqlserver import SqlServerConnector
from tests.integration import pg_cleanup
from tests.integration.conftest import SqlServerInfo
from tests.integration.engine_runner import RunningConnector, running, start_engine, wait_streaming

__all__ = ["Event", "RunningConnector", "SqlServerHarness"]


class SqlServerHarness:
    def __init__(self, db: SqlServerInfo, kafka: str, dbname: str | None = None) -> None:
        self.db = db
        self.kafka = kafka
        self.dbname = dbname or db.dbname
        self.suffix = uuid.uuid4().hex[:8]
        self.created: list[str] = []

    def name(self, table: str) -> str:
        """The real table name of ``table`` in this harness."""
        return f"{table}_{self.suffix}"

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host=self.db.host,
            port=self.db.port,
            user=self.db.user,
            password=self.db.password,
            dbname=self.dbname,
            autocommit=True,
        )

    def sql(self, *statements: str, params: Any = None) -> list[Any]:
        rows: list[Any] = []
        with self.connect() as conn:
            for s in statements:
                cur = conn.execute(s, params)
                if cur.description:
                    rows = list(cur.fetchall())
        return rows

    def create_table(self, table: str, columns: str, *, cdc: bool = True) -> str:
        """``CREATE TABLE dbo.<table>_<suffix> (columns)`` and (by default) enable CDC on it."""
        real = self.name(table)
        self.sql(f'CREATE TABLE dbo."{real}" ({columns})')
        self.created.append(real)
        if cdc:
            self.enable(table)
        return real

    def enable(self, table: str, instance: str | None = None) -> None:
        self.sql(
            "SELECT sys.sp_cdc_enable_table(source_schema => 'dbo', source_name => %s, "
            "role_name => NULL, capture_instance => %s)",
            params=(self.name(table), instance),
        )

    def drop(self) -> None:
        with self.connect() as conn:
            for real in self.created:
                for (inst,) in conn.execute(
                    "SELECT ct.capture_instance FROM cdc.change_tables ct "
                    "WHERE ct.source_object_id = %s::regclass::oid::int",
                    (f'dbo."{real}"',),
                ).fetchall():
                    conn.execute("SELECT sys.sp_cdc_disable_table('dbo', %s, %s)", (real, inst))
                conn.execute(f'DROP TABLE IF EXISTS dbo."{real}"')

    def config(self, *tables: str, **overrides: Any) -> dict[str, Any]:
        server = "ss" + uuid.uuid4().hex[:8]
        cfg = {
            "name": server,
            "connector.class": "io.debezium.connector.sqlserver.SqlServerConnector",
            "database.server.name": server,
            "database.hostname": self.db.host,
            "database.port": str(self.db.port),
            "database.user": self.db.user,
            "database.password": self.db.password,
            "database.names": self.dbname,
            "sqlserver.dialect": "postgres-standin",
            "table.include.list": ",".join(rf"dbo\.{self.name(t)}" for t in tables),
            "streaming.poll.interval.ms": "100",
        }
        cfg.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
        return cfg

    def start(self, cfg: dict[str, Any], store: OffsetStore | None = None) -> RunningConnector:
        """The connector on an in-process engine (``RunningConnector.stop`` ends it)."""
        connector = SqlServerConnector(cfg)
        settings = EngineSettings(
            producer={"bootstrap.servers": self.kafka}, offset_flush_interval_ms=200
        )
        offsets = store or MemoryOffsetStore()
        return start_engine(Engine(connector, connector.config, offsets, settings), connector)

    @contextmanager
    def running(
        self, cfg: dict[str, Any], store: OffsetStore | None = None
    ) -> Iterator[RunningConnector]:
        """The connector, streaming, until the block ends (a graceful stop)."""
        with running(lambda: self.start(cfg, store)) as run:
            wait_streaming(run, 30.0)
            yield run

    def topic(self, cfg: dict[str, Any], table: str) -> str:
        return f"{cfg['database.server.name']}.dbo.{self.name(table)}"

    def read(self, cfg: dict[str, Any], table: str, **kw: Any) -> list[Event]:
        return read_topic(self.kafka, self.topic(cfg, table), **kw)


@contextmanager
def standin_database(info: SqlServerInfo, prefix: str, *, enable_db: bool) -> Iterator[str]:
    """A stand-in database of its own (``<prefix><random>``), with CDC enabled on it or not,
    dropped when the block ends: the only database a test may drop is one it created."""

    def admin(dbname: str) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host=info.host,
            port=info.port,
            user=info.user,
            password=info.password,
            dbname=dbname,
            autocommit=True,
        )

    from worker.dev.sqlserver_standin import install

    name = prefix + uuid.uuid4().hex[:8]
    server = (
        f"host={info.host} port={info.port} user={info.user} password={info.password} "
        "dbname=postgres"
    )
    pg_cleanup.create_database(server, name)
    try:
        with admin(name) as c:
            install(c, enable_db=enable_db)
        yield name
    finally:
        pg_cleanup.drop_database(server, name)


# -- concurrent writers and the topic's final state ------------------------------------------


class Writers:
    """``n`` threads changing ``table(id int primary key, v int not null)`` in small random
    transactions (inserts, updates, deletes, key range 1..keys) until stopped."""

    def __init__(self, h: SqlServerHarness, table: str, n: int = 4, keys: int = 400) -> None:
        import threading

        self.h, self.table, self.keys = h, table, keys
        self.stop_event = threading.Event()
        self.errors: list[BaseException] = []
        self.commits = 0
        self.threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(n)
        ]

    def __enter__(self) -> Writers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        for t in self.threads:
            t.join(30)
        if self.errors:
            raise self.errors[0]

    def _run(self, seed: int) -> None:
        import random

        rnd = random.Random(seed)
        t = f'dbo."{self.table}"'
        try:
            with self.h.connect() as conn:
                while not self.stop_event.is_set():
                    # Random keys in random order: two writers can deadlock each other, which
                    # the server resolves by aborting one; a writer retries it, as apps do.
                    with contextlib.suppress(psycopg.errors.DeadlockDetected), conn.transaction():
                        for _ in range(rnd.randint(1, 4)):
                            k, v = rnd.randint(1, self.keys), rnd.randint(0, 10**6)
                            op = rnd.random()
                            if op < 0.5:
                                conn.execute(
                                    f"INSERT INTO {t} VALUES (%s, %s) "
                                    "ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v",
                                    (k, v),
                                )
                            elif op < 0.8:
                                conn.execute(f"UPDATE {t} SET v = %s WHERE id = %s", (v, k))
                            else:
                                conn.execute(f"DELETE FROM {t} WHERE id = %s", (k,))
                        self.commits += 1
        except BaseException as exc:  # surfaced by __exit__
            self.errors.append(exc)


def final_state(events: list[Event]) -> dict[int, int]:
    """The table the topic describes: the last event per key wins, deletes remove."""
    state: dict[int, int] = {}
    for e in events:
        key = e.key["id"]
        if e.value is None or e.op == "d":
            state.pop(key, None)
        else:
            state[key] = e.after["v"]
    return state


def table_state(h: SqlServerHarness, table: str) -> dict[int, int]:
    return {k: v for k, v in h.sql(f'SELECT id, v FROM dbo."{h.name(table)}"')}


def converged(h: SqlServerHarness, cfg: dict[str, Any], table: str, timeout: float = 60) -> None:
    """Wait until the topic's final state equals the table's; fail showing the difference."""
    want = table_state(h, table)
    deadline = time.monotonic() + timeout
    got: dict[int, int] = {}
    while time.monotonic() < deadline:
        got = final_state(h.read(cfg, table, settle=0.5))
        if got == want:
            return
        time.sleep(0.5)
    missing = sorted(set(want) - set(got))[:10]
    extra = sorted(set(got) - set(want))[:10]
    wrong = sorted(k for k in set(want) & set(got) if want[k] != got[k])[:10]
    raise AssertionError(
        f"topic differs from table: missing {missing}, extra {extra}, wrong {wrong}"
    )


class ChildConnector:
    """The connector in a child process (``run_child``) with a file offset store, to be
    SIGKILLed; ``stored()`` reads the offset file without opening a store."""

    def __init__(self, h: SqlServerHarness, cfg: dict[str, Any], tmp: Path) -> None:
        self.h, self.cfg = h, cfg
        self.spec, self.offsets, self.log = tmp / "spec.json", tmp / "offsets.json", tmp / "log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.spec.write_text(
            json.dumps({"config": self.cfg, "kafka": self.h.kafka, "offsets": str(self.offsets)})
        )
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.integration.sqlserver_harness", str(self.spec)],
                cwd=Path(__file__).resolve().parents[2],
                stdout=subprocess.DEVNULL,
                stderr=out,
            )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(20)

    def stored(self) -> dict[str, Any] | None:
        if not self.offsets.exists():
            return None
        for entry in json.loads(self.offsets.read_text())["offsets"]:
            return dict(entry["offset"])
        return None

    def stored_at(self) -> int:
        """When the offset file was last written (0: never)."""
        return self.offsets.stat().st_mtime_ns if self.offsets.exists() else 0

    def wait(self, predicate: Callable[[], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert self.proc is not None
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, "condition not reached in time"
            time.sleep(0.05)


def run_child(spec_path: str) -> None:
    """``python -m tests.integration.sqlserver_harness <spec.json>``: one connector with a file
    offset store until killed."""
    from cdc.offsets.file import FileOffsetStore

    spec = json.loads(Path(spec_path).read_text())
    store = FileOffsetStore(spec["offsets"])
    store.start()
    connector = SqlServerConnector(spec["config"])
    settings = EngineSettings(
        producer={"bootstrap.servers": spec["kafka"]}, offset_flush_interval_ms=300
    )
    Engine(connector, connector.config, store, settings).run()


if __name__ == "__main__":
    import sys

    run_child(sys.argv[1])
