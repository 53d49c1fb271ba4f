"""Apache Kafka in KRaft mode (one combined broker/controller), from Maven Central jars."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from worker.dev.service import Service, StackError

KAFKA_VERSION = "4.1.1"
CLUSTER_ID = "dGlkZW1hcmstZGV2LWthZg"  # fixed: the data dir belongs to this one cluster


def maven_cache() -> Path:
    """Jars are shared by every clone on the machine, so a warm `up` needs no network."""
    return Path(os.environ.get("TIDEMARK_MAVEN_CACHE", Path.home() / ".cache" / "tidemark"))


def resolve_jars(pom_name: str, version: str) -> Path:
    """Resolve a pinned pom's dependencies into a lib folder once; later calls are free."""
    lib = maven_cache() / f"{pom_name}-{version}" / "lib"
    done = lib / ".resolved"
    if done.exists():
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise StackError("Maven (mvn) not found. Install it with: apt-get install -y maven")
    lib.mkdir(parents=True, exist_ok=True)
    pom = resources.files("worker.dev").joinpath("maven", f"{pom_name}.xml")
    with resources.as_file(pom) as pom_path:
        proc = subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(pom_path),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={lib}",
            ],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    if proc.returncode != 0:
        raise StackError(
            f"resolving {pom_name} {version} from Maven Central failed. Check that Maven "
            f"Central is reachable (proxy settings in ~/.m2/settings.xml), then retry.\n"
            f"{(proc.stdout + proc.stderr).strip()[-2000:]}"
        )
    done.write_text(version)
    return lib


def java() -> str:
    path = shutil.which("java")
    if path is None:
        raise StackError(
            "java not found. Install it with: apt-get install -y openjdk-17-jre-headless"
        )
    return path


class KafkaService(Service):
    name = "kafka"
    start_timeout = 90.0

    def __init__(self, home: Path, port: int) -> None:
        super().__init__(home, port)
        self.controller_port = port + 1
        self.data = self.home / "data"
        self.props = self.home / "server.properties"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def _classpath(self) -> str:
        return str(resolve_jars("kafka", KAFKA_VERSION) / "*")

    def _log4j(self) -> str:
        ref = resources.files("worker.dev").joinpath("conf", "kafka-log4j2.properties")
        return str(ref)

    def prepare(self) -> None:
        cp = self._classpath()
        h = self.host
        self.props.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@{h}:{self.controller_port}",
                    f"listeners=PLAINTEXT://{h}:{self.port},CONTROLLER://{h}:{self.controller_port}",
                    f"advertised.listeners=PLAINTEXT://{h}:{self.port}",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                    f"log.dirs={self.data}",
                    "num.partitions=1",
                    "auto.create.topics.enable=true",
                    "offsets.topic.replication.factor=1",
                    "offsets.topic.num.partitions=10",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "transaction.state.log.num.partitions=4",
                    "share.coordinator.state.topic.replication.factor=1",
                    "share.coordinator.state.topic.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "log.retention.hours=48",
                    "message.max.bytes=10485760",
                    "",
                ]
            )
        )
        if (self.data / "meta.properties").exists():
            return
        self.run_checked(
            [
                java(),
                "-cp",
                cp,
                "kafka.tools.StorageTool",
                "format",
                "-t",
                CLUSTER_ID,
                "-c",
                str(self.props),
            ],
            "formatting Kafka storage",
        )

    def command(self) -> Sequence[str]:
        return [
            java(),
            "-Xms256m",
            "-Xmx1g",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self._log4j()}",
            "-cp",
            self._classpath(),
            "kafka.Kafka",
            str(self.props),
        ]

    def ready(self) -> bool:
        # The broker is usable once it answers a metadata request with itself as a broker.
        try:
            from confluent_kafka.admin import AdminClient
        except ImportError:  # pragma: no cover - confluent-kafka is a core dependency
            return super().ready()
        if not super().ready():
            return False
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 2000})
        try:
            md = admin.list_topics(timeout=2)
        except Exception:
            return False
        return bool(md.brokers)

    def env(self) -> dict[str, str]:
        return {"TIDEMARK_KAFKA_BOOTSTRAP": self.bootstrap}
