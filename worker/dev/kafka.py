"""Apache Kafka in KRaft mode (one combined broker/controller), from Maven Central jars."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from worker.dev.service import Service, StackError
from worker.dev.tls import TlsFiles, ensure_tls

KAFKA_VERSION = "4.1.1"
CLUSTER_ID = "dGlkZW1hcmstZGV2LWthZg"  # fixed: the data dir belongs to this one cluster
SASL_MECHANISM = "SCRAM-SHA-512"
SASL_USER = "tidemark"
SASL_PASSWORD = "tidemark-secret"


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
    """Listeners: PLAINTEXT on ``port``, the controller on ``port+1``, SASL_SSL (SCRAM-SHA-512)
    on ``port+2`` and SSL with required client certificates (mTLS) on ``port+3``. The TLS
    listeners use the stack's CA (:mod:`worker.dev.tls`) under ``<home>/../tls``."""

    name = "kafka"
    start_timeout = 90.0

    def __init__(self, home: Path, port: int) -> None:
        super().__init__(home, port)
        self.controller_port = port + 1
        self.sasl_ssl_port = port + 2
        self.mtls_port = port + 3
        self.data = self.home / "data"
        self.props = self.home / "server.properties"
        self.tls = TlsFiles.at(home / "tls")
        self.keystore = self.home / "tls" / "server.pem"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def sasl_ssl_bootstrap(self) -> str:
        return f"{self.host}:{self.sasl_ssl_port}"

    @property
    def mtls_bootstrap(self) -> str:
        return f"{self.host}:{self.mtls_port}"

    def sasl_ssl_client(self) -> dict[str, str]:
        """librdkafka settings for the SASL_SSL listener (the CA verifies the broker)."""
        return {
            "bootstrap.servers": self.sasl_ssl_bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SASL_MECHANISM,
            "sasl.username": SASL_USER,
            "sasl.password": SASL_PASSWORD,
            "ssl.ca.location": str(self.tls.ca_cert),
        }

    def mtls_client(self) -> dict[str, str]:
        """librdkafka settings for the mutual-TLS listener (a client certificate is required)."""
        return {
            "bootstrap.servers": self.mtls_bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.tls.ca_cert),
            "ssl.certificate.location": str(self.tls.client_cert),
            "ssl.key.location": str(self.tls.client_key),
        }

    def _tls_properties(self) -> list[str]:
        ensure_tls(self.tls.dir)
        # Kafka's PEM keystore: the private key and the certificate chain in one file.
        self.keystore.parent.mkdir(parents=True, exist_ok=True)
        self.keystore.touch(mode=0o600, exist_ok=True)
        self.keystore.write_bytes(
            self.tls.server_key.read_bytes() + self.tls.server_cert.read_bytes()
        )
        scram = f"listener.name.sasl_ssl.{SASL_MECHANISM.lower()}"
        return [
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={self.keystore}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={self.tls.ca_cert}",
            f"sasl.enabled.mechanisms={SASL_MECHANISM}",
            f"{scram}.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.ssl.ssl.client.auth=required",
        ]

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
                    f"listeners=PLAINTEXT://{h}:{self.port},CONTROLLER://{h}:{self.controller_port}"
                    f",SASL_SSL://{h}:{self.sasl_ssl_port},SSL://{h}:{self.mtls_port}",
                    f"advertised.listeners=PLAINTEXT://{h}:{self.port}"
                    f",SASL_SSL://{h}:{self.sasl_ssl_port},SSL://{h}:{self.mtls_port}",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
                    ",SASL_SSL:SASL_SSL,SSL:SSL",
                    *self._tls_properties(),
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

    def after_start(self) -> None:
        """The SCRAM user of the SASL_SSL listener, created (or its password reset) over the
        plain listener: works for a fresh data folder and for one formatted before TLS."""
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        upsert = UserScramCredentialUpsertion(
            SASL_USER,
            ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
            SASL_PASSWORD.encode(),
        )
        for _, fut in admin.alter_user_scram_credentials([upsert]).items():
            try:
                fut.result(timeout=30)
            except Exception as exc:
                raise StackError(
                    f"kafka: creating the SCRAM user {SASL_USER!r} failed: {exc}"
                ) from exc

    def env(self) -> dict[str, str]:
        return {
            "TIDEMARK_KAFKA_BOOTSTRAP": self.bootstrap,
            "TIDEMARK_KAFKA_SASL_SSL_BOOTSTRAP": self.sasl_ssl_bootstrap,
            "TIDEMARK_KAFKA_SASL_MECHANISM": SASL_MECHANISM,
            "TIDEMARK_KAFKA_SASL_USERNAME": SASL_USER,
            "TIDEMARK_KAFKA_SASL_PASSWORD": SASL_PASSWORD,
            "TIDEMARK_KAFKA_MTLS_BOOTSTRAP": self.mtls_bootstrap,
            "TIDEMARK_TLS_CA": str(self.tls.ca_cert),
            "TIDEMARK_TLS_CLIENT_CERT": str(self.tls.client_cert),
            "TIDEMARK_TLS_CLIENT_KEY": str(self.tls.client_key),
        }
