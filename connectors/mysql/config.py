"""Every property of the seed's MySQL chapter (§2.3.4, §2.3.4.1), validated.

Names are Debezium's; 1.2 aliases (``*.whitelist``, ``database.history.*``) are accepted through
the shared definitions. A few tidemark properties cover what the Java client did implicitly
(reconnect backoff, the binlog heartbeat, TLS files); they are marked "tidemark" in their doc.
"""

from __future__ import annotations

import random
import re
from typing import Any

from cdc.common_config import (
    common_def,
    connection_fields,
    database_filter_fields,
    resumable_chunk_field,
)
from cdc.config import (
    Config,
    ConfigDef,
    ConfigField,
    Kind,
    at_least,
    exclusive,
    one_of,
    split_list,
    valid_regex_list,
)
from cdc.history import history_config_def

SNAPSHOT_MODES = (
    "initial",
    "initial_only",
    "when_needed",
    "never",
    "schema_only",
    "schema_only_recovery",
    # Debezium 2.x+'s names for the last two
    "no_data",
    "recovery",
)
#: ``snapshot.mode`` values that rebuild the schema history (1.x and 2.x+ names)
RECOVERY_MODES = ("schema_only_recovery", "recovery")
HANDLING_MODES = ("fail", "warn", "skip")
TINYINT_BOOLEAN_CONVERTER = "TinyIntOneToBooleanConverter"


MYSQL_FIELDS = ConfigDef(
    [
        *connection_fields(
            "MySQL or MariaDB server",
            3306,
            "User to connect as; needs SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE "
            "and REPLICATION CLIENT.",
        ),
        ConfigField(
            "database.server.id",
            Kind.LONG,
            None,
            validator=at_least(1),
            doc="Replica server id; random in 5400-6400 when unset (set one explicitly).",
        ),
        ConfigField(
            "database.ssl.mode",
            Kind.STRING,
            "disabled",
            validator=one_of("disabled", "preferred", "required", "verify_ca", "verify_identity"),
            group="Connection",
            doc="TLS to the server: disabled, preferred (TLS when offered), required "
            "(encrypt), verify_ca (and check the certificate against database.ssl.ca), "
            "verify_identity (and the host name).",
        ),
        ConfigField(
            "database.ssl.ca", Kind.STRING, None, doc="tidemark: CA file (PEM).", group="Connection"
        ),
        ConfigField(
            "database.ssl.cert",
            Kind.STRING,
            None,
            doc="tidemark: client cert (PEM).",
            group="Connection",
        ),
        ConfigField(
            "database.ssl.key",
            Kind.STRING,
            None,
            doc="tidemark: client key (PEM).",
            group="Connection",
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
            "database.serverTimezone",
            Kind.STRING,
            None,
            doc="Accepted for compatibility; TIMESTAMP values are read as UTC epochs, so the "
            "server zone is not needed.",
        ),
        ConfigField(
            "table.ignore.builtin",
            Kind.BOOLEAN,
            True,
            group="Filters",
            doc="Leave out the system databases (mysql, sys, information_schema, "
            "performance_schema) whatever the filters say.",
        ),
        ConfigField(
            "include.schema.changes",
            Kind.BOOLEAN,
            True,
            group="Events",
            doc="Write each DDL statement, with the affected database, to the schema change topic "
            "named after database.server.name.",
        ),
        ConfigField(
            "include.query",
            Kind.BOOLEAN,
            False,
            group="Events",
            doc="Add the SQL statement that made each change to source.query (needs "
            "binlog_rows_query_log_events=ON on MySQL, binlog_annotate_row_events on MariaDB).",
        ),
        ConfigField(
            "inconsistent.schema.handling.mode",
            Kind.STRING,
            "fail",
            validator=one_of(*HANDLING_MODES),
            group="Error Handling",
            doc="A binlog row event for a table whose schema is unknown: fail stops the task, "
            "warn logs and skips it, skip drops it silently.",
        ),
        ConfigField(
            "event.deserialization.failure.handling.mode",
            Kind.STRING,
            None,
            validator=one_of(*HANDLING_MODES),
            doc="Binlog events that cannot be decoded; defaults to "
            "event.processing.failure.handling.mode.",
        ),
        ConfigField(
            "bigint.unsigned.handling.mode",
            Kind.STRING,
            "long",
            validator=one_of("long", "precise"),
            group="Events",
            doc="BIGINT UNSIGNED as a signed 64-bit long (values above 2^63-1 wrap) or as a "
            "precise Decimal.",
        ),
        ConfigField(
            "enable.time.adjuster",
            Kind.BOOLEAN,
            True,
            group="Events",
            doc="Expand two-digit YEAR values to four digits (00-69 -> 2000-2069, 70-99 -> "
            "1970-1999), as MySQL does.",
        ),
        ConfigField(
            "connect.timeout.ms",
            Kind.LONG,
            30000,
            validator=at_least(1),
            group="Connection",
            doc="Longest wait for a connection to the server.",
        ),
        ConfigField(
            "connect.keep.alive",
            Kind.BOOLEAN,
            True,
            group="Connection",
            doc="Reconnect the binlog reader when its connection drops (up to "
            "connect.max.attempts); false fails the task instead.",
        ),
        ConfigField(
            "connect.keep.alive.interval.ms",
            Kind.LONG,
            60000,
            validator=at_least(1),
            group="Connection",
            doc="Accepted for compatibility, no effect: the binlog connection is checked by "
            "binlog.heartbeat.interval.ms.",
        ),
        ConfigField(
            "connect.backoff.initial.delay.ms",
            Kind.LONG,
            1000,
            validator=at_least(0),
            doc="tidemark: first wait before reconnecting a dropped binlog connection.",
        ),
        ConfigField(
            "connect.backoff.max.delay.ms",
            Kind.LONG,
            10000,
            validator=at_least(0),
            doc="tidemark: longest wait between reconnect attempts.",
        ),
        ConfigField(
            "connect.max.attempts",
            Kind.INT,
            16,
            validator=at_least(1),
            doc="tidemark: reconnect attempts before the task fails (needs connect.keep.alive).",
        ),
        ConfigField(
            "binlog.heartbeat.interval.ms",
            Kind.LONG,
            1000,
            validator=at_least(100),
            doc="tidemark: server heartbeat on an idle binlog connection (liveness check).",
        ),
        ConfigField(
            "gtid.source.includes",
            Kind.LIST,
            [],
            validator=valid_regex_list,
            group="Binlog",
            doc="Regular expressions of GTID source UUIDs whose transactions are followed; do not "
            "combine with gtid.source.excludes.",
        ),
        ConfigField(
            "gtid.source.excludes",
            Kind.LIST,
            [],
            validator=valid_regex_list,
            group="Binlog",
            doc="Regular expressions of GTID source UUIDs whose transactions are ignored.",
        ),
        ConfigField(
            "gtid.new.channel.position",
            Kind.STRING,
            "latest",
            validator=one_of("latest", "earliest"),
            group="Binlog",
            doc="Where to start reading a GTID channel (server UUID) first seen after a "
            "restart: latest skips what it wrote before, earliest reads all of it.",
        ),
        ConfigField(
            "binlog.buffer.size",
            Kind.INT,
            0,
            validator=at_least(0),
            group="Binlog",
            doc="Events of a transaction held back until it ends, so that a ROLLBACK (or "
            "ROLLBACK TO SAVEPOINT) drops them instead of emitting them; a longer transaction "
            "is emitted as it goes. 0 disables the buffer.",
        ),
        ConfigField(
            "snapshot.mode",
            Kind.STRING,
            "initial",
            validator=one_of(*SNAPSHOT_MODES),
            importance="HIGH",
            group="Snapshot",
            doc="When to snapshot: initial (first start only), initial_only (snapshot, then "
            "stop), when_needed (when offsets are missing or the binlog no longer has them), "
            "never (stream only; the binlog must still hold the whole history), schema_only "
            "or no_data (schema, then stream new changes), schema_only_recovery or recovery "
            "(rebuild a lost schema history from the current schema).",
        ),
        ConfigField(
            "snapshot.max.threads",
            Kind.INT,
            1,
            validator=at_least(1),
            group="Snapshot",
            doc="Connections that read the chunks of an incremental snapshot's table at once "
            "(with watermark rows; the initial snapshot reads with one connection).",
        ),
        ConfigField(
            "snapshot.locking.mode",
            Kind.STRING,
            "minimal",
            validator=one_of("minimal", "extended", "none"),
            group="Snapshot",
            doc="Locks during a snapshot: minimal holds the global read lock only while schema "
            "and binlog position are read, extended for the whole snapshot, none takes none "
            "(safe only when no DDL runs meanwhile).",
        ),
        ConfigField(
            "snapshot.resumable",
            Kind.BOOLEAN,
            True,
            group="Snapshot",
            doc="tidemark: read each table with an integer or string primary key in key "
            "order, so that a snapshot interrupted by a crash resumes after the last batch "
            "Kafka acknowledged instead of starting over (tables read whole are skipped); "
            "false restarts an interrupted snapshot from the beginning.",
        ),
        resumable_chunk_field(),
        ConfigField(
            "snapshot.new.tables",
            Kind.STRING,
            "off",
            validator=one_of("off", "parallel"),
            group="Snapshot",
            doc="parallel snapshots tables that the filters start to include after a restart while "
            "streaming goes on; off does not.",
        ),
        ConfigField(
            "min.row.count.to.stream.results",
            Kind.LONG,
            1000,
            validator=at_least(0),
            group="Snapshot",
            doc="Tables with more rows than this are read row by row during a snapshot instead of "
            "in one result set; 0 always streams.",
        ),
        ConfigField(
            "table.include.list.allow.empty",
            Kind.BOOLEAN,
            False,
            group="Filters",
            doc="Start even when table.include.list (or database.include.list) matches no "
            "existing table (or database), with a warning; by default such a start fails "
            "listing the patterns and the nearest existing names (a typo would otherwise "
            "capture nothing, silently). tidemark.",
        ),
        ConfigField(
            "converters",
            Kind.LIST,
            [],
            group="Events",
            doc="Names of custom converters, each configured by <name>.type and <name>.selector; "
            "only TinyIntOneToBooleanConverter (TINYINT(1) as BOOLEAN) is built in.",
        ),
    ]
)


def _checks(values: dict[str, Any], raw: dict[str, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if values.get("time.precision.mode") == "adaptive":
        out.append(
            (
                "time.precision.mode",
                "must be adaptive_time_microseconds (the default) or connect for MySQL, as in "
                "Debezium: adaptive is the PostgreSQL and SQL Server mode",
            )
        )
    for name in values.get("converters") or []:
        if not raw.get(f"{name}.type"):
            out.append((f"{name}.type", f"is required for the converter {name!r}"))
        elif not str(raw[f"{name}.type"]).endswith(TINYINT_BOOLEAN_CONVERTER):
            out.append(
                (
                    f"{name}.type",
                    f"unknown converter {raw[f'{name}.type']!r}; tidemark's MySQL connector "
                    f"supports io.debezium.connector.mysql.converters.{TINYINT_BOOLEAN_CONVERTER}",
                )
            )
        for pattern in split_list(raw.get(f"{name}.selector")):
            try:
                re.compile(pattern)
            except re.error as exc:
                out.append((f"{name}.selector", f"{pattern!r} is not a regex: {exc}"))
    return out


def config_def() -> ConfigDef:
    cdef = common_def(
        max_queue_size=8192,
        max_batch_size=2048,
        snapshot_fetch_size=2048,
        time_precision_mode="adaptive_time_microseconds",
    )
    cdef = cdef.extend(database_filter_fields()).extend(history_config_def()).extend(MYSQL_FIELDS)
    cdef.checks.append(exclusive(("gtid.source.includes", "gtid.source.excludes")))
    cdef.checks.append(_checks)
    cdef.passthrough_rules.append(_converter_key)
    return cdef


def _converter_key(key: str, raw: Any) -> bool:
    """``<name>.type`` / ``<name>.selector`` of a converter listed in ``converters``."""
    return key.partition(".")[0] in split_list(raw.get("converters"))


CONFIG_DEF = config_def()


def parse_config(raw: dict[str, Any]) -> Config:
    """Parse and fill the random ``database.server.id`` Debezium picks when none is set."""
    config = CONFIG_DEF.parse(raw)
    if config.values.get("database.server.id") is None:
        config.values["database.server.id"] = random.randint(5400, 6400)
    return config


def tinyint_boolean_selectors(config: Config) -> tuple[re.Pattern[str], ...] | None:
    """Selectors of a configured ``TinyIntOneToBooleanConverter`` (empty = every column)."""
    for name in config["converters"]:
        if str(config.raw.get(f"{name}.type", "")).endswith(TINYINT_BOOLEAN_CONVERTER):
            return tuple(
                re.compile(p, re.IGNORECASE) for p in split_list(config.raw.get(f"{name}.selector"))
            )
    return None


def initial_statements(config: Config) -> list[str]:
    """``database.initial.statements``: ``;`` separates, ``;;`` is a literal semicolon."""
    text = config.get("database.initial.statements")
    if not text:
        return []
    parts = str(text).replace(";;", "\0").split(";")
    return [p.replace("\0", ";").strip() for p in parts if p.strip()]
