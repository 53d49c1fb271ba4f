"""The MongoDB stand-in: mongo-java-server (Maven Central) with its oplog enabled.

No real ``mongod`` can be installed on these machines, so ``tidemark dev`` runs the strongest
wire-protocol stand-in found (see docs/mongodb.md for what it lacks): a real MongoDB wire
protocol for pymongo, every BSON ``_id`` type, ``local.oplog.rs`` with insert/update/delete
entries, and collection-level change streams. It keeps data in memory, so a restart empties
it; tests use unique database names anyway.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from worker.dev.kafka import java, resolve_jars
from worker.dev.service import Service, StackError

MONGO_JAVA_SERVER_VERSION = "1.47.0"


def _answers_is_master(host: str, port: int) -> bool:
    try:
        import pymongo
    except ImportError:  # pragma: no cover - the port is all we can check without it
        return True
    client: pymongo.MongoClient[dict[str, object]] = pymongo.MongoClient(
        host, port, directConnection=True, serverSelectionTimeoutMS=1000
    )
    try:
        client.admin.command("isMaster")
        return True
    except Exception:
        return False
    finally:
        client.close()


class _WireServer(Service):
    """A MongoDB wire-protocol server: ready once it answers ``isMaster``."""

    def ready(self) -> bool:
        return super().ready() and _answers_is_master(self.host, self.port)

    @property
    def uri(self) -> str:
        return f"mongodb://{self.host}:{self.port}/?directConnection=true"


class MongoDBService(_WireServer):
    name = "mongodb"
    start_timeout = 90.0  # the first start compiles the launcher in memory

    def _launcher(self) -> str:
        return str(resources.files("worker.dev").joinpath("conf", "MongoStandIn.java"))

    def prepare(self) -> None:
        resolve_jars("mongo-java-server", MONGO_JAVA_SERVER_VERSION)

    def command(self) -> Sequence[str]:
        lib = resolve_jars("mongo-java-server", MONGO_JAVA_SERVER_VERSION)
        return [
            java(),
            "-Xms64m",
            "-Xmx1g",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            str(lib / "*"),
            self._launcher(),
            self.host,
            str(self.port),
        ]

    def env(self) -> dict[str, str]:
        return {
            "TIDEMARK_MONGODB_HOST": self.host,
            "TIDEMARK_MONGODB_PORT": str(self.port),
            "TIDEMARK_MONGODB_URI": self.uri,
        }


class NxMongoService(_WireServer):
    """The second stand-in: nx-27017 (PyPI, SQLite in memory). Its collection-level change
    streams carry update events (with the document after the update) and a
    ``postBatchResumeToken``, which mongo-java-server's lack; it has no oplog, no database- or
    cluster-level watch, and it loses the type of integer ``_id``s in ``documentKey``."""

    name = "mongonx"

    def _executable(self) -> str:
        beside = Path(sys.executable).parent / "nx-27017"
        found = str(beside) if beside.exists() else shutil.which("nx-27017")
        if found is None:
            raise StackError(
                "nx-27017 not found. Install the mongodb extra: pip install -e '.[mongodb]'"
            )
        return found

    def prepare(self) -> None:
        self._executable()

    def command(self) -> Sequence[str]:
        return [
            self._executable(),
            "--db",
            "memory",
            "--host",
            self.host,
            "-p",
            str(self.port),
            "--log-file",
            str(self.home / "nx.log"),
            "--pid-file",
            str(self.home / "nx.pid"),
        ]

    def env(self) -> dict[str, str]:
        return {"TIDEMARK_MONGONX_URI": self.uri}
