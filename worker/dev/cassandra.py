"""Apache Cassandra 5.0: one node on loopback with CDC on, from Maven Central jars.

The node is the Cassandra connector's source: it writes commit log segments with CDC data
into ``<home>/cassandra/cdc_raw`` (hard links plus ``_cdc.idx`` files), which the connector
reads as a per-node agent would. Small segments and a fixed single token keep startup and
segment turnover fast in tests.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from worker.dev.kafka import java, resolve_jars
from worker.dev.service import Service, port_open
from worker.dev.tls import TlsFiles, ensure_tls

CASSANDRA_VERSION = "5.0.9"
CLUSTER_NAME = "tidemark-dev"

#: The JPMS and Netty options of Cassandra's own conf/jvm17-server.options: without them
#: Cassandra 5.0 fails to start on Java 17.
JVM17_OPTIONS = (
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports=java.sql/java.sql=ALL-UNNAMED",
    "--add-exports=java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports=jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports=jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
)


class CassandraService(Service):
    """CQL (native protocol) on ``port``; the internode storage port is
    ``TIDEMARK_CASSANDRA_STORAGE_PORT`` (default 17000). JMX stays off: nothing needs it."""

    name = "cassandra"
    start_timeout = 180.0

    def __init__(self, home: Path, port: int) -> None:
        super().__init__(home, port)
        self.storage_port = int(os.environ.get("TIDEMARK_CASSANDRA_STORAGE_PORT", "17000"))
        self.data = self.home / "data"
        self.commitlog = self.home / "commitlog"
        self.cdc_raw = self.home / "cdc_raw"
        self.config = self.home / "cassandra.yaml"
        self.tls = TlsFiles.at(home / "tls")
        self.keystore = self.home / "tls" / "server.pem"

    def _lib(self) -> Path:
        return resolve_jars("cassandra", CASSANDRA_VERSION)

    def _yaml(self) -> str:
        h = self.host
        return "\n".join(
            [
                f"cluster_name: {CLUSTER_NAME}",
                "num_tokens: 1",
                "initial_token: 0",
                "auto_bootstrap: false",
                "partitioner: org.apache.cassandra.dht.Murmur3Partitioner",
                "endpoint_snitch: SimpleSnitch",
                "seed_provider:",
                "  - class_name: org.apache.cassandra.locator.SimpleSeedProvider",
                "    parameters:",
                f'      - seeds: "{h}:{self.storage_port}"',
                f"listen_address: {h}",
                f"rpc_address: {h}",
                f"storage_port: {self.storage_port}",
                f"native_transport_port: {self.port}",
                "start_native_transport: true",
                f"data_file_directories: [{self.data}]",
                f"commitlog_directory: {self.commitlog}",
                f"saved_caches_directory: {self.home / 'saved_caches'}",
                f"hints_directory: {self.home / 'hints'}",
                "hinted_handoff_enabled: false",
                "commitlog_sync: periodic",
                "commitlog_sync_period: 1000ms",
                # Small segments roll over (and reach COMPLETED in cdc_raw) quickly in tests.
                "commitlog_segment_size: 1MiB",
                "cdc_enabled: true",
                f"cdc_raw_directory: {self.cdc_raw}",
                "cdc_total_space: 512MiB",
                "cdc_block_writes: true",
                "cdc_on_repair_enabled: false",
                *self._compression(),
                # NONE: 5.0's own formats (commit log version 8); CASSANDRA_4 (5.0's default,
                # TIDEMARK_CASSANDRA_STORAGE_COMPATIBILITY) writes 4.x's version 7
                "storage_compatibility_mode: "
                + os.environ.get("TIDEMARK_CASSANDRA_STORAGE_COMPATIBILITY", "NONE"),
                # TLS on the CQL port beside plain CQL (optional): clients choose, as with
                # PostgreSQL's sslmode
                "client_encryption_options:",
                "  enabled: true",
                "  optional: true",
                "  ssl_context_factory:",
                "    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory",
                f"  keystore: {self.keystore}",
                f"  truststore: {self.tls.ca_cert}",
                "  require_client_auth: false",
                "authenticator: AllowAllAuthenticator",
                "authorizer: AllowAllAuthorizer",
                "dynamic_snitch: false",
                "concurrent_compactors: 1",
                "memtable_heap_space: 64MiB",
                "memtable_offheap_space: 64MiB",
                "key_cache_size: 0MiB",
                "counter_cache_size: 0MiB",
                "read_request_timeout: 10000ms",
                "write_request_timeout: 10000ms",
                "",
            ]
        )

    def _compression(self) -> list[str]:
        """``TIDEMARK_CASSANDRA_COMMITLOG_COMPRESSION=LZ4Compressor`` (or another compressor
        class) writes compressed segments: how the reader's compressed path is exercised."""
        cls = os.environ.get("TIDEMARK_CASSANDRA_COMMITLOG_COMPRESSION", "")
        return [f"commitlog_compression: [{{class_name: {cls}}}]"] if cls else []

    def prepare(self) -> None:
        self._lib()  # resolve before starting so a Maven failure is reported as such
        for d in (self.data, self.commitlog, self.cdc_raw):
            d.mkdir(parents=True, exist_ok=True)
        ensure_tls(self.tls.dir)
        # the PEM keystore: the private key, then the certificate chain, in one file
        self.keystore.parent.mkdir(parents=True, exist_ok=True)
        self.keystore.touch(mode=0o600, exist_ok=True)
        self.keystore.write_bytes(
            self.tls.server_key.read_bytes() + self.tls.server_cert.read_bytes()
        )
        self.config.write_text(self._yaml())

    def command(self) -> Sequence[str]:
        lib = self._lib()
        jamm = sorted(lib.glob("jamm-*.jar"))
        logback = resources.files("worker.dev").joinpath("conf", "cassandra-logback.xml")
        return [
            java(),
            "-Xms256m",
            "-Xmx512m",
            "-Xss256k",
            "-XX:+UseG1GC",
            "-XX:TieredStopAtLevel=1",  # C1 only: starts in far less CPU on a shared machine
            *([f"-javaagent:{jamm[0]}"] if jamm else []),
            *JVM17_OPTIONS,
            "-Djava.awt.headless=true",
            f"-Dcassandra.config=file://{self.config}",
            "-Dcassandra-foreground=yes",
            f"-Dcassandra.storagedir={self.data}",
            f"-Dcassandra.logdir={self.home}",
            f"-Dlogback.configurationFile={logback}",
            "-Dcassandra.skip_wait_for_gossip_to_settle=0",
            "-Dcassandra.superuser_setup_delay_ms=0",
            "-Dcassandra.ring_delay_ms=100",
            "-Dcassandra.native.epoll.enabled=true",
            "-cp",
            str(lib / "*"),
            "org.apache.cassandra.service.CassandraDaemon",
        ]

    def ready(self) -> bool:
        # The native transport opens last, once the node serves CQL.
        return port_open(self.host, self.port)

    def env(self) -> dict[str, str]:
        return {
            "TIDEMARK_CASSANDRA_HOST": self.host,
            "TIDEMARK_CASSANDRA_PORT": str(self.port),
            "TIDEMARK_CASSANDRA_CDC_RAW": str(self.cdc_raw),
            "TIDEMARK_CASSANDRA_COMMITLOG": str(self.commitlog),
            "TIDEMARK_CASSANDRA_CONFIG": str(self.config),
            # TLS on the same port: the CA its certificate is signed by (and the stack's
            # client certificate beside it)
            "TIDEMARK_CASSANDRA_TLS_DIR": str(self.tls.dir),
        }
