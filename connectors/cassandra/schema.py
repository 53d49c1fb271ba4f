"""The cluster's table definitions, read from ``system_schema`` with the DataStax driver.

Every table is known (system ones too): a mutation names its table by id only, and the
decoder needs each column's type to walk past a table the connector does not capture. The
cache is re-read every ``schema.refresh.interval.ms`` (the seed's schema change listener) and
at once when a mutation names an id it does not know, so a table created or enabled for CDC
while running is picked up (AC-37).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from cdc.config import Config
from cdc.errors import ConfigError, RetriableError
from cdc.spi import Column, Table, TableId
from connectors.cassandra.tabledef import DROPPED, TableDef, table_from_rows, tables_by_raw_id
from connectors.cassandra.types import CELL_COLUMN, KEY_COLUMN, RANGE_BOUND_COLUMN, RANGE_FIELDS

log = logging.getLogger("tidemark.cassandra.schema")

SYSTEM_KEYSPACES = frozenset(
    {
        "system",
        "system_schema",
        "system_auth",
        "system_distributed",
        "system_traces",
        "system_views",
        "system_virtual_schema",
    }
)


def connect(cfg: Config) -> Any:
    """A driver session on the configured contact points; fails naming the hosts."""
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import Cluster

    auth = None
    if cfg["cassandra.username"]:
        auth = PlainTextAuthProvider(cfg["cassandra.username"], cfg["cassandra.password"] or "")
    tls = None
    if cfg["cassandra.ssl.enabled"]:
        from connectors.cassandra.tls import TlsConfigError, ssl_context

        try:
            tls = ssl_context(cfg["cassandra.ssl.config.path"])
        except TlsConfigError as exc:
            raise ConfigError([("cassandra.ssl.config.path", str(exc))]) from exc
    cluster = Cluster(
        list(cfg["cassandra.hosts"]),
        port=int(cfg["cassandra.port"]),
        ssl_context=tls,
        auth_provider=auth,
        connect_timeout=cfg["cassandra.connect.timeout.ms"] / 1000,
        control_connection_timeout=cfg["cassandra.connect.timeout.ms"] / 1000,
        protocol_version=5,
    )
    try:
        return cluster.connect()
    except Exception as exc:
        cluster.shutdown()
        hosts = ",".join(cfg["cassandra.hosts"])
        raise ConnectionError(
            f"cannot connect to Cassandra at {hosts}:{cfg['cassandra.port']} "
            f"(cassandra.hosts/cassandra.port): {exc}"
        ) from exc


def table_id(t: TableDef) -> TableId:
    return TableId(t.keyspace, None, t.name)


class SchemaCache:
    """Table definitions by id, refreshed from ``system_schema``."""

    def __init__(self, session: Any, refresh_interval_s: float = 1.0) -> None:
        self.session = session
        self.interval = refresh_interval_s
        self.by_id: dict[uuid.UUID, TableDef] = {}
        #: the same by the raw 16 bytes of the id (the commit log reader's key: no UUID
        #: hashing per mutation); updated in place, so a reader holding it sees refreshes
        self.by_raw_id: dict[bytes, TableDef] = {}
        self.by_name: dict[tuple[str, str], TableDef] = {}
        self.cluster_name = ""
        self.loaded_at = 0.0
        self.unknown: set[uuid.UUID] = set()
        #: keyspaces with at least one CDC table: the only ones whose mutations are decoded
        self.cdc_keyspaces: set[str] = set()
        self._lock = threading.Lock()
        self.refresh()

    def refresh(self) -> list[TableDef]:
        """Read system_schema again; returns the tables that are new or changed. A node
        that does not answer fails the task (RetriableError: restarted per
        errors.max.retries, resuming from the stored offset once the node is back)."""
        try:
            return self._refresh()
        except RetriableError:
            raise
        except Exception as exc:
            hosts = ", ".join(str(h) for h in self.session.cluster.contact_points)
            raise RetriableError(
                f"the Cassandra node does not answer (cassandra.hosts={hosts}): {exc!r}; the "
                f"task stops and resumes from its stored offset when the node is back"
            ) from exc

    def _refresh(self) -> list[TableDef]:
        columns: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in self.session.execute("SELECT * FROM system_schema.columns"):
            columns.setdefault((r.keyspace_name, r.table_name), []).append(r._asdict())
        # dropped columns: mutations written before the drop still carry their cells
        for r in self.session.execute(
            "SELECT keyspace_name, table_name, column_name, type, kind "
            "FROM system_schema.dropped_columns"
        ):
            cols = columns.get((r.keyspace_name, r.table_name))
            if cols is not None and all(c["column_name"] != r.column_name for c in cols):
                cols.append(
                    {"column_name": r.column_name, "kind": DROPPED, "position": -1, "type": r.type}
                )
        user_types = {
            (r.keyspace_name, r.type_name): (list(r.field_names), list(r.field_types))
            for r in self.session.execute(
                "SELECT keyspace_name, type_name, field_names, field_types FROM system_schema.types"
            )
        }
        by_id: dict[uuid.UUID, TableDef] = {}
        for r in self.session.execute("SELECT * FROM system_schema.tables"):
            cols = columns.get((r.keyspace_name, r.table_name))
            if not cols:
                continue
            try:
                t = table_from_rows(r._asdict(), cols, user_types)
            except ValueError as exc:
                log.warning("table %s.%s cannot be decoded: %s", r.keyspace_name, r.table_name, exc)
                continue
            by_id[t.id] = t
        if not self.cluster_name:
            row = self.session.execute("SELECT cluster_name FROM system.local").one()
            self.cluster_name = str(row.cluster_name)
        with self._lock:
            changed = []
            for i, t in by_id.items():
                known = self.by_id.get(i)
                if known == t:
                    # the same definition: keep the object, and the commit log readers compiled
                    # for it (re-read every second: new objects would be compiled again)
                    by_id[i] = known
                else:
                    changed.append(t)
            self.by_id = by_id
            raw = tables_by_raw_id(by_id.values())
            self.by_raw_id.update(raw)  # new entries first: a reader never misses a table
            for gone in self.by_raw_id.keys() - raw.keys():
                del self.by_raw_id[gone]
            self.by_name = {(t.keyspace, t.name): t for t in by_id.values()}
            self.cdc_keyspaces = {t.keyspace for t in by_id.values() if t.cdc}
            self.loaded_at = time.monotonic()
        return changed

    def maybe_refresh(self) -> list[TableDef]:
        if time.monotonic() - self.loaded_at < self.interval:
            return []
        return self.refresh()

    def lookup(self, tid: uuid.UUID) -> TableDef | None:
        t = self.by_id.get(tid)
        if t is None and tid not in self.unknown:
            self.refresh()  # a table created since the last read
            t = self.by_id.get(tid)
            if t is None:
                self.unknown.add(tid)  # dropped: not looked up again
        return t

    def cdc_tables(self, included: Callable[[TableId], bool]) -> list[TableDef]:
        return sorted(
            (
                t
                for t in self.by_id.values()
                if t.cdc and t.keyspace not in SYSTEM_KEYSPACES and included(table_id(t))
            ),
            key=lambda t: (t.keyspace, t.name),
        )


def core_table(t: TableDef, ranges: bool = False) -> Table:
    """The table as the core sees it: the primary key columns (plain values, the key), then
    the regular columns, each of which the converters turn into ``{value, deletion_ts,
    set}``, then with ``ranges`` (``range.delete.handling.mode=emit``) the two range bound
    fields. Static columns are not captured (the seed lists them as unsupported)."""
    cols: list[Column] = []
    for c in t.primary_key:
        cols.append(
            Column(
                c.name,
                len(cols),
                c.type_text,
                optional=c.kind != "partition_key",
                native_type=KEY_COLUMN,
            )
        )
    for c in t.regular:
        cols.append(Column(c.name, len(cols), c.type_text, optional=True, native_type=CELL_COLUMN))
    extra: dict[str, Any] = {}
    if ranges:
        for name in RANGE_FIELDS:
            cols.append(Column(name, len(cols), "range_bound", native_type=RANGE_BOUND_COLUMN))
        extra = {
            "clustering": tuple(c.name for c in t.clustering),
            "descending": tuple(c.name for c in t.clustering if c.descending),
        }
    return Table(table_id(t), tuple(cols), tuple(c.name for c in t.primary_key), extra=extra)
