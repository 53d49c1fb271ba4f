"""The MongoDB connector: one replica set, change streams or the oplog, both event shapes."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from functools import cached_property
from typing import Any

from pymongo.errors import OperationFailure, PyMongoError

from cdc.config import Config
from cdc.envelope import source_block_schema
from cdc.retry import Backoff
from cdc.schema.model import INT32, OPTIONAL_INT64, OPTIONAL_STRING, STRING, Schema
from cdc.snapshot_modes import snapshot_incomplete
from cdc.spi import Connector, SnapshotSource, Snapshotter, SourceContext, StreamingSource
from connectors.mongodb.config import CONFIG_DEF, snapshot_filters
from connectors.mongodb.connection import (
    Client,
    cluster_time,
    configured_replica_set,
    connect,
    first_oplog_timestamp,
    last_oplog_timestamp,
    replica_set_name,
)
from connectors.mongodb.events import SHAPE_CURRENT, SHAPE_V1, DocumentConverters, Shapes
from connectors.mongodb.fields import FieldSelector
from connectors.mongodb.snapshot import SYSTEM_DATABASES, MongoSnapshot, MongoSnapshotSteps
from connectors.mongodb.streaming import (
    HISTORY_LOST,
    ChangeStreamStreaming,
    CommandCursor,
    Cursor,
    OplogStreaming,
    stream_options,
)

log = logging.getLogger("tidemark.mongodb")

_LITERAL = re.compile(r"^[A-Za-z0-9_-]+$")


def watch_namespace(config: Config) -> tuple[str | None, str | None]:
    """The narrowest change stream the filters allow: one literal ``db.collection`` in the
    collection include list watches that collection, one literal database that database,
    anything else the whole cluster (events are filtered by the connector either way)."""
    colls = config["table.include.list"]
    if len(colls) == 1:
        db, _, coll = colls[0].partition(".")
        if _LITERAL.match(db) and _LITERAL.match(coll):
            return db, coll
    dbs = config.get("database.include.list") or []
    if len(dbs) == 1 and _LITERAL.match(dbs[0]):
        return dbs[0], None
    return None, None


class MongoSnapshotter(Snapshotter):
    """``initial``/``initial_only``: snapshot without a finished snapshot's offset or when the
    stored position is gone from the oplog; ``never``: never."""

    def __init__(self, mode: str, available: Any) -> None:
        self.mode = mode  # type: ignore[misc]
        self.available = available

    def should_snapshot(self, offset: Mapping[str, Any] | None) -> bool:
        if self.mode == "never":
            return False
        if snapshot_incomplete(offset):
            return True
        assert offset is not None
        if not self.available(offset):
            log.warning("stored position %s is no longer in the oplog: new snapshot", offset)
            return True
        return False

    def should_stream(self) -> bool:
        return self.mode != "initial_only"


class MongoDbConnector(Connector):
    type_name = "mongodb"
    class_names = ("io.debezium.connector.mongodb.MongoDbConnector",)
    config_def = CONFIG_DEF
    system_schemas = SYSTEM_DATABASES
    config: Config

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        self.config = CONFIG_DEF.parse(dict(config))
        c = self.config
        self.shape = SHAPE_CURRENT if str(c.get("envelope.version", "1.2")) == "3" else SHAPE_V1
        self.shapes = Shapes(self.shape, FieldSelector(c["field.exclude.list"], c["field.renames"]))
        self.mode = str(c["capture.mode"])
        self.namespace = watch_namespace(c)
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = connect(self.config)
        return self._client

    @cached_property
    def rs(self) -> str:
        return configured_replica_set(self.config) or replica_set_name(self.client, self.config)

    def source_partition(self) -> dict[str, Any]:
        return {"server_id": self.config["database.server.name"], "rs": self.rs}

    def backoff(self) -> Backoff:
        c = self.config
        return Backoff(
            initial_delay_s=c["connect.backoff.initial.delay.ms"] / 1000.0,
            max_delay_s=c["connect.backoff.max.delay.ms"] / 1000.0,
            max_retries=c["connect.max.attempts"],  # reconnection attempts after the loss
        )

    # -- positions ---------------------------------------------------------------------------
    def open_cursor(self, offset: Mapping[str, Any] | None) -> Cursor:
        return CommandCursor(self.client, self.namespace, stream_options(offset, self.mode))

    def current_position(self) -> dict[str, Any]:
        """Where streaming starts after a snapshot taken now."""
        if self.mode != "oplog":
            try:
                cursor = CommandCursor(self.client, self.namespace, stream_options(None, self.mode))
                token = cursor.token
                cursor.close()
            except OperationFailure:
                token = None
            if token and token.get("_data"):
                ts = cluster_time(self.client)
                return {
                    "sec": ts.time if ts else 0,
                    "ord": ts.inc if ts else 0,
                    "resume_token": token["_data"],
                }
        ts = last_oplog_timestamp(self.client) or cluster_time(self.client)
        if ts is None:
            return {"sec": 0, "ord": 0}
        return {"sec": ts.time, "ord": ts.inc}

    def position_available(self, offset: Mapping[str, Any]) -> bool:
        """Whether streaming can start at ``offset`` (the oplog still holds it)."""
        if self.mode == "oplog" or not offset.get("resume_token"):
            first = first_oplog_timestamp(self.client)
            sec, ord_ = int(offset.get("sec", 0)), int(offset.get("ord", 0))
            return first is None or (first.time, first.inc) <= (sec, ord_)
        try:
            self.open_cursor(offset).close()
        except OperationFailure as exc:
            if exc.code in HISTORY_LOST:
                return False
            raise
        except PyMongoError:
            return True  # unreachable: streaming will retry and report it
        return True

    # -- the contract ------------------------------------------------------------------------
    def snapshotter(self) -> Snapshotter:
        return MongoSnapshotter(str(self.config["snapshot.mode"]), self.position_available)

    def snapshot_source(self) -> SnapshotSource:
        c = self.config

        def steps(ctx: SourceContext) -> MongoSnapshotSteps:
            return MongoSnapshotSteps(
                ctx,
                self.client,
                self.shapes,
                self.rs,
                self.current_position,
                self.position_available,
                c["snapshot.max.threads"],
                c["snapshot.fetch.size"],
                c["snapshot.include.collection.list"],
                snapshot_filters(dict(c.values), dict(self.raw_config)),
            )

        return MongoSnapshot(steps)

    def streaming_source(self) -> StreamingSource:
        if self.mode == "oplog":
            oplog = OplogStreaming(
                self.client,
                self.shapes,
                self.rs,
                self.config["mongodb.oplog.poll.interval.ms"],
                self.backoff(),
            )
            oplog.user = self.config.get("mongodb.user")
            return oplog
        db, coll = self.namespace
        watched = (db, coll) if db is not None and coll is not None else None
        return ChangeStreamStreaming(
            self.open_cursor, self.shapes, self.rs, watched, self.backoff()
        )

    def value_converters(self) -> DocumentConverters:
        return DocumentConverters()

    def source_schema(self) -> Schema:
        version = str(self.config.get("envelope.version", "1.2"))
        common = [("db", STRING), ("rs", STRING), ("collection", STRING), ("ord", INT32)]
        if self.shape == SHAPE_V1:
            own = [*common, ("h", OPTIONAL_INT64), ("stxnid", OPTIONAL_STRING)]
            return source_block_schema("io.debezium.connector.mongo.Source", own)
        own = [
            *common,
            ("lsid", OPTIONAL_STRING),
            ("txnNumber", OPTIONAL_INT64),
            ("wallTime", OPTIONAL_INT64),
        ]
        return source_block_schema("io.debezium.connector.mongo.Source", own, version=version)

    @classmethod
    def validate_offset(
        cls, partition: dict[str, Any], offset: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, list[str]]:
        problems = []
        if set(partition) != {"server_id", "rs"}:
            problems.append('partition must be {"server_id": <name>, "rs": <replica set>}')
        if offset is not None:
            for key in ("sec", "ord"):
                value = offset.get(key)
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    problems.append(f"offset.{key} must be a non-negative integer, got {value!r}")
            token = offset.get("resume_token")
            if token is not None and not isinstance(token, str):
                problems.append("offset.resume_token must be the token's _data string")
        return offset, problems

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
