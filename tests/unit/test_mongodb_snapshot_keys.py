"""The ``_id`` a resumable MongoDB snapshot stores in its offset: JSON that reads back as the
same ``_id`` (integers, strings, ObjectIds), or none for a type it could not compare after."""

from __future__ import annotations

import json
from typing import Any, cast

from bson import Binary, Decimal128, ObjectId

from connectors.mongodb.extjson import key_id
from connectors.mongodb.snapshot import MongoSnapshotSteps, _decode_id, _id_class, id_of


def stored(document_id: object) -> object:
    """The key as the offset stores it (through JSON) for a row with that ``_id``."""
    key = id_of((key_id(document_id), "{}", None, None))
    return None if key is None else json.loads(json.dumps(key))


def test_integers_strings_and_object_ids_read_back_as_the_same_id() -> None:
    oid = ObjectId()
    for value in (7, -3, 2**40, "k1", "", oid):
        key = stored(value)
        assert isinstance(key, list) and _decode_id(key[0]) == value
    assert stored(oid) == [{"$oid": str(oid)}]


def test_other_id_types_are_not_stored() -> None:
    for value in (1.5, Decimal128("1.1"), Binary(b"\x01"), {"a": 1}, True):
        assert stored(value) is None, value


def test_numbers_are_one_class_for_gt() -> None:
    assert _id_class(1) == _id_class(2.5) == _id_class(Decimal128("3")) == "number"
    assert _id_class("a") != _id_class(ObjectId()) != _id_class(1)


def steps(available: bool, holders: int = 1) -> MongoSnapshotSteps:
    at = {"sec": 20, "ord": 1}
    return MongoSnapshotSteps(
        cast(Any, None),
        cast(Any, None),
        cast(Any, None),
        "rs0",
        lambda: at,
        lambda offset: available,
        1,
        0,
        holders=[cast(Any, object()) for _ in range(holders)],
    )


def test_a_snapshot_resumes_only_while_the_oplog_holds_the_first_attempts_position() -> None:
    for available in (True, False):
        s = steps(available)
        s.position()
        start = s.handover({"sec": 10, "ord": 1, "snapshot": True})
        assert s.may_resume() is available
        assert start == ({"sec": 10, "ord": 1} if available else {"sec": 20, "ord": 1})


def test_a_collection_on_several_servers_is_not_read_in_id_order() -> None:
    assert steps(True).in_key_order and not steps(True, holders=2).in_key_order
