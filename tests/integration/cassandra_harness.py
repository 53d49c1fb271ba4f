"""Running the Cassandra connector in-process against the local node and Kafka, for tests.
Each test module gets its own keyspace; each connector run its own topic prefix and snapshot
record directory. Tests write only after the connector streams (or snapshot first): the
connector deletes the segments it has delivered, so the node's cdc_raw is shared state."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cassandra.cluster import Cluster

from cdc.engine import Engine, EngineSettings
from cdc.offsets.memory import MemoryOffsetStore
from cdc.offsets.store import OffsetStore
from cdc.testing.kafka_reader import Event, read_topic
from connectors.cassandra import CassandraConnector
from tests.integration.conftest import CassandraInfo
from tests.integration.engine_runner import RunningConnector, running, start_engine, wait_streaming

__all__ = ["CassandraHarness", "Event", "RunningConnector", "child_process"]
ROOT = Path(__file__).parents[2]


class CassandraHarness:
    def __init__(self, node: CassandraInfo, kafka: str, keyspace: str, tmp: Path) -> None:
        self.node = node
        self.kafka = kafka
        self.keyspace = keyspace
        self.tmp = tmp
        self.cluster = Cluster([node.host], port=node.port)
        self.session = self.cluster.connect()
        self.cql(
            f"CREATE KEYSPACE {keyspace} WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )

    def on_kafka(self, bootstrap: str) -> CassandraHarness:
        """The same node and keyspace, another Kafka broker."""
        other = copy.copy(self)
        other.kafka = bootstrap
        return other

    def cql(self, statement: str, params: Any = None) -> list[Any]:
        return list(self.session.execute(statement, params))

    def drop(self) -> None:
        self.cql(f"DROP KEYSPACE IF EXISTS {self.keyspace}")
        self.cluster.shutdown()

    def config(self, **overrides: Any) -> dict[str, Any]:
        server = "cs" + uuid.uuid4().hex[:8]
        cfg = {
            "name": server,
            "connector.class": "io.debezium.connector.cassandra.CassandraConnector",
            "topic.prefix": server,
            "cassandra.hosts": self.node.host,
            "cassandra.port": str(self.node.port),
            "cassandra.config": self.node.config,
            "table.include.list": rf"{self.keyspace}\..*",
            "offset.backing.store.dir": str(self.tmp / server),
            "cdc.dir.poll.interval.ms": "200",
            "snapshot.consistency": "ONE",
        }
        cfg.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
        return cfg

    def start(self, cfg: dict[str, Any], store: OffsetStore | None = None) -> RunningConnector:
        connector = CassandraConnector(cfg)
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

    def wait_streaming(self, run: RunningConnector, timeout: float = 60.0) -> None:
        wait_streaming(run, timeout)

    def topic(self, cfg: dict[str, Any], table: str) -> str:
        return f"{cfg['topic.prefix']}.{self.keyspace}.{table}"

    def read(self, cfg: dict[str, Any], table: str, **kw: Any) -> list[Event]:
        kw.setdefault("timeout", 30.0)
        return read_topic(self.kafka, self.topic(cfg, table), **kw)

    def wait_for(self, predicate: Any, timeout: float = 30.0, run: Any = None) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if run is not None and run.errors:
                raise run.errors[0]
            if predicate():
                return
            time.sleep(0.1)
        raise AssertionError("condition not reached in time")


def module_harness(
    node: CassandraInfo, kafka: str, tmp_factory: Any, prefix: str
) -> Iterator[CassandraHarness]:
    h = CassandraHarness(
        node, kafka, f"{prefix}_{uuid.uuid4().hex[:8]}", tmp_factory.mktemp(prefix)
    )
    yield h
    h.drop()


def child_process(h: CassandraHarness, cfg: dict[str, str], offsets: Path) -> subprocess.Popen[str]:
    """The connector in a process of its own (tests/integration/cassandra_child.py), its
    offsets in ``offsets``, streaming once this returns: a test can SIGKILL it."""
    spec = h.tmp / f"{cfg['name']}-{time.monotonic_ns()}.json"
    spec.write_text(json.dumps({"config": cfg, "bootstrap": h.kafka, "offsets": str(offsets)}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.cassandra_child", str(spec)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    return proc
