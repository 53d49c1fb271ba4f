"""What the PostgreSQL connector checks before a config sent over REST is stored.

As Debezium's ``PostgresConnector.validateConnection``: a login that fails is an error on
``database.hostname`` with the server's message. Beyond Debezium, what would only fail once
the task streams is reported as a warning: ``wal_level`` not ``logical``, a role without
replication rights, a replication connection the server refuses, and a slot another client
holds. Nothing is created or changed here (no slot, no publication)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from cdc.errors import ConfigError
from cdc.spi.connection_check import ConnectionReport
from connectors.postgres import connection as pgconn
from connectors.postgres.config import CONFIG_DEF

#: modes that never stream, so nothing below the login matters to them
_NO_STREAMING = frozenset({"initial_only"})

_SERVER = """
SELECT current_setting('wal_level'),
       r.rolsuper OR r.rolreplication OR EXISTS (
         SELECT 1 FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
         WHERE m.member = r.oid
           AND g.rolname IN ('rds_superuser', 'rdsadmin', 'rdsrepladmin', 'rds_replication')),
       current_user
FROM pg_roles r WHERE r.rolname = current_user
"""

_SLOT = "SELECT active, plugin, database FROM pg_replication_slots WHERE slot_name = %s"


def check(raw: Mapping[str, Any]) -> ConnectionReport:
    report = ConnectionReport()
    cfg = CONFIG_DEF.parse(dict(raw))
    try:
        # without database.initial.statements, as Debezium: they may write
        conn = psycopg.connect(**pgconn.conninfo(cfg), autocommit=True)
    except ConfigError as exc:
        report.errors += exc.problems
        return report
    except psycopg.Error as exc:
        report.errors.append(
            ("database.hostname", f"Error while validating connector config: {_text(exc)}")
        )
        return report
    with conn:
        row = conn.execute(_SERVER).fetchone()
        slot = conn.execute(_SLOT, (cfg["slot.name"],)).fetchone()
    if cfg["snapshot.mode"] in _NO_STREAMING or row is None:
        return report
    wal_level, may_replicate, user = row
    warn = report.warnings.append
    if wal_level != "logical":
        warn(
            (
                "database.hostname",
                f"the server's wal_level is {wal_level}; streaming needs logical: ALTER SYSTEM "
                "SET wal_level = logical, then restart PostgreSQL",
            )
        )
    if not may_replicate:
        warn(
            (
                "database.user",
                f"role {user} has neither the REPLICATION attribute nor superuser (nor an RDS "
                f"replication role), so the server will refuse its replication connection: "
                f"ALTER ROLE {user} REPLICATION",
            )
        )
    if slot is not None:
        active, plugin, database = slot
        if database != cfg["database.dbname"] or plugin != cfg["plugin.name"]:
            warn(
                (
                    "slot.name",
                    f"slot {cfg['slot.name']} exists for database {database} with plugin "
                    f"{plugin}; this connector needs one for {cfg['database.dbname']} with "
                    f"{cfg['plugin.name']}: choose another slot.name or drop that slot",
                )
            )
        elif active:
            warn(
                (
                    "slot.name",
                    f"slot {cfg['slot.name']} is in use by another client now (another "
                    "connector with the same slot.name?); the task can stream only once it "
                    "is released",
                )
            )
    if may_replicate and wal_level == "logical":
        try:
            pgconn.connect_replication(cfg).close()
        except psycopg.Error as exc:
            warn(
                (
                    "database.hostname",
                    f"a replication connection was refused: {_text(exc)} (check pg_hba.conf "
                    "for this database and max_wal_senders)",
                )
            )
    return report


def _text(exc: BaseException) -> str:
    return " ".join(str(exc).split())
