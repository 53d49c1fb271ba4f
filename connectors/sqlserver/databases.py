"""Several databases in one task (``database.names``): where each one's stream is, in the
task's one offset.

One task captures every listed database, as Debezium 2.x does with ``tasks.max=1``. The core
stores one offset per task, so with several databases the offset is a composite one
(:mod:`cdc.offsets.composite`): ``{"positions": {"<database>": {commit_lsn, change_lsn,
event_serial_no}}}``, each record carrying every database's position as of its emission.
With exactly one database the offset stays Debezium's flat SQL Server offset, so offsets
stored before and offsets written with ``PATCH /offsets`` keep working.

When the list changes between runs:

- a flat offset and several databases: the flat offset is the position of the database
  captured so far, ``database.dbname`` if it is set and listed, else the first listed name;
- a composite offset and one database: that database's position (flat from then on);
- a listed database without a position (added): snapshotted while streaming starts (see
  :mod:`connectors.sqlserver.streaming`);
- a position of a database no longer listed: forgotten.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from cdc.config import Config
from cdc.offsets.composite import POSITIONS, CompositePosition, positions_of
from connectors.sqlserver.config import database_names
from connectors.sqlserver.offsets import SqlServerPosition

log = logging.getLogger("tidemark.sqlserver.databases")

FLAT_KEYS = ("commit_lsn", "change_lsn", "event_serial_no")


def flat(offset: Mapping[str, Any]) -> dict[str, Any]:
    """Only the position keys of a flat offset (not the core's snapshot flags)."""
    return {k: offset.get(k) for k in FLAT_KEYS}


def previous_owner(cfg: Config) -> str:
    """The database a flat offset belongs to once several are listed."""
    names = database_names(cfg)
    legacy = cfg["database.dbname"]
    if legacy:
        for name in names:
            if name.lower() == str(legacy).lower():
                return name
    return names[0]


def split_offset(cfg: Config, stored: Mapping[str, Any] | None) -> dict[str, SqlServerPosition]:
    """Each listed database's stored position (databases without one are absent)."""
    if not stored:
        return {}
    names = database_names(cfg)
    by_lower = {n.lower(): n for n in names}
    if POSITIONS not in stored:
        owner = names[0] if len(names) == 1 else previous_owner(cfg)
        if len(names) > 1:
            log.info("the stored offset is the position of database %s", owner)
        return {owner: SqlServerPosition.from_offset(stored)}
    out: dict[str, SqlServerPosition] = {}
    for db, position in positions_of(stored):
        name = by_lower.get(db.lower())
        if name is None:
            log.info("database %s is no longer in database.names: its position is forgotten", db)
            continue
        out[name] = SqlServerPosition.from_offset(position)
    return out


class DatabasePositions:
    """The position of each captured database and the offset of each record: the flat
    position itself with one database, the composite of all with several."""

    def __init__(self, cfg: Config, stored: Mapping[str, Any] | None) -> None:
        self.names = database_names(cfg)
        self.multi = len(self.names) > 1
        self._found = split_offset(cfg, stored)
        self._single: dict[str, Any] = {}
        self._composite = CompositePosition(
            {POSITIONS: {db: p.to_offset() for db, p in self._found.items()}}
        )
        if not self.multi and self._found:
            self._single = self._found[self.names[0]].to_offset()

    def get(self, db: str) -> SqlServerPosition | None:
        """Where ``db`` resumes; None: it has no position (first start, or added since)."""
        return self._found.get(db)

    def advance(self, db: str, position: dict[str, Any]) -> dict[str, Any]:
        """The offset of a record of ``db`` at ``position`` (a flat SQL Server offset)."""
        if not self.multi:
            self._single = position
            return position
        return self._composite.advance(db, position)

    def set(self, db: str, pos: SqlServerPosition) -> dict[str, Any]:
        self._found[db] = pos
        return self.advance(db, pos.to_offset())

    def offset(self) -> dict[str, Any]:
        """The offset as of now (every database's last position)."""
        return dict(self._single) if not self.multi else self._composite.offset()


def offset_of(cfg: Config, positions: Mapping[str, SqlServerPosition]) -> dict[str, Any]:
    """The task offset holding ``positions`` (flat with one database)."""
    names = database_names(cfg)
    if len(names) == 1:
        return positions[names[0]].to_offset()
    return {POSITIONS: {db: positions[db].to_offset() for db in names if db in positions}}
