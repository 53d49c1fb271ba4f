"""What the MySQL/MariaDB connector checks before a config sent over REST is stored.

As Debezium's ``BinlogConnector.validateConnection``: a login that fails is an error on
``database.hostname`` ("Unable to connect: ..."). Beyond Debezium, what the task would refuse
only once it streams is reported as a warning: the binary log settings
(``streaming.check_server``) and a login that cannot read the binlog position."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pymysql  # type: ignore[import-untyped]

from cdc.errors import FatalError
from cdc.spi.connection_check import ConnectionReport
from connectors.mysql import connection as myconn
from connectors.mysql.config import parse_config
from connectors.mysql.streaming import check_server

_NO_STREAMING = frozenset({"initial_only"})


def check(raw: Mapping[str, Any]) -> ConnectionReport:
    report = ConnectionReport()
    cfg = parse_config(dict(raw))
    try:
        # without database.initial.statements, as Debezium: they may write
        conn = pymysql.connect(**myconn.connection_settings(cfg), charset="utf8mb4")
    except (pymysql.err.MySQLError, OSError) as exc:  # OSError: TLS files, sockets
        report.errors.append(("database.hostname", f"Unable to connect: {_text(exc)}"))
        return report
    try:
        info = myconn.server_info(conn)
        if cfg["snapshot.mode"] in _NO_STREAMING:
            return report
        try:
            check_server(info)
        except FatalError as exc:
            report.warnings.append(("database.hostname", str(exc)))
            return report
        try:
            myconn.binlog_status(conn, info)
        except pymysql.err.MySQLError as exc:
            report.warnings.append(
                (
                    "database.user",
                    f"cannot read the binary log position: {_text(exc)} (grant REPLICATION "
                    "CLIENT, or BINLOG MONITOR on MariaDB, and REPLICATION SLAVE)",
                )
            )
    finally:
        conn.close()
    return report


def _text(exc: BaseException) -> str:
    return " ".join(str(exc).split())
