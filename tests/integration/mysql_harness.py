"""Running the real MySQL connector against the local MariaDB and Kafka, in-process, for tests.

Each test module gets its own database; each connector run its own ``database.server.name``
(topic prefix), ``database.server.id`` (5400-6400 + random) and file schema history.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pymysql

from cdc.engine import Engine, EngineSettings
from cdc.offsets.memory import MemoryOffsetStore
from cdc.offsets.store import OffsetStore
from connectors.mysql import MySqlConnector
from tests.integration.conftest import MySqlInfo
from tests.integration.engine_runner import RunningConnector, running, start_engine, wait_streaming
from tests.integration.pg_harness import Event, read_topic

__all__ = ["Event", "MySqlHarness", "RunningConnector", "read_topic"]


class MySqlHarness:
    def __init__(self, db: MySqlInfo, kafka: str, dbname: str, tmp: Path) -> None:
        self.db = db
        self.kafka = kafka
        self.dbname = dbname
        self.tmp = tmp
        self.sql(f"DROP DATABASE IF EXISTS `{dbname}`", f"CREATE DATABASE `{dbname}`", db="")

    def connect(self, db: str | None = None, **extra: Any) -> Any:
        return pymysql.connect(
            host=self.db.host,
            port=self.db.port,
            user=extra.pop("user", self.db.user),
            password=extra.pop("password", self.db.password),
            database=self.dbname if db is None else (db or None),
            autocommit=True,
            **extra,
        )

    def sql(self, *statements: str, db: str | None = None, params: Any = None) -> list[Any]:
        rows: list[Any] = []
        conn = self.connect(db)
        try:
            with conn.cursor() as cur:
                for s in statements:
                    cur.execute(s, params)
                    if cur.description:
                        rows = list(cur.fetchall())
        finally:
            conn.close()
        return rows

    def drop(self) -> None:
        self.sql(f"DROP DATABASE IF EXISTS `{self.dbname}`", db="")

    def config(self, **overrides: Any) -> dict[str, Any]:
        server = "m" + uuid.uuid4().hex[:8]
        cfg = {
            "name": server,
            "connector.class": "io.debezium.connector.mysql.MySqlConnector",
            "database.server.name": server,
            "database.hostname": self.db.host,
            "database.port": str(self.db.port),
            "database.user": self.db.user,
            "database.password": self.db.password,
            "database.include.list": self.dbname,
            "database.history.file.filename": str(self.tmp / f"{server}.history"),
            "poll.interval.ms": "100",
            "connect.backoff.initial.delay.ms": "200",
            "connect.backoff.max.delay.ms": "1000",
        }
        cfg.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
        return cfg

    @staticmethod
    def new_server_id(cfg: dict[str, Any]) -> dict[str, Any]:
        """Every connector run gets a fresh replica id (two dump threads with one id evict
        each other)."""
        cfg["database.server.id"] = str(
            5400 + random.randint(0, 1000) + random.randint(0, 99999) * 1000
        )
        return cfg

    def start(self, cfg: dict[str, Any], store: OffsetStore | None = None) -> RunningConnector:
        self.new_server_id(cfg)
        connector = MySqlConnector(cfg)
        engine = Engine(
            connector,
            connector.config,
            store or MemoryOffsetStore(),
            EngineSettings(
                producer={"bootstrap.servers": self.kafka},
                offset_flush_interval_ms=200,
                shutdown_timeout_ms=15000,
            ),
        )
        return start_engine(engine, connector)

    @contextmanager
    def running(
        self, cfg: dict[str, Any], store: OffsetStore | None = None
    ) -> Iterator[RunningConnector]:
        with running(lambda: self.start(cfg, store)) as run:
            yield run

    def wait_streaming(self, run: RunningConnector, timeout: float = 30.0) -> None:
        wait_streaming(run, timeout)

    def wait_for(
        self, predicate: Any, timeout: float = 30.0, run: RunningConnector | None = None
    ) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if run is not None and run.errors:
                raise run.errors[0]
            if predicate():
                return
            time.sleep(0.05)
        raise AssertionError("condition not reached in time")

    def topic(self, cfg: dict[str, Any], table: str, db: str | None = None) -> str:
        return f"{cfg['database.server.name']}.{db or self.dbname}.{table}"

    def read(self, cfg: dict[str, Any], table: str, **kw: Any) -> list[Event]:
        return read_topic(self.kafka, self.topic(cfg, table), **kw)


def module_harness(
    db: MySqlInfo, kafka: str, tmp_factory: Any, prefix: str
) -> Iterator[MySqlHarness]:
    """The body of a test module's ``h`` fixture: a fresh database, dropped afterwards."""
    harness = MySqlHarness(
        db, kafka, f"{prefix}_{uuid.uuid4().hex[:8]}", tmp_factory.mktemp(prefix)
    )
    yield harness
    harness.drop()


# -- a TCP proxy, to take the "server" away without touching the shared MariaDB ---------------


class TcpProxy:
    """Forwards 127.0.0.1:<port> to the database; :meth:`cut` drops every connection and stops
    listening (the server is "down"), :meth:`resume` listens again on the same port."""

    def __init__(self, target_host: str, target_port: int) -> None:
        import socket

        self.target = (target_host, target_port)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._listener: Any = None
        self._conns: list[Any] = []
        self._lock = threading.Lock()

    def resume(self) -> None:
        import socket

        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: Any) -> None:
        import socket

        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: Any, dst: Any) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with suppress(OSError):
                    s.close()

    def cut(self) -> None:
        import socket

        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass


# -- a connector in a child process, for SIGKILL tests ----------------------------------------


def run_child(spec_path: str) -> None:
    """``python -m tests.integration.mysql_harness <spec.json>``: run one connector with a file
    offset store until killed."""
    import json

    from cdc.offsets.file import FileOffsetStore

    spec = json.loads(Path(spec_path).read_text())
    store = FileOffsetStore(spec["offsets"])
    store.start()
    connector = MySqlConnector(spec["config"])
    engine = Engine(
        connector,
        connector.config,
        store,
        EngineSettings(producer={"bootstrap.servers": spec["kafka"]}, offset_flush_interval_ms=300),
    )
    engine.run()


if __name__ == "__main__":
    import sys

    run_child(sys.argv[1])


def debezium_mariadb_properties(
    h: MySqlHarness, kafka: str, workdir: Path, topic_prefix: str, snapshot_mode: str
) -> dict[str, str]:
    """Debezium Server's properties for Debezium's MariaDB connector on the harness's
    database (a fresh server id, history and offsets under ``workdir``), for the tests that
    compare tidemark with it."""
    from bench.compare import debezium

    return debezium.mariadb_properties(
        env={
            "TIDEMARK_KAFKA_BOOTSTRAP": kafka,
            "TIDEMARK_MYSQL_HOST": h.db.host,
            "TIDEMARK_MYSQL_PORT": str(h.db.port),
            "TIDEMARK_MYSQL_USER": h.db.user,
            "TIDEMARK_MYSQL_PASSWORD": h.db.password,
        },
        db=h.dbname,
        server_id=random.randint(100_000, 900_000),
        history_file=workdir / "history.dat",
        topic_prefix=topic_prefix,
        snapshot_mode=snapshot_mode,
        queue={"poll.interval.ms": 100},
        producer={"acks": "all", "linger.ms": 5},
        offsets_file=workdir / "offsets.dat",
        offset_flush_ms=1000,
        http_port=debezium.new_http_port(),
    )
