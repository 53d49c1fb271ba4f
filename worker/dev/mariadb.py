"""A private MariaDB server with a row-based, GTID-tracked binlog, from the Debian packages."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from worker.dev.service import Service, StackError
from worker.dev.tls import TlsFiles, ensure_tls

USER = "tidemark"
PASSWORD = "tidemark"
SERVER_ID = 1

GRANTS = [
    # kept out of the binlog: a replica of this server (tests/integration/
    # test_mysql_gtid_failover.py) creates its own, and its GTIDs stay the data's
    "SET SESSION sql_log_bin=0",
    f"CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'",
    f"CREATE USER IF NOT EXISTS '{USER}'@'localhost' IDENTIFIED BY '{PASSWORD}'",
    f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'%' WITH GRANT OPTION",
    f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'localhost' WITH GRANT OPTION",
    "FLUSH PRIVILEGES",
]


def _binary(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None and Path(f"/usr/sbin/{name}").exists():
        path = f"/usr/sbin/{name}"
    if path is None:
        raise StackError(f"{name} not found. Install it with: apt-get install -y {package}")
    return path


class MariaDBService(Service):
    name = "mariadb"
    start_timeout = 60.0

    def __init__(self, home: Path, port: int, server_id: int = SERVER_ID) -> None:
        super().__init__(home, port)
        self.server_id = server_id
        self.data = self.home / "data"
        self.socket = self.home / "run" / "mariadb.sock"
        self.cnf = self.home / "my.cnf"
        self.tls = TlsFiles.at(home / "tls")
        self.tls_dir = self.home / "tls"

    def run_as(self) -> str | None:
        return "mysql"

    def _write_cnf(self) -> None:
        self.cnf.write_text(
            "\n".join(
                [
                    "[mariadbd]",
                    f"datadir={self.data}",
                    f"socket={self.socket}",
                    f"port={self.port}",
                    f"bind-address={self.host}",
                    f"pid-file={self.home / 'run' / 'mariadbd.pid'}",
                    "skip-name-resolve",
                    f"server_id={self.server_id}",
                    f"log_bin={self.data / 'mariadb-bin'}",
                    "binlog_format=ROW",
                    "binlog_row_image=FULL",
                    "binlog_row_metadata=FULL",
                    "binlog_annotate_row_events=ON",
                    "gtid_strict_mode=ON",
                    "log_slave_updates=ON",
                    "expire_logs_days=2",
                    "max_connections=300",
                    "innodb_buffer_pool_size=256M",
                    "innodb_flush_log_at_trx_commit=1",
                    "character-set-server=utf8mb4",
                    "collation-server=utf8mb4_general_ci",
                    "default-time-zone='+00:00'",
                    # TLS on the same port; clients choose (require_secure_transport is off).
                    f"ssl_cert={self.tls_dir / 'server.crt'}",
                    f"ssl_key={self.tls_dir / 'server.key'}",
                    f"ssl_ca={self.tls_dir / 'ca.crt'}",
                    "",
                ]
            )
        )

    def prepare(self) -> None:
        install_db = _binary("mariadb-install-db", "mariadb-server")
        _binary("mariadbd", "mariadb-server")
        (self.home / "run").mkdir(parents=True, exist_ok=True)
        ensure_tls(self.tls.dir)
        self.tls.copy_server_pair(self.tls_dir, self.run_as())
        self._write_cnf()
        self.chown(self.home)
        if (self.data / "mysql").exists():
            return
        self.run_checked(
            [
                install_db,
                f"--defaults-file={self.cnf}",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ],
            "mariadb-install-db",
        )

    def command(self) -> Sequence[str]:
        return [_binary("mariadbd", "mariadb-server"), f"--defaults-file={self.cnf}"]

    def ready(self) -> bool:
        admin = shutil.which("mariadb-admin") or "mariadb-admin"
        return (
            subprocess.run(
                [admin, f"--socket={self.socket}", "-u", "root", "--silent", "ping"],
                capture_output=True,
                check=False,
            ).returncode
            == 0
        )

    def after_start(self) -> None:
        client = _binary("mariadb", "mariadb-client")
        proc = subprocess.run(
            [client, f"--socket={self.socket}", "-u", "root", "-e", ";".join(GRANTS)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise StackError(f"mariadb: creating user {USER!r} failed: {proc.stderr.strip()}")

    def env(self) -> dict[str, str]:
        return {
            "TIDEMARK_MYSQL_HOST": self.host,
            "TIDEMARK_MYSQL_PORT": str(self.port),
            "TIDEMARK_MYSQL_USER": USER,
            "TIDEMARK_MYSQL_PASSWORD": PASSWORD,
            "TIDEMARK_MYSQL_SERVER_ID": str(self.server_id),
            "TIDEMARK_MYSQL_SSL_CA": str(self.tls.ca_cert),
        }
