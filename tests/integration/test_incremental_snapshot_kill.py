"""AC-75 with a real kill: the PostgreSQL task process is SIGKILLed in the middle of an
incremental snapshot; the restart resumes after the last read whose offset was stored (no
read of a key at or below it comes again), and every row is read."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc.offsets.file import FileOffsetStore
from tests.integration.conftest import PgInfo
from tests.integration.incremental_scenarios import SIGNAL_DDL
from tests.integration.pg_harness import PgHarness
from tests.integration.test_engine_crash import end_offset, finish, read_all, start, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

ROWS, CHUNK = 3000, 25


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    harness = PgHarness(postgres, kafka, f"tmk_{uuid.uuid4().hex[:8]}")
    harness.sql(SIGNAL_DDL)
    yield harness
    harness.dispose()


def test_sigkill_mid_incremental_snapshot_resumes_after_the_stored_key(
    h: PgHarness, tmp_path: Path
) -> None:
    h.sql(
        "CREATE TABLE big (id int PRIMARY KEY, v text)",
        f"INSERT INTO big SELECT g, 'v' || g FROM generate_series(1, {ROWS}) g",
    )
    cfg = h.config(
        table_include_list="public.dbz_signal,public.big",
        signal_data_collection="public.dbz_signal",
        snapshot_mode="never",
        incremental_snapshot_chunk_size=CHUNK,
    )
    offsets = tmp_path / "offsets.json"
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "kind": "postgres",
                "bootstrap": h.kafka,
                "offsets": {"file": str(offsets)},
                "config": cfg,
                "flush_ms": 50,
            }
        )
    )
    topic = h.topic(cfg, "big")
    proc = start(spec)
    try:
        # streaming for sure once a harmless log signal reaches the signal table's topic
        deadline = time.monotonic() + 60
        while end_offset(h.kafka, h.topic(cfg, "dbz_signal")) == 0:
            assert proc.poll() is None and time.monotonic() < deadline, "child not streaming"
            h.sql("INSERT INTO dbz_signal VALUES ('probe', 'log', '{\"message\": \"up?\"}')")
            time.sleep(0.5)
        h.sql(
            "INSERT INTO dbz_signal VALUES ('kill-1', 'execute-snapshot', "
            '\'{"data-collections": ["public.big"]}\')'
        )
        wait_for(h.kafka, topic, ROWS // 3, proc)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()  # reaps it and closes its pipes
    store = FileOffsetStore(str(offsets))
    store.start()
    stored = store.get(cfg["name"], {"server": cfg["database.server.name"]})
    store.close()
    assert stored is not None
    acked = int(json.loads(stored["incremental_snapshot_primary_key"])[0])
    before = [e["after"]["id"] for e in read_all(h.kafka, topic, "read_uncommitted")]
    assert 0 < acked <= max(before) < ROWS  # killed mid-snapshot, after some offsets stored
    proc = start(spec)
    try:
        wait_for(h.kafka, topic, len(before) + ROWS - acked, proc)
    finally:
        finish(proc)
    ids = [e["after"]["id"] for e in read_all(h.kafka, topic, "read_uncommitted")]
    counts = Counter(ids)
    assert set(counts) == set(range(1, ROWS + 1))
    again = sorted(k for k, n in counts.items() if n > 1)
    assert all(k > acked for k in again)  # nothing at or below the stored key is read again
    assert all(n <= 2 for n in counts.values())
