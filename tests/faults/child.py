"""A connector task in its own process for the fault scenarios that need more than
``tests.integration``'s children: producer settings, and a SIGKILL at a DDL.

    python -m tests.faults.child SPEC.json

SPEC: ``{"kind": "postgres" | "mysql", "config": {...}, "bootstrap": "...",
"offsets": "<file>", "producer": {...} (optional, added to the producer's settings),
"kill_at_ddl": {"match": TEXT, "when": "before" | "after"} (optional, MySQL)}``. With
``kill_at_ddl`` the process SIGKILLs itself at the first DDL containing TEXT that the
connector records: just before its schema history record is written, or right after it
(the history holds the DDL; no event or offset at its position has been stored). SIGTERM stops the
engine cleanly (exit code 0); a task failure exits 1 with the traceback on stderr.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import uuid
from pathlib import Path
from subprocess import DEVNULL, PIPE, Popen
from typing import Any

from cdc.engine import Engine, EngineSettings
from cdc.offsets.file import FileOffsetStore
from cdc.spi import Connector

ROOT = Path(__file__).resolve().parents[2]


def kill_at_ddl(match: str, when: str) -> None:
    from connectors.mysql.state import TaskState

    record = TaskState.record

    def killing(self: TaskState, position: Any, database: Any, ddl_text: str, *rest: Any) -> None:
        hit = match in ddl_text
        if hit and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        record(self, position, database, ddl_text, *rest)
        if hit:
            os.kill(os.getpid(), signal.SIGKILL)

    TaskState.record = killing  # type: ignore[method-assign]


def main(spec_path: str) -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    with open(spec_path) as fh:
        spec: dict[str, Any] = json.load(fh)
    connector: Connector
    if spec["kind"] == "postgres":
        from connectors.postgres import PostgresConnector

        connector = PostgresConnector(spec["config"])
    else:
        from connectors.mysql import MySqlConnector

        connector = MySqlConnector(spec["config"])
    if spec.get("kill_at_ddl"):
        kill_at_ddl(**spec["kill_at_ddl"])
    engine = Engine(
        connector,
        connector.config,
        FileOffsetStore(spec["offsets"]),
        EngineSettings(
            producer={"bootstrap.servers": spec["bootstrap"], **spec.get("producer", {})},
            offset_flush_interval_ms=200,
        ),
    )
    signal.signal(signal.SIGTERM, lambda *_: engine.stop())
    engine.run()


def spawn(tmp: Path, kind: str, kafka: str, cfg: dict[str, Any], **extra: Any) -> Popen[bytes]:
    """Start this module on a spec in ``tmp`` (offsets in ``tmp/offsets.json``)."""
    spec = {"kind": kind, "config": cfg, "bootstrap": kafka, "offsets": str(tmp / "offsets.json")}
    path = tmp / f"spec-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({**spec, **extra}))
    return Popen(
        [sys.executable, "-m", "tests.faults.child", str(path)],
        cwd=ROOT,
        stdout=DEVNULL,
        stderr=PIPE,
    )


if __name__ == "__main__":
    main(sys.argv[1])
