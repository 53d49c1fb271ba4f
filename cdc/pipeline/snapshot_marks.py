"""Debezium 3.x's snapshot markers: which snapshot record is the first or last of the
snapshot, and of its table (``source.snapshot`` = ``first``, ``first_in_data_collection``,
``last_in_data_collection``, ``last``, else ``true``).

Debezium knows a row is the last of its table by reading one row ahead, and that a record is
the last of the whole snapshot by holding the latest record back until the next one comes
(so a snapshot that ends with empty tables still ends with ``last``). Here the connector
reports rows one at a time, so each table's latest row is held until the table's next row or
its completion decides its marker, and the latest decided record is held until the next one
is decided or the snapshot ends. The first table is the first of the list the snapshot
announced, as in Debezium, where an empty first table means no ``first`` record.
Rows of several tables may interleave (parallel readers): each table is held on its own.
"""

from __future__ import annotations

from cdc.record import SourceRecord
from cdc.spi import TableId


def marker(first_in_snapshot: bool, last_in_snapshot: bool, first: bool, last: bool) -> str:
    """Debezium's precedence: last of the snapshot, first of it, last of the table, first of
    the table, else ``true``."""
    if last_in_snapshot:
        return "last"
    if first_in_snapshot:
        return "first"
    if last:
        return "last_in_data_collection"
    if first:
        return "first_in_data_collection"
    return "true"


def _mark(record: SourceRecord, value: str) -> None:
    """Set a record's marker. The rows of a snapshot batch share one source block (shaped
    once by the driver), so a record whose marker differs gets its own copy of the block
    instead of a change to the shared one."""
    source = record.value["source"]
    if source.get("snapshot") != value:
        record.value["source"] = {**source, "snapshot": value}


class SnapshotMarks:
    def __init__(self, tables: list[TableId]) -> None:
        self.first_table = tables[0] if tables else None
        #: per table: its latest row's record and whether it is the table's first row
        self.held: dict[TableId, tuple[SourceRecord, bool]] = {}
        #: the latest record whose marker is decided (the last one of the snapshot, maybe)
        self.pending: SourceRecord | None = None

    def holding(self) -> bool:
        """Some snapshot row is held back, not yet in the queue."""
        return bool(self.held) or self.pending is not None

    def push(self, table_id: TableId, record: SourceRecord) -> list[SourceRecord]:
        """A new snapshot row of ``table_id``; returns the records that may go now."""
        out: list[SourceRecord] = []
        previous = self.held.get(table_id)
        if previous is not None:
            self._decide(table_id, previous, False, out)
        self.held[table_id] = (record, previous is None)
        return out

    def push_many(self, table_id: TableId, records: list[SourceRecord]) -> list[SourceRecord]:
        """``push`` of each record in order (a snapshot batch of one table). Only the batch's
        first record can be its table's first and only its last is held, so the records
        between them are decided at once, as ``true``: the same records and markers as one
        ``push`` per record, without a call per row."""
        if not records:
            return []
        out = self.push(table_id, records[0])
        if len(records) == 1:
            return out
        self._decide(table_id, self.held[table_id], False, out)
        middle = records[1:-1]
        if middle:
            shared = None  # a block already checked: the rows of a batch share one
            for record in middle:
                source = record.value["source"]
                if source is not shared:
                    _mark(record, "true")
                    if record.value["source"] is source:
                        shared = source
            out.append(self.pending)  # type: ignore[arg-type]
            out += middle[:-1]
            self.pending = middle[-1]
        self.held[table_id] = (records[-1], False)
        return out

    def table_completed(self, table_id: TableId) -> list[SourceRecord]:
        out: list[SourceRecord] = []
        entry = self.held.pop(table_id, None)
        if entry is not None:
            self._decide(table_id, entry, True, out)
        return out

    def finish(self) -> list[SourceRecord]:
        """The snapshot is over: every record still held goes, the very last as ``last``."""
        out: list[SourceRecord] = []
        for table_id in list(self.held):
            out += self.table_completed(table_id)
        if self.pending is not None:
            _mark(self.pending, "last")
            out.append(self.pending)
            self.pending = None
        return out

    def _decide(
        self,
        table_id: TableId,
        entry: tuple[SourceRecord, bool],
        last: bool,
        out: list[SourceRecord],
    ) -> None:
        record, first = entry
        # "last" of the snapshot is only known at its end (``finish``): a later table may
        # still have rows, or all later tables may be empty.
        _mark(record, marker(first and table_id == self.first_table, False, first, last))
        if self.pending is not None:
            out.append(self.pending)
        self.pending = record
