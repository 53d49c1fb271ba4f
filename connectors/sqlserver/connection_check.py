"""What the SQL Server connector checks before a config sent over REST is stored.

As Debezium's ``SqlServerConnector.validateConnection``: each captured database must accept
the login (an error on ``database.hostname``, or on ``database.names`` for a database that
cannot be opened). A database without CDC enabled is a warning: the task refuses it when it
starts, and the DBA may enable it before then."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdc.errors import CDCError, ConfigError
from cdc.spi.connection_check import ConnectionReport
from connectors.sqlserver.config import database_names, parse_config
from connectors.sqlserver.connection import connect, dialect_of
from connectors.sqlserver.errors import CdcNotEnabled
from connectors.sqlserver.schema import Catalog


def check(raw: Mapping[str, Any]) -> ConnectionReport:
    report = ConnectionReport()
    cfg = parse_config(dict(raw))
    for database in database_names(cfg):
        try:
            conn = connect(cfg, database=database)
        except ConfigError as exc:
            report.errors += exc.problems
            continue
        except (CDCError, OSError) as exc:
            report.errors.append(("database.hostname", f"Unable to connect: {_text(exc)}"))
            return report
        try:
            Catalog(conn, dialect_of(cfg), database).check_cdc_enabled()
        except CdcNotEnabled as exc:
            report.warnings += exc.problems
        finally:
            conn.close()
    return report


def _text(exc: BaseException) -> str:
    return " ".join(str(exc).split())
