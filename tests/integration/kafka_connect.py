"""A real Kafka Connect worker (distributed mode, one node) for the REST comparison test.

``worker/dev/maven/kafka-connect.xml`` pins Kafka Connect (the dev broker's Kafka version) and
Debezium's PostgreSQL connector; ``worker.dev.kafka.resolve_jars`` resolves them from Maven
Central once per machine. Debezium 3.6 is compiled for Java 21: the runtime is the one the
Debezium Server tests use (``bench.compare.debezium.resolve_java``). Never skipped: a worker
that cannot be resolved or started fails the test with the reason."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from types import TracebackType

import pytest

from bench.compare import debezium
from bench.compare.common import BenchError, free_port
from worker.dev.kafka import KAFKA_VERSION, resolve_jars
from worker.rest.client import ApiError, Client

_LOG4J = """\
rootLogger.level=INFO
rootLogger.appenderRef.f.ref=F
appender.f.type=File
appender.f.name=F
appender.f.fileName={log}
appender.f.layout.type=PatternLayout
appender.f.layout.pattern=%d %p %c{{1}} %m%n
"""


class KafkaConnectWorker:
    """``ConnectDistributed`` on a free loopback port, with internal topics of its own."""

    def __init__(self, bootstrap: str, workdir: Path) -> None:
        try:
            self.lib = resolve_jars("kafka-connect", KAFKA_VERSION)
            self.java = debezium.resolve_java()
        except (BenchError, Exception) as exc:
            pytest.fail(f"Kafka Connect {KAFKA_VERSION} is not usable here: {exc}")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workdir = workdir
        self.log_path = workdir / "connect.log"
        group = "kc-" + uuid.uuid4().hex[:8]
        props = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "offset.storage.topic": f"{group}-offsets",
            "config.storage.topic": f"{group}-configs",
            "status.storage.topic": f"{group}-status",
            "offset.storage.replication.factor": "1",
            "config.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "listeners": self.url,
            "plugin.discovery": "only_scan",
            "offset.flush.interval.ms": "500",
        }
        (workdir / "connect.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (workdir / "log4j2.properties").write_text(_LOG4J.format(log=self.log_path))
        self.proc: subprocess.Popen[bytes] | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> KafkaConnectWorker:
        with open(self.workdir / "stdout.log", "wb") as out:
            self.proc = subprocess.Popen(
                [
                    self.java,
                    "-Xmx512m",
                    f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
                    "-cp",
                    f"{self.lib}/*",
                    "org.apache.kafka.connect.cli.ConnectDistributed",
                    str(self.workdir / "connect.properties"),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
            )
        try:
            if self._ready(120):
                return self
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self.__exit__(None, None, None)
        pytest.fail(f"Kafka Connect did not start within 120 s:\n{self.log()[-4000:]}")

    def _ready(self, timeout: float) -> bool:
        assert self.proc is not None
        client = Client(self.url, timeout=5)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                # GET /connectors answers only once the herder has joined its group
                if client.request("GET", "/connectors")[0] == 200:
                    return True
            except ApiError:  # not listening yet
                pass
            time.sleep(0.5)
        return False

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
