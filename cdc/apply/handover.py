"""Unavailable values across primary-key changes, filled without querying the source.

A primary-key change (``UPDATE t SET id = 2 WHERE id = 1``) reaches Kafka as the delete of the
old key (header ``__debezium.newkey``) and the create of the new key (``__debezium.oldkey``),
both at the source position of the update. With ``REPLICA IDENTITY DEFAULT`` an unchanged
out-of-line (TOASTed) value is not sent: the create carries the placeholder, and the new key has
no earlier row to keep the value from. The value is the old key's as of that position, which
the lake knows. This module hands it over:

* The worker folding the old key captures, at its delete, an :class:`~cdc.apply.fold.Image`:
  the old key's placeholder-capable columns just before the delete, as far as the batch knows
  them. The driver completes it from the old key's stored row (or held row, below) when that is
  older than the delete, *before* the MERGE deletes the old key, and keeps it in the key-change
  side table ``<target.path>/_tidemark/keychanges/<table>`` (kind ``image``). An image is
  computed once per key change and never overwritten, so a replay cannot replace it with a
  state from after the key change.
* The worker folding the new key turns the create's placeholders into a
  :class:`~cdc.apply.fold.Ref` to that image (and so do later placeholders of the new key that
  have nothing newer to take the value from). A row with refs is filled from the image when the
  image is known; otherwise it is **held** in the side table (kind ``pending``) and not merged,
  so no placeholder and no made-up NULL reaches the table. The old key's delete is in the old
  key's partition after all its earlier changes, so once the image exists, every change of the
  old key up to the key change has been seen: a lagging partition delays the row, never fills it
  from an older state.
* Chains (A -> B -> C): an image may itself hold refs (B was still held when it changed to C);
  resolution follows them. Later changes of a held key inherit its values and refs; a held row
  older than what the table (or the deleted-keys table) holds for its key is a replay and is
  dropped, so replays never hold rows forever.
* An image is dropped once its new key is stored or deleted at a later position and no held row
  or image still refers to it.

When the old key had no value anywhere (its earlier events never reached the lake) the column
is written as NULL, as for any placeholder without a value, and a warning names the key.

Everything here is plain Python over JSON-able records, run by the driver on the few rows that
take part in key changes; :mod:`cdc.apply.keychanges` does the Spark reads and writes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from cdc.apply.fold import Image, Pos, Ref

log = logging.getLogger("tidemark.apply")


class _Missing:
    """No value anywhere: the old key's earlier state never reached the lake."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
Cand = tuple[Pos, Any]  # (position, value | Ref | MISSING)


# -- JSON forms (worker -> driver, and the side table) ------------------------------------------
def encode_candidate(cand: Cand) -> dict[str, Any]:
    pos, value = cand
    if isinstance(value, Ref):
        return {"p": list(pos), "ref": [value.key, list(value.kc)]}
    if value is MISSING:
        return {"p": list(pos), "missing": True}
    return {"p": list(pos), "v": value}


def decode_candidate(doc: Mapping[str, Any]) -> Cand:
    pos = tuple(doc["p"])
    if "ref" in doc:
        key, kc = doc["ref"]
        return pos, Ref(key, tuple(kc))
    if doc.get("missing"):
        return pos, MISSING
    return pos, doc.get("v")


def encode_image(image: Image) -> dict[str, Any]:
    return {
        "new_key": image.new_key,
        "kc": list(image.kc),
        "old_key": image.old_key,
        "pos": list(image.pos),
        "key_row": image.key_row,
        "names": list(image.names),
        "cols": {c: encode_candidate(v) for c, v in image.cols.items()},
    }


def decode_image(doc: Mapping[str, Any]) -> Image:
    return Image(
        doc["new_key"],
        tuple(doc["kc"]),
        doc["old_key"],
        tuple(doc["pos"]),
        dict(doc["key_row"]),
        tuple(doc["names"]),
        {c: decode_candidate(v) for c, v in doc["cols"].items()},
    )


def key_text(key_row: Mapping[str, Any]) -> str:
    return orjson.dumps(dict(key_row), option=orjson.OPT_SORT_KEYS).decode()


def row_key(record: Mapping[str, Any], key_cols: Iterable[str]) -> dict[str, Any]:
    """The typed-form key of a worker row (from its row JSON, where values are normalized)."""
    row = orjson.loads(record["row_json"])
    return {k: row.get(k) for k in key_cols}


def refs_of(record: Mapping[str, Any]) -> dict[str, Cand]:
    raw = record.get("refs")
    if not raw:
        return {}
    return {c: decode_candidate(v) for c, v in orjson.loads(raw).items()}


def _pos(record: Mapping[str, Any]) -> Pos:
    return tuple(record["pos"])


# -- state -------------------------------------------------------------------------------------
@dataclass
class Lookup:
    """What the lake holds for one key before this batch's MERGE."""

    pos: Pos | None = None  # the stored row's position
    values: dict[str, Any] = field(default_factory=dict)  # its placeholder-capable columns
    deleted: Pos | None = None  # the highest remembered delete position


@dataclass
class KeyChanges:
    """One table's images and held rows (the key-change side table's content)."""

    images: dict[tuple[str, Pos], Image] = field(default_factory=dict)
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)  # key JSON -> worker row

    def copy(self) -> KeyChanges:
        return KeyChanges(dict(self.images), {k: dict(r) for k, r in self.pending.items()})

    def truncate(self, pos: Pos) -> None:
        """A source TRUNCATE: what was before it no longer matters."""
        self.images = {k: v for k, v in self.images.items() if v.pos > pos}
        self.pending = {k: r for k, r in self.pending.items() if _pos(r) > pos}


@dataclass
class Outcome:
    merge: list[dict[str, Any]] = field(default_factory=list)  # rows to MERGE now
    filled: int = 0
    held: int = 0
    dropped: int = 0
    missing: list[str] = field(default_factory=list)  # "key.column" without any value
    images_added: bool = False


def lookup_keys(
    state: KeyChanges,
    new_images: Iterable[Image],
    incoming: Iterable[Mapping[str, Any]],
    key_cols: tuple[str, ...],
) -> list[dict[str, Any]]:
    """Keys whose stored state :func:`step` needs (old keys of new images, held and incoming
    keys, new keys of kept images), typed-form, deduplicated."""
    out: dict[str, dict[str, Any]] = {}
    for image in new_images:
        out.setdefault(key_text(image.key_row), image.key_row)
    for rec in [*incoming, *state.pending.values()]:
        k = row_key(rec, key_cols)
        out.setdefault(key_text(k), k)
    for image in state.images.values():
        k = orjson.loads(image.new_key)
        out.setdefault(key_text(k), k)
    return list(out.values())


def step(
    state: KeyChanges,
    new_images: Iterable[Image],
    incoming: Iterable[dict[str, Any]],
    lookups: Mapping[str, Lookup],
    key_cols: tuple[str, ...],
) -> Outcome:
    """One batch, one table: completes and keeps the batch's images, combines the batch's rows
    that have refs or whose key is held with the held rows, fills what can be filled, drops
    stale held rows and unneeded images. Mutates ``state``; returns the rows to MERGE."""
    out = Outcome()
    for image in new_images:
        k = (image.new_key, image.kc)
        if k in state.images:
            continue  # computed before (a replay): the first image is the true one
        held = state.pending.get(image.old_key)
        stored = lookups.get(key_text(image.key_row))
        if stored is not None and _covers(stored, image.kc):
            continue  # a re-sent key change applied before: its new key is past it too
        state.images[k] = _complete(image, held, stored)
        out.images_added = True
    for rec in sorted(incoming, key=_pos):
        key = rec["key_json"]
        held = state.pending.get(key)
        if held is not None:
            if _pos(rec) <= _pos(held):
                out.dropped += 1  # a replay of what the held row already covers
                continue
            _inherit(rec, held)
            del state.pending[key]
        if rec.get("refs"):
            state.pending[key] = rec
        else:
            out.merge.append(rec)
    for key, rec in list(state.pending.items()):
        stored = lookups.get(key_text(row_key(rec, key_cols)))
        if stored is not None and _covers(stored, _pos(rec)[:-1]):
            # The lake holds this source change (re-sent at another offset) or a later one.
            del state.pending[key]
            out.dropped += 1
        elif _fill(rec, state.images, out):
            del state.pending[key]
            out.merge.append(rec)
            out.filled += 1
    out.held = len(state.pending)
    _collect_images(state, lookups)
    return out


def _complete(image: Image, held: dict[str, Any] | None, stored: Lookup | None) -> Image:
    cols: dict[str, Cand] = {}
    for col in image.names:
        cands: list[Cand] = []
        if col in image.cols:
            cands.append(image.cols[col])
        if held is not None and _pos(held) < image.pos:
            cand = _held_candidate(held, col)
            if cand is not None:
                cands.append(cand)
        if stored is not None and stored.pos is not None and stored.pos < image.pos:
            cands.append((stored.pos, stored.values.get(col)))
        cols[col] = max(cands, key=lambda c: c[0]) if cands else (image.pos, MISSING)
    return Image(
        image.new_key, image.kc, image.old_key, image.pos, image.key_row, image.names, cols
    )


def _held_candidate(held: Mapping[str, Any], col: str) -> Cand | None:
    refs = refs_of(held)
    if col in refs:
        return refs[col]
    if col in (held.get("unavailable") or ()):
        return None
    row = orjson.loads(held["row_json"])
    return (_pos(held), row[col]) if col in row else None


def _inherit(rec: dict[str, Any], held: Mapping[str, Any]) -> None:
    """A newer change of a held key: its placeholders without a value in the batch take the
    held row's value or ref."""
    if rec["op"] == "d":
        return
    unavailable = list(rec.get("unavailable") or ())
    if not unavailable:
        return
    row = orjson.loads(rec["row_json"])
    refs = refs_of(rec)
    fills = dict(rec.get("fills") or {})
    for col in list(unavailable):
        cand = _held_candidate(held, col)
        if cand is None:
            continue
        unavailable.remove(col)
        if isinstance(cand[1], Ref):
            refs[col] = cand
        else:
            row[col] = cand[1]
            fills[col] = list(cand[0])
    rec["row_json"] = orjson.dumps(row).decode()
    rec["unavailable"] = unavailable
    rec["fills"] = fills or None
    rec["refs"] = _encode_refs(refs)


def _encode_refs(refs: Mapping[str, Cand]) -> str | None:
    if not refs:
        return None
    return orjson.dumps({c: encode_candidate(v) for c, v in refs.items()}).decode()


def _follow(ref: Ref, col: str, images: Mapping[tuple[str, Pos], Image]) -> tuple[bool, Any, str]:
    """(known, value, old key) of ``col`` in the image ``ref`` names, following chains: known
    is False while an image on the way has not arrived; the old key is that of the last image
    followed (the key whose value it is, or that had none)."""
    seen: set[Ref] = set()
    while True:
        image = images.get((ref.key, ref.kc))
        if image is None:
            return False, None, ref.key
        cand = image.cols.get(col)
        if cand is None:
            return True, MISSING, image.old_key
        value = cand[1]
        if isinstance(value, Ref):
            if value in seen:
                return True, MISSING, image.old_key
            seen.add(value)
            ref = value
            continue
        return True, value, image.old_key


def _fill(rec: dict[str, Any], images: Mapping[tuple[str, Pos], Image], out: Outcome) -> bool:
    refs = refs_of(rec)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for col, (_, ref) in refs.items():
        known, value, sources[col] = _follow(ref, col, images)
        if not known:
            return False
        values[col] = value
    row = orjson.loads(rec["row_json"])
    fills = dict(rec.get("fills") or {})
    for col, value in values.items():
        if value is MISSING:
            out.missing.append(f"{rec['key_json']}.{col}")
            log.warning(
                "key %s: column %s was handed over by key change at %s from old key %s, which "
                "has no value for it in the lake (its earlier changes never reached it); written "
                "as NULL",
                rec["key_json"],
                col,
                list(refs[col][1].kc),
                sources[col],
            )
            value = None
        row[col] = value
        fills[col] = list(refs[col][0])
    rec["row_json"] = orjson.dumps(row).decode()
    rec["fills"] = fills or None
    rec["refs"] = None
    return True


def _covers(stored: Lookup, source_pos: Pos) -> bool:
    """Whether the lake holds the key at or after ``source_pos`` (a position without its Kafka
    offset: a change re-sent at a later offset is still the same change)."""
    return (stored.pos is not None and stored.pos[:-1] >= source_pos) or (
        stored.deleted is not None and stored.deleted[:-1] >= source_pos
    )


def _collect_images(state: KeyChanges, lookups: Mapping[str, Lookup]) -> None:
    """Drops images whose new key the lake holds at a later position (the image was used or
    its key change is history) unless a held row or another image still refers to it."""
    cands = [c for rec in state.pending.values() for c in refs_of(rec).values()]
    cands += [c for image in state.images.values() for c in image.cols.values()]
    needed = {(c[1].key, c[1].kc) for c in cands if isinstance(c[1], Ref)}
    for k, image in list(state.images.items()):
        if k in needed:
            continue
        stored = lookups.get(key_text(orjson.loads(image.new_key)))
        if stored is not None and _covers(stored, image.kc):
            del state.images[k]
