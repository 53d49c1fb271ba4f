"""What the snapshot and the streaming source share within one task run.

The in-memory schema and the schema history must agree: every DDL the connector applies is
stored (with the offset it becomes effective at) *before* any event carrying that offset is
emitted, so a restart at any stored offset can rebuild exactly the tables in force there.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from cdc.config import Config
from cdc.history import SchemaHistory, TableChange, history_from_config
from cdc.spi import SourceContext, Table, TableId
from connectors.mysql import ddl
from connectors.mysql.errors import HistoryMissing, UnparseableDdl
from connectors.mysql.offsets import is_at_or_before
from connectors.mysql.schema import Applied, MySqlSchema
from connectors.mysql.types import connect_table

log = logging.getLogger("tidemark.mysql")

BUILTIN_DATABASES = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


@dataclass
class MySqlMetrics:
    """Debezium's MySQL-specific attributes (seed §2.3.5): HoldingGlobalLock, the binlog
    extras and the schema-history set. Numeric ones are also exported through the core's
    metrics registry (``TaskMetrics.extra``)."""

    holding_global_lock: bool = False
    binlog_filename: str = ""
    binlog_position: int = 0
    is_gtid_mode_enabled: bool = False
    gtid_set: str = ""
    skipped_events: int = 0
    disconnects: int = 0
    rolled_back_transactions: int = 0
    not_well_formed_transactions: int = 0
    large_transactions: int = 0
    history_status: str = "STOPPED"
    history_statuses: list[str] = field(default_factory=list)
    recovery_start_time: int = 0
    changes_recovered: int = 0
    changes_applied: int = 0
    last_recovered_ms: int = 0
    last_applied_ms: int = 0
    last_recovered_change: str = ""
    last_applied_change: str = ""

    def set_history_status(self, status: str) -> None:
        self.history_status = status
        self.history_statuses.append(status)

    #: the seed's MBean context of each attribute that is not a binlog (streaming) one
    CONTEXTS: ClassVar[dict[str, str]] = {
        "HoldingGlobalLock": "snapshot",
        "Status": "schema-history",
        "SchemaHistoryStatus": "schema-history",
        "RecoveryStartTime": "schema-history",
        "ChangesRecovered": "schema-history",
        "ChangesApplied": "schema-history",
        "MilliSecondsSinceLastRecoveredChange": "schema-history",
        "MilliSecondsSinceLastAppliedChange": "schema-history",
        "LastRecoveredChange": "schema-history",
        "LastAppliedChange": "schema-history",
    }

    def texts(self) -> dict[str, Any]:
        return {
            "BinlogFilename": lambda: self.binlog_filename,
            "GtidSet": lambda: self.gtid_set,
            "Status": lambda: self.history_status,
            "LastRecoveredChange": lambda: self.last_recovered_change,
            "LastAppliedChange": lambda: self.last_applied_change,
        }

    def gauges(self) -> dict[str, Any]:
        def since(ms: int) -> float:
            return float(int(time.time() * 1000) - ms) if ms else -1.0

        status_codes = {"STOPPED": 0.0, "RECOVERING": 1.0, "RUNNING": 2.0}
        return {
            "HoldingGlobalLock": lambda: float(self.holding_global_lock),
            "BinlogPosition": lambda: float(self.binlog_position),
            "IsGtidModeEnabled": lambda: float(self.is_gtid_mode_enabled),
            "NumberOfSkippedEvents": lambda: float(self.skipped_events),
            "NumberOfDisconnects": lambda: float(self.disconnects),
            "NumberOfRolledBackTransactions": lambda: float(self.rolled_back_transactions),
            "NumberOfNotWellFormedTransactions": lambda: float(self.not_well_formed_transactions),
            "NumberOfLargeTransactions": lambda: float(self.large_transactions),
            "SchemaHistoryStatus": lambda: status_codes.get(self.history_status, -1.0),
            "RecoveryStartTime": lambda: float(self.recovery_start_time),
            "ChangesRecovered": lambda: float(self.changes_recovered),
            "ChangesApplied": lambda: float(self.changes_applied),
            "MilliSecondsSinceLastRecoveredChange": lambda: since(self.last_recovered_ms),
            "MilliSecondsSinceLastAppliedChange": lambda: since(self.last_applied_ms),
        }


class DatabaseFilter:
    """The database level of the include/exclude lists, plus ``table.ignore.builtin``: decides
    which databases' DDL reaches the schema change topic and which schemas a snapshot reads."""

    def __init__(self, cfg: Config) -> None:
        self.include = [re.compile(p, re.I) for p in cfg.get("database.include.list", [])]
        self.exclude = [re.compile(p, re.I) for p in cfg.get("database.exclude.list", [])]
        self.ignore_builtin = bool(cfg["table.ignore.builtin"])

    def __call__(self, database: str | None) -> bool:
        if not database:
            return True
        if self.ignore_builtin and database.lower() in BUILTIN_DATABASES:
            return False
        if self.include:
            return any(p.fullmatch(database) for p in self.include)
        return not any(p.fullmatch(database) for p in self.exclude)


class TaskState:
    def __init__(self, cfg: Config, partition: dict[str, Any], metrics: MySqlMetrics) -> None:
        self.cfg = cfg
        self.partition = partition
        self.metrics = metrics
        self.schema = MySqlSchema()
        self.database_filter = DatabaseFilter(cfg)
        self._history: SchemaHistory | None = None
        #: True once the schema reflects the position streaming starts from
        self.schema_ready = False

    # -- history --------------------------------------------------------------------------------
    @property
    def history(self) -> SchemaHistory:
        if self._history is None:
            self._history = history_from_config(self.cfg)
            self._history.start()
        return self._history

    def close(self) -> None:
        if self._history is not None:
            self._history.stop()
            self._history = None

    def recover(self, offset: Mapping[str, Any] | None, *, everything: bool = False) -> int:
        """Rebuild the schema from the history up to ``offset`` (seed §2.1.1).

        Records are applied in the order written, except one positioned before a snapshot's
        records already applied: after a snapshot that streaming resumed from an earlier
        position, the DDL between the two is read again and recorded after the snapshot's
        definitions, which already include it. Recovering to a position inside that window
        excludes the snapshot's records and so applies the replayed DDL."""
        history = self.history
        m = self.metrics
        m.set_history_status("RECOVERING")
        m.recovery_start_time = int(time.time())
        self.schema.reset()
        if offset is not None and not everything and not history.exists():
            m.set_history_status("STOPPED")
            raise HistoryMissing(
                "the connector has stored offsets but its schema history is empty, so the table "
                "structures at the offset are unknown. Restart once with "
                "snapshot.mode=schema_only_recovery to rebuild the history from the current "
                "table definitions (valid only if no DDL ran since the offset)."
            )

        def after_offset(position: dict[str, Any]) -> bool:
            if everything or offset is None:
                return False
            return not is_at_or_before(position, offset)

        count = 0
        snapshot_at: dict[str, Any] | None = None
        for record in history.recover(self.partition, after_offset):
            position = dict(record.position or {})
            if snapshot_at is not None and not is_at_or_before(snapshot_at, position):
                # DDL replayed after a snapshot from an earlier position (an interrupted
                # attempt's or the replaced offset's): the snapshot's definitions include it
                continue
            if position.get("snapshot"):
                snapshot_at = position
            changes = record.changes()
            if changes:
                self.schema.apply_changes(changes)
            elif record.ddl:
                try:
                    self.schema.apply_ddl(record.ddl, record.database_name)
                except ddl.DdlParseError as exc:
                    if not history.skip_unparseable_ddl:
                        raise UnparseableDdl(record.ddl, record.position, str(exc)) from exc
            count += 1
            m.changes_recovered = count
            m.changes_applied += 1
            m.last_recovered_ms = m.last_applied_ms = int(time.time() * 1000)
            m.last_recovered_change = record.ddl[:200]
        m.set_history_status("RUNNING")
        log.info("recovered %d schema history records; %d tables", count, len(self.schema.tables))
        return count

    def record(
        self,
        position: Mapping[str, Any],
        database: str | None,
        ddl_text: str,
        changes: Iterable[TableChange],
        ctx: SourceContext | None = None,
    ) -> None:
        changes = list(changes)
        history = self.history
        if (
            history.store_only_captured_tables_ddl
            and ctx is not None
            and changes
            and not any(ctx.is_included(c.table.id) for c in changes)
        ):
            return
        history.record(self.partition, dict(position), database, None, ddl_text, changes)
        m = self.metrics
        m.changes_applied += 1
        m.last_applied_ms = int(time.time() * 1000)
        m.last_applied_change = ddl_text[:200]

    # -- tables ---------------------------------------------------------------------------------
    def register(self, ctx: SourceContext, tables: Iterable[Table]) -> None:
        for table in tables:
            if ctx.is_included(table.id):
                ctx.register_table(connect_table(table))

    def register_all(self, ctx: SourceContext) -> None:
        self.register(ctx, list(self.schema.tables.values()))

    def register_applied(self, ctx: SourceContext, applied: Applied) -> None:
        for change in applied.changes:
            table = self.schema.table(change.table.id)
            if table is not None:
                self.register(ctx, [table])

    def included(self, ctx: SourceContext, table_id: TableId) -> bool:
        return self.database_filter(table_id.catalog) and ctx.is_included(table_id)
