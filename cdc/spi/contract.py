"""The typed pieces of the connector contract that are not events: what a connector may set
on the core's metrics, what the core reads of a connector's configuration, and what a
position in a source's log must offer.

Protocols, so that ``cdc.spi`` keeps depending on the standard library only: the core's
``TaskMetrics`` (``cdc.metrics``) and ``ConfigDef``/``Config`` (``cdc.config``) satisfy them
as they are, and a connector types against these names instead of reaching for members the
contract does not declare.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, Self


class StreamingGauges(Protocol):
    """The streaming-phase values a connector keeps current (Debezium's streaming metrics);
    the core counts the events and transactions that reach it itself."""

    #: a replication connection is open (``Connected``)
    connected: bool
    #: log events read but not emitted (filtered tables, skipped operations)
    events_filtered: int
    #: wall-clock ms of the last event read (``MilliSecondsSinceLastEvent``)
    last_event_ms: int
    #: transactions committed that the source reports no END event for
    committed_transactions: int
    #: age of the last event read, in ms (``MilliSecondsBehindSource``); -1: unknown
    ms_behind_source: int
    #: where in the log the last event was read (``SourceEventPosition``)
    source_event_position: dict[str, str]


class SourceMetrics(Protocol):
    """What a connector may touch of its task's metrics. Plain attributes: the hot path sets
    them directly; Prometheus values are computed when scraped."""

    @property
    def streaming(self) -> StreamingGauges: ...

    #: the connector's own gauges by Debezium attribute name, read when scraped
    extra: dict[str, Callable[[], float]]
    #: text-valued attributes (MySQL's ``BinlogFilename``), exported as ``value="..."``
    extra_text: dict[str, Callable[[], str]]
    #: the ``context`` label of an extra attribute when not ``streaming_context``
    extra_contexts: dict[str, str]
    #: the streaming phase's ``context`` label (MySQL says ``binlog``)
    streaming_context: str
    #: warnings the operator must see in the task's status (``/connectors/{name}/status``
    #: ``trace``), not only in the log: e.g. an include list that captures nothing
    notices: list[str]


class ConnectorConfig(Protocol):
    """A parsed configuration: typed values by canonical key (``cdc.config.Config``)."""

    def __getitem__(self, name: str) -> Any: ...

    def get(self, name: str, default: Any = None) -> Any: ...


class ConfigDefinition(Protocol):
    """A connector's declared configuration keys (``cdc.config.ConfigDef``): the worker
    validates against it, lists it in ``/connector-plugins`` and parses with it."""

    def parse(self, raw: Mapping[str, Any]) -> ConnectorConfig: ...


class Position(Protocol):
    """A place in a source's log, typed inside the connector and a JSON map only at the edge
    (``BinlogPosition`` for MySQL/MariaDB, ``WalPosition`` for PostgreSQL).

    ``from_offset(p.to_offset()) == p``, and ``to_offset`` of a position loaded from a
    stored offset written by this release gives that offset back key for key, in order: the
    stored form is Debezium's ``sourceOffset`` for the database plus tidemark's resume keys,
    and operators read and edit it through ``/connectors/{name}/offsets``."""

    def to_offset(self) -> dict[str, Any]: ...

    @classmethod
    def from_offset(cls, offset: Mapping[str, Any]) -> Self:
        """Load a stored offset; ``ValueError`` naming what is wrong if it is not one."""
        ...
