"""MongoDB patches in the apply job: reading them from both event shapes, applying them as
MongoDB did, and composing them in the per-partition fold (no Spark)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from cdc.apply import documents
from cdc.apply.events import BadEvent, Change, Parser, ParseSettings
from cdc.apply.policy import RESERVED
from cdc.apply.worker import PartitionProcessor, WorkerSettings

TOPIC = "m1.shop.orders"


def record(op: str, doc_id: int, ord_: int, **fields: Any) -> tuple[bytes, bytes]:
    """A schemaless MongoDB event as tidemark's connector writes it (either shape)."""
    payload = {
        "op": op,
        "source": {"connector": "mongodb", "rs": "rs0", "sec": 100, "ord": ord_},
        **fields,
    }
    return orjson.dumps({"id": str(doc_id)}), orjson.dumps(payload)


def parse(key: bytes, value: bytes) -> Change | BadEvent:
    out = Parser(ParseSettings()).parse(TOPIC, 0, 0, key, value)
    assert isinstance(out, Change | BadEvent)
    return out


def patched(doc: dict[str, Any], text: str) -> dict[str, Any]:
    kind, ops = documents._v1_patch(text)
    assert kind == "patch"
    return documents.apply(doc, ops)


def test_set_top_level_and_dotted_paths_creating_documents_and_padding_arrays() -> None:
    doc = {"_id": 1, "a": 1, "n": {"x": 1, "y": [1, 2]}, "tags": ["a"]}
    out = patched(
        doc,
        '{"$set": {"a": 2, "n.x": 5, "n.y.1": 20, "deep.er.z": true, "tags.3": "d", "b": '
        '{"$numberLong" : "7"}}}',
    )
    assert out == {
        "_id": 1,
        "a": 2,
        "n": {"x": 5, "y": [1, 20]},
        "tags": ["a", None, None, "d"],
        "b": {"$numberLong": "7"},
        "deep": {"er": {"z": True}},
    }


def test_unset_removes_fields_and_nulls_array_elements() -> None:
    doc = {"_id": 1, "a": 1, "n": {"x": 1, "y": 2}, "arr": [1, 2, 3]}
    out = patched(doc, '{"$unset": {"a": true, "n.x": "", "arr.1": 1, "absent.path": true}}')
    assert out == {"_id": 1, "n": {"y": 2}, "arr": [1, None, 3]}


def test_update_description_truncates_sets_then_removes() -> None:
    ops = documents._description(
        {
            "updatedFields": '{"n.x" : 9, "email" : "a@b"}',
            "removedFields": ["phone"],
            "truncatedArrays": [{"field": "list", "size": 2}],
        }
    )
    doc = {"_id": 1, "n": {"x": 1}, "phone": "555", "list": [1, 2, 3, 4]}
    assert documents.apply(doc, ops) == {"_id": 1, "n": {"x": 9}, "list": [1, 2], "email": "a@b"}


def test_v2_oplog_diff() -> None:
    doc = {"_id": 1, "a": 1, "gone": 0, "sub": {"k": 1, "arr": [1, 2, 3]}}
    text = (
        '{"$v": 2, "diff": {"d": {"gone": false}, "u": {"a": 2}, "i": {"new": "x"}, '
        '"ssub": {"u": {"k": 2}, "sarr": {"a": true, "l": 2, "u1": 20}}}}'
    )
    assert patched(doc, text) == {"_id": 1, "a": 2, "sub": {"k": 2, "arr": [1, 20]}, "new": "x"}


def test_v1_replacement_and_unknown_operators() -> None:
    assert documents.update_of({"patch": '{"_id" : 1, "x" : 2}'}) == (
        "document",
        '{"_id" : 1, "x" : 2}',
    )
    bad = parse(*record("u", 1, 1, patch='{"$inc": {"n": 1}}', filter='{"_id" : 1}'))
    assert isinstance(bad, BadEvent) and "$inc" in bad.error


def test_nan_and_infinity_doubles_survive_a_patch() -> None:
    steps = [((1,), {"set": {"b": 1.5}, "unset": []})]
    text = documents.apply_steps('{"_id" : 1, "a" : NaN, "c" : -Infinity}', steps, None)
    assert text == '{"_id" : 1, "a" : NaN, "c" : -Infinity, "b" : 1.5}'


def test_both_shapes_parse_to_a_patch_change_keeping_the_document_column() -> None:
    v1 = parse(*record("u", 7, 3, patch='{"$set": {"a": 1}}', filter='{"_id" : 7}'))
    v3 = parse(
        *record(
            "u",
            7,
            3,
            before=None,
            after=None,
            updateDescription={"updatedFields": '{"a" : 1}', "removedFields": None},
        )
    )
    for ch in (v1, v3):
        assert isinstance(ch, Change)
        assert ch.row == {"id": "7", "document": None}
        assert ch.unavailable == {"document"}
        assert ch.patch is not None and ch.patch[0][1]["set"] == {"a": 1}
    replaced = parse(*record("u", 7, 4, patch='{"_id" : 7, "z" : 1}', filter='{"_id" : 7}'))
    assert isinstance(replaced, Change) and replaced.patch is None
    assert replaced.row == {"id": "7", "document": '{"_id" : 7, "z" : 1}'}
    no_patch = parse(*record("u", 7, 5, after=None))
    assert isinstance(no_patch, BadEvent) and "without 'after'" in no_patch.error


def run(records: list[tuple[bytes, bytes]]) -> dict[str, dict[str, Any]]:
    proc = PartitionProcessor(WorkerSettings(ParseSettings(), "evolve", reserved=RESERVED))
    for offset, (key, value) in enumerate(records):
        proc.record(TOPIC, 0, offset, key, value)
    proc.finish()
    data = proc.take()
    rows = [{k: v[i] for k, v in data.items()} for i in range(len(data["kind"]))]
    return {r["key_json"]: r for r in rows if r["kind"] == "row"}


def test_fold_applies_patches_after_a_document_in_the_batch_and_ignores_replays() -> None:
    insert = record("c", 1, 1, after='{"_id" : 1, "a" : 1, "n" : {"x" : 1}}')
    set_ = record("u", 1, 2, patch='{"$set": {"n.x": 2, "b": "new"}}', filter='{"_id" : 1}')
    unset = record("u", 1, 3, patch='{"$unset": {"a": true}}', filter='{"_id" : 1}')
    rows = run([insert, set_, unset, set_])  # the last one: a replayed duplicate
    row = rows['{"id":"1"}']
    assert row["op"] == "u" and row["patch"] is None and row["unavailable"] == []
    assert orjson.loads(orjson.loads(row["row_json"])["document"]) == {
        "_id": 1,
        "n": {"x": 2},
        "b": "new",
    }


def test_fold_keeps_patches_without_a_document_as_ordered_steps() -> None:
    rows = run(
        [
            record("u", 2, 5, patch='{"$set": {"a": 1}}', filter='{"_id" : 2}'),
            record("u", 2, 6, patch='{"$unset": {"a": true}}', filter='{"_id" : 2}'),
            record("d", 3, 7, filter='{"_id" : 3}'),
            record("u", 3, 8, patch='{"$set": {"a": 1}}', filter='{"_id" : 3}'),
        ]
    )
    row = rows['{"id":"2"}']
    assert row["unavailable"] == ["document"]
    steps = documents.decode(row["patch"])
    assert [p for p, _ in steps] == [(1, 100, 5, 0), (1, 100, 6, 1)]
    # the stored document was at the first step's position: only the second applies
    stored = '{"_id" : 2, "a" : 0, "k" : 1}'
    assert orjson.loads(documents.apply_steps(stored, steps, (1, 100, 5, 0))) == {"_id": 2, "k": 1}
    # a patch after a delete in the batch stays a patch (the driver finds no document)
    assert rows['{"id":"3"}']["patch"] is not None


def test_a_stored_document_that_is_not_an_object_is_named() -> None:
    with pytest.raises(documents.PatchError, match="not the JSON text of an object"):
        documents.apply_steps("[1]", [], None)
