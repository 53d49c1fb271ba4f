"""PostgreSQL: a 50 MB value (issue 19's bad-data case), far over what Kafka takes (1 MB by
default), between a row written before it and one after it, under
``event.processing.failure.handling.mode`` ``dead-letter`` and ``fail``.

Expected: the value travels through pgoutput, decoding and encoding without the task running
out of memory or stalling; under ``dead-letter`` capture goes on, the dead-letter topic holds
one record naming the key, topic and size (not the 50 MB), and verify names exactly that key
as missing; under ``fail`` the task stops naming the producer's limit and the settings that
raise it, with no offset past the value (the restart delivers it once the limit is raised: not
done here, the poison scenario covers that path).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc.testing.kafka_reader import read_topic
from connectors.postgres.verify import verify_side
from tests.faults.child import spawn
from tests.faults.pg import pg_harness, pg_run
from tests.faults.scenario import (
    SENTINEL,
    check,
    failed_child,
    process_alive,
    stop_child,
    wait_for_sentinel,
)
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

ROWS = 300
HUGE = SENTINEL - 4
SIZE = 50 * 1024 * 1024
SCENARIO = "PostgreSQL: a 50 MB value, mode dead-letter"


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    yield from pg_harness(postgres, kafka, "fhv")


def test_fifty_megabyte_value(h: PgHarness, tmp_path: Path) -> None:
    runs = {mode: pg_run(h, tmp_path, i, ROWS) for i, mode in enumerate(("dead-letter", "fail"))}
    procs = {}
    for mode, r in runs.items():
        r.cfg["event.processing.failure.handling.mode"] = mode
        r.cfg["errors.deadletterqueue.topic.name"] = f"{r.cfg['name']}-dlq"
        procs[mode] = spawn(r.tmp, "postgres", h.kafka, r.cfg)
    try:
        deadline = time.monotonic() + 60
        while not all(r.streaming() for r in runs.values()):
            for p in procs.values():
                process_alive(p)()
            assert time.monotonic() < deadline, "the snapshots did not finish"
            time.sleep(0.1)
        for r in runs.values():
            # random text (md5s), so its size survives TOAST compression and the producer's
            h.sql(
                f"INSERT INTO {r.table} VALUES ({ROWS + 1}, 'before', 0)",
                f"INSERT INTO {r.table} SELECT {HUGE}, string_agg(md5(g::text), ''), 0 "
                f"FROM generate_series(1, {SIZE // 32}) g",
                f"INSERT INTO {r.table} VALUES ({SENTINEL}, 'end', 0)",
            )
        fail = runs["fail"]
        err = failed_child(procs.pop("fail"))
        assert "MSG_SIZE_TOO_LARGE" in err and "max.request.size" in err, err[-3000:]
        # nothing at or after the huge value was delivered or stored: its transaction and the
        # sentinel's (the only later ones) are neither in the topic nor the stored offset
        later = {
            int(x) for (x,) in h.sql(f"SELECT xmin::text FROM {fail.table} WHERE id >= {HUGE}")
        }
        stored = fail.stored()
        assert stored is not None and stored.get("txId") not in later, (stored, later)
        assert not [e for e in read_topic(h.kafka, fail.topic) if e.key["id"] >= HUGE]
        dead = runs["dead-letter"]
        wait_for_sentinel(h.kafka, dead.topic, process_alive(procs["dead-letter"]))
        stop_child(procs.pop("dead-letter"))
    finally:
        for p in procs.values():
            p.kill()
    [record] = read_topic(h.kafka, f"{dead.cfg['name']}-dlq", min_count=1, settle=0.5)
    assert record.value["event"]["topic"] == dead.topic, record.value
    assert f'"id":{HUGE}' in record.value["event"]["key"], record.value
    assert record.value["event"]["size"] > SIZE, record.value
    check(SCENARIO, verify_side(dead.cfg), h.kafka, dead.qualified, dead.topic, missing=[HUGE])
    for r in runs.values():
        h.drop_slot(r.cfg)
