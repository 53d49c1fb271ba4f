"""Per-key reduction of one micro-batch: the ``preCombine`` role of Hudi RFC-39, done right.

Of all changes to one key in a batch, the one with the highest source position wins (never
the last to arrive: AC-79 sends LSN 5 before LSN 4). The winner is applied by one MERGE, so a
batch costs one write per key however many times the key changed.

The winner may carry TOAST placeholders ("unchanged, not sent"). Its true value is then the
value the *preceding* change (by position) had, which may be in this very batch: an insert
followed by an update in one batch must not lose the insert's text. So besides the winner a
fold keeps, per placeholder column of the winner, the best candidate value seen so far: from
the change with the highest position below the winner's that had a real value, and never from
before a delete (a delete ends the row's life; what follows it is a new row). Positions of
those candidates travel with the row so the merge can still prefer the stored row when the
table already holds something newer than the candidate (a late batch).

This is incremental and O(placeholder columns) per change, which matters: it runs in Python for
every event. Events usually arrive in position order; older ones (out of order) only ever fill
placeholders or move the delete horizon.

Primary-key changes (see handover.py): the create of the new key (``__debezium.oldkey``) starts
a new life, so its placeholders are never filled from the key's earlier changes; they become a
:class:`Ref` to the image the old key hands over at that position. The delete of the old key
(``__debezium.newkey``) captures that image: the old key's values just before the delete, as far
as this batch knows them (an :class:`Image`; the driver completes it from the table).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cdc.apply import deltas
from cdc.apply.deltas import Delta
from cdc.apply.documents import DOCUMENT, apply_steps
from cdc.apply.events import Change
from cdc.apply.policy import is_cell_layout

Pos = tuple[int, ...]


def key_change_id(pos: Pos) -> Pos:
    """What the delete of the old key and the create of the new key share: the position
    without the Kafka offset (the last element in every layout)."""
    return pos[:-1]


@dataclass(frozen=True, slots=True)
class Ref:
    """A column's value is the one in the image handed over to key ``key`` at the key change
    ``kc`` (not known in this batch)."""

    key: str
    kc: Pos


@dataclass(slots=True)
class Image:
    """The old key's values just before a key change, as far as one batch knows them: column ->
    (position, value or :class:`Ref`). Columns in ``names`` but not in ``cols`` come from the
    stored row (or are held) — the driver completes the image."""

    new_key: str
    kc: Pos
    old_key: str
    pos: Pos
    key_row: dict[str, Any]
    names: tuple[str, ...]
    cols: dict[str, tuple[Pos, Any]]


@dataclass(slots=True)
class Folded:
    winner: Change
    #: column -> (position, value or Ref): candidates for the winner's unavailable columns
    fills: dict[str, tuple[Pos, Any]] = field(default_factory=dict)
    #: the highest delete position below the winner's; candidates must be above it
    delete_horizon: Pos | None = None
    #: number of changes folded into this one
    count: int = 1
    #: images handed over by deletes of this key that changed the key
    images: list[Image] = field(default_factory=list)
    #: the position of the newest change that writes a row marker (:data:`MARKS`) above the
    #: delete horizon: a Cassandra row lives while it has one, even with every cell null
    marker: Pos | None = None
    #: Cassandra sets and maps: every write of the column in the batch (position -> whole
    #: value or :class:`~cdc.apply.deltas.Delta`), in any arrival order; :func:`resolve`
    #: applies them in position order above the delete horizon (deltas.py)
    parts: dict[str, dict[Pos, Any]] = field(default_factory=dict)


#: the ops whose row has a Cassandra row marker: an ``INSERT``, and a snapshot read (its row
#: was live when read)
MARKS = frozenset({"c", "r"})


def _marker(change: Change, below: Pos | None = None) -> Pos | None:
    """The row marker ``change`` writes, else the one ``below`` it (None when it deletes)."""
    if change.op in MARKS:
        return change.pos
    return None if change.op == "d" else below


def is_key_change_create(change: Change) -> bool:
    return change.op == "c" and change.old_key is not None


def _candidate(change: Change, col: str) -> tuple[Pos, Any] | None:
    """What ``change`` says about ``col``: its value, a Ref (the create of a key change), a
    :class:`~cdc.apply.deltas.Delta` (a Cassandra set or map written by element), or nothing
    (a placeholder, or a column it does not have)."""
    if col in change.unavailable:
        if is_key_change_create(change):
            return change.pos, Ref(change.key_json, key_change_id(change.pos))
        return None
    if col in change.row:
        if change.removed and col in change.removed:
            return change.pos, Delta(change.row[col], change.removed[col])
        return change.pos, change.row[col]
    return None


def _pre_image(state: Folded | None, delete: Change) -> Image:
    names = tuple(delete.shape.placeholder_forms)
    cols: dict[str, tuple[Pos, Any]] = {}
    if state is not None:
        w = state.winner
        if w.op != "d" and w.pos < delete.pos:
            for col in names:
                cand = _candidate(w, col)
                if cand is None and col in w.unavailable:
                    cand = state.fills.get(col)
                if cand is not None:
                    cols[col] = cand
    assert delete.new_key is not None
    return Image(
        delete.new_key,
        key_change_id(delete.pos),
        delete.key_json,
        delete.pos,
        {k: delete.row.get(k) for k in delete.key_fields},
        names,
        cols,
    )


def fold(state: Folded | None, change: Change) -> Folded:
    """Folds one more change of the same key into ``state`` (which it may update in place)."""
    if change.op == "d" and change.new_key is not None:
        image = _pre_image(state, change)
        state = _fold(state, change)
        state.images.append(image)
        return state
    state = _fold(state, change)
    if change.op != "d" and is_cell_layout(change.layout):
        _keep_parts(state, change)
    return state


#: the set and map columns of each row shape (by digest): looked up once per shape, not per
#: column of every change
_COLLECTIONS: dict[str, tuple[str, ...]] = {}


def _keep_parts(state: Folded, change: Change) -> None:
    shape = change.shape
    names = _COLLECTIONS.get(shape.digest)
    if names is None:
        names = tuple(c for c, t in shape.types.items() if deltas.is_collection(t))
        _COLLECTIONS[shape.digest] = names
    for col in names:
        if col in change.unavailable or col not in change.row:
            continue
        value = change.row[col]
        part = (
            Delta(value, change.removed[col]) if change.removed and col in change.removed else value
        )
        state.parts.setdefault(col, {})[change.pos] = part


def _collection(state: Folded, col: str) -> tuple[Pos, Any] | None:
    """A set's or map's value from the batch's writes of it (``state.parts``) when any was by
    element: the newest whole value above the delete horizon with the later deltas applied in
    position order, or, without one, the deltas composed (for the MERGE to apply to the stored
    value); with the position of the newest write. None: no delta, the fold's value stands."""
    written = state.parts.get(col)
    if not written or not any(isinstance(v, Delta) for v in written.values()):
        return None
    horizon = state.delete_horizon
    live = sorted((p, v) for p, v in written.items() if horizon is None or p > horizon)
    if not live:
        return None
    start = max((i for i, (_, v) in enumerate(live) if not isinstance(v, Delta)), default=None)
    value: Any = live[start][1] if start is not None else live[0][1]
    for _, v in live[(start if start is not None else 0) + 1 :]:
        value = deltas.apply(value, v)
    return live[-1][0], value


def _fold(state: Folded | None, change: Change) -> Folded:
    if state is None:
        return Folded(change, marker=_marker(change))
    state.count += 1
    winner = state.winner
    if change.pos > winner.pos:
        return _new_winner(state, change)
    if change.pos == winner.pos:
        return state  # the same event again (a duplicate record): nothing new
    # An older change: it can only fill placeholders of the winner, move the delete horizon or
    # give the row an older marker.
    horizon = state.delete_horizon
    if change.op == "d":
        if horizon is None or change.pos > horizon:
            state.delete_horizon = change.pos
            state.fills = {c: v for c, v in state.fills.items() if v[0] > change.pos}
            if state.marker is not None and state.marker <= change.pos:
                state.marker = None
        return state
    if change.op in MARKS and (horizon is None or change.pos > horizon):
        state.marker = max(state.marker or change.pos, change.pos)
    if winner.op == "d" or not winner.unavailable or is_key_change_create(winner):
        return state
    if winner.patch is not None:
        return state  # an older change of a patched document: a replayed duplicate
    if horizon is not None and change.pos < horizon:
        return state
    for col in winner.unavailable:
        cand = _candidate(change, col)
        if cand is None:
            continue
        best = state.fills.get(col)
        if best is None or change.pos > best[0]:
            state.fills[col] = cand
    return state


def _new_winner(state: Folded, change: Change) -> Folded:
    old = state.winner
    if old.op == "d":
        return Folded(change, {}, old.pos, state.count, state.images, _marker(change), state.parts)
    marker = _marker(change, state.marker)
    if change.patch is not None:  # MongoDB: applied to the preceding document (documents.py)
        composed = compose(old, change)
        horizon = state.delete_horizon
        return Folded(composed, {}, horizon, state.count, state.images, marker, state.parts)
    fills: dict[str, tuple[Pos, Any]] = {}
    if not is_key_change_create(change):  # a key change's create starts a new life
        for col in change.unavailable:
            cand = _candidate(old, col)
            if cand is None and col in old.unavailable and not is_key_change_create(old):
                cand = state.fills.get(col)
            if cand is not None:
                fills[col] = cand
    horizon = state.delete_horizon
    return Folded(change, fills, horizon, state.count, state.images, marker, state.parts)


@dataclass(slots=True)
class Resolved:
    """The row to merge for one key."""

    change: Change
    row: dict[str, Any]
    #: placeholder columns with no candidate in the batch: the merge keeps the stored value
    unavailable: tuple[str, ...]
    #: column -> position of the in-batch value used for a placeholder column
    fill_positions: dict[str, Pos]
    #: placeholder columns whose value another key hands over in a key change (column ->
    #: (position of the create, Ref)): the driver fills them, or holds the row until it can
    refs: dict[str, tuple[Pos, Ref]] = field(default_factory=dict)
    #: the position of a delete of the key in the batch that the row was written after: the
    #: row lives anew, so a Cassandra MERGE keeps no stored cell older than it (cell_merge.py)
    cut: Pos | None = None
    #: columns whose value in ``row`` is what a delta added to the stored collection, and what
    #: it removed (deltas.py)
    removed: dict[str, Any] | None = None
    #: the newest row marker of the key's changes in the batch above its cut (Folded.marker)
    marker: Pos | None = None


def resolve(state: Folded) -> Resolved:
    out = _resolve(state)
    if state.parts and out.change.op != "d":
        for col in state.parts:
            found = _collection(state, col)
            if found is not None:
                _set_collection(out, col, *found)
    return out


def _set_collection(out: Resolved, col: str, pos: Pos, value: Any) -> None:
    if out.row is out.change.row:
        out.row = dict(out.row)
    removed = dict(out.removed or {})
    if isinstance(value, Delta):
        out.row[col], removed[col] = value.added, value.removed
    else:
        out.row[col] = value
        removed.pop(col, None)
    out.removed = removed or None
    out.unavailable = tuple(c for c in out.unavailable if c != col)
    if pos == out.change.pos:
        out.fill_positions.pop(col, None)
    else:
        out.fill_positions = {**out.fill_positions, col: pos}


def _resolve(state: Folded) -> Resolved:
    change = state.winner
    cut = state.delete_horizon if change.op != "d" else None
    removed = dict(change.removed) if change.removed else None
    marker = state.marker if change.op != "d" else None
    if change.op == "d" or not change.unavailable:
        return Resolved(change, change.row, (), {}, cut=cut, removed=removed, marker=marker)
    row = dict(change.row)
    missing: list[str] = []
    positions: dict[str, Pos] = {}
    refs: dict[str, tuple[Pos, Ref]] = {}
    own = _candidate if is_key_change_create(change) else None
    for col in sorted(change.unavailable):
        cand = own(change, col) if own is not None else state.fills.get(col)
        if cand is None:
            row[col] = None
            missing.append(col)
        elif isinstance(cand[1], Ref):
            row[col] = None
            refs[col] = (cand[0], cand[1])
        elif isinstance(cand[1], Delta):
            row[col] = cand[1].added
            positions[col] = cand[0]
            removed = {**(removed or {}), col: cand[1].removed}
        else:
            row[col] = cand[1]
            positions[col] = cand[0]
    return Resolved(change, row, tuple(missing), positions, refs, cut, removed, marker)


def reduce_changes(changes: Iterable[Change]) -> dict[tuple[str, str], Resolved]:
    """Folds a whole sequence, keyed by (table, key JSON). Truncates are not keyed and must be
    handled by the caller; this is the reference the worker's streaming version follows."""
    states: dict[tuple[str, str], Folded] = {}
    for change in changes:
        k = (change.table, change.key_json)
        states[k] = fold(states.get(k), change)
    return {k: resolve(s) for k, s in states.items()}


def compose(old: Change, change: Change) -> Change:
    """A MongoDB patch in the fold: ``change`` (a patch, newer than ``old``, which is not a
    delete) as the new winner: the patch applied to ``old``'s document, or appended to
    ``old``'s own patch steps."""
    assert change.patch is not None
    if old.patch is not None:
        return dataclasses.replace(change, patch=[*old.patch, *change.patch])
    base = old.row.get(DOCUMENT)
    if DOCUMENT in old.unavailable or not isinstance(base, str):
        return change
    row = dict(change.row)
    row[DOCUMENT] = apply_steps(base, change.patch, None)
    return dataclasses.replace(change, row=row, unavailable=frozenset(), patch=None)
