"""From MongoDB's change documents and oplog entries to the rows the core turns into events.

Both capture modes meet here: :func:`from_change_stream` reads a change stream document,
:func:`from_oplog` an oplog entry; both give :class:`Change` objects, and :class:`Shapes`
turns a change into the row of one of the two event shapes:

* ``1.2`` (the seed's, ``envelope.version=1.2``): ``after`` (create and read), ``patch`` and
  ``filter`` (update), ``filter`` (delete), all extended-JSON strings;
* ``3`` (current Debezium): ``before``, ``after`` (strings) and ``updateDescription``
  (``updatedFields`` as a string, ``removedFields``, ``truncatedArrays``).

A collection is a "document table" for the core: its key column ``id`` and those fields,
which the core puts in the envelope in place of ``before``/``after`` structs.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bson import Binary, Timestamp

from cdc.errors import FatalError
from cdc.schema import logical
from cdc.schema.model import INT32, STRING, Schema, array, struct
from cdc.spi import Column, Operation, Table, TableId
from connectors.mongodb.extjson import dumps, key_id
from connectors.mongodb.fields import CollectionFields, FieldSelector

SHAPE_V1 = "1.2"
SHAPE_CURRENT = "3"

JSON = logical.json().as_optional()
UPDATE_DESCRIPTION = struct(
    [
        ("removedFields", array(STRING, optional=True)),
        ("updatedFields", JSON),
        (
            "truncatedArrays",
            array(struct([("field", STRING), ("size", INT32)]), optional=True),
        ),
    ],
    name="io.debezium.connector.mongodb.changestream.updatedescription",
    optional=True,
)
COLUMNS = {
    SHAPE_V1: ("id", "after", "patch", "filter"),
    SHAPE_CURRENT: ("id", "before", "after", "updateDescription"),
}


@dataclass(slots=True)
class Change:
    """One document change, whatever it was read from."""

    op: Operation
    db: str
    coll: str
    doc_id: Any
    #: the whole document after the change (insert, replace, read, update lookup)
    full: Mapping[str, Any] | None = None
    #: the document before the change (pre-images)
    before: Mapping[str, Any] | None = None
    #: the update as the oplog wrote it ($set/$unset, a replacement, or a $v:2 diff)
    patch: Mapping[str, Any] | None = None
    #: updatedFields / removedFields / truncatedArrays
    update: Mapping[str, Any] | None = None
    #: the selection of the changed document (documentKey: _id and shard key fields)
    filter: Mapping[str, Any] = field(default_factory=dict)
    sec: int = 0
    ord: int = 0
    h: int | None = None
    txn: str | None = None
    lsid: str | None = None
    txn_number: int | None = None
    wall_ms: int | None = None
    offset: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Moved:
    """A log entry with nothing to emit (a command, a no-op, another namespace)."""

    offset: dict[str, Any]


@dataclass(slots=True)
class Invalidated:
    """The stream ended (collection dropped/renamed, database dropped): ``token`` is where a
    new stream may start after it."""

    token: Mapping[str, Any]
    offset: dict[str, Any]


def _lsid_text(lsid: Any) -> str | None:
    if not isinstance(lsid, Mapping):
        return None
    ident = lsid.get("id")
    if isinstance(ident, uuid.UUID):
        return str(ident)
    if isinstance(ident, Binary) and ident.subtype in (3, 4):
        return str(uuid.UUID(bytes=bytes(ident)))
    return dumps(ident)


def _txn(doc: Mapping[str, Any]) -> tuple[str | None, str | None, int | None]:
    lsid = _lsid_text(doc.get("lsid"))
    number = doc.get("txnNumber")
    if lsid is None or number is None:
        return None, None, None
    return f"{lsid}:{int(number)}", lsid, int(number)


def _ts(value: Any) -> tuple[int, int]:
    if isinstance(value, Timestamp):
        return value.time, value.inc
    if isinstance(value, datetime.datetime):  # nx-27017 sends clusterTime as a date
        return int(value.replace(tzinfo=value.tzinfo or datetime.UTC).timestamp()), 0
    return 0, 0


def _wall(value: Any) -> int | None:
    try:
        return int(value.timestamp() * 1000)
    except AttributeError:
        return None


def update_description_of(patch: Mapping[str, Any]) -> dict[str, Any] | None:
    """updatedFields/removedFields from an oplog update (``$set``/``$unset``, or the
    ``$v: 2`` diff's top level); None for a replacement document."""
    if "diff" in patch and patch.get("$v") == 2:
        diff = patch["diff"]
        updated = {**diff.get("u", {}), **diff.get("i", {})}
        return {
            "updatedFields": updated,
            "removedFields": list(diff.get("d", {})),
            "truncatedArrays": [],
        }
    if not any(k.startswith("$") for k in patch):
        return None
    return {
        "updatedFields": dict(patch.get("$set", {})),
        "removedFields": list(patch.get("$unset", {})),
        "truncatedArrays": [],
    }


def from_change_stream(
    doc: Mapping[str, Any], default_ns: tuple[str, str] | None
) -> Change | Moved | Invalidated:
    """One change stream document. ``default_ns``: the watched collection, for servers whose
    documents carry no ``ns`` (the stand-in)."""
    token = doc.get("_id")
    if not isinstance(token, Mapping):
        raise FatalError(f"change stream document without a resume token (_id): {doc!r}")
    sec, ord_ = _ts(doc.get("clusterTime"))
    offset = {"sec": sec, "ord": ord_, "resume_token": token.get("_data", dumps(token))}
    kind = doc.get("operationType")
    if kind == "invalidate":
        return Invalidated(token, offset)
    if kind not in ("insert", "update", "replace", "delete"):
        return Moved(offset)  # drop, rename, dropDatabase, createIndexes, ...: no row changed
    ns = doc.get("ns")
    if isinstance(ns, Mapping) and ns.get("coll"):
        db, coll = str(ns["db"]), str(ns["coll"])
    elif default_ns is not None:
        db, coll = default_ns
    else:
        raise FatalError(f"change stream document at {offset} names no namespace (ns)")
    key = doc.get("documentKey")
    if not isinstance(key, Mapping) or "_id" not in key:
        raise FatalError(
            f"change stream {kind} event at {offset} in {db}.{coll} has no documentKey._id "
            f"(got {key!r}); the server did not send a MongoDB change event"
        )
    txn, lsid, number = _txn(doc)
    change = Change(
        Operation.CREATE,
        db,
        coll,
        key["_id"],
        filter=key,
        sec=sec,
        ord=ord_,
        txn=txn,
        lsid=lsid,
        txn_number=number,
        wall_ms=_wall(doc.get("wallTime")),
        offset=offset,
        full=doc.get("fullDocument"),
        before=doc.get("fullDocumentBeforeChange"),
    )
    if kind == "update":
        change.op = Operation.UPDATE
        desc = doc.get("updateDescription") or {}
        change.update = {
            "updatedFields": dict(desc.get("updatedFields") or {}),
            "removedFields": list(desc.get("removedFields") or []),
            "truncatedArrays": list(desc.get("truncatedArrays") or []),
        }
        patch: dict[str, Any] = {}
        if change.update["updatedFields"]:
            patch["$set"] = change.update["updatedFields"]
        if change.update["removedFields"]:
            patch["$unset"] = {f: True for f in change.update["removedFields"]}
        change.patch = patch
    elif kind == "replace":
        change.op = Operation.UPDATE
        change.patch = change.full
    elif kind == "delete":
        change.op = Operation.DELETE
    return change


_OPS = {"i": Operation.CREATE, "u": Operation.UPDATE, "d": Operation.DELETE}


def from_oplog(entry: Mapping[str, Any], tord: int | None = None) -> list[Change | Moved]:
    """One oplog entry; a transaction's ``applyOps`` entry gives its operations in order
    (``tord`` is their index, kept in the offset so a restart inside one skips the done)."""
    sec, ord_ = _ts(entry.get("ts"))
    h = entry.get("h")
    offset: dict[str, Any] = {"sec": sec, "ord": ord_, "h": int(h) if h is not None else None}
    op = entry.get("op")
    inner = entry.get("o") or {}
    if op == "c" and isinstance(inner.get("applyOps"), list):
        txn, lsid, number = _txn(entry)
        out: list[Change | Moved] = []
        for i, sub in enumerate(inner["applyOps"]):
            merged = {**sub, "ts": entry.get("ts"), "h": h, "wall": entry.get("wall")}
            for change in from_oplog(merged, i):
                if isinstance(change, Change):
                    change.txn, change.lsid, change.txn_number = txn, lsid, number
                out.append(change)
        return out
    if tord is not None:
        offset["tord"] = tord
    if op not in _OPS or entry.get("fromMigrate"):
        # fromMigrate: a chunk moving between shards (the recipient's inserts, the donor's
        # deletes), not a change of the collection: emitted, the donor's delete would remove
        # downstream a document that still exists on the recipient
        return [Moved(offset)]
    db, _, coll = str(entry.get("ns", "")).partition(".")
    if op == "i":
        change = Change(Operation.CREATE, db, coll, inner.get("_id"), full=inner)
        change.filter = {"_id": inner.get("_id")}
    elif op == "u":
        selector = entry.get("o2") or {}
        change = Change(
            Operation.UPDATE, db, coll, selector.get("_id"), patch=inner, filter=selector
        )
        change.update = update_description_of(inner)
        if change.update is None:
            change.full = inner  # a replacement: the whole new document
    else:
        change = Change(Operation.DELETE, db, coll, inner.get("_id"), filter=inner)
    txn, lsid, number = _txn(entry)
    change.txn = change.txn or txn
    change.lsid, change.txn_number = change.lsid or lsid, change.txn_number or number
    change.sec, change.ord, change.h = sec, ord_, offset["h"]
    change.wall_ms = _wall(entry.get("wall"))
    change.offset = offset
    return [change]


class Shapes:
    """The collection tables and the per-shape row of a change."""

    def __init__(self, shape: str, selector: FieldSelector) -> None:
        self.shape = shape
        self.columns = COLUMNS[shape]
        self.selector = selector

    def table(self, db: str, coll: str, rs: str | None = None) -> Table:
        """The collection as a document table; ``rs`` names it in transaction metadata as the
        seed does (``data_collection`` ``rs0.<db>.<collection>``)."""
        cols = tuple(
            Column(name, i, "id" if name == "id" else name, optional=name != "id")
            for i, name in enumerate(self.columns)
        )
        extra: dict[str, Any] = {"flat_envelope": True}
        if rs:
            extra["data_collection"] = f"{rs}.{db}.{coll}"
        return Table(TableId(db, None, coll), cols, ("id",), extra=extra)

    def _doc(self, rules: CollectionFields | None, doc: Mapping[str, Any] | None) -> str | None:
        if doc is None:
            return None
        return dumps(rules.document(doc) if rules else doc)

    def row(self, change: Change) -> tuple[Any, ...]:
        rules = self.selector.for_collection(change.db, change.coll)
        ident = key_id(change.doc_id)
        op = change.op
        if self.shape == SHAPE_V1:
            if op in (Operation.CREATE, Operation.READ):
                return (ident, self._doc(rules, change.full), None, None)
            flt = dumps(change.filter)
            if op == Operation.UPDATE:
                patch = change.patch or {}
                return (ident, None, dumps(rules.patch(patch) if rules else patch), flt)
            return (ident, None, None, flt)
        before = self._doc(rules, change.before)
        after = self._doc(rules, change.full) if op != Operation.DELETE else None
        desc = None
        if op == Operation.UPDATE and change.update is not None:
            updated = change.update.get("updatedFields") or {}
            removed = change.update.get("removedFields") or []
            desc = {
                "removedFields": rules.path_list(removed) if rules else list(removed),
                "updatedFields": dumps(rules.paths(updated) if rules else updated),
                "truncatedArrays": [
                    {"field": t["field"], "size": int(t.get("newSize", t.get("size", 0)))}
                    for t in change.update.get("truncatedArrays") or []
                ],
            }
        return (ident, before, after, desc)


class DocumentConverters:
    """The core's type mapping for document tables: the key string, JSON strings, and the
    update description struct."""

    def schema_for(self, table: Table, column: Column) -> Schema:
        if column.type_name == "id":
            return STRING
        if column.type_name == "updateDescription":
            return UPDATE_DESCRIPTION
        return JSON

    def converter_for(self, table: Table, column: Column) -> None:
        return None
