"""PostgreSQL source offsets: Debezium's keys plus tidemark's resume keys, validated before
an operator's offset edit (KIP-875 ``PATCH /offsets``) is stored.

:class:`WalPosition` is the typed form (the ``cdc.spi.Position`` of this connector); the
stored JSON keeps its keys and their order. The streaming loop builds its per-row offset
dicts inline with the same keys (a dataclass per row would cost the hot path), and a unit
test holds them equal to ``WalPosition.to_offset``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from cdc.offsets.core_keys import CORE_KEYS, core_key_problems
from cdc.spi.debezium_offsets import Translated
from cdc.spi.debezium_offsets import from_debezium as generic_from_debezium


@dataclass(frozen=True, slots=True)
class WalPosition:
    """A place in the WAL as streaming reports and resumes it: the event's own ``lsn``, its
    transaction's ``txId`` and commit time (Debezium's keys), the transaction's commit LSN and
    the event's 1-based ``seq`` inside it, whether the whole transaction was emitted
    (``complete``), and the LSN the slot may be confirmed to once this offset is stored
    (``flush_lsn``, the end of the last completed transaction)."""

    lsn: int
    tx_id: int | None = None
    ts_usec: int = 0
    lsn_commit: int = 0
    seq: int = 0
    complete: bool = True
    flush_lsn: int = 0

    def to_offset(self) -> dict[str, Any]:
        return {
            "lsn": self.lsn,
            "txId": self.tx_id,
            "ts_usec": self.ts_usec,
            "lsn_commit": self.lsn_commit,
            "seq": self.seq,
            "complete": self.complete,
            "flush_lsn": self.flush_lsn,
        }

    @classmethod
    def from_offset(cls, offset: Mapping[str, Any]) -> WalPosition:
        """A stored offset as streaming resumes it: keys it lacks (an offset of an older
        release, an operator's ``{"lsn": ...}`` before completion) read as nothing emitted
        yet of any transaction, from the slot's confirmed position."""
        try:
            tx = offset.get("txId")
            return cls(
                lsn=int(offset.get("lsn") or 0),
                tx_id=None if tx is None else int(tx),
                ts_usec=int(offset.get("ts_usec") or 0),
                lsn_commit=int(offset.get("lsn_commit") or 0),
                seq=int(offset.get("seq") or 0),
                complete=bool(offset.get("complete", True)),
                flush_lsn=int(offset.get("flush_lsn") or 0),
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"not a PostgreSQL connector offset: {dict(offset)!r} ({exc})"
            ) from exc

    @classmethod
    def after_snapshot(cls, offset: Mapping[str, Any]) -> WalPosition:
        """Where streaming starts after a snapshot consistent at ``offset["lsn"]`` (or an
        older release's snapshot row offset): transactions committed before it are in the
        snapshot; the one committing at it and every later one are streamed. A streaming
        offset is taken as it is."""
        lsn = int(offset.get("lsn") or 0)
        position = cls.from_offset({"flush_lsn": lsn, **offset})
        if "lsn_commit" in offset:
            return position
        return replace(position, lsn_commit=lsn, seq=0, complete=False)

    @classmethod
    def delivered_through(cls, lsn: int) -> WalPosition:
        """Everything up to and including ``lsn`` was delivered: streaming restarts right
        after it (an operator's ``{"lsn": ...}`` offset)."""
        return cls(lsn=lsn, lsn_commit=lsn, seq=0, complete=True, flush_lsn=lsn)


def nonneg_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def server_partition(partition: dict[str, Any]) -> list[str]:
    if set(partition) != {"server"} or not isinstance(partition.get("server"), str):
        return ['partition must be {"server": "<topic.prefix>"}']
    if not partition["server"]:
        return ["partition.server must not be empty"]
    return []


PG_INT_KEYS = (
    "lsn",
    "lsn_commit",
    "flush_lsn",
    "seq",
    "ts_usec",
    "lsn_proc",
    "xmin",
    "lsn_events_processed",
)
PG_BOOL_KEYS = ("complete",)
PG_OTHER_KEYS = ("txId", "transaction_id", "messageType")


def validate_offset(
    partition: dict[str, Any], offset: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, list[str]]:
    """PostgreSQL offsets: Debezium's keys plus tidemark's resume keys. An offset with only
    ``lsn`` means "everything up to and including this LSN was delivered": the resume keys
    are completed from it, so streaming restarts right after it."""
    problems = server_partition(partition)
    if offset is None:
        return None, problems
    if "lsn" not in offset:
        problems.append("offset.lsn is required (the LSN of the last delivered event)")
    for key in PG_INT_KEYS:
        if key in offset and not nonneg_int(offset[key]):
            problems.append(f"offset.{key} must be a non-negative integer, got {offset[key]!r}")
    for key in PG_BOOL_KEYS:
        if key in offset and not isinstance(offset[key], bool):
            problems.append(f"offset.{key} must be true or false, got {offset[key]!r}")
    tx = offset.get("txId")
    if tx is not None and not nonneg_int(tx):
        problems.append(f"offset.txId must be a non-negative integer or null, got {tx!r}")
    problems += core_key_problems(offset)
    origin = offset.get("snapshot_origin")
    if isinstance(origin, dict) and not nonneg_int(origin.get("lsn")):
        problems.append(
            "offset.snapshot_origin (where streaming resumes after an interrupted snapshot) "
            f"must be an object with a non-negative integer lsn, got {origin!r}"
        )
    known = {*PG_INT_KEYS, *PG_BOOL_KEYS, *PG_OTHER_KEYS, *CORE_KEYS}
    unknown = sorted(set(offset) - known)
    if unknown:
        problems.append(f"unknown offset key(s) {', '.join(unknown)}")
    if problems:
        return offset, problems
    full = dict(offset)
    if "flush_lsn" not in full and not full.get("snapshot"):
        done = WalPosition.delivered_through(full["lsn"])
        full.setdefault("lsn_commit", done.lsn_commit)
        full.setdefault("seq", done.seq)
        full.setdefault("complete", done.complete)
        full["flush_lsn"] = done.flush_lsn
    return full, []


#: keys of a snapshot row offset (or of the engine's snapshot marker) that a streaming offset
#: does not have
_SNAPSHOT_ONLY = ("snapshot", "snapshot_completed", "last_snapshot_record", "snapshot_origin")


_HANDOVER_COMPLETION = ("seq", "complete", "flush_lsn", "txId", "ts_usec")


def handover_offset(offset: dict[str, Any]) -> dict[str, Any]:
    """A position streaming can start from: a stored streaming offset as it is, or a snapshot
    position (an older release's snapshot row offset ``{"lsn", "snapshot": true, ...}``)
    completed the way the snapshot hands over: transactions committed before ``lsn`` are in
    the snapshot, the one committing at it and every later one are streamed."""
    full = {k: v for k, v in offset.items() if k not in _SNAPSHOT_ONLY}
    typed = WalPosition.after_snapshot(full).to_offset()
    if "lsn_commit" not in full:
        full.update(lsn_commit=typed["lsn_commit"], seq=0, complete=False)
    # Completed in the order earlier releases stored (the stored JSON stays byte-identical);
    # keys WalPosition does not model (Debezium's lsn_proc, xmin...) are kept.
    for key in _HANDOVER_COMPLETION:
        full.setdefault(key, typed[key])
    return full


_DEBEZIUM_CHANGES = ("INSERT", "UPDATE", "DELETE", "TRUNCATE")


def debezium_through(offset: Mapping[str, Any]) -> tuple[int, int] | None:
    """For an offset Debezium wrote at a change inside a transaction: (the change's LSN, how
    many changes at that LSN it delivered). Its ``lsn_commit`` is the end of the transaction
    before, so the first transaction streamed after it is the one Debezium was in, and its
    changes up to there were delivered. None for tidemark's own offsets (they have ``seq``)
    and for Debezium offsets at a commit, a BEGIN or a message."""
    if "seq" in offset and "messageType" not in offset:
        return None
    if offset.get("messageType") not in _DEBEZIUM_CHANGES or "lsn_commit" not in offset:
        return None
    try:
        lsn = int(offset["lsn"])
        count = int(offset.get("lsn_events_processed") or 0)
    except (KeyError, TypeError, ValueError):
        return None
    if int(offset["lsn_commit"] or 0) >= lsn:
        return None  # not Debezium's layout after all: never skip on a guess
    return lsn, max(1, count)


def from_debezium(offset: dict[str, Any] | None) -> Translated:
    """Debezium's PostgreSQL offset as streaming resumes from it.

    Debezium stores ``lsn`` (the last event's LSN), ``lsn_commit`` (the end of the last
    transaction it *finished*: it updates that key at each COMMIT) and ``lsn_proc``, and
    stores no offset at a commit itself, so its last offset usually lies inside its last
    transaction. Taken as it is (``validate_offset`` completes it), every transaction ending
    at or before ``lsn_commit`` is skipped and the next one, the one Debezium was in, is
    delivered whole again: duplicates of its delivered part, never a loss. After a finished
    snapshot streaming starts at the snapshot's LSN, as after tidemark's own."""
    translated = generic_from_debezium(offset)
    kept = translated.offset
    if kept is None:
        return translated
    if translated.after_snapshot:
        lsn = kept.get("lsn")
        base: dict[str, Any] = {k: kept[k] for k in ("txId", "ts_usec") if k in kept}
        translated.offset = handover_offset({**base, "lsn": lsn})
        translated.notes.append(f"Debezium's snapshot had finished: streaming starts at LSN {lsn}")
    elif debezium_through(kept) is not None:
        translated.notes.append(
            "Debezium's last offset is inside a transaction: streaming skips the changes of "
            "that transaction Debezium delivered and continues after them"
        )
    return translated


def to_debezium(offset: dict[str, Any] | None) -> Translated:
    """tidemark's PostgreSQL offset as Debezium resumes from it: the end of the last
    transaction tidemark completed (``flush_lsn``), written as a Debezium offset stored at
    that commit. Debezium then delivers the transaction tidemark was in again from its start."""
    if offset is None:
        return Translated(None)
    if offset.get("snapshot") or not offset.get("flush_lsn"):
        return Translated(
            None,
            refused="the offset is not a streaming position past a completed transaction "
            "(tidemark's snapshot has not handed over yet): let the connector stream a "
            "transaction, or a heartbeat, first",
        )
    end = int(offset["flush_lsn"])
    out: dict[str, Any] = {
        "lsn_proc": end,
        "messageType": "COMMIT",
        "lsn_commit": end,
        "lsn": end,
        "txId": offset.get("txId"),
        "ts_usec": int(offset.get("ts_usec") or 0),
    }
    notes = []
    if not offset.get("complete", True):
        notes.append("tidemark's last offset is inside a transaction: Debezium delivers it again")
    return Translated(out, notes)
