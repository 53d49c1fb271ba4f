"""Connecting to MongoDB with pymongo, and the positions the connector reads from it.

The replica set name is the ``rs`` of every offset partition and source block: the server's
``setName``, else the ``rs0/`` prefix of ``mongodb.hosts`` (a server that reports no replica
set, such as the tidemark dev stand-in), else the connection string's ``replicaSet``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlparse

import pymongo
from bson import Timestamp
from pymongo.errors import OperationFailure, PyMongoError

from cdc.common_config import AMBIENT_CREDENTIALS
from cdc.config import Config, url_options
from cdc.errors import ConfigError
from connectors.mongodb.config import SEED

log = logging.getLogger("tidemark.mongodb")

Client = pymongo.MongoClient[dict[str, Any]]


def _hosts(config: Config) -> tuple[str | None, list[str]]:
    raw = str(config.get("mongodb.hosts") or "")
    rs, sep, rest = raw.partition("/")
    if not sep:
        rs, rest = "", raw
    hosts = [h.strip() for h in rest.split(",") if h.strip()]
    for host in hosts:
        # the driver reads an entry with '://' as a whole connection string, options and all
        if not SEED.fullmatch(host):
            raise ConfigError([("mongodb.hosts", f"{host!r} is not a host or host:port")])
    return (rs or None), hosts


def configured_replica_set(config: Config) -> str | None:
    rs, _ = _hosts(config)
    if rs:
        return rs
    uri = config.get("mongodb.connection.string")
    if uri:
        values = uri_options(str(uri)).get("replicaset")
        if values:
            return values[0]
    return None


#: connection-string options through which pymongo uses credentials of the worker itself
#: (AWS keys and instance roles, Kerberos tickets, cloud OIDC metadata) or reads its files
_AMBIENT_MECHANISMS = ("mongodb-aws", "gssapi", "mongodb-oidc")
_FILE_OPTIONS = ("tlscertificatekeyfile", "tlscertificatekeyfilepassword", "sslpemkeyfile")


def uri_options(uri: str) -> dict[str, list[str]]:
    """A connection string's options by lower-cased name. The driver separates them with
    ``&`` or ``;`` (``parse_qs`` knows only ``&``, so a check built on it alone misses every
    option after a ``;``)."""
    options: dict[str, list[str]] = {}
    for name, value in url_options(uri):
        options.setdefault(name.lower(), []).append(value)
    return options


def check_no_ambient_credentials(uri: str) -> None:
    """Without ambient credentials (a config written over REST) the connection string may
    not ask for them: an authentication mechanism that reads the worker's environment or
    tickets, or a client key file of the worker's."""
    options = uri_options(uri)
    problems = []
    mechanism = (options.get("authmechanism") or [""])[0]
    if mechanism.lower() in _AMBIENT_MECHANISMS:
        problems.append(
            f"authMechanism={mechanism} authenticates with the worker's own credentials"
        )
    problems += [
        f"{key} reads a key file of the worker's" for key in _FILE_OPTIONS if key in options
    ]
    if problems:
        raise ConfigError(
            [
                (
                    "mongodb.connection.string",
                    "; ".join(problems) + " (not allowed for connectors configured over REST)",
                )
            ]
        )


def connect(config: Config, hosts: list[str] | None = None) -> Client:
    """A client for the configuration (``mongodb.hosts`` or ``mongodb.connection.string``),
    or with the configuration's credentials and options for other ``hosts`` (the members of
    one shard's replica set, read from ``config.shards``)."""
    options: dict[str, Any] = {
        "connectTimeoutMS": config["mongodb.connect.timeout.ms"],
        "serverSelectionTimeoutMS": config["mongodb.server.selection.timeout.ms"],
        "socketTimeoutMS": config["mongodb.socket.timeout.ms"] or None,
        "appname": "tidemark",
    }
    if config.get("mongodb.user"):
        options.update(
            username=config["mongodb.user"],
            password=config.get("mongodb.password") or "",
            authSource=config["mongodb.authsource"],
        )
    if config["mongodb.ssl.enabled"]:
        options["tls"] = True
        options["tlsAllowInvalidHostnames"] = config["mongodb.ssl.invalid.hostname.allowed"]
    uri = config.get("mongodb.connection.string")
    if uri and not config.get(AMBIENT_CREDENTIALS, True):
        check_no_ambient_credentials(str(uri))
    if uri and hosts is None:
        return pymongo.MongoClient(str(uri), **options)
    if hosts is None:
        _, hosts = _hosts(config)
    elif uri:
        # a shard reached directly: the connection string's TLS and auth options still apply
        parsed = urlparse(str(uri))
        given = {k.lower() for k in options}  # the driver reads option names in any case
        for key, values in uri_options(str(uri)).items():
            if key.startswith(("tls", "ssl", "auth")) and values and key not in given:
                options[key] = values[0]
        if parsed.username and "username" not in options:
            options["username"] = unquote(parsed.username)
            options["password"] = unquote(parsed.password or "")
    if not config["mongodb.members.auto.discover"]:
        options["directConnection"] = True
        hosts = hosts[:1]
    return pymongo.MongoClient(",".join(hosts), **options)


def hello(client: Client) -> dict[str, Any]:
    """``hello`` (MongoDB 4.4.2+), else the older ``isMaster`` (the stand-in knows only it)."""
    try:
        return dict(client.admin.command("hello"))
    except OperationFailure as exc:
        if exc.code != 59:  # CommandNotFound
            raise
        return dict(client.admin.command("isMaster"))


def replica_set_name(client: Client, config: Config) -> str:
    try:
        reply = hello(client)
    except OperationFailure as exc:
        raise ConfigError([("mongodb.user", f"cannot run hello: {exc}")]) from exc
    name = reply.get("setName") or configured_replica_set(config)
    if not name and reply.get("msg") == "isdbgrid":
        # a mongos: one cluster-wide change stream covers every shard, or the shards are
        # read one by one (connectors.mongodb.shards)
        return "mongos"
    if not name:
        raise ConfigError(
            [
                (
                    "mongodb.hosts",
                    "the server reports no replica set name (a standalone server has no "
                    "oplog); name it with the 'rs0/host:port' form",
                )
            ]
        )
    return str(name)


def last_oplog_timestamp(client: Client) -> Timestamp | None:
    """The newest entry of ``local.oplog.rs`` (None: empty or unreadable)."""
    try:
        entry = client.local["oplog.rs"].find_one(sort=[("$natural", -1)])
    except PyMongoError as exc:
        log.debug("reading local.oplog.rs failed: %s", exc)
        return None
    ts = entry.get("ts") if entry else None
    return ts if isinstance(ts, Timestamp) else None


def first_oplog_timestamp(client: Client) -> Timestamp | None:
    try:
        entry = client.local["oplog.rs"].find_one(sort=[("$natural", 1)])
    except PyMongoError:
        return None
    ts = entry.get("ts") if entry else None
    return ts if isinstance(ts, Timestamp) else None


def cluster_time(client: Client) -> Timestamp | None:
    """The server's current operation time (replica sets answer it on any command)."""
    try:
        reply: Mapping[str, Any] = client.admin.command("ping")
    except PyMongoError:
        return None
    ts = reply.get("operationTime") or (reply.get("$clusterTime") or {}).get("clusterTime")
    return ts if isinstance(ts, Timestamp) else None
