"""The shared conformance suite (cdc/testing/conformance.py) where it applies to Cassandra.

Applies: snapshot reads, restart without loss or repeats, truncate (not reported: TRUNCATE
does not go through the commit log, as for MySQL). Does not apply: the c/u/d images check
(Cassandra events carry no ``before`` and an UPDATE only the columns it wrote, by the seed's
design) and the primary-key change split (a Cassandra primary key cannot be updated).
The target reads ``{value, deletion_ts, set}`` cells back as plain values."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from cdc.offsets.memory import MemoryOffsetStore
from cdc.testing.conformance import (
    Target,
    restart_resumes_without_loss_or_repeats,
    snapshot_reads_every_row,
    truncate_is_reported,
)
from cdc.testing.kafka_reader import Event
from tests.integration.cassandra_harness import CassandraHarness, RunningConnector
from tests.integration.conftest import CassandraInfo

pytestmark = [pytest.mark.cassandra, pytest.mark.kafka]

APPLICABLE = [
    snapshot_reads_every_row,
    restart_resumes_without_loss_or_repeats,
    truncate_is_reported,
]


def _plain(image: Any) -> Any:
    if not isinstance(image, dict):
        return image
    return {k: v["value"] if isinstance(v, dict) else v for k, v in image.items()}


class CassandraTarget:
    supports_truncate = False

    def __init__(self, h: CassandraHarness) -> None:
        self.h = h

    def create_table(self, table: str) -> None:
        self.h.cql(
            f"CREATE TABLE {self.h.keyspace}.{table} (id int PRIMARY KEY, name text, score int) "
            "WITH cdc = true"
        )

    def execute(self, table: str, op: str, *args: Any) -> None:
        t = f"{self.h.keyspace}.{table}"
        if op == "insert":
            self.h.cql(f"INSERT INTO {t} (id, name, score) VALUES (%s, %s, %s)", args)
        elif op == "update":
            self.h.cql(f"UPDATE {t} SET name = %s WHERE id = %s", (args[1], args[0]))
        elif op == "delete":
            self.h.cql(f"DELETE FROM {t} WHERE id = %s", args)
        else:
            self.h.cql(f"TRUNCATE {t}")

    def config(self, table: str, **overrides: str) -> dict[str, Any]:
        cfg = self.h.config(**{"table.include.list": rf"{self.h.keyspace}\.{table}"})
        cfg.update(overrides)
        return cfg

    @contextmanager
    def _running(self, cfg: dict[str, Any], store: Any) -> Iterator[RunningConnector]:
        # writes made just before reach cdc_raw with the next commit log sync (1 s): wait, so
        # the snapshot's position is after them (else they are streamed too, as Cassandra's
        # lock-free snapshot allows)
        time.sleep(1.2)
        with self.h.running(cfg, store) as run:
            yield run

    def running(self, cfg: dict[str, Any], store: Any) -> AbstractContextManager[Any]:
        return self._running(cfg, store)

    def wait_streaming(self, run: RunningConnector) -> None:
        self.h.wait_streaming(run)

    def read(self, cfg: dict[str, Any], table: str, min_count: int) -> list[Event]:
        events = self.h.read(cfg, table, min_count=min_count)
        for e in events:
            if isinstance(e.value, dict):
                e.value["after"] = _plain(e.value.get("after"))
        return events

    def new_offset_store(self) -> MemoryOffsetStore:
        return MemoryOffsetStore()


@pytest.fixture(scope="module")
def target(
    cassandra: CassandraInfo, kafka: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    tmp: Path = tmp_path_factory.mktemp("csconf")
    h = CassandraHarness(cassandra, kafka, f"csconf_{uuid.uuid4().hex[:8]}", tmp)
    yield CassandraTarget(h)
    h.drop()


@pytest.mark.parametrize("check", APPLICABLE, ids=lambda c: c.__name__)
def test_conformance(check: Any, target: Target) -> None:
    check(target)
