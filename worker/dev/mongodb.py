"""The MongoDB stand-in: mongo-java-server (Maven Central) with its oplog enabled.

No real ``mongod`` can be installed on these machines, so ``tidemark dev`` runs the strongest
wire-protocol stand-in found (see docs/mongodb.md for what it lacks): a real MongoDB wire
protocol for pymongo, every BSON ``_id`` type, ``local.oplog.rs`` with insert/update/delete
entries, and collection-level change streams. It keeps data in memory, so a restart empties
it; tests use unique database names anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources

from worker.dev.kafka import java, resolve_jars
from worker.dev.service import Service

MONGO_JAVA_SERVER_VERSION = "1.47.0"


class MongoDBService(Service):
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

    def ready(self) -> bool:
        if not super().ready():
            return False
        try:
            import pymongo
        except ImportError:  # pragma: no cover - the port is all we can check without it
            return True
        client: pymongo.MongoClient[dict[str, object]] = pymongo.MongoClient(
            self.host, self.port, directConnection=True, serverSelectionTimeoutMS=1000
        )
        try:
            client.admin.command("isMaster")
            return True
        except Exception:
            return False
        finally:
            client.close()

    @property
    def uri(self) -> str:
        return f"mongodb://{self.host}:{self.port}/?directConnection=true"

    def env(self) -> dict[str, str]:
        return {
            "TIDEMARK_MONGODB_HOST": self.host,
            "TIDEMARK_MONGODB_PORT": str(self.port),
            "TIDEMARK_MONGODB_URI": self.uri,
        }
