"""Publication and slot preconditions, with errors that tell the operator what to do."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from cdc.config import Config
from cdc.errors import FatalError, RetriableError
from cdc.retry import Backoff, Failure, Stop, run_with_retries
from connectors.postgres import connection as pgconn

log = logging.getLogger("tidemark.postgres")


class _SlotActive(Exception):
    def __init__(self, info: pgconn.SlotInfo) -> None:
        super().__init__(f"slot in use by pid {info.active_pid}")
        self.info = info


def wait_for_inactive_slot(conn: Any, cfg: Config, stop: Stop) -> None:
    """A slot held by another connection is retried ``slot.max.retries`` times, every
    ``slot.retry.delay.ms``, then fails. A stop ends the wait at once (InterruptedError, the
    pipeline's clean end): the wait can last a minute, and a source left waiting after its
    task was stopped would take the slot from the task that replaced it."""
    slot = cfg["slot.name"]
    retries = int(cfg["slot.max.retries"])
    delay = int(cfg["slot.retry.delay.ms"]) / 1000
    every = Backoff(initial_delay_s=delay, max_delay_s=delay, multiplier=1, max_retries=retries)

    def check(tries: int) -> None:
        info = pgconn.slot_info(conn, slot)
        if info is not None and info.active:
            raise _SlotActive(info)

    def on_failure(failure: Failure) -> None:
        if failure.delay is not None:
            log.warning(
                "replication slot %s is in use by pid %s; retry %d/%d in %.1f s",
                slot,
                _holder(failure),
                failure.attempt,
                retries,
                failure.delay,
            )

    def give_up(failure: Failure) -> RetriableError:
        return RetriableError(
            f"replication slot {slot!r} is still in use by another connection (pid "
            f"{_holder(failure)}) after {retries} retries. Stop the other consumer "
            f"or give this connector its own slot.name."
        )

    run_with_retries(
        check,
        schedule=lambda exc: every if isinstance(exc, _SlotActive) else None,
        stop=stop,
        on_failure=on_failure,
        give_up=give_up,
    )
    if stop.is_set():
        raise InterruptedError(f"stopped while waiting for replication slot {slot!r}")


def _holder(failure: Failure) -> object:
    error = failure.error
    return error.info.active_pid if isinstance(error, _SlotActive) else "?"


def check_slot(info: pgconn.SlotInfo, cfg: Config) -> None:
    """A slot this connector can stream from: not invalidated, pgoutput on its database."""
    slot, dbname = cfg["slot.name"], cfg["database.dbname"]
    if info.wal_status == "lost":
        raise FatalError(
            f"replication slot {slot!r} was invalidated by the server (wal_status lost, "
            f"max_slot_wal_keep_size exceeded): changes after LSN {info.confirmed_flush_lsn} "
            f"are gone. Drop the slot and re-snapshot (snapshot.mode=always)."
        )
    if info.plugin != "pgoutput" or info.database != dbname:
        raise FatalError(
            f"replication slot {slot!r} uses plugin {info.plugin} on database "
            f"{info.database}; this connector needs pgoutput on {dbname}"
        )


def temporary_slot_name(slot: str) -> str:
    """A unique name for the TEMPORARY slot whose exported snapshot a re-snapshot reads
    (slot names are at most 63 characters)."""
    return f"{slot[:48]}_snap_{uuid.uuid4().hex[:8]}"
