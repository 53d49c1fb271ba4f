"""Every property of the seed's PostgreSQL chapter (Tables 3.19 and 3.20), validated."""

from __future__ import annotations

import re
from typing import Any

from cdc.common_config import (
    ambient_credentials_field,
    common_def,
    connection_fields,
    resumable_chunk_field,
    schema_filter_fields,
)
from cdc.config import ConfigDef, ConfigField, Kind, at_least, one_of
from connectors.postgres.identity import validate_autoset

SNAPSHOT_MODES = (
    "initial",
    "always",
    "never",
    "initial_only",
    "exported",
    "when_needed",
    "no_data",
    "schema_only",
)

_SLOT_NAME = re.compile(r"^[a-z0-9_]{1,63}$")


def _slot_name(value: Any) -> str | None:
    if value is None or _SLOT_NAME.match(value):
        return None
    return "may contain only lower-case letters, digits and '_' (at most 63 characters)"


def _plugin(value: Any) -> str | None:
    if value in (None, "pgoutput"):
        return None
    return "only pgoutput is supported; set plugin.name=pgoutput"


PG_FIELDS = ConfigDef(
    [
        ConfigField(
            "plugin.name",
            Kind.STRING,
            "pgoutput",
            validator=_plugin,
            importance="HIGH",
            group="Replication",
            recommended=("pgoutput",),
            doc="Logical decoding output plugin. Only pgoutput, built into PostgreSQL 10+, is "
            "supported (decoderbufs and wal2json are not).",
        ),
        ConfigField(
            "slot.name",
            Kind.STRING,
            "debezium",
            validator=_slot_name,
            importance="HIGH",
            group="Replication",
            doc="Replication slot the connector streams from; created on first start. Give "
            "each connector of a database its own slot.",
        ),
        ConfigField(
            "slot.drop.on.stop",
            Kind.BOOLEAN,
            False,
            group="Replication",
            doc="Drop the slot when the connector stops gracefully. For tests only: the next "
            "start cannot resume where it stopped and changes in between are lost.",
        ),
        ConfigField(
            "slot.max.retries",
            Kind.INT,
            6,
            validator=at_least(0),
            group="Replication",
            doc="How often to retry taking the slot when another process holds it.",
        ),
        ConfigField(
            "slot.retry.delay.ms",
            Kind.LONG,
            10000,
            validator=at_least(0),
            group="Replication",
            doc="Wait between attempts to take the slot.",
        ),
        ConfigField(
            "slot.stream.params",
            Kind.STRING,
            None,
            group="Replication",
            doc="Extra options for the output plugin when streaming starts, as "
            "semicolon-separated name=value pairs.",
        ),
        ConfigField(
            "publication.name",
            Kind.STRING,
            "dbz_publication",
            group="Replication",
            doc="The pgoutput publication that decides which tables' changes are streamed.",
        ),
        ConfigField(
            "publication.autocreate.mode",
            Kind.STRING,
            "all_tables",
            validator=one_of("all_tables", "disabled", "filtered"),
            group="Replication",
            doc="How the publication is made: all_tables creates it FOR ALL TABLES, filtered "
            "for the tables the include/exclude lists select, disabled expects it to exist "
            "already (made by an administrator).",
        ),
        *connection_fields(
            "PostgreSQL server",
            5432,
            "User to connect as; needs the REPLICATION attribute and SELECT on the "
            "captured tables.",
        ),
        ConfigField(
            "database.dbname",
            Kind.STRING,
            required=True,
            importance="HIGH",
            group="Connection",
            doc="The database to capture changes from.",
        ),
        ConfigField(
            "database.sslmode",
            Kind.STRING,
            "disable",
            validator=one_of("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
            group="Connection",
            doc="TLS to the server, libpq's sslmode: disable, allow, prefer, require (encrypt), "
            "verify-ca (and check the certificate), verify-full (and the host name).",
        ),
        ConfigField(
            "database.sslcert",
            Kind.STRING,
            None,
            group="Connection",
            doc="Client certificate file (PEM) for certificate authentication.",
        ),
        ConfigField(
            "database.sslkey",
            Kind.STRING,
            None,
            group="Connection",
            doc="Private key file of database.sslcert.",
        ),
        ConfigField(
            "database.sslpassword",
            Kind.PASSWORD,
            None,
            group="Connection",
            doc="Password of an encrypted database.sslkey.",
        ),
        ConfigField(
            "database.sslrootcert",
            Kind.STRING,
            None,
            group="Connection",
            doc="CA certificate file used to check the server's certificate (verify-ca, "
            "verify-full).",
        ),
        ambient_credentials_field(
            "libpq's PGPASSWORD, ~/.pgpass, service files, ~/.postgresql client certificates, "
            "Kerberos tickets and Unix-socket peer logins"
        ),
        ConfigField(
            "database.tcpKeepAlive",
            Kind.BOOLEAN,
            True,
            group="Connection",
            doc="Send TCP keep-alives so a dead connection is noticed.",
        ),
        ConfigField(
            "database.connect.timeout.ms",
            Kind.LONG,
            30000,
            validator=at_least(1000),
            group="Connection",
            doc="Longest wait for a connection to the server (rounded down to seconds).",
        ),
        ConfigField(
            "database.initial.statements",
            Kind.STRING,
            None,
            group="Connection",
            doc="SQL run on each query connection the connector opens, ';'-separated; write "
            "';;' for a semicolon inside a statement.",
        ),
        ConfigField(
            "hstore.handling.mode",
            Kind.STRING,
            "json",
            validator=one_of("map", "json"),
            group="Events",
            doc="hstore columns as a JSON string (json) or as a map of strings (map).",
        ),
        ConfigField(
            "interval.handling.mode",
            Kind.STRING,
            "numeric",
            validator=one_of("numeric", "string"),
            group="Events",
            doc="interval columns as approximate microseconds (numeric, MicroDuration) or as "
            "an ISO 8601 duration string such as P1Y2M3DT4H5M6.78S (string).",
        ),
        ConfigField(
            "include.unknown.datatypes",
            Kind.BOOLEAN,
            False,
            group="Events",
            doc="Emit columns of types the connector has no mapping for as the bytes of their "
            "text form (shaped by binary.handling.mode) instead of leaving them out.",
        ),
        ConfigField(
            "schema.refresh.mode",
            Kind.STRING,
            "columns_diff",
            validator=one_of("columns_diff", "columns_diff_exclude_unchanged_toast"),
            group="Advanced",
            doc="When a table's in-memory schema is refreshed: columns_diff on any difference "
            "from the relation message, columns_diff_exclude_unchanged_toast ignoring "
            "differences caused only by unchanged TOASTed values.",
        ),
        ConfigField(
            "heartbeat.action.query",
            Kind.STRING,
            None,
            group="Advanced",
            doc="SQL run on each heartbeat (e.g. an UPDATE of a captured heartbeat table) so "
            "the slot advances even when the captured tables are idle but others are busy.",
        ),
        ConfigField(
            "snapshot.mode",
            Kind.STRING,
            "initial",
            validator=one_of(*SNAPSHOT_MODES),
            importance="HIGH",
            group="Snapshot",
            doc="When to snapshot existing rows: initial (first start only), always (every "
            "start), never / no_data / schema_only (stream only), initial_only (snapshot, then "
            "stop), when_needed (when offsets are missing or no longer valid), exported (like "
            "initial, from the slot's exported snapshot).",
        ),
        ConfigField(
            "snapshot.max.threads",
            Kind.INT,
            1,
            validator=at_least(1),
            group="Snapshot",
            doc="Connections that read the snapshot in parallel (big tables are split into "
            "page ranges); events are still emitted by one thread.",
        ),
        ConfigField(
            "snapshot.resumable",
            Kind.BOOLEAN,
            True,
            group="Snapshot",
            doc="tidemark: read each table with a primary key in key order, so that a snapshot "
            "interrupted by a crash resumes after the last batch Kafka acknowledged instead "
            "of starting over (tables read whole are skipped). Applies with "
            "snapshot.max.threads=1; false reads tables in physical order (no sort or index "
            "scan) and restarts an interrupted snapshot from the beginning.",
        ),
        resumable_chunk_field(),
        ConfigField(
            "status.update.interval.ms",
            Kind.LONG,
            10000,
            validator=at_least(100),
            group="Replication",
            doc="How often the connector reports its position to the server, which lets "
            "PostgreSQL recycle WAL up to the last stored offset.",
        ),
        ConfigField(
            "proto.version",
            Kind.INT,
            1,
            validator=one_of("1", "2"),
            group="Replication",
            doc="pgoutput protocol version (2 needs PostgreSQL 14).",
        ),
        ConfigField(
            "table.include.list.allow.empty",
            Kind.BOOLEAN,
            False,
            group="Filters",
            doc="Start even when table.include.list (or schema.include.list) matches no "
            "table, with a warning; by default such a start fails listing the patterns and "
            "the nearest table names (a typo would otherwise capture nothing, silently).",
        ),
        ConfigField(
            "replica.identity.autoset.values",
            Kind.LIST,
            [],
            validator=validate_autoset,
            group="Replication",
            doc="Comma-separated <schema>.<table>:<identity> entries (identity DEFAULT, FULL, "
            "NOTHING or INDEX <index name>); the connector sets REPLICA IDENTITY of each "
            "matching included table at start (needs table ownership). Table names are "
            "regular expressions, as in Debezium.",
        ),
    ]
)


def config_def() -> ConfigDef:
    cdef = common_def(
        max_queue_size=20240,
        max_batch_size=10240,
        snapshot_fetch_size=10240,
        time_precision_mode="adaptive",
    )
    return cdef.extend(schema_filter_fields()).extend(PG_FIELDS)


CONFIG_DEF = config_def()
