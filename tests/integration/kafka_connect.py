"""A real Kafka Connect worker (distributed mode, one node) for the REST comparison test.

``worker/dev/maven/kafka-connect.xml`` pins Kafka Connect (the dev broker's Kafka version) and
Debezium's PostgreSQL connector; ``worker.dev.kafka.resolve_jars`` resolves them from Maven
Central once per machine. Debezium 3.6 is compiled for Java 21: the runtime is the one the
Debezium Server tests use (``bench.compare.debezium.resolve_java``). Never skipped: a worker
that cannot be resolved or started fails the test with the reason."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

import pytest

from bench.compare import debezium
from bench.compare.common import free_port
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

    def __init__(self, bootstrap: str, workdir: Path, plugin_path: Path | None = None) -> None:
        try:
            self.lib = resolve_jars("kafka-connect", KAFKA_VERSION)
            self.java = debezium.resolve_java()
        except Exception as exc:  # BenchError, or Maven's or Java's own
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
        if plugin_path is not None:
            props["plugin.path"] = str(plugin_path)
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


JDBC_SINK_VERSION = "3.6.0.Final"
#: not served by the Maven Central mirror here; taken from Debezium Server's distribution
_FROM_DEBEZIUM_SERVER = ("agroal-api-", "agroal-pool-", "hibernate-agroal-")


def jdbc_sink_plugin_path() -> Path:
    """A ``plugin.path`` holding Debezium's JDBC sink connector
    (``worker/dev/maven/debezium-jdbc-sink.xml`` plus Agroal from Debezium Server)."""
    try:
        lib = resolve_jars("debezium-jdbc-sink", JDBC_SINK_VERSION)
        server_lib = debezium.resolve_distribution() / "lib"
    except Exception as exc:  # BenchError, or Maven's or Java's own
        pytest.fail(f"Debezium's JDBC sink {JDBC_SINK_VERSION} is not usable here: {exc}")
    for jar in sorted(server_lib.glob("*.jar")):
        if jar.name.startswith(_FROM_DEBEZIUM_SERVER) and not (lib / jar.name).exists():
            shutil.copy2(jar, lib / jar.name)
    missing = [p for p in _FROM_DEBEZIUM_SERVER if not any(lib.glob(f"{p}*.jar"))]
    if missing:
        pytest.fail(f"Debezium Server's distribution has no {missing} jars for the JDBC sink")
    return lib.parent


@contextmanager
def tidemark_worker(bootstrap: str, workdir: Path) -> Iterator[str]:
    """``tidemark run`` with no connectors of its own, on a free port: its REST URL."""
    port = free_port()
    (workdir / "worker.yaml").write_text(
        f"worker:\n  bootstrap.servers: {bootstrap}\n  rest.port: {port}\n"
        f"  state.dir: {workdir / 'state'}\n  offset.flush.interval.ms: 500\nconnectors: []\n"
    )
    tidemark = str(Path(sys.executable).parent / "tidemark")
    with open(workdir / "worker.log", "wb") as log:
        proc = subprocess.Popen(
            [tidemark, "run", str(workdir / "worker.yaml")],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
        )
    try:
        client = Client(f"http://127.0.0.1:{port}", timeout=5)
        deadline = time.monotonic() + 60
        while True:
            try:
                if client.request("GET", "/health")[0] == 200:
                    break
            except ApiError:  # not listening yet
                pass
            log_text = (workdir / "worker.log").read_text(errors="replace")
            assert proc.poll() is None, f"tidemark exited:\n{log_text[-3000:]}"
            assert time.monotonic() < deadline, f"tidemark not healthy:\n{log_text[-3000:]}"
            time.sleep(0.3)
        yield client.url
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
