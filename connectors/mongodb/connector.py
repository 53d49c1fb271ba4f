"""The MongoDB connector: one replica set, change streams or the oplog, both event shapes."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

from pymongo.errors import OperationFailure, PyMongoError

from cdc.config import Config
from cdc.envelope import source_block_schema
from cdc.errors import ConfigError, OffsetError
from cdc.offsets.composite import POSITIONS, CompositePosition
from cdc.offsets.core_keys import core_key_problems
from cdc.retry import Backoff
from cdc.schema.model import INT32, OPTIONAL_INT64, OPTIONAL_STRING, STRING, Schema
from cdc.snapshot_modes import snapshot_incomplete
from cdc.spi import Connector, SnapshotSource, Snapshotter, SourceContext, StreamingSource
from cdc.spi.connection_check import ConnectionReport
from connectors.mongodb import connection_check
from connectors.mongodb.config import CONFIG_DEF, snapshot_filters
from connectors.mongodb.connection import (
    Client,
    cluster_time,
    configured_replica_set,
    connect,
    first_oplog_timestamp,
    hello,
    last_oplog_timestamp,
    replica_set_name,
)
from connectors.mongodb.events import SHAPE_CURRENT, SHAPE_V1, DocumentConverters, Shapes
from connectors.mongodb.fields import FieldSelector
from connectors.mongodb.shards import Shard, ShardedStreaming, TopologyDiscovery, list_shards
from connectors.mongodb.snapshot import SYSTEM_DATABASES, MongoSnapshot, MongoSnapshotSteps
from connectors.mongodb.streaming import (
    HISTORY_LOST,
    ChangeStreamStreaming,
    CommandCursor,
    Cursor,
    OplogStreaming,
    RetryingStream,
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
        self._shard_clients: dict[str, Client] = {}

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = connect(self.config)
        return self._client

    @cached_property
    def rs(self) -> str:
        return configured_replica_set(self.config) or replica_set_name(self.client, self.config)

    @cached_property
    def per_shard(self) -> bool:
        """Whether the cluster is read shard by shard (see :mod:`connectors.mongodb.shards`):
        the configured server lists shards in ``config.shards`` and is not a mongos, or is a
        mongos where the capture mode or ``mongodb.connection.mode`` asks for it."""
        reply = hello(self.client)
        mongos = reply.get("msg") == "isdbgrid"
        if mongos and self.mode != "oplog" and self.config["mongodb.connection.mode"] == "sharded":
            return False  # one change stream through the mongos: no shard list needed
        try:
            return bool(self.shard_list())
        except OperationFailure as exc:
            # A plain replica set's users need no access to the config database; a mongos or
            # a configuration server without it cannot be read shard by shard.
            if exc.code == 13 and (mongos or bool(reply.get("configsvr"))):  # Unauthorized
                raise ConfigError(
                    [
                        (
                            "mongodb.user",
                            f"user {self.config.get('mongodb.user')!r} cannot read "
                            f"config.shards ({exc}); a sharded cluster read shard by shard "
                            "needs the read role on the config database (the seed's "
                            "clusterMonitor/read roles)",
                        )
                    ]
                ) from exc
            return False

    def shard_list(self) -> list[Shard]:
        return list_shards(self.client)

    def shard_client(self, rs: str, hosts: tuple[str, ...] | None = None) -> Client:
        """A client of one shard's replica set (made once, closed with the connector)."""
        client = self._shard_clients.get(rs)
        if client is None:
            if hosts is None:
                found = {s.rs: s.hosts for s in self.shard_list()}
                if rs not in found:
                    raise ConfigError(
                        [("mongodb.hosts", f"shard {rs!r} is not listed in config.shards")]
                    )
                hosts = found[rs]
            client = self._shard_clients[rs] = connect(self.config, list(hosts))
        return client

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
        return self._cursor_on(self.client, offset)

    def _cursor_on(self, client: Client, offset: Mapping[str, Any] | None) -> Cursor:
        return CommandCursor(client, self.namespace, stream_options(offset, self.mode))

    def current_position(self) -> dict[str, Any]:
        """Where streaming starts after a snapshot taken now (of every shard, read shard by
        shard)."""
        if not self.per_shard:
            return self._position_of(self.client)
        positions = CompositePosition()
        for shard in self.shard_list():
            positions.advance(shard.rs, self._position_of(self.shard_client(shard.rs, shard.hosts)))
        return positions.offset()

    def _position_of(self, client: Client) -> dict[str, Any]:
        if self.mode != "oplog":
            try:
                cursor = CommandCursor(client, self.namespace, stream_options(None, self.mode))
                token = cursor.token
                cursor.close()
            except OperationFailure:
                token = None
            if token and token.get("_data"):
                ts = cluster_time(client)
                return {
                    "sec": ts.time if ts else 0,
                    "ord": ts.inc if ts else 0,
                    "resume_token": token["_data"],
                }
        ts = last_oplog_timestamp(client) or cluster_time(client)
        if ts is None:
            return {"sec": 0, "ord": 0}
        return {"sec": ts.time, "ord": ts.inc}

    def position_available(self, offset: Mapping[str, Any]) -> bool:
        """Whether streaming can start at ``offset`` (the oplog still holds it; read shard
        by shard: every listed shard's oplog still holds its position)."""
        if POSITIONS not in offset:
            return self._available_on(self.client, offset)
        listed = {s.rs: s for s in self.shard_list()}
        stored = CompositePosition(offset)
        return all(
            self._available_on(self.shard_client(rs, listed[rs].hosts), stored.get(rs) or {})
            for rs in stored.logs
            if rs in listed
        )

    def _available_on(self, client: Client, offset: Mapping[str, Any]) -> bool:
        if self.mode == "oplog" or not offset.get("resume_token"):
            first = first_oplog_timestamp(client)
            sec, ord_ = int(offset.get("sec", 0)), int(offset.get("ord", 0))
            return first is None or (first.time, first.inc) <= (sec, ord_)
        try:
            self._cursor_on(client, offset).close()
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
                self._holders(),
                c["snapshot.resumable"],
            )

        return MongoSnapshot(steps, int(c["snapshot.resumable.chunk.size"]))

    def _holders(self) -> list[Client] | None:
        """Where the snapshot reads documents: through the server configured (a replica set
        or a mongos, which routes reads to the shards owning each document), or, pointed at a
        configuration server, which holds none, from each shard directly."""
        if not self.per_shard or hello(self.client).get("msg") == "isdbgrid":
            return None
        return [self.shard_client(s.rs, s.hosts) for s in self.shard_list()]

    def streaming_source(self) -> StreamingSource:
        if "per_shard" in self.__dict__:  # the topology is known already
            return self._topology_stream()
        return TopologyDiscovery(self._topology_stream, self.backoff())

    def _topology_stream(self) -> StreamingSource:
        if self.per_shard:
            return ShardedStreaming(
                self.shard_list,
                lambda shard: self._stream_on(
                    lambda: self.shard_client(shard.rs, shard.hosts), shard.rs
                ),
                lambda shard: self._oplog_start(self.shard_client(shard.rs, shard.hosts)),
                self.config["mongodb.poll.interval.ms"],
            )
        return self._stream_on(lambda: self.client, self.rs)

    def _stream_on(self, client: Callable[[], Client], rs: str) -> RetryingStream:
        """A replica set's stream; its client is made when first used."""
        stream: RetryingStream
        if self.mode == "oplog":
            stream = OplogStreaming(
                client(),
                self.shapes,
                rs,
                self.config["mongodb.oplog.poll.interval.ms"],
                self.backoff(),
            )
        else:
            db, coll = self.namespace
            watched = (db, coll) if db is not None and coll is not None else None
            stream = ChangeStreamStreaming(
                lambda offset: self._cursor_on(client(), offset),
                self.shapes,
                rs,
                watched,
                self.backoff(),
            )
        stream.user = self.config.get("mongodb.user")
        return stream

    @staticmethod
    def _oplog_start(client: Client) -> dict[str, Any] | None:
        """Just before the oldest entry of a shard's oplog: a shard found after the offset
        was stored is read from its start."""
        first = first_oplog_timestamp(client)
        if first is None:
            return None
        return {"sec": first.time, "ord": max(first.inc - 1, 0)}

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
    def check_connection(cls, config: Mapping[str, Any]) -> ConnectionReport:
        return connection_check.check(config)

    @classmethod
    def validate_offset(
        cls, partition: dict[str, Any], offset: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, list[str]]:
        problems = []
        if set(partition) != {"server_id", "rs"}:
            problems.append('partition must be {"server_id": <name>, "rs": <replica set>}')
        if offset is None:
            return offset, problems
        if POSITIONS in offset:  # a cluster read shard by shard: one position per shard
            try:
                shards = CompositePosition(offset)
            except OffsetError as exc:
                return offset, [*problems, str(exc)]
            for rs in shards.logs:
                problems += _position_problems(shards.get(rs) or {}, f"offset.{POSITIONS}.{rs}")
        else:
            problems += _position_problems(offset, "offset")
        return offset, problems + core_key_problems(offset)

    def close(self) -> None:
        for client in self._shard_clients.values():
            client.close()
        self._shard_clients.clear()
        if self._client is not None:
            self._client.close()
            self._client = None


def _position_problems(position: Mapping[str, Any], where: str) -> list[str]:
    problems = []
    for key in ("sec", "ord"):
        value = position.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            problems.append(f"{where}.{key} must be a non-negative integer, got {value!r}")
    token = position.get("resume_token")
    if token is not None and not isinstance(token, str):
        problems.append(f"{where}.resume_token must be the token's _data string")
    return problems
