"""The local stack used by the demo, the tests and the benchmarks: one place, one set of ports.

Later services (Cassandra, Spark's jars, Debezium for benchmarks) join by adding a `Service`
subclass to `SERVICE_TYPES`; the CLI, fixtures and CI pick them up from here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from worker.dev.cassandra import CassandraService
from worker.dev.kafka import KafkaService
from worker.dev.mariadb import MariaDBService
from worker.dev.mongodb import MongoDBService, NxMongoService
from worker.dev.postgres import PostgresService
from worker.dev.service import Service, ServiceStatus, StackError
from worker.dev.sqlserver_standin import SqlServerStandinService

#: Default ports. All of them, and the ports derived from them (Kafka's controller and TLS
#: listeners at +1..+3, Cassandra's storage port 17000), lie below Linux's ephemeral range
#: (32768-60999). In that range an outgoing connection of any process may be given the port
#: and hold it for as long as it stays open: a late-starting service then fails to bind (seen
#: in CI: the MongoDB stand-in on 57018 and Cassandra's storage port on 57000).
SERVICE_TYPES: dict[str, tuple[type[Service], int]] = {
    "postgres": (PostgresService, 15432),
    "mariadb": (MariaDBService, 13306),
    "kafka": (KafkaService, 19092),
    "cassandra": (CassandraService, 19042),
    "mongodb": (MongoDBService, 17017),
    "mongonx": (NxMongoService, 17018),
    # a database in the local PostgreSQL, not a process: after "postgres"
    "sqlserver": (SqlServerStandinService, 15432),
}


def default_home() -> Path:
    """`<repo>/.tidemark/dev` for a source checkout (git-ignored), else a per-user folder."""
    if env := os.environ.get("TIDEMARK_DEV_HOME"):
        return Path(env)
    repo = Path(__file__).resolve().parents[2]
    if (repo / "pyproject.toml").exists():
        return repo / ".tidemark" / "dev"
    return Path.home() / ".local" / "state" / "tidemark" / "dev"


class Stack:
    def __init__(self, home: Path | None = None) -> None:
        self.home = home or default_home()
        self.services: dict[str, Service] = {}
        for name, (cls, default_port) in SERVICE_TYPES.items():
            port = int(os.environ.get(cls.port_env_var(), default_port))
            self.services[name] = cls(self.home, port)

    def select(self, names: Iterable[str] | None) -> list[Service]:
        if not names:
            return list(self.services.values())
        unknown = [n for n in names if n not in self.services]
        if unknown:
            raise StackError(
                f"unknown service(s) {', '.join(unknown)}; choose from {', '.join(self.services)}"
            )
        return [self.services[n] for n in names]

    def up(self, names: Iterable[str] | None = None) -> list[tuple[str, bool]]:
        """Start the selected services; (name, started_now) for each. Re-running is a no-op."""
        return [(svc.name, svc.start()) for svc in self.select(names)]

    def down(self, names: Iterable[str] | None = None) -> list[tuple[str, bool]]:
        return [(svc.name, svc.stop()) for svc in reversed(self.select(names))]

    def status(self) -> list[ServiceStatus]:
        return [svc.status() for svc in self.services.values()]

    def env(self, names: Iterable[str] | None = None) -> dict[str, str]:
        out: dict[str, str] = {}
        for svc in self.select(names):
            out.update(svc.env())
        return out

    def __getitem__(self, name: str) -> Service:
        return self.services[name]
