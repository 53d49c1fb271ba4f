"""PostgreSQL: a poison event under each ``event.processing.failure.handling.mode``.

The poison is a row Kafka cannot take: a value over the producer's limit
(``max.request.size``, librdkafka's ``message.max.bytes``: 800,000 here, above the writers'
300 KB value with its before image). One table per mode, captured at the same time, each
under writes with the poison row inserted in the middle of them. Expected (docs/architecture.md):

- ``skip``, ``warn``, ``dead-letter``: capture goes on; verify names exactly the poisoned key
  as missing and nothing else; ``warn`` logs the event's position, ``skip`` does not;
  the dead-letter topic holds one record, naming the poisoned key, its topic and size.
- ``fail``: the task stops at the poison naming the settings that raise the limit, with no
  offset past it; restarted with the default limit (1 MB), it delivers the poison and
  everything after it, and verify finds the topic equal.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from subprocess import Popen

import pytest

from cdc.testing.kafka_reader import read_topic
from connectors.postgres.verify import verify_side
from tests.faults.child import spawn
from tests.faults.pg import PgRun, pg_harness, pg_run
from tests.faults.scenario import (
    RESULTS,
    SENTINEL,
    Result,
    Writer,
    check,
    failed_child,
    process_alive,
    stop_child,
    wait_for_sentinel,
)
from tests.integration.conftest import PgInfo
from tests.integration.pg_harness import PgHarness

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

ROWS = 500
POISON = SENTINEL - 3
LIMIT = {"max.request.size": 800_000}
MODES = ("skip", "warn", "dead-letter", "fail")


@pytest.fixture(scope="module")
def h(postgres: PgInfo, kafka: str) -> Iterator[PgHarness]:
    yield from pg_harness(postgres, kafka, "fpo")


def test_poison_event_under_each_failure_mode(h: PgHarness, tmp_path: Path, runs: int) -> None:
    for run in range(runs):
        one_run(h, tmp_path / f"run{run}", run)


def one_run(h: PgHarness, tmp: Path, run: int) -> None:
    tmp.mkdir()
    tables: dict[str, PgRun] = {}
    procs: dict[str, Popen[bytes]] = {}
    writers: list[Writer] = []
    for i, mode in enumerate(MODES):
        r = tables[mode] = pg_run(h, tmp, run * 10 + i, ROWS)
        r.cfg["event.processing.failure.handling.mode"] = mode
        r.cfg["errors.deadletterqueue.topic.name"] = f"{r.cfg['name']}-dlq"
        procs[mode] = spawn(r.tmp, "postgres", h.kafka, r.cfg, producer=LIMIT)
        writers.append(r.writer(ROWS, 41 + run * 10 + i))
        writers[-1].special_after = 10
    try:
        for w in writers:
            w.start()
        deadline = time.monotonic() + 60
        while not all(r.streaming() for r in tables.values()):  # the poison is streamed
            for p in procs.values():
                process_alive(p)()
            assert time.monotonic() < deadline, "the snapshots did not finish"
            time.sleep(0.1)
        time.sleep(0.5)
        for r in tables.values():  # random text: as large after compression
            h.sql(
                f"INSERT INTO {r.table} SELECT {POISON}, string_agg(md5(g::text), ''), 0 "
                "FROM generate_series(1, 28000) g"
            )
        time.sleep(0.5)
        for w in writers:
            w.stop()
        for r in tables.values():
            h.sql(f"INSERT INTO {r.table} VALUES ({SENTINEL}, 'end', 0)")

        err = failed_child(procs.pop("fail"))
        assert "MSG_SIZE_TOO_LARGE" in err and "max.request.size" in err, err[-3000:]
        fail = tables["fail"]
        stored = fail.stored()
        procs["fail"] = spawn(fail.tmp, "postgres", h.kafka, fail.cfg)  # the default limit
        for mode, r in tables.items():
            wait_for_sentinel(h.kafka, r.topic, process_alive(procs[mode]))
        logs = {mode: stop_child(procs.pop(mode)) for mode in MODES}
    finally:
        for w in writers:
            w.stop_event.set()
        for p in procs.values():
            p.kill()
    # The failed run stored no offset at or past the poison: the restart resumed from the
    # stored offset and delivered the poison (a stored offset at or past it would skip it).
    # Comparing LSNs would not say this: transactions interleave in the WAL, so an event of a
    # transaction committed before the poison's can have a higher LSN than the poison's own.
    [poison] = [e for e in read_topic(h.kafka, fail.topic) if e.key == {"id": POISON}]
    assert stored is not None and stored.get("txId") != poison.value["source"]["txId"], stored
    assert "skipping event that failed conversion" in logs["warn"], logs["warn"][-3000:]
    assert "MSG_SIZE_TOO_LARGE" not in logs["skip"], logs["skip"][-3000:]
    dlq = tables["dead-letter"]
    [dead] = read_topic(h.kafka, f"{dlq.cfg['name']}-dlq", min_count=1, settle=0.5)
    assert dead.value["event"]["topic"] == dlq.topic, dead.value
    assert f'"id":{POISON}' in dead.value["event"]["key"], dead.value
    assert dead.value["event"]["size"] > LIMIT["max.request.size"], dead.value
    for mode in MODES:  # the results table in this order
        RESULTS.setdefault(scenario(mode), Result(scenario(mode)))
    with ThreadPoolExecutor(len(tables)) as pool:  # verify waits on Kafka: overlap them
        checks = [pool.submit(verdict, h, mode, r) for mode, r in tables.items()]
    for c in checks:
        c.result()


def scenario(mode: str) -> str:
    return f"PostgreSQL: oversize poison event, mode {mode}"


def verdict(h: PgHarness, mode: str, r: PgRun) -> None:
    check(
        scenario(mode),
        verify_side(r.cfg),
        h.kafka,
        r.qualified,
        r.topic,
        missing=[] if mode == "fail" else [POISON],
    )
    h.drop_slot(r.cfg)
