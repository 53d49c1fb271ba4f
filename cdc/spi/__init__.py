"""The few interfaces a connector implements. Depends only on the standard library."""

from cdc.spi.chunks import ChunkReader
from cdc.spi.contract import (
    ConfigDefinition,
    ConnectorConfig,
    Position,
    SourceMetrics,
    StreamingGauges,
)
from cdc.spi.events import (
    UNAVAILABLE,
    LogicalMessage,
    Operation,
    PositionReached,
    RowChange,
    SchemaChange,
    SourceEvent,
    TableId,
    TableTruncated,
    TransactionBegin,
    TransactionEnd,
)
from cdc.spi.relational import Column, Table, ValueConverter, ValueConverterProvider, key_columns
from cdc.spi.reselect import Reselector
from cdc.spi.source import (
    Connector,
    SnapshotSource,
    Snapshotter,
    SourceContext,
    StreamingSource,
)

__all__ = [
    "UNAVAILABLE",
    "ChunkReader",
    "Column",
    "ConfigDefinition",
    "Connector",
    "ConnectorConfig",
    "LogicalMessage",
    "Operation",
    "Position",
    "PositionReached",
    "Reselector",
    "RowChange",
    "SchemaChange",
    "SnapshotSource",
    "Snapshotter",
    "SourceContext",
    "SourceEvent",
    "SourceMetrics",
    "StreamingGauges",
    "StreamingSource",
    "Table",
    "TableId",
    "TableTruncated",
    "TransactionBegin",
    "TransactionEnd",
    "ValueConverter",
    "ValueConverterProvider",
    "key_columns",
]
