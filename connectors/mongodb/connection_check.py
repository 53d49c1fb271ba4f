"""What the MongoDB connector checks before a config sent over REST is stored.

As Debezium's ``MongoDbConnector.validateConnection``: the servers must answer and accept
the login (an error on the connection string or ``mongodb.hosts``). A server that is neither
a replica set member nor a ``mongos`` has no oplog and no change streams; the task refuses it
when it starts, which is reported here as an error too, since no later change on the server
side of this config can fix it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pymongo.errors import PyMongoError

from cdc.errors import ConfigError
from cdc.spi.connection_check import ConnectionReport
from connectors.mongodb.config import CONFIG_DEF
from connectors.mongodb.connection import connect, replica_set_name


def check(raw: Mapping[str, Any]) -> ConnectionReport:
    report = ConnectionReport()
    cfg = CONFIG_DEF.parse(dict(raw))
    where = "mongodb.connection.string" if cfg.get("mongodb.connection.string") else "mongodb.hosts"
    try:
        client = connect(cfg)
    except ConfigError as exc:
        report.errors += exc.problems
        return report
    except PyMongoError as exc:
        report.errors.append((where, f"Unable to connect: {exc}"))
        return report
    try:
        replica_set_name(client, cfg)
    except ConfigError as exc:
        report.errors += exc.problems
    except PyMongoError as exc:
        report.errors.append((where, f"Unable to connect: {exc}"))
    finally:
        client.close()
    return report
