"""``snapshot.new.tables=parallel``: tables added to the filters of a running connector.

Debezium 1.2 keeps the filters in the offsets (``database_whitelist``, ``table_whitelist``,
...) to notice, on restart, tables the new filters capture and the old ones did not. Those
tables get their own consistent snapshot at a new position P2 (snapshot.py ``new_tables``);
streaming then continues from the stored offset for every table, dropping the new tables'
changes up to P2 because the snapshot already contains them. Until P2 is passed the offsets
keep the *old* filters, so a crash in between repeats the new tables' snapshot instead of
losing it; after P2 they carry the current filters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdc.config import Config, split_list
from cdc.filters import TableFilter
from cdc.spi import TableId
from connectors.mysql.gtid import GtidSet, parse_gtid_set
from connectors.mysql.offsets import BinlogPosition, binlog_index

FILTER_KEYS = {
    "database_whitelist": "database.include.list",
    "database_blacklist": "database.exclude.list",
    "table_whitelist": "table.include.list",
    "table_blacklist": "table.exclude.list",
}


def filter_offset_keys(cfg: Config) -> dict[str, str]:
    """The current filters, as stored in offsets (only non-empty lists)."""
    out = {"filters_recorded": "true"}
    for key, prop in FILTER_KEYS.items():
        values = cfg.get(prop, [])
        if values:
            out[key] = ",".join(values)
    return out


def stored_filter(offset: Mapping[str, Any], system: frozenset[str]) -> TableFilter | None:
    """The filters an offset was written under; None for offsets that do not record them."""
    if not any(k in offset for k in (*FILTER_KEYS, "filters_recorded")):
        return None
    return TableFilter(
        database_include=split_list(offset.get("database_whitelist")),
        database_exclude=split_list(offset.get("database_blacklist")),
        table_include=split_list(offset.get("table_whitelist")),
        table_exclude=split_list(offset.get("table_blacklist")),
        system=system,
    )


class NewTablesGate:
    """Drops the new tables' row events up to P2 and tells when P2 is passed."""

    def __init__(self, tables: set[TableId], p2: BinlogPosition, mariadb: bool) -> None:
        self.tables = tables
        self.p2 = p2
        self.p2_gtids: GtidSet | None = (
            parse_gtid_set(p2.gtids, mariadb=mariadb) if p2.gtids else None
        )

    def _before_p2(self, gtid: str | None, file: str, pos: int) -> bool:
        if gtid is not None and self.p2_gtids is not None:
            try:
                return self.p2_gtids.contains(gtid)
            except ValueError:
                pass
        return (binlog_index(file), pos) < (binlog_index(self.p2.file), self.p2.pos)

    def skip(self, table_id: TableId, gtid: str | None, file: str, txn_start: int) -> bool:
        return table_id in self.tables and self._before_p2(gtid, file, txn_start)

    def passed(self, gtids: GtidSet | None, file: str, next_pos: int) -> bool:
        """After a commit: is everything up to P2 now behind the stream?"""
        if gtids is not None and self.p2_gtids is not None:
            try:
                return self.p2_gtids.is_contained_within(gtids)
            except ValueError:
                pass
        return (binlog_index(file), next_pos) >= (binlog_index(self.p2.file), self.p2.pos)
