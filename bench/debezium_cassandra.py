"""Debezium's own Cassandra connector, run beside a node: for the tests that consume its records
(tests/integration/test_apply_debezium_cassandra.py) and the side-by-side drain
(bench/cassandra_compare.py). It is the agent a user runs today: one JVM per node reading that
node's ``cdc_raw``.

``debezium-connector-cassandra-5`` 3.4.0.Final is the newest version of the artifact Maven
Central serves here (3.5+ were not found); its ``jar-with-dependencies`` holds Cassandra 5.0.2
and the Kafka producer, and it reads the 5.0.9 node's commit log. It runs standalone on the
Java 17 the node uses, with the node's ``cassandra.yaml`` (it loads the schema from the node's
data directory, as Debezium documents), real-time processing of the live segment, and no
post-processing. It has no table filter: it captures every CDC table of the node, each to its
own topic under the run's prefix.

**It reads a mirror of ``cdc_raw``, not the node's.** Whatever its post-processing setting, the
agent *moves* each segment it has read to its relocation directory (``archive``): run on the
node's own ``cdc_raw`` it would take the segments that tidemark connectors of tests running
beside it (the other xdist lane) have not read yet, and the backlog of a side-by-side run.
So it gets a copy of ``cassandra.yaml`` whose ``cdc_raw_directory`` is private, and
:class:`CdcRawMirror` hard-links each new segment into it (the live one grows in both, one
inode) and copies each ``_cdc.idx`` as Cassandra rewrites it.

If the jar or Java cannot be had, :class:`AgentError` says why (the tests fail on it, never
skip).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.compare.common import free_port, stop_process
from worker.dev.kafka import java, maven_cache

VERSION = "3.4.0.Final"
ARTIFACT = f"io.debezium:debezium-connector-cassandra-5:{VERSION}:jar:jar-with-dependencies"
JAR = f"debezium-connector-cassandra-5-{VERSION}-jar-with-dependencies.jar"

#: what Cassandra's own start script opens for it on Java 17 (its buffers and file cleaners)
_JVM_FLAGS = [
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
]

_LOGBACK = """<configuration>
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{36} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="OUT"/></root>
</configuration>
"""


class AgentError(RuntimeError):
    """The agent could not be fetched or did not start (the message has its log's tail)."""


def agent_jar() -> Path:
    """The agent jar, copied from Maven Central into the shared cache once."""
    folder = maven_cache() / f"debezium-cassandra-{VERSION}"
    jar = folder / JAR
    if jar.exists():
        return jar
    mvn = shutil.which("mvn")
    if mvn is None:
        raise AgentError("Maven (mvn) is needed to fetch Debezium's Cassandra connector")
    # dependency:copy, not a pom: the artifact's parent pom is not served, its jar is
    proc = subprocess.run(
        [
            mvn,
            "-q",
            "-B",
            "dependency:copy",
            f"-Dartifact={ARTIFACT}",
            f"-DoutputDirectory={folder}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode != 0 or not jar.exists():
        raise AgentError(f"fetching {ARTIFACT} failed:\n{(proc.stdout + proc.stderr)[-2000:]}")
    return jar


class CdcRawMirror:
    """Keeps ``private`` in step with the node's ``cdc_raw`` (see the module docstring): new
    segments hard-linked, index files copied when they change. A segment the agent moved away
    is not brought back."""

    def __init__(self, source: Path, private: Path, interval: float = 0.05) -> None:
        self.source, self.private, self.interval = source, private, interval
        self.linked: set[str] = set()
        self.idx: dict[str, bytes] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cdc-raw-mirror", daemon=True)

    def sync(self) -> None:
        for path in sorted(self.source.glob("CommitLog-*")):
            name = path.name
            try:
                if name.endswith(".log"):
                    if name not in self.linked:
                        os.link(path, self.private / name)
                        self.linked.add(name)
                elif name.endswith("_cdc.idx"):
                    segment = name.removesuffix("_cdc.idx") + ".log"
                    data = path.read_bytes()
                    alive = segment in self.linked and (self.private / segment).exists()
                    if alive and self.idx.get(name) != data:
                        tmp = self.private / f".{name}.tmp"
                        tmp.write_bytes(data)
                        os.replace(tmp, self.private / name)
                        self.idx[name] = data
            except FileNotFoundError:
                continue  # Cassandra (or a tidemark connector) removed it meanwhile

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sync()

    def __enter__(self) -> CdcRawMirror:
        self.private.mkdir(parents=True, exist_ok=True)
        self.sync()  # the segments already there, before the agent starts
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def _private_yaml(config: str, cdc_raw: Path, out: Path) -> Path:
    """Writes the node's cassandra.yaml to ``out`` with ``cdc_raw_directory`` pointing at
    ``cdc_raw``; returns the node's own ``cdc_raw`` (the caller mirrors it)."""
    lines = Path(config).read_text().splitlines()
    found = [ln for ln in lines if ln.startswith("cdc_raw_directory:")]
    if len(found) != 1:
        raise AgentError(f"{config} has no single cdc_raw_directory line")
    out.write_text(
        "\n".join(
            f"cdc_raw_directory: {cdc_raw}" if ln.startswith("cdc_raw_directory:") else ln
            for ln in lines
        )
        + "\n"
    )
    return Path(found[0].split(":", 1)[1].strip())


@contextmanager
def debezium_cassandra(
    host: str,
    port: int,
    cassandra_config: str,
    kafka: str,
    prefix: str,
    workdir: Path,
    *,
    snapshot_mode: str = "INITIAL",
    producer: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    heap: str = "512m",
) -> Iterator[subprocess.Popen[bytes]]:
    """The agent running with topic prefix ``prefix`` against the node at ``host:port``
    (``cassandra_config``: its cassandra.yaml); yields its process, its log is
    ``workdir/agent.log``. With ``snapshot.mode=INITIAL`` its snapshot of the node's CDC
    tables starts at once. ``producer``: more ``kafka.producer.*`` settings; ``extra``: more
    of the agent's own properties."""
    jar = agent_jar()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "offsets").mkdir(exist_ok=True)
    (workdir / "relocation").mkdir(exist_ok=True)
    (workdir / "logback.xml").write_text(_LOGBACK)
    (workdir / "driver.conf").write_text(
        "datastax-java-driver {\n"
        f'  basic.contact-points = ["{host}:{port}"]\n'
        "  basic.load-balancing-policy.local-datacenter = datacenter1\n"
        "  basic.request.timeout = 20 seconds\n"
        "}\n"
    )
    private_raw = workdir / "cdc_raw"
    node_raw = _private_yaml(cassandra_config, private_raw, workdir / "cassandra.yaml")
    props = {
        "connector.name": prefix,
        "topic.prefix": prefix,
        "cassandra.config": str(workdir / "cassandra.yaml"),
        "cassandra.driver.config.file": str(workdir / "driver.conf"),
        "commit.log.relocation.dir": str(workdir / "relocation"),
        "commit.log.post.processing.enabled": "false",
        "commit.log.real.time.processing.enabled": "true",
        "commit.log.marked.complete.poll.interval.ms": "200",
        "offset.backing.store.dir": str(workdir / "offsets"),
        "kafka.producer.bootstrap.servers": kafka,
        "kafka.producer.acks": "all",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "http.port": str(free_port()),
        "snapshot.mode": snapshot_mode,
    }
    props.update(
        {
            f"kafka.producer.{k}": str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in (producer or {}).items()
        }
    )
    props.update({k: str(v) for k, v in (extra or {}).items()})
    (workdir / "agent.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    log = workdir / "agent.log"
    with CdcRawMirror(node_raw, private_raw), log.open("wb") as out:
        proc = subprocess.Popen(
            [
                java(),
                f"-Dlogback.configurationFile={workdir / 'logback.xml'}",
                f"-Xmx{heap}",
                *_JVM_FLAGS,
                "-jar",
                str(jar),
                str(workdir / "agent.properties"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 120
            while b"Reading existing commit logs" not in log.read_bytes():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AgentError(f"Debezium's Cassandra connector did not start:\n{_tail(log)}")
                time.sleep(0.2)
            yield proc
        finally:
            stop_process(proc)


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:]
