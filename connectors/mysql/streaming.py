"""Streaming from the binlog: start position, position checks, reconnects.

The schema is rebuilt from the history up to the stored offset before the first event is read
(unless a snapshot in this run just built it), so every row is decoded with the table
structure in force at its position (seed §2.1.1, AC-44).

A dropped connection (server restart, network) is re-established from the processor's own
checkpoint — never the library's — with exponential backoff, up to ``connect.max.attempts``
(``connect.keep.alive=false`` fails at once). A position the server no longer has (purged
binlog files or GTIDs) fails with an error that says which snapshot mode recovers from it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from cdc.errors import ErrorKind, FatalError, RetriableError
from cdc.retry import Backoff, Failure, run_with_retries
from cdc.spi import SourceContext, StreamingSource
from connectors.mysql import connection as myconn
from connectors.mysql.binlog import BinlogProcessor, Resume
from connectors.mysql.binlog_decoder import RawBinlogReader, decoder_enabled
from connectors.mysql.errors import (
    ERRORS,
    BinlogPositionLost,
    ConnectionLost,
    describe_position,
)
from connectors.mysql.gtid import (
    GtidSet,
    GtidSourceFilter,
    parse_gtid_set,
    restart_gtid_set,
)
from connectors.mysql.include_check import check_include_lists
from connectors.mysql.new_tables import (
    FILTER_KEYS,
    NewTablesGate,
    filter_offset_keys,
    stored_filter,
)
from connectors.mysql.offsets import BinlogPosition
from connectors.mysql.retention import missing_reason
from connectors.mysql.snapshot import SnapshotRun
from connectors.mysql.state import BUILTIN_DATABASES, TaskState

log = logging.getLogger("tidemark.mysql.streaming")

LOST_POSITION_ADVICE = (
    "Set snapshot.mode=when_needed to take a new snapshot automatically, or reset this "
    "connector's offsets and start with snapshot.mode=initial."
)


class _StreamEnded(RetriableError):
    """The server closed the binlog stream; reconnected like a lost connection."""


def check_server(info: myconn.ServerInfo) -> None:
    problems = []
    if not info.log_bin:
        problems.append("log_bin is OFF (enable the binary log)")
    if info.binlog_format != "ROW":
        problems.append(f"binlog_format is {info.binlog_format or '?'}; it must be ROW")
    if info.row_image != "FULL":
        problems.append(
            f"binlog_row_image is {info.row_image or '?'}; it must be FULL (MINIMAL and "
            "NOBLOB leave columns out of the row images, which the events could only carry as "
            "placeholders or not at all): SET GLOBAL binlog_row_image=FULL and set it in the "
            "server's configuration file"
        )
    if info.row_metadata != "FULL":
        problems.append(
            f"binlog_row_metadata is {info.row_metadata or 'not supported'}; set it to FULL "
            "(MySQL >= 8.0.14, MariaDB >= 10.5): the binlog decoder needs ENUM/SET values and "
            "column names from it"
        )
    if problems:
        raise FatalError("the server is not set up for change data capture: " + "; ".join(problems))


def position_available(state: TaskState, offset: Mapping[str, Any]) -> bool:
    """Whether the server still has everything after ``offset`` (``when_needed``)."""
    conn = myconn.connect(state.cfg)
    try:
        return missing_reason(conn, myconn.server_info(conn), offset) is None
    finally:
        conn.close()


class MySqlStreaming(StreamingSource):
    def __init__(self, state: TaskState) -> None:
        self.state = state
        self.cfg = state.cfg
        self._reader: myconn.BinlogReader | None = None
        self._lock = threading.Lock()
        self.processor: BinlogProcessor | None = None

    def execute(self, ctx: SourceContext, offset: Mapping[str, Any] | None) -> None:
        state, cfg = self.state, self.cfg
        core = ctx.metrics
        conn = myconn.connect(cfg)
        try:
            info = myconn.server_info(conn)
            check_server(info)
            notices = ctx.metrics.notices
            check_include_lists(
                cfg, conn, lambda t: state.included(ctx, t), state.database_filter, notices
            )
            state.metrics.is_gtid_mode_enabled = info.gtid_mode
            resume, gtids = self._start(conn, info, offset)
            if not state.schema_ready:
                state.recover(offset)
            state.register_all(ctx)
            state.schema_ready = True
        finally:
            conn.close()
        keys, gate, keys_after = self._new_tables(ctx, offset, info)
        stopper = threading.Thread(
            target=self._stop_watch, args=(ctx,), name="tidemark-mysql-stop", daemon=True
        )
        stopper.start()
        processor = BinlogProcessor(
            state,
            ctx,
            resume,
            gtids,
            gate=gate,
            offset_keys=keys,
            offset_keys_after_gate=keys_after,
        )
        self.processor = processor
        backoff = Backoff(
            initial_delay_s=int(cfg["connect.backoff.initial.delay.ms"]) / 1000,
            max_delay_s=int(cfg["connect.backoff.max.delay.ms"]) / 1000,
            max_retries=int(cfg["connect.max.attempts"]) if cfg["connect.keep.alive"] else 0,
        )
        seen = 0

        def session(tries: int) -> None:
            nonlocal processor, seen
            if tries:
                processor = self._reconnected(processor, ctx)
            seen = processor.events_seen
            try:
                self._session(ctx, info, processor)
            except Exception:
                if ctx.stop_event.is_set():
                    return  # stopping: however the session ended
                raise
            if not ctx.stop_event.is_set():
                raise _StreamEnded("the server ended the binlog stream")

        def on_failure(failure: Failure) -> None:
            if core is not None:
                core.streaming.connected = False
            state.metrics.disconnects += 1
            if failure.delay is not None:
                log.warning(
                    "binlog connection lost (%s); reconnecting in %.1f s (attempt %d/%d) from %s",
                    failure.error,
                    failure.delay,
                    failure.attempt,
                    cfg["connect.max.attempts"],
                    describe_position(processor.offset()),
                )

        def give_up(failure: Failure) -> ConnectionLost:
            return ConnectionLost(
                f"lost the binlog connection ({failure.error}) and could not reconnect "
                f"({failure.attempt - 1} attempts); restart the connector when the server is "
                f"available, it resumes from {describe_position(processor.offset())}"
            )

        def translate(exc: BaseException) -> BaseException:
            if myconn.error_code(exc) == myconn.ER_MASTER_FATAL_READING_BINLOG:
                return BinlogPositionLost(
                    f"the server cannot stream from {describe_position(processor.offset())}: "
                    f"{exc}. {LOST_POSITION_ADVICE}"
                )
            return ERRORS.translate(exc)

        run_with_retries(
            session,
            schedule=lambda exc: backoff if ERRORS.classify(exc) is ErrorKind.RETRIABLE else None,
            stop=ctx.stop_event,
            on_failure=on_failure,
            give_up=give_up,
            progressed=lambda: processor.events_seen > seen,
            translate=translate,
        )
        if core is not None:
            core.streaming.connected = False

    def _reconnected(self, old: BinlogProcessor, ctx: SourceContext) -> BinlogProcessor:
        """A fresh processor continuing from the old one's checkpoint; what it had buffered
        of an open transaction was not emitted and is read again."""
        # GTIDs are added at commit, so the set never includes the open transaction.
        gtids = old.gtids.copy() if old.gtids is not None else None
        processor = BinlogProcessor(
            self.state,
            ctx,
            old.resume_point(),
            gtids,
            gate=old.gate,
            offset_keys=old.offset_keys,
            offset_keys_after_gate=old.offset_keys_after_gate,
        )
        self.processor = processor
        return processor

    def _session(self, ctx: SourceContext, info: myconn.ServerInfo, p: BinlogProcessor) -> None:
        cfg = self.cfg
        resume = p.resume_point()
        use_gtids = bool(resume.gtids) and info.gtid_mode
        if info.is_mariadb and not resume.gtids and resume.file:
            conn = myconn.connect(cfg)
            try:
                resume.gtids = myconn.mariadb_gtid_at(conn, resume.file, resume.pos)
            finally:
                conn.close()
        gtid_text = resume.gtids
        if use_gtids and gtid_text:
            gtid_text = self._restart_gtids(info, gtid_text)
        reader_class = RawBinlogReader if decoder_enabled() else myconn.BinlogReader
        reader = reader_class(
            cfg,
            int(cfg["database.server.id"]),
            mariadb=info.is_mariadb,
            log_file=resume.file,
            log_pos=resume.pos,
            gtids=gtid_text,
            use_gtids=use_gtids,
            heartbeat_s=int(cfg["binlog.heartbeat.interval.ms"]) / 1000,
            annotate_rows=bool(cfg["include.query"]),
        )
        with self._lock:
            self._reader = reader
        core = ctx.metrics
        log.info(
            "streaming from %s (%s)",
            describe_position(resume.__dict__),
            f"GTIDs {gtid_text}" if use_gtids or info.is_mariadb else "file/position",
        )
        try:
            handle = p.handle
            stop = ctx.stop_event
            first = True
            for event in reader:
                if first:
                    first = False
                    if core is not None:
                        core.streaming.connected = True
                handle(event)
                if stop.is_set():
                    return
        finally:
            with self._lock:
                self._reader = None
            reader.close()

    def _restart_gtids(self, info: myconn.ServerInfo, stored_text: str) -> str:
        cfg = self.cfg
        flt = GtidSourceFilter(cfg["gtid.source.includes"], cfg["gtid.source.excludes"])
        conn = myconn.connect(cfg)
        try:
            available, purged = myconn.gtid_sets(conn, info)
        finally:
            conn.close()
        stored = parse_gtid_set(stored_text, mariadb=info.is_mariadb)
        merged = restart_gtid_set(
            stored,
            parse_gtid_set(available, mariadb=info.is_mariadb),
            parse_gtid_set(purged, mariadb=info.is_mariadb),
            source_filter=flt,
            new_channel_position=cfg["gtid.new.channel.position"],
        )
        return str(merged)

    def _start(
        self, conn: Any, info: myconn.ServerInfo, offset: Mapping[str, Any] | None
    ) -> tuple[Resume, GtidSet | None]:
        if offset is None:
            # snapshot.mode=never on first start: the whole binlog
            files = myconn.binlog_files(conn)
            first = files[0] if files else None
            log.info("no offset: streaming from the beginning of the binlog (%s)", first)
            gtids = None
            if info.gtid_mode:
                # MySQL: what precedes the oldest binlog is gtid_purged; seeding the set with
                # it keeps a later GTID restart from asking for purged transactions.
                purged = "" if info.is_mariadb else myconn.gtid_sets(conn, info)[1]
                gtids = parse_gtid_set(purged, mariadb=info.is_mariadb)
            return Resume(first, 4, None), gtids
        position = BinlogPosition.from_offset(offset)
        why = missing_reason(conn, info, offset)
        if why is not None:
            raise BinlogPositionLost(
                f"cannot resume from {describe_position(offset)}: {why}. {LOST_POSITION_ADVICE}"
            )
        gtids = None
        if position.gtids:
            gtids = parse_gtid_set(position.gtids, mariadb=info.is_mariadb)
        elif info.gtid_mode:
            gtids = parse_gtid_set("", mariadb=info.is_mariadb)
        if position.foreign_count():
            log.warning(
                "the stored offset %s names a point inside a transaction without tidemark's "
                "row_events count (Debezium wrote it, or an earlier tidemark version): that "
                "transaction is delivered again from its start, so consumers see its "
                "already-delivered changes twice and lose none",
                describe_position(offset),
            )
        events, rows = position.already_emitted()
        return Resume(position.file, position.pos, position.gtids, events, rows), gtids

    def _new_tables(
        self, ctx: SourceContext, offset: Mapping[str, Any] | None, info: myconn.ServerInfo
    ) -> tuple[dict[str, Any], NewTablesGate | None, dict[str, Any]]:
        """With ``snapshot.new.tables=parallel``: the offset keys to write, and the gate for
        tables the filters capture now but did not when the offset was stored."""
        state = self.state
        if self.cfg["snapshot.new.tables"] != "parallel":
            return {}, None, {}
        current = filter_offset_keys(self.cfg)
        old = stored_filter(offset or {}, BUILTIN_DATABASES)
        if offset is None or old is None:
            return current, None, current
        new = sorted(
            t for t in state.schema.tables if ctx.is_included(t) and not old.is_included(t)
        )
        if not new:
            return current, None, current
        log.info("snapshot.new.tables=parallel: newly captured %s", [t.identifier for t in new])
        p2 = SnapshotRun(state, ctx, True, offset).new_tables(new, dict(offset))
        state.register(ctx, [t for t in (state.schema.table(i) for i in new) if t is not None])
        kept = {k: v for k, v in offset.items() if k in FILTER_KEYS or k == "filters_recorded"}
        return kept, NewTablesGate(set(new), p2, info.is_mariadb), current

    def _stop_watch(self, ctx: SourceContext) -> None:
        ctx.stop_event.wait()
        with self._lock:
            reader = self._reader
        if reader is not None:
            reader.interrupt()

    def commit_offset(self, offset: Mapping[str, Any]) -> None:
        """Nothing to release: the server keeps binlogs by its own expiry settings."""
        return None
