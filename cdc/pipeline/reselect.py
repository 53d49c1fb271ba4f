"""Debezium's reselect post-processor: re-read the columns an event could not carry.

PostgreSQL does not log an unchanged TOASTed value (without ``REPLICA IDENTITY FULL``) and a
MySQL/MariaDB session with ``binlog_row_image=MINIMAL`` or ``NOBLOB`` logs only some columns:
such events carry the unavailable-value placeholder. Configured as in Debezium::

    post.processors=reselector
    reselector.type=io.debezium.processors.reselect.ReselectColumnsPostProcessor
    reselector.reselect.columns.include.list=public.docs:body   (or .exclude.list)
    reselector.reselect.unavailable.values=true   reselector.reselect.null.values=true
    reselector.reselect.use.event.key=false

the ``after`` image of a create or update event (never a snapshot read, never a ``before``)
gets those columns, and NULL ones when asked, from the row as it is *now*, read by key on
the connector's own connection. The value may therefore be newer than the event (Debezium
documents the same trade-off): a later change of the column is already visible. A row
deleted in between keeps its placeholder; nothing fails.

Batched, unlike Debezium's one query per event: an event that needs it is noted when its
records are built (they wait in the dispatcher's ``batched`` block, see
``EventDispatcher.batched``), and before the block goes to the queue one query per table
reads every noted key (``WHERE (pk) IN (...)``); the records are then patched in place, in
their order. Outside a ``batched`` block the event is resolved on its own.

A failed query follows ``event.processing.failure.handling.mode``: ``fail`` stops the task
(records before the event are delivered, its offset is never stored), ``warn`` logs and
emits the events with their placeholders, ``skip`` does so silently, ``dead-letter`` also
writes a record per event to the dead-letter topic. The events are kept in every mode other
than ``fail``: apart from the placeholders they are correct, and dropping them loses data.

A column without a placeholder form (a MINIMAL row image lacking a number or a date) that
the reselect could not fill has no faithful value: for connectors that say so
(``strict_placeholders``: MySQL/MariaDB, whose binlog reader refuses such rows without a
reselect) that event is handled as a conversion failure under the same mode, never emitted
with a NULL that is not in the row. (PostgreSQL emits its few placeholder-less TOASTable
types, e.g. ``bool[]``, as null with or without the reselect, as Debezium does.)
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cdc.config import parse_bool, split_list
from cdc.errors import ConfigError, ConversionError
from cdc.own_session import OwnSession
from cdc.record import SourceRecord
from cdc.schema.table_schema import TableSchema
from cdc.spi import UNAVAILABLE, Operation, Reselector, RowChange, Table, TableId
from cdc.topics import sanitize_field_name

log = logging.getLogger("tidemark.reselect")

RESELECT_CLASS = "io.debezium.processors.reselect.ReselectColumnsPostProcessor"
#: the alias Debezium's documentation uses; its keys are declared for tooling
DEFAULT_ALIAS = "reselector"
_KEYS = (
    "reselect.columns.include.list",
    "reselect.columns.exclude.list",
    "reselect.unavailable.values",
    "reselect.null.values",
    "reselect.use.event.key",
)
_PLAN = "reselect.plan"
#: at most this many keys in one ``IN (...)`` list
MAX_KEYS_PER_QUERY = 1000


# -- configuration ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReselectSettings:
    alias: str
    include: tuple[re.Pattern[str], ...]
    exclude: tuple[re.Pattern[str], ...]
    unavailable: bool
    null: bool
    use_event_key: bool

    def selects(self, table_id: TableId, column: str) -> bool:
        """Debezium's column selector: ``<schema or database>.<table>:<column>`` matched
        whole and case-insensitively against the include list, else the exclude list."""
        name = qualified_column(table_id, column)
        if self.include:
            return any(p.fullmatch(name) for p in self.include)
        return not any(p.fullmatch(name) for p in self.exclude)


def qualified_column(table_id: TableId, column: str) -> str:
    """``schema.table:column`` (PostgreSQL) or ``database.table:column`` (MySQL)."""
    return f"{table_id.schema or table_id.catalog}.{table_id.table}:{column}"


def _aliases(raw: Mapping[str, Any]) -> list[str]:
    return split_list(raw.get("post.processors"))


def is_post_processor_key(key: str, raw: Mapping[str, Any]) -> bool:
    """``<alias>.*`` of an alias listed in ``post.processors`` (a ConfigDef pass-through
    rule, as for converters): read here as a whole."""
    return key.partition(".")[0] in _aliases(raw)


def parse_settings(raw: Mapping[str, Any]) -> tuple[ReselectSettings | None, list[tuple[str, str]]]:
    """The configured reselect post-processor (None when there is none) and the problems."""
    problems: list[tuple[str, str]] = []
    found: ReselectSettings | None = None
    for alias in _aliases(raw):
        kind = str(raw.get(f"{alias}.type") or "").strip()
        if not kind:
            problems.append(
                (
                    f"{alias}.type",
                    f"is required for the post processor {alias!r} listed in "
                    f"post.processors (tidemark has {RESELECT_CLASS})",
                )
            )
            continue
        if kind != RESELECT_CLASS:
            problems.append(
                (f"{alias}.type", f"unknown post processor {kind!r}; tidemark has {RESELECT_CLASS}")
            )
            continue
        if found is not None:
            problems.append(
                (
                    "post.processors",
                    f"lists more than one reselect post processor "
                    f"({found.alias}, {alias}); keep one",
                )
            )
            continue
        lists: dict[str, tuple[re.Pattern[str], ...]] = {}
        for which in ("include", "exclude"):
            key = f"{alias}.reselect.columns.{which}.list"
            patterns = []
            for text in split_list(raw.get(key)):
                try:
                    patterns.append(re.compile(text, re.IGNORECASE))
                except re.error as exc:
                    problems.append((key, f"{text!r} is not a valid regular expression: {exc}"))
            lists[which] = tuple(patterns)
        if lists["include"] and lists["exclude"]:
            problems.append(
                (
                    f"{alias}.reselect.columns.exclude.list",
                    f"cannot be combined with {alias}.reselect.columns.include.list; set one",
                )
            )
        flags: dict[str, bool] = {}
        for name, default in (("unavailable", True), ("null", True), ("use.event.key", False)):
            key = (
                f"{alias}.reselect.{name}.values"
                if name != "use.event.key"
                else (f"{alias}.reselect.use.event.key")
            )
            value = raw.get(key)
            try:
                flags[name] = default if value is None or value == "" else parse_bool(value)
            except ValueError:
                problems.append((key, f"must be true or false, got {value!r}"))
                flags[name] = default
        found = ReselectSettings(
            alias,
            lists["include"],
            lists["exclude"],
            flags["unavailable"],
            flags["null"],
            flags["use.event.key"],
        )
        if not (found.unavailable or found.null):
            log.warning(
                "%s: reselect.unavailable.values and reselect.null.values are both false; "
                "nothing will be reselected",
                alias,
            )
    return (None if problems else found), problems


def config_problems(values: dict[str, Any], raw: dict[str, Any]) -> list[tuple[str, str]]:
    """ConfigDef check: the ``post.processors`` settings."""
    return parse_settings(raw)[1]


def configured(raw: Mapping[str, Any]) -> bool:
    """Whether a valid reselect post-processor is configured."""
    return parse_settings(raw)[0] is not None


# -- wiring ------------------------------------------------------------------------------------
def attach(dispatcher: Any, connector: Any, raw: Mapping[str, Any]) -> None:
    """Give ``dispatcher`` the configured post-processor (nothing when none is configured)."""
    settings, problems = parse_settings(raw)
    if problems:
        raise ConfigError(problems)
    if settings is None:
        return
    reselector = connector.reselector()
    if reselector is None:
        raise ConfigError(
            [("post.processors", f"the {connector.type_name} connector cannot reselect columns")]
        )
    dispatcher.post_processor = ReselectColumns(
        settings,
        reselector,
        dispatcher.failures,
        dispatcher.tables,
        sanitize=bool(getattr(dispatcher.builder, "sanitize", False)),
    )


# -- the post-processor --------------------------------------------------------------------------
@dataclass(frozen=True)
class _Plan:
    """What one table version needs: its selectable value columns, the columns without a
    placeholder form, and the key to read rows by."""

    table: Table
    #: (row index, field name, column name) of selectable value columns
    candidates: tuple[tuple[int, str, str], ...]
    #: (row index, field name) of value columns whose placeholder is none (a NULL)
    bare: tuple[tuple[int, str], ...]
    key_names: tuple[str, ...]
    key_index: tuple[int, ...]


@dataclass
class _Pending:
    plan: _Plan
    ts: TableSchema
    row: list[Any]
    need: list[tuple[int, str, str]]
    key: tuple[Any, ...] | None
    at: int
    count: int
    after: dict[str, Any] | None
    event: RowChange


class ReselectColumns:
    def __init__(
        self,
        settings: ReselectSettings,
        reselector: Reselector,
        failures: Any,
        tables: Mapping[TableId, Table],
        *,
        sanitize: bool = False,
    ) -> None:
        self.settings = settings
        self.reselector = reselector
        self.failures = failures
        self.tables = tables
        self.sanitize = sanitize
        self.pending: list[_Pending] = []
        #: refuse an after image whose placeholder-less column stays unfilled (MySQL, whose
        #: binlog would have refused it); PostgreSQL emits such columns as null, as Debezium
        self.strict = bool(getattr(reselector, "strict_placeholders", False))
        self._keyless: set[TableId] = set()
        #: values found by the last block's queries, by pending entry
        self._found: dict[int, tuple[Any, ...]] = {}
        #: counters for tests and logs
        self.queries = 0
        self.reselected = 0

    def _plan(self, ts: TableSchema) -> _Plan:
        table = self.tables[ts.table_id]
        fields = {f.name for f in ts.value_schema.fields}
        probe = ts.value_from_partial_row([UNAVAILABLE] * len(table.columns))
        s = self.settings
        candidates, bare = [], []
        for col in table.columns:
            name = sanitize_field_name(col.name) if self.sanitize else col.name
            if name not in fields:
                continue
            if probe.get(name) is None:
                bare.append((col.position, name))
            if s.selects(table.id, col.name):
                candidates.append((col.position, name, col.name))
        key_names = tuple(ts.key_columns) if s.use_event_key else table.primary_key
        index = {c.name: c.position for c in table.columns}
        if not key_names or any(k not in index for k in key_names):
            key_names = ()
        plan = _Plan(
            table,
            tuple(candidates),
            tuple(bare),
            tuple(key_names),
            tuple(index[k] for k in key_names),
        )
        ts.extra[_PLAN] = plan
        return plan

    def note(
        self,
        ts: TableSchema,
        op: str,
        after_row: Sequence[Any] | None,
        partial: bool,
        rest: tuple[Sequence[Any] | None, dict[str, Any], dict[str, Any], str | None],
        records: list[SourceRecord],
        at: int,
    ) -> bool:
        """Note an event whose records start at index ``at`` of the block being collected,
        if its ``after`` image needs a reselect (or a check before it may be emitted).
        ``rest`` is the event's before image, source, offset and transaction id."""
        if after_row is None or op == "r":
            return False
        plan: _Plan | None = ts.extra.get(_PLAN)
        if plan is None:
            plan = self._plan(ts)
        s = self.settings
        need = [
            c
            for c in plan.candidates
            if (s.null and after_row[c[0]] is None)
            or (partial and s.unavailable and after_row[c[0]] is UNAVAILABLE)
        ]
        bare = self.strict and partial and any(after_row[i] is UNAVAILABLE for i, _ in plan.bare)
        if not need and not bare:
            return False
        key: tuple[Any, ...] | None = None
        if plan.key_index:
            key = tuple(after_row[i] for i in plan.key_index)
            if any(v is None or v is UNAVAILABLE for v in key):
                key = None
        elif need and ts.table_id not in self._keyless:
            self._keyless.add(ts.table_id)
            log.warning(
                "%s has no %s: its columns cannot be reselected by key",
                ts.table_id,
                "event key"
                if s.use_event_key
                else "primary key (set reselect.use.event.key with message.key.columns)",
            )
        after = next(
            (r.value["after"] for r in records if r.value is not None and r.value.get("after")),
            None,
        )
        self.pending.append(
            _Pending(
                plan,
                ts,
                list(after_row),
                need,
                key,
                at,
                len(records),
                after,
                RowChange(Operation(op), ts.table_id, rest[0], after_row, *rest[1:], partial),
            )
        )
        return True

    # -- resolving a block ---------------------------------------------------------------------
    def resolve(
        self,
        records: list[SourceRecord],
        partition: dict[str, Any],
        deliver: Callable[[list[SourceRecord]], None],
    ) -> list[SourceRecord]:
        """Reselect every noted event of ``records`` (one query per table and up to
        ``MAX_KEYS_PER_QUERY`` keys), patch their ``after`` images in place and return the
        block to hand to the queue. Under ``fail`` a failure delivers the records before the
        failing event and raises."""
        pending, self.pending = self.pending, []
        if not pending:
            return records
        errors = self._fetch_all(pending)
        mode = self.failures.mode
        out: list[SourceRecord] = []
        done = 0
        warned: set[int] = set()
        for p in pending:
            out += records[done : p.at]
            done = p.at + p.count
            own = records[p.at : done]
            failure = errors.get(id(p.plan))
            if failure is not None and mode == "fail":
                deliver(out)
                raise failure
            if failure is not None:
                if mode == "warn" and id(p.plan) not in warned:
                    warned.add(id(p.plan))
                    log.warning("%s; the events keep their placeholders", failure)
                elif mode == "dead-letter":
                    # before the event's own records (or what replaces them), with their
                    # offset: not the event's end, so its offset is not stored
                    self.failures.handle(failure, p.event, partition, out.append, True)
            refused = self._apply(p, self._found.get(id(p)))
            if refused is None:
                out += own
                continue
            if mode == "fail":
                deliver(out)
            self.failures.handle(refused, p.event, partition, out.append)
        out += records[done:]
        self._found = {}
        return out

    def _fetch_all(self, pending: list[_Pending]) -> dict[int, ConversionError]:
        """Run the queries; the rows found go to ``self._found`` (by pending entry), the
        query failures are returned by plan."""
        groups: dict[int, list[_Pending]] = {}
        for p in pending:
            if p.need and p.key is not None:
                groups.setdefault(id(p.plan), []).append(p)
        self._found = {}
        errors: dict[int, ConversionError] = {}
        for group in groups.values():
            plan = group[0].plan
            wanted = {name for p in group for _, _, name in p.need}
            columns = [c.name for c in plan.table.columns if c.name in wanted]
            keys = list(dict.fromkeys(p.key for p in group if p.key is not None))
            rows: dict[tuple[Any, ...], tuple[Any, ...]] = {}
            try:
                for i in range(0, len(keys), MAX_KEYS_PER_QUERY):
                    self.queries += 1
                    rows.update(
                        self.reselector.fetch(
                            plan.table, plan.key_names, keys[i : i + MAX_KEYS_PER_QUERY], columns
                        )
                    )
            except Exception as exc:
                first = group[0].event
                error = ConversionError(
                    f"cannot reselect {', '.join(columns)} of {len(keys)} row(s) of "
                    f"{plan.table.id} (first at {first.offset}): {exc}. Set "
                    "event.processing.failure.handling.mode=warn to emit such events with "
                    "the unavailable-value placeholder instead of stopping",
                    position=first.offset,
                )
                error.__cause__ = exc
                errors[id(plan)] = error
                continue
            position = {name: i for i, name in enumerate(columns)}
            for p in group:
                found = rows.get(p.key)  # type: ignore[arg-type]
                if found is None:
                    continue
                self._found[id(p)] = tuple(found[position[name]] for _, _, name in p.need)
        return errors

    def _apply(self, p: _Pending, found: tuple[Any, ...] | None) -> ConversionError | None:
        """Patch the event's ``after`` image with the values found; the reason it cannot be
        emitted, if it cannot."""
        row = p.row
        if found is not None:
            for (i, _, _), value in zip(p.need, found, strict=True):
                row[i] = value
            self.reselected += 1
        lost = [name for i, name in p.plan.bare if row[i] is UNAVAILABLE] if self.strict else []
        if lost:
            why = "the row no longer exists" if found is None and p.key else "not reselected"
            return ConversionError(
                f"the {p.event.op.value} event of {p.event.table_id} at {p.event.offset} lacks "
                f"the columns {', '.join(lost)} (not in the row image) and they could not be "
                f"reselected ({why}); their types have no unavailable-value placeholder, so "
                "the event would carry NULLs that are not in the row",
                position=p.event.offset,
            )
        if found is None or p.after is None:
            return None
        try:
            partial = any(v is UNAVAILABLE for v in row)
            value = p.ts.value_from_partial_row(row) if partial else p.ts.value_from_row(row)
        except Exception as exc:
            error = ConversionError(
                f"cannot convert the reselected values of {p.event.table_id} at "
                f"{p.event.offset}: {exc}",
                position=p.event.offset,
            )
            error.__cause__ = exc
            return error
        p.after.update(value)
        return None

    def close(self) -> None:
        self.reselector.close()


class SessionReselector(ABC):
    """A :class:`~cdc.spi.Reselector` on one session of its own, opened on first use and
    closed after an error (the next call opens a new one). Connectors supply the session
    and the query; rows come back as the key values followed by the column values."""

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        self.session = OwnSession(lambda: self.connect(), "reselect")

    @abstractmethod
    def connect(self) -> Any: ...

    @abstractmethod
    def rows(
        self,
        conn: Any,
        table: Table,
        key_columns: Sequence[str],
        keys: Sequence[tuple[Any, ...]],
        columns: Sequence[str],
    ) -> Iterable[Sequence[Any]]: ...

    def fetch(
        self,
        table: Table,
        key_columns: Sequence[str],
        keys: Sequence[tuple[Any, ...]],
        columns: Sequence[str],
    ) -> dict[tuple[Any, ...], tuple[Any, ...]]:
        if not keys:
            return {}
        n = len(key_columns)
        return self.session.run(
            lambda conn: {
                tuple(row[:n]): tuple(row[n:])
                for row in self.rows(conn, table, key_columns, keys, columns)
            }
        )

    def close(self) -> None:
        self.session.close()
