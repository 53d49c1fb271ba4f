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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cdc.apply.events import Change

Pos = tuple[int, ...]


@dataclass(slots=True)
class Folded:
    winner: Change
    #: column -> (position, value): candidates for the winner's unavailable columns
    fills: dict[str, tuple[Pos, Any]] = field(default_factory=dict)
    #: the highest delete position below the winner's; candidates must be above it
    delete_horizon: Pos | None = None
    #: number of changes folded into this one
    count: int = 1


def fold(state: Folded | None, change: Change) -> Folded:
    """Folds one more change of the same key into ``state`` (which it may update in place)."""
    if state is None:
        return Folded(change)
    state.count += 1
    winner = state.winner
    if change.pos > winner.pos:
        return _new_winner(state, change)
    if change.pos == winner.pos:
        return state  # the same event again (a duplicate record): nothing new
    # An older change: it can only fill placeholders of the winner or move the delete horizon.
    horizon = state.delete_horizon
    if change.op == "d":
        if horizon is None or change.pos > horizon:
            state.delete_horizon = change.pos
            state.fills = {c: v for c, v in state.fills.items() if v[0] > change.pos}
        return state
    if winner.op == "d" or not winner.unavailable:
        return state
    if horizon is not None and change.pos < horizon:
        return state
    for col in winner.unavailable:
        if col in change.unavailable or col not in change.row:
            continue
        best = state.fills.get(col)
        if best is None or change.pos > best[0]:
            state.fills[col] = (change.pos, change.row[col])
    return state


def _new_winner(state: Folded, change: Change) -> Folded:
    old = state.winner
    if old.op == "d":
        return Folded(change, {}, old.pos, state.count)
    fills: dict[str, tuple[Pos, Any]] = {}
    for col in change.unavailable:
        if col not in old.unavailable and col in old.row:
            fills[col] = (old.pos, old.row[col])
        elif col in state.fills:
            fills[col] = state.fills[col]
    return Folded(change, fills, state.delete_horizon, state.count)


@dataclass
class Resolved:
    """The row to merge for one key."""

    change: Change
    row: dict[str, Any]
    #: placeholder columns with no candidate in the batch: the merge keeps the stored value
    unavailable: tuple[str, ...]
    #: column -> position of the in-batch value used for a placeholder column
    fill_positions: dict[str, Pos]


def resolve(state: Folded) -> Resolved:
    change = state.winner
    if change.op == "d" or not change.unavailable:
        return Resolved(change, change.row, (), {})
    row = dict(change.row)
    missing: list[str] = []
    positions: dict[str, Pos] = {}
    for col in sorted(change.unavailable):
        cand = state.fills.get(col)
        if cand is None:
            row[col] = None
            missing.append(col)
        else:
            row[col] = cand[1]
            positions[col] = cand[0]
    return Resolved(change, row, tuple(missing), positions)


def reduce_changes(changes: Iterable[Change]) -> dict[tuple[str, str], Resolved]:
    """Folds a whole sequence, keyed by (table, key JSON). Truncates are not keyed and must be
    handled by the caller; this is the reference the worker's streaming version follows."""
    states: dict[tuple[str, str], Folded] = {}
    for change in changes:
        k = (change.table, change.key_json)
        states[k] = fold(states.get(k), change)
    return {k: resolve(s) for k, s in states.items()}
