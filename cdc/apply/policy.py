"""Schema checks and evolution: what an incoming row schema may do to a table.

The unit is the *descriptor*: one (table, row schema, key columns) combination, identified by a
hash. Descriptors are checked once per batch, not once per event.

* **Added columns** (and added struct fields) are always added, whatever the policy.
* **Key columns** must equal the table's key; anything else is bad input (the merge would match
  the wrong rows).
* **Other changes** follow ``schema.evolution``:

  ``evolve``  a type the table column already holds exactly (int into bigint, decimal(5,2)
              into decimal(10,2), anything but binary into string) is read into it; a type
              Delta can widen the column to (int -> bigint, float -> double, decimal precision
              or scale up, date -> timestamp_ntz) widens it with Delta type widening; any other
              type change is rejected. A removed column stays in the table and is written as
              NULL from then on.
  ``fail``    any type change or removed column is rejected.
  ``ignore``  the table is never changed except for additions. Values of a column whose type
              changed are converted with ``try_cast`` (NULL when they do not convert); a removed
              column keeps its stored value on updates and is NULL on inserts.

A descriptor the table has accepted before is always accepted again, so replaying old batches
(exactly-once recovery) or late events written under an older source schema never fail on a
change the table has already absorbed.

Both the workers (to keep rejected events out of the per-key fold) and the driver (to plan the
DDL) run :func:`plan_table`, so they agree by construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from cdc.apply import sparktypes as st

Policy = Literal["evolve", "fail", "ignore"]


@dataclass(frozen=True)
class Descriptor:
    id: str
    table: str
    columns: tuple[tuple[str, Any], ...]  # (name, Spark type or None when not known yet)
    key: tuple[str, ...]
    layout: str
    inferred: bool = False
    #: where it was first seen, for error messages
    topic: str = ""
    partition: int = 0
    offset: int = 0

    def types(self) -> dict[str, Any]:
        return dict(self.columns)

    def where(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


@dataclass(frozen=True)
class TableState:
    """What the planner needs to know about an existing table (data columns only)."""

    columns: tuple[tuple[str, Any], ...]
    key: tuple[str, ...]
    layout: str
    accepted: frozenset[str] = frozenset()

    def types(self) -> dict[str, Any]:
        return dict(self.columns)


@dataclass
class TablePlan:
    table: str
    state: TableState | None  # before this batch
    create: bool = False
    columns: dict[str, Any] = field(default_factory=dict)  # after this batch's changes
    key: tuple[str, ...] = ()
    layout: str = ""
    add: list[tuple[str, Any]] = field(default_factory=list)  # (column path, type)
    widen: list[tuple[str, Any]] = field(default_factory=list)
    #: columns read as STRING and converted with try_cast (ignore policy)
    cast: set[str] = field(default_factory=set)
    #: descriptor id -> data columns it lacks that must keep the stored value (ignore policy)
    keep_absent: dict[str, set[str]] = field(default_factory=dict)
    accepted: set[str] = field(default_factory=set)
    rejected: dict[str, str] = field(default_factory=dict)  # descriptor id -> reason

    def init_from_state(self) -> None:
        if self.state is not None:
            self.columns = self.state.types()
            self.key = self.state.key
            self.layout = self.state.layout
            self.accepted = set(self.state.accepted)

    @property
    def new_accepted(self) -> set[str]:
        old = self.state.accepted if self.state else frozenset()
        return self.accepted - old

    def read_types(self) -> dict[str, Any]:
        """The type each column is parsed as by ``from_json``."""
        return {c: ("string" if c in self.cast else t) for c, t in self.columns.items()}


def plan_table(
    table: str,
    state: TableState | None,
    descriptors: Iterable[Descriptor],
    policy: Policy,
    reserved: frozenset[str] = frozenset(),
) -> TablePlan:
    """Checks descriptors in order (callers sort them by where they were first seen) and
    accumulates the changes to ``table``."""
    plan = TablePlan(table, state)
    plan.init_from_state()
    for d in descriptors:
        check_descriptor(plan, d, policy, reserved)
    return plan


def check_descriptor(
    plan: TablePlan,
    d: Descriptor,
    policy: Policy,
    reserved: frozenset[str] = frozenset(),
    *,
    types: bool = True,
) -> str | None:
    """Checks one descriptor against the plan so far and records the outcome: the reason it
    is rejected, or None (and the plan now includes its changes). ``types=False`` checks only
    the key and the ordering layout (schemaless rows, whose types are known later)."""
    reason = _check(plan, d, policy, reserved, types)
    if reason is not None:
        plan.rejected[d.id] = reason
    else:
        plan.accepted.add(d.id)
    return reason


def _check(
    plan: TablePlan, d: Descriptor, policy: Policy, reserved: frozenset[str], types: bool
) -> str | None:
    for name, _ in d.columns:
        if name in reserved:
            return f"column {name!r} collides with the job's meta column of that name"
    incoming = d.types()
    if plan.state is None and not plan.create:
        # First sight: the table is created from this descriptor.
        plan.create = True
        plan.key = d.key
        plan.layout = d.layout
        for name, t in d.columns:
            if t is not None:
                plan.columns[name] = t
            elif name in d.key:
                plan.columns[name] = "string"
            # a schemaless column seen only as null is added once a value shows its type
        return None
    if set(d.key) != set(plan.key):
        return f"key ({', '.join(d.key)}) does not match the table's key ({', '.join(plan.key)})"
    if d.layout != plan.layout:
        return (
            f"ordering layout {d.layout} differs from the table's {plan.layout}: positions "
            "built by different rules cannot be compared (rebuild the table, or restore the "
            "ordering.* settings it was built with)"
        )
    if not types:
        return None
    known = d.id in plan.accepted
    # Check everything before changing anything: a rejected descriptor changes nothing.
    adds: list[tuple[str, Any]] = []  # (DDL column path, type)
    new_types: dict[str, Any] = {}  # column -> its type after this descriptor
    widens: list[tuple[str, Any]] = []
    casts: set[str] = set()
    for name, itype in d.columns:
        if itype is None:
            continue  # schemaless null: nothing known about the type yet
        if name not in plan.columns:
            adds.append((st.quote(name), itype))
            new_types[name] = itype
            continue
        ttype = plan.columns[name]
        nested = st.added_nested_fields(ttype, itype, st.quote(name))
        merged = st.with_added_fields(ttype, itype) if nested else ttype
        if st.fits(merged, itype):
            if nested:
                adds.extend(nested)
                new_types[name] = merged
            elif merged != itype and policy == "fail" and not known:
                return f"type of column {name!r} changed from {_show(ttype)} to {_show(itype)}"
            continue
        if policy == "ignore" or known:
            casts.add(name)
            continue
        if policy == "fail":
            return f"type of column {name!r} changed from {_show(ttype)} to {_show(itype)}"
        wider = st.widened(ttype, itype)
        if wider is None:
            return (
                f"type of column {name!r} changed from {_show(ttype)} to {_show(itype)}, which "
                "Delta cannot widen (schema.evolution=evolve); use schema.evolution=ignore or "
                "rebuild the table"
            )
        widens.append((name, wider))
        new_types[name] = wider
    missing = [c for c in plan.columns if c not in incoming and c not in d.key]
    if missing and policy == "fail" and not known:
        return f"column(s) {', '.join(missing)} removed from the source row"
    if missing and policy == "ignore":
        plan.keep_absent[d.id] = set(missing)
    plan.add.extend(adds)
    plan.widen.extend(widens)
    plan.columns.update(new_types)
    plan.cast |= casts
    return None


def _show(t: Any) -> str:
    try:
        return st.ddl(t)
    except st.TypeMappingError:
        return str(t)


def state_from_schema(
    fields: Iterable[Mapping[str, Any]], properties: Mapping[str, str]
) -> TableState:
    """A table's state from its Spark schema (``StructType.jsonValue()["fields"]``) and the
    properties the job stored on it."""
    cols = tuple((f["name"], f["type"]) for f in fields if f["name"] not in RESERVED)
    key = tuple(k for k in properties.get(KEY_PROPERTY, "").split(",") if k)
    accepted = frozenset(a for a in properties.get(ACCEPTED_PROPERTY, "").split(",") if a)
    return TableState(cols, key, properties.get(LAYOUT_PROPERTY, ""), accepted)


#: Columns the job adds to every table, with their Spark types. Source columns of these names
#: are rejected (they would be overwritten).
META_TYPES: dict[str, Any] = {
    "__op": "string",
    "__pos": st.array_of("long"),
    "__source_ts_ms": "long",
    "__ts_ms": "long",
    "__tx_id": "string",
    "__snapshot": "boolean",
    "__source_position": "string",
    "__topic": "string",
    "__partition": "integer",
    "__offset": "long",
}
#: Helper columns of a MERGE source (merge.py, cell_merge.py; never stored): the placeholder
#: columns no change of the batch filled, the fill positions, the row's schema descriptor.
UNAVAILABLE = "_tm_unavailable"
FILLS = "_tm_fills"
DESCRIPTOR = "_tm_descriptor"

#: The column only Cassandra tables carry: each cell's position where it differs from the
#: row's (cell_merge.py).
CELLS = "__cells"
CELL_META_TYPES: dict[str, Any] = {
    CELLS: {
        "type": "map",
        "keyType": "string",
        "valueType": st.array_of("long"),
        "valueContainsNull": True,
    }
}
RESERVED = frozenset(META_TYPES) | frozenset(CELL_META_TYPES)


def is_cell_layout(layout: str) -> bool:
    """A table ordered as Cassandra's: its columns are cells (cells.py, cell_merge.py)."""
    return ":cassandra:" in layout


#: Columns of the side table that remembers deleted keys (besides the key columns).
DELETE_META_TYPES: dict[str, Any] = {
    "__pos": st.array_of("long"),
    "__source_ts_ms": "long",
    "__topic": "string",
    "__partition": "integer",
    "__offset": "long",
}

KEY_PROPERTY = "tidemark.key"
LAYOUT_PROPERTY = "tidemark.ordering"
ACCEPTED_PROPERTY = "tidemark.schemas"
