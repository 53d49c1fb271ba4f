"""The SQL Server connector's properties: Debezium's names (1.2 and current), validated.

Debezium 1.2 captures one database (``database.dbname``); current Debezium lists them in
``database.names``, and so does tidemark: one task captures every listed database (Debezium
2.x with ``tasks.max=1``), see :mod:`connectors.sqlserver.databases`.
"""

from __future__ import annotations

from typing import Any

from cdc.common_config import (
    ambient_credentials_field,
    common_def,
    connection_fields,
    resumable_chunk_field,
    schema_filter_fields,
)
from cdc.config import Config, ConfigDef, ConfigField, Kind, at_least, one_of

SNAPSHOT_MODES = (
    "initial",
    "initial_only",
    "schema_only",
    "no_data",
    "always",
    "when_needed",
    "never",
)
ISOLATION_MODES = ("snapshot", "repeatable_read", "read_committed", "read_uncommitted", "exclusive")
DIALECTS = ("tsql", "postgres-standin")


def _distinct_names(value: Any) -> str | None:
    """SQL Server database names compare case-insensitively (the default collation): the same
    database listed twice would be captured twice into the same topics."""
    if value is None:
        return None
    seen: dict[str, str] = {}
    for name in (n.strip() for n in value):
        if not name:
            continue
        if name.lower() in seen:
            return f"lists database {name!r} twice (as {seen[name.lower()]!r} and {name!r})"
        seen[name.lower()] = name
    return None


SQLSERVER_FIELDS = ConfigDef(
    [
        *connection_fields(
            "SQL Server instance",
            1433,
            "Login to connect as; needs db_owner, or the role named when CDC was enabled "
            "on each captured table (sys.sp_cdc_enable_table @role_name) plus SELECT on them.",
        ),
        ambient_credentials_field(
            "an empty password lets FreeTDS try Kerberos and psqlODBC, the stand-in's driver, "
            "libpq's PGPASSWORD, ~/.pgpass and client certificates"
        ),
        ConfigField(
            "database.dbname",
            Kind.STRING,
            None,
            importance="HIGH",
            group="Connection",
            doc="The database to capture (Debezium 1.2's name; database.names is the current one).",
        ),
        ConfigField(
            "database.names",
            Kind.LIST,
            None,
            validator=_distinct_names,
            importance="HIGH",
            group="Connection",
            doc="The databases to capture, comma-separated (current Debezium's key). One task "
            "captures them all; with several, topics are <topic.prefix>.<database>.<schema>."
            "<table> (with one: <topic.prefix>.<schema>.<table>, as before).",
        ),
        ConfigField(
            "database.encrypt",
            Kind.BOOLEAN,
            False,
            group="Connection",
            doc="Encrypt the connection with TLS (passed to the ODBC driver as Encrypt=yes).",
        ),
        ConfigField(
            "database.trustServerCertificate",
            Kind.BOOLEAN,
            False,
            group="Connection",
            doc="Accept the server's certificate without checking it (TrustServerCertificate).",
        ),
        ConfigField(
            "database.odbc.driver",
            Kind.STRING,
            "FreeTDS",
            group="Connection",
            doc="The unixODBC driver name pyodbc connects with: FreeTDS (Debian package "
            "tdsodbc) by default; 'ODBC Driver 18 for SQL Server' if installed.",
        ),
        ConfigField(
            "database.tds.version",
            Kind.STRING,
            "7.4",
            group="Connection",
            doc="TDS protocol version for FreeTDS; 7.3 or later carries datetime2, date, time "
            "and datetimeoffset as such.",
        ),
        ConfigField(
            "database.connect.timeout.ms",
            Kind.LONG,
            30000,
            validator=at_least(1000),
            group="Connection",
            doc="Longest wait for a connection (rounded down to seconds).",
        ),
        ConfigField(
            "sqlserver.dialect",
            Kind.STRING,
            "tsql",
            validator=one_of(*DIALECTS),
            group="Connection",
            doc="tsql (a SQL Server); postgres-standin: tidemark's SQL Server stand-in in a "
            "PostgreSQL database (tidemark dev), for tests only.",
        ),
        ConfigField(
            "snapshot.mode",
            Kind.STRING,
            "initial",
            validator=one_of(*SNAPSHOT_MODES),
            importance="HIGH",
            group="Snapshot",
            doc="initial: snapshot on first start, then stream; initial_only: snapshot, no "
            "streaming; schema_only / no_data: structure only, stream from now; always, "
            "when_needed (also when the stored LSN is older than the change tables keep), "
            "never.",
        ),
        ConfigField(
            "snapshot.isolation.mode",
            Kind.STRING,
            "repeatable_read",
            validator=one_of(*ISOLATION_MODES),
            group="Snapshot",
            doc="Transaction isolation of the snapshot, and the locks it takes: snapshot (row "
            "versions, no locks; needs ALLOW_SNAPSHOT_ISOLATION ON), repeatable_read (shared "
            "locks on rows read until the snapshot ends), exclusive (repeatable read and an "
            "exclusive table lock while the snapshot reads: no writes), read_committed and "
            "read_uncommitted (no locks held: the snapshot may include changes streaming "
            "replays, never misses one).",
        ),
        ConfigField(
            "snapshot.resumable",
            Kind.BOOLEAN,
            True,
            group="Snapshot",
            doc="tidemark: tables whose primary key is integers and strings are read ORDER BY "
            "the key; a snapshot killed half-way then resumes after the last acknowledged "
            "batch (and skips tables already read) while the change tables hold its LSN. "
            "false: an interrupted snapshot reads every table again.",
        ),
        resumable_chunk_field(),
        ConfigField(
            "include.schema.changes",
            Kind.BOOLEAN,
            True,
            group="Events",
            doc="Report on the schema change topic (named after database.server.name) each "
            "table the snapshot captures, each table found enabled for CDC (or disabled) "
            "while running and each switch to a new capture instance.",
        ),
        ConfigField(
            "heartbeat.action.query",
            Kind.STRING,
            None,
            group="Advanced",
            doc="SQL run on each heartbeat (heartbeat.interval.ms) on a connection of its own to "
            "the first database of database.names, e.g. an UPDATE of a captured heartbeat "
            "table so a quiet database's offset keeps moving.",
        ),
        ConfigField(
            "max.iteration.transactions",
            Kind.INT,
            500,
            validator=at_least(0),
            group="Advanced",
            doc="At most this many transactions read per poll of the change tables (0: all up "
            "to the current maximum LSN).",
        ),
        ConfigField(
            "streaming.poll.interval.ms",
            Kind.LONG,
            500,
            validator=at_least(1),
            group="Advanced",
            doc="Wait between polls of the change tables when the last poll found nothing "
            "new (Debezium's poll.interval.ms for SQL Server, which tidemark uses for the "
            "Kafka writer).",
        ),
    ]
)


def _database_required(values: dict[str, Any], raw: dict[str, Any]) -> list[tuple[str, str]]:
    """One of two keys names the databases, so neither field can be required by itself;
    checked with the config so ``tidemark validate`` reports it, not only the task start."""
    listed = [n for n in (values.get("database.names") or []) if str(n).strip()]
    if listed or values.get("database.dbname"):
        return []
    return [
        (
            "database.names",
            "is required (or Debezium 1.2's database.dbname): the database whose change "
            "tables are captured",
        )
    ]


#: the values written into the ODBC connection string
ODBC_STRING_KEYS = (
    "database.hostname",
    "database.user",
    "database.password",
    "database.names",
    "database.dbname",
    "database.tds.version",
    "database.odbc.driver",
)


def odbc_safe(values: dict[str, Any], raw: dict[str, Any]) -> list[tuple[str, str]]:
    """FreeTDS ends a braced connection-string value at the first '};' whatever the escaping,
    so a value with '}' could append attributes of its own (``DumpFile=`` writes a file
    anywhere; ``Port=`` moves the kept password to another port). Refused for every such key:
    such names and passwords are rare, and there is no other way to hand them to the driver."""
    out = []
    for key in ODBC_STRING_KEYS:
        value = values.get(key)
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(t, str) and ("}" in t or "\0" in t) for t in texts):
            out.append(
                (
                    key,
                    "may not contain '}' (or a NUL): the ODBC connection string it is written "
                    "into cannot carry it safely",
                )
            )
    return out


def config_def() -> ConfigDef:
    cdef = (
        common_def(time_precision_mode="adaptive")
        .extend(schema_filter_fields())
        .extend(SQLSERVER_FIELDS)
    )
    cdef.checks.append(_database_required)
    cdef.checks.append(odbc_safe)
    for prefix in ("database.history.", "schema.history.internal."):
        cdef.unsupported_prefixes[prefix] = (
            "the SQL Server connector keeps no schema history; it reads the structure from "
            "the catalog at each start"
        )
    return cdef


CONFIG_DEF = config_def()


def parse_config(raw: dict[str, Any]) -> Config:
    return CONFIG_DEF.parse(raw)


def database_names(cfg: Config) -> list[str]:
    """The captured databases, in the order listed (``database.dbname`` alone if no list)."""
    names = [n.strip() for n in (cfg["database.names"] or []) if n.strip()]
    if names:
        return names
    return [cfg["database.dbname"]] if cfg["database.dbname"] else []


def database_name(cfg: Config) -> str:
    """The first captured database (the only one, for most configurations)."""
    names = database_names(cfg)
    return names[0] if names else ""
