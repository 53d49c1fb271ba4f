"""What every fault scenario shares: the writers, the check through ``tidemark verify``'s
library API, the duplicate count, and the results table.

A scenario runs a :class:`Writer` against the real database (inserts, updates, deletes, a
primary-key change, a large value) while it injects its fault, lets capture finish (a sentinel
row reaches the topic), and then calls :func:`check`: verify compares the table with the last
event per key of its topic and must find nothing missing, extra or stale. Duplicates (events a
restart sent again) are counted, not failed: at-least-once delivery allows them after the last
committed position.
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc.testing.kafka_reader import read_topic
from cdc.verify.compare import Options
from cdc.verify.contract import SourceSide
from cdc.verify.kafka_target import KafkaTarget
from worker.verify_cli import verify

#: the size of the large value every writer stores once (under Kafka's 1 MB record limit)
LARGE = 300_000
SENTINEL = 9_000_000


@dataclass
class Result:
    scenario: str
    runs: int = 0
    events: int = 0
    missing: int = 0
    extra: int = 0
    stale: int = 0
    duplicates: int = 0
    #: differences the scenario expects (each named by key and asserted), e.g. a poison event
    expected: int = 0


RESULTS: dict[str, Result] = {}


def results_table() -> str:
    lines = [
        "| scenario | runs | events | missing | extra | stale | duplicates | expected |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in RESULTS.values():
        lines.append(
            f"| {r.scenario} | {r.runs} | {r.events} | {r.missing} | {r.extra} | {r.stale} "
            f"| {r.duplicates} | {r.expected} |"
        )
    return "\n".join(lines)


class Writer(threading.Thread):
    """Random inserts, updates and deletes on ``table (id int PRIMARY KEY, v text, n int)``
    whose ids run 1..``first_id``; after ``special_after`` steps, once each: a primary-key
    change (to ``moved_to``) and a large value. ``connect()`` opens an autocommit DB-API
    connection."""

    def __init__(
        self,
        connect: Callable[[], Any],
        table: str,
        first_id: int,
        seed: int,
        moved_to: int = SENTINEL - 1,
    ) -> None:
        super().__init__(daemon=True)
        self.moved_to = moved_to
        self.connect = connect
        self.table = table
        self.next_id = first_id
        self.rng = random.Random(seed)
        self.stop_event = threading.Event()
        self.ops = 0
        self.error: BaseException | None = None
        self.special_after = 40

    def run(self) -> None:
        try:
            conn = self.connect()
            try:
                cur = conn.cursor()
                while not self.stop_event.is_set():
                    self.step(cur)
                    self.ops += 1
                    time.sleep(0.01)
            finally:
                conn.close()
        except BaseException as exc:  # surfaced by stop()
            self.error = exc

    def step(self, cur: Any) -> None:
        t = self.table
        r = self.rng.random()
        target = self.rng.randrange(1, self.next_id)
        if self.ops in (self.special_after, self.special_after + 1):
            cur.execute(f"SELECT min(id) FROM {t} WHERE id >= {target}")
            target = (cur.fetchone() or [None])[0] or 1
        if self.ops == self.special_after:
            cur.execute(f"UPDATE {t} SET id = {self.moved_to} WHERE id = {target}")
            assert cur.rowcount == 1, "the primary-key change changed no row"
        elif self.ops == self.special_after + 1:
            cur.execute(f"UPDATE {t} SET v = repeat('x', {LARGE}) WHERE id = {target}")
            assert cur.rowcount == 1, "the large value changed no row"
        elif r < 0.35:
            self.next_id += 1
            cur.execute(f"INSERT INTO {t} (id, v, n) VALUES ({self.next_id}, 'w{self.next_id}', 0)")
        elif r < 0.85:
            cur.execute(f"UPDATE {t} SET n = n + 1, v = 'u{self.ops}' WHERE id = {target}")
        else:
            cur.execute(f"DELETE FROM {t} WHERE id = {target}")

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)
        assert self.error is None, self.error
        assert self.ops > self.special_after + 1, f"only {self.ops} writes"


class ReconnectingWriter(Writer):
    """The writer for a scenario that takes the database down: a connection lost (``lost``:
    the driver's errors for it) is opened again, until stopped. A statement cut by the outage
    may or may not have committed; verify compares with the table as it is at the end."""

    def __init__(self, lost: tuple[type[BaseException], ...], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lost = lost
        #: connections lost to the outage: a scenario asserts its fault was seen
        self.reconnects = 0

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                conn = self.connect()
            except self.lost:
                time.sleep(0.2)  # still down
                continue
            try:
                cur = conn.cursor()
                while not self.stop_event.is_set():
                    self.step(cur)
                    self.ops += 1
                    time.sleep(0.01)
            except self.lost:
                self.reconnects += 1
                continue
            except BaseException as exc:  # surfaced by stop()
                self.error = exc
                return
            finally:
                with contextlib.suppress(Exception):
                    conn.close()


def wait_for_sentinel(
    kafka: str, topic: str, alive: Callable[[], object], timeout: float = 180
) -> None:
    """Until the sentinel row's event is in the topic; ``alive`` raises if capture died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive()
        if any(e.key == {"id": SENTINEL} for e in read_topic(kafka, topic, settle=0.5)):
            return
    raise AssertionError(f"the sentinel never reached {topic}")


def process_alive(proc: subprocess.Popen[bytes]) -> Callable[[], None]:
    """For :func:`wait_for_sentinel`: raises with the process's stderr once it has exited."""

    def alive() -> None:
        if proc.poll() is not None:
            raise AssertionError(proc.communicate()[1].decode()[-3000:])

    return alive


def duplicates(kafka: str, topic: str) -> tuple[int, int]:
    """(events, duplicates): an event is a duplicate when an earlier one has the same key,
    operation, row images and source position (a snapshot read: the same key and row)."""
    seen: set[bytes] = set()
    events = read_topic(kafka, topic, settle=0.5)
    dups = 0
    for e in events:
        if e.value is None:
            continue
        src = e.value.get("source") or {}
        where = None if e.op == "r" else [src.get(k) for k in ("lsn", "file", "pos", "row")]
        ident = repr((e.key, e.op, e.before, e.after, where)).encode()
        if ident in seen:
            dups += 1
        seen.add(ident)
    return len(events), dups


def check(
    scenario: str,
    source: SourceSide,
    kafka: str,
    table: str,
    topic: str,
    *,
    missing: Iterable[int] = (),
    extra: Iterable[int] = (),
) -> Result:
    """verify's verdict on one table, recorded in the results table. Asserted: nothing stale,
    and exactly the ``missing`` / ``extra`` keys (ids) the scenario expects (none by default).
    With differences expected, one re-check (each costs verify's 1 s end-of-topic poll):
    capture has finished, the sentinel arrived."""
    want = (sorted((str(k),) for k in missing), sorted((str(k),) for k in extra))
    rounds = 1 if want != ([], []) else 20
    target = KafkaTarget({"bootstrap.servers": kafka}, processes=1)
    try:
        (result,) = verify(
            source,
            target,
            [table],
            Options(chunk_rows=500, recheck_rounds=rounds, recheck_wait=0.5),
        )
    finally:
        target.close()
        source.close()
    events, dups = duplicates(kafka, topic)
    r = RESULTS.setdefault(scenario, Result(scenario))
    r.runs += 1
    r.events += events
    r.missing += len(result.missing)
    r.extra += len(result.extra)
    r.stale += len(result.stale)
    r.duplicates += dups
    r.expected += len(want[0]) + len(want[1])
    assert result.error is None, result.error
    found = (sorted(map(tuple, result.missing)), sorted(map(tuple, result.extra)))
    assert (found, result.stale) == (want, []), scenario
    assert result.target_rows == result.source_rows - len(want[0]) + len(want[1])
    assert result.source_rows > 0
    return r


def stop_child(proc: subprocess.Popen[bytes]) -> str:
    """SIGTERM a task process; it must exit cleanly. Returns its stderr."""
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-3000:]
    return err.decode()


def failed_child(proc: subprocess.Popen[bytes], timeout: float = 60) -> str:
    """A task process that must stop by itself with an error (not a signal); its stderr."""
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"the task did not fail: {err.decode()[-3000:]}") from None
    assert proc.returncode not in (0, None) and proc.returncode > 0, proc.returncode
    return err.decode()


def stored_offset(path: Path) -> dict[str, Any] | None:
    """The (single) offset a task process stored in its offsets file; None before any."""
    if not path.exists():
        return None
    entries = json.loads(path.read_text())["offsets"]
    return dict(entries[0]["offset"]) if entries else None
