"""The incremental snapshot's context in the offset, and the key values it holds.

While an incremental snapshot runs, every stored offset carries (the seed's three items):

- ``incremental_snapshot_collections``: the tables still to snapshot, the first being the
  one in progress (with its additional condition);
- ``incremental_snapshot_maximum_key``: that table's largest key when its snapshot started
  (rows above it arrive by streaming only);
- ``incremental_snapshot_primary_key``: the key of the last snapshot row sent downstream;
- ``incremental_snapshot_paused``: ``true`` while paused (``pause-snapshot``), so a restart
  stays paused until ``resume-snapshot``;
- ``incremental_snapshot_type``: ``INCREMENTAL`` or ``BLOCKING``, so a restarted blocking
  snapshot stays blocking.

Besides, ``incremental_snapshot_signal_offset`` (Debezium's name) is the position in the Kafka
signal topic of the last signal whose effect the offset holds: a restart reads that topic from
the next message, so a signal accepted before a crash is never lost (see
``cdc.signals.kafka_channel``).

Debezium's key names; the values are JSON text (Debezium serializes Java objects there), so
an operator can read them in ``GET /connectors/{name}/offsets``. Key values are whatever the
connector's chunk reader returns (ints, strings, decimals, dates, bytes...): they are encoded
with a type tag where JSON has no such type, so a restart queries with the same values.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

COLLECTIONS = "incremental_snapshot_collections"
MAXIMUM_KEY = "incremental_snapshot_maximum_key"
PRIMARY_KEY = "incremental_snapshot_primary_key"
SIGNAL_ID = "incremental_snapshot_signal_id"
PAUSED = "incremental_snapshot_paused"
TYPE = "incremental_snapshot_type"
SIGNAL_OFFSET = "incremental_snapshot_signal_offset"
OFFSET_KEYS = (COLLECTIONS, MAXIMUM_KEY, PRIMARY_KEY, SIGNAL_ID, PAUSED, TYPE, SIGNAL_OFFSET)

_ID = "incremental_snapshot_collections_id"
_CONDITION = "incremental_snapshot_collections_additional_condition"
_SURROGATE = "incremental_snapshot_collections_surrogate_key"


@dataclass(frozen=True)
class Collection:
    """One table to snapshot: its identifier, an optional SQL predicate restricting the rows
    (``additional-conditions``), an optional column to chunk by (``surrogate-key``)."""

    id: str
    condition: str | None = None
    surrogate_key: str | None = None


@dataclass
class SnapshotContext:
    """What a restart needs: tables left (the first in progress), its max and last key."""

    collections: list[Collection] = field(default_factory=list)
    maximum_key: tuple[Any, ...] | None = None
    last_key: tuple[Any, ...] | None = None
    signal_id: str = ""
    paused: bool = False
    blocking: bool = False

    def to_offset(self) -> dict[str, Any]:
        return {
            COLLECTIONS: json.dumps(
                [
                    {_ID: c.id, _CONDITION: c.condition, _SURROGATE: c.surrogate_key}
                    for c in self.collections
                ]
            ),
            MAXIMUM_KEY: encode_key(self.maximum_key),
            PRIMARY_KEY: encode_key(self.last_key),
            SIGNAL_ID: self.signal_id,
            PAUSED: self.paused,
            TYPE: "BLOCKING" if self.blocking else "INCREMENTAL",
        }

    @classmethod
    def from_offset(cls, offset: Mapping[str, Any] | None) -> SnapshotContext | None:
        """The context a stored offset holds; None when no incremental snapshot ran. A
        context that cannot be read raises ``ValueError`` naming the key."""
        if not offset or COLLECTIONS not in offset:
            return None
        try:
            items = json.loads(offset[COLLECTIONS])
            collections = [
                Collection(str(i[_ID]), i.get(_CONDITION), i.get(_SURROGATE)) for i in items
            ]
        except (TypeError, ValueError, KeyError) as exc:
            raise ValueError(f"offset key {COLLECTIONS} is not readable: {exc}") from exc
        return cls(
            collections=collections,
            maximum_key=decode_key(offset.get(MAXIMUM_KEY), MAXIMUM_KEY),
            last_key=decode_key(offset.get(PRIMARY_KEY), PRIMARY_KEY),
            signal_id=str(offset.get(SIGNAL_ID) or ""),
            paused=_flag(offset.get(PAUSED), PAUSED),
            blocking=_snapshot_type(offset.get(TYPE)) == "BLOCKING",
        )


def signal_offset(offset: Mapping[str, Any] | None) -> int | None:
    """The Kafka signal topic position an offset holds (None when it holds none)."""
    value = (offset or {}).get(SIGNAL_OFFSET)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"offset key {SIGNAL_OFFSET} must be an integer, got {value!r}")
    try:
        return int(value)
    except ValueError as exc:
        raise ValueError(f"offset key {SIGNAL_OFFSET} must be an integer, got {value!r}") from exc


def _flag(value: Any, name: str) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"offset key {name} must be true or false, got {value!r}")


def _snapshot_type(value: Any) -> str:
    kind = str(value or "INCREMENTAL").upper()
    if kind not in ("INCREMENTAL", "BLOCKING"):
        raise ValueError(f"offset key {TYPE} must be INCREMENTAL or BLOCKING, got {value!r}")
    return kind


def without_context(offset: Mapping[str, Any]) -> dict[str, Any]:
    """``offset`` minus the incremental snapshot keys."""
    return {k: v for k, v in offset.items() if k not in OFFSET_KEYS}


def encode_key(key: Sequence[Any] | None) -> str | None:
    if key is None:
        return None
    return json.dumps([_encode(v) for v in key])


def decode_key(text: Any, name: str = "key") -> tuple[Any, ...] | None:
    if text is None:
        return None
    try:
        return tuple(_decode(v) for v in json.loads(text))
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"offset key {name} is not readable: {text!r} ({exc})") from exc


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, dt.datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$date": value.isoformat()}
    if isinstance(value, dt.time):
        return {"$time": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"$timedelta": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$bytes": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, uuid.UUID):
        return {"$uuid": str(value)}
    raise ValueError(f"cannot store a key value of type {type(value).__name__}: {value!r}")


def _decode(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    ((tag, body),) = value.items()
    if tag == "$decimal":
        return Decimal(body)
    if tag == "$datetime":
        return dt.datetime.fromisoformat(body)
    if tag == "$date":
        return dt.date.fromisoformat(body)
    if tag == "$time":
        return dt.time.fromisoformat(body)
    if tag == "$timedelta":
        return dt.timedelta(days=body[0], seconds=body[1], microseconds=body[2])
    if tag == "$bytes":
        return base64.b64decode(body)
    if tag == "$uuid":
        return uuid.UUID(body)
    raise ValueError(f"unknown key value tag {tag}")
