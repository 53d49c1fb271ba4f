"""Every property of the seed's PostgreSQL chapter (Tables 3.19 and 3.20), validated."""

from __future__ import annotations

import re
from typing import Any

from cdc.common_config import common_def, schema_filter_fields
from cdc.config import ConfigDef, ConfigField, Kind, at_least, one_of

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
        ConfigField("plugin.name", Kind.STRING, "pgoutput", validator=_plugin, importance="HIGH"),
        ConfigField("slot.name", Kind.STRING, "debezium", validator=_slot_name),
        ConfigField("slot.drop.on.stop", Kind.BOOLEAN, False),
        ConfigField("slot.max.retries", Kind.INT, 6, validator=at_least(0)),
        ConfigField("slot.retry.delay.ms", Kind.LONG, 10000, validator=at_least(0)),
        ConfigField("slot.stream.params", Kind.STRING, None),
        ConfigField("publication.name", Kind.STRING, "dbz_publication"),
        ConfigField(
            "publication.autocreate.mode",
            Kind.STRING,
            "all_tables",
            validator=one_of("all_tables", "disabled", "filtered"),
        ),
        ConfigField("database.hostname", Kind.STRING, required=True, importance="HIGH"),
        ConfigField("database.port", Kind.INT, 5432, validator=at_least(1)),
        ConfigField("database.user", Kind.STRING, required=True, importance="HIGH"),
        ConfigField("database.password", Kind.PASSWORD, None),
        ConfigField("database.dbname", Kind.STRING, required=True, importance="HIGH"),
        ConfigField(
            "database.sslmode",
            Kind.STRING,
            "disable",
            validator=one_of("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
        ),
        ConfigField("database.sslcert", Kind.STRING, None),
        ConfigField("database.sslkey", Kind.STRING, None),
        ConfigField("database.sslpassword", Kind.PASSWORD, None),
        ConfigField("database.sslrootcert", Kind.STRING, None),
        ConfigField("database.tcpKeepAlive", Kind.BOOLEAN, True),
        ConfigField("database.connect.timeout.ms", Kind.LONG, 30000, validator=at_least(1000)),
        ConfigField("database.initial.statements", Kind.STRING, None),
        ConfigField("hstore.handling.mode", Kind.STRING, "json", validator=one_of("map", "json")),
        ConfigField(
            "interval.handling.mode", Kind.STRING, "numeric", validator=one_of("numeric", "string")
        ),
        ConfigField("include.unknown.datatypes", Kind.BOOLEAN, False),
        ConfigField(
            "schema.refresh.mode",
            Kind.STRING,
            "columns_diff",
            validator=one_of("columns_diff", "columns_diff_exclude_unchanged_toast"),
        ),
        ConfigField("heartbeat.action.query", Kind.STRING, None),
        ConfigField(
            "snapshot.mode",
            Kind.STRING,
            "initial",
            validator=one_of(*SNAPSHOT_MODES),
            importance="HIGH",
        ),
        ConfigField("snapshot.max.threads", Kind.INT, 1, validator=at_least(1)),
        ConfigField("status.update.interval.ms", Kind.LONG, 10000, validator=at_least(100)),
        ConfigField(
            "proto.version",
            Kind.INT,
            1,
            validator=one_of("1", "2"),
            doc="pgoutput protocol version.",
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
