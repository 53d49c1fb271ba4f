"""The Cassandra connector's task in its own process, so a test can SIGKILL it.

    python -m tests.integration.cassandra_child SPEC.json

SPEC: {"config": {...}, "bootstrap": "...", "offsets": "<file>"}; SIGTERM stops gracefully.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
from typing import Any

from cdc.engine import Engine, EngineSettings
from cdc.offsets.file import FileOffsetStore
from connectors.cassandra import CassandraConnector


def main(spec_path: str) -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    with open(spec_path) as fh:
        spec: dict[str, Any] = json.load(fh)
    connector = CassandraConnector(spec["config"])
    engine = Engine(
        connector,
        connector.config,
        FileOffsetStore(spec["offsets"]),
        EngineSettings(
            producer={"bootstrap.servers": spec["bootstrap"]}, offset_flush_interval_ms=100
        ),
    )
    signal.signal(signal.SIGTERM, lambda *_: engine.stop())
    print("READY", flush=True)
    engine.run()


if __name__ == "__main__":
    main(sys.argv[1])
