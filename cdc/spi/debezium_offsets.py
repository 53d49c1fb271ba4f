"""Offsets written by Debezium, taken over; and tidemark's offsets handed back to Debezium.

Both keep Kafka Connect's layout and Debezium's key names, but a few keys are only one side's:
Debezium keeps its transaction-metadata counters (``transaction_id``,
``transaction_data_collection_order_<table>``) and the state of an incremental snapshot in
its own format; tidemark keeps its resume keys. :func:`from_debezium` leaves a log position
the connector can resume from, and says in ``notes`` what it dropped and what that means;
each connector's ``Connector.from_debezium_offset`` completes it (how its log position maps).

An offset of a Debezium snapshot still running is refused: neither side can continue the
other's snapshot (Debezium snapshots again on its own restart too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_SNAPSHOT_FLAGS = ("snapshot", "snapshot_completed", "last_snapshot_record")
_TRANSACTION_PREFIX = "transaction_"
_INCREMENTAL_PREFIX = "incremental_snapshot_"


@dataclass
class Translated:
    """An offset as the other side resumes from it, or the reason it cannot be used."""

    offset: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)
    #: the snapshot had finished when the offset was written (the position is its end)
    after_snapshot: bool = False
    refused: str | None = None


def _snapshot_running(offset: Mapping[str, Any]) -> bool | None:
    """True while a Debezium snapshot runs, False after it finished, None for a streaming
    offset. Debezium 1.x writes ``snapshot: true``, 2.x/3.x the snapshot kind as text
    (``"INITIAL"``); ``last_snapshot_record`` or ``snapshot_completed`` mark its end."""
    flag = offset.get("snapshot")
    if flag in (None, False) or (isinstance(flag, str) and flag.lower() == "false"):
        return None
    return not (offset.get("last_snapshot_record") or offset.get("snapshot_completed"))


def from_debezium(offset: Mapping[str, Any] | None) -> Translated:
    """A Debezium offset without the keys only Debezium uses; the connector maps the rest."""
    if offset is None:
        return Translated(None)
    running = _snapshot_running(offset)
    if running:
        return Translated(
            None,
            refused="Debezium's snapshot had not finished when this offset was written: start "
            "the tidemark connector without an offset (it snapshots per snapshot.mode), or "
            "let Debezium finish its snapshot first",
        )
    kept: dict[str, Any] = {}
    notes: list[str] = []
    dropped_tx = False
    for key, value in offset.items():
        if key.startswith(_TRANSACTION_PREFIX):
            dropped_tx = True
        elif key.startswith(_INCREMENTAL_PREFIX):
            if value not in (None, "", [], {}):
                notes.append(
                    f"dropped Debezium's {key}: an incremental snapshot in progress is not "
                    "carried over; send the execute-snapshot signal again to tidemark"
                )
        elif key not in _SNAPSHOT_FLAGS:
            kept[key] = value
    if dropped_tx:
        notes.append(
            "dropped Debezium's transaction metadata counters (transaction_*): tidemark keeps "
            "none in its offsets"
        )
    return Translated(kept, notes, after_snapshot=running is False)
