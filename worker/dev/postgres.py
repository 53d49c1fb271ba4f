"""A private PostgreSQL cluster with logical decoding, from the Debian packages."""

from __future__ import annotations

import glob
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from worker.dev.service import Service, StackError
from worker.dev.tls import TlsFiles, ensure_tls

USER = "postgres"
PASSWORD = "postgres"

SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "wal_level": "logical",
    # One test run creates well over a hundred slots (each connector test its own, some
    # left for the restart they test): a generous limit keeps a slow cleanup from failing
    # an unrelated test with "all replication slots are in use".
    "max_replication_slots": "200",
    "max_wal_senders": "100",
    "max_connections": "200",
    "wal_sender_timeout": "60s",
    "shared_buffers": "256MB",
    "max_wal_size": "4GB",
    "logical_decoding_work_mem": "64MB",
    "log_min_messages": "warning",
}


def find_bindir() -> Path:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    pg_config = shutil.which("pg_config")
    for c in candidates:
        if (Path(c) / "postgres").exists() and (Path(c) / "initdb").exists():
            return Path(c)
    if pg_config:
        raise StackError("PostgreSQL server binaries not found next to pg_config")
    raise StackError(
        "PostgreSQL server binaries (postgres, initdb) not found. Install them with: "
        "apt-get install -y postgresql"
    )


class PostgresService(Service):
    name = "postgres"
    start_timeout = 60.0

    def __init__(self, home: Path, port: int) -> None:
        super().__init__(home, port)
        self.data = self.home / "data"
        self.socket_dir = self.home / "run"
        self.tls = TlsFiles.at(home / "tls")
        self.tls_dir = self.home / "tls"

    def run_as(self) -> str | None:
        return "postgres"

    def prepare(self) -> None:
        bindir = find_bindir()
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        # TLS on the same port (clients choose with sslmode); the key must belong to the
        # server's user, so the server gets its own copies.
        ensure_tls(self.tls.dir)
        self.tls.copy_server_pair(self.tls_dir, self.run_as())
        self.chown(self.home)
        if (self.data / "PG_VERSION").exists():
            return
        pwfile = self.home / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        self.chown(self.home)
        self.run_checked(
            [
                str(bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                USER,
                "--auth=scram-sha-256",
                f"--pwfile={pwfile}",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
            ],
            "initdb",
        )
        pwfile.unlink()
        conf = "\n".join(f"{k} = {v}" for k, v in SETTINGS.items())
        with open(self.data / "postgresql.conf", "a") as fh:
            fh.write(f"\n# tidemark dev\n{conf}\n")
        with open(self.data / "pg_hba.conf", "a") as fh:
            fh.write("host replication all 127.0.0.1/32 scram-sha-256\n")

    def command(self) -> Sequence[str]:
        return [
            str(find_bindir() / "postgres"),
            "-D",
            str(self.data),
            "-p",
            str(self.port),
            "-k",
            str(self.socket_dir),
            # On the command line rather than in postgresql.conf, so a data folder made
            # before TLS was added (or the slot limits raised) gets it too.
            "-c",
            f"max_replication_slots={SETTINGS['max_replication_slots']}",
            "-c",
            f"max_wal_senders={SETTINGS['max_wal_senders']}",
            "-c",
            "ssl=on",
            "-c",
            f"ssl_cert_file={self.tls_dir / 'server.crt'}",
            "-c",
            f"ssl_key_file={self.tls_dir / 'server.key'}",
            "-c",
            f"ssl_ca_file={self.tls_dir / 'ca.crt'}",
        ]

    def ready(self) -> bool:
        # The port opens before recovery ends; pg_isready asks the server itself.
        isready = find_bindir() / "pg_isready"
        return (
            subprocess.run(
                [str(isready), "-q", "-h", self.host, "-p", str(self.port)], check=False
            ).returncode
            == 0
        )

    def env(self) -> dict[str, str]:
        return {
            "TIDEMARK_PG_HOST": self.host,
            "TIDEMARK_PG_PORT": str(self.port),
            "TIDEMARK_PG_USER": USER,
            "TIDEMARK_PG_PASSWORD": PASSWORD,
            "TIDEMARK_PG_DBNAME": "postgres",
            "TIDEMARK_PG_SSLROOTCERT": str(self.tls.ca_cert),
        }
