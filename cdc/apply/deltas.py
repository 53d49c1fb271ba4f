"""Cassandra sets and maps written by element: deltas of the stored collection.

A non-frozen ``set`` or ``map`` column is one cell per element in Cassandra. ``s = s + {3}``,
``s = s - {1}``, ``m['k'] = v`` and ``DELETE m['k']`` write or delete single elements and leave
the others as they are, with no read before the write. The connector's cell for such a write
holds the elements (entries) it added in ``value`` and the ones it removed in ``removed``
(connectors/cassandra/mutation.py); ``removed`` is null for a whole write (``INSERT``,
``s = {...}``, a snapshot read). Taking ``value`` as the column's new value, as for any other
column, made the column just the added elements and never removed one.

So a delta is applied to the collection before it: ``(before + added) - removed``, the removal
winning within one write (Cassandra's tombstone wins a tie). The worker's fold keeps every
write of such a column in the batch and applies them in position order, whatever order they
arrived in (fold.py): the newest whole value above the batch's deletes with the later deltas
applied, or the deltas composed into one when there is no whole value; what is still relative
to the stored row is applied by the MERGE (:func:`sql`), to the stored value when that
survives the row's deletes. An empty result is null: Cassandra has no empty non-frozen
collection.

Not exact, because the table keeps no write time per element:

* a delta whose write time is *older* than the column's stored cell (a late write,
  cell_merge.py) is dropped, as any late cell is; Cassandra would still take the elements no
  newer write touched;
* a whole value of the batch with deltas after it counts at the newest delta's position: if
  the stored collection holds elements newer than the whole value (it arrived late), they are
  replaced, where Cassandra keeps them;
* a key folded by two worker tasks (its topic's partition count changed) keeps the newer
  task's delta only (changelog.fold).

Lists are not deltas (their elements are addressed by a hidden cell path, so a removal cannot
be told by value): their element-wise writes still replace the column.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdc.apply import sparktypes as st

#: the MERGE source's struct of each delta's removed elements, by column (typed_rows)
REMOVED = "_tm_rm"


@dataclass(frozen=True, slots=True)
class Delta:
    """An element-wise write, relative to the collection before it: ``added`` (a list for a
    set, a dict for a map) and ``removed`` (the same form: a map's removed keys map to None)."""

    added: Any
    removed: Any


def removed_form(removed: list[Any], is_map: bool) -> Any:
    """The connector's list of removed elements or keys in the column's own form, so the
    column's normalizer and Spark's ``from_json`` read it as they read the column."""
    return dict.fromkeys(removed) if is_map else list(removed)


def apply(before: Any, delta: Delta) -> Any:
    """``delta`` applied to ``before`` (a whole value, or None: no collection), or composed
    with it when ``before`` is a delta too; the result is of ``before``'s kind."""
    if isinstance(before, Delta):
        return _compose(before, delta)
    if isinstance(delta.added, Mapping) or isinstance(before, Mapping):
        added = dict(delta.added or {})
        gone = set(delta.removed or ())
        base = dict(before or {})
        out = {k: v for k, v in base.items() if k not in gone and k not in added}
        out.update((k, v) for k, v in added.items() if k not in gone)
        return out or None
    gone_list = list(delta.removed or ())
    kept = [x for x in (before or []) if x not in gone_list]
    kept += [x for x in (delta.added or []) if x not in gone_list and x not in kept]
    return kept or None


def _compose(first: Delta, second: Delta) -> Delta:
    """One delta doing what ``first`` then ``second`` do to any collection."""
    if isinstance(second.added, Mapping) or isinstance(first.added, Mapping):
        a1, a2 = dict(first.added or {}), dict(second.added or {})
        r1, r2 = dict(first.removed or {}), dict(second.removed or {})
        added = {k: v for k, v in a1.items() if k not in r1 and k not in r2 and k not in a2}
        added.update((k, v) for k, v in a2.items() if k not in r2)
        removed = dict.fromkeys([*r2, *(k for k in r1 if k not in a2 and k not in r2)])
        return Delta(added, removed)
    l1, l2 = list(first.added or []), list(second.added or [])
    g1, g2 = list(first.removed or []), list(second.removed or [])
    added_list = [x for x in l1 if x not in g1 and x not in g2 and x not in l2]
    added_list += [x for x in l2 if x not in g2 and x not in added_list]
    removed_list = list(g2) + [x for x in g1 if x not in l2 and x not in g2]
    return Delta(added_list, removed_list)


# -- the MERGE ------------------------------------------------------------------------------
def is_collection(t: st.SparkType) -> bool:
    """A column a delta may write: an array (set) or a map."""
    return isinstance(t, Mapping) and t.get("type") in ("array", "map")


def columns(types: Mapping[str, st.SparkType], key: tuple[str, ...]) -> dict[str, st.SparkType]:
    return {c: t for c, t in types.items() if c not in key and is_collection(t)}


def sql(col: str, t: st.SparkType, before: str, source: str = "s") -> str:
    """The column's new value from the source row: its value, or its delta applied to
    ``before`` (an SQL expression of the collection before it: the stored value or NULL)."""
    q = st.quote(col)
    added, removed = f"{source}.{q}", f"{source}.{REMOVED}.{q}"
    empty = f"CAST({'map()' if t.get('type') == 'map' else 'array()'} AS {st.ddl(t)})"
    base, plus = f"coalesce({before}, {empty})", f"coalesce({added}, {empty})"
    if t.get("type") == "map":
        rm = f"map_keys(coalesce({removed}, {empty}))"
        kept = f"map_filter({base}, (k, v) -> NOT array_contains(map_keys({plus}), k))"
        result = f"map_filter(map_concat({kept}, {plus}), (k, v) -> NOT array_contains({rm}, k))"
    else:
        result = f"array_except(array_union({base}, {plus}), coalesce({removed}, {empty}))"
    # the result twice: a MERGE's set expression cannot bind it once (Spark's code generation
    # evaluates the common subexpression once)
    return (
        f"CASE WHEN {removed} IS NULL THEN {added} "
        f"WHEN size({result}) = 0 THEN NULL ELSE {result} END"
    )
