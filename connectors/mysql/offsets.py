"""Binlog offsets with Debezium's field names, and how two positions compare.

An offset is ``{file, pos, gtids, event, row, ts_sec, server_id}`` (plus ``snapshot: true``
while a snapshot runs). ``file``/``pos`` and ``gtids`` name the *start of the transaction* the
last emitted event belongs to, not the event itself: the binlog can only be re-read from
transaction boundaries (GTID positioning cannot start inside a transaction at all). ``event``
is the number of row events of that transaction already fully emitted and ``row`` the number
of rows of the next row event already emitted. A restart re-reads the transaction and skips
exactly those, so a crash in the middle of a large multi-row event neither loses nor repeats a
row. After a commit the offset moves to the next transaction: ``pos`` = end of the commit
event, ``gtids`` includes the committed transaction, ``event = row = 0``.

The same count is also written as ``row_events``, which only tidemark writes. Debezium's
``event`` counts *every* binlog event of the transaction (its BEGIN, table maps, row events,
and ANNOTATE_ROWS/ROWS_QUERY events when its session receives them), so the two numbers
differ for one position. An offset without ``row_events`` (written by Debezium into a shared
offsets topic, imported from Debezium Server, or by an earlier tidemark version) is
therefore resumed from the start of its transaction: what was delivered of that transaction
is delivered again, nothing is skipped on a count that may mean more than ours. The other way
round is safe as it is: Debezium reading our ``event`` skips fewer events than we emitted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from cdc.offsets.core_keys import CORE_KEYS, core_key_problems
from cdc.spi.debezium_offsets import Translated
from cdc.spi.debezium_offsets import from_debezium as generic_from_debezium
from connectors.mysql.errors import describe_position
from connectors.mysql.gtid import GtidError, parse_gtid_set

_FILE_INDEX = re.compile(r"\.(\d+)$")


def binlog_index(file: str | None) -> int:
    """``mysql-bin.000042`` → 42; files without a numeric suffix sort first."""
    if not file:
        return -1
    m = _FILE_INDEX.search(file)
    return int(m.group(1)) if m else -1


@dataclass(frozen=True)
class BinlogPosition:
    file: str
    pos: int
    gtids: str | None = None
    event: int = 0
    row: int = 0
    ts_sec: int = 0
    server_id: int = 0
    snapshot: bool = False
    #: tidemark's own count of row events (``event`` as tidemark wrote it); None for an offset
    #: Debezium (or an older release) wrote, whose ``event`` counts something else
    row_events: int | None = None

    def to_offset(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "file": self.file,
            "pos": self.pos,
            "event": self.event,
            "row": self.row,
            "ts_sec": self.ts_sec,
            "server_id": self.server_id,
        }
        if self.row_events is not None:
            out["row_events"] = self.row_events
        if self.gtids:
            out["gtids"] = self.gtids
        if self.snapshot:
            out["snapshot"] = True
        return out

    @classmethod
    def from_offset(cls, offset: Mapping[str, Any]) -> BinlogPosition:
        try:
            return cls(
                file=str(offset["file"]),
                pos=int(offset["pos"]),
                gtids=str(offset["gtids"]) if offset.get("gtids") else None,
                event=int(offset.get("event") or 0),
                row=int(offset.get("row") or 0),
                ts_sec=int(offset.get("ts_sec") or 0),
                server_id=int(offset.get("server_id") or 0),
                snapshot=bool(offset.get("snapshot")),
                row_events=None if offset.get("row_events") is None else int(offset["row_events"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a MySQL connector offset: {dict(offset)!r} ({exc})") from exc

    def with_(self, **changes: Any) -> BinlogPosition:
        return replace(self, **changes)

    def already_emitted(self) -> tuple[int, int]:
        """(row events, rows of the next one) of the offset's transaction to skip on resume:
        the stored counts when tidemark wrote them, else none (see the module docstring)."""
        if self.row_events is not None:
            return self.row_events, self.row
        return 0, 0

    def foreign_count(self) -> bool:
        """Whether ``event``/``row`` name a point inside a transaction in a count tidemark
        does not resume by (Debezium's)."""
        return self.row_events is None and bool(self.event or self.row)


def is_at_or_before(recorded: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Whether a schema history record written at ``recorded`` applies to a connector restarting
    at ``desired`` (Debezium's ``MySqlHistoryRecordComparator``).

    With GTIDs on both sides, GTID sets decide: binlog file names differ between servers of
    one cluster, GTIDs do not. A record whose set is contained in the desired set is before it;
    equal sets compare by (event, row). Otherwise (no GTIDs) the file index, position, event and
    row decide.
    """
    rec_gtids, want_gtids = recorded.get("gtids"), desired.get("gtids")
    if rec_gtids and want_gtids:
        try:
            rec_set = parse_gtid_set(str(rec_gtids))
            want_set = parse_gtid_set(str(want_gtids))
        except GtidError:
            pass
        else:
            if rec_set.mariadb == want_set.mariadb:
                if rec_set == want_set:
                    return _event_row(recorded) <= _event_row(desired)
                return rec_set.is_contained_within(want_set)
    rec_key = (binlog_index(recorded.get("file")), int(recorded.get("pos") or 0))
    want_key = (binlog_index(desired.get("file")), int(desired.get("pos") or 0))
    if rec_key != want_key:
        return rec_key < want_key
    return _event_row(recorded) <= _event_row(desired)


def _event_row(position: Mapping[str, Any]) -> tuple[int, int]:
    return int(position.get("event") or 0), int(position.get("row") or 0)


_INT_KEYS = ("pos", "event", "row", "ts_sec", "server_id", "row_events")


def validate_offset(
    partition: dict[str, Any], offset: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, list[str]]:
    """Check an offset an operator wants to store (``PATCH /offsets``). ``{file, pos}`` (plus
    ``gtids`` on GTID servers) means "resume at this transaction boundary"; the counters
    default to 0."""
    problems: list[str] = []
    if set(partition) != {"server"} or not isinstance(partition.get("server"), str):
        problems.append('partition must be {"server": "<database.server.name>"}')
    if offset is None:
        return None, problems
    if not isinstance(offset.get("file"), str) or not offset.get("file"):
        problems.append("offset.file is required (the binlog file name)")
    for key in _INT_KEYS:
        value = offset.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            problems.append(f"offset.{key} must be a non-negative integer, got {value!r}")
    if "pos" not in offset:
        problems.append("offset.pos is required (a transaction's start position)")
    gtids = offset.get("gtids")
    if gtids is not None:
        try:
            parse_gtid_set(str(gtids))
        except GtidError as exc:
            problems.append(f"offset.gtids: {exc}")
    problems += core_key_problems(offset)
    filters = ("database_whitelist", "database_blacklist", "table_whitelist", "table_blacklist")
    unknown = sorted(
        set(offset) - {*_INT_KEYS, *filters, "file", "gtids", "filters_recorded", *CORE_KEYS}
    )
    if unknown:
        problems.append(f"unknown offset key(s) {', '.join(unknown)}")
    if problems:
        return offset, problems
    full = {"event": 0, "row": 0, "ts_sec": 0, "server_id": 0, **offset}
    return full, []


def from_debezium(offset: dict[str, Any] | None) -> Translated:
    """Debezium's MySQL/MariaDB offset as streaming resumes from it: the same keys, but its
    ``event`` counts every binlog event of the transaction, so a point inside a transaction
    is resumed from the transaction's start (see the module docstring)."""
    translated = generic_from_debezium(offset)
    kept = translated.offset
    if kept is None:
        return translated
    if translated.after_snapshot:
        kept.pop("event", None)
        kept.pop("row", None)
        translated.notes.append(
            f"Debezium's snapshot had finished: streaming starts at {describe_position(kept)}"
        )
    elif kept.get("event") or kept.get("row"):
        translated.notes.append(
            f"Debezium's last offset is inside the transaction at {describe_position(kept)}: that "
            "transaction is delivered again from its start"
        )
    return translated


def to_debezium(offset: dict[str, Any] | None) -> Translated:
    """tidemark's offset as Debezium resumes from it: the start of the transaction it names,
    without tidemark's counts (Debezium's count of events differs), so Debezium delivers that
    transaction again from its start."""
    if offset is None:
        return Translated(None)
    if offset.get("snapshot"):
        return Translated(
            None,
            refused="tidemark's snapshot has not finished (the offset has snapshot: true): "
            "let it finish first",
        )
    keys = ("file", "pos", "gtids", "ts_sec", "server_id")
    out: dict[str, Any] = {k: offset[k] for k in keys if k in offset}
    notes = []
    if offset.get("event") or offset.get("row"):
        notes.append(
            "tidemark's last offset is inside the transaction at "
            f"{describe_position(out)}: Debezium delivers it again from its start"
        )
    return Translated(out, notes)
