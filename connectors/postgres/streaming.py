"""Streaming from the replication slot, with resume positions that survive any restart.

Offsets are ``{lsn, txId, ts_usec, lsn_commit, seq, complete, flush_lsn}``: the event's own
LSN, its transaction's commit LSN and 1-based position inside that transaction, whether the
whole transaction was emitted, and the LSN the slot may be confirmed to once this offset is
stored (the end of the last *completed* transaction). PostgreSQL re-sends every transaction
committed after the confirmed position, so a restart in the middle of a transaction gets the
whole transaction again and skips exactly the events already emitted — even when events of
one transaction share an LSN (Debezium lost those, dbz#1554).
"""

from __future__ import annotations

import contextlib
import logging
import select
import struct
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from psycopg import pq, sql

from cdc.config import Config
from cdc.errors import ErrorKind, FatalError, RetriableError
from cdc.retry import Backoff, Failure, run_with_retries
from cdc.spi import (
    UNAVAILABLE,
    LogicalMessage,
    Operation,
    PositionReached,
    SourceContext,
    SourceMetrics,
    StreamingSource,
    Table,
    TableId,
    TableTruncated,
    TransactionBegin,
    TransactionEnd,
)
from connectors.postgres import connection as pgconn
from connectors.postgres import pgoutput as po
from connectors.postgres.errors import ERRORS, SlotInUse
from connectors.postgres.identity import check_identities
from connectors.postgres.offsets import WalPosition, debezium_through
from connectors.postgres.publication import (
    as_partition_root,
    check_included,
    not_published,
    sync_publication,
)
from connectors.postgres.schema import PgSchema, RowGuard
from connectors.postgres.setup import check_slot, wait_for_inactive_slot
from connectors.postgres.types import Modes, TypeRegistry

log = logging.getLogger("tidemark.postgres.streaming")

HEARTBEAT_PREFIX = "tidemark-heartbeat"
_XLOG_HEAD = struct.Struct("!QQ")
#: an XLogData header (tag, data start, WAL end, clock) followed by a Begin / a Commit message
_W_BEGIN = struct.Struct("!xQQ8xxQqI")
_W_COMMIT = struct.Struct("!xQQ8xxBQQq")
_CREATE, _UPDATE, _DELETE = Operation.CREATE, Operation.UPDATE, Operation.DELETE
_U32_AT, _tuple_at = po.U32_AT, po.tuple_at
#: pg_replication_slots.wal_status as a number, for the metric
_WAL_STATUS = {"reserved": 0, "extended": 1, "unreserved": 2, "lost": 3}


#: modes that never snapshot tables a publication gains (they stream them from the ALTER on)
_NO_NEW_TABLE_SNAPSHOT = ("never", "no_data", "schema_only", "initial_only")


class PublicationLacksTables(RetriableError):
    """Included tables appeared (or the include list changed) while streaming: the task
    restarts, and its start snapshots them before streaming resumes the stored offset."""


class _Resume:
    """The last position already emitted: events at or before it are skipped.

    ``through_lsn``/``through_count``: for an offset Debezium wrote inside a transaction
    (``offsets.debezium_through``), the first transaction streamed skips its changes before
    that LSN and the first ``through_count`` at it, which Debezium had delivered."""

    __slots__ = ("complete", "lsn_commit", "seq", "through_count", "through_lsn")

    def __init__(self, lsn_commit: int, seq: int, complete: bool) -> None:
        self.lsn_commit = lsn_commit
        self.seq = seq
        self.complete = complete
        self.through_lsn = 0
        self.through_count = 0


class PostgresStreaming(StreamingSource):
    def __init__(
        self,
        cfg: Config,
        modes: Modes,
        *,
        registry: TypeRegistry,
        metrics: SourceMetrics | None = None,
    ) -> None:
        self.cfg = cfg
        self.modes = modes
        self.registry = registry
        self.metrics = metrics
        self.dbname = cfg["database.dbname"]
        self._flush_lsn = 0
        self._flush_lock = threading.Lock()
        self._sent_flush = 0
        self._next_flush_status = 0.0
        self._next_slot_check = 0.0
        self.slot_lag_bytes = 0
        self.slot_wal_status = -1
        self.last_received = 0

    # -- called from the task thread once Kafka acknowledged ------------------------------------
    def commit_offset(self, offset: Mapping[str, Any]) -> None:
        lsn = int(offset.get("flush_lsn") or 0)
        with self._flush_lock:
            if lsn > self._flush_lsn:
                self._flush_lsn = lsn

    # -- the loop ---------------------------------------------------------------------------------
    def execute(self, ctx: SourceContext, offset: Mapping[str, Any] | None) -> None:
        if self.metrics is None:
            self.metrics = ctx.metrics
        if self.metrics is not None:
            self.metrics.extra["PostgresSlotLagBytes"] = lambda: float(self.slot_lag_bytes)
            self.metrics.extra["PostgresSlotWalStatus"] = lambda: float(self.slot_wal_status)
        resume = _Resume(0, 0, True)
        start_lsn = 0
        if offset:
            stored = WalPosition.from_offset(offset)
            resume = _Resume(stored.lsn_commit, stored.seq, stored.complete)
            start_lsn = stored.flush_lsn
            self._flush_lsn = start_lsn
            through = debezium_through(offset)
            if through is not None:
                resume.through_lsn, resume.through_count = through
                log.info(
                    "resuming from Debezium's offset: the transaction after LSN %s skips its "
                    "changes up to LSN %s, which Debezium delivered",
                    stored.lsn_commit,
                    through[0],
                )
        retries = int(self.cfg["slot.max.retries"])
        delay = int(self.cfg["slot.retry.delay.ms"]) / 1000
        # A lost connection backs off from ~1 s up to slot.retry.delay.ms; a slot held by
        # another process waits slot.retry.delay.ms, doubling up to 60 s (Debezium's wait).
        lost = Backoff(initial_delay_s=min(1.0, delay), max_delay_s=delay, max_retries=retries)
        busy = Backoff(initial_delay_s=delay, max_delay_s=60.0, max_retries=retries)

        def attempt(tries: int) -> None:
            nonlocal start_lsn
            start_lsn = max(start_lsn, self._flush_lsn) if tries else start_lsn
            self._stream(ctx, resume, start_lsn, offset is None and tries == 0)

        def schedule(exc: BaseException) -> Backoff | None:
            if isinstance(exc, PublicationLacksTables):
                return None  # a restart of the task snapshots the new tables first
            if isinstance(exc, InterruptedError):
                return None  # stopped while waiting for the slot: a clean end
            if ERRORS.classify(exc) is not ErrorKind.RETRIABLE:
                return None
            return busy if isinstance(exc, SlotInUse) else lost

        def on_failure(failure: Failure) -> None:
            if self.metrics is not None:
                self.metrics.streaming.connected = False
            if failure.delay is not None:
                log.warning(
                    "replication connection lost (%s); reconnecting in %.1f s (attempt %d/%d)",
                    failure.error,
                    failure.delay,
                    failure.attempt,
                    retries,
                )

        def give_up(failure: Failure) -> RetriableError:
            return RetriableError(
                f"lost the replication connection {failure.attempt - 1} times in a row; last "
                f"error: {failure.error}"
            )

        run_with_retries(
            attempt,
            schedule=schedule,
            stop=ctx.stop_event,
            on_failure=on_failure,
            give_up=give_up,
            translate=ERRORS.translate,
        )

    def _stream(self, ctx: SourceContext, resume: _Resume, start_lsn: int, first: bool) -> None:
        cfg = self.cfg
        slot = cfg["slot.name"]
        try:
            meta = pgconn.connect(cfg)
        except Exception as exc:
            raise _ConnectionLost(f"cannot connect to PostgreSQL: {exc}") from exc
        try:
            schema = PgSchema(meta, self.dbname, self.registry)
            listed = pgconn.list_tables(meta, self.dbname)
            included = [(t, oid) for t, oid in listed if ctx.is_included(t)]
            tables = [t for t, _ in included]
            check_included(cfg, tables, [t for t, _ in listed], ctx.metrics.notices)
            check_identities(meta, cfg, included)
            if cfg["snapshot.mode"] not in _NO_NEW_TABLE_SNAPSHOT:
                new = not_published(meta, cfg, tables)
                if new and cfg["publication.autocreate.mode"] == "filtered":
                    raise PublicationLacksTables(
                        f"included table(s) {', '.join(map(str, new))} are not in publication "
                        f"{cfg['publication.name']!r} yet; restarting the task adds and "
                        f"snapshots them before streaming goes on"
                    )
            sync_publication(meta, cfg, tables)
            info = pgconn.slot_info(meta, slot)
            if info is None and not first:
                raise FatalError(
                    f"replication slot {slot!r} does not exist, so the changes after the "
                    f"stored offset (LSN {po.lsn_to_str(start_lsn)}) are no longer "
                    f"available. Re-snapshot: set snapshot.mode=always (or when_needed), "
                    f"or reset this connector's offsets."
                )
            if info is not None:
                check_slot(info, cfg)
                wait_for_inactive_slot(meta, cfg, ctx.stop_event)
            repl = pgconn.connect_replication(cfg)
            try:
                if info is None:
                    row = repl.execute(
                        sql.SQL(
                            "CREATE_REPLICATION_SLOT {} LOGICAL pgoutput (SNAPSHOT 'nothing')"
                        ).format(sql.Identifier(slot))
                    ).fetchone()
                    log.info("created slot %s at %s", slot, row[1] if row else "?")
                self._replicate(ctx, repl, schema, resume, start_lsn, meta)
            finally:
                repl.close()
        finally:
            meta.close()

    def _start_command(self, start_lsn: int) -> bytes:
        pub = self.cfg["publication.name"].replace("'", "''")
        options = [
            f"proto_version '{int(self.cfg['proto.version'])}'",
            f"publication_names '\"{pub}\"'",
            "messages 'true'",
        ]
        extra = self.cfg.get("slot.stream.params")
        if extra:
            for item in str(extra).split(";"):
                if "=" in item:
                    k, v = item.split("=", 1)
                    options.append(f"\"{k.strip()}\" '{v.strip()}'")
        slot = self.cfg["slot.name"]
        return (
            f'START_REPLICATION SLOT "{slot}" LOGICAL {po.lsn_to_str(start_lsn)} '
            f"({', '.join(options)})"
        ).encode()

    def _replicate(
        self,
        ctx: SourceContext,
        repl: Any,
        schema: PgSchema,
        resume: _Resume,
        start_lsn: int,
        meta: Any,
    ) -> None:
        pgc = repl.pgconn
        pgc.send_query(self._start_command(start_lsn))
        res = pgc.get_result()
        if res is None or res.status != pq.ExecStatus.COPY_BOTH:
            msg = pgc.error_message.decode(errors="replace") if pgc.error_message else "?"
            if "is active for PID" in msg:
                raise SlotInUse(f"replication slot is in use: {msg}")
            raise FatalError(f"START_REPLICATION failed: {msg}")
        pgc.nonblocking = 1
        log.info("streaming from slot %s at %s", self.cfg["slot.name"], po.lsn_to_str(start_lsn))
        if self.metrics is not None:
            self.metrics.streaming.connected = True
        state = _StreamState(self, ctx, schema, resume)
        status_every = int(self.cfg["status.update.interval.ms"]) / 1000
        # Records go to the queue a run at a time: everything decoded from what libpq has
        # buffered, handed over before the loop waits on the socket (or every 512 records).
        hold = ctx.batched(512)
        try:
            with hold as flush:
                self._stream_loop(pgc, state, meta, ctx.stop_event, flush, status_every)
        finally:
            with contextlib.suppress(Exception):
                self._send_status(pgc, state.received)
            repl.close()

    def _stream_loop(
        self,
        pgc: Any,
        state: _StreamState,
        meta: Any,
        stop: threading.Event,
        flush: Callable[[], None],
        status_every: float,
    ) -> None:
        next_status = 0.0
        sock = pgc.socket
        handle = state.handle
        get_copy_data = pgc.get_copy_data
        monotonic = time.monotonic
        while not stop.is_set():
            n, buf = get_copy_data(1)
            if n > 0:
                handle(buf)  # a memoryview: ``handle`` copies only what it decodes slowly
                now = monotonic()
                if now >= next_status:
                    self._send_status(pgc, state.received)
                    next_status = now + status_every
                continue
            flush()  # nothing complete buffered: hand over what was decoded before waiting
            if n == -1:
                raise _ConnectionLost("the server ended the replication stream")
            if n == -2:
                raise _ConnectionLost(pgc.error_message.decode(errors="replace"))
            now = monotonic()
            if now >= next_status or state.reply_requested:
                self._send_status(pgc, state.received)
                state.reply_requested = False
                next_status = now + status_every
            if self._flush_lsn > self._sent_flush and now >= self._next_flush_status:
                # A newly acknowledged position: tell the server soon, so it can recycle
                # WAL, but not more than once a second.
                self._send_status(pgc, state.received)
                self._next_flush_status = now + 1.0
            state.idle(meta)
            if now >= self._next_slot_check:
                self._check_slot(meta)
                self._next_slot_check = now + 10.0
            r, _, _ = select.select([sock], [], [], min(status_every, 0.5))
            if r:
                try:
                    pgc.consume_input()
                except Exception as exc:
                    raise _ConnectionLost(str(exc)) from exc

    def _check_slot(self, meta: Any) -> None:
        """Slot lag and WAL status as metrics; an invalidated slot stops streaming loudly
        instead of continuing from a gap."""
        row = meta.execute(
            "SELECT pg_current_wal_lsn() - confirmed_flush_lsn, wal_status "
            "FROM pg_replication_slots WHERE slot_name = %s",
            (self.cfg["slot.name"],),
        ).fetchone()
        if row is None:
            raise FatalError(
                f"replication slot {self.cfg['slot.name']!r} was dropped while "
                f"streaming; re-snapshot with snapshot.mode=always"
            )
        lag, status = row
        self.slot_lag_bytes = int(lag or 0)
        self.slot_wal_status = _WAL_STATUS.get(status or "", -1)
        if status == "lost":
            raise FatalError(
                f"replication slot {self.cfg['slot.name']!r} was invalidated (wal_status lost): "
                f"WAL it needed was removed. Re-snapshot with snapshot.mode=always."
            )

    def _send_status(self, pgc: Any, received: int) -> None:
        with self._flush_lock:
            flush = self._flush_lsn
        self._sent_flush = flush
        now_us = time.time_ns() // 1000
        try:
            pgc.put_copy_data(po.standby_status(max(received, flush), flush, flush, now_us))
            pgc.flush()
        except Exception as exc:
            raise _ConnectionLost(f"cannot send status to the server: {exc}") from exc


class _ConnectionLost(RetriableError):
    """The replication connection broke (retried by ``execute``; never leaves it)."""


class _StreamState:
    """Per-connection decoding state: relations, the open transaction, resume skipping."""

    def __init__(
        self, src: PostgresStreaming, ctx: SourceContext, schema: PgSchema, resume: _Resume
    ) -> None:
        self.src = src
        self.ctx = ctx
        self.emit = ctx.emit
        #: the dispatcher's direct row entry (``emit`` of a RowChange without building one)
        self.emit_row = ctx.emit_row
        self.schema = schema
        self.resume = resume
        self.dbname = src.dbname
        self.relations: dict[int, tuple[Table, bool, tuple[int, ...]]] = {}
        #: per relation OID: what its rows are checked for before conversion (schema.py)
        self.guards: dict[int, RowGuard] = {}
        #: per relation OID: the key columns its last Relation message gave
        self.relation_keys: dict[int, tuple[str, ...]] = {}
        self.received = 0
        self.reply_requested = False
        self.in_tx = False
        self.skip_tx = False
        #: Debezium's last delivered change in this transaction (see ``_Resume``); 0: none
        self.skip_through = 0
        self.skip_at_through = 0
        self.xid = 0
        self.xid_text = "0"  # str(xid), once per transaction rather than per event
        self.commit_lsn = 0
        self.commit_ts_us = 0
        self.commit_ts_ms = 0
        self.seq = 0
        self.flush_lsn = src._flush_lsn
        self.last_position_lsn = 0
        self.last_idle = time.monotonic()
        #: per relation OID, its table id and the part of its rows' source that does not
        #: change (see ``_row_source``)
        self.row_sources: dict[int, tuple[Any, dict[str, Any] | None]] = {}
        #: the keys the dispatcher puts in front of every source, put there once per table
        #: instead of merged per row; empty when the context does not offer them
        prefix = getattr(ctx, "source_prefix", None)
        self.source_prefix: dict[str, Any] = dict(prefix) if isinstance(prefix, dict) else {}
        #: with the 3.x envelope, the dispatcher's source shaper: a table's source is shaped
        #: once (``_row_source``) and its per-row fields set here, as Debezium 3.x derives them
        self.shape: Any = getattr(ctx, "shape_source", None)
        self.handlers: dict[type, Any] = {
            po.Insert: self.row,
            po.Update: self.row,
            po.Delete: self.row,
            po.Begin: self.begin,
            po.Commit: self.commit,
            po.Relation: self.relation,
            po.Truncate: self.truncate,
            po.Message: self.logical_message,
        }
        self.heartbeat_query = src.cfg.get("heartbeat.action.query")
        # BEGIN events matter only when transaction metadata is on
        self.tx_events = ctx.tx_metadata
        self.next_end_event = 0.0
        self.heartbeat_s = int(src.cfg["heartbeat.interval.ms"]) / 1000
        self.next_heartbeat = time.monotonic() + self.heartbeat_s if self.heartbeat_s else 0.0

    # -- input ----------------------------------------------------------------------------------
    def handle(self, buf: bytes | memoryview) -> None:
        """One CopyData payload. It may be a memoryview of libpq's buffer (the stream loop's,
        no copy per message): the Begin, Commit, Insert, Update and Delete paths read it in
        place, every other message is decoded from a ``bytes`` copy."""
        tag = buf[0]
        if tag == 0x77:  # 'w': XLogData header is data start, WAL end, clock (3 x 8 bytes)
            kind = buf[25] if len(buf) > 25 else 0
            if kind == 0x42 and len(buf) >= _W_BEGIN.size:
                # Begin and Commit come with every transaction: header and message in one
                # unpack, no generic dispatch (the general path decodes them identically).
                _, wal_end, final_lsn, ts, xid = _W_BEGIN.unpack_from(buf)
                if wal_end > self.received:
                    self.received = wal_end
                self.begin_tx(final_lsn, ts + po.PG_EPOCH_OFFSET_US, xid)
                return
            if kind == 0x43 and len(buf) >= _W_COMMIT.size:
                _, wal_end, _flags, commit_lsn, end_lsn, _ts = _W_COMMIT.unpack_from(buf)
                if wal_end > self.received:
                    self.received = wal_end
                self.commit_tx(commit_lsn, end_lsn)
                return
            data_start, wal_end = _XLOG_HEAD.unpack_from(buf, 1)
            if wal_end > self.received:
                self.received = wal_end
            if kind == 0x49:  # Insert: the tuple without a message object
                try:  # ``insert_at`` inlined; anything unusual goes through it
                    if buf[30] != 0x4E:  # 'N'
                        raise po.PgOutputError("insert message without a new tuple")
                    (oid,) = _U32_AT(buf, 26)
                    new = _tuple_at(buf, 31, 25)[0]
                except Exception:
                    oid, new = po.insert_at(bytes(buf), 25)
                self.insert(oid, new, data_start)
                return
            if kind == 0x55 or kind == 0x44:  # Update, Delete: as inline as the Insert
                try:  # what ``_update``/``_delete`` decode; anything unusual goes through them
                    (oid,) = _U32_AT(buf, 26)
                    image = buf[30]
                    old = key = None
                    if kind == 0x44:
                        if image == 0x4F:  # 'O': the old row, REPLICA IDENTITY FULL
                            old = _tuple_at(buf, 31, 25)[0]
                        elif image == 0x4B:  # 'K': the old key
                            key = _tuple_at(buf, 31, 25)[0]
                        else:
                            raise po.PgOutputError("delete message without an old tuple")
                    else:
                        pos = 30
                        if image == 0x4F:
                            old, pos = _tuple_at(buf, 31, 25)
                        elif image == 0x4B:
                            key, pos = _tuple_at(buf, 31, 25)
                        if buf[pos] != 0x4E:  # 'N'
                            raise po.PgOutputError("update message without a new tuple")
                        new = _tuple_at(buf, pos + 1, 25)[0]
                except Exception:
                    pass  # the general path below decodes it, or fails as it always did
                else:
                    if kind == 0x44:
                        self.delete(oid, old, key, data_start)
                    else:
                        self.update(oid, old, key, new, data_start)
                    return
            msg = po.decode_at(bytes(buf), 25)  # after the 25-byte XLogData header
            handler = self.handlers.get(type(msg))
            if handler is not None:
                handler(msg, data_start)
        elif tag == 0x6B:  # 'k'
            ka = po.decode_copy_data(bytes(buf))
            assert isinstance(ka, po.Keepalive)
            self.received = max(self.received, ka.wal_end)
            if ka.reply_requested:
                self.reply_requested = True
            self.keepalive(ka.wal_end)
        else:
            raise po.PgOutputError(f"unexpected replication message {bytes(buf[:1])!r}")

    def keepalive(self, wal_end: int) -> None:
        """Nothing open and everything before ``wal_end`` decoded: the slot may advance to
        it once what was emitted before is acknowledged (pg_recvlogical does the same)."""
        if self.in_tx or wal_end <= self.flush_lsn or wal_end <= self.last_position_lsn:
            return
        self.last_position_lsn = wal_end
        self.emit(PositionReached(self._offset(wal_end, self.commit_lsn, self.seq, True, wal_end)))

    def idle(self, meta: Any) -> None:
        if not self.heartbeat_s or time.monotonic() < self.next_heartbeat:
            return
        self.next_heartbeat = time.monotonic() + self.heartbeat_s
        # Write something into this database's WAL so its slot can advance even when the
        # captured tables are idle (the seed's multi-database case).
        try:
            if self.heartbeat_query:
                meta.execute(self.heartbeat_query)
            else:
                meta.execute("SELECT pg_logical_emit_message(false, %s, '')", (HEARTBEAT_PREFIX,))
        except Exception:
            log.warning("heartbeat write failed", exc_info=True)

    # -- offsets --------------------------------------------------------------------------------
    def _offset(
        self, lsn: int, commit_lsn: int, seq: int, complete: bool, flush_lsn: int
    ) -> dict[str, Any]:
        return {
            "lsn": lsn,
            "txId": self.xid,
            "ts_usec": self.commit_ts_us,
            "lsn_commit": commit_lsn,
            "seq": seq,
            "complete": complete,
            "flush_lsn": flush_lsn,
        }

    def _source(self, table_id: TableId, lsn: int) -> dict[str, Any]:
        return {
            "ts_ms": self.commit_ts_us // 1000,
            "snapshot": False,
            "db": self.dbname,
            "schema": table_id.schema,
            "table": table_id.table,
            "txId": self.xid,
            "lsn": lsn,
            "xmin": None,
        }

    # -- pgoutput messages ----------------------------------------------------------------------
    def message(self, msg: po.PgOutputMessage, lsn: int) -> None:
        handler = self.handlers.get(type(msg))
        if handler is not None:  # Origin and Type messages carry nothing the events need
            handler(msg, lsn)

    def begin(self, msg: po.Begin, lsn: int = 0) -> None:
        self.begin_tx(msg.final_lsn, msg.commit_ts_us, msg.xid)

    def begin_tx(self, final_lsn: int, commit_ts_us: int, xid: int) -> None:
        self.in_tx = True
        self.xid = xid
        self.xid_text = str(xid)
        self.commit_lsn = final_lsn
        self.commit_ts_us = commit_ts_us
        self.commit_ts_ms = commit_ts_us // 1000
        self.seq = 0
        r = self.resume
        self.skip_tx = final_lsn < r.lsn_commit or (final_lsn == r.lsn_commit and r.complete)
        if self.skip_tx:
            return
        self.skip_through, self.skip_at_through = r.through_lsn, r.through_count
        metrics = self.src.metrics
        if metrics is not None:
            now_ms = time.time_ns() // 1_000_000
            streaming = metrics.streaming
            streaming.last_event_ms = now_ms
            streaming.ms_behind_source = max(now_ms - commit_ts_us // 1000, 0)
        if self.tx_events and final_lsn != r.lsn_commit:
            self.emit(
                TransactionBegin(
                    self.xid_text,
                    self._tx_source(final_lsn),
                    self._offset(final_lsn, final_lsn, 0, False, self.flush_lsn),
                )
            )

    def _tx_source(self, lsn: int) -> dict[str, Any]:
        return {
            "ts_ms": self.commit_ts_us // 1000,
            "snapshot": False,
            "db": self.dbname,
            "schema": "",
            "table": "",
            "txId": self.xid,
            "lsn": lsn,
            "xmin": None,
        }

    def commit(self, msg: po.Commit, lsn: int = 0) -> None:
        self.commit_tx(msg.commit_lsn, msg.end_lsn)

    def commit_tx(self, commit_lsn: int, end_lsn: int) -> None:
        self.in_tx = False
        skipped = self.skip_tx
        self.skip_tx = False
        self.flush_lsn = end_lsn
        if skipped:
            return
        resume = self.resume
        resume.lsn_commit, resume.seq, resume.complete = commit_lsn, self.seq, True
        resume.through_lsn = self.skip_through = 0
        if not self.tx_events:
            # Without transaction metadata an END only moves the position: send one at most
            # every 100 ms (the next event's offset carries the position anyway).
            now = time.monotonic()
            if now < self.next_end_event:
                metrics = self.src.metrics
                if metrics is not None:
                    metrics.streaming.committed_transactions += 1
                return
            self.next_end_event = now + 0.1
        self.emit(
            TransactionEnd(
                self.xid_text,
                self._tx_source(commit_lsn),
                self._offset(commit_lsn, commit_lsn, self.seq, True, end_lsn),
            )
        )

    def relation(self, msg: po.Relation, lsn: int = 0) -> None:
        table = as_partition_root(self.schema.conn, self.schema.from_relation(msg))
        pk = tuple(c.position for c in table.columns if c.name in table.primary_key)
        self.relations[msg.oid] = (table, self.ctx.is_included(table.id), pk)
        self.row_sources.pop(msg.oid, None)
        self.ctx.register_table(table)
        self._watch_relation(msg, table, lsn)

    def _watch_relation(self, msg: po.Relation, table: Table, lsn: int) -> None:
        """Says when a table's key changes in the stream (events after it are keyed by the
        new identity, those before by the old) and sets the row checks of this version."""
        previous = self.relation_keys.get(msg.oid)
        if previous is not None and previous != table.primary_key:
            log.warning(
                "%s: key columns change from (%s) to (%s) at LSN %s; the events from there on "
                "are keyed by the new columns",
                table.id,
                ", ".join(previous),
                ", ".join(table.primary_key),
                po.lsn_to_str(lsn),
            )
        self.relation_keys[msg.oid] = table.primary_key
        guard = self.schema.guard(msg, table)
        if guard is None:
            self.guards.pop(msg.oid, None)
        else:
            self.guards[msg.oid] = guard

    def _admit(self, relation_oid: int, *images: list[Any] | None) -> None:
        """Registers the table again before a row its schema cannot carry as it is (a NULL
        where only today's catalog says NOT NULL, an enum label added since)."""
        guard = self.guards.get(relation_oid)
        if guard is None:
            return
        for values in images:
            table = None if values is None else guard.admit(values)
            if table is not None:
                self._register_again(relation_oid, table)

    def _register_again(self, relation_oid: int, table: Table) -> None:
        entry = self.relations[relation_oid]
        self.relations[relation_oid] = (table, entry[1], entry[2])
        self.ctx.register_table(table)

    def _row_position(
        self, relation_oid: int, lsn: int
    ) -> tuple[TableId, dict[str, Any], dict[str, Any]] | None:
        """Counts the row and gives its table, ``source`` and offset, or None when the row is
        skipped (already emitted before a restart, or its table is not captured)."""
        seq = self.seq = self.seq + 1
        if self.skip_tx or (self.commit_lsn == self.resume.lsn_commit and seq <= self.resume.seq):
            return None
        if self.skip_through and self._debezium_sent(lsn):
            return None
        entry = self.row_sources.get(relation_oid)
        if entry is None:
            entry = self._row_source(relation_oid, lsn)
        tid, base = entry
        if base is None:
            return None
        # A copy of the table's source (same keys, same order) with the fields that change:
        # cheaper than building it key by key and merging the dispatcher's prefix.
        source = base.copy()
        source["ts_ms"] = self.commit_ts_ms
        source["txId"] = xid = self.xid
        source["lsn"] = lsn
        if self.shape is not None:  # what the 3.x shaper derives from the offset
            source["ts_us"] = us = self.commit_ts_us
            source["ts_ns"] = us * 1000
            flushed = self.flush_lsn
            source["sequence"] = f'["{flushed}","{lsn}"]' if flushed else f'[null,"{lsn}"]'
        return (
            tid,
            source,
            {
                "lsn": lsn,
                "txId": xid,
                "ts_usec": self.commit_ts_us,
                "lsn_commit": self.commit_lsn,
                "seq": seq,
                "complete": False,
                "flush_lsn": self.flush_lsn,
            },
        )

    def _debezium_sent(self, lsn: int) -> bool:
        """Whether Debezium delivered the change at ``lsn`` of the transaction it stopped in:
        changes of one transaction come in LSN order, and several may share an LSN (a
        multi-row insert), of which Debezium counted those it delivered."""
        if lsn < self.skip_through:
            return True
        if lsn == self.skip_through and self.skip_at_through > 0:
            self.skip_at_through -= 1
            return True
        return False

    def _row_source(self, relation_oid: int, lsn: int) -> tuple[Any, dict[str, Any] | None]:
        """The table of a relation's rows and the ``source`` they share but for ``ts_ms``,
        ``txId`` and ``lsn`` (None: the table is not captured); kept until the next
        Relation message of that relation."""
        entry = self.relations.get(relation_oid)
        if entry is None:
            raise po.PgOutputError(
                f"row for relation {relation_oid} before its Relation message at "
                f"{po.lsn_to_str(lsn)}"
            )
        table, included, _pk = entry
        tid = table.id
        base = None
        if included:
            base = {
                **self.source_prefix,
                "ts_ms": 0,
                "snapshot": False,
                "db": self.dbname,
                "schema": tid.schema,
                "table": tid.table,
                "txId": 0,
                "lsn": 0,
                "xmin": None,
            }
            if self.shape is not None:
                base = self.shape(base, {"flush_lsn": 0, "ts_usec": 0})
        self.row_sources[relation_oid] = (tid, base)
        return tid, base

    def insert(self, relation_oid: int, new: list[Any], lsn: int) -> None:
        position = self._row_position(relation_oid, lsn)
        if position is not None:
            guard = self.guards.get(relation_oid)
            # RowGuard.admit's own first test, inlined: most rows have nothing to look at
            if guard is not None and (guard.enums or (guard.required and None in new)):
                table = guard.admit(new)
                if table is not None:
                    self._register_again(relation_oid, table)
            tid, source, offset = position
            self.emit_row(_CREATE, tid, None, new, source, offset, self.xid_text)

    def row(self, msg: po.Insert | po.Update | po.Delete, lsn: int) -> None:
        if isinstance(msg, po.Insert):
            self.insert(msg.relation_oid, msg.new, lsn)
        elif isinstance(msg, po.Update):
            self.update(msg.relation_oid, msg.old, msg.key, msg.new, lsn)
        else:
            self.delete(msg.relation_oid, msg.old, msg.key, lsn)

    def update(
        self,
        relation_oid: int,
        old: list[Any] | None,
        key: list[Any] | None,
        new: list[Any],
        lsn: int,
    ) -> None:
        position = self._row_position(relation_oid, lsn)
        if position is None:
            return
        if relation_oid in self.guards:
            # a key-only image ('K') has None where it carries nothing: only full rows count
            self._admit(relation_oid, old, new)
        tid, source, offset = position
        before = old if old is not None else key
        partial = UNAVAILABLE in new
        if partial and old is not None:
            # Unchanged TOAST values are never resent, but REPLICA IDENTITY FULL sends the
            # old row in full: take them from there.
            new = [o if n is UNAVAILABLE else n for n, o in zip(new, old, strict=True)]
            partial = UNAVAILABLE in new
        self.emit_row(_UPDATE, tid, before, new, source, offset, self.xid_text, partial)

    def delete(
        self, relation_oid: int, old: list[Any] | None, key: list[Any] | None, lsn: int
    ) -> None:
        position = self._row_position(relation_oid, lsn)
        if position is None:
            return
        if relation_oid in self.guards:
            self._admit(relation_oid, old, None)
        tid, source, offset = position
        before = old if old is not None else key
        partial = before is not None and UNAVAILABLE in before
        self.emit_row(_DELETE, tid, before, None, source, offset, self.xid_text, partial)

    def truncate(self, msg: po.Truncate, lsn: int) -> None:
        self.seq += 1
        if self.skip_tx or (
            self.commit_lsn == self.resume.lsn_commit and self.seq <= self.resume.seq
        ):
            return
        if self.skip_through and self._debezium_sent(lsn):
            return
        ids = [self.relations[o][0].id for o in msg.relation_oids if o in self.relations]
        self.emit(
            TableTruncated(
                ids,
                self._tx_source(lsn),
                self._offset(lsn, self.commit_lsn, self.seq, False, self.flush_lsn),
                str(self.xid),
            )
        )

    def logical_message(self, msg: po.Message, lsn: int) -> None:
        if msg.transactional:
            self.seq += 1
            if self.skip_tx or (
                self.commit_lsn == self.resume.lsn_commit and self.seq <= self.resume.seq
            ):
                return
            if self.skip_through and self._debezium_sent(lsn):
                return
            offset = self._offset(lsn, self.commit_lsn, self.seq, False, self.flush_lsn)
        else:
            if self.in_tx:
                return
            offset = self._offset(lsn, self.commit_lsn, self.seq, True, max(lsn, self.flush_lsn))
            if msg.prefix == HEARTBEAT_PREFIX:
                self.emit(PositionReached(offset))
                return
        self.emit(
            LogicalMessage(
                msg.prefix,
                msg.content,
                msg.transactional,
                self._tx_source(lsn),
                offset,
                str(self.xid) if msg.transactional else None,
            )
        )
