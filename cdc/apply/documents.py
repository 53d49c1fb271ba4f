"""MongoDB updates sent as patches, merged into the stored document.

A MongoDB collection is a "document table" in the lake: the key column ``id`` (the Kafka key's
``id``: the ``_id`` as the seed's Table 4.3 writes it) and ``document``, the whole document as
extended-JSON text. Inserts, reads, replacements and updates that carry the whole document
(``change_streams_update_full``) simply store it. Updates without the document carry a patch:

* the seed's 1.2 shape (``envelope.version=1.2``): ``patch``, the oplog's update as JSON text:
  ``{"$set": {...}, "$unset": {...}}`` (dotted paths), the ``{"$v": 2, "diff": {...}}`` of
  MongoDB 5+ oplogs, or a whole replacement document (no ``$`` operators);
* the current shape (``envelope.version=3``): ``updateDescription`` with ``updatedFields`` (JSON
  text), ``removedFields`` and ``truncatedArrays``.

A patch is applied to the document that precedes it, so patches must be applied in position
order and none may be skipped. The fold composes them: a patch following a full document in
the same micro-batch is applied at once (:func:`cdc.apply.fold.compose`); patches with no
document before them in the batch travel as one list of steps, each with its position, in the
worker row's ``patch`` column. The driver then reads the stored documents of those keys and
applies the steps whose position is above the stored row's
(:func:`cdc.apply.document_patches.complete`), so a replayed batch applies nothing twice.
An older patch arriving after a newer change of the key in one batch is a replayed duplicate
(one key's events are in one partition, in order) and is ignored. An event the connector sent
again after a hard kill has the same source position and a higher Kafka offset, so it counts as
newer and its patch is applied again right after itself: harmless, as every patch form here
(set, unset, truncate, diff) is idempotent.

Merged documents are written as JSON text in the connector's layout (``{"a" : 1, "b" : 2.0}``);
compare documents parsed, not as text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

DOCUMENT = "document"
Step = tuple[tuple[int, ...], dict[str, Any]]


class PatchError(ValueError):
    """An update event whose patch cannot be read (named in the message)."""


class MissingDocument(RuntimeError):
    """A patch for a document the lake does not hold: the update cannot be applied."""


# -- reading events ------------------------------------------------------------------------------
def loads(text: str) -> Any:
    """JSON text of a document: orjson, or Python's reader for ``NaN``/``Infinity`` doubles."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            return json.loads(text)
        except ValueError as exc:
            raise PatchError(f"not valid JSON text of a document: {exc}") from None


def dumps(doc: Any) -> str:
    """A document as JSON text in the connector's layout (``NaN`` kept, not nulled)."""
    return json.dumps(doc, ensure_ascii=False, separators=(", ", " : "))


def update_of(payload: Mapping[str, Any]) -> tuple[str, Any] | None:
    """What a MongoDB update without ``after`` says: ``("document", text)`` for a replacement,
    ``("patch", ops)`` for a patch, None when the payload is not a MongoDB update."""
    if isinstance(payload.get("patch"), str):
        return _v1_patch(payload["patch"])
    desc = payload.get("updateDescription")
    if isinstance(desc, Mapping):
        return "patch", _description(desc)
    return None


def _v1_patch(text: str) -> tuple[str, Any]:
    spec = loads(text)
    if not isinstance(spec, dict):
        raise PatchError("'patch' is not the JSON text of an object")
    if not any(k.startswith("$") for k in spec):
        return "document", text  # a replacement: the whole new document
    if spec.get("$v") == 2 and "diff" in spec:
        if not isinstance(spec["diff"], dict):
            raise PatchError("'patch' has a $v:2 'diff' that is not an object")
        return "patch", {"diff": spec["diff"]}
    unknown = sorted(k for k in spec if k not in ("$set", "$unset", "$v"))
    if unknown:
        raise PatchError(
            f"'patch' uses {', '.join(unknown)}: only $set/$unset (and $v:2 diffs) are oplog "
            "update forms"
        )
    sets, unsets = spec.get("$set") or {}, spec.get("$unset") or {}
    if not isinstance(sets, dict) or not isinstance(unsets, dict):
        raise PatchError("'patch' $set/$unset is not an object")
    return "patch", {"set": sets, "unset": list(unsets)}


def _description(desc: Mapping[str, Any]) -> dict[str, Any]:
    updated = desc.get("updatedFields")
    if isinstance(updated, str):
        updated = loads(updated)
    if updated is not None and not isinstance(updated, dict):
        raise PatchError("'updateDescription.updatedFields' is not an object")
    removed = desc.get("removedFields") or []
    truncated = desc.get("truncatedArrays") or []
    if not isinstance(removed, list) or not all(isinstance(f, str) for f in removed):
        raise PatchError("'updateDescription.removedFields' is not a list of field names")
    cuts = []
    for t in truncated:
        size = t.get("size", t.get("newSize")) if isinstance(t, Mapping) else None
        if not isinstance(size, int) or not isinstance(t.get("field"), str):
            raise PatchError("'updateDescription.truncatedArrays' entries need field and size")
        cuts.append([t["field"], size])
    return {"truncate": cuts, "set": updated or {}, "unset": removed}


# -- applying ------------------------------------------------------------------------------------
def apply(doc: dict[str, Any], ops: Mapping[str, Any]) -> dict[str, Any]:
    """Applies one patch to ``doc`` in place, as MongoDB did: arrays truncated, fields set
    (intermediate documents created, arrays padded with nulls), fields removed (an array
    element removed by path becomes null)."""
    if "diff" in ops:
        _diff(doc, ops["diff"])
        return doc
    for path, size in ops.get("truncate") or ():
        target = _get(doc, path.split("."))
        if isinstance(target, list):
            del target[size:]
    for path, value in (ops.get("set") or {}).items():
        _set(doc, path.split("."), value)
    for path in ops.get("unset") or ():
        _unset(doc, path.split("."))
    return doc


def _index(part: str) -> int | None:
    return int(part) if part.isdigit() else None


def _get(node: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and (i := _index(part)) is not None and i < len(node):
            node = node[i]
        else:
            return None
    return node


def _put(node: Any, part: str, value: Any) -> Any:
    if isinstance(node, list) and (i := _index(part)) is not None:
        node.extend([None] * (i + 1 - len(node)))
        node[i] = value
    elif isinstance(node, dict):
        node[part] = value
    return value


def _set(doc: dict[str, Any], parts: list[str], value: Any) -> None:
    node: Any = doc
    for part in parts[:-1]:
        child = _get(node, [part])
        if not isinstance(child, dict | list):
            child = _put(node, part, {})
        node = child
    _put(node, parts[-1], value)


def _unset(doc: dict[str, Any], parts: list[str]) -> None:
    parent = _get(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        parent.pop(last, None)
    elif isinstance(parent, list) and (i := _index(last)) is not None and i < len(parent):
        parent[i] = None


def _diff(node: Any, diff: Mapping[str, Any]) -> None:
    """MongoDB 5's oplog ``$v: 2`` diff: ``d`` delete, ``u`` update, ``i`` insert, ``s<name>``
    a sub-diff; array diffs (``a: true``) have ``l`` (new length), ``u<i>`` and ``s<i>``."""
    if isinstance(node, list) and diff.get("a") is True:
        if isinstance(diff.get("l"), int):
            size = diff["l"]
            del node[size:]
            node.extend([None] * (size - len(node)))
        for k, v in diff.items():
            if k[:1] == "u" and k[1:].isdigit():
                _put(node, k[1:], v)
            elif k[:1] == "s" and k[1:].isdigit():
                _diff(_get(node, [k[1:]]), v)
        return
    if not isinstance(node, dict):
        return
    for name in diff.get("d") or {}:
        node.pop(name, None)
    node.update(diff.get("u") or {})
    node.update(diff.get("i") or {})
    for k, v in diff.items():
        if k.startswith("s") and len(k) > 1 and isinstance(v, Mapping):
            _diff(node.get(k[1:]), v)


def apply_steps(text: str | None, steps: Iterable[Step], after: tuple[int, ...] | None) -> str:
    """The document ``text`` with the steps above position ``after`` applied."""
    doc = loads(text) if text is not None else None
    if not isinstance(doc, dict):
        raise PatchError("the stored document is not the JSON text of an object")
    for pos, ops in steps:
        if after is None or tuple(pos) > after:
            apply(doc, ops)
    return dumps(doc)


def encode(steps: list[Step] | None) -> str | None:
    return None if steps is None else orjson.dumps([[list(p), o] for p, o in steps]).decode()


def decode(text: str) -> list[Step]:
    return [(tuple(p), o) for p, o in orjson.loads(text)]
