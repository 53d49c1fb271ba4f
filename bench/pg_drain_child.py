"""The tidemark side of bench.pg_drain, in its own process so its CPU and RSS are its own.

Runs the PostgreSQL connector until every event up to END_LSN is acknowledged by Kafka,
then prints one JSON line: wall_s, cpu_s, peak_rss_mb, events.
"""

from __future__ import annotations

import json
import resource
import sys
import threading
import time

from cdc.engine import Engine, EngineSettings
from cdc.offsets.memory import MemoryOffsetStore
from connectors.postgres import PostgresConnector


def main() -> None:
    cfg = json.loads(sys.argv[1])
    bootstrap, end_lsn = sys.argv[2], int(sys.argv[3])
    connector = PostgresConnector(cfg)
    engine = Engine(
        connector,
        connector.config,
        MemoryOffsetStore(),
        EngineSettings(producer={"bootstrap.servers": bootstrap}, offset_flush_interval_ms=250),
    )
    t0 = time.monotonic()
    thread = threading.Thread(target=engine.run, daemon=True)
    thread.start()
    while True:
        done = engine.writer.last_committed
        if done is not None and int(done.get("flush_lsn") or 0) >= end_lsn:
            break
        if not thread.is_alive():
            raise SystemExit("engine stopped early")
        time.sleep(0.05)
    wall = time.monotonic() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    engine.stop()
    thread.join(60)
    print(
        json.dumps(
            {
                "wall_s": wall,
                "user_s": usage.ru_utime,
                "sys_s": usage.ru_stime,
                "ctx_switches": usage.ru_nvcsw + usage.ru_nivcsw,
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "peak_rss_mb": usage.ru_maxrss / 1024,
                "events": engine.metrics.records_sent,
            }
        )
    )


if __name__ == "__main__":
    main()
