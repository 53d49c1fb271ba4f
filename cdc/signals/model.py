"""A signal, whatever channel it came through, and the actions' payloads.

A signal is ``(id, type, data)``: the columns of Debezium's signal table, the fields of a
signal-topic message and of ``POST /connectors/{name}/signals``. ``data`` is a JSON object
(text in the table). A malformed signal raises :class:`SignalError` naming what is wrong;
the processor logs it and skips the signal, the connector never stops for one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cdc.snapshot.incremental_state import Collection

EXECUTE_SNAPSHOT = "execute-snapshot"
STOP_SNAPSHOT = "stop-snapshot"
PAUSE_SNAPSHOT = "pause-snapshot"
RESUME_SNAPSHOT = "resume-snapshot"
LOG = "log"
WINDOW_OPEN = "snapshot-window-open"
WINDOW_CLOSE = "snapshot-window-close"
#: a row written only so that an idle stream reports an event (signals from other channels)
WAKE = "snapshot-wake"
ACTIONS = (EXECUTE_SNAPSHOT, STOP_SNAPSHOT, PAUSE_SNAPSHOT, RESUME_SNAPSHOT, LOG)


class SignalError(ValueError):
    """A signal that cannot be executed; the message says why."""


@dataclass(frozen=True)
class Signal:
    id: str
    type: str
    data: dict[str, Any] = field(default_factory=dict)
    #: source, kafka, rest, file
    channel: str = "source"
    #: the message's offset in the Kafka signal topic (kafka channel only): kept in the
    #: connector's offsets once the signal ran, so a restart reads the topic after it
    position: int | None = None


@dataclass(frozen=True)
class SnapshotRequest:
    """The data of ``execute-snapshot`` and ``stop-snapshot``."""

    collections: list[Collection]
    type: str = "incremental"


def parse(signal_id: Any, signal_type: Any, data: Any, channel: str = "source") -> Signal:
    """A signal from its three fields; ``data`` as JSON text, bytes, a mapping or empty."""
    if isinstance(signal_id, bytes | bytearray):
        signal_id = bytes(signal_id).decode()
    if isinstance(signal_type, bytes | bytearray):
        signal_type = bytes(signal_type).decode()
    if not signal_type or not isinstance(signal_type, str):
        raise SignalError(f"signal {signal_id!r} has no type")
    return Signal(str(signal_id or ""), signal_type, _data(signal_id, data), channel)


def _data(signal_id: Any, data: Any) -> dict[str, Any]:
    if data is None or data == "" or data == b"":
        return {}
    if isinstance(data, Mapping):
        return dict(data)
    if isinstance(data, bytes | bytearray):
        data = bytes(data).decode()
    try:
        parsed = json.loads(data)
    except (TypeError, ValueError) as exc:
        raise SignalError(f"signal {signal_id!r}: data is not JSON: {data!r} ({exc})") from exc
    if parsed is None:
        return {}
    if not isinstance(parsed, dict):
        raise SignalError(f"signal {signal_id!r}: data must be a JSON object, got {data!r}")
    return parsed


def snapshot_request(signal: Signal, *, require_collections: bool = True) -> SnapshotRequest:
    """``data-collections`` (names or regular expressions), ``type`` (``incremental``;
    ``blocking`` is refused here), ``additional-conditions`` (a list of
    ``{"data-collection", "filter"}``, or Debezium 1.x's single ``additional-condition``) and
    ``surrogate-key``."""
    data = signal.data
    names = data.get("data-collections")
    if names is None and not require_collections:
        names = []
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise SignalError(
            f"signal {signal.id!r} ({signal.type}): data-collections must be a list of table "
            f"names or regular expressions, got {names!r}"
        )
    if require_collections and not names:
        raise SignalError(f"signal {signal.id!r} ({signal.type}): data-collections is empty")
    kind = str(data.get("type") or "incremental").lower()
    if kind not in ("incremental", "blocking"):
        raise SignalError(
            f"signal {signal.id!r}: type must be incremental or blocking, got {kind!r}"
        )
    conditions = _conditions(signal, names)
    surrogate = data.get("surrogate-key")
    if surrogate is not None and not (isinstance(surrogate, str) and surrogate):
        raise SignalError(f"signal {signal.id!r}: surrogate-key must be a column name")
    return SnapshotRequest(
        [Collection(n, conditions.get(n), surrogate or None) for n in names], kind
    )


def _conditions(signal: Signal, names: list[str]) -> dict[str, str]:
    data = signal.data
    single = data.get("additional-condition")
    if single is not None:
        if not isinstance(single, str):
            raise SignalError(f"signal {signal.id!r}: additional-condition must be SQL text")
        return dict.fromkeys(names, single)
    listed = data.get("additional-conditions") or []
    if not isinstance(listed, list):
        raise SignalError(f"signal {signal.id!r}: additional-conditions must be a list")
    out: dict[str, str] = {}
    for item in listed:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("data-collection"), str)
            or not isinstance(item.get("filter"), str)
        ):
            raise SignalError(
                f"signal {signal.id!r}: each additional-conditions entry must be "
                f'{{"data-collection": "<table>", "filter": "<SQL predicate>"}}, got {item!r}'
            )
        out[item["data-collection"]] = item["filter"]
    return out
