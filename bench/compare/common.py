"""Shared plumbing for the side-by-side harness: the local stack, processes, /proc and Kafka.

Every contender (tidemark, Debezium Server, the physical limits) is a separate OS process, so
its CPU and memory are read the same way for all of them: from ``/proc/<pid>``. Completion
and timing are read from Kafka itself (topic end offsets and ``LogAppendTime`` timestamps),
so no contender reports its own numbers.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psycopg
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchError(RuntimeError):
    """A run that cannot produce trustworthy numbers (wrong count, parity failure, crash)."""


# -- the local stack -------------------------------------------------------------------------
def stack_env(databases: Sequence[str] = ("postgres",)) -> dict[str, str]:
    """Addresses of the shared local stack (``databases`` plus Kafka); a service is started
    if it is not running (never stopped: other engineers' tests use it too)."""
    from worker.dev import Stack

    stack = Stack()
    names = [*databases, "kafka"]
    for name in names:
        stack[name].start()
    return stack.env(names)


def pg_dsn(env: Mapping[str, str], db: str) -> str:
    return (
        f"host={env['TIDEMARK_PG_HOST']} port={env['TIDEMARK_PG_PORT']} "
        f"user={env['TIDEMARK_PG_USER']} password={env['TIDEMARK_PG_PASSWORD']} dbname={db}"
    )


def pg_connect(env: Mapping[str, str], db: str) -> psycopg.Connection[Any]:
    return psycopg.connect(pg_dsn(env, db), autocommit=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def short_id() -> str:
    return uuid.uuid4().hex[:6]


# -- processes ---------------------------------------------------------------------------------
_LIVE: dict[int, subprocess.Popen[bytes]] = {}


def _kill_all_at_exit() -> None:
    for proc in list(_LIVE.values()):
        stop_process(proc, timeout=5)


atexit.register(_kill_all_at_exit)


def spawn(
    cmd: Sequence[str],
    *,
    cwd: Path | None = None,
    log: IO[bytes] | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a contender in its own process group, so stopping it also stops anything it
    started, and register it so an interrupted harness never leaves a JVM behind."""
    proc = subprocess.Popen(
        list(cmd),
        cwd=cwd,
        stdout=log if log is not None else subprocess.DEVNULL,
        stderr=subprocess.STDOUT if log is not None else subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    _LIVE[proc.pid] = proc
    return proc


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int | None:
    """SIGTERM to the process group (graceful: Quarkus and the engine both shut down
    cleanly on it), then SIGKILL if it does not exit in time."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    _LIVE.pop(proc.pid, None)
    return proc.returncode


def install_signal_handlers() -> None:
    """Turn SIGTERM/SIGHUP into SystemExit so the atexit hook runs and kills contenders.
    Called by the command line only: a library import must not change a host's signals."""

    def _exit(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError):  # not in the main thread
            signal.signal(sig, _exit)


@dataclass
class ProcSample:
    """CPU-seconds (user+sys, all threads) and memory of one process at one instant."""

    t: float
    cpu_s: float
    rss_mb: float
    hwm_mb: float


def proc_sample(pid: int) -> ProcSample | None:
    """Read /proc/<pid>/stat and /status; None once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
        with open(f"/proc/{pid}/status") as fh:
            status = fh.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    fields = stat[stat.rindex(")") + 2 :].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
    rss = hwm = 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
        elif line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) / 1024
    return ProcSample(time.time(), cpu, rss, hwm)


def loadavg() -> float:
    return os.getloadavg()[0]


# -- Kafka ---------------------------------------------------------------------------------------
class Kafka:
    """Admin and read-side helpers against the local broker (one partition per topic)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self._consumer: Consumer | None = None
        self._watermarks: Consumer | None = None

    def _new_consumer(self) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"bench-compare-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.max.bytes": 52428800,
                # A short fetch wait: reads are random-access (seek, take one message), and
                # a pending long-poll fetch would delay every following request.
                "fetch.wait.max.ms": 10,
            }
        )

    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = self._new_consumer()
        return self._consumer

    def watermarks(self) -> Consumer:
        """A consumer that is never assigned anything: end-offset queries on it are answered
        at once instead of queueing behind a fetch."""
        if self._watermarks is None:
            self._watermarks = self._new_consumer()
        return self._watermarks

    def close(self) -> None:
        for c in (self._consumer, self._watermarks):
            if c is not None:
                c.close()
        self._consumer = self._watermarks = None

    def create_topics(self, topics: Iterable[str]) -> None:
        """Topics are created before a contender starts, with ``LogAppendTime``, so every
        message carries the broker's clock at append: the end of the latency measurement
        and the first/last-event times of a drain."""
        new = [
            NewTopic(t, 1, 1, config={"message.timestamp.type": "LogAppendTime"}) for t in topics
        ]
        if not new:
            return
        for topic, fut in self.admin.create_topics(new, request_timeout=30).items():
            try:
                fut.result()
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise BenchError(f"cannot create topic {topic}: {exc}") from exc

    def delete_topics(self, topics: Iterable[str]) -> None:
        names = list(topics)
        if not names:
            return
        self.close()  # consumers that know the topics would log their disappearance
        for fut in self.admin.delete_topics(names, operation_timeout=30).values():
            with contextlib.suppress(KafkaException):
                fut.result()

    def wait_gone(self, topics: Iterable[str], timeout: float = 60.0) -> None:
        """Wait until deleted topics have left the cluster metadata: a topic re-created under
        the same name before that would silently keep the old records (the MariaDB drains
        reuse one topic prefix per contender, because it is part of the stored offset)."""
        names = set(topics)
        deadline = time.monotonic() + timeout
        while names & set(self.admin.list_topics(timeout=10).topics):
            if time.monotonic() > deadline:
                raise BenchError(f"topics still present {timeout:.0f} s after deletion: {names}")
            time.sleep(0.2)

    def end_offset(self, topic: str) -> int:
        try:
            _low, high = self.watermarks().get_watermark_offsets(
                TopicPartition(topic, 0), timeout=5, cached=False
            )
        except KafkaException:
            return 0
        return int(high)

    def scan(
        self,
        topic: str,
        start: int = 0,
        count: int | None = None,
        timeout: float = 60.0,
    ) -> Iterator[Any]:
        """Messages ``start .. start+count`` (up to the end offset when count is None), one
        at a time: a W5 topic holds hundreds of thousands of ~4 kB records, too many to
        keep."""
        end = self.end_offset(topic)
        stop = end if count is None else min(end, start + count)
        if stop <= start:
            return
        c = self.consumer()
        c.assign([TopicPartition(topic, 0, start)])
        seen = 0
        deadline = time.monotonic() + timeout
        try:
            while seen < stop - start and time.monotonic() < deadline:
                # consume() returns once it has num_messages or the timeout passed: ask
                # for at most what is missing so a short read does not wait out the timeout.
                for m in c.consume(min(10000, stop - start - seen), 1.0):
                    if m.error() is not None or (m.offset() or 0) >= stop:
                        continue
                    seen += 1
                    deadline = time.monotonic() + timeout
                    yield m
        finally:
            c.unassign()
        if seen < stop - start:
            raise BenchError(f"read {seen} of {stop - start} messages from {topic}")

    def read(
        self,
        topic: str,
        start: int = 0,
        count: int | None = None,
        timeout: float = 60.0,
    ) -> list[Any]:
        """Messages ``start .. start+count`` as a list (small ranges only)."""
        return list(self.scan(topic, start, count, timeout))

    def timestamp_at(self, topic: str, offset: int) -> float:
        """Broker append time (seconds) of the message at ``offset``."""
        msgs = self.read(topic, offset, 1)
        if not msgs:
            raise BenchError(f"no message at offset {offset} of {topic}")
        _kind, ts = msgs[0].timestamp()
        return float(ts) / 1000.0
