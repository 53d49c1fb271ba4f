"""The PostgreSQL side of the fault scenarios: a fresh table per run and its connector config."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from subprocess import Popen
from typing import Any

import psycopg

from tests.faults.scenario import Writer, stored_offset
from tests.integration.pg_harness import PgHarness
from tests.integration.test_postgres_snapshot_restart import run_child
from tests.integration.test_verify_postgres import pg_harness

__all__ = ["PgRun", "pg_harness", "pg_run", "ready", "run_child", "wait_streaming"]


@dataclass
class PgRun:
    """One run of a scenario: its table (``rows`` rows, REPLICA IDENTITY FULL so updates
    carry the large value), a temporary directory, the connector config and its topic."""

    h: PgHarness
    table: str
    tmp: Path
    cfg: dict[str, Any]
    topic: str

    @property
    def connect(self) -> Callable[[], Any]:
        return lambda: psycopg.connect(self.h.pg.dsn(self.h.dbname), autocommit=True)

    def writer(self, first_id: int, seed: int, **kw: Any) -> Writer:
        return Writer(self.connect, self.table, first_id, seed, **kw)

    @property
    def qualified(self) -> str:
        return f"public.{self.table}"

    def stored(self) -> dict[str, Any] | None:
        return stored_offset(self.tmp / "offsets.json")

    def streaming(self) -> bool:
        """The snapshot-complete offset (or a later one) is stored."""
        stored = self.stored()
        return stored is not None and not stored.get("snapshot")


def pg_run(h: PgHarness, tmp_path: Path, run: int, rows: int, **overrides: Any) -> PgRun:
    table = f"items{run}"
    tmp = tmp_path / f"run{run}"
    tmp.mkdir()
    h.sql(
        f"CREATE TABLE {table} (id int PRIMARY KEY, v text, n int)",
        f"ALTER TABLE {table} REPLICA IDENTITY FULL",
        f"INSERT INTO {table} SELECT g, 'v' || g, 0 FROM generate_series(1, {rows}) g",
    )
    cfg = h.config(table_include_list=f"public.{table}", **overrides)
    return PgRun(h, table, tmp, cfg, h.topic(cfg, table))


def ready(proc: Popen[bytes]) -> Popen[bytes]:
    """Wait until an ``engine_child`` built its engine (it prints READY): a SIGTERM earlier
    ends it before it ran at all."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == b"READY", (line, proc.communicate()[1].decode()[-3000:])
    return proc


def wait_streaming(r: PgRun, proc: Popen[bytes], timeout: float = 60) -> None:
    """Until the task stored its snapshot-complete offset (a stop before that ends the
    snapshot with an error, see docs/reliability.md)."""
    deadline = time.monotonic() + timeout
    while not r.streaming():
        if proc.poll() is not None:
            raise AssertionError(proc.communicate()[1].decode()[-3000:])
        assert time.monotonic() < deadline, "the snapshot did not finish"
        time.sleep(0.05)
