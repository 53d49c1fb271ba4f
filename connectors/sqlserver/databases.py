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
- while an added database is snapshotted, every record's offset also holds where its
  streaming must start if that snapshot is interrupted and redone (its *origin*: the
  position the first attempt started from, see :class:`DatabasePositions`);
- a position of a database no longer listed: forgotten.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from cdc.config import Config
from cdc.errors import OffsetError
from cdc.offsets.composite import POSITIONS, CompositePosition, positions_of
from connectors.sqlserver.config import database_names
from connectors.sqlserver.offsets import ORIGINS, SqlServerPosition

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


def _listed(cfg: Config, db: str) -> str | None:
    """``db`` as ``database.names`` spells it, None when it is not listed."""
    return {n.lower(): n for n in database_names(cfg)}.get(db.lower())


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


def split_origins(cfg: Config, stored: Mapping[str, Any] | None) -> dict[str, SqlServerPosition]:
    """The snapshot origin of each listed database whose snapshot (as a database added to
    ``database.names``) was under way when ``stored`` was emitted: the position its streaming
    must start from once a redone snapshot completes. A database that has a position has
    no origin (its snapshot completed); a malformed entry is named."""
    if not stored or not isinstance(stored.get(ORIGINS), Mapping):
        if stored and ORIGINS in stored:
            raise OffsetError(f"offset {ORIGINS!r} is not an object: {stored[ORIGINS]!r}")
        return {}
    has_position = set(split_offset(cfg, stored)) if POSITIONS in stored else set()
    out: dict[str, SqlServerPosition] = {}
    for db, origin in stored[ORIGINS].items():
        if not isinstance(origin, Mapping):
            raise OffsetError(f"offset snapshot origin of {db!r} is not an object: {origin!r}")
        name = _listed(cfg, str(db))
        if name is None or name in has_position:
            continue
        out[name] = SqlServerPosition.from_offset(origin)
    return out


class DatabasePositions:
    """The position of each captured database and the offset of each record: the flat
    position itself with one database, the composite of all with several.

    A database added to ``database.names`` is snapshotted while the others stream. Before
    its first row, its snapshot records its origin (:meth:`start_snapshot`): where its
    streaming starts once the snapshot completes, the position the *first* attempt started
    from. Every record's offset carries it until the snapshot completes (:meth:`set`), with
    several databases as ``{"positions": {...}, "snapshot_origins": {"<database>": <flat
    position>}}``, with one as the core's interrupted-snapshot offset ``{"snapshot": true,
    "snapshot_origin": <flat position>}``. A kill during the snapshot then leaves it stored,
    and the next attempt hands over from it: the changes made in between (the deletes of
    rows the first attempt emitted) are replayed."""

    def __init__(self, cfg: Config, stored: Mapping[str, Any] | None) -> None:
        self.names = database_names(cfg)
        self.multi = len(self.names) > 1
        self._found = split_offset(cfg, stored)
        self._origins = split_origins(cfg, stored)
        #: the offsets' ``snapshot_origins`` object (never mutated: rebuilt on change)
        self._origin_field: dict[str, Any] | None = None
        self._single: dict[str, Any] = {}
        self._composite = CompositePosition(
            {POSITIONS: {db: p.to_offset() for db, p in self._found.items()}}
        )
        if not self.multi and self._found:
            self._single = self._found[self.names[0]].to_offset()
        self._origins_changed()

    def get(self, db: str) -> SqlServerPosition | None:
        """Where ``db`` resumes; None: it has no position (first start, or added since)."""
        return self._found.get(db)

    def origin(self, db: str) -> SqlServerPosition | None:
        """Where an earlier, interrupted snapshot of the added database ``db`` started from
        (None: no attempt was under way)."""
        return self._origins.get(db)

    def advance(self, db: str, position: dict[str, Any]) -> dict[str, Any]:
        """The offset of a record of ``db`` at ``position`` (a flat SQL Server offset)."""
        if not self.multi:
            self._single = position
            return position
        offset = self._composite.advance(db, position)
        field = self._origin_field
        return offset if field is None else {**offset, ORIGINS: field}

    def start_snapshot(self, db: str, origin: SqlServerPosition) -> dict[str, Any]:
        """The added database ``db`` is about to emit snapshot rows: every offset from now on
        names ``origin`` as where its streaming starts; returns the offset to store before
        the first row."""
        self._origins[db] = origin
        self._origins_changed()
        return self.offset()

    def set(self, db: str, pos: SqlServerPosition) -> dict[str, Any]:
        """``db`` streams from ``pos`` on (its snapshot, if any, is complete: no origin)."""
        self._found[db] = pos
        if self._origins.pop(db, None) is not None:
            self._origins_changed()
        return self.advance(db, pos.to_offset())

    def offset(self) -> dict[str, Any]:
        """The offset as of now (every database's last position)."""
        if self.multi:
            offset = self._composite.offset()
            field = self._origin_field
            return offset if field is None else {**offset, ORIGINS: field}
        origin = self._origins.get(self.names[0])
        if origin is not None:
            # the only database, snapshotted with none of its position stored: an
            # interrupted snapshot in the core's form, so the next start snapshots it again
            # and streams from its origin (cdc.pipeline.coordinator.resume_origin)
            return {"snapshot": True, "snapshot_origin": origin.to_offset()}
        return dict(self._single)

    def _origins_changed(self) -> None:
        origins = {db: p.to_offset() for db, p in sorted(self._origins.items())}
        self._origin_field = origins or None


def offset_of(cfg: Config, positions: Mapping[str, SqlServerPosition]) -> dict[str, Any]:
    """The task offset holding ``positions`` (flat with one database)."""
    names = database_names(cfg)
    if len(names) == 1:
        return positions[names[0]].to_offset()
    return {POSITIONS: {db: positions[db].to_offset() for db in names if db in positions}}
