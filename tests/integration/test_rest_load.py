"""Issue 20 part 6: 200 clients calling the REST API of a `tidemark run` process at once, while
a PostgreSQL connector streams to the real Kafka. The standard library's listen backlog of 5
made some of them wait for SYN retransmits (1 s, 3 s, ... up to 27 s); now every one is
answered promptly and streaming goes on."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.integration.pg_harness import read_topic
from tests.integration.test_worker_rest import Setup, WorkerProcess, ops, setup, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]
__all__ = ["setup"]  # the module-scoped fixture: its own database, role, slot and topic

CLIENTS = 200


async def one_request(port: int, start: float) -> tuple[int, float]:
    """One client on its own connection; the time from the burst's start to its response."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /connectors HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        await writer.drain()
        response = await asyncio.wait_for(reader.read(), 30)
        writer.close()
        status = int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/") else 0
    except (TimeoutError, OSError):
        status = 0
    return status, time.perf_counter() - start


def burst(port: int) -> list[tuple[int, float]]:
    """200 clients at once, from one event loop: Python client threads would queue on their
    own interpreter lock and add their wait to what is measured of the server."""

    async def run() -> list[tuple[int, float]]:
        start = time.perf_counter()
        return list(await asyncio.gather(*(one_request(port, start) for _ in range(CLIENTS))))

    return asyncio.run(run())


def test_200_concurrent_clients_are_all_answered_quickly(setup: Setup) -> None:
    s = setup
    w = WorkerProcess(s, s.yaml(), 1)
    try:
        w.wait_streaming("inv")
        rounds = [burst(s.port)]  # the first round also starts the server's threads
        s.sql("INSERT INTO customers VALUES (100, 'Load', 'l@x.org')")
        rounds += [burst(s.port), burst(s.port)]
        for out in rounds:
            assert len(out) == CLIENTS and all(status == 200 for status, _ in out), out
        latencies = sorted(d for out in rounds[1:] for _, d in out)
        p50 = latencies[len(latencies) // 2]
        p99 = latencies[int(len(latencies) * 0.99) - 1]
        print(
            f"\n{CLIENTS} concurrent GET /connectors: "
            f"p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms"
        )
        # A SYN retransmit costs at least 1 s. The target on an idle machine is p99 < 100 ms;
        # the bound leaves room for a shared CI machine running the 200 clients too.
        assert p99 < 0.9, f"p99 {p99:.3f} s"
        wait_for(
            lambda: ("c", 100) in ops(read_topic(s.kafka, s.topic, settle=0.3)),
            30,
            "the insert made during the load",
        )
        assert w.task_state("inv") == "RUNNING" and w.streaming("inv")
    finally:
        w.kill()
