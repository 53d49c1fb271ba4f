"""PostgreSQL source offsets: Debezium's keys plus tidemark's resume keys, validated before
an operator's offset edit (KIP-875 ``PATCH /offsets``) is stored."""

from __future__ import annotations

from typing import Any


def nonneg_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def server_partition(partition: dict[str, Any]) -> list[str]:
    if set(partition) != {"server"} or not isinstance(partition.get("server"), str):
        return ['partition must be {"server": "<topic.prefix>"}']
    if not partition["server"]:
        return ["partition.server must not be empty"]
    return []


PG_INT_KEYS = ("lsn", "lsn_commit", "flush_lsn", "seq", "ts_usec", "lsn_proc", "xmin")
PG_BOOL_KEYS = ("complete", "snapshot", "snapshot_completed", "last_snapshot_record")
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
    origin = offset.get("snapshot_origin")
    if "snapshot_origin" in offset and not (
        isinstance(origin, dict) and nonneg_int(origin.get("lsn"))
    ):
        problems.append(
            "offset.snapshot_origin (where streaming resumes after an interrupted snapshot) "
            f"must be an object with a non-negative integer lsn, got {origin!r}"
        )
    unknown = sorted(set(offset) - {*PG_INT_KEYS, *PG_BOOL_KEYS, *PG_OTHER_KEYS, "snapshot_origin"})
    if unknown:
        problems.append(f"unknown offset key(s) {', '.join(unknown)}")
    if problems:
        return offset, problems
    full = dict(offset)
    if "flush_lsn" not in full and not full.get("snapshot"):
        lsn = full["lsn"]
        full.setdefault("lsn_commit", lsn)
        full.setdefault("seq", 0)
        full.setdefault("complete", True)
        full["flush_lsn"] = lsn
    return full, []


#: keys of a snapshot row offset (or of the engine's snapshot marker) that a streaming offset
#: does not have
_SNAPSHOT_ONLY = ("snapshot", "snapshot_completed", "last_snapshot_record", "snapshot_origin")


def handover_offset(offset: dict[str, Any]) -> dict[str, Any]:
    """A position streaming can start from: a stored streaming offset as it is, or a snapshot
    position (an older release's snapshot row offset ``{"lsn", "snapshot": true, ...}``)
    completed the way the snapshot hands over: transactions committed before ``lsn`` are in
    the snapshot, the one committing at it and every later one are streamed."""
    full = {k: v for k, v in offset.items() if k not in _SNAPSHOT_ONLY}
    lsn = int(full.get("lsn") or 0)
    if "lsn_commit" not in full:
        full.update(lsn_commit=lsn, seq=0, complete=False)
    full.setdefault("seq", 0)
    full.setdefault("complete", True)
    full.setdefault("flush_lsn", lsn)
    full.setdefault("txId", None)
    full.setdefault("ts_usec", 0)
    return full
