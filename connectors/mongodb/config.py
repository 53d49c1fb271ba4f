"""The MongoDB connector's properties (seed §4.5.4 and its later revision), validated.

Names are Debezium's; the 1.2 names are aliases (``mongodb.name`` for the logical name,
``collection.whitelist``, ``field.blacklist``, ``initial.sync.max.threads``). The core reads
its table filter from ``table.include.list``/``table.exclude.list``: here those are the
collection lists (``<db>.<collection>`` regular expressions) under their MongoDB names.
"""

from __future__ import annotations

import re
from typing import Any

from cdc.common_config import (
    ambient_credentials_field,
    common_def,
    database_filter_fields,
    resumable_chunk_field,
    server_name_field,
)
from cdc.config import ConfigDef, ConfigField, Kind, at_least, exclusive, one_of, valid_regex_list

CAPTURE_MODES = (
    "change_streams",
    "change_streams_update_full",
    "change_streams_with_pre_image",
    "change_streams_update_full_with_pre_image",
    "oplog",
)
SNAPSHOT_MODES = ("initial", "never", "initial_only")
GROUP = "MongoDB"


def _field_list(value: Any) -> str | None:
    for entry in value or []:
        if entry.count(".") < 2:
            return f"entry {entry!r} must be <database>.<collection>.<field path>"
    return None


def _renames(value: Any) -> str | None:
    for entry in value or []:
        path, sep, new = entry.partition(":")
        if not sep or not new or "." in new or path.count(".") < 2:
            return (
                f"entry {entry!r} must be <database>.<collection>.<field path>:<new name> "
                "(the new name is one field name, without dots)"
            )
    return None


MONGODB_FIELDS = ConfigDef(
    [
        server_name_field(
            ("mongodb.name", "topic.prefix"),
            "Logical name of the MongoDB replica set or cluster: the prefix of every topic "
            "(<name>.<db>.<collection>) and the key offsets are stored under. mongodb.name is "
            "the 1.2 name, topic.prefix the 2.x one.",
        ),
        ConfigField(
            "mongodb.hosts",
            Kind.STRING,
            None,
            group=GROUP,
            doc="Comma-separated host:port seeds of the replica set; 'rs0/host:port' names "
            "the replica set (needed with mongodb.members.auto.discover=false, and for a "
            "server that reports no replica set name, such as the tidemark dev stand-in).",
        ),
        ConfigField(
            "mongodb.connection.string",
            Kind.STRING,
            None,
            group=GROUP,
            doc="A mongodb:// connection string, used instead of mongodb.hosts (later "
            "Debezium's name). A '/rs0' replicaSet option names the replica set.",
        ),
        ambient_credentials_field(
            "authentication mechanisms of mongodb.connection.string that use AWS keys, "
            "Kerberos tickets or cloud metadata, and client key files it names"
        ),
        ConfigField("mongodb.user", Kind.STRING, None, group=GROUP, doc="User to authenticate as."),
        ConfigField("mongodb.password", Kind.PASSWORD, None, group=GROUP, doc="Its password."),
        ConfigField(
            "mongodb.authsource",
            Kind.STRING,
            "admin",
            group=GROUP,
            doc="Database the user is defined in.",
        ),
        ConfigField(
            "mongodb.ssl.enabled", Kind.BOOLEAN, False, group=GROUP, doc="Connect with TLS."
        ),
        ConfigField(
            "mongodb.ssl.invalid.hostname.allowed",
            Kind.BOOLEAN,
            False,
            group=GROUP,
            doc="Accept a server certificate whose host name does not match (MITM risk).",
        ),
        ConfigField(
            "mongodb.members.auto.discover",
            Kind.BOOLEAN,
            True,
            group=GROUP,
            doc="true: mongodb.hosts are seeds and the driver finds the primary; false: "
            "connect to the first host as given (behind a proxy).",
        ),
        ConfigField(
            "mongodb.connection.mode",
            Kind.STRING,
            "sharded",
            validator=one_of("sharded", "replica_set"),
            recommended=("sharded", "replica_set"),
            group=GROUP,
            doc="For a sharded cluster reached through a mongos: sharded reads one "
            "cluster-wide change stream through it; replica_set reads each shard's replica "
            "set directly, one thread per shard (the seed's mechanism; oplog mode and a "
            "connection to the configuration server always read shard by shard).",
        ),
        ConfigField(
            "capture.mode",
            Kind.STRING,
            "change_streams",
            validator=one_of(*CAPTURE_MODES),
            recommended=CAPTURE_MODES,
            group=GROUP,
            doc="How changes are read: change streams (current Debezium's default; "
            "_update_full adds the document after an update, _with_pre_image the document "
            "before it, where the collection has pre-images enabled) or oplog (the seed's "
            "mechanism: a tailing read of local.oplog.rs).",
        ),
        ConfigField(
            "snapshot.mode",
            Kind.STRING,
            "initial",
            validator=one_of(*SNAPSHOT_MODES),
            recommended=SNAPSHOT_MODES,
            group="Snapshot",
            doc="initial: copy the collections when no offset is stored, an earlier snapshot "
            "did not finish, or the stored position is no longer in the oplog; never: only "
            "stream (a lost position is then an error); initial_only: copy, then stop.",
        ),
        ConfigField(
            "snapshot.max.threads",
            Kind.INT,
            1,
            aliases=("initial.sync.max.threads",),
            validator=at_least(1),
            group="Snapshot",
            doc="Collections copied in parallel during a snapshot.",
        ),
        ConfigField(
            "snapshot.resumable",
            Kind.BOOLEAN,
            True,
            group="Snapshot",
            doc="tidemark: copy each collection sorted by _id, so a snapshot killed half-way "
            "resumes after the last acknowledged batch (collections copied whole are skipped) "
            "while the oplog holds its position; integer, string and ObjectId _ids only. "
            "false: an interrupted snapshot copies every collection again.",
        ),
        resumable_chunk_field(),
        ConfigField(
            "snapshot.fetch.size",
            Kind.INT,
            0,
            validator=at_least(0),
            group="Snapshot",
            doc="Documents per batch of a snapshot read; 0 lets the server choose.",
        ),
        ConfigField(
            "snapshot.include.collection.list",
            Kind.LIST,
            [],
            validator=valid_regex_list,
            group="Snapshot",
            doc="Regular expressions of <db>.<collection>: of the captured collections, only "
            "these are copied by a snapshot (default: all captured collections); the others "
            "are streamed only.",
        ),
        ConfigField(
            "snapshot.collection.filter.overrides",
            Kind.LIST,
            [],
            group="Snapshot",
            doc="<db>.<collection> names whose snapshot copies only the documents matching "
            "the query in snapshot.collection.filter.overrides.<db>.<collection> (a JSON "
            'query document, e.g. {"status": "active"}).',
        ),
        ConfigField(
            "table.include.list",
            Kind.LIST,
            [],
            aliases=("collection.include.list", "collection.whitelist"),
            validator=valid_regex_list,
            group="Filters",
            doc="Regular expressions of <db>.<collection> to capture (collection.include.list; "
            "1.2: collection.whitelist). local, admin and config are never captured.",
        ),
        ConfigField(
            "table.exclude.list",
            Kind.LIST,
            [],
            aliases=("collection.exclude.list", "collection.blacklist"),
            validator=valid_regex_list,
            group="Filters",
            doc="Regular expressions of <db>.<collection> not to capture.",
        ),
        ConfigField(
            "field.exclude.list",
            Kind.LIST,
            [],
            aliases=("field.blacklist",),
            validator=_field_list,
            group="Filters",
            doc="<db>.<collection>.<field path> entries (db and collection may be *): fields "
            "removed from after, patch, filter-free update descriptions and snapshots.",
        ),
        ConfigField(
            "field.renames",
            Kind.LIST,
            [],
            validator=_renames,
            group="Filters",
            doc="<db>.<collection>.<field path>:<new name> entries, applied in order.",
        ),
        ConfigField(
            "connect.backoff.initial.delay.ms",
            Kind.LONG,
            1000,
            validator=at_least(1),
            group=GROUP,
            doc="First delay before reconnecting to an unreachable primary; each next delay "
            "doubles, up to connect.backoff.max.delay.ms.",
        ),
        ConfigField(
            "connect.backoff.max.delay.ms",
            Kind.LONG,
            120000,
            validator=at_least(1),
            group=GROUP,
            doc="Longest delay between reconnection attempts.",
        ),
        ConfigField(
            "connect.max.attempts",
            Kind.INT,
            16,
            validator=at_least(1),
            group=GROUP,
            doc="Failed connection attempts in a row before the task fails.",
        ),
        ConfigField(
            "mongodb.poll.interval.ms",
            Kind.LONG,
            30000,
            validator=at_least(1),
            group=GROUP,
            doc="How often the shard list (config.shards) of a sharded cluster read shard by "
            "shard is re-read: an added shard starts being read, a removed one stops.",
        ),
        ConfigField(
            "mongodb.connect.timeout.ms",
            Kind.INT,
            10000,
            validator=at_least(1),
            group=GROUP,
            doc="Driver connection timeout.",
        ),
        ConfigField(
            "mongodb.socket.timeout.ms",
            Kind.INT,
            0,
            validator=at_least(0),
            group=GROUP,
            doc="Driver socket timeout; 0 disables it.",
        ),
        ConfigField(
            "mongodb.server.selection.timeout.ms",
            Kind.INT,
            30000,
            validator=at_least(1),
            group=GROUP,
            doc="Driver server selection timeout.",
        ),
        ConfigField(
            "mongodb.oplog.poll.interval.ms",
            Kind.INT,
            200,
            validator=at_least(1),
            group=GROUP,
            doc="tidemark: in oplog mode, the wait between oplog reads when a tailable cursor "
            "ends (servers without await support).",
        ),
    ]
)
MONGODB_FIELDS.checks.append(exclusive(("table.include.list", "table.exclude.list")))


@MONGODB_FIELDS.check
def _hosts(values: dict[str, Any], raw: dict[str, Any]) -> list[tuple[str, str]]:
    hosts = str(values.get("mongodb.hosts") or "").strip()
    uri = str(values.get("mongodb.connection.string") or "").strip()
    if not hosts and not uri:
        return [("mongodb.hosts", "is required (or give mongodb.connection.string)")]
    out = []
    if hosts:
        rs, sep, seeds = hosts.partition("/")
        seeds = seeds if sep else rs
        if reason := _seed_list_problem(seeds, "'rs0/host:port,host:port' or 'host:port,...'"):
            out.append(("mongodb.hosts", reason))
    if uri:
        scheme, sep, rest = uri.partition("://")
        if not sep or scheme not in ("mongodb", "mongodb+srv"):
            out.append(
                (
                    "mongodb.connection.string",
                    "must begin with mongodb:// or mongodb+srv://",
                )
            )
        elif scheme == "mongodb":
            seeds = rest.split("/", 1)[0].split("?", 1)[0].rpartition("@")[2]
            if reason := _seed_list_problem(seeds, "mongodb://[user:password@]host:port,..."):
                out.append(("mongodb.connection.string", reason))
    return out


#: one seed: a name or IPv4 address, or a bracketed IPv6 address, and an optional port
SEED = re.compile(r"(?:\[[0-9A-Fa-f:.%]+\]|[^\s/?#@,:;&=\[\]]+)(?::[0-9]+)?")

#: a seed's characters: a host name (non-ASCII too), a percent-encoded Unix socket path,
#: a bracketed IPv6 address, a port; never what starts a path, options or userinfo
_SEED_CHARS = re.compile(r"[^\s/?#@,;&=]+")


def _seed_list_problem(seeds: str, form: str) -> str | None:
    """What is wrong with a comma-separated ``host[:port]`` list (the driver's own errors
    name no key, and come only when the task starts)."""
    items = seeds.split(",")
    if not seeds.strip() or any(not item.strip() for item in items):
        return f"has an empty host (a stray comma?); the form is {form}"
    for item in (i.strip() for i in items):
        host, port = item, ""
        if host.startswith("["):  # [::1]:27017
            host, _, port = host.partition("]")
            host, port = host + "]", port.removeprefix(":")
        elif host.count(":") == 1:
            host, port = host.split(":")
        if not SEED.fullmatch(host) or not _SEED_CHARS.fullmatch(item):
            return f"{item!r} is not a host or host:port; the form is {form}"
        if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            return f"{item!r} has a port that is not a number from 1 to 65535"
    return None


FILTER_OVERRIDE = "snapshot.collection.filter.overrides."
MONGODB_FIELDS.passthrough.append(FILTER_OVERRIDE)


def snapshot_filters(values: dict[str, Any], raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{"db.coll": query}`` from ``snapshot.collection.filter.overrides``; raises
    ``ValueError`` naming the key that is missing or not a JSON query document."""
    from bson import json_util

    out: dict[str, dict[str, Any]] = {}
    for name in values.get("snapshot.collection.filter.overrides") or []:
        key = FILTER_OVERRIDE + name
        text = raw.get(key)
        if text is None:
            raise ValueError(f"{key} is required: the query of {name}'s snapshot")
        try:
            query = json_util.loads(str(text))
        except ValueError as exc:
            raise ValueError(f"{key} is not a JSON document: {exc}") from exc
        if not isinstance(query, dict):
            raise ValueError(f"{key} must be a JSON query document, got {text!r}")
        out[name] = query
    return out


@MONGODB_FIELDS.check
def _filter_overrides(values: dict[str, Any], raw: dict[str, Any]) -> list[tuple[str, str]]:
    try:
        snapshot_filters(values, raw)
    except ValueError as exc:
        key, _, reason = str(exc).partition(" ")
        return [(key, reason)]
    return []


CONFIG_DEF = common_def().extend(database_filter_fields()).extend(MONGODB_FIELDS)

CONFIG_DEF.inert.update(
    {
        "decimal.handling.mode": 'a Decimal128 stays {"$numberDecimal": ...} in the document\'s '
        "extended JSON, as in Debezium's MongoDB connector",
        "time.precision.mode": 'a date stays {"$date": ...} in the document\'s extended JSON',
        "binary.handling.mode": 'binary data stays {"$binary": ...} in the document\'s '
        "extended JSON",
    }
)
