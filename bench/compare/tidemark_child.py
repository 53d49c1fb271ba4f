"""The tidemark contender: a connector in the Engine, as its own OS process.

    python -m bench.compare.tidemark_child CONFIG_JSON SETTINGS_JSON

SETTINGS_JSON names the connector (``postgres``, the default, ``mysql`` or ``cassandra``) and,
optionally,
an ``offsets_file``: the MariaDB drains prime a contender, stop it and resume it from its
stored offset, which needs a file store (PostgreSQL resumes from its slot, memory suffices).

Runs until SIGTERM/SIGINT, then stops the engine gracefully (drain, flush, store offsets),
exactly like Debezium Server does on SIGTERM. It reports nothing itself: the harness reads
its CPU and memory from /proc and its output from Kafka, the same way as for the JVM.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from typing import Any

from cdc.config import Config
from cdc.engine import Engine, EngineSettings
from cdc.offsets.file import FileOffsetStore
from cdc.offsets.memory import MemoryOffsetStore
from cdc.offsets.store import OffsetStore
from cdc.spi import Connector


def _connector(kind: str, cfg: dict[str, Any]) -> tuple[Connector, Config]:
    """Imported on demand: each child loads only the connector it runs, as a deployment
    would, so its RSS does not include the other one."""
    if kind == "cassandra":
        from connectors.cassandra import CassandraConnector

        cassandra = CassandraConnector(cfg)
        return cassandra, cassandra.config
    if kind == "mysql":
        from connectors.mysql import MySqlConnector

        mysql = MySqlConnector(cfg)
        return mysql, mysql.config
    from connectors.postgres import PostgresConnector

    pg = PostgresConnector(cfg)
    return pg, pg.config


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cfg: dict[str, Any] = json.loads(args[0])
    settings: dict[str, Any] = json.loads(args[1])
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    connector, config = _connector(str(settings.get("connector", "postgres")), cfg)
    offsets_file = settings.get("offsets_file")
    store: OffsetStore = FileOffsetStore(offsets_file) if offsets_file else MemoryOffsetStore()
    engine = Engine(
        connector,
        config,
        store,
        EngineSettings(
            producer=settings["producer"],
            offset_flush_interval_ms=int(settings["offset_flush_interval_ms"]),
        ),
    )
    stop = threading.Event()

    def _on_signal(_signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    failure: list[BaseException] = []

    def _run() -> None:
        try:
            engine.run()
        except BaseException as exc:
            failure.append(exc)
        finally:
            stop.set()

    thread = threading.Thread(target=_run, name="engine")
    thread.start()
    while not stop.wait(0.5):
        pass
    engine.stop()
    thread.join(60)
    if failure:
        print(f"engine failed: {failure[0]!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
