"""The interfaces a connector implements, and the context the core hands to it."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Protocol

from cdc.spi.chunks import ChunkReader
from cdc.spi.connection_check import ConnectionReport
from cdc.spi.contract import ConfigDefinition, ConnectorConfig, SourceMetrics
from cdc.spi.debezium_offsets import Translated, from_debezium
from cdc.spi.events import Operation, SourceEvent, TableId
from cdc.spi.relational import Table, ValueConverterProvider
from cdc.spi.reselect import Reselector


class SourceContext(Protocol):
    """What sources see of the core: all of it, so a connector uses nothing undeclared.
    ``emit`` may block: that is the backpressure. The core's ``EventDispatcher`` implements
    it; ``cdc.testing.memory`` uses every member."""

    stop_event: threading.Event

    @property
    def metrics(self) -> SourceMetrics:
        """The task's metrics: the streaming gauges a connector keeps current (connected,
        lag, position) and its own extra gauges."""
        ...

    @property
    def tx_metadata(self) -> bool:
        """``provide.transaction.metadata``: whether BEGIN/END reach the transaction topic. A
        source may skip reporting ``TransactionBegin`` when False (ends are still counted)."""
        ...

    def emit(self, event: SourceEvent) -> None: ...

    def emit_row(
        self,
        op: Operation,
        table_id: TableId,
        before_row: Sequence[Any] | None,
        after_row: Sequence[Any] | None,
        source: dict[str, Any],
        offset: dict[str, Any],
        transaction_id: str | None = None,
        partial: bool = False,
    ) -> None:
        """``emit(RowChange(op, table_id, before_row, after_row, source, offset,
        transaction_id, partial))`` without building the event: for a source whose innermost
        loop reports one row per call (the PostgreSQL stream): no event object is built and
        dispatched per row."""
        ...

    def batched(self, limit: int = 512) -> AbstractContextManager[Callable[[], None]]:
        """Within the block, what the source emits reaches the queue ``limit`` records at a
        time (one hand-off instead of one lock round trip per record; order unchanged). The
        block yields ``flush``: the source calls it before it waits for input, so nothing it
        decoded sits in the core while it idles. Leaving the block, also on an error, hands
        over the rest."""
        ...

    def register_table(self, table: Table) -> None:
        """Declare (or re-declare after a schema change) a table's structure before its rows."""

    def is_included(self, table_id: TableId) -> bool:
        """The configured database/schema/table include and exclude lists."""
        ...

    def snapshot_started(self, table_ids: list[TableId]) -> None:
        """The snapshot will read these tables (for TotalTableCount and progress)."""

    def snapshot_progress(self, table_id: TableId, rows: int, total: int | None) -> None:
        """Rows read so far from one table, and the expected total if known."""

    def snapshot_table_completed(self, table_id: TableId, rows: int) -> None: ...

    def snapshot_completed(self) -> None:
        """The snapshot's last row is emitted: its record may go, marked ``last`` (Debezium
        3.x's ``source.snapshot``). Said explicitly because other records may be emitted
        while a snapshot runs (SQL Server streams the other databases between an added
        database's batches), so no streaming record can tell the snapshot is over."""

    def snapshot_chunk_done(self) -> None:
        """A snapshot read in key order emitted a chunk whose rows' offsets say where to
        resume: returns once that offset is stored, so a crash re-reads at most one chunk
        (``cdc.snapshot.driver``). May block: that is the bound."""

    def snapshot_starting(self, position: Mapping[str, Any]) -> dict[str, Any]:
        """Called by a snapshot source once it knows the position its snapshot is consistent
        with (the offset streaming would start from after it), before it emits its first
        row; a snapshot without data calls it too. The core records durably, before
        returning, that a snapshot is under way.

        Returns the offset streaming must start from once this snapshot completes:
        ``position`` itself, or an *earlier* offset when an earlier attempt may already have
        emitted events (an interrupted snapshot, or the streaming offset that a re-snapshot
        replaces). The snapshot source must then hand over from that earlier offset: changes
        replayed on top of a newer snapshot converge to the table, while starting after an
        earlier attempt's position would lose the deletes of rows it emitted."""
        ...


class Snapshotter(ABC):
    """Policy object for one ``snapshot.mode``: whether to snapshot and stream on this start."""

    mode: ClassVar[str]

    @abstractmethod
    def should_snapshot(self, offset: Mapping[str, Any] | None) -> bool:
        """``offset`` is the stored offset (None on first start)."""

    def should_stream(self) -> bool:
        return True

    def include_data(self) -> bool:
        """False for schema-only modes: capture structure, emit no rows."""
        return True


class SnapshotSource(ABC):
    @abstractmethod
    def execute(
        self, ctx: SourceContext, previous_offset: Mapping[str, Any] | None, include_data: bool
    ) -> dict[str, Any]:
        """Emit the snapshot and return the offset streaming must start from. The snapshot is
        consistent with that offset: nothing committed after it is in the snapshot, nothing
        committed before it is missing."""


class StreamingSource(ABC):
    @abstractmethod
    def execute(self, ctx: SourceContext, offset: Mapping[str, Any] | None) -> None:
        """Tail the log from ``offset`` until ``ctx.stop_event`` is set."""

    def commit_offset(self, offset: Mapping[str, Any]) -> None:  # noqa: B027 - optional
        """Called with an offset after Kafka acknowledged it and every event before it, so the
        source may release its log (PostgreSQL flushes the slot's LSN)."""


class Connector(ABC):
    """One database kind. Instances are built per configured connector."""

    #: short name, e.g. "postgresql"; also the `source.connector` field ("": the worker
    #: names the connector by its plugin entry point)
    type_name: ClassVar[str] = ""
    #: Debezium class names accepted for ``connector.class``
    class_names: ClassVar[tuple[str, ...]] = ()
    #: every configuration key this connector reads (a ``cdc.config.ConfigDef``): the worker
    #: validates and documents the connector with it; None: only the core's own keys
    config_def: ClassVar[ConfigDefinition | None] = None
    #: schemas (PostgreSQL) or databases (MySQL) never captured whatever the include lists
    #: say; the core's table filter leaves them out
    system_schemas: frozenset[str] = frozenset()
    #: the parsed configuration, set by the connector's ``__init__`` (subclasses narrow the
    #: type); None: the worker parses the raw configuration with ``config_def``
    config: ConnectorConfig | None = None

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.raw_config = dict(config)

    @abstractmethod
    def source_partition(self) -> dict[str, Any]:
        """The key offsets are stored under, e.g. ``{"server": "dbserver1"}``."""

    @abstractmethod
    def snapshotter(self) -> Snapshotter: ...

    @abstractmethod
    def snapshot_source(self) -> SnapshotSource: ...

    @abstractmethod
    def streaming_source(self) -> StreamingSource: ...

    @abstractmethod
    def value_converters(self) -> ValueConverterProvider: ...

    @abstractmethod
    def source_schema(self) -> Any:
        """The Connect schema of this connector's ``source`` block."""

    def source_connector_name(self) -> str:
        """The ``source.connector`` value of this connector's events (``type_name`` unless a
        configuration says otherwise, e.g. MariaDB under the Debezium 3.x envelope)."""
        return self.type_name

    def source_derive(self) -> Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None:
        """Under ``envelope.version=3``: ``derive(source, offset)`` giving the Debezium 3.x
        source values this connector keeps in its offset rather than its 1.2 source block
        (PostgreSQL's ``sequence`` and microsecond ``ts_us``). None: nothing to derive."""
        return None

    @classmethod
    def validate_offset(
        cls, partition: dict[str, Any], offset: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, list[str]]:
        """Check an offset an operator wants to store (REST ``PATCH /offsets``): returns the
        offset to store (possibly completed) and the problems found. The default accepts any
        JSON object; connectors override it with their own format's rules."""
        return offset, []

    @classmethod
    def check_connection(cls, config: Mapping[str, Any]) -> ConnectionReport | None:
        """Connect with ``config`` (resolved, as the task would get it) and report what would
        stop the task: the worker calls it before a config sent over REST is stored, as Kafka
        Connect does through Debezium's ``validateConnection``. Runs on a thread the worker
        abandons after ``connection.validation.timeout.ms``, so it must only read. None: this
        connector has nothing to connect to before it runs."""
        return None

    @classmethod
    def from_debezium_offset(cls, offset: dict[str, Any] | None) -> Translated:
        """An offset Debezium's connector for the same database wrote (a shared offsets topic,
        Debezium Server's offset file), as this connector resumes from it; ``validate_offset``
        then checks the result. The default drops the keys only Debezium uses; connectors
        whose position means something else to Debezium override it."""
        return from_debezium(offset)

    @classmethod
    def to_debezium_offset(cls, offset: dict[str, Any] | None) -> Translated:
        """This connector's offset as Debezium's connector resumes from it (to hand a
        connector back to Debezium). The default refuses: only connectors that were run
        against Debezium's own say how."""
        return Translated(
            None, refused=f"no Debezium form of {cls.type_name} offsets is known to tidemark"
        )

    def heartbeat_action(self) -> Callable[[], None] | None:
        """Run by the core with each heartbeat (``heartbeat.interval.ms``), e.g. a write that
        keeps a quiet database's log moving; None: heartbeats only. A connector that runs its
        heartbeat query on its own connection (PostgreSQL) keeps None."""
        return None

    def reselector(self) -> Reselector | None:
        """A new :class:`~cdc.spi.reselect.Reselector` on its own connection, for the
        reselect post-processor (``post.processors``); None: this connector cannot reselect."""
        return None

    def chunk_reader(self) -> ChunkReader | None:
        """A new :class:`~cdc.spi.chunks.ChunkReader` on its own connection, for incremental
        snapshots by signal (``signal.data.collection``); None: this connector has none."""
        return None

    def close(self) -> None:  # noqa: B027 - optional
        """Release connections."""
