"""What a connector supplies so the core can run incremental snapshots (DBLog watermarks).

The core owns the algorithm (``cdc.snapshot.incremental``): which table, which chunk, the
window, the de-duplication against streamed events, the offsets. A connector only answers
small questions about its database on a connection of its own (never the replication
session): the largest key of a table, the next rows in key order, and how to write a
watermark row into the signal table so that it appears in the log between the chunk's reads.
A connector that can place a read in its log without writing (:class:`ReadOnlyChunkReader`)
also serves ``read.only=true``.

Keys are tuples of the values the connector's own rows carry for the key columns (the same
representation its snapshot rows have), in the order of ``key_columns``; the core stores them
in the offset and hands them back after a restart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from cdc.spi.events import TableId
from cdc.spi.relational import Table

Key = tuple[Any, ...]


class ChunkReader(Protocol):
    def tables(self) -> list[TableId]:
        """Every table of the source the connector could capture (the core matches the
        ``data-collections`` regular expressions of a signal against them)."""
        ...

    def describe(self, table_id: TableId) -> Table | None:
        """The structure of a table the core has not seen registered yet, as streaming would
        register it; None when the connector learns tables only from its log (MySQL)."""
        ...

    def max_key(
        self, table: Table, key_columns: Sequence[str], condition: str | None
    ) -> Key | None:
        """The largest key of ``table`` (rows matching ``condition``, an SQL predicate, if
        given): the end of the snapshot. None: no rows."""
        ...

    def read_chunk(
        self,
        table: Table,
        key_columns: Sequence[str],
        after: Key | None,
        upto: Key,
        limit: int,
        condition: str | None,
    ) -> list[Sequence[Any]]:
        """At most ``limit`` rows with ``after < key <= upto`` (no lower bound when ``after``
        is None) in key order, each in the table's column order, in one statement that reads
        committed data as of its start (autocommit)."""
        ...

    def estimate_rows(self, table: Table) -> int | None:
        """About how many rows the table has (catalog statistics), for progress and ETA;
        None: unknown."""
        ...

    def write_watermark(self, signal_table: TableId, signal_id: str, kind: str) -> None:
        """Insert and commit ``(id, type, data)`` = ``(signal_id, kind, NULL-or-empty)`` into the
        signal table, so the streamed log carries it at this point."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


class ReadWindow(Protocol):
    """Where one chunk's read stands in the stream, for read-only watermarks
    (``read.only=true``): nothing is written to the database, the stream's own positions
    (PostgreSQL transaction ids and WAL positions, MySQL/MariaDB GTIDs) say which events are
    older than the read, which are newer (they de-duplicate the chunk), and when every
    transaction the read could have seen has been streamed (the window closes)."""

    def older(
        self, source: Mapping[str, Any], offset: Mapping[str, Any], transaction_id: str | None
    ) -> bool | None:
        """The event's transaction was visible to the read: its changes are in the rows read,
        so it must not remove a key from the chunk. None: the event names no transaction
        (it then counts as newer)."""
        ...

    def passed(
        self, source: Mapping[str, Any], offset: Mapping[str, Any], transaction_id: str | None
    ) -> bool:
        """The stream, at this event, has passed everything committed until the read ended
        (the high watermark): the window may close after it."""
        ...


class ReadOnlyChunkReader(ChunkReader, Protocol):
    """A :class:`ChunkReader` that can read chunks without writing watermark rows."""

    def begin_chunk_read(self) -> None:
        """Open the consistent read the next :meth:`read_chunk` runs in, and note where it
        stands (the low watermark: which transactions it sees)."""
        ...

    def end_chunk_read(self) -> ReadWindow:
        """End that read and note the high watermark (what has committed by now)."""
        ...


class ParallelChunkReader(ChunkReader, Protocol):
    """A :class:`ChunkReader` whose chunks of one table several readers may read at once
    (``snapshot.max.threads`` > 1, watermark rows): the core first asks where each chunk
    ends (:meth:`chunk_end`, a keys-only query), then hands the ranges to readers of their
    own (:meth:`fork`)."""

    #: ``snapshot.max.threads``: how many chunks may be read at once
    max_threads: int

    def fork(self) -> ParallelChunkReader:
        """Another reader of the same source, on a connection of its own (used by one
        reader thread)."""
        ...

    def chunk_end(
        self,
        table: Table,
        key_columns: Sequence[str],
        after: Key | None,
        upto: Key,
        size: int,
        condition: str | None,
    ) -> Key | None:
        """The key of the ``size``-th row with ``after < key <= upto`` in key order (keys
        only, no rows read); None when fewer rows are left."""
        ...
