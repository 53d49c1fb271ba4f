"""What a connector supplies so the core can re-read columns a log event lacks.

Debezium's ``ReselectColumnsPostProcessor`` re-queries the source table for columns whose
value an event could not carry (PostgreSQL's unchanged TOASTed values, MySQL/MariaDB row
images written with ``binlog_row_image=MINIMAL`` or ``NOBLOB``) and, when asked, for NULLs.
The core decides which rows and columns need it and batches them; the connector only runs
the query, on a connection of its own (never the replication session), and returns the
values in the form its own events carry, so the table's converters treat them alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from cdc.spi.relational import Table

Key = tuple[Any, ...]


class Reselector(Protocol):
    def fetch(
        self,
        table: Table,
        key_columns: Sequence[str],
        keys: Sequence[Key],
        columns: Sequence[str],
    ) -> dict[Key, tuple[Any, ...]]:
        """The current values of ``columns`` of the rows whose ``key_columns`` equal one of
        ``keys`` (as the connector's events give key values), in one round trip where the
        database allows. Keyed by the key tuples as given; a row that no longer exists is
        absent. Raises on a database error (the core applies the failure handling mode)."""
        ...

    def close(self) -> None:
        """Release the connection (called once, when the task stops)."""
        ...
