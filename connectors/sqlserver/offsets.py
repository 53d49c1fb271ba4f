"""SQL Server log positions: the ``binary(10)`` LSN and the offset stored with each event.

An LSN is a 4-byte virtual log file number, a 4-byte log block offset and a 2-byte slot,
compared as unsigned big-endian bytes; its text form is Debezium's
``00000027:00000758:0003``. The stored offset is Debezium's ``sourceOffset`` for SQL Server:
``commit_lsn``, ``change_lsn`` and ``event_serial_no`` of the last event emitted (plus the
snapshot flags the core adds). ``change_lsn`` null means every change of ``commit_lsn`` and
before is done, which is what a snapshot, a transaction's end and an idle poll store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import total_ordering
from typing import Any, Self

from cdc.offsets.core_keys import CORE_KEYS, core_key_problems

LSN_BYTES = 10


@total_ordering
@dataclass(frozen=True, slots=True)
class Lsn:
    """One log sequence number; ``Lsn(b"\\0" * 10)`` is SQL Server's "no LSN"."""

    raw: bytes

    def __post_init__(self) -> None:
        if len(self.raw) != LSN_BYTES:
            raise ValueError(f"an LSN has {LSN_BYTES} bytes, got {len(self.raw)}")

    @classmethod
    def parse(cls, text: str) -> Lsn:
        """``00000027:00000758:0003`` (or the 20 hex digits without colons)."""
        parts = text.split(":")
        try:
            if len(parts) == 3 and [len(p) for p in parts] == [8, 8, 4]:
                return cls(bytes.fromhex("".join(parts)))
            if len(parts) == 1 and len(text) == 2 * LSN_BYTES:
                return cls(bytes.fromhex(text))
        except ValueError:
            pass
        raise ValueError(
            f"not an LSN: {text!r} (expected 8:8:4 hex digits, e.g. 00000027:00000758:0003)"
        )

    @classmethod
    def of(cls, value: bytes | bytearray | memoryview | None) -> Lsn | None:
        """A driver value (``binary(10)``) as an LSN; NULL and all zeros are no LSN."""
        if value is None:
            return None
        raw = bytes(value)
        if not any(raw):
            return None
        return cls(raw)

    def increment(self) -> Lsn:
        """``sys.fn_cdc_increment_lsn``: the next LSN (the smallest one greater than this)."""
        return Lsn((int.from_bytes(self.raw, "big") + 1).to_bytes(LSN_BYTES, "big"))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Lsn):
            return NotImplemented
        return self.raw < other.raw

    def __str__(self) -> str:
        h = self.raw.hex()
        return f"{h[:8]}:{h[8:16]}:{h[16:]}"


@dataclass(frozen=True, slots=True)
class SqlServerPosition:
    """Where the stream is: the last event's commit LSN, change LSN and serial number, or (no
    change LSN) a commit LSN up to which everything is done."""

    commit_lsn: Lsn | None
    change_lsn: Lsn | None = None
    event_serial_no: int | None = None

    @property
    def completed(self) -> bool:
        """Every change of ``commit_lsn`` (and before) is done."""
        return self.change_lsn is None

    def from_lsn(self) -> Lsn | None:
        """The first commit LSN the next window must read (None: from the instance's start)."""
        if self.commit_lsn is None:
            return None
        return self.commit_lsn.increment() if self.completed else self.commit_lsn

    def already_emitted(self, commit: Lsn, change: Lsn, serial: int) -> bool:
        """True for a change at or before this position (skipped when resuming mid-commit)."""
        if self.commit_lsn is None:
            return False
        if commit != self.commit_lsn:
            return commit < self.commit_lsn
        if self.change_lsn is None:
            return True
        return (change, serial) <= (self.change_lsn, self.event_serial_no or 0)

    def to_offset(self) -> dict[str, Any]:
        return {
            "commit_lsn": str(self.commit_lsn) if self.commit_lsn else None,
            "change_lsn": str(self.change_lsn) if self.change_lsn else None,
            "event_serial_no": self.event_serial_no,
        }

    @classmethod
    def from_offset(cls, offset: Mapping[str, Any]) -> Self:
        def lsn(key: str) -> Lsn | None:
            value = offset.get(key)
            if value is None:
                return None
            if not isinstance(value, str):
                raise ValueError(f"offset.{key} must be an LSN string, got {value!r}")
            return Lsn.parse(value)

        serial = offset.get("event_serial_no")
        if serial is not None and (not isinstance(serial, int) or isinstance(serial, bool)):
            raise ValueError(f"offset.event_serial_no must be an integer, got {serial!r}")
        commit, change = lsn("commit_lsn"), lsn("change_lsn")
        if change is not None and commit is None:
            raise ValueError("offset.change_lsn needs offset.commit_lsn")
        return cls(commit, change, serial if change is not None else None)


FLAT_KEYS = frozenset({"commit_lsn", "change_lsn", "event_serial_no"})
OFFSET_KEYS = frozenset(
    {
        "commit_lsn",
        "change_lsn",
        "event_serial_no",
        "snapshot",
        "snapshot_completed",
        "snapshot_origin",
    }
)


#: the key of a connector capturing several databases' offset (cdc.offsets.composite.POSITIONS)
POSITIONS = "positions"
#: beside it, while a database added to ``database.names`` is snapshotted: that database's
#: snapshot origin, where its streaming starts (connectors.sqlserver.databases)
ORIGINS = "snapshot_origins"


def _position_problems(offset: Mapping[str, Any], allowed: frozenset[str], at: str) -> list[str]:
    problems = []
    try:
        SqlServerPosition.from_offset(offset)
    except ValueError as exc:
        problems.append(f"{at}{exc}")
    unknown = sorted(set(offset) - allowed)
    if unknown:
        problems.append(f"unknown offset key(s) {at}{', '.join(unknown)}")
    return problems


def validate_offset(
    partition: dict[str, Any], offset: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, list[str]]:
    """REST ``PATCH /offsets``: ``{"server": ...}`` and a SQL Server offset: Debezium's flat
    one (one database), or ``{"positions": {"<database>": <flat offset>}}`` (several), with
    ``"snapshot_origins": {"<database>": <flat offset>}`` while an added database's snapshot
    is under way."""
    problems = [] if "server" in partition else ['partition must be {"server": ...}']
    if offset is None:
        return None, problems
    if POSITIONS not in offset:
        return offset, [
            *problems,
            *_position_problems(offset, OFFSET_KEYS | CORE_KEYS, ""),
            *core_key_problems(offset),
        ]
    positions = offset[POSITIONS]
    if not isinstance(positions, Mapping) or not positions:
        problems.append(f"offset.{POSITIONS} must map each database to its position")
        return offset, problems
    for db, position in positions.items():
        if not isinstance(position, Mapping):
            problems.append(f"offset.{POSITIONS}.{db} must be an object, got {position!r}")
            continue
        problems += _position_problems(position, FLAT_KEYS, f"{POSITIONS}.{db}: ")
    origins = offset.get(ORIGINS, {})
    if not isinstance(origins, Mapping):
        problems.append(f"offset.{ORIGINS} must map each database to its snapshot origin")
        origins = {}
    for db, origin in origins.items():
        if not isinstance(origin, Mapping):
            problems.append(f"offset.{ORIGINS}.{db} must be an object, got {origin!r}")
            continue
        problems += _position_problems(origin, FLAT_KEYS, f"{ORIGINS}.{db}: ")
    problems += core_key_problems(offset)
    unknown = sorted(set(offset) - CORE_KEYS - {POSITIONS, ORIGINS})
    if unknown:
        problems.append(f"unknown offset key(s) {', '.join(unknown)}")
    return offset, problems
